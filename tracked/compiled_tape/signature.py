"""What a replay must match: the recorded arguments' leaves, and the arrays of ``out=``.

A tape is recorded for one structure of arguments, one shape and dtype per leaf,
and the values of Python ints outside ``wrt`` (constants of the tape).  The common
case is checked by code generated for the recorded structure (``TreeDef.matcher``,
and the straight-line calls of calls.py); the functions here are the general path
and say exactly what differs when something does.
"""
import operator

import numpy as np

from ..tree_util import flatten
from .trees import describe, flatten_args, leaf_path, unflatten_args

__all__ = ['leaf_spec', 'as_input', 'check_leaves', 'out_leaves', 'out_matcher', 'check_out',
           'aliased_out_error']


def leaf_spec(x):
    """``(shape, dtype)`` of a leaf as the tape holds it (Python numbers as 0-d).

    >>> leaf_spec(1.5), leaf_spec(np.zeros((2, 3), np.float32))
    (((), dtype('float64')), ((2, 3), dtype('float32')))
    """
    if type(x) is float:
        return ((), np.dtype(np.float64))
    if type(x) is int:
        return ((), np.dtype(np.int64))
    return (x.shape, x.dtype)


def as_input(x, diff):
    """The value an input leaf holds on the tape (``diff``: it is differentiated)."""
    t = type(x)
    if t is float:
        return np.float64(x)
    if t is int:
        return np.int64(x)                  # stays usable as an index or size
    if diff and x.dtype.kind in 'iu' and x.ndim:
        x = x.astype(np.float64)
    return x


def check_leaves(tape, args):
    """The leaves of ``args`` if they match what ``tape`` was recorded for, else a
    ``ValueError`` naming the expected and the given."""
    leaves = tape.checker(args)          # generated for the recorded structure
    if leaves is not None:
        return leaves
    what = tape.kind_name
    if len(args) != tape.nargs:
        raise ValueError(f'this {what} was recorded for {tape.nargs} arguments, got {len(args)}')
    leaves, arg_defs = flatten_args(args)
    if arg_defs != tape.arg_defs:
        raise ValueError(f'the arguments have another structure than the recorded '
                         f'ones: expected {describe(tape.arg_defs)}, given '
                         f'{describe(arg_defs)}. Record a new tape for them.')
    specs = tape.specs
    for p, x in enumerate(leaves):
        s = specs[p]
        t = type(x)
        if t is float or t is int:
            if s[0] != () or s[1] != leaf_spec(x)[1]:
                break
            if t is int and p in tape.static and x != tape.static[p]:
                raise ValueError(
                    f'{leaf_path(tape.arg_defs, p)} is {x}; the {what} was '
                    f'recorded with {tape.static[p]} (an integer outside wrt is a constant '
                    f'of the tape). Record a new tape for it.')
            continue
        if x.shape != s[0] or x.dtype != s[1]:
            break
    else:
        return leaves
    x = leaves[p]
    given = leaf_spec(x)
    raise ValueError(f'{leaf_path(tape.arg_defs, p)} has shape {given[0]} and dtype '
                     f'{given[1]}; the {what} was recorded for shape {s[0]} and dtype '
                     f'{s[1]}. Record a new tape for these shapes (tr.AutoCompiled() '
                     f'keeps one per signature).')


# --------------------------------------------------------------------------
# out=: the gradient arrays of an earlier call
# --------------------------------------------------------------------------

MAX_OUTS = 8     # out= trees remembered per tape: one per thread, or double buffering


def out_leaves(tape, out):
    """The arrays of ``out`` (a gradient tree returned by ``tape``), checked.

    ``tape.checked_outs`` remembers a few trees, so that threads with an ``out=`` each do
    not check theirs on every call: a tuple of arrays by identity (it cannot
    change), another tree by its arrays once its matcher found them (shapes and
    dtypes checked).
    """
    known = tape.checked_outs
    hit = known.get(id(out))
    if hit is not None and hit[0] is out:
        return hit[1]
    checker = tape.__dict__.get('out_checker')
    if checker is None:
        checker = tape.out_checker = out_matcher(tape)
    leaves = checker(out)
    simple = type(out) is tuple and all(type(g) is np.ndarray or g is None for g in out)
    if leaves is None:
        leaves = [g for g in out if g is not None] if simple else \
            flatten(out, lambda g: isinstance(g, np.ndarray))[0]
    elif not simple and leaves:
        hit = known.get(id(leaves[0]))
        if hit is not None and hit[0] is None and all(map(operator.is_, leaves, hit[1])):
            return leaves
    check_out(tape, leaves)
    if len(known) >= MAX_OUTS:
        known.clear()
    # an entry keeps what it identifies alive, so that no other object takes its id
    if simple:
        known[id(out)] = (out, leaves)
    elif leaves:
        known[id(leaves[0])] = (None, leaves)
    return leaves


def out_matcher(tape):
    """A matcher of gradient trees shaped like ``tape``'s (``out=``)."""
    flat = [None] * len(tape.specs)
    for (shape, dtype), p in zip(tape.out_specs, tape.grad_leaves):
        flat[p] = np.empty(shape, dtype)
    template = unflatten_args(tape.arg_defs, flat, statics=False, only=tape.wrt)
    leaves, treedef = flatten(template, lambda g: type(g) is np.ndarray)
    assert [id(g) for g in leaves] == [id(flat[p]) for p in tape.grad_leaves]
    return treedef.matcher([(np.ndarray, {'shape': g.shape, 'dtype': g.dtype})
                            for g in leaves])


def aliased_out_error():
    """The error of a call whose ``out=`` array shares memory with one of its inputs."""
    return ValueError('an out= array shares memory with an input of this call: the gradient '
                      'would overwrite values still to be read. Pass gradient arrays that '
                      'are not arguments (the tuple returned by an earlier call, or '
                      'np.zeros_like of each).')


def check_out(tape, leaves):
    """``leaves`` if they can receive ``tape``'s gradients, else a ``ValueError``."""
    for k, g in enumerate(leaves):
        if any(isinstance(h, np.ndarray) and np.may_share_memory(g, h) for h in leaves[:k]):
            raise ValueError('out= gives two gradients overlapping arrays: each gradient '
                             'needs its own (pass the tuple returned by tape.gradient)')
    if len(leaves) != len(tape.grad_leaves):
        raise ValueError(f'out= holds {len(leaves)} arrays; this tape has '
                         f'{len(tape.grad_leaves)} '
                         f'gradients (pass the tuple returned by tape.gradient)')
    for g, (shape, dtype), p in zip(leaves, tape.out_specs, tape.grad_leaves):
        if not isinstance(g, np.ndarray) or g.shape != shape or g.dtype != dtype \
                or not g.flags.c_contiguous or not g.flags.writeable:
            raise ValueError(f'out= for {leaf_path(tape.arg_defs, p)} must be a '
                             f'writeable C-contiguous array of shape {shape} and dtype '
                             f'{dtype}, got {type(g).__name__} {getattr(g, "shape", "")} '
                             f'{getattr(g, "dtype", "")}')
    return leaves
