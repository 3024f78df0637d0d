"""The rule registry: one entry per primitive, looked up by the NumPy callable.

A ``Primitive`` pairs a forward function with one pullback per argument position,
written as ``vjp(g, ans, *args, **kwargs)`` with NumPy operations (so that they are
differentiable themselves: that is what makes nesting and the traced backward pass
of compiled tapes work).  ``None`` marks a position that never carries a gradient.

Registering a NumPy function means one ``defvjp`` call (or one ``defcomposite`` for
a function written with other primitives).  The tables below are all the core
consults; this module imports nothing from the rest of the package.

A tape entry saves only what its pullbacks read (``Primitive.plan``), found from
the pullbacks' bytecode: ``x * 100`` keeps ``100`` but not ``x``, ``a - b`` keeps
nothing, ``np.sum(x)`` keeps ``x``'s shape and dtype.  Forward values are then
freed as the user's code drops them, as in hand-written NumPy (measured on W3,
n = 10^5: 2 arrays kept after the forward pass instead of 7, a peak of 6 during
the backward pass instead of 11).
"""
import dis
import importlib
import math
import pickle
import sys
import types
from typing import Any, Callable

import numpy as np

# NumPy callable (ufunc, function, or operator.*) -> Primitive | composite
RULES: dict[Any, Any] = {}
# NumPy callable -> True (or a compiled-tape kernel template): outputs are plain values
NONDIFF: dict[Any, Any] = {}
# ufunc -> the function that ``ufunc.reduce`` means (np.add -> np.sum)
REDUCE: dict[Any, Callable[..., Any]] = {}
# ufunc -> the function that ``ufunc.accumulate`` means (np.add -> np.cumsum)
ACCUMULATE: dict[Any, Callable[..., Any]] = {}
# callable -> its name in errors, where __module__ does not give it (SciPy's ufuncs)
NAMES: dict[Any, str] = {}
# composite's NumPy callable -> its array-operand parameters (defcomposite)
OPERANDS: dict[Any, Any] = {}
# NumPy callable -> why it has no rule on purpose (it raises the no-rule error)
UNSUPPORTED: dict[Any, str] = {}
# NumPy callable -> why no tracked value reaches it (NumPy does not dispatch)
UNDISPATCHED: dict[Any, str] = {}
# 'outer', 'at', 'reduceat', 'reduce', 'accumulate' -> fn(ufunc, *inputs, **kwargs): any
# other ufunc method call on tracked values (beyond REDUCE and ACCUMULATE); it raises the
# no-rule error for a ufunc it cannot do
UFUNC_METHODS: dict[str, Callable[..., Any]] = {}


# How an entry saves an argument of its primitive: not at all, as given, or as a
# ``Meta`` stand-in holding only its shape and dtype.
DROP, KEEP, META = 0, 1, 2
_META_ATTRS = frozenset(('shape', 'dtype', 'ndim', 'size'))
_META_CALLS = frozenset(('shape', 'ndim', 'size', 'shape_of'))   # np.shape(x), shape_of(x)
_CALL_OPS = frozenset(('PRECALL', 'CALL', 'CALL_FUNCTION', 'CALL_METHOD'))   # 3.10 to 3.13
_ALL = (True, None, 0)       # reads ans, {position: how}, every position from 0 on


def _uses(fn):
    """What pullback ``fn(g, ans, *args)`` reads: ``(ans?, {position: KEEP|META}, rest)``.

    ``rest`` is the first argument position read through ``*args`` (None: none).
    A parameter is META when every read of it is ``x.shape``/``.dtype``/``.ndim``/
    ``.size`` or ``np.shape(x)``/``np.ndim(x)``/``np.size(x)``/``shape_of(x)``.
    Anything that is not a plain Python function, or that could read its locals
    indirectly, is taken to read everything.  A pullback made by ``defpartials``
    reads what its partial derivative ``d(ans, *args)`` reads.
    """
    partial = getattr(fn, 'partial', None)
    if partial is not None:
        if not callable(partial):          # a constant partial derivative reads nothing
            return (False, {}, None)
        return _reads(partial, 1)
    return _reads(fn, 2)


