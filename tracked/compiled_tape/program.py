"""A program: the live instructions of a recording, deduplicated, and its NumPy replay."""
from typing import Any

import numpy as np

from ..rules.indexing import SCATTER_ADD
from ..rules.products import matmul_forward
from .guards import Guard, guard_error
from .record import Instr, Ref, instr_text

__all__ = ['Program']

FREE_BYTES = 1 << 16     # values from this size are dropped after their last reader


def _nbytes(v):
    return v.nbytes if isinstance(v, np.ndarray) else 0


class Program:
    """Instructions reachable from ``outputs`` (and every guard), in recording order.

    Identical instructions (same function, arguments and keyword arguments) are
    merged: nested backward passes recompute the same saved quantities many times.
    ``fused``: the adds the replay runs as ``a[idx] += g`` (``_fusions``).
    """

    def __init__(self, rec, outputs):
        live = set()
        stack = [o.i for o in outputs if type(o) is Ref] + [g.i for g in rec.guards]
        while stack:
            i = stack.pop()
            if i not in live:
                live.add(i)
                stack.extend(rec.instrs[i].refs())
        new: dict[int, int] = {}          # recorded index -> index here
        seen: dict[Any, int] = {}
        self.instrs: list[Instr] = []
        for i in sorted(live):
            ins = rec.instrs[i]
            args = _remap(ins.args, new)
            key = None
            if ins.kind != 'input':
                key = _cse_key(ins.fn, args, ins.kwargs)
                if key is not None and key in seen:
                    new[i] = seen[key]
                    continue
            j = len(self.instrs)
            new[i] = j
            self.instrs.append(Instr(j, ins.kind, ins.fn, ins.prim, ins.name, args,
                                     ins.kwargs, ins.value, ins.pos))
            if key is not None:
                seen[key] = j
        self.guards = [Guard(new[g.i], g.kind, g.recorded, g.where) for g in rec.guards
                       if g.i in new]
        self.outputs = [_remap(o, new) if type(o) is Ref else o for o in outputs]
        self.guards_at: dict[int, list[Guard]] = {}
        for g in self.guards:
            self.guards_at.setdefault(g.i, []).append(g)
        # made now, with the recording, so that the first replay is as quick as the next
        self._steps = self._compile_steps()

    def __getstate__(self):
        state = dict(self.__dict__)
        state['_steps'] = None             # the replay's closures: rebuilt on first use
        state.pop('_viewed', None)
        return state

    # -- NumPy replay -------------------------------------------------------------
    def _compile_steps(self):
        """What ``run`` needs: per input (index, leaf, guards); per other instruction
        (index, number of operands read from env directly (0: use the argument builder),
        their env slots, function, argument builder, keywords, guards or None, the large
        values it reads last or None: dropped after it); the template of env (a slot per
        instruction, then the constant operands)."""
        last = {}                          # value -> the last instruction reading it
        readers: dict[int, int] = {}       # value -> how many instructions read it
        self._viewed = set()               # values some non-ufunc reads (it may view them)
        for ins in self.instrs:
            for j in ins.refs():
                last[j] = ins.i
                readers[j] = readers.get(j, 0) + 1
                if type(ins.fn) is not np.ufunc:
                    self._viewed.add(j)
        keep = {o.i for o in self.outputs if type(o) is Ref}
        fused = self.fused = self._fusions(last, readers, keep)
        for add_i, (s_i, _, _) in fused.items():       # g is read by the add instead
            g = self.instrs[s_i].args[0].i
            last[g] = max(last[g], add_i)
        dead: dict[int, list[int]] = {}
        for j, i in last.items():
            ins = self.instrs[j]
            if j not in keep and ins.kind != 'input' and _nbytes(ins.value) >= FREE_BYTES:
                dead.setdefault(i, []).append(j)
        inputs: list[Any] = []
        body: list[Any] = []
        consts: list[Any] = []               # plain operands of 1- and 2-operand calls
        n = len(self.instrs)
        skipped = {s_i for s_i, _, _ in fused.values()}
        for ins in self.instrs:
            guards = self.guards_at.get(ins.i) or None
            if ins.kind == 'input':
                inputs.append((ins.i, ins.pos, guards))
                continue
            if ins.i in skipped:             # computed by the add that reads it
                continue
            if ins.i in fused:
                s_i, a_i, idx = fused[ins.i]
                body.append((ins.i, 2, a_i, self.instrs[s_i].args[0].i, _add_at(idx), None,
                             {}, None, dead.get(ins.i)))
                continue
            fn = ins.fn
            if fn is matmul_forward and not ins.kwargs:
                fn = np.matmul               # its wrapper only refuses keywords
            k = self._reusable(ins, dead.get(ins.i, ()))
            if k is not None:
                fn = _into_operand(fn, k)
            # one or two operands, no keywords: read straight from env (constants are
            # kept after the instructions' values), no argument builder to call
            slots = [-1, -1]
            simple = not ins.kwargs and len(ins.args) in (1, 2)
            for m, a in enumerate(ins.args if simple else ()):
                if type(a) is Ref:
                    slots[m] = a.i
                elif type(a) in (tuple, list, dict):
                    simple = False
                else:
                    slots[m] = n + len(consts)
                    consts.append(a)
            arity = len(ins.args) if simple else 0
            body.append((ins.i, arity, slots[0], slots[1], fn, _arg_builder(ins.args),
                         ins.kwargs, guards, dead.get(ins.i)))
        return inputs, body, [None] * n + consts

    def _fusions(self, last, readers, keep):
        """``{add: (scatter, other operand, index)}`` for each ``np.add(a, scatter_add(g,
        idx, shape))`` whose scatter result only that add reads, at a slice, and whose
        other operand ``a`` is a fresh array of the result's shape and dtype that dies
        there: replayed as ``a[idx] += g`` (the eager backward sums a slice's cotangent
        the same way), without the scatter's zeroed array and the full addition.  W3 at
        n = 1e5 sums three slices' adjoints: four passes over the array fewer."""
        out: dict[int, tuple[int, int, Any]] = {}
        fresh: set[int] = set()           # values that are arrays of their own
        for ins in self.instrs:
            if ins.kind == 'input' or not isinstance(ins.value, np.ndarray):
                continue
            if ins.prim is SCATTER_ADD or (type(ins.fn) is np.ufunc and ins.fn.nout == 1):
                fresh.add(ins.i)
            if ins.fn is not np.add or ins.kwargs or len(ins.args) != 2 or \
                    not all(type(a) is Ref for a in ins.args) or ins.i in self.guards_at:
                continue
            for k in (0, 1):
                s, a = self.instrs[ins.args[k].i], self.instrs[ins.args[1 - k].i]
                if s.prim is not SCATTER_ADD or s.kwargs or len(s.args) != 3 or \
                        type(s.args[0]) is not Ref or readers.get(s.i) != 1 or \
                        s.i in keep or s.i in self.guards_at:
                    continue
                idx = s.args[1]
                if not (type(idx) is slice or type(idx) is tuple and idx and
                        all(type(x) is slice for x in idx)):
                    continue
                g = self.instrs[s.args[0].i].value
                if a.i == s.i or a.i not in fresh or last.get(a.i) != ins.i or \
                        readers.get(a.i) != 1 or a.i in keep or a.i in self._viewed or \
                        a.value.shape != ins.value.shape or a.value.dtype != ins.value.dtype \
                        or s.value.shape != ins.value.shape or \
                        np.result_type(g, a.value) != a.value.dtype:
                    continue
                out[ins.i] = (s.i, a.i, idx)
                fresh.add(ins.i)          # the add's result is a's array: its own
                break
        return out

    def _check(self, guards, v, i):
        for g in guards:
            if not g.holds(v):
                raise guard_error(g, v, self.instrs[i].name)

    def _reusable(self, ins, dying):
        """The position of an operand of ufunc ``ins`` whose array the result may be
        written into (``out=``), or None.  NumPy does this for temporaries when the
        reference count proves nothing else holds them; here the program proves it: the
        operand is a ufunc's fresh result, read last by ``ins`` and only by ufuncs (no
        view of it lives on), not an output, and of the result's shape and dtype."""
        fn = ins.fn
        if type(fn) is not np.ufunc or fn.nout != 1 or 'out' in ins.kwargs or \
                'where' in ins.kwargs or not isinstance(ins.value, np.ndarray):
            return None
        for k, a in enumerate(ins.args):
            if type(a) is Ref and a.i in dying and a.i not in self._viewed:
                src = self.instrs[a.i]
                if type(src.fn) is np.ufunc and isinstance(src.value, np.ndarray) and \
                        src.value.shape == ins.value.shape and src.value.dtype == ins.value.dtype:
                    return k
        return None

    def run(self, leaves):
        """Replay on ``leaves`` (the flattened, checked arguments); returns the outputs.

        A large value is dropped once its last reader has run, as the eager code drops
        it: kept to the end, W3's (n = 1e5) 20 temporaries made the replay 1.6x eager
        (a working set far beyond the caches, and no block for NumPy to reuse)."""
        steps = self._steps
        if steps is None:
            steps = self._steps = self._compile_steps()
        inputs, body, template = steps
        env = template.copy()
        for i, pos, guards in inputs:        # recorded first
            v = env[i] = leaves[pos]
            if guards is not None:
                self._check(guards, v, i)
        # the loop runs once per instruction: every test and call in it costs (W5: 264)
        for i, arity, a, b, fn, build, kwargs, guards, dead in body:
            if arity == 2:
                v = env[i] = fn(env[a], env[b])
            elif arity == 1:
                v = env[i] = fn(env[a])
            else:
                v = env[i] = fn(*build(env), **kwargs)
            if guards is not None:
                self._check(guards, v, i)
            if dead is not None:
                for j in dead:
                    env[j] = None
        return [env[o.i] if type(o) is Ref else o for o in self.outputs]

    # -- printing -------------------------------------------------------------------
    def lines(self):
        """One printed line per instruction: text, shape, dtype, guards."""
        out = []
        for ins in self.instrs:
            text = instr_text(ins)
            extra = ''.join(f'   [guard {g.kind} == {g.recorded!r} at {g.where}]'
                            for g in self.guards_at.get(ins.i, ()))
            out.append(f'{text:<60} : {ins.shape} {ins.dtype}{extra}')
        return out


