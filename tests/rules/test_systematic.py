"""Walk the rule registry: every registered NumPy callable has finite-difference cases.

Each family's test module lists ``CASES``; a rule that is registered without a case
fails here, so a new rule is tested by being registered.
"""
import importlib
import pkgutil

import pytest

import tests.rules as family_tests
from tracked import registry


def _all_cases():
    cases = []
    for mod in pkgutil.iter_modules(family_tests.__path__):
        if mod.name.startswith('test_') and mod.name != 'test_systematic':
            try:
                module = importlib.import_module(f'tests.rules.{mod.name}')
            except pytest.skip.Exception:      # an optional dependency (SciPy) is missing
                continue
            cases += getattr(module, 'CASES', [])
    return cases


ALL_CASES = _all_cases()


def test_every_rule_has_cases():
    covered = {c.covers for c in ALL_CASES}
    missing = [registry._name(f) if callable(f) else repr(f)
               for f in registry.RULES if f not in covered]
    assert not missing, f'rules registered without a finite-difference case: {missing}'


@pytest.mark.parametrize('c', ALL_CASES, ids=[c.id for c in ALL_CASES])
def test_rule_against_finite_differences(c):
    c.check()
