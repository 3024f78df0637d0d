"""Argument trees of recorded tapes (tracked/compiled_tape/trees.py): the tree protocol of
tracked/tree_util.py (what is walked, how a node is rebuilt) and the leaves of
``tr.gradient`` (what is differentiated, what is tied), checked against eager gradients
through GradientTape, a compiled tape and tr.AutoCompiled."""
import dataclasses
import enum
from collections import OrderedDict, namedtuple

import numpy as np
import pytest

import tracked as tr
from tracked.arguments import differentiable
from tracked.compiled_tape.trees import describe, flatten_args, is_input, unflatten_args
from tracked.tree_util import unflatten

Pair = namedtuple('Pair', 'scale shift')


class Slotted:
    __slots__ = ('w', '__hidden', 'unset')

    def __init__(self, w, h):
        self.w = w
        self.__hidden = h

    @property
    def hidden(self):
        return self.__hidden


@dataclasses.dataclass(frozen=True)
class Frozen:
    v: np.ndarray
    tied: np.ndarray
    name: str = 'frozen'


@tr.leaf
class Table:
    """Not walked: its array is a constant of the tape, its gradient None."""

    def __init__(self, t):
        self.t = t


class Layers(list):
    """A list subclass with an attribute: walked as a list."""


def make_model(seed, table=None):
    r = np.random.default_rng(seed)
    w = r.standard_normal(3)                         # tied: in .slot.w and in .frozen.tied
    return {'slot': Slotted(w, r.standard_normal(3)),
            'frozen': Frozen(r.standard_normal(3), w),
            'pair': Pair(r.standard_normal(), r.standard_normal(3)),
            'table': table if table is not None else Table(np.arange(3.0)),
            'ordered': OrderedDict(a=r.standard_normal(3), act=np.tanh),
            'layers': Layers([r.standard_normal(3)]),
            'n': 2, 'flag': True}


def loss(m, x):
    s, f, p = m['slot'], m['frozen'], m['pair']
    h = m['ordered']['act'](s.w * x + s.hidden) * f.tied
    h = h + f.v * m['table'].t + m['ordered']['a'] * m['layers'][0]
    return np.sum(h ** 2) * p.scale + np.sum(p.shift * x) * m['n'] + float(m['flag'])


def _close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def _check_gradient(g, eg):
    """``g`` has the types of the eager gradient ``eg`` and its values."""
    assert type(g) is type(eg)
    if eg is None:
        assert g is None
    elif isinstance(eg, (np.ndarray, float, np.floating)):
        _close(g, eg)
    elif isinstance(eg, dict):
        assert list(g) == list(eg)
        for k in eg:
            _check_gradient(g[k], eg[k])
    elif isinstance(eg, (list, tuple)):
        assert len(g) == len(eg)
        for a, b in zip(g, eg):
            _check_gradient(a, b)
    else:
        for name in ('w', '_Slotted__hidden', 'v', 'tied', 'name'):
            if hasattr(eg, name):
                _check_gradient(getattr(g, name), getattr(eg, name))


def _check_model_gradient(g, eg):
    _check_gradient(g, eg)
    assert type(g['slot']) is Slotted and type(g['frozen']) is Frozen
    assert type(g['pair']) is Pair and type(g['ordered']) is OrderedDict
    assert type(g['layers']) is Layers
    assert g['table'] is None and g['flag'] is None and g['n'] is not None
    assert g['frozen'].name is None and g['ordered']['act'] is None
    assert g['slot'].w is g['frozen'].tied            # the tied array: one total gradient
    assert not hasattr(g['slot'], 'unset')
    assert np.any(g['slot'].w != 0)


@pytest.fixture(scope='module')
def tapes():
    m, x = make_model(0), np.linspace(-1, 1, 3)
    tape = tr.GradientTape(loss, m, x, wrt=(0,))
    return tape, tr.compile(tape, background=False)


@pytest.mark.parametrize('which', ['tape', 'compiled'])
def test_tapes_over_slots_frozen_namedtuple_leaf_and_tied_arrays(tapes, which):
    tape = tapes[0] if which == 'tape' else tapes[1]
    table = make_model(0)['table']
    for seed in range(3):
        m = make_model(seed, tape_table(tape))
        x = np.linspace(-1, 1, 3) * (seed + 1)
        val, (g, gx) = tape.withgradient(m, x)
        ev, (eg, _) = tr.withgradient(loss, m, x)
        _close(val, ev)
        assert gx is None
        _check_model_gradient(g, eg)
    # a tied array that is not tied any more is another structure
    m = make_model(1, tape_table(tape))
    m['frozen'] = Frozen(m['frozen'].v, m['slot'].w.copy())
    with pytest.raises(ValueError, match=r'structure.*array \(tied\)'):
        tape.gradient(m, x)
    # a @tr.leaf object is a constant of the tape: another one is another structure
    with pytest.raises(ValueError, match='structure'):
        tape.gradient(make_model(1, table), x)


