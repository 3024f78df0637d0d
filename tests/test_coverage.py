"""Every public NumPy function is accounted for, and the coverage page says so."""
import os

import numpy as np
import pytest

import tracked as tr
from tracked import coverage, registry

# Functions expected to be covered by work not merged yet (none now): a name here is
# allowed to have no status.
EXPECTED_LATER = set()


def _all_rows():
    return [r for prefix, mod in coverage.MODULES for r in coverage.rows(prefix, mod)]


def test_every_public_numpy_function_is_accounted_for():
    # Fails when NumPy gains a public function that is neither a rule, non-differentiable,
    # unsupported on purpose, nor undispatched: classify it in tracked/rules.
    missing = sorted(q for q, st, _, _ in _all_rows()
                     if st == 'no rule yet' and q not in EXPECTED_LATER)
    assert not missing, f'NumPy functions with no status: {missing}'


def test_expected_later_names_are_still_missing_and_real():
    statuses = {q: st for q, st, _, _ in _all_rows()}
    assert EXPECTED_LATER <= set(statuses), 'EXPECTED_LATER names a function NumPy lacks'


def test_the_page_is_up_to_date():
    page = coverage.PAGE.read_text()
    if f'(NumPy {coverage.numpy_version()})' not in page:
        # the dependency floors' CI run: other NumPy versions have other namespaces
        pytest.skip('docs/coverage.md is generated with another NumPy version')
    assert coverage.PAGE.read_text() == coverage.render(), \
        'docs/coverage.md is stale: run python -m tracked.coverage --write'


def test_counts_name_every_module():
    c = coverage.counts()
    assert set(c) == {'np', 'np.linalg', 'np.fft'}
    assert c['np']['rule'] >= 220 and c['np'].get('no rule yet', 0) == 0


def test_undispatched_functions_are_not_dispatched():
    for f in registry.UNDISPATCHED:
        assert not isinstance(f, np.ufunc) and type(f).__name__ != '_ArrayFunctionDispatcher', f


def test_one_status_each():
    tables = (registry.RULES, registry.NONDIFF, registry.UNSUPPORTED, registry.UNDISPATCHED)
    for prefix, mod in coverage.MODULES:
        for name, f in coverage.public_functions(mod).items():
            assert sum(f in t for t in tables) <= 1, f'{prefix}.{name} has two statuses'


@pytest.mark.parametrize('call', [lambda x: np.save(os.devnull, x),
                                  lambda x: np.savetxt(os.devnull, x)])
def test_unsupported_raise_the_no_rule_error_with_the_reason(call):
    with pytest.raises(TypeError,
                       match=r'no derivative rule for np.(save|savetxt) \(writes'):
        call(tr.param(np.array([1.0, 2.0, 3.0])))


def test_new_nondifferentiable_functions_give_plain_results():
    x = tr.param(np.array([3.0, 1.0, 3.0, np.nan]))
    u = np.unique(x)
    assert type(u) is np.ndarray and u.shape == (3,)
    assert np.nanargmax(x) == 0 and type(np.isin(x, [1.0])) is np.ndarray
    assert np.digitize(x[:3], [2.0]).tolist() == [1, 0, 1]
