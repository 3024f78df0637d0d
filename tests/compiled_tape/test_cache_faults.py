"""The disk cache under faults (tracked/compiled_tape/cache.py): damaged files, a folder
deleted while in use, a folder that cannot be written, a full disk, kernels that give
another result than the NumPy replay.  Each ends with the right gradient and the
documented warning or error; damage that numba could crash on is tried in another
process (faults.py), so that a crash fails the test instead of ending it.

Two processes compiling the same kernels at once: test_tiers.py."""
import errno
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tracked as tr
from tracked.compiled_tape import cache, compiled, entries
from tracked.compiled_tape.tiers import CompileError

from . import faults

TIMEOUT = 300


@pytest.mark.parametrize('native', ['1', '0'])
def test_every_damaged_file_is_set_aside_with_a_warning_and_rebuilt(tmp_path, monkeypatch,
                                                                    native):
    # in one other process: the tape compiled into a template, then each fault on a copy
    # of it, each followed by a load from the healed copy (faults.run); native entries
    # (IR and object code) and numba's modules
    monkeypatch.setenv('TRACKED_NATIVE', native)
    specs = [f'{a}:{f}' for a in faults.artefacts() for f in faults.FAULTS]
    rc, build, err = faults.python('build', str(tmp_path / 'template'), timeout=TIMEOUT)
    assert rc == 0 and build[0]['right'], err
    rc, trials, err = faults.python('trials', str(tmp_path / 'template'), str(tmp_path / 'work'),
                                    'foreground', '0', *specs, timeout=TIMEOUT)
    assert rc == 0, err                                  # no crash, no exception
    assert [t['spec'] for t in trials] == specs
    for t in trials:
        assert t['healed'], t                            # right, one warning, then whole
        warning = t['result']['warnings'][0]
        assert 'is damaged' in warning and '--clear' in warning and '.damaged' in warning


@pytest.mark.parametrize('native, artefact', [('1', 'o'), ('0', 'nbc')])
def test_a_background_compile_never_loads_damaged_code(tmp_path, monkeypatch, native, artefact):
    # one flipped bit in machine code crashed the user's process or gave a wrong
    # gradient when the background thread loaded it: now the entry is rebuilt (by the
    # compiling process for numba's, which is also the first to load it)
    monkeypatch.setenv('TRACKED_NATIVE', native)
    rc, _, err = faults.python('build', str(tmp_path / 'template'), timeout=TIMEOUT)
    assert rc == 0, err
    rc, trials, err = faults.python('trials', str(tmp_path / 'template'), str(tmp_path / 'work'),
                                    'background', '1', f'{artefact}:flip', timeout=TIMEOUT)
    assert rc == 0 and len(trials) == 1, err
    assert all(t['healed'] for t in trials), trials


def _tape(dtype=np.float64):
    return tr.GradientTape(faults.f, faults.X.astype(dtype))


def _right(tape, dtype=np.float64):
    x = (faults.X * 0.5).astype(dtype)
    return np.allclose(tape.gradient(x)[0], _tape(dtype).gradient(x)[0], rtol=1e-6)


def test_a_cache_folder_deleted_while_in_use_is_made_again(fresh_cache):
    assert _right(tr.compile(_tape(), background=False))
    shutil.rmtree(fresh_cache)
    # kernels not compiled yet (float32) compile into the folder made again ...
    assert _right(tr.compile(_tape(np.float32), background=False), np.float32)
    assert os.path.isdir(cache.cache_dir()) and cache.missing(
        tr.compile(_tape(np.float32)).new_compiled().sources()) == []
    # ... and so do those a new process would miss now
    cache._loaded.clear()
    ct = tr.compile(_tape())
    assert ct.wait(TIMEOUT), ct.compile_error
    assert _right(ct) and cache.missing(ct.compiled.sources()) == []


@pytest.mark.parametrize('error, background', [(errno.ENOSPC, False), (errno.EROFS, False),
                                               (errno.ENOSPC, True)])
