"""Threads sharing tapes (API.md section 4: shared state is safe): every path, compared
with single-threaded results bit for bit (hammer.py says why), each in a child
process so that a crash fails the test instead of ending the run."""
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import tracked as tr

HAMMER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'hammer.py')
TIMEOUT = 600            # seconds: a child compiles a few kernels when the cache lacks them


def run(scenario, **env):
    """The counts a hammer scenario prints, after checking that the child ended well."""
    # the child imports the tracked this test imports
    root = os.path.dirname(os.path.dirname(os.path.abspath(tr.__file__)))
    env = dict(os.environ, **env,
               PYTHONPATH=os.pathsep.join([root] + os.environ.get('PYTHONPATH', '').split(
                   os.pathsep)).rstrip(os.pathsep))
    r = subprocess.run([sys.executable, HAMMER, scenario], env=env, capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert r.returncode == 0, f'the child ended with {r.returncode}: {r.stderr[-2000:]}'
    counts = json.loads(r.stdout.strip().splitlines()[-1])
    assert not counts['errors'], counts['errors'][:3]
    assert counts['wrong'] == 0, counts
    return counts


def test_the_reported_example_gives_every_thread_its_gradient():
    assert run('issue_example')['calls'] == 24_000


def test_a_shared_compiled_tape_with_out_per_thread_and_the_general_path():
    assert run('compiled')['calls'] >= 9_000


def test_a_shared_numpy_replay_also_while_it_is_retraced():
    assert run('replay')['calls'] >= 2_400


def test_shared_jacobian_and_hessian_tapes_replayed_and_compiled():
    assert run('jacobian_hessian')['calls'] >= 4_500


def test_a_shared_autocompiled_from_its_first_call_with_duplicated_models():
    assert run('auto')['calls'] >= 2_700


def test_threads_calling_while_the_tape_switches_to_its_kernels(tmp_path):
    counts = run('switch', TRACKED_CACHE_DIR=str(tmp_path))
    assert counts['runs_before_switch'] >= 1 and counts['calls'] >= 600


@pytest.mark.parametrize('threads', [1, 4])
def test_frames_are_made_as_calls_need_them(threads):
    # one frame per call under way at once, none per thread that ever called
    ct = tr.compile(tr.GradientTape(lambda x: np.sum(np.sin(x) * x), np.ones(3)),
                    background=False)
    pool = ct.compiled.pool
    assert len(pool) == 1
    barrier = threading.Barrier(threads)

    def work():
        barrier.wait()
        for _ in range(200):
            ct.gradient(np.ones(3))
    ts = [threading.Thread(target=work) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert 1 <= len(pool) <= threads
