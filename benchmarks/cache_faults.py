"""Faults of the disk cache of compiled kernels: how many trials healed.

Each trial runs in fresh processes (tests/compiled_tape/faults.py), in an empty
cache folder of its own:

- a file of a compiled entry damaged -- the source (``py``), numba's index (``nbi``) or
  machine code (``nbc``), the ``MANIFEST`` -- truncated, overwritten with random bytes,
  one bit flipped, or deleted; a process then compiles the tape (in the foreground or,
  one trial in two, in the background).  Healed: it did not crash, its gradient is the
  NumPy replay's, its kernels run, it gave one warning naming the damaged entry and
  $TRACKED_CACHE_DIR, and a next process loads every kernel from the cache without a
  warning;
- the cache folder deleted while a process uses it;
- writes that fail half-way (a full disk, ENOSPC; a read-only file system, EROFS):
  healed when the gradient is right, the kernels run (from a temporary folder), one
  warning says why and what to do, and no temporary file is left;
- two processes compiling the same tape at once, then a third loading it.

    python benchmarks/cache_faults.py [K [KIND]]   # K trials of each kind (default 4),
                                                   # or of the kinds naming KIND ('nbc flip')
"""
import errno
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'tests', 'compiled_tape'))

import faults  # noqa: E402


def _ok(proc_result, key='healed'):
    rc, lines, err = proc_result
    if rc != 0:
        print(f'    process exited with {rc}: {err.strip().splitlines()[-1:]}')
    return rc == 0 and bool(lines) and all(line[key] for line in lines)


def damaged(template, work, k, artefact, fault):
    """One trial of a damaged file: its process, then a new one checking the cache."""
    mode = 'background' if k % 2 else 'foreground'
    rc, lines, err = faults.python('trials', template, work, mode, str(k), f'{artefact}:{fault}')
    if not _ok((rc, lines, err)):
        return False
    folder = os.path.join(work, f'0-{artefact}-{fault}')
    rc, (check,), err = faults.python('check', folder)
    return rc == 0 and check['right'] and check['from_cache'] and not check['warnings']


def race(work):
    """Two processes compiling the tape into one empty folder at once, then a third."""
    procs = [faults.start('check', work, mode) for mode in ('foreground', 'background')]
    results = [faults.finish(p) for p in procs]
    if not all(rc == 0 and lines[0]['right'] and lines[0]['compiled'] and not lines[0]['warnings']
               for rc, lines, _ in results):
        return False
    rc, (check,), _ = faults.python('check', work)
    return rc == 0 and check['right'] and check['from_cache'] and not check['warnings']


def main(k, only=''):
    kinds = {}
    with tempfile.TemporaryDirectory() as tmp:
        template = os.path.join(tmp, 'template')
        rc, _, err = faults.python('build', template)
        assert rc == 0, err
        for artefact in faults.artefacts():
            for fault in faults.FAULTS:
                kinds[f'{artefact} {fault}'] = lambda t, a=artefact, f=fault: damaged(
                    template, os.path.join(tmp, f'{a}-{f}-{t}'), t, a, f)
        kinds['folder deleted in use'] = lambda t: _ok(faults.python(
            'rmdir', os.path.join(tmp, f'rmdir-{t}')))
        for name, code in (('full disk', errno.ENOSPC), ('read-only', errno.EROFS)):
            kinds[name] = lambda t, c=code: _ok(faults.python(
                'unwritable', os.path.join(tmp, f'unwritable-{c}-{t}'), str(c),
                'background' if t % 2 else 'foreground'))
        kinds['two processes at once'] = lambda t: race(os.path.join(tmp, f'race-{t}'))
        total = healed = 0
        for name, trial in kinds.items():
            if only not in name:
                continue
            n = sum(bool(trial(t)) for t in range(k))
            print(f'{name:24s} {n}/{k} healed', flush=True)
            healed += n
            total += k
    print(f'{"all":24s} {healed}/{total} healed')


if __name__ == '__main__':
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4, ' '.join(sys.argv[2:]))
