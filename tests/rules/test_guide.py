"""The rule-writing guide (docs/dev/rules.md) quotes the library: each excerpt stays true.

An excerpt is a code block titled with its source, ``python title="path"`` after the
fence; its parts (separated by lines ``# ...``) must appear verbatim, in order, in that
file.
"""
import pathlib
import re

import numpy as np
import pytest

from tracked import registry

ROOT = pathlib.Path(__file__).resolve().parents[2]
GUIDE = ROOT / 'docs' / 'dev' / 'rules.md'
EXCERPT = re.compile(r'```python title="([^"]+)"\n(.*?)```', re.S)


def excerpts(text):
    """``(path, [part, ...])`` for each excerpt of the guide's ``text``."""
    return [(path, [p.strip('\n') for p in re.split(r'^# \.\.\.$', body, flags=re.M)])
            for path, body in EXCERPT.findall(text)]


def missing_parts(path, parts):
    """The parts of an excerpt that do not appear, in order, in ``path`` (under the root)."""
    source = (ROOT / path).read_text()
    missing, start = [], 0
    for part in parts:
        k = source.find(part, start)
        if k < 0:
            missing.append(part)
        else:
            start = k + len(part)
    return missing


EXCERPTS = excerpts(GUIDE.read_text())


@pytest.mark.parametrize('path, parts', EXCERPTS,
                         ids=[f'{n}-{path}' for n, (path, _) in enumerate(EXCERPTS)])
def test_excerpt_is_verbatim(path, parts):
    missing = missing_parts(path, parts)
    assert not missing, (f'docs/dev/rules.md quotes {path}, which no longer reads so: '
                         f'{missing[0][:200]!r}; copy the code again')


def test_every_form_has_an_excerpt():
    code = '\n'.join('\n'.join(parts) for path, parts in EXCERPTS if path.startswith('tracked/'))
    for form in ('defpartials(', 'defvjp(', 'multi=True', 'defcomposite(', '= Primitive(',
                 'apply(', "linear='joint'", 'jvp=', 'batched=', 'kernel='):
        assert form in code, f'docs/dev/rules.md has no excerpt with {form}'
    tests = '\n'.join('\n'.join(parts) for path, parts in EXCERPTS if path.startswith('tests/'))
    for form in ('case(', 'const(', 'arg(', 'covers=', 'dtype=C'):
        assert form in tests, f'docs/dev/rules.md has no test excerpt with {form}'


def test_excerpts_show_what_the_guide_says():
    # the forms the guide names for its examples are the registered ones
    assert isinstance(registry.RULES[np.linalg.eigh], registry.Primitive)
    assert registry.RULES[np.linalg.eigh].multi
    assert not isinstance(registry.RULES[np.linalg.svd], registry.Primitive)    # composite
    assert not isinstance(registry.RULES[np.fliplr], registry.Primitive)
    assert registry.RULES[np.sin].partials is not None


def test_a_changed_source_is_reported():
    absent = 'import ' + 'absent_module'
    text = ('```python title="tracked/registry.py"\nimport dis\n# ...\n'
            'import math\n```\n\n```python title="tracked/registry.py"\n'
            f'{absent}\n```\n')
    (path, good), (_, bad) = excerpts(text)
    assert good == ['import dis', 'import math']
    assert missing_parts(path, good) == []
    assert missing_parts(path, bad) == [absent]
    assert missing_parts(path, ['import math', 'import dis']) == ['import dis']  # order
