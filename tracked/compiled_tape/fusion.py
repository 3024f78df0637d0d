"""Elementwise fusion: which instructions fuse, their scalar form, and fusion groups.

An instruction fuses into a loop when its primitive's ``kernel`` (registry.py) is
a scalar template such as ``'({0} * {1})'`` or ``'np.sin({0})'`` (the operands by
position), or one of the tags that have a scalar form here: ``power`` (cheap
forms for constant exponents), ``clip``, ``astype`` and ``copy``.  Everything is
keyed on that field, never on a rule's display name, so renaming a rule changes
nothing that fuses.

The planner collects consecutive fusible instructions of one shape in a
``FusionGroup`` (with the full sums and the scatter-adds it can accumulate in the
same loop) and, when the group closes, turns each chunk of it into a
``loops.Loop`` with ``FusionGroup.loop``.
"""
import re
from typing import Any

import numpy as np

from .buffers import Storage, dtype_code
from .codegen import MAX_NDIM
from .loops import Loop
from .record import Ref

__all__ = ['ADD', 'COPY', 'is_fusible', 'scalar_form', 'astype_template', 'fusion_obstacle',
           'FusionGroup']

ADD = '({0} + {1})'      # np.add's template (rules/elementwise.py): scatter chains key on it
COPY = '{0}'
SELECT = '({1} if {0} else {2})'          # np.where's
# Kernels whose template gives a bool from bools (comparisons and logical functions,
# non-differentiable, are recognised by the instruction's kind); arithmetic on bools
# would give integers in numba.
_BOOL_SAFE = frozenset({SELECT, COPY, 'copy', 'astype'})
_TAG_ARITY = {'power': 2, 'clip': 3, 'astype': 2, 'copy': 1}
_ASTYPE = {'F': 'np.float64({0})', 'f': 'np.float32({0})', 'I': 'np.int64({0})',
           'B': '({0} != 0)'}
_CHEAP_POWERS = {2.0: '({0} * {0})', 1.0: '(+{0})', 3.0: '({0} * {0} * {0})',
                 0.5: 'np.sqrt({0})', -1.0: '(1.0 / {0})', -2.0: '(1.0 / ({0} * {0}))',
                 4.0: '(({0} * {0}) * ({0} * {0}))'}


def _template(kernel):
    return isinstance(kernel, str) and '{0}' in kernel


def is_fusible(kernel):
    """Whether primitives with this ``kernel`` field have a scalar form.

    >>> is_fusible('({0} * {1})'), is_fusible('power'), is_fusible('sum'), is_fusible(None)
    (True, True, False, False)
    """
    return _template(kernel) or kernel in _TAG_ARITY


def _arity(kernel):
    if _template(kernel):
        return len(set(re.findall(r'\{(\d+)\}', kernel)))
    return _TAG_ARITY[kernel]


def astype_template(dtype):
    """The scalar template casting to ``dtype`` (a kernel dtype).

    >>> astype_template(np.int64)
    'np.int64({0})'
    """
    return _ASTYPE[dtype_code(dtype)]


def scalar_form(ins):
    """``(template, args)``: instruction ``ins`` as a scalar expression whose
    placeholders ``{0}, {1}, ...`` take ``args`` (its ``Ref`` and constant arguments)
    in order.  A cheap power form leaves its constant exponent unused."""
    kernel = ins.prim.kernel
    if kernel == 'power':
        e = ins.args[1]
        cheap = None if type(e) is Ref else _cheap_power(np.asarray(e)[()])
        return cheap or 'np.power({0}, {1})', ins.args
    if kernel == 'astype':
        return astype_template(ins.dtype), ins.args[:1]
    if kernel == 'copy':
        return COPY, ins.args
    if kernel == 'clip':
        x, lo, hi = ins.args
        template, args = '{0}', [x]
        for fn, bound in (('np.maximum', lo), ('np.minimum', hi)):
            if bound is not None:
                template = f'{fn}({template}, {{{len(args)}}})'
                args.append(bound)
        return template, args
    if _OPERAND_VALUED.search(kernel):
        return f'bool({kernel})', ins.args
    return kernel, ins.args


# Python's ``and``/``or`` give one of their operands (``2.0 and 3.0`` is 3.0), where
# NumPy's logical functions give a bool: such a template's value is cast.
_OPERAND_VALUED = re.compile(r'\b(and|or)\b')


def _cheap_power(e):
    """A template for ``x ** e`` without ``np.power`` for common constant exponents."""
    try:
        return _CHEAP_POWERS.get(float(e))
    except (TypeError, ValueError):
        return None


