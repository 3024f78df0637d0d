"""tracked.distributed when workers fail, on a LocalCluster of its own (2 worker processes
whose scheduler gives up on a task after 3 workers died running it): one worker or every
worker killed mid-training changes nothing, with the eager tape or a recorded tape (a
task, computed again); a shard that kills its worker every time raises ShardError, a
loss that never returns StepTimeoutError, and the model and optimiser state are then
those of the steps done.  Faults are real: the worker process ends (os._exit, SIGKILL).
Each test runs under a time limit, so that a regression fails instead of hanging."""
import contextlib
import functools
import os
import re
import signal
import threading
import time

import numpy as np
import pytest

import tracked as tr

from .test_distributed import _data, _model, _split

dask = pytest.importorskip('dask')
distributed = pytest.importorskip('distributed')
td = pytest.importorskip('tracked.distributed')


def bounded(seconds):
    """The test run in a thread that is given up (a daemon) after ``seconds``: a hang
    fails the test instead of holding up the suite."""
    def wrap(test):
        @functools.wraps(test)
        def run(*args, **kwargs):
            error = []

            def target():
                try:
                    test(*args, **kwargs)
                except BaseException as e:     # pytest's failures too: re-raised below
                    error.append(e)
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            thread.join(seconds)
            if thread.is_alive():
                pytest.fail(f'{test.__name__} still running after {seconds} s: a hang')
            if error:
                raise error[0]
        return run
    return wrap


@pytest.fixture(scope='module')
def cluster_client():
    # allowed-failures=2: every worker of the two killed at once counts twice against
    # the tasks they ran, which must survive it; a poison shard kills 3.  A long
    # lost-worker-timeout: 15 s after each death of a worker, the LocalCluster closes
    # its nanny for good if the worker is away at that moment, as it is when killed
    # again and restarting (distributed 2026.8).  No death_timeout: a nanny whose
    # worker takes longer than that to restart (a busy machine) closes too.
    with dask.config.set({'distributed.scheduler.allowed-failures': 2,
                          'distributed.deploy.lost-worker-timeout': '1h'}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=':0')
        # by address: wait_for_workers asks the scheduler, not the cluster's watcher
        # of workers, which raises a KeyError when two die at once, and then stops
        client = distributed.Client(cluster.scheduler_address)
        yield client
        client.close()
        with contextlib.suppress(KeyError):     # that watcher's, raised after closing all
            cluster.close()


@pytest.fixture
def client(cluster_client):
    # Those an earlier test killed are back, and those killed are gone: exactly 2
    # workers, so that a test's runs group the shards alike (td.place and td.train make
    # one group per worker thread; another grouping sums in another order, which
    # changes the last bits: a killed worker the scheduler still listed made 3 groups).
    deadline = time.monotonic() + 60
    while len(cluster_client.nthreads()) != 2 or \
            set(cluster_client.nthreads().values()) != {1}:
        assert time.monotonic() < deadline, cluster_client.nthreads()
        time.sleep(0.05)
    return cluster_client


@tr.rule(opaque=True)        # opaque: a recorded tape calls it again on every replay
def _tripwire(x, fault=None):
    fault.hit(len(x))
    return x, lambda dy: (dy,)


