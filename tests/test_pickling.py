"""What a worker process needs pickles: models, optimiser states, primitives, recorded and
compiled tapes, module-level custom rules; tracked values refuse with a clear error."""
import os
import pathlib
import pickle
import subprocess
import sys

import numpy as np
import pytest

import tracked as tr
from tracked.compiled_tape.patterns import have_blas
from tracked import registry

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _model():
    return tr.Chain(tr.Dense(2, 8, tr.relu, rng=1), tr.Dense(8, 3, rng=2))


def _data(n=32):
    x = np.random.default_rng(0).standard_normal((n, 2))
    return x, (x[:, 0] > 0).astype(int) + (x[:, 1] > 0)


def loss(m, x, y):
    return tr.logitcrossentropy(m(x), y)


@tr.rule
def softplus(x):
    y = np.logaddexp(0.0, x)
    return y, lambda dy: (dy / (1 + np.exp(-x)),)


@tr.rule(opaque=True)
def cube(x):
    return np.asarray(x) ** 3, lambda dy: (dy * 3 * np.asarray(x) ** 2,)


def _roundtrip(x):
    return pickle.loads(pickle.dumps(x))


def _assert_trees_equal(a, b):
    la, da = tr.tree_util.flatten(a)
    lb, db = tr.tree_util.flatten(b)
    assert da == db
    for u, v in zip(la, lb):
        np.testing.assert_array_equal(u, v)


# --------------------------------------------------------------------------
# Tracked values refuse
# --------------------------------------------------------------------------

@pytest.mark.parametrize('make', [lambda: tr.param(np.ones(2)), lambda: tr.param(1.5),
                                  lambda: tr.fmap(tr.param, _model())])
def test_tracked_values_refuse_to_pickle(make):
    with pytest.raises(TypeError, match=r'cannot be pickled.*tr\.data\(x\).*the model itself'):
        pickle.dumps(make())


def test_tracked_int_pickles_as_its_int():
    seen = []

    def f(x, n):
        seen.append(_roundtrip(n))
        return x * n
    assert tr.gradient(f, 2.0, 3) == (3.0, 2.0)
    assert seen == [3] and type(seen[0]) is int


# --------------------------------------------------------------------------
# Models, optimiser states, primitives
# --------------------------------------------------------------------------

def test_model_and_adam_state_continue_identically_after_pickling():
    model, (x, y) = _model(), _data()
    state = tr.setup(tr.Adam(0.01), model)
    tr.train(loss, model, [(x, y)] * 3, state, progress=False)
    model2, state2 = _roundtrip((model, state))
    a = tr.train(loss, model, [(x, y)] * 4, state, progress=False)
    b = tr.train(loss, model2, [(x, y)] * 4, state2, progress=False)
    assert a == b
    _assert_trees_equal(model, model2)
    assert model2.layers[0].activation is tr.relu


def test_every_primitive_pickles_as_a_reference_to_itself():
    prims = {id(p): p for p in registry.RULES.values() if isinstance(p, registry.Primitive)}
    for name, mod in list(sys.modules.items()):
        if name.startswith('tracked'):
            prims.update((id(v), v) for v in vars(mod).values()
                         if isinstance(v, registry.Primitive))
    assert len(prims) > 100
    assert [p for p in prims.values() if _roundtrip(p) is not p] == []


def test_unreachable_primitive_names_the_fix():
    prim = registry.Primitive(lambda x: x, (lambda g, ans, x: g,), name='mine')
    with pytest.raises(pickle.PicklingError, match='mine.*module level.*defvjp'):
        pickle.dumps(prim)


def test_treedef_with_function_statics_pickles():
    _, td = tr.tree_util.flatten({'agg': np.mean, 'f': print, 'act': tr.relu, 'w': np.ones(2)})
    td2 = _roundtrip(td)
    assert td2 == td and hash(td2) == hash(td)


# --------------------------------------------------------------------------
# Tapes
# --------------------------------------------------------------------------

