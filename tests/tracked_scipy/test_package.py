"""SciPy is an optional extra: tracked imports without it, ``tracked.scipy`` then names
the extra; with it, ``tracked.scipy`` mirrors SciPy's layout."""
import subprocess
import sys
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

WITHOUT_SCIPY = '''
import sys
sys.modules['scipy'] = None            # as if SciPy were not installed
import numpy as np
import tracked as tr
assert tr.gradient(lambda x: np.sum(np.sin(x)), np.zeros(2))[0].tolist() == [1.0, 1.0]
for name in ('tracked.scipy', 'tracked.scipy.sparse'):
    try:
        __import__(name)
    except ImportError as e:
        print(e)
'''


def test_tracked_imports_without_scipy_and_tracked_scipy_names_the_extra():
    out = subprocess.run([sys.executable, '-c', WITHOUT_SCIPY], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.count("pip install 'tracked[scipy]'") == 2


def test_layout_mirrors_scipy():
    pytest.importorskip('scipy')
    import scipy.optimize
    import tracked.scipy as tsc
    import scipy.sparse.csgraph
    from tracked.scipy import special, stats, linalg, signal, integrate, sparse   # noqa: F401
    assert tsc.optimize is scipy.optimize
    assert {'special', 'stats', 'linalg', 'signal', 'integrate', 'sparse'} <= set(dir(tsc))
    assert sparse.linalg.spsolve.__module__ == 'tracked.scipy.sparse.linalg'
    assert sparse.csgraph is scipy.sparse.csgraph and sparse.eye_array is scipy.sparse.eye_array
    with pytest.raises(AttributeError):
        tsc.no_such_subpackage


@pytest.mark.parametrize('name', ['special', 'stats', 'linalg', 'signal', 'integrate', 'sparse',
                                  'sparse.matrix', 'sparse.linalg'])
def test_doctests(name):
    import doctest
    import importlib
    pytest.importorskip('scipy')
    result = doctest.testmod(importlib.import_module(f'tracked.scipy.{name}'),
                             optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0
