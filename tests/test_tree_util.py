"""The tree protocol (tracked/tree_util.py): flatten/unflatten on every node kind, TreeDef
equality and hashing, ties, shared nodes and cycles, @leaf, registered nodes, paths and
the generated matcher; then registered classes through every walk of the library."""
import dataclasses
import pickle
from collections import Counter, OrderedDict, defaultdict, namedtuple

import numpy as np
import pytest

import tracked as tr
from tracked.tree_util import (children, flatten, follow, is_node, keystr, leaves, rebuild,
                               tree_map, tuple_def, unflatten)

Pair = namedtuple('Pair', 'first second')


class Layers(list):
    pass


class Shape(tuple):
    pass


@dataclasses.dataclass(frozen=True)
class Frozen:
    w: np.ndarray
    name: str = 'frozen'


class Slotted:
    __slots__ = ('w', '__hidden', 'unset')

    def __init__(self, w, h):
        self.w = w
        self.__hidden = h


class Plain:
    def __init__(self, **kw):
        if not kw:
            raise TypeError('Plain needs attributes')     # rebuilt without __init__
        self.__dict__.update(kw)


@tr.leaf
class Table:
    def __init__(self):
        self.t = np.arange(3.0)


# --------------------------------------------------------------------------
# Registered classes: one validates in its constructor, one has fewer children
# than attributes
# --------------------------------------------------------------------------

class MaskedDense:
    """``y = act((weight * mask) @ x + bias)``; the mask is fixed (not a child)."""

    def __init__(self, weight, bias, mask, act=np.tanh):
        if np.shape(mask) != np.shape(weight) or np.shape(bias) != np.shape(weight)[:1]:
            raise ValueError('MaskedDense: mask must match weight, bias its rows')
        self.weight, self.bias, self.mask, self.act = weight, bias, mask, act

    @classmethod
    def _unchecked(cls, aux, kids):
        new = cls.__new__(cls)      # tracked values or None: no validation here
        new.weight, new.bias = kids
        new.mask, new.act = aux
        return new

    def __call__(self, x):
        return self.act((self.weight * self.mask) @ x + self.bias)


tr.register_node(MaskedDense, lambda m: ((m.weight, m.bias), (m.mask, m.act)),
                 MaskedDense._unchecked)


class Poly:
    """Coefficients are the only child; the name and degree are aux, the cache is not
    kept (a rebuilt Poly starts with an empty one)."""

    def __init__(self, coef, name='p'):
        self.coef, self.name = coef, name
        self.degree = len(coef) - 1
        self.cache = {}

    @classmethod
    def _rebuild(cls, aux, kids):
        new = cls.__new__(cls)
        (new.coef,), (new.name, new.degree), new.cache = kids, aux, {}
        return new

    def __call__(self, x):
        return sum(c * x ** k for k, c in enumerate(self.coef))


tr.register_node(Poly, lambda p: ((p.coef,), (p.name, p.degree)), Poly._rebuild)


def make_registered(seed=0):
    r = np.random.default_rng(seed)
    w = r.standard_normal((2, 3))
    return {'dense': MaskedDense(w, r.standard_normal(2), np.array([[1., 0, 1], [0, 1, 1]])),
            'poly': Poly(r.standard_normal(3)), 'name': 'model'}


def registered_loss(m, x):
    h = m['dense'](x)
    return np.sum(m['poly'](h)) * 2


# --------------------------------------------------------------------------
# flatten / unflatten on every node kind
# --------------------------------------------------------------------------

def every_kind():
    a, b = np.array([1.0, 2.0]), np.array([3.0])
    return {
        'dict': {'x': a}, 'ordered': OrderedDict(y=b, z='s'), 'counter': Counter(c=1.5),
        'default': defaultdict(list, d=np.ones(1)), 'list': [a, 2.5], 'layers': Layers([b]),
        'tuple': (np.ones(2), 'act'), 'shape': Shape((np.zeros(1),)),
        'pair': Pair(np.full(1, 7.0), None), 'frozen': Frozen(np.ones(3)),
        'slotted': Slotted(np.ones(1), np.zeros(1)), 'plain': Plain(v=np.ones(2), k=3),
        'table': Table(), 'fn': np.tanh, 'poly': Poly(np.ones(2)), 'flag': True}


