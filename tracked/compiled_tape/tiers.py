"""Tiered execution: a compiled tape answers at once while its kernels compile elsewhere.

``tr.compile(tape)`` returns before anything is compiled.  Until the kernels are
ready, calls replay the tape in NumPy (the same program, the same guards: at once,
and faster than the eager tape); once the first call has returned, a background
thread plans the program (milliseconds of Python), writes the
kernels' sources to the disk cache and, if numba's cache lacks any of them, starts
a *process* that compiles them there (numba's compiler is Python and holds the
GIL: in a thread it would slow the caller's every call for seconds).  When that
process is done, the thread loads the machine code (milliseconds per kernel), runs
the program once on the recorded values and switches the tape to it.  A call never
waits for any of this, and the switch changes no result beyond floating-point
rounding (NumPy's vectorised ``sin`` or pairwise ``sum`` round differently from a
scalar loop; IEEE-exact operations give the same bits).

If the process fails or is killed, the tape keeps replaying in NumPy and
``tape.compile_error`` says why.  Two processes compiling the same kernels at once
write the same files: sources and numba's cache entries are written to a temporary
file and renamed, so a reader sees a whole file or none.
"""
import json
import os
import subprocess
import sys
import threading

from . import cache

__all__ = ['Tiering', 'CompileError', 'WORKER', 'START_DELAY']

START_DELAY = 0.5        # seconds the planning waits for the first call at most


class CompileError(RuntimeError):
    """The background compilation of a tape's kernels failed (the tape replays in NumPy)."""


# The background process: imports the kernel modules (each a numba cfunc compiled at
# import and saved to numba's cache beside it) and calls the entry once on arrays of
# the call's types, so that its specialisation is cached too.  It imports NumPy and
# numba only, not tracked: it starts in a fraction of a second.
WORKER = r'''
import importlib, json, sys
spec = json.loads(sys.argv[1])
sys.path.insert(0, spec['dir'])
import numpy as np
for name in spec['kernels']:
    importlib.import_module(name)
vm = importlib.import_module(spec['entry']).vm
T = np.zeros(4, dtype=np.int64)                 # no steps: compiles, runs nothing
P = np.zeros(spec['n_p'], dtype=np.int64)
vm(T, P, *[np.zeros((1,) * nd, dtype=dt) for dt, nd in spec['arrays']], 0)
'''


class Tiering:
    """The background compilation of one tape's program (module docstring).

    ``planned`` is set once the program is planned (``compiled`` then holds the
    ``CompiledProgram``, not yet loaded), ``done`` once the tape switched or the
    compilation failed (``error``); ``proc`` is the compiling process while it runs.
    """

    def __init__(self, tape):
        self.tape = tape
        self.program = tape.program
        self.go = threading.Event()      # set by the first call (or wait): start planning
        self.planned = threading.Event()
        self.done = threading.Event()
        self.compiled = None
        self.error = None
        self.proc = None
        self.thread = threading.Thread(target=self._work, name='tracked-compile', daemon=True)
        self.thread.start()

    def _work(self):
        # Planning is Python and would share the GIL with the caller's first call: it
        # starts once that call has returned (or after START_DELAY seconds at most).
        self.go.wait(START_DELAY)
        try:
            prog = self.compiled = self.tape._new_compiled()
            self.planned.set()
            missing = [name for name, source in prog.sources() if not cache.is_cached(name)]
            if missing or not cache.is_cached(prog.entry_name):
                for name, source in prog.sources():
                    cache.write(name, source)
                self._compile_elsewhere(prog)
            prog.load()
            self.tape._warm(prog)
            self.tape._switch(self, prog)
        except BaseException as e:     # noqa: BLE001 -- reported through compile_error
            self.error = e if isinstance(e, CompileError) else CompileError(
                f'{type(e).__name__}: {e}')
        finally:
            self.planned.set()
            self.done.set()

    def _compile_elsewhere(self, prog):
        """Compile ``prog``'s kernels and entry into the disk cache in a new process."""
        spec = {'dir': cache.cache_dir(), 'kernels': [k.name for k in prog.kernels],
                'entry': prog.entry_name, 'n_p': len(prog.P), 'arrays': prog.entry_types()}
        env = dict(os.environ)
        self.proc = subprocess.Popen([sys.executable, '-c', WORKER, json.dumps(spec)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=env)
        _, err = self.proc.communicate()
        if self.proc.returncode != 0:
            tail = err.decode(errors='replace').strip().splitlines()[-3:]
            raise CompileError(f'the compiling process exited with {self.proc.returncode}'
                               + (': ' + ' / '.join(tail) if tail else ''))

    def wait(self, timeout=None):
        """Wait until the tape switched or the compilation failed; whether it switched."""
        self.go.set()
        self.done.wait(timeout)
        return self.done.is_set() and self.error is None
