"""Every Python example on the documentation site's pages runs as a reader would paste it.

The blocks of one page run in order in one namespace (a page builds on its earlier
examples).  Code in ```py fences (other libraries' code, shown for comparison) is not run,
nor are the developer pages (docs/dev/), whose blocks are excerpts of the library's source.
"""
import pathlib
import re

import pytest

DOCS = pathlib.Path(__file__).resolve().parent.parent / 'docs'
PAGES = sorted(p for p in DOCS.rglob('*.md') if re.search(r'```python\n', p.read_text())
               and p.relative_to(DOCS).parts[0] != 'dev')


def test_pages_have_examples():
    names = {p.relative_to(DOCS).as_posix() for p in PAGES}
    assert {'getting-started.md', 'guide/convenience.md', 'coming-from.md'} <= names


@pytest.mark.parametrize('page', PAGES, ids=[p.relative_to(DOCS).as_posix() for p in PAGES])
def test_page_examples_run(page, capsys):
    namespace = {'__name__': 'docs_example'}
    for i, block in enumerate(re.findall(r'```python\n(.*?)```', page.read_text(), re.S)):
        for extra, module in (('scipy', 'scipy'), ('dask', 'dask'), ('distributed', 'dask')):
            if re.search(rf'^\s*(import|from) [\w.]*\b{extra}\b', block, re.M):
                pytest.importorskip(module)     # an extra the floors' run does not install
        exec(compile(block, f'{page.relative_to(DOCS)} example {i + 1}', 'exec'), namespace)
