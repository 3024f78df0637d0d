"""Damage to the disk cache, for test_cache_faults.py and benchmarks/cache_faults.py.

A trial damages one file of a compiled entry (truncated, random bytes, one flipped bit,
deleted) in a copy of a cache, compiles a small tape as a new process would, and says
whether the process survived with the right gradient, which warning it gave and
whether the cache was whole again afterwards.  Run in fresh processes (a crash then
ends the trial, not the caller)::

    python faults.py build FOLDER                        compile the tape into FOLDER
    python faults.py trials TEMPLATE WORK MODE SEED ARTEFACT:FAULT ...
    python faults.py check FOLDER MODE                   compile or load it from FOLDER
    python faults.py rmdir FOLDER                        delete FOLDER while in use
    python faults.py unwritable FOLDER ERRNO MODE        writes into FOLDER fail

Each prints one JSON object per line (with ``run``'s fields).
"""
import json
import os
import random
import shutil
import subprocess
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NUMBA_ARTEFACTS = ('py', 'nbi', 'nbc', 'manifest')       # a module numba compiled
NATIVE_ARTEFACTS = ('ll', 'o', 'manifest')               # a native kernel or entry
FAULTS = ('truncate', 'random', 'flip', 'delete')
X = np.linspace(-1.0, 1.0, 5)


def f(x):
    return np.sum(np.exp(x) * 1.5 - x * x)


def artefacts():
    """The kinds of file a compiled tape's entries have here: native ones unless
    ``$TRACKED_NATIVE`` is '0' (the fault processes inherit it)."""
    native = os.environ.get('TRACKED_NATIVE', '1') != '0'
    return NATIVE_ARTEFACTS if native else NUMBA_ARTEFACTS


def files(cache_root, artefact):
    """The files of kind ``artefact`` of every entry under ``cache_root``."""
    out = []
    for dirpath, _, names in os.walk(cache_root):
        if '.damaged' in dirpath or '.staging' in dirpath:
            continue
        for n in names:
            kind = 'manifest' if n == 'MANIFEST' else n.rsplit('.', 1)[-1]
            if kind == artefact:
                out.append(os.path.join(dirpath, n))
    return sorted(out)