def _reads(fn, first):
    """``_uses`` for a function whose parameter ``first - 1`` is ``ans`` and whose
    parameters from ``first`` on are the primitive's arguments."""
    code = getattr(fn, '__code__', None)
    if type(fn) is not types.FunctionType or code is None or code.co_argcount < first \
            or {'locals', 'vars', 'eval', 'exec'} & set(code.co_names):
        return _ALL
    names = code.co_varnames
    npos = code.co_argcount
    how = {}
    for name in code.co_cellvars:               # read by a nested function: as given
        how[name] = KEEP
    ins = list(dis.get_instructions(code))
    for k, i in enumerate(ins):
        if not i.opname.startswith('LOAD_'):
            continue
        loaded = i.argval if type(i.argval) is tuple else (i.argval,)   # 3.13: pairs
        for m, name in enumerate(loaded):
            if type(name) is not str or how.get(name) == KEEP:
                continue
            how[name] = META if m == len(loaded) - 1 and _meta_read(ins, k) else KEEP
    varargs = names[npos + code.co_kwonlyargcount] if code.co_flags & 4 else None
    rest = npos - first if varargs is not None and varargs in how else None
    return (names[first - 1] in how,
            {j - first: how[names[j]] for j in range(first, npos) if names[j] in how}, rest)


def _meta_read(ins, k):
    """Whether the load at ``ins[k]`` only feeds a shape/dtype read."""
    nxt = ins[k + 1] if k + 1 < len(ins) else None
    if nxt is not None and nxt.opname == 'LOAD_ATTR' and nxt.argval in _META_ATTRS:
        return True
    j = k - 1 if k and ins[k - 1].opname != 'PUSH_NULL' else k - 2     # 3.13: np.shape, NULL
    prev = ins[j] if j >= 0 else None
    return (prev is not None and nxt is not None and prev.argval in _META_CALLS
            and prev.opname in ('LOAD_ATTR', 'LOAD_METHOD', 'LOAD_GLOBAL')
            and nxt.opname in _CALL_OPS and nxt.arg == 1)



def reads_value(prim, p, q):
    """Whether the pullback of ``prim``'s argument ``p`` reads the value of argument
    ``q`` (or the output), not only its shape: whether the derivative with respect to
    argument ``p`` may vary with argument ``q`` (second order, ``tracked.sparsity``).

    >>> import numpy as np
    >>> mul = defpartials(np.multiply, lambda ans, x, y: y, lambda ans, x, y: x, register=False)
    >>> reads_value(mul, 0, 0), reads_value(mul, 0, 1)
    (False, True)
    """
    reads_ans, how, rest = _uses(prim.vjps[p])
    return reads_ans or how.get(q) == KEEP or (rest is not None and q >= rest)

ANS = 1 << 30       # in ``Primitive.fast_plans``: the output is kept

# A save-plan key is one integer: the bit mask of the parents' argument positions,
# shifted left by KEY_SHIFT, or'ed with the number of arguments (below MAX_ARGS).
# Integer keys: hashing a tuple per operation cost ~1% of an operation.
KEY_SHIFT = 16
MAX_ARGS = (1 << KEY_SHIFT) - 1


def plan_key(parents, nargs):
    """``Primitive.plan``'s key: ``parents`` (position, node) pairs among ``nargs``
    arguments.  Takes the pairs themselves: a list of positions built per operation
    would cost more than the lookup it serves."""
    mask = 0
    for p, _ in parents:
        mask |= 1 << p
    if nargs > MAX_ARGS:
        raise ValueError(f'{nargs} positional arguments to one operation; pass arrays in a list')
    return mask << KEY_SHIFT | nargs


# Primitives the core's eager fast paths record directly, registered by the rule
# module that defines them (the core imports no rule module): 'slice' is x[a:b].
FAST: dict[str, 'Primitive'] = {}


