"""Module layering: the tree protocol and the calling convention are reached through public
names only, and api and backends do not import each other in a circle."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / 'tracked'
MODULES = ['tree_util.py', 'arguments.py', 'functors.py', 'api.py', 'backends.py', 'custom.py',
           'optimise.py', 'testing.py', 'compiled_tape/trees.py', 'compiled_tape/backend.py',
           'compiled_tape/tapes.py']


def _imports(path):
    """(module, name) for each ``from .module import name`` of a file, relative imports only."""
    tree = ast.parse((ROOT / path).read_text())
    return [(node.module or '', alias.name) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level
            for alias in node.names]


@pytest.mark.parametrize('path', MODULES)
def test_no_underscored_names_from_other_modules(path):
    private = [f'{m}.{n}' for m, n in _imports(path) if n.startswith('_')]
    assert private == []


def test_api_does_not_import_backends():
    assert not [m for m, _ in _imports('api.py') if m == 'backends']
    assert not [m for m, _ in _imports('arguments.py') if m in ('api', 'backends')]
    assert not [m for m, _ in _imports('tree_util.py') if m not in ('values',)]