def damage(cache_root, artefact, fault, rng):
    """Damage one file of kind ``artefact`` (picked by ``rng``) with ``fault``; its path."""
    path = rng.choice(files(cache_root, artefact))
    data = bytearray(open(path, 'rb').read())
    if fault == 'delete':
        os.remove(path)
        return path
    if fault == 'truncate':
        data = data[:rng.randrange(len(data))]
    elif fault == 'random':
        data = bytearray(rng.randbytes(len(data)))
    elif fault == 'flip':
        bit = rng.randrange(8 * len(data))
        data[bit // 8] ^= 1 << bit % 8
    else:
        raise ValueError(fault)
    with open(path, 'wb') as fh:
        fh.write(data)
    return path


def run(mode):
    """Compile the tape as a new process would (``mode``: 'foreground' or 'background');
    a dict: the gradient is right (against the NumPy replay), the tape runs its kernels,
    every module was loaded from the cache (none compiled), the warnings given."""
    import tracked as tr
    from tracked.compiled_tape import cache, entries
    cache._loaded.clear()                  # as a new process: nothing loaded yet
    cache.built_here.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        tape = tr.compile(tr.GradientTape(f, X), background=mode == 'background')
        tape.gradient(X)
        switched = tape.wait(600)
        got = tape.gradient(X * 0.5)[0]
    want = tr.GradientTape(f, X).gradient(X * 0.5)[0]
    names = [n for n, _ in tape.compiled.sources()] if tape.compiled is not None else []
    missed = [n for n in names if (n in cache.built_here if entries.source_file(n).endswith('.ll')
                                   else entries.missed(sys.modules[n]))]
    return {'right': bool(np.allclose(got, want, rtol=1e-12, atol=1e-14)),
            'compiled': bool(switched and tape.compiled is not None),
            'from_cache': bool(names) and not missed,
            'warnings': [str(w.message) for w in caught if w.category is cache.CacheWarning],
            'error': str(tape.compile_error or '')}


def entry_of(cache_root, path):
    """The entry (module name) a file under ``cache_root`` belongs to."""
    return os.path.relpath(path, cache_root).split(os.sep)[1]


def healed(result, entry, check):
    """Whether a trial healed: ``result`` of the damaged run (right, compiled, one
    warning naming the damaged ``entry`` and $TRACKED_CACHE_DIR) and ``check`` of the
    run after it (no warning, everything loaded from the cache)."""
    warned = len(result['warnings']) == 1 and entry in result['warnings'][0] \
        and '$TRACKED_CACHE_DIR' in result['warnings'][0]
    return bool(result['right'] and result['compiled'] and warned and check['right']
                and check['compiled'] and check['from_cache'] and not check['warnings'])


def failing_writes(folder, error):
    """A stand-in for ``entries._write_bytes`` whose writes under ``folder`` fail
    half-way with ``error`` (a full disk, a read-only file system)."""
    from tracked.compiled_tape import entries
    write = entries._write_bytes

    def failing(path, data):
        if str(path).startswith(str(folder)):
            write(path, data[:len(data) // 2])
            raise OSError(error, os.strerror(error), str(path))
        write(path, data)
    return failing


def leftovers(folder):
    """Temporary files and staging folders left under ``folder``."""
    return [os.path.join(d, n) for d, dirs, names in os.walk(folder) for n in names + dirs
            if n.endswith('.tmp') or os.path.basename(d) == '.staging']


def main(argv):
    os.environ.pop('TRACKED_CACHE_DIR', None)
    what, args = argv[0], argv[1:]
    if what in ('build', 'check'):
        os.environ['TRACKED_CACHE_DIR'] = args[0]
        print(json.dumps(run(args[1] if len(args) > 1 else 'foreground')))
    elif what == 'trials':
        template, work, mode, seed = args[:4]
        rng = random.Random(int(seed))
        for n, spec in enumerate(args[4:]):
            artefact, fault = spec.split(':')
            folder = os.path.join(work, f'{n}-{artefact}-{fault}')
            shutil.copytree(template, folder)
            os.environ['TRACKED_CACHE_DIR'] = folder
            entry = entry_of(folder, damage(folder, artefact, fault, rng))
            result = run(mode)
            check = run('foreground')
            print(json.dumps({'spec': spec, 'entry': entry, 'result': result, 'check': check,
                              'healed': healed(result, entry, check)}), flush=True)
    elif what == 'rmdir':             # compiled, deleted, then compiled again in one process
        os.environ['TRACKED_CACHE_DIR'] = args[0]
        first = run('foreground')
        shutil.rmtree(args[0])
        again = run('background')
        print(json.dumps({'first': first, 'again': again, 'healed': all(
            r['right'] and r['compiled'] and not r['warnings'] for r in (first, again))}))
    elif what == 'unwritable':
        folder, error, mode = args[0], int(args[1]), args[2]
        os.environ['TRACKED_CACHE_DIR'] = folder
        from tracked.compiled_tape import entries
        entries._write_bytes = failing_writes(folder, error)
        r = run(mode)
        warned = len(r['warnings']) == 1 and os.strerror(error) in r['warnings'][0] \
            and '$TRACKED_CACHE_DIR' in r['warnings'][0]
        print(json.dumps({'result': r, 'leftovers': leftovers(folder), 'healed': bool(
            r['right'] and r['compiled'] and warned and not leftovers(folder))}))
    else:
        raise SystemExit(__doc__)


def start(*argv):
    """Start ``faults.py argv`` in a new process with this checkout's tracked."""
    code = (f'import sys; sys.path[:0] = [{ROOT!r}, {HERE!r}]\n'
            'import faults; faults.main(sys.argv[1:])')
    return subprocess.Popen([sys.executable, '-c', code, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(proc, timeout=600):
    """``(returncode, [JSON objects printed], stderr)`` of a process ``start`` started."""
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, [json.loads(x) for x in out.splitlines() if x.startswith('{')], err


def python(*argv, timeout=600):
    """Run ``faults.py argv`` in a new process: ``finish``'s result."""
    return finish(start(*argv), timeout)


if __name__ == '__main__':
    main(sys.argv[1:])
