"""The cache's size bound (tracked/compiled_tape/cache.py): a publish adds to a running
total (``cache.TOTAL``) instead of walking the whole cache, which took minutes in a
large one; the folder is walked when the total passes the bound, is missing, damaged or
an hour old, and then the least recently used entries go as before.

The deletion order itself: test_cache_faults.py."""
import os
import shutil
import subprocess
import sys
import time

import pytest

from tracked.compiled_tape import cache, entries

from . import faults


def _entry(store, name, size, used=1000.0):
    """A whole entry of ``size`` bytes of source (plus its MANIFEST) last used at ``used``."""
    folder = os.path.join(store, name)
    os.makedirs(folder)
    with open(os.path.join(folder, f'{name}.py'), 'wb') as f:
        f.write(b'x' * size)
    entries.write_manifest(folder)
    os.utime(os.path.join(folder, entries.MANIFEST), (used, used))
    return folder


def _publish(store, name, size):
    """Publish entry ``name`` of ``size`` bytes of source through a staging folder, as a
    compilation does; its bytes on disk."""
    job = cache._stage_in(store, [(name, 'x' * size)])
    entries.write_manifest(os.path.join(job, name))
    cache.publish(job)
    return cache._size(os.path.join(store, name))


def _bytes(store):
    """What a walk finds: the bytes of the store's entries."""
    return sum(cache._size(e.path) for e in os.scandir(store)
               if e.is_dir() and e.name != cache.STAGING)


def _names(store):
    return sorted(e.name for e in os.scandir(store) if e.is_dir() and e.name != cache.STAGING)


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv('TRACKED_CACHE_SIZE', '1G')
    return str(tmp_path)


@pytest.fixture
def looked_at(monkeypatch):
    """``(call, path)`` of each path stat-ed, listed or walked from now on (the calls a
    walk of the cache makes, os.walk's included)."""
    seen = []
    for fn in ('stat', 'lstat', 'scandir', 'listdir', 'walk'):
        def spy(path='.', *args, _fn=fn, _call=getattr(os, fn), **kwargs):
            if isinstance(path, (str, os.PathLike)):
                seen.append((_fn, os.path.normpath(os.fspath(path))))
            return _call(path, *args, **kwargs)
        monkeypatch.setattr(os, fn, spy)
    return seen


def test_a_publish_into_a_large_cache_does_not_walk_it(store, looked_at):
    old = [_entry(store, f'k_old_{n}', 100) for n in range(2000)]
    cache._trim(store)                                   # the walk that counts them
    before, counted = cache._read_total(store)
    assert before == _bytes(store) and before > 2000 * 100
    looked_at.clear()
    size = _publish(store, 'k_new', 500)
    # the published entry is looked at, not one of the 2 000 others, and the store is
    # not listed (it is stat-ed: a makedirs of its staging folder)
    inside = tuple(o + os.sep for o in old)
    assert [(fn, p) for fn, p in looked_at if p in old or p.startswith(inside)] == []
    assert [fn for fn, p in looked_at if p == store] == ['stat']
    assert 0 < len(looked_at) < 30, looked_at
    assert cache._read_total(store) == (before + size, counted)   # counted then, plus its
    assert cache._read_total(store)[0] == _bytes(store)
    # nor does publishing an entry another process published first (nothing added)
    looked_at.clear()
    _publish(store, 'k_new', 500)
    assert [fn for fn, p in looked_at if p == store] == ['stat']
    assert cache._read_total(store) == (before + size, counted)


def test_publishing_past_the_bound_deletes_the_least_recently_used_down_to_90_percent(
        store, monkeypatch):
    for n in range(3):
        _entry(store, f'k_{n}', 3000, used=1000 + n)     # 3 x 3 150 bytes
    cache._trim(store)
    each = cache._size(os.path.join(store, 'k_0'))
    monkeypatch.setenv('TRACKED_CACHE_SIZE', str(4 * each - 1))
    # the fourth passes the bound: the oldest goes, the total is the walk's
    _publish(store, 'k_3', 3000)
    assert _names(store) == ['k_1', 'k_2', 'k_3']
    assert cache._read_total(store)[0] == _bytes(store) == 3 * each
    # a bound below what was just published: everything else goes, never what is kept
    monkeypatch.setenv('TRACKED_CACHE_SIZE', '1')
    _publish(store, 'k_4', 3000)
    assert _names(store) == ['k_4'] and cache._read_total(store)[0] == each


def test_the_bound_holds_over_many_publishes(store, monkeypatch):
    monkeypatch.setenv('TRACKED_CACHE_SIZE', '20K')
    walks = []
    trim = cache._trim
    monkeypatch.setattr(cache, '_trim', lambda *a, **k: walks.append(1) or trim(*a, **k))
    for n in range(40):
        _publish(store, f'k_{n}', 2000)                  # 2 144 bytes each: 80 in all
        assert _bytes(store) <= 20 << 10
        assert cache._read_total(store)[0] == _bytes(store)
    # a walk each time the total passes the bound (from 90% of it: every second one),
    # not at each publish
    assert 15 <= len(walks) <= 25
    assert 'k_39' in _names(store) and 'k_0' not in _names(store)


@pytest.mark.parametrize('content', [None, b'', b'garbage', b'12', b'12 34 56', b'-5 1e9',
                                     b'\xff\xfe 1', b'12 nan', b'12 inf'])