def _saver(how):
    """A function giving ``args`` as an entry keeps them (see ``Primitive.plan``)."""
    if DROP not in how and META not in how:
        return None
    if KEEP not in how and META not in how:
        nothing = (None,) * len(how)
        return lambda args: nothing
    drops = tuple(j for j, h in enumerate(how) if h == DROP)
    metas = tuple(j for j, h in enumerate(how) if h == META)
    if metas == (0,) and not drops:
        # x[idx], np.sum(x, ...), np.reshape(x, ...): the shape of the first argument
        def save_first(args):
            a = args[0]
            return (Meta(a), *args[1:]) if hasattr(a, 'shape') else args
        return save_first

    def save(args):         # loops over the positions to change: half a comprehension's cost
        out = list(args)
        for j in drops:
            out[j] = None
        for j in metas:
            a = out[j]
            if hasattr(a, 'shape'):    # a Python number or list has no shape to keep
                out[j] = Meta(a)
        return tuple(out)
    return save


class Meta:
    """What an entry keeps of an argument its pullbacks read only the shape of.

    ``ndim`` and ``size`` are derived on demand: pullbacks rarely read them, and each
    attribute read from the array at recording time costs on every such entry.
    """

    __slots__ = ('shape', 'dtype')

    def __init__(self, x):
        self.shape = x.shape
        self.dtype = x.dtype

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))


def identity(g, ans, *args, **kwargs):
    """The pullback that passes the cotangent through unchanged (``add``, ``copy``, ...).

    ``backward`` recognises it and skips the call: a third of the operations in
    typical code are additions, and a Python call costs ~4% of an eager operation.
    """
    return g


