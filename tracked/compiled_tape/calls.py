"""The calls of a compiled GradientTape: one generated straight-line function per tape.

The general call path (base.py) flattens the argument tree, checks every leaf,
fills an argument list, runs the VM, asks a getter for each output and rebuilds the
gradient tree: a few microseconds of Python per call, more than the kernels take on
small problems.  Once a ``GradientTape`` runs compiled, ``install`` replaces its
``withgradient`` and ``gradient`` with functions generated for its signature and
plan.  They take the leaves straight from the arguments (or with the structure's
generated matcher), write scalar inputs into the arena and call the entry once with
every array.  The entry is compiled for exactly the recorded dtypes and dimensions
(it refuses others with a TypeError, as numba's dispatcher did) and checks the shapes (-3):
no leaf is tested in Python.  Anything else -- another signature, a failed guard,
a step that runs in Python, an ``out=`` array overlapping an input -- goes to the
general path, which explains or handles it.

A call takes a frame (the arenas and the table the entry writes into: compiled.py)
from the program's pool and gives it back, so threads sharing the tape never share
memory they write.  For W4b (three array arguments) the generated ``withgradient``
reads::

    def withgradient(*args, out=None):
        if out is None:
            g0 = empty(OS0, OD0)
        else:
            hit = OUTS.get(id(out))                 # out= trees checked once each
            ol = hit[1] if hit is not None and hit[0] is out else out_leaves(tape, out)
            g0, = ol
        try:
            S = POP()
        except IndexError:                   # more calls under way than frames
            S = FRAME()
        try:
            r = vm(S.T, *args, g0)
            v = S.a[0][100]
        except TypeError:                    # another dtype, ndim, layout or count
            r = -3
        finally:
            PUSH(S)
        if r == -1:
            if out is None:
                grads = (g0, None, None, )
                return new(ValGrad, (v, grads))
            return new(ValGrad, (v, out))
        return GENERAL(tape, *args, out=out)

and ``gradient`` is the same without the value.
"""
from collections import namedtuple

import numpy as np

from .buffers import KERNEL_DTYPES
from .signature import out_leaves
from .trees import is_one_leaf, tree_literal, unflatten_args

__all__ = ['install', 'call_source', 'ValGrad']

ValGrad = namedtuple('ValGrad', ['val', 'grad'])
ValGrad.__doc__ = '``(val, grad)``: what a GradientTape\'s ``withgradient`` returns.'


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
    c = tape.compiled
    if c.py_steps or c.layout.copies or not tape.single_value or 0 not in c.scalar_outputs:
        return None, None
    grad_outs = list(range(len(tape.grad_leaves)))
    if sorted(c.out_indices) != grad_outs:
        return None, None                    # an output array of a dtype without kernels
    dtypes = list(KERNEL_DTYPES)
    value_dt, value_off = c.scalar_outputs[0]
    env = {'empty': np.empty, 'vm': c.vm, 'POP': c.pool.pop, 'PUSH': c.pool.append,
           'FRAME': c.new_frame, 'ValGrad': ValGrad, 'new': tuple.__new__,
           'out_leaves': out_leaves, 'OUTS': tape.checked_outs, 'tape': tape,
           'unflatten_args': unflatten_args, 'DEFS': tape.arg_defs, 'WRT': tape.wrt,
           # the structure and untied arrays only (the entry checks dtypes and shapes),
           # unless an int is a constant of the tape: then its value too
           'MATCH': tape.checker if tape.static else tape.treedef.matcher(
               [(cls, {}) if cls is np.ndarray else None for cls, _ in tape.checks],
               distinct=tape.per_arg)}
    nleaves = len(tape.specs)
    # the leaves: the arguments themselves when each is one array passed to the entry
    direct = all(is_one_leaf(d) for d in tape.arg_defs) and c.leaf_positions == list(range(nleaves))
    head = []
    leaf: list[str] = []                # the matched leaves' expressions (not direct)
    scalars = []                        # writing the scalar inputs into the frame's arena
    if not direct:
        head += ['    lv = MATCH(args)', '    if lv is None:',
                 '        return GENERAL(tape, *args, out=out)']
        leaf = [f'lv[{p}]' for p in range(nleaves)]
        for pos, dt, off in c.scalar_inputs:
            kind = tape.specs[pos][1]
            head += [f'    if type({leaf[pos]}) is not {"float" if kind == np.float64 else "int"}:',
                     '        return GENERAL(tape, *args, out=out)']
            scalars.append(f'        S.a[{dtypes.index(dt)}][{off}] = {leaf[pos]}')
    outs = [f'g{k}' for k in grad_outs]
    arrays = ['*args'] if direct else [leaf[pos] for pos in c.leaf_positions]
    for k, (shape, dtype) in enumerate(tape.out_specs):
        env[f'OS{k}'], env[f'OD{k}'] = shape, dtype
    take = ['    if out is None:'] + [f'        g{k} = empty(OS{k}, OD{k})' for k in grad_outs]
    take += ['    else:', '        hit = OUTS.get(id(out))',
             '        ol = hit[1] if hit is not None and hit[0] is out else out_leaves(tape, out)']
    if outs:
        take.append(f'        {", ".join(outs)}{"," if len(outs) == 1 else ""} = ol')
    take += ['    try:', '        S = POP()', '    except IndexError:', '        S = FRAME()']
    call = f'        r = vm(S.T, {", ".join(arrays + [f"g{k}" for k in c.out_indices])})'
    L = []
    for name, value, general in (('withgradient', 'v', 'GENERAL'),
                                 ('gradient', None, 'GENERAL_G')):
        def result(tree):
            return f'new(ValGrad, ({value}, {tree}))' if value else tree
        L += [f'def {name}(*args, out=None):'] + [x.replace('GENERAL', general) for x in head]
        L += take + ['    try:'] + scalars + [call]
        if value:
            L.append(f'        v = S.a[{dtypes.index(value_dt)}][{value_off}]')
        L += ['    except TypeError:            # another dtype, ndim, layout or count',
              '        r = -3', '    finally:', '        PUSH(S)']
        L += ['    if r == -1:', '        if out is None:', '            ' + _grads(tape, outs),
              f'            return {result("grads")}', f'        return {result("out")}']
        L += [f'    return {general}(tape, *args, out=out)', '', '']
    env['GENERAL'] = type(tape).withgradient
    env['GENERAL_G'] = type(tape).gradient
    return '\n'.join(L).rstrip('\n') + '\n', env


def _grads(tape, outs):
    """The statement binding ``grads``, the gradient tree of a default call: literals
    for arguments that are arrays, dicts, lists and tuples of them, else
    ``unflatten_args``."""
    flat = ['None'] * len(tape.specs)
    for k, p in enumerate(tape.grad_leaves):
        flat[p] = f'{outs[k]}[()]' if tape.pyfloat[p] else outs[k]
    parts = []
    start = 0
    for a, d in enumerate(tape.arg_defs):
        expr = tree_literal(d, flat[start:start + d.num_leaves]) if a in tape.wrt else 'None'
        if expr is None:
            return f'grads = unflatten_args(DEFS, [{", ".join(flat)}], statics=False, only=WRT)'
        parts.append(expr)
        start += d.num_leaves
    return 'grads = (' + ''.join(x + ', ' for x in parts) + ')'
