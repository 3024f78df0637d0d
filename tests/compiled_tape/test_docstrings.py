"""The compiler is written to be read: every class and every function or method of more
than a few lines in tracked/compiled_tape has a docstring saying what it does (an
``__init__`` is described by its class's)."""
import ast
import pathlib

import pytest

import tracked.compiled_tape

PACKAGE = pathlib.Path(tracked.compiled_tape.__file__).parent
MODULES = sorted(PACKAGE.glob('*.py'))
TRIVIAL = 6          # lines, def line included: a function this short may go without


def undocumented(source):
    """Names (with line numbers) of the classes and non-trivial functions without a
    docstring in ``source``."""
    tree = ast.parse(source)
    found = [] if ast.get_docstring(tree) else ['the module']
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            if not ast.get_docstring(node):
                found.append(f'class {node.name} (line {node.lineno})')
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == '__init__':
                    item.documented_by_class = True
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if getattr(node, 'documented_by_class', False) or ast.get_docstring(node):
                continue
            if node.end_lineno - node.lineno + 1 > TRIVIAL:
                found.append(f'{node.name} (line {node.lineno})')
    return found


def test_the_check_finds_what_is_missing():
    src = ('"""m"""\nclass A:\n    def __init__(self):\n' + '        pass\n' * 8
           + 'def f():\n' + '    pass\n' * 8 + 'def g():\n    pass\n')
    assert undocumented(src) == ['class A (line 2)', 'f (line 12)']


@pytest.mark.parametrize('path', MODULES, ids=[p.stem for p in MODULES])
def test_every_class_and_nontrivial_function_has_a_docstring(path):
    assert undocumented(path.read_text()) == []