def test_round_trip_on_every_node_kind():
    tree = every_kind()
    ls, treedef = flatten(tree)
    assert treedef.num_leaves == len(ls) == 13
    new = unflatten(treedef, [x * 2 for x in ls])
    for k, v in tree.items():
        assert type(new[k]) is type(v), k
    np.testing.assert_array_equal(new['dict']['x'], [2.0, 4.0])
    assert list(new['ordered']) == ['y', 'z'] and new['ordered']['z'] == 's'
    assert new['counter']['c'] == 3.0
    assert new['default'].default_factory is list and new['default']['d'][0] == 2.0
    assert new['list'][1] == 5.0 and new['tuple'][1] == 'act'
    assert new['pair'].second is None and new['pair'].first[0] == 14.0
    assert new['frozen'].name == 'frozen' and new['frozen'].w[0] == 2.0
    assert new['slotted'].w[0] == 2.0 and not hasattr(new['slotted'], 'unset')
    assert new['plain'].k == 3 and new['plain'].v[0] == 2.0       # no __init__ call
    assert new['table'] is tree['table'] and new['fn'] is np.tanh and new['flag'] is True
    assert new['poly'].degree == 1 and new['poly'].coef[1] == 2.0
    grads = unflatten(treedef, ls, statics=False)
    assert grads['table'] is None and grads['fn'] is None and grads['ordered']['z'] is None
    assert grads['plain'].k is None and grads['frozen'].name is None
    assert tree_map(lambda x: x * 2, tree)['poly'].coef[1] == 2.0


class Token:
    """``__new__`` needs an argument: rebuilt past it, as ``fmap`` does."""

    def __new__(cls, value):
        if value is None:
            raise TypeError('Token needs a value')
        return super().__new__(cls)

    def __init__(self, value):
        self.value = value


def test_objects_whose_new_needs_arguments():
    ls, d = flatten({'t': Token(np.ones(2))})
    new = unflatten(d, [np.zeros(2)])
    assert type(new['t']) is Token and new['t'].value[0] == 0.0
    g = tr.gradient(lambda t: np.sum(t.value ** 2), Token(np.array([1.0, 2.0])))[0]
    assert type(g) is Token
    np.testing.assert_array_equal(g.value, [2.0, 4.0])


def test_children_rebuild_and_is_node():
    for node in every_kind().values():
        if not is_node(node):
            assert children(node) is None
            continue
        kids, aux = children(node)
        new = rebuild(type(node), aux, kids)
        assert type(new) is type(node) and children(new)[1] == aux
    assert [is_node(v) for v in (np.ones(1), 1.5, 'a', None, np.tanh, Table(), len)] == [False] * 7
    with pytest.raises(TypeError, match='not a node'):
        rebuild(str, None, ())
    with pytest.raises(ValueError, match='built-in node'):
        tr.register_node(dict, lambda d: (d.values(), tuple(d)), lambda k, v: dict(zip(k, v)))


def test_attributes_of_list_and_dict_subclasses_are_carried_along():
    layers = Layers([np.ones(2)])
    layers.name, layers.mask = 'enc', np.zeros(2)
    ls, d = flatten({'l': layers})
    assert len(ls) == 1
    new = unflatten(d, [np.full(2, 3.0)])['l']
    assert new.name == 'enc' and new.mask is layers.mask and new[0][0] == 3.0
    g = tr.gradient(lambda m: np.sum(m['l'][0] ** 2) * (m['l'].name == 'enc'), {'l': layers})
    assert type(g[0]['l']) is Layers and g[0]['l'].name == 'enc'
    np.testing.assert_array_equal(g[0]['l'][0], [2.0, 2.0])
    other = Layers([np.ones(2)])
    other.name, other.mask = 'dec', layers.mask
    assert flatten({'l': other})[1] != d and d.matcher()({'l': other}) is None
    other.name = 'enc'
    assert flatten({'l': other})[1] == d and d.matcher()({'l': other})[0] is other[0]