class Fault:
    """``mean_loss`` with a fault, on workers only: on the shard of ``records`` records
    (None: any shard), from its call ``call`` on (counting from 0; once, or at ``every``
    call after): ``'exit'`` ends its worker, ``'kill'`` ends every worker at once
    (``pids``), ``'hang'`` waits for ``release()``, ``None`` does nothing."""

    def __init__(self, tmp, action, call=0, records=None, every=False, pids=()):
        self.tmp, self.action, self.call, self.records = str(tmp), action, call, records
        self.every, self.pids = every, tuple(pids)

    def __call__(self, m, x, y):
        return tr.logitcrossentropy(_tripwire(m(x), fault=self), y)

    def _path(self, name):
        return os.path.join(self.tmp, name)

    @property
    def happened(self):
        """When it first happened (``time.time()``), or None."""
        try:
            with open(self._path('happened')) as f:
                return float(f.read())
        except FileNotFoundError:
            return None

    def release(self):
        open(self._path('released'), 'w').close()

    def hit(self, records):
        try:
            distributed.get_worker()
        except ValueError:           # recording a tape on the client
            return
        if self.action is None or self.records not in (None, records):
            return
        fd = os.open(self._path(f'calls-{self.records}'), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(fd, b'.')           # appends are atomic: a count across the processes
        calls = os.fstat(fd).st_size
        os.close(fd)
        if calls <= self.call:
            return
        try:
            fd = os.open(self._path('happened'), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            os.write(fd, repr(time.time()).encode())
            os.close(fd)
        except FileExistsError:
            if not self.every:
                return
        if self.action == 'exit':
            os._exit(1)
        elif self.action == 'kill':
            for pid in sorted(self.pids, key=lambda p: p == os.getpid()):   # itself last
                os.kill(pid, signal.SIGKILL)
        else:
            deadline = time.monotonic() + 60        # bounded, should the test fail
            while not os.path.exists(self._path('released')) and time.monotonic() < deadline:
                time.sleep(0.01)


def _worker_pids(client):
    return list(client.run(os.getpid).values())


def _run(client, loss, steps, tape=False, scatter=False, raises=None, **kwargs):
    """``td.train``'s losses (or the error it ``raises``), model and state after ``steps``
    Adam steps on 4 shards (in-memory, or futures of ``client.scatter``)."""
    model, (x, y) = _model(), _data()
    sizes = (70, 130, 40, 60)
    if tape:                  # a tape freezes integer labels: one-hot; equal shards
        y, sizes = tr.onehot(y, 3), (75,) * 4
    shards = _split(x, y, sizes)
    if tape:
        kwargs['tape'] = tr.GradientTape(loss, model, *shards[0], wrt=(0,))
    if scatter:
        shards = client.scatter(shards)
    state = tr.setup(tr.Adam(0.05), model)
    train = functools.partial(td.train, client, loss, model, shards, state, steps=steps,
                              reduce='mean', progress=False, **kwargs)
    if raises is None:
        return train(), model, state
    with pytest.raises(raises) as error:
        train()
    return error.value, model, state


def _assert_equal(a, b, rtol=0.0):
    """Equal trees: bitwise (``rtol=0``), or to ``rtol`` where the shards may have been
    summed in another grouping (workers restarted between the two runs)."""
    la, da = tr.tree_util.flatten(a)
    lb, db = tr.tree_util.flatten(b)
    assert da == db
    for u, v in zip(la, lb):
        np.testing.assert_allclose(u, v, rtol=rtol, atol=0)


@bounded(20)
def test_a_worker_killed_during_a_step_changes_nothing(client, tmp_path):
    expected = _run(client, Fault(tmp_path / 'none', None), 3)
    fault = Fault(tmp_path, 'exit', call=5)                 # step 1's second shard
    got = _run(client, fault, 3)
    assert fault.happened
    _assert_equal(got, expected)


@pytest.mark.parametrize('how', ['eager', 'tape'])
@bounded(20)
def test_every_worker_killed_during_a_step_changes_nothing(client, tmp_path, how):
    expected = _run(client, Fault(tmp_path / 'none', None), 3, how == 'tape')
    fault = Fault(tmp_path, 'kill', call=5, pids=_worker_pids(client))
    got = _run(client, fault, 3, how == 'tape')
    assert fault.happened
    _assert_equal(got, expected)     # the tasks holding data ran again on new workers


@bounded(30)
def test_scattered_shards_lost_with_every_worker_are_named(client, tmp_path):
    # every worker killed at the first loss call: the data client.scatter sent is gone
    # (the states after completed steps are checked by the poison-shard and timeout tests)
    fault = Fault(tmp_path, 'kill', call=0, pids=_worker_pids(client))
    error, model, state = _run(client, fault, 3, scatter=True, raises=td.ShardError)
    assert re.match(r'td.train at step 0 \(.*\): the cluster lost the data of shard \d.*: '
                    r'every worker that held it died, and Dask cannot compute data sent by '
                    r'client.scatter again', str(error)), str(error)
    _assert_equal(model, _model())


@bounded(20)
def test_a_shard_that_kills_every_worker_raises_shard_error(client, tmp_path):
    _, model0, state0 = _run(client, Fault(tmp_path / 'none', None), 2)
    fault = Fault(tmp_path, 'exit', call=2, records=60, every=True)    # shard 3, step 2 on
    error, model, state = _run(client, fault, 5, raises=td.ShardError)
    assert isinstance(error.__cause__, OSError)        # the replica's connection, lost
    assert str(error).startswith(
        'td.train at step 2 (counting from 0; the model and optimiser state are those after '
        'the steps before it): '
        'shard 2 or shard 3 (one replica) killed every worker that ran it: 3 died running it, '
        'the last tcp://127.0.0.1:')
    assert "Dask's distributed.scheduler.allowed-failures is 2" in str(error)
    _assert_equal((model, state), (model0, state0))


@bounded(20)
def test_a_loss_that_never_returns_times_out(client, tmp_path):
    _, model0, state0 = _run(client, Fault(tmp_path / 'none', None), 1)
    fault = Fault(tmp_path, 'hang', call=1, records=130)           # shard 1 at step 1
    started = time.monotonic()
    error, model, state = _run(client, fault, 3, timeout=1, raises=td.StepTimeoutError)
    elapsed = time.monotonic() - started
    fault.release()
    assert isinstance(error, TimeoutError)
    assert str(error).startswith(
        'td.train at step 1 (counting from 0; the model and optimiser state are those after '
        'the steps before it): not finished within timeout=1 s; its replicas were released')
    assert 1 <= elapsed < 8
    # to rounding: the two runs may group the shards differently when a worker of an
    # earlier test is still being replaced (one bit apart, once in a full run)
    _assert_equal((model, state), (model0, state0), rtol=1e-14)
    # withgradient's own, and the cluster works again once the loss returned
    expected = td.withgradient(client, Fault(tmp_path / 'none', None), _model(),
                               _split(*_data()))
    fault = Fault(tmp_path / 'again', 'hang', records=130)
    os.mkdir(fault.tmp)
    with pytest.raises(td.StepTimeoutError, match=r'^td.withgradient: not finished within '
                                                  r'timeout=0.5 s'):
        td.withgradient(client, fault, _model(), _split(*_data()), timeout=0.5)
    fault.release()
    got = td.withgradient(client, fault, _model(), _split(*_data()), timeout=10)
    _assert_equal(got, expected)