class Primitive:
    """A differentiable operation: ``fn`` for the forward pass, ``vjps`` for the pullbacks.

    ``view`` marks operations whose output may share memory with their first input;
    the tape uses it to refuse in-place writes that NumPy would propagate to views.
    ``direct`` marks user rules (``@tr.rule``) whose forward must see lower-level
    tracked values itself instead of being recorded once per level.
    ``elementwise`` marks pullbacks that accept a cotangent smaller than the output
    that broadcasts to it (``defvjp`` sets it for ufuncs without a core signature).
    ``kernel`` is how a compiled tape computes the forward: a scalar expression
    template for an elementwise operation (``'({0} * {1})'``: the operands by
    position), or the name of a pattern the compiler knows (``'sum'``, ``'matmul'``,
    ``'scatter_add'``, ...); None runs it in NumPy.  The compiler keys on this field,
    never on ``name``, so renaming a rule changes nothing it fuses.
    ``index_args`` lists the positions of index arguments (tuples or lists whose
    parts may be index arrays computed from recorded values, e.g. ``np.argsort``'s
    result on a ``GradientTape``): ``dispatch.apply`` looks inside them for tracked
    parts, so that a replay recomputes the index instead of freezing it.
    ``sequences`` lists the positions whose list or tuple arguments are passed as
    given.  Elsewhere, a plain list or tuple (one that holds no tracked value) at a
    position with a pullback is an array operand: ``dispatch.apply`` converts it with
    ``np.asarray`` once, before the entry is recorded, so no pullback and no recorded
    instruction sees a list (``np.interp(x, [0, 3], [0, 6])``).  A rule that takes a
    sequence of arrays at one position, or a user's function that must see its
    arguments as given (``@tr.rule``), declares them here.  Python numbers are never
    converted: NumPy treats them as weak scalars (``float32 * 2.0`` stays float32),
    a 0-d array would not be.
    ``multi`` marks a forward that may return a tuple (or named tuple) of outputs:
    the entry is one, its pullbacks get a ``tape.Cotangents`` (one cotangent per
    output, None where unused) and ``ans`` is the tuple of outputs.

    Forward mode (tangents) reads one of: ``partials`` (an elementwise operation's
    partial derivatives ``d(ans, *args)``, one per argument: the tangent is
    ``sum(d_k * t_k)``, and ``defpartials`` made the pullbacks from the same
    functions); ``linear`` ('joint': linear in its differentiable arguments taken
    together, so the tangent is the operation applied to the tangents, e.g. reshape,
    sum, concatenate; 'each': linear in each of them separately, so the tangent is
    the sum over arguments of the operation with one argument replaced by its
    tangent, e.g. matmul, einsum); or ``jvp(tangents, ans, *args, **kwargs)``, an
    explicit tangent rule (``tangents`` aligned with ``args``, None where an
    argument has none).  A primitive with none of them gets its tangent from its
    pullback (the double-vjp trick, for that operation alone).  Forward mode may
    carry a batch of tangents along a leading axis; ``batched`` says how a rule
    handles one: True when the operation applied to batched tangents is already the
    batched tangent (copy, real, where, triu...), or a function like ``jvp`` that
    takes batched tangents (it may return NotImplemented); otherwise the tangents are
    taken one at a time.

    Sparsity detection (``tracked.sparsity``) reads ``structure``: which elements of
    the operands (the positions with a pullback) each output element depends on.
    'elementwise': the elements that broadcast to it (implied by ``partials`` and by
    a ufunc without core signature); 'select': a copy of at most one of them, found by
    running the forward on integer codes in place of the operands (1 + the element's
    index over all of them, 0 for a constant's) and reading the code each output
    element got (0: none); 'reduce': the elements reduced into it (the pullback's
    ``axis`` and ``keepdims``); 'cumulative': the elements before it along the
    pullback's ``axis`` (None: flattened); or a function ``structure(varying, ans,
    *args, **kwargs)`` of the positions whose arguments vary with the inputs,
    returning one of those names, None, or ``{position: (out_index, in_index)}`` for
    each varying operand (flat element indices, one pair per dependence).  None:
    every output element may depend on every operand element (never too few).

    A primitive pickles as where to find it (``__reduce__``); ``ref`` is that place
    for one made at run time (a ``@tr.rule``'s): a ``(function, args)`` pair.
    """

    __slots__ = ('fn', 'vjps', 'name', 'view', 'direct', 'saves', 'elementwise', 'fast',
                 'kernel', 'index_args', 'sequences', 'multi', 'partials', 'linear', 'jvp',
                 'inline', 'consume', 'fresh', 'batched', 'ref', 'structure')

    def __init__(self, fn, vjps, name=None, view=False, direct=False, elementwise=False,
                 kernel=None, index_args=(), multi=False, partials=None, linear=None,
                 jvp=None, batched=None, sequences=(), structure=None):
        self.fn = fn
        # a tuple; a variadic rule's sequence made on demand (rules/shape.py)
        self.vjps: Any = tuple(vjps)
        self.name = name or getattr(fn, '__name__', repr(fn))
        self.view = view
        self.direct = direct   # forward handles lower-level tracked arguments itself
        self.saves = {}        # plan_key(parent positions, number of arguments) -> plan
        self.elementwise = elementwise   # pullbacks take any g that broadcasts to ans
        self.fast = None       # the eager fast paths' plans, made by fast_plans()
        self.kernel = kernel   # the compiled tape's form of the forward (see above)
        self.index_args = index_args
        self.sequences = sequences
        self.multi = multi
        if linear not in (None, 'joint', 'each'):
            raise ValueError(f"linear={linear!r}: expected 'joint', 'each' or None")
        self.partials = partials   # forward mode: see above
        self.linear = linear
        self.jvp = jvp
        self.batched = batched
        # Per position, the partial derivative that ``tape.backward`` calls itself
        # instead of the pullback made from it (one Python call less); None: no such.
        self.inline = None
        # Per position, a pullback ``(g, ans, *args, negate=False) -> gi or None`` that
        # may write into ``g``: ``tape.backward`` calls it when ``g`` is a float64 array
        # of the output's shape that only the backward pass references and this argument
        # is the entry's only parent (None where it declines).  With ``negate=True`` ``g``
        # is shared: it returns the pullback of ``-g`` as a new array, never None (the
        # backward pass carries ``a - b``'s ``-g`` unmade to such an entry); None: no such.
        self.consume = None
        # Per position, whether the pullback returns, for an ndarray cotangent, a new
        # ndarray that nothing else references (``-g``, ``g * c``), which the backward
        # pass may then write into; None: none does (the inline partials' ``g * d``
        # always does).
        self.fresh = None
        self.ref = None
        self.structure = structure or (
            'elementwise' if elementwise or partials is not None else None)

    def __reduce__(self):
        # Pullbacks are often lambdas, and the tapes and the compiler know a primitive
        # by identity: it travels as where to find it in the receiving process (pickle's
        # own rule for functions and classes), never by value.
        return self.ref or _place(self)

    def plan(self, key):
        """``(keep ans?, saver, kept)`` for an entry whose parents sit at the positions
        of the bits of ``key >> KEY_SHIFT`` among ``key & MAX_ARGS`` arguments (``plan_key``).

        ``saver(args)`` gives the arguments as the entry keeps them (DROP/KEEP/META
        each); None means keep them all.  ``kept`` has a bit set for each argument
        kept in any form (the eager fast paths test it inline: calling ``saver``
        there cost ~1% of an operation).  Only the parents' pullbacks run, so only
        their reads count.
        """
        plan = self.saves.get(key)
        if plan is None:
            mask, nargs = key >> KEY_SHIFT, key & MAX_ARGS
            keep_ans = False
            how = [DROP] * nargs
            for p in range(mask.bit_length()):
                if mask >> p & 1:
                    reads_ans, reads, rest = _uses(self.vjps[p])
                    keep_ans = keep_ans or reads_ans
                    for j in range(nargs):
                        h = KEEP if rest is not None and j >= rest else reads.get(j, DROP)
                        # one pullback that reads the value needs it, whatever the others read
                        how[j] = KEEP if KEEP in (how[j], h) else max(how[j], h)
            for j in range(nargs):
                # An argument that is not a parent is the caller's constant (or a value
                # of an outer level): keeping it costs no memory, and the eager fast
                # paths keep it without asking, so every builder saves the same.
                if not mask >> j & 1:
                    how[j] = KEEP
            kept = sum(1 << j for j, h in enumerate(how) if h != DROP)
            plan = self.saves[key] = (keep_ans, _saver(tuple(how)), kept)
        return plan

    def fast_plans(self):
        """``kept`` bits of ``plan`` (with ``ANS`` when the output is kept) for the
        eager fast paths: a unary call, a binary one whose parent is argument 0, and
        one whose parent is argument 1 (one attribute read instead of a dict lookup).
        """
        fast = []
        for key in (plan_key(((0, None),), 1), plan_key(((0, None),), 2),
                    plan_key(((1, None),), 2)):
            try:
                keep_ans, _, kept = self.plan(key)
            except (IndexError, TypeError):      # not a unary or binary primitive
                keep_ans, kept = True, ~0
            fast.append(kept | (ANS if keep_ans else 0))
        self.fast = tuple(fast)
        return self.fast

    def __repr__(self):
        return f'<Primitive {self.name}>'