def test_a_missing_or_damaged_total_is_counted_again(store, monkeypatch, content):
    for n in range(5):
        _entry(store, f'k_{n}', 1000)
    path = os.path.join(store, cache.TOTAL)
    if content is not None:
        with open(path, 'wb') as f:
            f.write(content)
    size = _publish(store, 'k_5', 1000)
    total, counted = cache._read_total(store)
    assert total == _bytes(store) == 6 * size and abs(counted - time.time()) < 60


@pytest.mark.parametrize('age', [cache.RESCAN + 1, -600])      # an hour old; in the future
def test_a_total_an_hour_old_is_counted_again(store, monkeypatch, age):
    # entries that went behind its back (by hand): the total says 1G, the walk 5 entries
    for n in range(5):
        _entry(store, f'k_{n}', 1000)
    monkeypatch.setenv('TRACKED_CACHE_SIZE', '2G')
    cache._write_total(store, 1 << 30, time.time() - age)
    size = _publish(store, 'k_5', 1000)
    total, counted = cache._read_total(store)
    assert total == _bytes(store) == 6 * size and abs(counted - time.time()) < 60
    assert len(_names(store)) == 6
    # and one that understates it (entries made by hand) lets the walk trim
    cache._write_total(store, 0, time.time() - age)
    monkeypatch.setenv('TRACKED_CACHE_SIZE', str(4 * size))
    _publish(store, 'k_6', 1000)
    assert _names(store) == ['k_4', 'k_5', 'k_6']
    assert cache._read_total(store)[0] == _bytes(store) == 3 * size


def test_entries_deleted_behind_the_totals_back(fresh_cache, monkeypatch):
    store = cache.cache_dir()
    size = _publish(store, 'k_0', 1000)
    monkeypatch.setenv('TRACKED_CACHE_SIZE', str(9 * size - 1))
    for n in range(1, 8):
        _publish(store, f'k_{n}', 1000)
    # deleted by hand: the total overstates what is there; the next publish that passes
    # the bound walks, finds room, and deletes nothing
    for n in range(1, 6):
        shutil.rmtree(os.path.join(store, f'k_{n}'))
    assert cache._read_total(store)[0] == 8 * size
    _publish(store, 'k_8', 1000)
    _publish(store, 'k_9', 1000)
    assert _names(store) == ['k_0', 'k_6', 'k_7', 'k_8', 'k_9']
    assert cache._read_total(store)[0] == _bytes(store) == 5 * size
    # clear() deletes the folder, its total with it: the next publish starts again
    assert cache.clear() > 0
    store = cache.cache_dir()
    _publish(store, 'k_a', 1000)
    assert _names(store) == ['k_a'] and cache._read_total(store)[0] == size


def test_entries_deleted_by_another_process_during_a_walk(store, monkeypatch):
    for n in range(6):
        _entry(store, f'k_{n}', 1000, used=1000 + n)
    damaged = os.path.join(store, cache.DAMAGED)
    os.makedirs(damaged)
    _entry(damaged, 'k_bad', 1000)
    each = cache._size(os.path.join(store, 'k_0'))
    used = cache._used
    gone = []

    def racing(path):
        # another process's trim takes entries and the damaged ones as this walk goes
        if not gone:
            for victim in ('k_0', 'k_3', cache.DAMAGED):
                shutil.rmtree(os.path.join(store, victim))
            gone.append(path)
        return used(path)
    monkeypatch.setattr(cache, '_used', racing)
    monkeypatch.setenv('TRACKED_CACHE_SIZE', str(4 * each))
    _publish(store, 'k_6', 1000)                         # no total yet: a walk
    assert gone
    # k_1, k_2, k_4, k_5 and k_6 were left: the two oldest went for the bound
    assert _names(store) == ['k_4', 'k_5', 'k_6']
    monkeypatch.setattr(cache, '_used', used)
    assert cache._read_total(store)[0] == _bytes(store) == 3 * each


def test_processes_publishing_at_once_keep_the_bound(store, tmp_path_factory):
    # three processes publish 60 entries each into a bound of 40K (2 144 bytes each),
    # all starting at once: none fails, and increments of the total lost between them
    # do not let the cache grow
    go = str(tmp_path_factory.mktemp('barrier') / 'go')
    code = ('import sys; sys.path[:0] = [{root!r}]\n'
            'import os, time\n'
            'from tracked.compiled_tape import cache, entries\n'
            'store, tag, go = sys.argv[1:]\n'
            'print("ready", flush=True)\n'
            'while not os.path.exists(go):\n'
            '    time.sleep(0.005)\n'
            'for n in range(60):\n'
            '    name = f"k_{{tag}}_{{n:02}}"\n'
            '    job = cache._stage_in(store, [(name, "x" * 2000)])\n'
            '    entries.write_manifest(os.path.join(job, name))\n'
            '    cache.publish(job)\n').format(root=faults.ROOT)
    env = dict(os.environ, TRACKED_CACHE_SIZE='40K')
    procs = [subprocess.Popen([sys.executable, '-c', code, store, str(t), go], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for t in range(3)]
    assert [p.stdout.readline() for p in procs] == ['ready\n'] * 3
    open(go, 'w').close()
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert 0 < _bytes(store) <= 2 * (40 << 10)
    assert cache._read_total(store) is not None
    assert faults.leftovers(store) == []                  # no temporary file, no job
