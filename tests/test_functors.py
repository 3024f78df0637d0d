"""Models as trees (section 3 of API.md): fmap, @leaf, param/data/grad/zero_grad/istracked
over trees, and structural gradients."""
import dataclasses
from collections import OrderedDict, namedtuple

import numpy as np
import pytest

import tracked as tr

Pair = namedtuple('Pair', 'first second')


@dataclasses.dataclass
class Dense:
    W: np.ndarray
    b: np.ndarray
    act: object = np.tanh

    def __call__(self, x):
        return self.act(self.W @ x + self.b)


@dataclasses.dataclass(frozen=True)
class Frozen:
    w: np.ndarray
    scale: float = 2.0


class Slotted:
    __slots__ = ('w', '__hidden', 'label')

    def __init__(self, w, h):
        self.w = w
        self.__hidden = h
        self.label = 'slot'

    @property
    def hidden(self):
        return self.__hidden


class Plain:
    def __init__(self, layers, extra):
        self.layers = layers
        self.extra = extra


def _model():
    rng = np.random.default_rng(1)
    return Plain([Dense(rng.standard_normal((3, 2)), np.zeros(3)),
                  Dense(rng.standard_normal((1, 3)), np.zeros(1), act=lambda z: z)],
                 {'frozen': Frozen(np.array([1.0, 2.0])),
                  'slotted': Slotted(np.array([0.5]), np.array([3.0])),
                  'pair': Pair(np.array([1.0]), 'text'), 'n': 4})


# --------------------------------------------------------------------------
# fmap
# --------------------------------------------------------------------------

def test_fmap_keeps_types_and_maps_array_leaves():
    m = _model()
    out = tr.fmap(lambda a: a * 10, m)
    assert type(out) is Plain and out is not m
    assert type(out.layers) is list and all(type(d) is Dense for d in out.layers)
    np.testing.assert_array_equal(out.layers[0].W, m.layers[0].W * 10)
    assert out.layers[0].act is np.tanh                 # non-arrays are kept
    assert type(out.extra['frozen']) is Frozen
    np.testing.assert_array_equal(out.extra['frozen'].w, [10.0, 20.0])
    assert out.extra['frozen'].scale == 20.0            # floats are leaves
    assert out.extra['n'] == 4                          # ints (sizes) are kept
    s = out.extra['slotted']
    assert type(s) is Slotted and s.label == 'slot'
    np.testing.assert_array_equal(s.w, [5.0])
    np.testing.assert_array_equal(s.hidden, [30.0])     # a name-mangled slot
    assert type(out.extra['pair']) is Pair and out.extra['pair'].second == 'text'
    np.testing.assert_array_equal(m.layers[0].b, np.zeros(3))   # the input is untouched


def test_fmap_shared_arrays_map_once_and_stay_shared():
    w = np.ones(2)
    calls = []

    def fn(a):
        calls.append(a)
        return a + 1
    out = tr.fmap(fn, {'a': w, 'b': [w, (w,)], 'c': np.ones(2)})
    assert len(calls) == 2
    assert out['a'] is out['b'][0] is out['b'][1][0]
    assert out['c'] is not out['a']


def test_fmap_shared_layer_and_cycle():
    layer = Dense(np.ones((1, 1)), np.zeros(1))
    model = Plain([layer, layer], None)
    model.extra = model                              # a cycle through an object
    out = tr.fmap(lambda a: a * 2, model)
    assert out.layers[0] is out.layers[1]
    assert out.extra is out


def test_fmap_equal_tuple_constants_are_not_tied():
    out = tr.fmap(lambda a: a + 1, ((1.0, 2.0), (1.0, 2.0)))
    assert out == ((2.0, 3.0), (2.0, 3.0))