# id(primitive) -> (primitive, how pickle finds it)
_PLACES: dict[int, tuple['Primitive', tuple[Callable[..., Any], tuple[Any, ...]]]] = {}


def _place(prim):
    """How another process finds ``prim``: by its NumPy callable in ``RULES``, or by the
    module-level name that holds it (the rule modules' internal primitives)."""
    hit = _PLACES.get(id(prim))
    if hit is None or hit[0] is not prim:
        ref: tuple[Callable[..., Any], tuple[Any, ...]] | None = next(
            ((rule_of, (fun,)) for fun, p in list(RULES.items())
             if p is prim and _by_reference(fun)), None)
        modules: list[Any] = [getattr(prim.fn, '__module__', None)] + sorted(
            m for m in list(sys.modules) if m == 'tracked' or m.startswith('tracked.'))
        for mod in modules if ref is None else ():
            names = getattr(sys.modules.get(mod), '__dict__', {})
            name = next((k for k, v in list(names.items()) if v is prim), None)
            if name is not None:
                ref = (module_attribute, (mod, name))
                break
        if ref is None:
            raise pickle.PicklingError(
                f'the primitive {prim.name} cannot be pickled: it is neither registered '
                f'(defvjp) nor held by a module-level name, so another process cannot '
                f'find it. Define it at module level, or register it with defvjp.')
        hit = _PLACES[id(prim)] = (prim, ref)
    return hit[1]


def _by_reference(fun):
    """Whether ``fun`` pickles as a reference to itself (a NumPy or module-level callable)."""
    try:
        return pickle.loads(pickle.dumps(fun)) is fun
    except Exception:
        return False


def rule_of(fun):
    """The primitive registered for NumPy callable ``fun`` (unpickling a primitive)."""
    return RULES[fun]


def module_attribute(module, name):
    """``module.name``, importing the module (unpickling a primitive)."""
    return getattr(importlib.import_module(module), name)


