"""The calls of a compiled GradientTape: one generated straight-line function per tape.

The general call path (base.py) flattens the argument tree, checks every leaf,
fills an argument list, runs the VM, asks a getter for each output and rebuilds the
gradient tree: a few microseconds of Python per call, more than the kernels take on
small problems.  Once a ``GradientTape`` runs compiled, ``install`` replaces its
``withgradient`` and ``gradient`` with functions generated for its signature and
plan: they test each argument's type, shape and dtype inline (or with the
structure's generated matcher), write scalar inputs into the arena, call the numba
entry once with every array, and build the result from known places.  Anything
else -- another signature, a failed guard, a step that runs in Python, an ``out=``
not seen before -- goes to the general path, which explains or handles it.

For W4b (three array arguments) the generated ``withgradient`` reads::

    def withgradient(*args, out=None):
        if len(args) == 3:
            a0, a1, a2 = args
            if type(a0) is ndarray and a0.shape == S0 and a0.dtype is D0 and ...:
                if out is None:
                    g0 = empty(S0, D0)
                else:
                    ...                              # the arrays of out, checked once
                r = vm(T, P, a0, a1, a2, g0, 0)
                if r == -1:
                    return ValGrad(A0[12], (g0, None, None) if out is None else out)
        return general(*args, out=out)
"""
import numpy as np

from .signature import out_leaves
from .trees import _ARRAY_DEF, unflatten_args

__all__ = ['install', 'call_source']


def install(tape):
    """Give compiled ``tape`` generated ``withgradient`` and ``gradient`` when its plan
    allows (every step in numba, a scalar value in the arena); else leave the methods."""
    source, env = call_source(tape)
    if source is None:
        return
    exec(compile(source, f'<tracked call of {tape!r}>', 'exec'), env)
    tape.withgradient = env['withgradient']
    tape.gradient = env['gradient']


def call_source(tape):
    """``(source, globals)`` of the generated calls of ``tape``; ``(None, None)`` when
    its plan needs the general path on every call."""
    from .tapes import ValGrad, _single
    c = tape.compiled
    lay = c.layout
    if c._py_steps or lay.copies or tape._rebuild is not _single or 0 not in c._scalar_out \
            or tape.has_int_diff:
        return None, None
    grad_outs = list(range(len(tape.grad_leaves)))
    if sorted(c._outs) != grad_outs:
        return None, None                    # an output array of a dtype without kernels
    scalars = {pos: (arena, off) for arena, off, pos in c._scalars}
    arrays = set(c._leaves)
    env = {'ndarray': np.ndarray, 'empty': np.empty, 'vm': c.vm, 'T': c.T, 'P': c.P,
           'ValGrad': ValGrad, 'D': tape.__dict__, 'out_leaves': out_leaves, 'tape': tape,
           'general_wg': type(tape).withgradient, 'unflatten_args': unflatten_args,
           'DEFS': tape.arg_defs, 'WRT': tape.wrt, 'CHECK': tape._checker}
    arena, off = c._scalar_out[0]
    env['AV'] = arena
    # the leaves: inline per argument when every argument is one array or a float
    simple = all(d == _ARRAY_DEF for d in tape.arg_defs) and \
        all(p in arrays or p in scalars for p in range(len(tape.specs)))
    n = tape.nargs
    names = [f'a{a}' for a in range(n)]
    L = ['def withgradient(*args, out=None):']
    if simple:
        tests = []
        for p, (shape, dtype) in enumerate(tape.specs):
            env[f'S{p}'], env[f'D{p}'] = shape, dtype
            if p in scalars:
                tests.append(f'type(a{p}) is float' if dtype == np.float64 else
                             f'type(a{p}) is int' if dtype == np.int64 else 'False')
            else:
                tests.append(f'type(a{p}) is ndarray and a{p}.shape == S{p} and '
                             f'a{p}.dtype is D{p}')
        L.append(f'    if len(args) == {n}:')
        L.append(f'        {", ".join(names)}{"," if n == 1 else ""} = args')
        L.append('        if ' + ' and '.join(tests or ['True']) + ':')
        leaf = [f'a{p}' for p in range(len(tape.specs))]
    else:
        L.append('    lv = CHECK(args)')
        L.append('    if True:')
        L.append('        if lv is not None:')
        leaf = [f'lv[{p}]' for p in range(len(tape.specs))]
    ind = ' ' * 12
    # output arrays
    outs = [f'g{k}' for k in grad_outs]
    L.append(ind + 'if out is None:')
    for k, (shape, dtype) in enumerate(tape.out_specs):
        env[f'OS{k}'], env[f'OD{k}'] = shape, dtype
        L.append(ind + f'    g{k} = empty(OS{k}, OD{k})')
    L.append(ind + 'else:')
    L.append(ind + "    last = D.get('_out_checked')")
    L.append(ind + '    ol = last[1] if last is not None and out is last[2] else '
                   'out_leaves(tape, out)')
    if outs:
        L.append(ind + f'    {", ".join(outs)}{"," if len(outs) == 1 else ""} = ol')
    for pos, (a, o) in scalars.items():
        env[f'A{pos}'] = a
        L.append(ind + f'A{pos}[{o}] = {leaf[pos]}')
    call_args = [leaf[pos] for pos in c._leaves] + [f'g{k}' for k in c._outs]
    L.append(ind + f'r = vm(T, P, {"".join(x + ", " for x in call_args)}0)')
    L.append(ind + 'if r == -1:')
    L.append(ind + '    if out is not None:')
    L.append(ind + f'        return ValGrad(AV[{off}], out)')
    L.append(ind + '    ' + _grads(tape, outs, simple))
    L.append(ind + f'    return ValGrad(AV[{off}], grads)')
    L.append('    return general_wg(tape, *args, out=out)')
    L.append('')
    L.append('')
    L.append('def gradient(*args, out=None):')
    L.append('    return withgradient(*args, out=out)[1]')
    return '\n'.join(L) + '\n', env


def _grads(tape, outs, simple):
    """The statement binding ``grads``, the gradient tree of a default call."""
    flat = ['None'] * len(tape.specs)
    for k, p in enumerate(tape.grad_leaves):
        flat[p] = f'{outs[k]}[()]' if tape.pyfloat[p] else outs[k]
    if simple:                               # one leaf per argument
        parts = [flat[a] if a in tape.wrt else 'None' for a in range(tape.nargs)]
        return 'grads = (' + ''.join(x + ', ' for x in parts) + ')'
    return f'grads = unflatten_args(DEFS, [{", ".join(flat)}], statics=False, only=WRT)'
