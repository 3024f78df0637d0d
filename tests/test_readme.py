"""Every Python example in README.md runs as a new user would paste it."""
import pathlib
import re

import pytest

README = (pathlib.Path(__file__).resolve().parent.parent / 'README.md').read_text()
# the Dask example runs, with its result checked, in tests/test_distributed.py
BLOCKS = [b for b in re.findall(r'```python\n(.*?)```', README, re.S)
          if 'tracked.distributed' not in b]


def test_readme_has_examples():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize('i', range(len(BLOCKS)))
def test_readme_example_runs(i, capsys):
    if 'scipy' in BLOCKS[i]:
        pytest.importorskip('scipy')         # the scipy extra (absent in the floors' run)
    exec(compile(BLOCKS[i], f'README.md example {i + 1}', 'exec'), {})
    out = capsys.readouterr().out
    if 'TapeGuardError' in BLOCKS[i]:
        assert 'recorded True, now False' in out
        tail = out.split('re-record automatically.')[-1]
        assert tail.count('(np.float64(1.0),)') == 2   # retrace and AutoCompiled: d relu = 1
