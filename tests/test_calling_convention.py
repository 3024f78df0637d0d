"""One calling convention for every path (tracked/arguments.py): a table of argument shapes
and output shapes, run through the eager ``gradient``/``withgradient``, the backends
``AutoTracked`` and ``AutoCompiled``, ``GradientTape``, ``tracked.autograd`` and
``tracked.distributed``'s per-shard gradient, then ``jacobian``/``JacobianTape`` and
``hessian``/``HessianTape``, and ``tr.Const``/``tr.Duplicated`` with every backend: each
path gives the eager tape's results (values, gradients, their types) or its error (type
and message)."""
import enum

import numpy as np
import pytest

import tracked as tr
from tracked.autograd import hessian as ag_hessian, value_and_grad
from tracked.tree_util import flatten, follow

X = np.array([1.0, 2.0, 3.0])


class Label(enum.IntEnum):
    TWO = 2


class Scale(float):
    """A subclass of float: a constant, as a bool is (arguments.differentiable)."""


# name: (arguments, f's core (a real scalar of them)); numeric: all arguments numbers/arrays
ARGS = {
    'array': ((X,), lambda a: np.sum(a * a)),
    'float': ((2.0,), lambda a: a * a),
    'int': ((3,), lambda a: a * a),
    'numpy scalar': ((np.float32(2.0),), lambda a: a * a),
    'int array': ((np.array([1, 2, 3]),), lambda a: np.sum(a * a)),
    'float32 array': ((X.astype(np.float32),), lambda a: np.sum(a * a)),
    'complex': ((0.5 + 1j,), lambda z: np.real(z * z)),
    'int as index': ((X, 1), lambda a, i: a[i] * 2.0),
    'unused float': ((X, 2.0), lambda a, b: np.sum(a)),
    'bool': ((X, True), lambda a, b: np.sum(a) if b else np.sum(a * a)),
    'str': ((X, 'sq'), lambda a, s: np.sum(a * a) if s == 'sq' else np.sum(a)),
    'None': ((X, None), lambda a, n: np.sum(a)),
    'IntEnum': ((X, Label.TWO), lambda a, e: np.sum(a) * e),
    'float subclass': ((X, Scale(2.0)), lambda a, s: np.sum(a) * s),
    'bool array': ((X, np.array([True, False, True])),
                   lambda a, m: np.sum(np.where(m, a, 0.0))),
    'tuple tree': (((X, 2.0),), lambda t: np.sum(t[0]) * t[1]),
    'list tree': (([X, 2.0, 'k'],), lambda t: np.sum(t[0]) * t[1]),
    'dict tree': (({'w': X, 'act': 'tanh', 'n': 2},),
                  lambda d: np.sum(np.tanh(d['w'])) * d['n']),
    'tied arrays': (({'a': X, 'b': X},), lambda d: np.sum(d['a'] * d['b'])),
    'empty list': (([], X), lambda e, a: np.sum(a)),
}
NUMERIC = {'array', 'float', 'int', 'numpy scalar', 'int array', 'float32 array', 'complex',
           'unused float'}

# name: f's output built from the core scalar s
OUTPUTS = {
    'scalar': lambda s: s,
    '0-d array': lambda s: np.reshape(s, ()),
    'tuple (loss, aux)': lambda s: (s, 'aux'),
    'list': lambda s: [s, 1.0],
    'dict': lambda s: {'loss': s, 'aux': 2},
    'vector': lambda s: s * np.ones(2),
    'int': lambda s: 3,
    'None': lambda s: None,
}


def _function(core, out):
    return lambda *args: OUTPUTS[out](core(*args))


# --------------------------------------------------------------------------
# Comparing results and errors
# --------------------------------------------------------------------------

def _outcome(fn):
    """``('ok', result)`` or ``('error', type, message)``: the message without the name of
    the operator (its first word) and without the advice after it ('. Use ...')."""
    try:
        return ('ok', fn())
    except Exception as e:
        cause = e.__cause__ if type(e).__name__ == 'ShardError' else e
        words = str(cause).split(' ', 1)
        return ('error', type(cause), words[-1].split('. Use ')[0])


def same_object(a, b, where='result'):
    assert type(a) is type(b), f'{where}: {type(a).__name__} != {type(b).__name__}'
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for k, (u, v) in enumerate(zip(a, b)):
            same_object(u, v, f'{where}[{k}]')
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            same_object(a[k], b[k], f'{where}[{k!r}]')
    elif isinstance(a, (np.ndarray, np.generic)):
        assert a.shape == b.shape and a.dtype == b.dtype, (where, a, b)
        np.testing.assert_allclose(a, b, rtol=1e-12, err_msg=where)
    else:
        assert a == b, (where, a, b)


def _agree(outcomes, reference):
    ref = outcomes[reference]
    for path, got in outcomes.items():
        assert got[0] == ref[0], f'{path}: {got} where {reference} gives {ref}'
        if got[0] == 'error':
            assert got[1:] == ref[1:], f'{path}: {got} where {reference} gives {ref}'
        else:
            same_object(got[1], ref[1], path)


