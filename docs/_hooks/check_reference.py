"""MkDocs hook: every public name has a docstring and an entry in the API reference, so a
new public name without either fails the strict build.

Public names are ``tracked.__all__``, the ``__all__`` of the public submodules that are
not re-exported at the top level (``tracked.autograd``, ``tracked.distributed``,
``tracked.scipy.*``), and the functions ``tracked.numpy`` defines itself (its other
names are NumPy's own objects).
A function or class needs a ``::: module.NAME`` entry in docs/reference/; any other
object (a distribution of ``tracked.scipy.stats``, ``tracked.numpy.r_``, a re-exported
ufunc) cannot carry a docstring of its own, and must be named in the text of a
reference page instead (``tracked.scipy.stats.norm``, or ``norm`` in a line naming its
module).  A submodule whose optional dependency is missing (SciPy, Dask) is skipped with
an info message: CI installs both.
"""
import importlib
import inspect
import logging
import pathlib
import re
import types

log = logging.getLogger('mkdocs.hooks.check_reference')

SUBMODULES = ('tracked.autograd', 'tracked.autograd.extend', 'tracked.autograd.test_util',
              'tracked.autograd.misc.flatten', 'tracked.autograd.misc.optimizers',
              'tracked.autograd.scipy.signal', 'tracked.distributed', 'tracked.scipy.special',
              'tracked.scipy.stats', 'tracked.scipy.linalg', 'tracked.scipy.signal',
              'tracked.scipy.integrate', 'tracked.scipy.sparse', 'tracked.scipy.sparse.linalg')
CONTAINERS = ('tracked.numpy', 'tracked.scipy') + SUBMODULES   # documented as modules too


def _own_numpy_names():
    """The names tracked.numpy defines itself, rather than taking NumPy's object (NumPy's
    functions that it only retries with lists made arrays are NumPy's, ``__wrapped__``:
    the module's docstring documents them together)."""
    import numpy
    tnp = importlib.import_module('tracked.numpy')
    own = set(tnp.__all__) | {'r_', 'c_'}
    return sorted(n for n in own if getattr(tnp, n) is not getattr(numpy, n, None)
                  and getattr(getattr(tnp, n), '__wrapped__', None) is not getattr(numpy, n, None)
                  and not isinstance(getattr(tnp, n), types.ModuleType))


def public_names():
    """``{qualified name: object}`` of every public name that needs a reference entry."""
    import tracked
    names = {f'tracked.{n}': getattr(tracked, n) for n in tracked.__all__}
    tnp = importlib.import_module('tracked.numpy')
    names.update({f'tracked.numpy.{n}': getattr(tnp, n) for n in _own_numpy_names()})
    for module in SUBMODULES:
        try:
            mod = importlib.import_module(module)
        except ImportError as e:
            log.info(f'{module} not checked: {e}')
            continue
        names.update({f'{module}.{n}': getattr(mod, n) for n in mod.__all__})
    return names


def on_pre_build(config):
    reference = pathlib.Path(config['docs_dir']) / 'reference'
    text = '\n'.join(page.read_text() for page in sorted(reference.glob('*.md')))
    entries = set(re.findall(r'^::: (tracked[\w.]*)', text, re.M))
    names = public_names()
    for name, obj in names.items():
        module, _, short = name.rpartition('.')
        top = module == 'tracked'           # tracked.__all__: modules (tr.nn) included
        if top or inspect.isfunction(obj) or inspect.isclass(obj):
            if name not in entries:
                log.warning(f'{name} is public but has no "::: {name}" entry in docs/reference/')
            if not isinstance(obj, types.ModuleType) and not inspect.getdoc(obj):
                log.warning(f'{name} has no docstring')
        elif name not in text and not re.search(
                rf'{re.escape(module)}\b.*`{re.escape(short)}`', text):
            log.warning(f'{name} is public but docs/reference/ never names it')
    known = set(names) | set(CONTAINERS)
    for name in sorted(entries - known):
        log.warning(f'docs/reference/ documents {name}, which is not a public name '
                    f'(tracked.__all__, a public submodule\'s __all__, tracked.numpy\'s own)')
