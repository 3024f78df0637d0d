"""Fixtures of the compiled-tape tests."""
import pytest

from tracked.compiled_tape import cache, tiers


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty cache folder, seen as a new process sees it (no module loaded, no
    warning given yet); the modules loaded meanwhile stay loaded for later tests.
    Background compilations an earlier test left running finish first: they would
    write into this test's folders (the module state below is theirs too)."""
    assert tiers.wait_all(600), 'a background compilation of an earlier test hangs'
    monkeypatch.setenv('TRACKED_CACHE_DIR', str(tmp_path))
    loaded = cache._loaded
    for name, value in (('_loaded', {}), ('_temp', []), ('_failed', {}), ('_warned', set())):
        monkeypatch.setattr(cache, name, value)
    yield tmp_path
    loaded.update(cache._loaded)
