"""Fixtures of the compiled-tape tests."""
import pytest

from tracked.compiled_tape import cache


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty cache folder, seen as a new process sees it (no module loaded, no
    warning given yet); the modules loaded meanwhile stay loaded for later tests."""
    monkeypatch.setenv('TRACKED_CACHE_DIR', str(tmp_path))
    loaded = cache._loaded
    for name, value in (('_loaded', {}), ('_temp', []), ('_failed', {}), ('_warned', set())):
        monkeypatch.setattr(cache, name, value)
    yield tmp_path
    loaded.update(cache._loaded)
