"""MkDocs hook: every name in ``tracked.__all__`` has a docstring and an entry in the API
reference (``::: tracked.NAME`` in docs/reference/), so a new public name without
either fails the strict build."""
import inspect
import logging
import pathlib
import re
import types

log = logging.getLogger('mkdocs.hooks.check_reference')


def on_pre_build(config):
    import tracked
    reference = pathlib.Path(config['docs_dir']) / 'reference'
    documented = set()
    for page in reference.glob('*.md'):
        documented |= set(re.findall(r'^::: tracked\.([\w.]+)', page.read_text(), re.M))
    for name in tracked.__all__:
        obj = getattr(tracked, name)
        if name not in documented:
            log.warning(f'tracked.{name} is public (in __all__) but has no "::: tracked.{name}" '
                        f'entry in docs/reference/')
        if not isinstance(obj, types.ModuleType) and not inspect.getdoc(obj):
            log.warning(f'tracked.{name} has no docstring')
    for name in documented - set(tracked.__all__):
        if name.split('.')[0] not in tracked.__all__:
            log.warning(f'docs/reference/ documents tracked.{name}, which is not in tracked.__all__')