def test_treedef_equality_and_hashing():
    t1, t2 = every_kind(), every_kind()
    t2['table'] = t1['table']
    d1, d2 = flatten(t1)[1], flatten(t2)[1]
    assert d1 == d2 and hash(d1) == hash(d2)
    assert len({d1, d2}) == 1
    # statics by value, with their type; unhashable statics by identity
    assert flatten([np.ones(1), 'a'])[1] != flatten([np.ones(1), 'b'])[1]
    assert flatten([True])[1] != flatten([1])[1]
    s = {1, 2}
    assert flatten([s])[1] == flatten([s])[1] != flatten([{1, 2}])[1]
    # node types, keys and lengths
    assert flatten([1.0])[1] != flatten((1.0,))[1]
    assert flatten({'a': 1.0})[1] != flatten({'b': 1.0})[1]
    assert flatten(Layers([1.0]))[1] != flatten([1.0])[1]
    assert flatten(Poly(np.ones(1), 'p'))[1] != flatten(Poly(np.ones(1), 'q'))[1]
    # pickled: equal, and hashes recomputed
    d = pickle.loads(pickle.dumps(flatten({'w': np.ones(1), 'act': 'relu'})[1]))
    assert d == flatten({'w': np.zeros(1), 'act': 'relu'})[1]
    assert hash(d) == hash(flatten({'w': np.zeros(1), 'act': 'relu'})[1])


def test_tied_arrays_are_one_leaf_and_floats_never_tie():
    w = np.ones(2)
    ls, d = flatten({'enc': w, 'dec': [w], 'b': 0.5, 'c': 0.5})
    assert len(ls) == 3 and ls[0] is w
    new = unflatten(d, [np.zeros(2), 1.0, 2.0])
    assert new['enc'] is new['dec'][0]
    assert (new['b'], new['c']) == (1.0, 2.0)
    untied = flatten({'enc': w, 'dec': [w.copy()], 'b': 0.5, 'c': 0.5})[1]
    assert untied != d and 'tied' in repr(d) and 'tied' not in repr(untied)


def test_shared_nodes_and_cycles_are_preserved():
    layer = {'w': np.ones(1)}
    obj = Plain(layers=[layer, layer])
    obj.parent = obj
    ls, d = flatten(obj)
    assert len(ls) == 1
    new = unflatten(d, [np.zeros(1)])
    assert new.layers[0] is new.layers[1] and new.parent is new
    assert new.layers[0]['w'][0] == 0.0
    assert '<shared dict>' in repr(d) and '<shared Plain>' in repr(d)
    cyc = [np.ones(1)]
    cyc.append(cyc)
    new = tree_map(lambda a: a + 1, cyc)
    assert new[1] is new and new[0][0] == 2.0
    shared_poly = Poly(np.ones(2))
    new = unflatten(*reversed(flatten([shared_poly, shared_poly])))
    assert new[0] is new[1]


def test_a_cycle_through_a_registered_node_is_refused():
    p = Poly([np.ones(1)])
    p.coef.append(p)
    with pytest.raises(ValueError, match='cycle through a Poly'):
        flatten(p)
    with pytest.raises(ValueError, match='cycle through a Poly'):
        tree_map(lambda a: a, p)


def test_leaf_classes_and_is_leaf_that_stops_at_nodes():
    t = Table()
    ls, d = flatten({'t': t, 'w': np.ones(1)})
    assert len(ls) == 1 and d.statics() == [t]
    ls, d = flatten({'t': t, 'p': Pair(1.0, 2.0)}, lambda x: isinstance(x, (Table, Pair)))
    assert ls == [t, Pair(1.0, 2.0)]

    class Late:
        def __init__(self):
            self.w = np.ones(1)
    assert flatten(Late())[0][0][0] == 1.0
    tr.leaf(Late)
    assert flatten(Late())[0] == []


