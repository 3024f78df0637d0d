"""Tiered execution: a compiled tape answers at once while its kernels compile.

``tr.compile(tape)`` returns before anything is compiled.  Until the kernels are
ready, calls replay the tape in NumPy (the same program, the same guards: at once,
and faster than the eager tape); once the first call has returned, a background
thread plans the program (milliseconds of Python) and compiles what the disk cache
lacks.  Native kernels and entries (native.py, pyentry.py: LLVM IR built by llvmlite,
~20 ms each, the GIL released while LLVM works) are built in that thread: the demo's
MLP reaches compiled speed ~0.6 s after ``tr.compile`` with an empty cache.  A kernel
only numba compiles (the translation does not take it, or ``TRACKED_NATIVE=0``) sends
the whole set to a *process* (numba's compiler is Python and holds the GIL: in a
thread it would slow the caller's every call for seconds), which then takes seconds.
Then the thread loads the machine code, runs the program once on the recorded values,
times its loops against NumPy (choice.py: units faster in NumPy are planned again as
NumPy calls; if that needs new kernels, the first plan serves while they compile) and
switches the tape to it.  A call never waits for any of this, and the switch changes
no result beyond floating-point rounding (NumPy's vectorised ``sin`` or pairwise
``sum`` round differently from a scalar loop; IEEE-exact operations give the same
bits).

If the compilation fails (or its process is killed), the tape keeps replaying in NumPy
and ``tape.compile_error`` says why.  A process compiles into a staging folder, loads
back what numba wrote (so that the code's first load is not in this process) and
hashes it; this process loads only entries whose files match their hashes (cache.py)
and compares the first run with the NumPy replay before switching (firstrun.py).
Two processes compiling the same kernels at once both succeed: each publishes its
staging folder by a rename, and the second keeps the first's.  One tape compiles at a
time; the other tapes' threads wait their turn (still replaying in NumPy).
"""
import _thread
import threading
import time

from .. import native_ops

__all__ = ['Tiering', 'CompileError', 'START_DELAY', 'wait_all']

START_DELAY = 0.5        # seconds the planning waits for the first call at most
GRACE = 0.01             # seconds between the first call's end and the planning


class CompileError(RuntimeError):
    """The background compilation of a tape's kernels failed (the tape replays in NumPy)."""


class Tiering:
    """The background compilation of one tape's program (module docstring).

    ``planned`` is set once the program is planned (``compiled`` then holds the
    ``CompiledProgram``, not yet loaded), ``done`` once the tape switched or the
    compilation failed (``error``); ``proc`` is the compiling process, if one was
    needed; ``times`` the ``time.perf_counter()`` of each stage reached (created,
    start, planned, compiled, loaded, switched), for benchmarks.
    """

    def __init__(self, tape):
        self.tape = tape
        self.go = threading.Event()      # set by the first call (or wait): start planning
        self.planned = threading.Event()
        self.done = threading.Event()
        self.compiled = None
        self.error = None
        self.proc = None
        self.times = {'created': time.perf_counter()}   # stage -> perf_counter()
        _running.add(self)
        # not threading.Thread: its start() waits until the new thread runs, which on a
        # busy machine took 5-10 ms of the caller's time in one start out of two
        _thread.start_new_thread(self._work, ())

    def _work(self):
        """The background thread: plan, compile elsewhere if the cache lacks a kernel,
        load, warm up and switch the tape; on failure keep the error."""
        # Planning is Python and would share the GIL with the caller's first call: it
        # starts once that call has returned (or after START_DELAY seconds at most).
        if self.go.wait(START_DELAY):
            time.sleep(GRACE)          # let the call that set go return without contention
        try:
            from . import cache            # imports numba: here, not in the caller's thread
            self._mark('start')
            prog = self.compiled = self.tape.new_compiled()
            self._mark('planned')
            self.planned.set()
            self._load(prog, cache)
            self._mark('loaded')
            self.tape.warm(prog)          # compared with the NumPy replay (firstrun.py)
            with native_ops.quiet():      # (its build would skew the timings below)
                if self.tape.choose_units(prog):    # units measured faster in NumPy: again
                    again = self.tape.new_compiled()
                    if cache.missing(again.sources()):
                        # new kernels to compile (seconds): the first plan's serve meanwhile
                        self.tape.switch_to(self, prog)
                    self.compiled = again
                    self._load(again, cache)
                    self.tape.warm(again)
                    prog = self.compiled = self.tape.keep_faster(prog, again)
                    self._mark('chosen')
                faster = self.tape.unless_replay_faster(prog)
            if faster is not None:
                self.tape.switch_to(self, prog)
                self._mark('switched')
            else:                          # the NumPy replay runs faster: it stays
                self.tape.switch_to(self, None)     # (the first plan may be serving)
                self._mark('replay')
        except BaseException as e:     # noqa: BLE001 -- reported through compile_error
            self.error = e if isinstance(e, CompileError) else CompileError(
                f'{type(e).__name__}: {e}')
        finally:
            self.planned.set()
            self.done.set()
            _running.discard(self)

    def _load(self, prog, cache):
        """Compile elsewhere what the cache lacks, then load it all (never compiling
        here); once more if an entry went missing in between (evicted, deleted)."""
        for attempt in (0, 1):
            todo = cache.missing(prog.sources())
            if todo:
                with _compile_slot:
                    # another tape's process may have compiled these kernels meanwhile
                    todo = cache.missing(todo)
                    if todo:
                        self._compile(todo, cache)
                self._mark('compiled')
            try:
                prog.load(compile=False)
                return
            except cache.CacheMiss:
                if attempt:
                    raise

    def _mark(self, stage):
        self.times[stage] = time.perf_counter()

    def _compile(self, sources, cache):
        """Compile ``sources`` into the cache: native kernels and entries (native.py,
        pyentry.py) here, ~20 ms each with the GIL released while LLVM works (a process
        took ~0.3 s to start); if any is numba's, all in a new process
        (cache.compile_elsewhere: numba's compiler holds the GIL for seconds)."""
        from . import entries
        try:
            if all(entries.source_file(n).endswith('.ll') for n, _ in sources):
                cache.compile_native(sources)
            else:
                cache.compile_elsewhere(sources, started=self._started)
        except cache.CacheError as e:
            raise CompileError(str(e)) from e

    def _started(self, proc):
        self.proc = proc
        _warm_numba()                  # meanwhile: numba's first use in this process

    def wait(self, timeout=None):
        """Wait until the tape switched or the compilation failed; whether it switched."""
        self.go.set()
        self.done.wait(timeout)
        return self.done.is_set() and self.error is None


_running: set['Tiering'] = set()     # the Tierings still working, in any thread

# One compiling process at a time: each holds a CPU and numba's compiler (~200 MB), and
# tapes share kernels, so a queue also compiles less.  Unbounded, a test suite or an
# AutoCompiled meeting many signatures started dozens at once (load ~100 on 2 cores).
_compile_slot = threading.Lock()


def wait_all(timeout=None):
    """Wait until every background compilation of this process has finished (for
    measurements that must not see a loading thread's allocations); True if all did."""
    for t in list(_running):
        t.go.set()
        if not t.done.wait(timeout):
            return False
    return True


_warmed: list[bool] = []


def _warm_numba():
    """Compile a trivial function: numba's first compilation in a process initialises
    its compiler and LLVM (~0.3 s of CPU), which loading the kernels would pay later."""
    if not _warmed:
        from numba import njit
        njit(lambda x: x + 1)(1)
        _warmed.append(True)