def test_gradient_tape_travels_as_its_program():
    model, (x, y) = _model(), _data()
    tape = tr.GradientTape(loss, model, x, y, wrt=(0,))
    tape.gradient(model, x, y)                     # a replay has cached its closures
    tape2 = _roundtrip(tape)
    assert str(tape2).splitlines()[1:] == str(tape).splitlines()[1:]
    assert tape2.f.__name__ == 'loss'              # f is not sent: the tape never re-records
    x2 = 2 * x
    val, (g, gx, gy) = tape2.withgradient(model, x2, y)
    val0, (g0, _, _) = tape.withgradient(model, x2, y)
    assert val == val0 and gx is None and gy is None
    _assert_trees_equal(g, g0)
    with pytest.raises(ValueError, match=r'argument 1.*shape \(5, 2\)'):
        tape2.gradient(model, x[:5], y[:5])


def test_guards_travel_and_retrace_keeps_f():
    relu = lambda x: 0.0 if x < 0 else x            # noqa: E731
    tape = _roundtrip(tr.GradientTape(relu, -1.3))
    with pytest.raises(tr.TapeGuardError, match='recorded True, now False'):
        tape.gradient(1.34)
    retrace = _roundtrip(tr.GradientTape(np.abs, -1.0, on_guard='retrace'))
    assert retrace.f is np.abs
    assert retrace.gradient(np.float64(-2.0)) == (-1.0,)


def test_tape_with_dict_output_and_custom_rules():
    def f(x):
        return {'loss': np.sum(softplus(x) + cube(x)), 'x': x}
    tape = _roundtrip(tr.GradientTape(f, np.zeros(3)))
    x = np.array([-1.0, 0.5, 2.0])
    val, (g,) = tape.withgradient(x)
    np.testing.assert_allclose(g, 1 / (1 + np.exp(-x)) + 3 * x ** 2, rtol=1e-14)
    assert set(val) == {'loss', 'x'}
    assert _roundtrip(softplus) is softplus and _roundtrip(softplus.forward) is softplus.forward


def test_rules_and_checkpoints_in_functions_travel_by_value_with_cloudpickle():
    cloudpickle = pytest.importorskip('cloudpickle')

    @tr.rule
    def square(x):
        return x * x, lambda dy: (2 * x * dy,)
    tape = cloudpickle.loads(cloudpickle.dumps(tr.GradientTape(
        lambda x: np.sum(square(x)), np.ones(2))))
    np.testing.assert_array_equal(tape.gradient(np.array([1.0, 3.0]))[0], [2.0, 6.0])
    # a checkpoint's recorded function is a closure: cloudpickle sends it by value
    tape = cloudpickle.loads(cloudpickle.dumps(tr.GradientTape(
        lambda x: tr.checkpoint(lambda y: np.sum(np.sin(y)), x), np.ones(2))))
    np.testing.assert_allclose(tape.gradient(np.array([0.0, 1.0]))[0], np.cos([0.0, 1.0]),
                               rtol=1e-15)


@pytest.mark.skipif(not have_blas(), reason="numba's BLAS helpers need SciPy")
def test_compiled_tape_recompiles_from_the_disk_cache_in_a_new_process(tmp_path):
    model, (x, y) = _model(), _data()
    ctape = tr.compile(tr.GradientTape(loss, model, x, y, wrt=(0,)), background=False)
    expected = ctape.withgradient(model, x, y)
    (tmp_path / 'in.pkl').write_bytes(pickle.dumps((ctape, model, x, y)))
    code = ('import pickle, sys\n'
            'tape, model, x, y = pickle.load(open(sys.argv[1], "rb"))\n'
            'assert tape.compiled is not None and not tape.fallbacks\n'
            'pickle.dump(tape.withgradient(model, x, y), open(sys.argv[2], "wb"))\n')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT)] + sys.path))
    subprocess.run([sys.executable, '-c', code, str(tmp_path / 'in.pkl'),
                    str(tmp_path / 'out.pkl')], check=True, env=env, cwd=tmp_path)
    val, (g, _, _) = pickle.loads((tmp_path / 'out.pkl').read_bytes())
    assert val == expected.val
    _assert_trees_equal(g, expected.grad[0])


def test_compiled_tape_that_cannot_compile_says_why(monkeypatch):
    data = pickle.dumps(tr.compile(tr.GradientTape(lambda x: np.sum(x * x), np.ones(2))))
    from tracked.compiled_tape import compiled

    def broken(*args, **kwargs):
        raise ImportError('no numba here')
    monkeypatch.setattr(compiled, 'CompiledProgram', broken)
    with pytest.raises(RuntimeError, match='cannot compile it.*no numba here.*uncompiled'):
        pickle.loads(data)