# --------------------------------------------------------------------------
# gradient / withgradient on every path
# --------------------------------------------------------------------------

def _autocompiled(f, args):
    ad = tr.AutoCompiled(compile=False)
    for _ in range(3):        # the first call is eager, the second records, the third replays
        val, grad = tr.withgradient(f, ad, *args)
    return val, grad


def _tape(f, args):
    tape = tr.GradientTape(f, *args)
    return tuple(tape.withgradient(*args))


def _tape_gradient(f, args):
    tape = tr.GradientTape(f, *args)
    return tape(*args), tape.gradient(*args)


GRADIENT_PATHS = {
    'withgradient': lambda f, args: tuple(tr.withgradient(f, *args)),
    'gradient': lambda f, args: (tr.withgradient(f, *args).val, tr.gradient(f, *args)),
    'AutoTracked': lambda f, args: tuple(tr.withgradient(f, tr.AutoTracked(), *args)),
    'AutoCompiled': _autocompiled,
    'GradientTape': _tape,
    'GradientTape.gradient': _tape_gradient,
}


@pytest.mark.parametrize('out', list(OUTPUTS))
@pytest.mark.parametrize('arg', list(ARGS))
def test_gradient_paths_agree(arg, out):
    args, core = ARGS[arg]
    f = _function(core, out)
    outcomes = {path: _outcome(lambda run=run: run(f, args))
                for path, run in GRADIENT_PATHS.items()}
    _agree(outcomes, 'withgradient')
    ok = outcomes['withgradient'][0] == 'ok'
    assert ok == (out in ('scalar', '0-d array', 'tuple (loss, aux)', 'dict', 'int'))


@pytest.mark.parametrize('out', list(OUTPUTS))
@pytest.mark.parametrize('arg', sorted(NUMERIC))
def test_autograd_agrees(arg, out):
    """``tracked.autograd.value_and_grad`` over every argument: the eager gradient, with
    autograd's zeros where tracked gives None."""
    args, core = ARGS[arg]
    f = _function(core, out)
    eager = _outcome(lambda: tr.withgradient(f, *args))
    if eager[0] == 'ok':
        val, grads = eager[1]
        eager = ('ok', (val, tuple(
            np.zeros(np.shape(a), np.result_type(a, 0.0)) if g is None else g
            for g, a in zip(grads, args))))
    got = _outcome(lambda: value_and_grad(f, tuple(range(len(args))))(*args))
    _agree({'withgradient': eager, 'autograd': got}, 'withgradient')


@pytest.mark.parametrize('out', list(OUTPUTS))
@pytest.mark.parametrize('arg', list(ARGS))
def test_distributed_shard_gradient_agrees(arg, out):
    """A shard's gradient on a worker (no cluster needed): the model is the first argument,
    the shard the others; the value is the loss (auxiliary outputs dropped)."""
    pytest.importorskip('distributed')            # Dask: an optional extra
    from tracked.distributed import gradients
    args, core = ARGS[arg]
    f = _function(core, out)
    model, shard = args[0], args[1:]

    def eager():
        val, (g,) = tr.withgradient(lambda m: f(m, *shard), model)
        loss = val[0] if isinstance(val, tuple) else \
            next(iter(val.values())) if isinstance(val, dict) else val
        paths = flatten(model, tr.arguments.differentiable)[1].paths()
        return float(loss), [follow(g, p) for p in paths]

    def worker():
        val, flat, _, _ = gradients.gradient_part(gradients.ShardLoss(f), model, shard, False,
                                                  'shard', 'sum')
        return val, flat
    _agree({'eager': _outcome(eager), 'distributed': _outcome(worker)}, 'eager')


# --------------------------------------------------------------------------
# jacobian and hessian: tr.jacobian (both modes) and JacobianTape, tr.hessian and HessianTape
# --------------------------------------------------------------------------

JACOBIAN_PATHS = {
    'jacobian': lambda f, args: tuple(tr.withjacobian(f, *args, mode='reverse')),
    'jacobian forward': lambda f, args: tuple(tr.withjacobian(f, *args, mode='forward')),
    'JacobianTape': lambda f, args: tuple(tr.JacobianTape(f, *args).withjacobian(*args)),
}


@pytest.mark.parametrize('out', list(OUTPUTS))
@pytest.mark.parametrize('arg', list(ARGS))
def test_jacobian_paths_agree(arg, out):
    args, core = ARGS[arg]
    if arg == 'complex':       # a Jacobian in a complex argument is refused on every path
        f = _function(core, out)
        for run in JACOBIAN_PATHS.values():
            with pytest.raises(ValueError, match='complex argument is ambiguous'):
                run(f, args)
        return
    f = _function(core, out)
    outcomes = {path: _outcome(lambda run=run: run(f, args))
                for path, run in JACOBIAN_PATHS.items()}
    _agree(outcomes, 'jacobian')
    ok = outcomes['jacobian'][0] == 'ok'
    assert ok == (out in ('scalar', '0-d array', 'vector', 'int'))
    if ok and out in ('scalar', '0-d array'):
        # the Jacobian of a scalar is its gradient, one row
        grads = tr.gradient(f, *args)
        jacs = outcomes['jacobian'][1][1]
        for g, J in zip(flatten(grads)[0], flatten(jacs)[0]):
            np.testing.assert_allclose(np.reshape(J, np.shape(g)), g)