def test_fmap_leaf_decorator_stops_walk():
    @tr.leaf
    class Table:
        def __init__(self):
            self.data = np.arange(3.0)
    t = Table()
    out = tr.fmap(lambda a: a * 0, {'t': t, 'w': np.ones(1)})
    assert out['t'] is t
    np.testing.assert_array_equal(t.data, [0.0, 1.0, 2.0])
    out = tr.fmap(lambda a: 'mapped', {'t': t}, exclude=lambda x: isinstance(x, Table))
    assert out['t'] == 'mapped'


def test_fmap_several_trees_and_dict_subclass():
    a = OrderedDict(w=np.ones(2), name='x')
    b = OrderedDict(w=np.full(2, 3.0), name='y')
    out = tr.fmap(lambda x, y: x + y, a, b)
    assert type(out) is OrderedDict and list(out) == ['w', 'name']
    np.testing.assert_array_equal(out['w'], [4.0, 4.0])
    out = tr.fmap(lambda x, g: x if g is None else x - g, {'u': np.ones(1), 'v': np.ones(1)},
                  {'u': np.ones(1), 'v': None})
    np.testing.assert_array_equal(out['u'], [0.0])
    np.testing.assert_array_equal(out['v'], [1.0])


def test_fmap_counter_and_list_subclass_keep_types_and_items():
    from collections import Counter, defaultdict

    class Layers(list):
        pass
    c = Counter(a=np.ones(2))                       # update() would count the pairs
    out = tr.fmap(lambda a: a * 3, {'c': c, 'l': Layers([np.ones(1)]),
                                    'd': defaultdict(list, w=np.ones(1))})
    assert type(out['c']) is Counter and list(out['c']) == ['a']
    np.testing.assert_array_equal(out['c']['a'], [3.0, 3.0])
    assert type(out['l']) is Layers and len(out['l']) == 1
    assert type(out['d']) is defaultdict and out['d'].default_factory is list


def test_leaf_applied_after_a_walk_stops_later_walks():
    class Late:
        def __init__(self):
            self.w = np.ones(1)
    x = Late()
    assert tr.fmap(lambda a: a * 2, [x])[0] is not x
    tr.leaf(Late)
    assert tr.fmap(lambda a: a * 2, [x])[0] is x


def test_children_and_rebuild_are_the_walk_of_fmap():
    from tracked.tree_util import children, rebuild
    m = _model()
    for node in (m, m.extra, m.layers, m.extra['frozen'], m.extra['slotted'],
                 m.extra['pair'], (1.0, 'a')):
        values, aux = children(node)
        new = rebuild(type(node), aux, values)
        assert type(new) is type(node) and (new is not node or type(node) is tuple)
        assert children(new)[1] == aux
        assert all(a is b for a, b in zip(children(new)[0], values))
    s = rebuild(Slotted, ('w', '_Slotted__hidden'), (np.zeros(1), np.ones(1)))
    assert s.hidden[0] == 1.0 and not hasattr(s, 'label')
    assert children(m.extra['slotted'])[1] == ('w', '_Slotted__hidden', 'label')
    for atom in (np.ones(2), 1.5, 'a', None, np.tanh, len, Dense):
        assert children(atom) is None


# --------------------------------------------------------------------------
# param, data, grad, zero_grad, istracked over trees
# --------------------------------------------------------------------------