def defvjp(fun, *vjps, fn=None, name=None, view=False, kernel=None, index_args=(), multi=False,
           linear=None, jvp=None, batched=None, sequences=(), structure=None):
    """Register ``fun`` as a primitive whose pullbacks are ``vjps`` (one per argument).

    ``fn`` is the forward function when it is not ``fun`` itself; ``kernel`` its
    compiled-tape form; ``linear``/``jvp`` its forward mode; ``index_args`` and
    ``sequences`` the positions that are not array operands; ``structure`` how its
    output elements depend on its operands' (see ``Primitive``).
    """
    elementwise = type(fun).__name__ == 'ufunc' and fun.signature is None
    prim = Primitive(fn or fun, vjps, name=name or display_name(fun), view=view,
                     elementwise=elementwise, kernel=kernel, index_args=index_args,
                     multi=multi, linear=linear, jvp=jvp, batched=batched, sequences=sequences,
                     structure=structure)
    RULES[fun] = prim
    return prim


def defpartials(fun, *partials, fn=None, name=None, kernel=None, vjps=None, register=True):
    """Register elementwise ``fun`` by its partial derivatives, one per argument: both
    the pullbacks and the tangent rule come from them (ChainRules' ``@scalar_rule``).

    A partial is ``d(ans, *args)``, the derivative of the output with respect to that
    argument (holomorphic: ``np.cos(x)`` for ``np.sin``); a number for a constant one
    (1 makes the pullback the identity); None for an argument without a gradient.
    The pullback of argument ``k`` is ``g * conj(d_k)``: ChainRules' convention for
    complex numbers.  ``vjps`` may give a faster pullback for some positions (None
    elsewhere); the systematic tests hold it equal to the one ``d_k`` gives.

    >>> import numpy as np
    >>> p = defpartials(np.sin, lambda ans, x: np.cos(x), register=False)
    >>> float(p.vjps[0](2.0, np.sin(0.0), 0.0))
    2.0
    """
    made = [_partial_vjp(d, len(partials)) for d in partials]
    if vjps is not None:
        made = [v if v is not None else m for v, m in zip(vjps, made)]
    prim = Primitive(fn or fun, made, name=name or display_name(fun), elementwise=True,
                     kernel=kernel, partials=tuple(partials))
    inline = tuple(d if callable(d) and getattr(v, 'partial', None) is d else None
                   for d, v in zip(partials, made))
    if any(d is not None for d in inline):
        prim.inline = inline
    # A constant partial's pullback (-g, g * c) makes a new array, which the backward
    # pass may compute in place into a cotangent it owns.
    consume = tuple(_consume_constant(d) if getattr(v, 'partial', None) is d else None
                    for d, v in zip(partials, made))
    if any(c is not None for c in consume):
        prim.consume = consume
        prim.fresh = tuple(c is not None for c in consume)
    if register:
        RULES[fun] = prim
    return prim


_REAL_NUMBERS = frozenset((float, int, bool))


def _real(p):
    """Whether a partial derivative that is not a Python real number is real."""
    return type(p) is not complex and p.dtype.kind != 'c'


def _consume_constant(d):
    """The in-place pullback (``Primitive.consume``) of a real constant partial ``d``
    other than 0 and 1, or None."""
    if callable(d) or type(d) not in (int, float) or d in (0, 1):
        return None
    if d == -1:
        return negate_into

    def scale_into(g, ans, *args, negate=False):
        return g * -d if negate else _multiply(g, d, out=g)
    return scale_into


def negate_into(g, ans, *args, negate=False):
    """``Primitive.consume`` of a partial -1 (``a - b``'s ``b``, ``-x``): ``-g`` in ``g``
    (with ``negate``: a copy of ``g``)."""
    return g.copy() if negate else _negative(g, out=g)


_negative, _multiply = np.negative, np.multiply