def test_a_folder_that_cannot_be_written_gives_one_warning_and_a_temporary_one(
        fresh_cache, monkeypatch, error, background):
    # writes into the cache fail half-way: a full disk, a read-only file system
    monkeypatch.setattr(entries, '_write_bytes', faults.failing_writes(fresh_cache, error))
    with pytest.warns(cache.CacheWarning) as caught:
        ct = tr.compile(_tape(), background=background)
        assert ct.wait(TIMEOUT), ct.compile_error
        assert _right(ct) and ct.compiled is not None
    (w,) = caught
    text = str(w.message)
    assert cache.cache_dir() in text and os.strerror(error) in text
    assert '$TRACKED_CACHE_DIR' in text
    assert faults.leftovers(fresh_cache) == []
    assert cache._temp and cache.missing(ct.compiled.sources()) == []  # kept for this process


def test_a_full_disk_met_by_the_compiling_process_moves_to_a_temporary_folder(
        fresh_cache, monkeypatch):
    # numba's own writes fail in the compiling process: it names the errno, and the
    # compilation is done again in a temporary folder (numba's kernels: native ones are
    # built without a process)
    monkeypatch.setenv('TRACKED_NATIVE', '0')
    full = (f'import sys\nif sys.argv[2].startswith({str(fresh_cache)!r}):\n'
            f'    sys.exit("OSError: [Errno {errno.ENOSPC}] No space left on device")\n')
    monkeypatch.setattr(cache, 'WORKER', full + cache.WORKER)
    with pytest.warns(cache.CacheWarning, match='No space left.*TRACKED_CACHE_DIR'):
        ct = tr.compile(_tape())
        assert ct.wait(TIMEOUT), ct.compile_error
    assert _right(ct) and ct.compiled is not None and faults.leftovers(fresh_cache) == []


def test_when_no_folder_can_be_written_native_kernels_still_run(fresh_cache, monkeypatch):
    # every folder is full, the temporary one too: LLVM's code is used from memory, unkept
    monkeypatch.setenv('TRACKED_NATIVE', '1')
    monkeypatch.setattr(entries, '_write_bytes', faults.failing_writes('/', errno.ENOSPC))
    with pytest.warns(cache.CacheWarning, match=r'No space left.*\$TRACKED_CACHE_DIR'):
        ct = tr.compile(_tape(), background=False)
    assert _right(ct) and ct.compiled is not None
    assert faults.leftovers(fresh_cache) == [] and faults.leftovers(cache._temp[0]) == []


def test_when_no_folder_can_be_written_the_error_says_which_and_what_to_do(
        fresh_cache, monkeypatch):
    # every folder is full, the temporary one too (numba writes its own files)
    monkeypatch.setenv('TRACKED_NATIVE', '0')
    monkeypatch.setattr(entries, '_write_bytes', faults.failing_writes('/', errno.ENOSPC))
    with pytest.warns(cache.CacheWarning):
        with pytest.raises(cache.CacheError, match=r'No space left.*\$TRACKED_CACHE_DIR'):
            tr.compile(_tape(), background=False)
    ct = tr.compile(_tape())                                  # in the background ...
    assert ct.wait(TIMEOUT) is False and 'No space left' in str(ct.compile_error)
    assert _right(ct)                                         # ... the NumPy replay answers
    assert faults.leftovers(fresh_cache) == [] and faults.leftovers(cache._temp[0]) == []


def _wrong_after_loading(monkeypatch):
    """Loaded programs compute with another constant: kernels that are not what was
    compiled (the C table holds the tape's 1.5)."""
    load = compiled.CompiledProgram.load

    def wrong(self, *args, **kwargs):
        load(self, *args, **kwargs)
        self.C[self.C == 1.5] = 2.5
        return self
    monkeypatch.setattr(compiled.CompiledProgram, 'load', wrong)


