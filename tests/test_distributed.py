"""tracked.distributed on a real LocalCluster (2 worker processes, one per module):
gradients equal tr.gradient on the concatenated data, training equals the single-process
run step for step, bad shards are named.  Workers that die: test_distributed_faults."""
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import tracked as tr

distributed = pytest.importorskip('distributed')
da = pytest.importorskip('dask.array')
db = pytest.importorskip('dask.bag')
td = pytest.importorskip('tracked.distributed')

ROOT = pathlib.Path(__file__).resolve().parent.parent
SIZES = (70, 130, 40, 60)                  # unequal shards: 300 records


@pytest.fixture(scope='module')
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=':0')
    client = distributed.Client(cluster)
    # the workers are new processes: they must import this checkout of tracked
    assert set(client.run(_tracked_file).values()) == {tr.__file__}
    yield client
    client.close()
    cluster.close()


def _tracked_file():
    import tracked
    return tracked.__file__


def _model():
    return tr.Chain(tr.Dense(3, 16, tr.tanh, rng=1), tr.Dense(16, 3, rng=2))


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((sum(SIZES), 3))
    y = np.argmax(x @ rng.standard_normal((3, 3)), axis=1)
    return x, y


def _split(x, y, sizes=SIZES):
    cuts = np.cumsum(sizes)[:-1]
    return list(zip(np.split(x, cuts), np.split(y, cuts)))


def mean_loss(m, x, y):
    return tr.logitcrossentropy(m(x), y)


def sum_loss(m, x, y):
    return tr.logitcrossentropy(m(x), y, agg=np.sum)


def _assert_close(a, b, tol=1e-12):
    la, da_ = tr.tree_util.flatten(a)
    lb, db_ = tr.tree_util.flatten(b)
    assert da_ == db_
    for u, v in zip(la, lb):
        np.testing.assert_allclose(u, v, rtol=tol, atol=tol)


# --------------------------------------------------------------------------
# The gradient
# --------------------------------------------------------------------------

@pytest.mark.parametrize('loss, reduce', [(sum_loss, 'sum'), (mean_loss, 'mean')])
def test_gradient_equals_gradient_on_concatenated_data(client, loss, reduce):
    model, (x, y) = _model(), _data()
    val, g = td.withgradient(client, loss, model, _split(x, y), reduce=reduce)
    val0, (g0,) = tr.withgradient(lambda m: loss(m, x, y), model)
    assert abs(val - val0) <= 1e-12 * abs(val0)
    assert type(g) is tr.Chain
    _assert_close(g, g0)


def test_a_large_model_travels_in_a_task_and_many_parts_are_summed_on_workers(client, monkeypatch):
    model, (x, y) = _model(), _data()
    shards = [client.scatter(s) for s in _split(x, y, (15,) * 20)]    # 20 futures: 3 sum tasks
    expected = td.withgradient(client, sum_loss, model, shards)
    monkeypatch.setattr(td.gradients, '_INLINE_BYTES', 0)
    val, g = td.withgradient(client, sum_loss, model, shards)
    assert val == expected.val
    _assert_close(g, expected.grad, 0)
    val0, (g0,) = tr.withgradient(lambda m: sum_loss(m, x, y), model)
    assert abs(val - val0) <= 1e-12 * val0
    _assert_close(g, g0)


def test_shards_as_futures_dask_arrays_and_bags(client):
    model, (x, y) = _model(), _data()
    shards = _split(x, y)
    expected = td.withgradient(client, sum_loss, model, shards)
    forms = [client.scatter(shards),
             [client.scatter(shards[0])] + shards[1:],     # futures and arrays together
             td.place(client, shards),
             (da.from_array(x, chunks=(80, 2)), da.from_array(y, chunks=50)),
             db.from_sequence(shards, npartitions=2)]
    for form in forms:
        val, g = td.withgradient(client, sum_loss, model, form)
        assert abs(val - expected.val) <= 1e-12 * abs(val)
        _assert_close(g, expected.grad)


def test_compiled_tape_and_autocompiled_on_the_workers(client):
    model, (x, y) = _model(), _data()
    y = tr.onehot(y, 3)       # a tape freezes integer labels (nn._targets reads their values)
    shards = _split(x, y, (75,) * 4)
    val0, (g0,) = tr.withgradient(lambda m: mean_loss(m, x, y), model)
    tape = tr.compile(tr.GradientTape(mean_loss, model, *shards[0], wrt=(0,)))
    val, g = td.withgradient(client, mean_loss, model, shards, reduce='mean', tape=tape)
    assert abs(val - val0) <= 1e-12 * val0
    _assert_close(g, g0)
    val, g = td.withgradient(client, mean_loss, model, _split(x, y), reduce='mean',
                             adtype=tr.AutoCompiled())
    assert abs(val - val0) <= 1e-12 * val0
    _assert_close(g, g0)


