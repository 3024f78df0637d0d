"""No rule reads a tracked value: a pullback that called ``plain``/``data`` (or reached
into ``._value``/``.data``) would freeze the recorded value on a replayed tape and
give the recording's gradient silently (issue found with ``np.sort``, ``np.take``)."""
import ast
import pathlib

import pytest

import tracked.rules

RULES_DIR = pathlib.Path(tracked.rules.__file__).parent
MODULES = sorted(RULES_DIR.glob('*.py'))


def value_reads(source):
    """(line, what) for every call of plain()/data() and read of ._value/.data."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(
                fn, ast.Attribute) else None
            if name in ('plain', 'data'):
                found.append((node.lineno, f'{name}(...)'))
        if isinstance(node, ast.Attribute) and node.attr in ('_value', 'data') and \
                isinstance(node.ctx, ast.Load):
            found.append((node.lineno, f'.{node.attr}'))
        if isinstance(node, ast.ImportFrom) and any(a.name in ('plain', 'data')
                                                    for a in node.names):
            found.append((node.lineno, 'import of plain/data'))
    return found


def test_the_check_finds_value_reads():
    src = 'def vjp(g, ans, x, i):\n    return g * plain(i) + x._value + tr.data(x) + x.data\n'
    assert {w for _, w in value_reads(src)} == {'plain(...)', '._value', 'data(...)', '.data'}
    assert value_reads('def vjp(g, ans, x):\n    return g * np.cos(x)\n') == []


@pytest.mark.parametrize('path', MODULES, ids=[p.stem for p in MODULES])
def test_no_rule_module_reads_a_tracked_value(path):
    assert value_reads(path.read_text()) == []