def test_kernels_whose_first_result_differs_from_numpy_are_not_used(fresh_cache, monkeypatch):
    _wrong_after_loading(monkeypatch)
    with pytest.raises(CompileError, match='output 0 .*NumPy replay.*--clear'):
        tr.compile(_tape(), background=False)
    ct = tr.compile(_tape())
    assert ct.wait(TIMEOUT) is False and 'NumPy replay' in str(ct.compile_error)
    assert ct.compiled is None and _right(ct)


def test_the_background_compile_first_loads_in_the_compiling_process(fresh_cache, monkeypatch):
    monkeypatch.setenv('TRACKED_NATIVE', '0')        # numba's kernels (native: test_native.py)
    ct = tr.compile(_tape())
    assert ct.wait(TIMEOUT), ct.compile_error
    assert ct._tiering.proc is not None and ct._tiering.proc.returncode == 0
    names = [name for name, _ in ct.compiled.sources()]
    # this process loaded what the other had compiled and loaded back: numba hit its cache
    assert not any(entries.missed(sys.modules[n]) for n in names)


def _entry(store, name, size, used):
    folder = store / name
    folder.mkdir(parents=True)
    (folder / f'{name}.py').write_bytes(b'x' * size)
    entries.write_manifest(str(folder))
    os.utime(folder / entries.MANIFEST, (used, used))
    return folder


def test_the_size_bound_deletes_the_least_recently_used_entries(tmp_path, monkeypatch):
    monkeypatch.setenv('TRACKED_CACHE_SIZE', '12K')
    folders = [_entry(tmp_path, f'k_{n}', 3000, 1000 + n) for n in range(5)]
    stale = tmp_path / cache.STAGING / '123-dead'
    stale.mkdir(parents=True)
    os.utime(stale, (0, 0))
    half = tmp_path / '.abc.tmp'                          # a total half written, long ago
    half.write_bytes(b'12')
    os.utime(half, (0, 0))
    cache._trim(str(tmp_path))
    # 5 x 3 150 bytes for 12 288: the oldest go until 90% of the bound is left
    assert [e.exists() for e in folders] == [False, False, True, True, True]
    assert not stale.exists() and not half.exists()
    # a use (a check, then the load) makes an entry the most recent
    cache._touch(str(folders[2]))
    _entry(tmp_path, 'k_new', 3000, 2000)
    cache._trim(str(tmp_path))
    assert [e.exists() for e in folders[2:]] == [True, False, True]
    # what was just published stays, whatever the bound
    monkeypatch.setenv('TRACKED_CACHE_SIZE', '1')
    cache._trim(str(tmp_path), keep=['k_new'])
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != cache.STAGING) == \
        [cache.TOTAL, 'k_new']


def test_sizes_read_from_the_environment(monkeypatch):
    assert [cache.parse_size(t) for t in ('500M', '2G', '1.5 GiB', '64kb', '4096')] == \
        [500 << 20, 2 << 30, 3 << 29, 64 << 10, 4096]
    monkeypatch.setattr(cache, '_warned', set())
    monkeypatch.setenv('TRACKED_CACHE_SIZE', 'lots')
    with pytest.warns(cache.CacheWarning, match="'lots' is not a size"):
        assert cache.size_limit() == 1 << 30


def test_info_and_clear_on_the_command_line(fresh_cache, capsys):
    tr.compile(_tape(), background=False)
    (fresh_cache / 'numba-0.1-py30-old').mkdir()          # another numba's folder
    r = subprocess.run([sys.executable, '-m', 'tracked.compiled_tape.cache', '--info'],
                       capture_output=True, text=True, timeout=TIMEOUT,
                       env=dict(os.environ, PYTHONPATH=faults.ROOT))
    assert r.returncode == 0, r.stderr
    assert cache.cache_dir() in r.stdout and 'entries  2,' in r.stdout
    assert 'numba-0.1-py30-old' in r.stdout
    cache.main(['--clear'])
    assert 'cleared' in capsys.readouterr().out
    assert [p.name for p in fresh_cache.iterdir()] == []