def test_tree_map_with_others_statics_and_sharing():
    a = {'w': np.ones(2), 'p': Poly(np.ones(1)), 'name': 'x'}
    b = {'w': np.full(2, 3.0), 'p': Poly(np.full(1, 2.0)), 'name': 'y'}
    out = tree_map(lambda x, y: x + y, a, b)
    np.testing.assert_array_equal(out['w'], [4.0, 4.0])
    assert type(out['p']) is Poly and out['p'].coef[0] == 3.0 and out['name'] == 'x'
    out = tree_map(lambda x, y: y, a, {'w': None, 'p': None, 'name': None}, statics=False)
    assert out == {'w': None, 'p': out['p'], 'name': None} and out['p'].coef is None
    w = np.ones(1)
    calls = []
    tree_map(calls.append, [w, w])
    assert len(calls) == 1
    tree_map(calls.append, [w, w], shared=False)
    assert len(calls) == 3
    assert leaves([w, {'v': w, 'f': 2.0, 'n': 3}]) == [w, 2.0]


def test_paths_follow_and_keystr():
    tree = {'dense': MaskedDense(np.ones((1, 1)), np.ones(1), np.ones((1, 1))),
            'layers': [Slotted(np.ones(1), np.zeros(1))], 'frozen': Frozen(np.ones(1))}
    ls, d = flatten(tree)
    paths = d.paths()
    assert [keystr(p) for p in paths] == [
        "['dense']<child 0>", "['dense']<child 1>", "['layers'][0].w",
        "['layers'][0]._Slotted__hidden", "['frozen'].w"]
    assert all(follow(tree, p) is x for p, x in zip(paths, ls))
    assert follow({'dense': None}, paths[0]) is None


def test_tuple_def_numbers_leaves_and_shared_nodes_in_order():
    w = np.ones(1)
    lst = [w]
    args = ([lst, lst], w, {'v': w})
    defs = [flatten(a)[1] for a in args]
    td = tuple_def(defs)
    assert td.num_leaves == 3
    new = unflatten(td, [np.zeros(1), 1.0, 2.0])
    assert new[0][0] is new[0][1] and new[1] == 1.0 and new[2]['v'] == 2.0
    assert td == flatten(([lst, lst], np.ones(1), {'v': np.ones(1)}))[1]


def test_matcher_accepts_the_same_structure_only():
    layer = [np.ones(2)]
    tree = {'l': [layer, layer], 'w': np.ones(2), 'tied': None, 'f': np.tanh,
            's': Slotted(np.ones(1), 2.0), 'p': Poly(np.ones(3)), 'n': 3}
    tree['tied'] = tree['w']
    ls, d = flatten(tree)
    match = d.matcher([(np.ndarray, {'shape': (2,)}), (np.ndarray, {}), (np.ndarray, {}),
                       (float, {None: 2.0}), (np.ndarray, {'dtype': np.dtype(float)})])

    def like(**change):
        layer = [np.zeros(2)]
        t = {'l': [layer, layer], 'w': np.zeros(2), 'tied': None, 'f': np.tanh,
             's': Slotted(np.ones(1), 2.0), 'p': Poly(np.ones(3)), 'n': 3}
        t['tied'] = t['w']
        t.update(change)
        return t
    good = like()
    got = match(good)
    assert got is not None and len(got) == 5 and got[0] is good['l'][0][0]
    assert got[1] is good['w'] and got[4] is good['p'].coef
    assert match(like(n=4)) is None                      # a static
    assert match(like(f=np.sin)) is None
    assert match(like(tied=np.zeros(2))) is None         # no longer tied
    assert match(like(l=[[np.zeros(2)], [np.zeros(2)]])) is None    # no longer shared
    assert match(like(s=Slotted(np.ones(1), 3.0))) is None          # a leaf's value check
    assert match(like(p=Poly(np.ones(3), 'q'))) is None             # a registered aux
    assert match(like(p=Poly(np.ones(3).astype(int)))) is None
    assert match(like(w=np.zeros(3), tied=None)) is None
    assert match([1]) is None


# --------------------------------------------------------------------------
# Registered classes through the library
# --------------------------------------------------------------------------

def _check_registered_gradient(g, m, x):
    assert type(g['dense']) is MaskedDense and type(g['poly']) is Poly
    assert g['dense'].mask is m['dense'].mask and g['poly'].name == 'p'
    assert g['poly'].degree == 2
    h = np.tanh((m['dense'].weight * m['dense'].mask) @ x + m['dense'].bias)
    c = m['poly'].coef
    np.testing.assert_allclose(g['poly'].coef, 2 * np.array([2, np.sum(h), np.sum(h ** 2)]))
    dh = 2 * (c[1] + 2 * c[2] * h) * (1 - h ** 2)
    np.testing.assert_allclose(g['dense'].bias, dh)
    np.testing.assert_allclose(g['dense'].weight, np.outer(dh, x) * m['dense'].mask)


