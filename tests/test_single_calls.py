"""Single calls that gave a wrong number or a None instead of an error (issue 23, item 3),
each with the issue's own example.  The matrix-function and emath cases live with their
rules (tests/rules/test_scipy_linalg.py, test_elementwise.py), the losses' with the
losses (tests/test_nn.py)."""
import re

import numpy as np
import pytest

import tracked as tr
from tracked.forward import Dual, DualLevel

X = np.array([1.0, 2.0])


# --------------------------------------------------------------------------
# .item() and .tolist() refuse as float() does
# --------------------------------------------------------------------------

@pytest.mark.parametrize('f', [lambda x: np.sum(x ** 2).item(), lambda x: x.tolist(),
                               lambda x: float(np.sum(x ** 2))],
                         ids=['item', 'tolist', 'float'])
def test_item_and_tolist_of_a_tracked_value_refuse(f):
    with pytest.raises(TypeError, match=r'of a tracked value would drop its gradient.*tr\.data'):
        tr.gradient(f, X)                   # was (None,) for item and tolist


@pytest.mark.parametrize('f', [lambda x: np.sum(x ** 2).item(), lambda x: x.tolist()],
                         ids=['item', 'tolist'])
def test_item_and_tolist_of_a_dual_refuse(f):
    with pytest.raises(TypeError, match=r'tr\.data'):
        tr.jvp(f, (X,), (X,))
    with pytest.raises(TypeError, match=r'tr\.data'):
        tr.jacobian(f, X, mode='forward')


def test_item_inside_a_hessian_refuses():
    with pytest.raises(TypeError, match=r'tr\.data'):
        tr.hessian(lambda x: np.sum(x) * np.sum(x).item(), X)


def test_item_of_an_integer_argument_is_its_value():
    # a differentiated int is a size or an index in every Python use, .item() too
    assert tr.gradient(lambda x, n: np.sum(x[:n.item()]), X, 1) == (pytest.approx([1.0, 0.0]),
                                                                    None)


# --------------------------------------------------------------------------
# tr.grad(f): JAX's spelling refuses instead of returning None
# --------------------------------------------------------------------------

def _loss(x):
    return np.sum((x - 1.0) ** 2)


@pytest.mark.parametrize('f', [_loss, lambda x: np.sum(x * x), np.sin, np.sum,
                               tr.Dense(2, 3).__call__])
def test_grad_of_a_function_names_the_fixes(f):
    with pytest.raises(TypeError, match=r'got a function.*tr\.gradient\(f, x\).*'
                                        r'lambda x: tr\.gradient\(f, x\)\[0\]'):
        tr.grad(f)


def test_the_fix_gives_scipy_minimize_the_gradient():
    optimize = pytest.importorskip('scipy.optimize')
    with pytest.raises(TypeError, match='got a function'):
        optimize.minimize(_loss, np.zeros(2), jac=tr.grad(_loss))   # fell back to FD
    res = optimize.minimize(_loss, np.zeros(2), jac=lambda x: tr.gradient(_loss, x)[0])
    np.testing.assert_allclose(res.x, [1.0, 1.0], atol=1e-6)
    assert res.nfev < 10                  # gradients, not finite differences (3 vs 9+)


def test_grad_of_a_callable_model_is_its_gradient_tree():
    model = tr.fmap(tr.param, tr.Dense(np.ones((1, 2)), np.zeros(1)))
    tr.back(np.sum(model(X)))
    np.testing.assert_array_equal(tr.grad(model).weight, [[1.0, 2.0]])


# --------------------------------------------------------------------------
# Object arrays as arguments raise (the README's "Unusual arrays")
# --------------------------------------------------------------------------

OBJECTS = np.array([1.0, 2.0], dtype=object)


def _sumsq(x):
    return np.sum(x * x)


