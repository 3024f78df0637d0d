"""``python -m tracked``: the demonstration trains, reports, checks, and rejects bad arguments."""
import subprocess
import sys

import pytest

pytest.importorskip('sklearn')

from tracked import __main__ as demo  # noqa: E402


@pytest.mark.parametrize('argv', [['--epochs', '0'], ['--epochs', 'many'], ['--lr', '-1'],
                                  ['--frobnicate'], ['extra'], ['--batch-size', '1.5']])
def test_bad_arguments_get_usage(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        demo.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert 'usage: python -m tracked' in err and 'error:' in err


def test_help(capsys):
    with pytest.raises(SystemExit) as exc:
        demo.main(['--help'])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert '--epochs' in out and 'compiled tape' in out


def test_batch_larger_than_data():
    with pytest.raises(SystemExit, match='batch-size'):
        demo.main(['--batch-size', '100000'])


def test_short_run_learns_and_checks(capsys):
    args = demo.parse_args(['--epochs', '3', '--no-progress'])
    results = demo.run(args)
    out = capsys.readouterr().out
    eager, compiled = results['eager'], results['compiled']
    assert eager['accuracy'] > 0.85
    assert abs(compiled['accuracy'] - eager['accuracy']) < 0.02    # same weights, same batches
    assert compiled['loss'] == pytest.approx(eager['loss'], rel=1e-6)
    assert results['check']['ok'] and results['check']['relative'] < 1e-6
    assert results['check']['compiled_vs_eager'] < 1e-10
    for text in ('eager tape', 'compiled tape', 'test accuracy', 'time per step', 'passed'):
        assert text in out


def test_module_entry_point():
    proc = subprocess.run([sys.executable, '-m', 'tracked', '--epochs', '1', '--eager-only',
                           '--no-progress'], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert 'eager tape' in proc.stdout and 'passed' in proc.stdout
    bad = subprocess.run([sys.executable, '-m', 'tracked', '--nope'], capture_output=True,
                         text=True, timeout=300)
    assert bad.returncode == 2 and 'usage:' in bad.stderr


def test_readme_quick_start_runs(capsys):
    import pathlib
    import re
    readme = (pathlib.Path(__file__).resolve().parent.parent / 'README.md').read_text()
    section = readme.split('## Quick start', 1)[1]
    code = re.search(r'```python\n(.*?)```', section, re.S).group(1)
    assert len([line for line in code.splitlines() if line.strip()]) <= 14
    exec(compile(code, 'README.md quick start', 'exec'), {})
    assert 'accuracy 1.0' in capsys.readouterr().out