def test_param_over_a_model_and_back():
    m = _model()
    tm = tr.param(m)
    assert tr.istracked(tm) and not tr.istracked(m)
    assert tr.istracked(tm.layers[0].W) and tm.extra['n'] == 4
    assert tm.layers[0].act is np.tanh
    assert tr.fmap(tr.param, m).layers[1].W.shape == (1, 3)
    x = np.array([0.3, -0.2])

    def loss(model):
        h = x
        for layer in model.layers:
            h = layer(h)
        return np.sum(h ** 2) + np.sum(model.extra['frozen'].w) * model.extra['slotted'].w[0]
    tr.back(loss(tm))
    g_tree = tr.grad(tm)
    g_struct, = tr.gradient(loss, m)
    for path in (lambda t: t.layers[0].W, lambda t: t.layers[1].b,
                 lambda t: t.extra['frozen'].w, lambda t: t.extra['slotted'].w):
        np.testing.assert_allclose(path(g_tree), path(g_struct))
    assert g_tree.extra['n'] is None and g_tree.layers[0].act is None
    np.testing.assert_array_equal(g_tree.extra['slotted'].hidden, [0.0])   # a param, unused

    plain = tr.data(tm)
    assert not tr.istracked(plain) and type(plain.extra['frozen']) is Frozen
    np.testing.assert_array_equal(plain.layers[0].W, m.layers[0].W)

    tr.zero_grad(tm)
    assert all(np.all(g == 0) for g in tr.tree_util.leaves(tr.grad(tm)))
    assert np.any(tr.grad(tm.layers[0].W) == 0)


def test_single_value_versions():
    x = tr.param(np.array([1.0, 2.0]))
    assert tr.istracked(x) and not tr.istracked(np.ones(1))
    np.testing.assert_array_equal(tr.data(x), [1.0, 2.0])
    assert tr.data(3.0) == 3.0
    tr.back(np.sum(x * x))
    np.testing.assert_array_equal(tr.grad(x), [2.0, 4.0])
    assert tr.zero_grad(x) is x
    np.testing.assert_array_equal(x.grad, [0.0, 0.0])
    assert tr.grad(np.ones(1)) is None
    p = tr.param(np.array([1, 2]))
    assert p.dtype == np.float64
    p32 = tr.param(np.ones(2, dtype=np.float32))
    assert p32.dtype == np.float32 and p32.grad.dtype == np.float32


# --------------------------------------------------------------------------
# Structural gradients
# --------------------------------------------------------------------------

def test_structural_gradient_has_model_types():
    m = _model()
    x = np.array([0.3, -0.2])

    def loss(model):
        return np.sum(model.layers[1](model.layers[0](x)) ** 2) \
            + np.sum(model.extra['frozen'].w ** 2) * model.extra['frozen'].scale
    g, = tr.gradient(loss, m)
    assert type(g) is Plain and type(g.layers[0]) is Dense and type(g.extra['frozen']) is Frozen
    assert type(g.extra['slotted']) is Slotted and type(g.extra['pair']) is Pair
    assert g.layers[0].act is None and g.extra['n'] is None and g.extra['pair'].second is None
    assert g.extra['slotted'].w is None and g.extra['pair'].first is None   # unused: None
    np.testing.assert_allclose(g.extra['frozen'].w, [4.0, 8.0])
    assert g.extra['frozen'].scale == 5.0
    h = np.tanh(m.layers[0].W @ x)
    out = m.layers[1].W @ h
    np.testing.assert_allclose(g.layers[1].W, 2 * out[:, None] * h[None, :])
    np.testing.assert_allclose(g.layers[1].b, 2 * out)


def test_tied_weights_get_total_gradient_in_every_place():
    W = np.array([[2.0]])
    model = {'enc': Dense(W, np.zeros(1), act=lambda z: z),
             'dec': Dense(W, np.zeros(1), act=lambda z: z)}
    x = np.array([3.0])
    g, = tr.gradient(lambda m: np.sum(m['dec'](m['enc'](x))), model)
    # y = W * W * x: dy/dW = 2 W x = 12, in both places
    np.testing.assert_array_equal(g['enc'].W, [[12.0]])
    assert g['enc'].W is g['dec'].W


def test_float32_model_keeps_dtype():
    m = {'w': np.ones(3, dtype=np.float32), 'v': np.ones(2)}
    g, = tr.gradient(lambda m: np.sum(m['w'] * 2) + np.sum(m['v']), m)
    assert g['w'].dtype == np.float32 and g['v'].dtype == np.float64


def test_param_rejects_strings():
    with pytest.raises(TypeError):
        tr.param('abc')
