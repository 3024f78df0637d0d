"""Long runs keep flat memory: 10^4 steps of each training loop of the README and the
training guide (training.py), on a small model, with the kernels in use, leave nothing
allocated behind them (tracemalloc) -- in particular the loop that builds a closure
over each new batch, ``tr.withgradient(lambda m: loss(m, xb, yb), ad, model)``, which
kept every batch alive and a tape per step before AutoCompiled keyed its tapes by
code (captures.py)."""
import pytest

from . import training

STEPS = 10_000
KEPT = 64 << 10          # bytes: what a step leaking one small array would pass by far


@pytest.fixture(scope='module', autouse=True)
def own_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv('TRACKED_CACHE_DIR', str(tmp_path_factory.mktemp('cache')))
        yield


@pytest.mark.parametrize('style', training.STYLES)
def test_ten_thousand_steps_keep_no_memory(style):
    kept, _, tapes = training.loop(style, STEPS)
    assert kept < KEPT, f'{style}: {kept} bytes kept after {STEPS} steps'
    if 'AutoCompiled' in style:
        assert tapes == 1            # the closure made per step too: one tape, compiled once