# --------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------

def _single_process_run(steps):
    model, (x, y) = _model(), _data()
    state = tr.setup(tr.Adam(0.05), model)
    losses = tr.train(mean_loss, model, [(x, y)] * steps, state, progress=False)
    return losses, model


def test_training_equals_the_single_process_run_step_for_step(client):
    losses0, model0 = _single_process_run(6)
    model, (x, y) = _model(), _data()
    state = tr.setup(tr.Adam(0.05), model)
    losses = td.train(client, mean_loss, model, _split(x, y), state, steps=6, reduce='mean',
                      progress=False)
    np.testing.assert_allclose(losses, losses0, rtol=1e-12)
    assert losses[-1] < 0.8 * losses[0]
    _assert_close(model, model0, 1e-10)


def test_local_steps_average_the_replicas_every_k_steps(client):
    # sync_every=3 on 2 replicas (the 4 shards in 2 groups, one per worker thread): each
    # takes 3 Adam steps on its group's mean, then parameters and optimiser state are
    # averaged, weighted by records -- computed here by hand in one process
    model0, (x, y) = _model(), _data()
    groups = [(x[:200], y[:200]), (x[200:], y[200:])]          # shards 0+1, 2+3
    avg, state_avg, losses0 = model0, tr.setup(tr.Adam(0.05), model0), []
    for steps in (3, 3, 1):                                     # 7 steps: 3 + 3 + 1
        runs = []
        for gx, gy in groups:
            m, st = tr.fmap(np.copy, avg), _copy_state(state_avg)
            runs.append((m, st, tr.train(mean_loss, m, [(gx, gy)] * steps, st,
                                         progress=False)))
        w = [200 / 300, 100 / 300]
        avg = tr.fmap(lambda a, b: a * w[0] + b * w[1], runs[0][0], runs[1][0])
        state_avg = runs[0][1]
        for leaf0, leaf1 in zip(_opt_leaves(runs[0][1]), _opt_leaves(runs[1][1])):
            leaf0.state[0] = leaf0.state[0] * w[0] + leaf1.state[0] * w[1]
            leaf0.state[1] = leaf0.state[1] * w[0] + leaf1.state[1] * w[1]
        losses0 += [w[0] * a + w[1] * b for a, b in zip(runs[0][2], runs[1][2])]
    model = _model()
    losses = td.train(client, mean_loss, model, _split(x, y), tr.setup(tr.Adam(0.05), model),
                      steps=7, reduce='mean', progress=False, sync_every=3)
    np.testing.assert_allclose(losses, losses0, rtol=1e-12)
    _assert_close(model, avg, 1e-12)
    assert losses[-1] < 0.8 * losses[0]
    # k=1 is the synchronous training, bit for bit
    m1, m2 = _model(), _model()
    a = td.train(client, mean_loss, m1, _split(x, y), tr.setup(tr.Adam(0.05), m1), steps=3,
                 reduce='mean', progress=False)
    b = td.train(client, mean_loss, m2, _split(x, y), tr.setup(tr.Adam(0.05), m2), steps=3,
                 reduce='mean', progress=False, sync_every=1)
    assert a == b
    _assert_close(m1, m2, 0)
    with pytest.raises(ValueError, match=r'sync_every must be a whole number of steps >= 1, '
                                         r'got 0'):
        td.train(client, mean_loss, m1, _split(x, y), tr.setup(tr.Adam(0.05), m1),
                 sync_every=0, progress=False)


def _copy_state(state):
    import copy
    return copy.deepcopy(state)


def _opt_leaves(state):
    is_leaf = lambda v: isinstance(v, tr.optimise.OptLeaf)      # noqa: E731
    return [leaf for leaf in tr.tree_util.leaves(state, is_leaf) if is_leaf(leaf)]


class WorkerDescent(tr.Descent):
    """Plain descent on the client; on a worker, a step one part in 1e12 longer: the
    replicas drift from the client's copy, as on a worker whose arithmetic differs."""

    def apply(self, state, x, g):
        try:
            distributed.get_worker()
        except ValueError:
            return self.lr * g
        return self.lr * (1 + 1e-12) * g


