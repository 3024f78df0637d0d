"""The machinery every recorded tape shares: recording, compiling, the general call path.

Recording runs ``f`` once on leaves at stacked trace levels (see record.py) and
then the backward pass(es) at the higher levels, so that the program holds the
forward and the backward pass as plain forward operations.  Replaying checks the
arguments' structure, shapes and dtypes (signature.py), runs the program (NumPy,
or numba kernels once compiled) and checks every guard on the way.  A compiled
``GradientTape`` answers its common calls through generated code (calls.py); every
other call, and every call that needs more than the common case, comes here.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..tape import new_level, push_recorder, pop_recorder
from ..tree_util import tuple_def
from .guards import Guard, TapeGuardError
from .plan import Fallback
from .program import Program
from .record import Instr, Recorder, Ref
from .signature import aliased_out_error, as_input, check_leaves, leaf_spec
from .tiers import CompileError, Tiering
from .trees import flatten_args, arg_leaves

if TYPE_CHECKING:
    from .compiled import CompiledProgram      # imported when a tape is compiled

__all__ = ['Tape']


class Tape:
    """Shared machinery of the recorded tapes: recording, argument checks, replay in
    NumPy or compiled code, the compile state, printing.

    Subclasses define ``_trace(rec, inputs)`` (run ``f`` and its backward passes,
    returning the program's outputs) and ``_layout()`` (the output arrays and where
    program outputs go in them).

    The compiler's other modules use a tape through named methods and attributes, not
    its privates: ``current``, ``replay``, ``new_compiled``, ``warm``, ``switch_to``,
    ``start_compile``, ``choose_units``, ``keep_faster``, ``new_outs``, ``inputs_of``,
    ``checker``, ``checks``, ``checked_outs``, ``out_checker``, ``kind_name`` (left out
    of the user reference: docs/reference/tapes.md).
    """

    kind_name = 'tape'
    # Defined by each subclass (annotations only, for the type checker):
    _trace: Callable[[Recorder, list[Any]], list[Any]]
    _layout: Callable[[], tuple[list[tuple[tuple[int, ...], np.dtype]],
                                dict[int, tuple[int, int]]]]

    def __init__(self, f: Callable[..., Any], *args: Any, wrt: int | Sequence[int] | None = None,
                 on_guard: Literal['error', 'retrace'] = 'error') -> None:
        if on_guard not in ('error', 'retrace'):
            raise ValueError(f'on_guard must be "error" or "retrace", got {on_guard!r}')
        self.f = f
        self.on_guard = on_guard
        self.nargs = len(args)
        if wrt is None:
            wrt = tuple(range(len(args)))
        elif isinstance(wrt, (int, np.integer)):
            wrt = (wrt,)
        if not isinstance(wrt, (tuple, list)) or not all(
                isinstance(w, (int, np.integer)) and not isinstance(w, bool) for w in wrt):
            raise TypeError(f'wrt={wrt!r}: give the positions of the differentiated '
                            f'arguments, an int or a tuple of ints (wrt=(0,) for the first)')
        for w in wrt:
            if not -len(args) <= w < len(args):
                raise ValueError(f'wrt={wrt}: f was given {len(args)} arguments, so positions '
                                 f'run from 0 to {len(args) - 1} (or from -{len(args)})')
        wrt = tuple(w % len(args) for w in wrt)
        self.wrt = wrt
        self.compiled: CompiledProgram | None = None
        self._compile_mode: str | None = None    # None, 'foreground' or 'background'
        self._tiering: Tiering | None = None
        self._now = self._public = self          # see _retrace
        self._record(args)

    # -- recording ------------------------------------------------------------
    def _record(self, args, given=frozenset()):
        """Record ``f`` on ``args``: their tree, leaf specs and generated checker; the
        program (forward and backward passes, guards); the output layout.  Run again on
        a retrace, which also recompiles a compiled tape.

        Integer arrays in ``wrt`` are differentiated as float64, as ``tr.gradient``
        does; those that got no derivative (labels, indices) are then recorded again
        as ``given``: integer inputs of the tape, like bool arrays, so that the program
        reads them as ``f`` would (labels as integers: no check that float labels are
        whole numbers, cast-free kernels)."""
        leaves, arg_defs = flatten_args(args)
        self.arg_defs = arg_defs                   # one TreeDef per argument
        self.treedef = tuple_def(arg_defs)         # the argument tuple as one tree
        self.specs = [leaf_spec(x) for x in leaves]
        self.pyfloat = [type(x) in (float, int) or isinstance(x, np.generic) for x in leaves]
        per_arg = arg_leaves(arg_defs)
        diff: set[int] = set()
        for a in self.wrt:
            diff.update(p for p in per_arg[a] if self.specs[p][1].kind in 'fiuc'
                        and p not in given)
        self.diff = sorted(diff)
        self._diffset = frozenset(diff)
        self.has_int_diff = any(self.specs[p][1].kind in 'iu' and self.specs[p][0] != ()
                                for p in diff)
        # a Python int outside ``wrt`` is a constant of the tape (a size, a count)
        self.static = {p: x for p, x in enumerate(leaves) if type(x) is int and p not in diff}
        self.per_arg = per_arg
        checks: list[tuple[type, dict[Any, Any]]] = []
        for p, x in enumerate(leaves):
            t = type(x)
            if t is np.ndarray:
                checks.append((t, {'shape': x.shape, 'dtype': x.dtype}))
            elif t is int and p in self.static:
                checks.append((t, {None: x}))
            else:
                checks.append((t, {}))
        # generated for this structure; arrays untied when recorded must stay untied
        # (tied ones get the total gradient: another tape), argument by argument
        self.checks = checks
        self.checker = self.treedef.matcher(checks, distinct=per_arg)
        rec = Recorder(new_level())
        push_recorder(rec)
        try:
            inputs = [x if p in self.static else rec.input(as_input(x, p in diff), p)
                      for p, x in enumerate(leaves)]
            outputs = self._trace(rec, inputs)
        finally:
            pop_recorder(rec)
        underived = frozenset(p for p in diff if self.specs[p][1].kind in 'iu' and
                              self.specs[p][0] != () and not self._derived(p))
        if underived:
            self._record(args, given | underived)
            return
        self.program = Program(rec, outputs)
        self._numpy: dict[int, str] | None = None  # measured NumPy units (choice.py)
        self._replay_faster: str | None = None     # the whole replay measured faster
        self.n_outputs = len(outputs)
        self.out_specs, self.placements = self._layout()
        self.__dict__.pop('out_checker', None)
        self.checked_outs: dict[Any, Any] = {}   # out= trees checked (signature.out_leaves)
        self.compiled = None
        if self._compile_mode is not None:         # retraced: compile the new program
            self.start_compile(self._compile_mode == 'background')
        self._install_calls()

    # -- pickling: a tape travels as its recorded program --------------------------
    def __getstate__(self):
        """The picklable state: the recorded program, without per-process parts."""
        # Generated code (argument checkers, calls, the compiled entry) and the
        # background compilation are rebuilt where the tape lands, numba's from the
        # disk cache; ``f`` is needed only to re-record.
        state = {k: v for k, v in self.__dict__.items() if k not in _PER_PROCESS}
        if self.on_guard != 'retrace':
            state['f'] = _Recorded(getattr(self.f, '__name__', repr(self.f)))
        return state

    def __setstate__(self, state):
        """Rebuild the per-process parts; a compiled tape compiles (or loads) at once."""
        self.__dict__.update(state)
        self.compiled = None
        self._tiering = None
        self._now = self._public = self
        self.checked_outs = {}
        self.checker = self.treedef.matcher(self.checks, distinct=self.per_arg)
        if self._compile_mode is not None:
            try:                 # in the foreground: a worker's first call uses it
                self.start_compile(background=False)
            except Exception as e:
                name = getattr(self.f, '__name__', 'f')
                raise RuntimeError(
                    f'a compiled {self.kind_name} of {name} arrived in a process that '
                    f'cannot compile it ({type(e).__name__}: {e}). It needs numba and a '
                    f'writable cache folder ($TRACKED_CACHE_DIR); or send the tape '
                    f'uncompiled and replay it in NumPy.') from e
        self._install_calls()

    def __copy__(self):
        """A tape of its own (compile() copies) sharing the recording."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._now = new._public = new
        new.checked_outs = {}
        return new

    # -- threads: a recording is never changed under a call --------------------------
    def current(self) -> Any:
        """The tape's recording now: the object whose attributes a call reads (the tape
        itself until a retrace; see ``_retrace``)."""
        return self._public._now

    def _retrace(self, args):
        """Record ``f`` again on ``args`` (a guard failed) and make the new recording the
        tape's whole state at once; returns it.

        Calls under way in other threads finish on the recording they started with:
        each reads one (``_current()``) and keeps it.  Re-recording in place would
        change the program, its outputs and the compiled code under them, between one
        attribute and the next.  The new recording is a copy whose attribute dict the
        tape then takes as its own (one assignment).
        """
        new = copy.copy(self)
        new._record(args)
        pub = self._public
        new._public = pub
        pub.__dict__ = new.__dict__
        return new

    # -- compiling ------------------------------------------------------------------
    def start_compile(self, background: bool) -> None:
        """Compile the program: now, or in the background while calls replay in NumPy."""
        self._compile_mode = 'background' if background else 'foreground'
        self.compiled = None
        if background:
            self._tiering = Tiering(self)
        else:
            self._tiering = None
            prog = self.new_compiled().load()
            self.warm(prog)
            if self.choose_units(prog):
                again = self.new_compiled().load()
                self.warm(again)
                prog = self.keep_faster(prog, again)
            self.compiled = self.unless_replay_faster(prog)

    def new_compiled(self) -> Any:
        """The program planned for numba (kernels not loaded yet), with the units measured
        faster in NumPy as fallbacks."""
        from .compiled import CompiledProgram
        return CompiledProgram(self.program, self.specs, self.out_specs, self.placements,
                               self._numpy)

    def choose_units(self, prog: Any) -> bool:
        """Measure, once per recording, which units of ``prog`` (loaded, planned without
        a choice) run faster in NumPy (choice.py); whether it must be planned again."""
        if self._numpy is not None or prog.numpy:
            return False
        from .choice import choose
        self._numpy = choose(self, prog)
        return bool(self._numpy)

    def warm(self, prog: Any) -> None:
        """Run ``prog`` once on the recorded values (its entry loads now), compared with
        the NumPy replay (firstrun.py)."""
        from .firstrun import check
        check(self, prog)

    def switch_to(self, tiering: Any, prog: Any) -> None:
        """Use ``prog`` from the next call on, None: the NumPy replay (called by the
        background compilation)."""
        if self._tiering is tiering and (prog is None or self.program is prog.program):
            self.compiled = prog
            self._install_calls()

    def _derived(self, p):
        """Whether differentiated leaf ``p`` has a derivative among the outputs (a
        Jacobian has a column for each, zeros or not)."""
        return True

    def _install_calls(self):
        """Install the generated calls of the current state (GradientTape: calls.py)."""

    def wait(self, timeout: float | None = None) -> bool:
        """``tape.wait(timeout=None)``: wait until a compiled tape runs its numba kernels;
        True if it does, False if the background compilation failed (the tape replays in
        NumPy; ``compile_error`` says why) or ``timeout`` seconds passed first."""
        if self.compiled is not None or self._replay_faster is not None:
            return True
        t = self._tiering
        return t.wait(timeout) if t is not None else False

    @property
    def compile_error(self) -> CompileError | None:
        """Why the background compilation failed (a ``CompileError``), or None."""
        t = self._tiering
        return t.error if t is not None else None

    @property
    def fallbacks(self) -> list[Fallback] | None:
        """What a compiled tape runs in NumPy for want of a kernel: one entry per
        instruction, printing as the instruction and the reason (``.instr``,
        ``.reason``); None if not compiled.  (``chosen_numpy``: what it runs in NumPy
        because NumPy was measured faster.)"""
        if self.compiled is not None:
            return list(self.compiled.fallbacks)
        if self._replay_faster is not None:
            return list(self._replay_fallbacks)
        t = self._tiering
        if t is None:
            return None
        t.go.set()
        t.planned.wait()                           # planning takes milliseconds
        return list(t.compiled.fallbacks) if t.compiled is not None else None

    @property
    def chosen_numpy(self) -> list[Fallback] | None:
        """What a compiled tape runs in NumPy although it has kernels for it: the units
        measured faster as NumPy calls on the recorded values (choice.py), one entry per
        instruction with the timings as its reason; None until measured."""
        if self._numpy is None:
            return None
        if self._replay_faster is not None:       # the whole program
            return [Fallback(ins, self._replay_faster) for ins in self.program.instrs]
        return [Fallback(self.program.instrs[i], why) for i, why in sorted(self._numpy.items())]

    def unless_replay_faster(self, prog: Any) -> Any:
        """``prog``, or None when the NumPy replay runs the recorded values faster on
        the whole (choice.replay_faster: a program whose NumPy steps and their
        boundaries cost more than its kernels save); the tape then keeps replaying, and
        ``chosen_numpy`` says why."""
        from .choice import replay_faster
        why = replay_faster(self, prog)
        self._replay_faster = why
        if why is None:
            return prog
        self._replay_fallbacks = list(prog.fallbacks)   # what it had no kernel for
        return None

    def timed_calls(self, prog: Any) -> list[Callable[[], Any]] | None:
        """The public calls of ``_public_calls`` on the recorded values, made by a copy of
        this recording that answers with ``prog`` (loaded; None: the NumPy replay), for
        choice.py to time what a caller pays on either path (generated or general
        call, argument checks, allocations, the program); None when the recorded
        values do not rebuild arguments the tape takes.  The tape itself is left as it
        is: in the background, calls are replaying it meanwhile."""
        from .firstrun import recorded_args
        args = recorded_args(self)
        if self.checker(args) is None:
            return None
        t = copy.copy(self)
        t.compiled = prog
        t._tiering = None
        t._install_calls()
        return t._public_calls(args)

    def _public_calls(self, args: tuple[Any, ...]) -> list[Callable[[], Any]]:
        """Zero-argument callables making this tape's usual calls on ``args``."""
        return [lambda: self.replay(args)]

    def replay_into(self, leaves: Any, outs: Any) -> list[Any]:
        """The NumPy replay on checked ``leaves``: the placed outputs written into
        ``outs``; returns every output value."""
        vals = self.program.run(self.inputs_of(leaves))
        self._place(vals, outs)
        return vals

    def _place(self, vals: list[Any], outs: list[np.ndarray]) -> None:
        """Copy the placed output values ``vals`` into ``outs`` (but an array already one
        of them)."""
        for oi, (k, off) in self.placements.items():
            v = vals[oi]
            if outs[k] is v:
                continue
            flat = outs[k].reshape(-1)
            n = int(np.size(v))
            flat[off:off + n] = np.ravel(v)

    def replay_new(self, leaves: Any) -> tuple[list[Any], list[np.ndarray]]:
        """The NumPy replay on checked ``leaves`` into new output arrays: ``(every
        output value, the outputs)``.  An output placed whole by one value the replay just
        computed -- an array of its own (not an argument's, a recorded constant's, a view,
        or another output's), of the output's shape, dtype and layout -- is that array:
        zero-filling the outputs and copying the gradients in cost W2 ~60 µs a call (its
        1.6 MB first-layer gradient), a quarter of what the replay saves over eager.
        Anything else is copied as ``replay_into`` copies it."""
        vals = self.program.run(self.inputs_of(leaves))
        handed, constants = self._handed()
        outs: list[Any] = []
        taken: set[int] = set()
        for k, (shape, dtype) in enumerate(self.out_specs):
            oi = handed.get(k)
            v = vals[oi] if oi is not None else None
            if type(v) is np.ndarray and v.dtype == dtype and v.shape == shape and \
                    id(v) not in taken and id(v) not in constants:
                flags = v.flags
                if flags.owndata and flags.c_contiguous and flags.writeable and \
                        not any(v is x for x in leaves) and sum(w is v for w in vals) == 1:
                    taken.add(id(v))
                    outs.append(v)
                    continue
            outs.append(np.zeros(shape, dtype))
        self._place(vals, outs)
        return vals, outs

    def _handed(self) -> tuple[dict[int, int], frozenset[int]]:
        """``({output: program output placed whole in it}, ids of the program's constant
        arrays)`` for ``replay_new``, made once per recorded program."""
        cached = self.__dict__.get('_handed_for')
        if cached is not None and cached[0] is self.program:
            return cached[1]
        prog = self.program
        count: dict[int, int] = {}
        for oi, (k, _) in self.placements.items():
            count[k] = count.get(k, 0) + 1
        handed = {}
        for oi, (k, off) in self.placements.items():
            o = prog.outputs[oi]
            if count[k] == 1 and off == 0 and type(o) is Ref and \
                    prog.instrs[o.i].kind != 'input':
                handed[k] = oi
        constants = frozenset(id(a) for ins in prog.instrs
                              for a in _arrays_in((ins.args, ins.kwargs)))
        self.__dict__['_handed_for'] = (prog, (handed, constants))
        return handed, constants

    def keep_faster(self, prog: Any, again: Any) -> Any:
        """``again`` (planned with the measured choice) if it runs faster than ``prog``
        on the whole, else ``prog``, the choice then dropped (choice.better)."""
        from .choice import better
        if better(self, prog, again):
            return again
        self._numpy = {}
        return prog

    def new_outs(self) -> list[np.ndarray]:
        return [np.zeros(shape, dtype) for shape, dtype in self.out_specs]

    # -- the general call path --------------------------------------------------------
    def _exec(self, leaves, outs):
        """Run on checked ``leaves``: placed outputs go into ``outs`` (None: new arrays);
        returns a function giving the other outputs by index, and the outputs."""
        c = self.compiled
        if c is not None:
            if outs is None:
                outs = self.new_outs()
            return c.run(leaves, outs).__getitem__, outs
        if outs is None:
            vals, outs = self.replay_new(leaves)
        else:
            vals = self.replay_into(leaves, outs)
        t = self._tiering
        if t is not None and not t.go.is_set():
            t.go.set()                   # the first call is done: compile in the background
        return vals.__getitem__, outs

    def _leaves(self, args):
        return check_leaves(self, args)

    def _check_out(self, outs):
        """The caller's ``out=`` arrays after a retrace: a tape whose outputs keep their
        layout on every path (``HessianTape``'s one matrix) takes them as they are;
        ``GradientTape``, whose gradients may appear or vanish, checks them again."""
        return outs

    def inputs_of(self, leaves: Any) -> Any:
        diff = self._diffset
        return [as_input(x, p in diff) if type(x) is not np.ndarray or self.has_int_diff else x
                for p, x in enumerate(leaves)] if self.has_int_diff or not all(
                    type(x) is np.ndarray for x in leaves) else leaves

    def replay(self, args: Any, outs: Any = None) -> Any:
        """Check ``args`` and replay this recording into ``outs`` (fresh arrays if None);
        retrace on a failed guard if asked to.  Returns (the recording that answered,
        getter of its unplaced outputs, outs)."""
        leaves = self._leaves(args)
        given = outs is not None
        if given and self.compiled is None:      # compiled: the entry refuses (vm.ALIASED)
            _refuse_aliasing(leaves, outs)
        try:
            return (self, *self._exec(leaves, outs))
        except TapeGuardError:
            if self.on_guard != 'retrace':
                raise
            new = self._retrace(args)
            # the new path may produce other outputs (a gradient that is now None):
            # fresh buffers, or a clear error if the caller's out= no longer fits
            return (new, *new._exec(new._leaves(args), new._check_out(outs) if given else None))

    # -- printing ----------------------------------------------------------------
    @property
    def instructions(self) -> list[Instr]:
        """The recorded instructions (forward and backward), in execution order."""
        return self.program.instrs

    @property
    def guards(self) -> list[Guard]:
        return self.program.guards

    def __str__(self) -> str:
        head = (f'{type(self).__name__} of {getattr(self.f, "__name__", repr(self.f))}: '
                f'{len(self.program.instrs)} instructions, {len(self.program.guards)} guards')
        return '\n'.join([head] + ['  ' + line for line in self.program.lines()])

    def __repr__(self) -> str:
        return (f'<{type(self).__name__} of {getattr(self.f, "__name__", repr(self.f))}: '
                f'{len(self.program.instrs)} instructions, {len(self.program.guards)} guards>')


def _arrays_in(x):
    """The ndarrays in ``x`` (an instruction's arguments: tuples, lists and dicts of them)."""
    if type(x) is np.ndarray:
        yield x
    elif type(x) in (tuple, list):
        for a in x:
            yield from _arrays_in(a)
    elif type(x) is dict:
        for a in x.values():
            yield from _arrays_in(a)


def _refuse_aliasing(leaves, outs):
    """A clear error if an ``out=`` array shares memory with an input array."""
    for g in outs:
        if any(type(x) is np.ndarray and np.may_share_memory(g, x) for x in leaves):
            raise aliased_out_error()


# Per process: generated code, the compiled program, the background compilation; the
# recording's links (reset where the tape lands) and the out= trees it has checked.
_PER_PROCESS = ('checker', 'out_checker', 'checked_outs', '_now', '_public', '_diffset_cache',
                'compiled', '_tiering', 'gradient', 'withgradient')


class _Recorded:
    """``f`` of an unpickled tape that never re-records (``on_guard='error'``): its name."""

    def __init__(self, name):
        self.__name__ = name

    def __repr__(self):
        return f'<{self.__name__}: recorded, not sent>'