@pytest.mark.parametrize('call', [
    lambda: tr.gradient(_sumsq, OBJECTS),                      # was (None,)
    lambda: tr.withgradient(_sumsq, OBJECTS),
    lambda: tr.pullback(_sumsq, OBJECTS),
    lambda: tr.jacobian(lambda x: x * x, OBJECTS),
    lambda: tr.jvp(_sumsq, (OBJECTS,), (np.ones(2),)),
    lambda: tr.hessian(_sumsq, OBJECTS),                       # was None
    lambda: tr.param(OBJECTS),
    lambda: tr.gradient(lambda m: _sumsq(m['w']), {'w': OBJECTS, 'name': 'dense'}),
    lambda: tr.gradient(_sumsq, tr.AutoFiniteDifferences(), OBJECTS),
    lambda: tr.GradientTape(_sumsq, OBJECTS),
], ids=['gradient', 'withgradient', 'pullback', 'jacobian', 'jvp', 'hessian', 'param',
        'in a tree', 'finite differences', 'GradientTape'])
def test_an_object_array_of_numbers_raises(call):
    with pytest.raises(TypeError, match=r'dtype object.*x\.astype\(float\)'):
        call()


def test_an_object_array_of_strings_is_a_constant():
    names = np.array(['w', 'b'], dtype=object)
    assert tr.gradient(lambda x, s: x * len(s), 2.0, names) == (2.0, None)


def test_the_fix_differentiates():
    assert tr.gradient(_sumsq, OBJECTS.astype(float))[0].tolist() == [2.0, 4.0]


# --------------------------------------------------------------------------
# a[i] = t into a plain array: the conversion error names the statement and the fixes
# --------------------------------------------------------------------------

def _store(t):
    h = np.zeros(3)
    h[0] = t
    return np.sum(h)


def _store_slice(t):
    h = np.zeros(3)
    h[0:1] = t
    return np.sum(h)


_FIXES = r'np\.stack.*import tracked\.numpy as np.*zeros_like/empty_like'


@pytest.mark.parametrize('run', [lambda: tr.gradient(_store, 1.0),
                                 lambda: tr.jvp(_store, (1.0,), (1.0,)),
                                 lambda: tr.hessian(_store, 1.0)],
                         ids=['reverse', 'forward', 'hessian'])
def test_storing_a_tracked_scalar_into_a_plain_array_names_the_fix(run):
    # A 0-d tracked value is indexable (x[()], x[None]), so a sequence to C: NumPy raises
    # its own ValueError from tracked's TypeError, which the traceback shows first
    with pytest.raises(ValueError, match='sequence') as err:
        run()
    assert isinstance(err.value.__cause__, TypeError)
    assert re.search(r'^a\[i\] = t, storing a tracked value into a plain array, would drop '
                     r'its gradient.*' + _FIXES, str(err.value.__cause__))


@pytest.mark.parametrize('run', [lambda: tr.gradient(_store_slice, np.ones(1)),
                                 lambda: tr.jvp(_store_slice, (np.ones(1),), (np.ones(1),))],
                         ids=['reverse', 'forward'])
def test_storing_a_tracked_array_into_a_plain_array_names_the_fix(run):
    with pytest.raises(TypeError, match=r'tr\.data\(x\).*np\.stack.*import tracked\.numpy'):
        run()


@pytest.mark.parametrize('t', [tr.param(2.0),
                               Dual.make(np.float64(2.0), np.float64(1.0), DualLevel())],
                         ids=['tracked', 'dual'])
def test_a_zero_d_value_has_no_len_nor_iteration_and_indexes_as_a_0d_array(t):
    with pytest.raises(TypeError, match=r'len\(\) of a 0-d tracked value'):
        len(t)
    with pytest.raises(TypeError, match='iteration over a 0-d tracked value'):
        iter(t)                                 # at once, not at the first next()
    assert tr.data(t[()]) == 2.0 and np.shape(t[None]) == (1,)
    x = tr.param(np.array([1.0, 2.0]))
    assert len(x) == 2 and [tr.data(v) for v in x] == [1.0, 2.0]


def test_the_fixes_differentiate():
    import tracked.numpy as tnp
    assert tr.gradient(lambda t: np.sum(np.stack([t, 0.0 * t, 0.0 * t]) * 2.0), 1.0) == (2.0,)

    def filled(x):
        h = tnp.zeros_like(x)
        h[0] = x[1]
        return np.sum(h * 3.0)
    assert tr.gradient(filled, np.array([1.0, 2.0]))[0].tolist() == [0.0, 3.0]