def test_replicas_that_differ_from_the_client_are_caught(client):
    model, (x, y) = _model(), _data()
    with pytest.raises(td.DivergedError, match=r'^td.train at step 9: the replicas of groups '
                                               r'\[0, 1\] hold parameters or optimiser state '
                                               r'that differ from the client\'s copy'):
        td.train(client, mean_loss, model, _split(x, y), tr.setup(WorkerDescent(0.1), model),
                 steps=12, reduce='mean', progress=False)


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------

def test_a_shard_with_the_wrong_shape_is_named(client):
    model, (x, y) = _model(), _data()
    shards = _split(x, y)
    bad = list(shards)
    bad[2] = (np.hstack([shards[2][0], shards[2][0][:, :1]]), shards[2][1])   # 4 features
    with pytest.raises(td.ShardError, match=r'shard 2: ValueError: Dense\(3 => 16\) expects '
                                            r'input of shape \(\.\.\., 3\), got \(40, 4\)'):
        td.withgradient(client, sum_loss, model, bad)
    # a shape the loss broadcasts without complaint: caught by comparing the shards
    bad[2] = (shards[2][0], shards[2][1][:, None])
    with pytest.raises(ValueError, match=r'the shards do not match: shard 2 has argument 1 of '
                                         r'shape \(n, 1\) and dtype int64, where the others '
                                         r'have shape \(n,\) and dtype int64'):
        td.withgradient(client, lambda m, x, y: np.sum(m(x)[:, 0] - y), model, bad)


def test_bad_arguments(client):
    model, (x, y) = _model(), _data()
    with pytest.raises(ValueError, match="reduce must be 'sum' or 'mean'"):
        td.withgradient(client, sum_loss, model, _split(x, y), reduce='max')
    with pytest.raises(TypeError, match='shards must be a sequence'):
        td.withgradient(client, sum_loss, model, x)
    with pytest.raises(td.ShardError, match=r"shard 0: ValueError: reduce='mean' .*scalar"):
        td.withgradient(client, lambda m, s: m * s, 1.0, [(2.0,)], reduce='mean')
    tracked_model = tr.fmap(tr.param, model)         # said before Dask's serialisation error
    with pytest.raises(TypeError, match=r'td.withgradient: the model holds tracked values .*'
                                        r'tr.data\(model\)'):
        td.withgradient(client, sum_loss, tracked_model, _split(x, y))
    with pytest.raises(TypeError, match='td.train: the model holds tracked values'):
        td.train(client, sum_loss, tracked_model, _split(x, y),
                 tr.setup(tr.Descent(0.1), tracked_model), progress=False)


def test_doctests():
    import doctest
    for module in (td.shards, td.gradients, td.training):
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_without_dask_the_error_names_the_extra():
    code = ('import sys\n'
            'sys.modules["distributed"] = None\n'
            'try:\n'
            '    import tracked.distributed\n'
            'except ImportError as e:\n'
            '    print(e)\n')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), check=True).stdout
    assert "pip install -e '.[distributed]'" in out


# --------------------------------------------------------------------------
# Every Dask example of the README and the docs, run as a user runs a script
# --------------------------------------------------------------------------

def _dask_examples():
    pages = [ROOT / 'README.md'] + sorted((ROOT / 'docs').rglob('*.md'))
    return [(f'{page.relative_to(ROOT)} example {i + 1}', block) for page in pages
            for i, block in enumerate(re.findall(r'```python\n(.*?)```', page.read_text(), re.S))
            if 'Client(' in block]


def test_the_dask_examples_are_found():
    names = [name for name, _ in _dask_examples()]
    assert names[0].startswith('README.md') and any('guide/distributed.md' in n for n in names)


@pytest.mark.parametrize('name, code', _dask_examples(),
                         ids=[name for name, _ in _dask_examples()])
def test_dask_example_runs_as_a_script(name, code, tmp_path):
    # python example.py: Dask's worker processes import the script again, which must
    # not start a cluster of its own (0.2.0's README example failed so: "Nanny failed
    # to start")
    script = tmp_path / 'example.py'
    script.write_text(code)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         cwd=tmp_path, timeout=240,
                         env=dict(os.environ, PYTHONPATH=str(ROOT), TQDM_DISABLE='1'))
    assert run.returncode == 0, f'{name}:\n{run.stderr[-3000:]}'
    accuracy = float(run.stdout.split('accuracy')[-1])
    assert accuracy == 0.996 if name.startswith('README') else accuracy > 0.95
