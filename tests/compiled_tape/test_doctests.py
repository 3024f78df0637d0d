"""The doctests of every module of tracked/compiled_tape, so that the docstrings stay true."""
import doctest
import importlib
import pkgutil

import pytest

import tracked.compiled_tape as package

MODULES = sorted(m.name for m in pkgutil.iter_modules(package.__path__))
WITH_EXAMPLES = {'buffers', 'codegen', 'fusion', 'tapes'}


@pytest.mark.parametrize('name', MODULES)
def test_doctests(name):
    module = importlib.import_module(f'{package.__name__}.{name}')
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    assert result.attempted > 0 or name not in WITH_EXAMPLES