def _partial_vjp(d, nargs):
    """The pullback ``g * conj(d(ans, *args))`` of one argument (see ``defpartials``)."""
    if d is None:
        return None
    vjp: Any        # a function carrying its partial derivative as ``vjp.partial``
    if not callable(d):
        if d == 1:
            return identity
        if d == -1:
            def vjp(g, ans, *args):
                return -g
        elif d == 0:
            def vjp(g, ans, *args):
                return g * 0.0       # zeros of the output's shape and dtype, still nesting
        else:
            c = complex(d).conjugate() if isinstance(d, complex) else d

            def vjp(g, ans, *args):
                return g * c
        vjp.partial = d
        return vjp
    # One wrapper per arity: a call with *args costs twice as much (hot in back()).
    if nargs == 1:
        def vjp(g, ans, x):
            p = d(ans, x)
            return g * p if type(p) in _REAL_NUMBERS or _real(p) else g * p.conjugate()
    elif nargs == 2:
        def vjp(g, ans, x, y):
            p = d(ans, x, y)
            return g * p if type(p) in _REAL_NUMBERS or _real(p) else g * p.conjugate()
    else:
        def vjp(g, ans, *args):
            p = d(ans, *args)
            return g * p if type(p) in _REAL_NUMBERS or _real(p) else g * p.conjugate()
    vjp.partial = d
    return vjp


def defcomposite(fun: Any, impl: Callable[..., Any], arrays: tuple[str, ...] = ()
                 ) -> Callable[..., Any]:
    """Register ``impl`` (written with other primitives) to run when ``fun`` meets tracked values.

    ``arrays`` names ``impl``'s parameters that are array operands (as NumPy's
    ``__array_function__`` dispatcher of ``fun`` lists them); ``*name`` is its
    var-positional one.  A plain list or tuple passed there, by position or keyword,
    reaches ``impl`` as an array (``dispatch.call``), as it would reach NumPy's own
    code; the primitives ``impl`` calls convert their own operands, so only a
    composite whose own code reads its operands (``xp.ndim``) needs this.

    >>> def interp(x, xp, fp, left=None):
    ...     return xp.ndim
    >>> _ = defcomposite('example', interp, arrays=('xp', 'fp'))
    >>> OPERANDS.pop('example')
    ((('xp', 1), ('fp', 2)), None)
    >>> _ = RULES.pop('example')
    """
    RULES[fun] = impl
    if arrays:
        OPERANDS[fun] = _parameter_positions(impl, arrays)
    return impl


def _parameter_positions(fn, names):
    """``(((name, position or None), ...), first var-positional position or None)`` for
    parameters ``names`` of ``fn`` (None: keyword-only)."""
    code = fn.__code__
    npos = code.co_argcount
    params = code.co_varnames[:npos + code.co_kwonlyargcount]
    star = code.co_varnames[len(params)] if code.co_flags & 4 else None
    named, rest = [], None
    for name in names:
        if name.startswith('*'):
            if name[1:] != star:
                raise ValueError(f'{fn.__name__} has no parameter {name}')
            rest = npos
        elif name in params:
            k = params.index(name)
            named.append((name, k if k < npos else None))
        else:
            raise ValueError(f'{fn.__name__} has no parameter {name!r}')
    return tuple(named), rest


def nondifferentiable(*funs, kernel=None):
    """Mark NumPy callables whose results are plain (comparisons, argmax, shapes, ...).

    ``kernel``: the compiled tape's scalar template for them (comparisons are fused
    into elementwise loops); the value stored in ``NONDIFF``, True without one.
    """
    for f in funs:
        NONDIFF[f] = kernel or True


def display_name(fun):
    """How errors name ``fun``: ``np.sum``, ``np.linalg.svd``, ``scipy.special.gammaln``."""
    name = NAMES.get(fun)
    if name is not None:
        return name
    mod = getattr(fun, '__module__', None) or ''
    base = getattr(fun, '__name__', repr(fun))
    for sub in ('linalg', 'fft', 'random'):
        if mod.startswith('numpy.' + sub):
            return f'np.{sub}.{base}'
    if mod == '_operator' or mod == 'operator':
        return 'operator.' + base
    owner = getattr(fun, '__objclass__', None) or getattr(fun, '__self__', None)
    if owner is np.ndarray:
        return 'ndarray.' + base
    if isinstance(owner, np.ufunc):
        return f'{display_name(owner)}.{base}'
    if mod.startswith('numpy') or getattr(np, base, None) is fun:
        return 'np.' + base
    return f'{mod}.{base}' if mod and mod != 'builtins' else base   # np.frompyfunc's, a user's