def tape_table(tape):
    """The @tr.leaf object the tape was recorded with (a constant of the tape)."""
    return unflatten(tape.treedef, [None] * len(tape.specs))[0]['table']


@pytest.mark.parametrize('compile', [False, True])
def test_autocompiled_over_the_same_model(compile):
    ad = tr.AutoCompiled(compile=compile)
    for seed in range(3):
        m = make_model(seed)                     # a new @tr.leaf table each time: new tapes
        x = np.linspace(-1, 1, 3) + seed
        val, (g, gx) = tr.withgradient(loss, ad, m, x)
        ev, (eg, egx) = tr.withgradient(loss, m, x)
        _close(val, ev)
        _close(gx, egx)
        _check_model_gradient(g, eg)
        val, (g, gx) = tr.withgradient(loss, ad, m, 2 * x)     # the kept tape, replayed
        ev, (eg, egx) = tr.withgradient(loss, m, 2 * x)
        _close(val, ev)
        _check_model_gradient(g, eg)


def test_same_array_in_two_arguments_is_two_leaves_in_autocompiled():
    f = lambda a, b: np.sum(a * b * b)
    x = np.array([1.0, 2.0, 3.0])
    ad = tr.AutoCompiled(compile=False)
    for a, b in [(x, x), (x, 2 * x), (x, x)]:
        g = tr.gradient(f, ad, a, b)
        eg = tr.gradient(f, a, b)
        _close(g[0], eg[0])
        _close(g[1], eg[1])


def test_shared_layer_and_cycle_stay_shared():
    @dataclasses.dataclass
    class Net:
        layers: list
        parent: object = None

    layer = Slotted(np.array([1.0, 2.0]), np.array([0.5, 0.5]))
    net = Net([layer, layer])
    net.parent = net                                # a cycle through the model
    f = lambda n: np.sum(n.layers[0].w * n.layers[1].hidden * n.parent.layers[1].w)
    tape = tr.GradientTape(f, net)
    layer2 = Slotted(np.array([3.0, -1.0]), np.array([2.0, 1.0]))
    net2 = Net([layer2, layer2])
    net2.parent = net2
    g, = tape.gradient(net2)
    eg, = tr.gradient(f, net2)
    assert g.layers[0] is g.layers[1] and g.parent is g
    assert eg.layers[0] is eg.layers[1] and eg.parent is eg
    _close(g.layers[0].w, eg.layers[0].w)
    _close(g.layers[0].hidden, eg.layers[0].hidden)
    net3 = Net([layer2, Slotted(layer2.w, layer2.hidden)])     # not shared any more
    net3.parent = net3
    with pytest.raises(ValueError, match='structure'):
        tape.gradient(net3)


def test_static_function_in_the_model_is_checked_on_replay():
    x = np.array([[0.5, -1.0, 2.0]])
    net = tr.nn.Dense(np.array([[1.0, -2.0, 0.5]]), np.array([0.1]), np.tanh)
    f = lambda m: np.sum(m(x))
    tape = tr.compile(tr.GradientTape(f, net), background=False)
    other = tr.nn.Dense(net.weight, net.bias, tr.nn.relu)
    with pytest.raises(ValueError, match='structure'):  # never the recorded tanh silently
        tape(other)
    ad = tr.AutoCompiled()
    for m in (net, other, net):
        g = tr.gradient(f, ad, m)[0]
        eg = tr.gradient(f, m)[0]
        _close(g.weight, eg.weight)
        _close(g.bias, eg.bias)


def test_leaves_are_the_differentiable_values_of_gradient():
    values = [np.ones(2), np.ones(2, np.float32), np.arange(2), np.ones(2, bool),
              np.array(['a']), np.array([object()]), np.float64(1.5), np.int64(2),
              np.bool_(True), 1.5, 3, True, None, 'text', np.tanh, Table(np.ones(1)),
              np.ones(1, complex), np.complex128(1j), 1j, enum.IntEnum('E', 'A').A]
    for v in values:
        expected = differentiable(v) or (isinstance(v, np.ndarray) and v.dtype.kind == 'b')
        assert is_input(v) == expected, v
        leaves, _ = flatten_args(({'v': v},))
        assert (len(leaves) == 1) == expected, v
    # the one difference (tracked/arguments.py): a bool array is an input, never
    # differentiated; the exact Python number types only, complex included, on both
    assert is_input(np.ones(2, bool)) and not differentiable(np.ones(2, bool))
    assert is_input(1j) and differentiable(1j)
    assert not is_input(enum.IntEnum('E', 'A').A) and not differentiable(enum.IntEnum('E', 'A').A)