def fusion_obstacle(ins, instrs):
    """Why ``ins`` cannot be computed in a fused loop; None when it can."""
    kernel = ins.prim.kernel
    if not is_fusible(kernel):
        return f'no kernel form for {ins.name}'
    if ins.kwargs:
        return 'keyword arguments: ' + ', '.join(ins.kwargs)
    if len(ins.args) != _arity(kernel):
        return f'{len(ins.args)} arguments; its kernel takes {_arity(kernel)}'
    if dtype_code(ins.dtype) is None:
        return f'{ins.dtype}: no kernel dtype'
    if len(ins.shape) > MAX_NDIM:
        return f'{len(ins.shape)}-d: kernels take at most {MAX_NDIM} dimensions'
    if ins.dtype.kind == 'b' and ins.kind != 'nondiff' and kernel not in _BOOL_SAFE:
        return f'bool result of {ins.name}: arithmetic on bools'
    if kernel == 'power' and ins.dtype.kind != 'f':
        return f'{ins.dtype} power: only float powers have a kernel'
    for a in scalar_form(ins)[1]:
        if type(a) is Ref:
            x = instrs[a.i]
            if x.dtype is None:
                return f'operand %{a.i} is not an array'
            if dtype_code(x.dtype) is None:
                return f'operand %{a.i} is {x.dtype}: no kernel dtype'
            if len(x.shape) > len(ins.shape):
                return f'operand %{a.i} has more dimensions than the result'
        elif not (_scalar_const(a) or (isinstance(a, np.ndarray) and dtype_code(a.dtype)
                                       and a.ndim <= len(ins.shape))):
            return f'constant operand {type(a).__name__} {getattr(a, "dtype", "")}'.rstrip()
    return None


def _scalar_const(v):
    return isinstance(v, (bool, int, float, np.generic)) or (
        isinstance(v, np.ndarray) and v.ndim == 0)


class FusionGroup:
    """An open run of fused elementwise instructions of one shape.

    Besides its instructions, the loop can accumulate full sums and means of them
    (``reductions``: their results are ``pending``, readable only after the loop) and
    add them into regions (``scatters``: scatter chains, see chains.py).
    """

    def __init__(self, shape):
        self.shape = shape
        self.instrs = []          # Instr, in order
        self.members = set()      # their indices, and those of reductions and scatters
        self.pending = set()      # results of reductions: not usable inside the group
        self.reductions = []      # (instr, operand instr index, 'sum'|'mean')
        self.scatters = []        # (operand instr index, region storage)
        self.chains = set()       # scatter chains accumulated into

    def loop(self, chunk, stored, mem):
        """The ``Loop`` computing ``chunk`` (consecutive instructions of the group),
        writing the values in ``stored`` to their storages in ``mem`` (buffers.Memory)."""
        loop = Loop(self.shape)
        keys = {}                 # operand key -> index in loop.operands
        op_of: dict[int, Any] = {}  # instruction -> its op in the loop

        def operand(key, storage):
            if key not in keys:
                keys[key] = len(loop.operands)
                loop.operands.append(storage)
            return ('x', keys[key])
        # Memory operands first (in order of first use), then literal constants: the
        # order names the tokens and orders T, so a tape's kernels keep their names
        # (and their compiled code on disk) across versions.
        forms = [scalar_form(ins) for ins in chunk]
        tokens = []               # per instruction, per argument: ('x', k), ('t', j), None
        for ins, (_, args) in zip(chunk, forms):
            toks = []
            for a in args:
                if type(a) is Ref:
                    toks.append(('t', op_of[a.i]) if a.i in op_of else
                                operand(('r', a.i), mem.storages[a.i]))
                elif isinstance(a, np.ndarray) and a.ndim > 0:
                    toks.append(operand(('a', len(keys)), mem.const(a)))   # not shared
                else:
                    toks.append(None)
            tokens.append(toks)
            op_of[ins.i] = len(op_of)
        for ins, (template, args), toks in zip(chunk, forms, tokens):
            single = ins.dtype == np.float32
            for n, a in enumerate(args):
                if toks[n] is None:
                    v = np.asarray(a)
                    # a float constant of a float32 operation is float32, as in NumPy
                    dt = np.dtype(np.float32) if single and v.dtype.kind == 'f' else v.dtype
                    toks[n] = operand(('c', id(a), repr(a), dt.char),
                                      Storage('const', dt, value=v[()]))
            if single:
                # numba computes float32 with float64 literals in float64: round each
                # result to float32, as NumPy does per operation
                template = f'np.float32({template})'
            loop.ops.append((template, toks))
        loop.stores = [(op_of[ins.i], mem.storages[ins.i]) for ins in chunk if ins.i in stored]
        loop.scatters = [(op_of[i], region) for i, region in self.scatters if i in op_of]
        loop.sums = [(op_of[src], op, mem.storages[rins.i]) for rins, src, op in self.reductions
                     if src in op_of]
        return loop
