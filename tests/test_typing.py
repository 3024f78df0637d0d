"""The public API is annotated: every public function, and every public method of a public
class, annotates each parameter and its return (mypy checks the annotations themselves in
CI; this test says which callables must have them, so that a new one cannot slip by)."""
import importlib
import inspect

import pytest

# The modules of the public API; of each, the names in its __all__ that tracked defines
# (tracked.numpy and tracked.scipy.* re-export NumPy's and SciPy's own names: not ours,
# also where tracked.numpy wraps them to accept lists: their __wrapped__ is NumPy's;
# tracked.numpy.linalg, .fft and .random hold only such names).
PUBLIC = ['tracked', 'tracked.nn', 'tracked.optimise', 'tracked.tree_util', 'tracked.numpy',
          'tracked.autograd', 'tracked.autograd.extend', 'tracked.autograd.test_util',
          'tracked.autograd.misc.optimizers', 'tracked.autograd.scipy.signal',
          'tracked.testing', 'tracked.distributed', 'tracked.scipy.special',
          'tracked.scipy.stats', 'tracked.scipy.linalg', 'tracked.scipy.signal',
          'tracked.scipy.integrate', 'tracked.scipy.sparse', 'tracked.scipy.sparse.linalg']
OPTIONAL = {'tracked.distributed': 'dask', 'tracked.scipy.special': 'scipy',
            'tracked.scipy.stats': 'scipy', 'tracked.scipy.linalg': 'scipy',
            'tracked.scipy.signal': 'scipy', 'tracked.scipy.integrate': 'scipy',
            'tracked.scipy.sparse': 'scipy', 'tracked.scipy.sparse.linalg': 'scipy'}
# Methods of a public class that are part of its interface besides the public names.
DUNDERS = ('__init__', '__call__')


def _ours(obj):
    return (getattr(obj, '__module__', None) or '').startswith('tracked')


def _missing(fn, where, method):
    """The parameters of ``fn`` (and 'return') without an annotation."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    params = list(sig.parameters.values())
    if method and params and params[0].name in ('self', 'cls'):
        params = params[1:]
    out = [f'{where}({p.name})' for p in params if p.annotation is inspect.Parameter.empty]
    if sig.return_annotation is inspect.Signature.empty:
        out.append(f'{where} -> ?')
    return out


def _class_members(cls):
    """(name, function, is_method) for the public interface tracked defines on ``cls``."""
    seen = set()
    for klass in cls.__mro__:
        if not _ours(klass):
            continue
        for name, attr in vars(klass).items():
            if name in seen or (name.startswith('_') and name not in DUNDERS):
                continue
            seen.add(name)
            if isinstance(attr, staticmethod):
                yield name, attr.__func__, False
            elif isinstance(attr, classmethod):
                yield name, attr.__func__, True
            elif isinstance(attr, property):
                if attr.fget is not None:
                    yield name, attr.fget, True
            elif inspect.isfunction(attr):
                yield name, attr, True


def public_callables(module_name):
    module = importlib.import_module(module_name)
    names = getattr(module, '__all__', None) or [n for n in vars(module)
                                                 if not n.startswith('_')]
    for name in names:
        obj = getattr(module, name)
        where = f'{module_name}.{name}'
        if inspect.ismodule(obj):
            continue
        if inspect.isclass(obj) or not callable(obj) and _ours(type(obj)):
            cls = obj if inspect.isclass(obj) else type(obj)
            if _ours(cls):
                for mname, fn, method in _class_members(cls):
                    yield f'{where}.{mname}', fn, method
        elif callable(obj) and _ours(obj):
            fn = inspect.unwrap(obj) if inspect.isfunction(obj) else obj
            if not _ours(fn):                   # NumPy's, accepting lists (tracked.numpy)
                continue
            if inspect.isfunction(fn) or inspect.ismethod(fn):
                yield where, fn, False
            elif _ours(type(obj)):             # a callable instance: its class's interface
                for mname, fn, method in _class_members(type(obj)):
                    yield f'{where}.{mname}', fn, method


@pytest.mark.parametrize('module_name', PUBLIC)
def test_public_api_is_annotated(module_name):
    if module_name in OPTIONAL:
        pytest.importorskip(OPTIONAL[module_name])
    found = list(public_callables(module_name))
    assert found, f'{module_name}: no public callables found (is the walk broken?)'
    missing = [m for where, fn, method in found for m in _missing(fn, where, method)]
    assert missing == [], f'{len(missing)} annotations missing: {missing}'


def test_the_typed_user_program_runs(capsys):
    # tests/typecheck/user_program.py is type-checked by CI's mypy run: it must also run
    import runpy
    import pathlib
    runpy.run_path(str(pathlib.Path(__file__).parent / 'typecheck' / 'user_program.py'),
                   run_name='__main__')
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == 'True' and 'Chain(Dense(2 => 3), Dense(3 => 1))' in out[-3]


def test_the_walk_sees_methods_and_module_functions():
    found = {where for m in ('tracked', 'tracked.nn', 'tracked.numpy', 'tracked.autograd')
             for where, _, _ in public_callables(m)}
    assert {'tracked.gradient', 'tracked.TrackedArray.back', 'tracked.TrackedArray.grad',
            'tracked.GradientTape.gradient', 'tracked.Adam.__init__', 'tracked.nn.relu',
            'tracked.nn.Dense.__call__', 'tracked.numpy.array', 'tracked.numpy.stack',
            'tracked.autograd.grad'} <= found
    assert 'tracked.numpy.sum' not in found             # NumPy's, wrapped to accept lists