def test_registered_constructor_still_validates():
    with pytest.raises(ValueError, match='mask must match'):
        MaskedDense(np.ones((2, 3)), np.ones(2), np.ones((3, 2)))


def test_registered_classes_in_fmap_param_and_gradient():
    m, x = make_registered(), np.array([0.5, -1.0, 2.0])
    doubled = tr.fmap(lambda a: 2 * a, m)
    assert type(doubled['dense']) is MaskedDense and doubled['dense'].mask is m['dense'].mask
    np.testing.assert_array_equal(doubled['poly'].coef, 2 * m['poly'].coef)
    g, gx = tr.gradient(registered_loss, m, x)
    _check_registered_gradient(g, m, x)
    assert g['name'] is None
    tm = tr.param(m)
    assert tr.istracked(tm['dense'].weight) and not tr.istracked(tm['dense'].mask)
    tr.back(registered_loss(tm, x))
    _check_registered_gradient(tr.grad(tm), m, x)
    assert tr.grad(tm)['name'] is None
    tr.zero_grad(tm)
    assert np.all(tm['poly'].coef.grad == 0)
    plain = tr.data(tm)
    assert type(plain['poly']) is Poly and not tr.istracked(plain)
    ad = tr.gradient(registered_loss, tr.AutoFiniteDifferences(), m, x)[0]
    np.testing.assert_allclose(ad['poly'].coef, g['poly'].coef, rtol=1e-6)


@pytest.mark.parametrize('compiled', [False, True])
def test_registered_classes_on_tapes_and_autocompiled(compiled):
    m, x = make_registered(), np.array([0.5, -1.0, 2.0])
    tape = tr.GradientTape(registered_loss, m, x, wrt=0)
    if compiled:
        tape = tr.compile(tape, background=False)
    for seed in (1, 2):
        m2 = make_registered(seed)
        m2['dense'].mask = m['dense'].mask          # the mask is aux: compared by identity
        val, (g, gx) = tape.withgradient(m2, 2 * x)
        np.testing.assert_allclose(val, registered_loss(m2, 2 * x))
        assert gx is None
        _check_registered_gradient(g, m2, 2 * x)
        out = tape.gradient(m2, x, out=(g, None))
        _check_registered_gradient(out[0], m2, x)
    with pytest.raises(ValueError, match='structure'):
        tape.gradient(make_registered(1), x)       # another mask
    ad = tr.AutoCompiled(compile=compiled)
    for _ in range(2):
        g, gx = tr.gradient(registered_loss, ad, m, x)
        _check_registered_gradient(g, m, x)
    assert len(ad.tapes) == 1


def test_registered_classes_with_optimisers():
    m, x = make_registered(), np.array([0.5, -1.0, 2.0])
    before = tr.fmap(np.copy, m)
    state = tr.setup(tr.Descent(0.1), m)
    assert type(state['dense']) is MaskedDense and state['name'] is None
    g = tr.gradient(registered_loss, m, x)[0]
    for _ in range(2):                      # the second step goes through the cached plan
        tr.update(state, m, g)
    np.testing.assert_allclose(m['poly'].coef, before['poly'].coef - 0.2 * g['poly'].coef)
    np.testing.assert_allclose(m['dense'].weight, before['dense'].weight - 0.2 * g['dense'].weight)
    np.testing.assert_array_equal(m['dense'].mask, before['dense'].mask)


def test_registered_classes_in_jacobian_and_hessian():
    p = Poly(np.array([1.0, 2.0, 3.0]))
    J = tr.jacobian(lambda p: p.coef * 2, p)[0]
    np.testing.assert_allclose(J.coef, 2 * np.eye(3))
    H = tr.hessian(lambda c: Poly(c)(2.0) ** 2, p.coef)     # built inside f from tracked values
    np.testing.assert_allclose(H, 2 * np.outer([1, 2, 4], [1, 2, 4]))