def test_gradient_of_mixed_leaves_matches_eager():
    m = {'f': 1.5, 'i': 3, 'b': True, 's': 'x', 'n': None, 'ba': np.array([True, False]),
         'ia': np.array([1, 2]), 'f32': np.ones(2, np.float32), 'np': np.float64(2.0),
         'strs': np.array(['a', 'b']), 'fn': np.tanh}

    def f(m):
        mask = np.where(m['ba'], 1.0, 2.0)
        return (np.sum(m['fn'](m['f32']) * mask * m['ia']) * m['f'] * m['np'] + m['i'] ** 2
                + len(m['strs']) + float(m['b']))
    tape = tr.GradientTape(f, m)
    g, = tape.gradient(m)
    eg, = tr.gradient(f, m)
    assert list(g) == list(eg)
    for k in m:
        if eg[k] is None:
            assert g[k] is None, k
        else:
            _close(g[k], eg[k])
            assert np.asarray(g[k]).dtype == np.asarray(eg[k]).dtype, k


def test_complex_leaves_are_differentiated_as_in_gradient():
    z = np.array([1 + 2j, -0.5 + 0.25j])
    f = lambda a, b: np.sum(np.abs(b)) * np.sum(a)
    ga, gz = tr.gradient(f, np.ones(1), z)
    tape = tr.GradientTape(f, np.ones(1), z)
    ta, tz = tape.gradient(np.ones(1), 2 * z)
    ea, ez = tr.gradient(f, np.ones(1), 2 * z)
    assert tz.dtype == np.complex128
    _close(ta, ea)
    _close(tz, ez)
    _close(gz, z / np.abs(z))                   # d|z|/dx + i d|z|/dy = z / |z|
    ctape = tr.compile(tape, background=False)
    _close(ctape.gradient(np.ones(1), 2 * z)[1], ez)
    tape = tr.GradientTape(f, np.ones(1), z, wrt=0)    # outside wrt: an input, not static
    _close(tape.gradient(np.ones(1), 2 * z)[0], [np.sum(np.abs(2 * z))])


def test_autocompiled_under_outer_gradient_with_object_model():
    x = np.array([0.5, -1.0, 2.0])

    def outer(ad):
        def f(w):
            m = Slotted(w * 1.0, np.ones(3))             # a model holding tracked arrays
            g = tr.gradient(lambda m: np.sum(np.sin(m.w * x) * m.hidden), ad, m)[0]
            return np.sum(g.w ** 2)
        return f
    w = np.array([0.3, 0.2, 0.1])
    g = tr.gradient(outer(tr.AutoCompiled(compile=False)), w)[0]
    _close(g, tr.gradient(outer(tr.AutoTracked()), w)[0])
    _close(g, -2 * x ** 3 * np.cos(w * x) * np.sin(w * x))


def test_flatten_unflatten_round_trip_and_hashable_treedef():
    m = make_model(0)
    leaves, td = flatten_args((m, 1.5))
    hash(td)
    assert flatten_args((make_model(0, m['table']), 1.5))[1] == td
    back = unflatten_args(td, leaves)
    assert type(back) is tuple and back[1] == 1.5
    b = back[0]
    assert type(b['slot']) is Slotted and b['slot'].w is m['slot'].w
    assert b['slot'].hidden is m['slot'].hidden and not hasattr(b['slot'], 'unset')
    assert b['frozen'].tied is b['slot'].w and b['frozen'].name == 'frozen'
    assert type(b['pair']) is Pair and b['pair'].shift is m['pair'].shift
    assert b['table'] is m['table'] and b['ordered']['act'] is np.tanh
    assert type(b['layers']) is Layers and b['layers'][0] is m['layers'][0]
    grads = unflatten_args(td, leaves, statics=False)
    assert grads[0]['table'] is None and grads[0]['flag'] is None and grads[0]['n'] == 2
    text = describe(td)
    assert 'Slotted(w=array, _Slotted__hidden=array)' in text
    assert "Frozen(v=array, tied=array (tied), name='frozen')" in text
    assert 'Layers([array])' in text and text.endswith(', array)')


def test_tracked_argument_of_a_tape_is_refused():
    with pytest.raises(TypeError, match='tr.data'):
        tr.GradientTape(lambda m: np.sum(m.w), Slotted(tr.param(np.ones(2)), None))
