"""Single calls that gave a wrong number or a None instead of an error (issue 23, item 3),
each with the issue's own example.  The matrix-function and emath cases live with their
rules (tests/rules/test_scipy_linalg.py, test_elementwise.py), the losses' with the
losses (tests/test_nn.py)."""
import numpy as np
import pytest

import tracked as tr

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