def _add_at(idx):
    """``a[idx] += g``, returning ``a`` (a fused ``np.add(a, scatter_add(g, idx, ...))``)."""
    def add_at(a, g):
        a[idx] += g
        return a
    return add_at


def _into_operand(fn, k):
    """``fn`` (a ufunc) writing its result into its ``k``-th argument."""
    def into(*args, **kwargs):
        return fn(*args, out=args[k], **kwargs)
    return into


def _arg_builder(args):
    """A function ``env -> tuple of arguments`` for one instruction's argument template."""
    dyn = [(k, a) for k, a in enumerate(args)
           if type(a) is Ref or (type(a) in (tuple, list) and any(type(b) is Ref for b in a))]
    if not dyn:
        return lambda env, args=tuple(args): args
    if all(type(a) is Ref for _, a in dyn) and len(dyn) == len(args):
        idx = [a.i for a in args]
        if len(idx) == 1:
            i0 = idx[0]
            return lambda env: (env[i0],)
        if len(idx) == 2:
            i0, i1 = idx
            return lambda env: (env[i0], env[i1])
        return lambda env: tuple(env[i] for i in idx)

    def build(env):
        """The argument list with each ``Ref`` (also inside tuples and lists) read
        from ``env``."""
        out = list(args)
        for k, a in dyn:
            if type(a) is Ref:
                out[k] = env[a.i]
            else:
                out[k] = type(a)(env[b.i] if type(b) is Ref else b for b in a)
        return out
    return build


