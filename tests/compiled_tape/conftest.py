"""Fixtures of the compiled-tape tests."""
import os

import pytest

from tracked.compiled_tape import cache

# These tests check the kernels: a plan must not move a unit to NumPy because NumPy
# happened to time faster on a busy machine (test_choice.py turns the measurement on).
os.environ['TRACKED_NUMPY_CHOICE'] = '0'


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