HESSIAN_ARGS = ['array', 'float', 'int array', 'float32 array']
HESSIAN_PATHS = {
    'hessian': lambda f, x: tr.hessian(f, x),
    'hessian_reverse': lambda f, x: tr.hessian_reverse(f, x),
    'HessianTape': lambda f, x: tr.HessianTape(f, x).hessian(x),
    'autograd': lambda f, x: ag_hessian(f)(x),
}


@pytest.mark.parametrize('out', list(OUTPUTS))
@pytest.mark.parametrize('arg', HESSIAN_ARGS)
def test_hessian_paths_agree(arg, out):
    (x,), core = ARGS[arg]
    f = _function(lambda a: core(a) * np.sum(a), out)
    outcomes = {path: _outcome(lambda run=run: run(f, x)) for path, run in HESSIAN_PATHS.items()}
    if outcomes['hessian'][0] == 'ok':      # autograd's shape: x.shape * 2
        outcomes['autograd'] = ('ok', np.reshape(outcomes['autograd'][1],
                                                 np.shape(outcomes['hessian'][1])))
    _agree(outcomes, 'hessian')


# --------------------------------------------------------------------------
# tr.Const and tr.Duplicated, with every backend
# --------------------------------------------------------------------------

def _model():
    return {'w': np.array([1.0, -2.0]), 'b': 0.5, 'act': 'tanh', 'n': np.array([1, 2])}


def _loss(m, x):
    return np.sum(np.tanh(m['w'] * x) * m['n']) + m['b'] * np.sum(x)


@pytest.mark.parametrize('out', list(OUTPUTS))
def test_duplicated_and_const_with_every_backend(out):
    """The stored gradient is the eager gradient of the model's trainable arrays, whatever
    the backend; a plain argument next to a Duplicated one counts as Const."""
    x = np.array([0.3, 0.7])
    f = _function(_loss, out)

    def eager():
        val, (g, _) = tr.withgradient(f, _model(), x)
        w = np.zeros(2) if g['w'] is None else g['w']     # the storage: zeros
        return val, {'w': w, 'b': None, 'act': None, 'n': None}
    outcomes = {'eager': _outcome(eager)}
    for name, backend in (('default', ()), ('AutoTracked', (tr.AutoTracked(),)),
                          ('AutoCompiled', (tr.AutoCompiled(compile=False),))):
        for const in (True, False):
            def run(backend=backend, const=const):
                dup = tr.Duplicated(_model())
                for _ in range(3):
                    val, (g, gx) = tr.withgradient(f, *backend, dup,
                                                   tr.Const(x) if const else x)
                assert g is dup.dval and gx is None
                return val, g
            outcomes[f'{name}, {"Const" if const else "plain"} x'] = _outcome(run)
    _agree(outcomes, 'eager')


def test_annotations_are_taken_by_gradient_alone():
    x = np.array([0.3, 0.7])
    dup = tr.Duplicated(_model())
    with pytest.raises(TypeError, match='tr.Const marks the arguments'):
        tr.gradient(lambda x: np.sum(x), tr.Const(x))
    with pytest.raises(TypeError, match='zero=False adds to the gradient'):
        tr.gradient(lambda x: np.sum(x), x, zero=False)
    for run in (lambda: tr.pullback(_loss, dup, tr.Const(x)),
                lambda: tr.jacobian(_loss, dup, tr.Const(x)),
                lambda: tr.GradientTape(_loss, dup, tr.Const(x)),
                lambda: tr.JacobianTape(_loss, dup, x),
                lambda: tr.HessianTape(lambda d: np.sum(d.val['w']), dup)):
        with pytest.raises(TypeError, match=r'does not take tr\.(Duplicated|Const) arguments'):
            run()


def test_list_output_is_an_error_on_every_path():
    """The issue's example: a list is not a (loss, aux) pair, on any path."""
    f = lambda x: [np.sum(x * x), np.sum(x)]     # noqa: E731
    runs = [lambda: tr.gradient(f, X), lambda: tr.gradient(f, tr.AutoCompiled(), X),
            lambda: tr.GradientTape(f, X).gradient(X), lambda: tr.hessian(f, X),
            lambda: tr.HessianTape(f, X)]
    for run in runs:
        with pytest.raises(ValueError, match=r'needs f to return a real scalar .*f returned '
                                             r'list \(return a tuple \(loss, aux\)'):
            run()
    # the tuple is the (loss, aux) form
    val, (g,) = tr.withgradient(lambda x: tuple(f(x)), X)
    assert val[1] == 6.0
    np.testing.assert_array_equal(g, 2 * X)