def _remap(a, new):
    """Argument ``a`` with its ``Ref`` indices mapped through ``new``."""
    if type(a) is Ref:
        return Ref(new[a.i])
    if type(a) in (tuple, list):
        return type(a)(_remap(b, new) for b in a)
    return a


def _freeze(v):
    """A hashable stand-in for an argument, equal for equal arguments; None if unknown.

    Small arrays are compared by content, large ones by identity.
    """
    t = type(v)
    if t is Ref:
        return ('%', v.i)
    if t in (tuple, list):
        parts = tuple(_freeze(b) for b in v)
        return None if any(p is None for p in parts) else (t.__name__, parts)
    if t is np.ndarray:
        if v.size <= 64:
            return ('a', v.dtype.str, v.shape, v.tobytes())
        return ('id', id(v))
    if isinstance(v, np.generic):
        return ('g', v.dtype.str, v.tobytes())
    if t is float:
        return ('f', v.hex())
    if t is slice:
        return ('s', _freeze(v.start), _freeze(v.stop), _freeze(v.step))
    if t is dict:
        items = tuple((k, _freeze(x)) for k, x in v.items())
        return None if any(x is None for _, x in items) else ('d', items)
    try:
        hash(v)
    except TypeError:
        return None
    return (t.__name__, v)


def _cse_key(fn, args, kwargs):
    """The key under which identical instructions merge; None: never merged."""
    a = _freeze(tuple(args))
    k = _freeze(kwargs) if kwargs else ()
    if a is None or k is None:
        return None
    try:
        hash((fn, a, k))
    except TypeError:
        return None
    return (fn, a, k)
