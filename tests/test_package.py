"""The package's metadata: __version__ from the installed distribution, __all__ complete."""
import ast
import pathlib
import types
from importlib import metadata

import tracked as tr

# Submodules that are part of the public API; any other submodule attribute (tracked
# imports some for its own use, and importing tracked.coverage or tracked.scipy adds one)
# is not.
PUBLIC_MODULES = {'nn', 'optimise', 'tree_util'}


def test_version_is_the_installed_distributions():
    assert tr.__version__ == metadata.version('tracked')


def test_all_lists_every_public_name_and_nothing_else():
    names = {n for n, v in vars(tr).items() if not n.startswith('_')
             and not (isinstance(v, types.ModuleType) and n not in PUBLIC_MODULES)}
    assert sorted(tr.__all__) == sorted(names)
    assert len(tr.__all__) == len(set(tr.__all__))


def test_star_import_gives_the_api():
    namespace = {}
    exec('from tracked import *', namespace)
    assert {'gradient', 'param', 'GradientTape', 'nn', 'Adam'} <= set(namespace)


def _underscored_imports(path):
    """``module._name`` reads and ``from module import _name`` of tracked's own modules."""
    tree = ast.parse(path.read_text())
    found, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or '').startswith(
                'tracked')):
            for alias in node.names:
                if alias.name.startswith('_') and not alias.name.startswith('__'):
                    found.append(f'{path}:{node.lineno} imports {alias.name}')
                modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            modules.update((a.asname or a.name).split('.')[0] for a in node.names
                           if a.name.startswith('tracked'))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in modules and node.attr.startswith('_')
                and not node.attr.startswith('__')):
            found.append(f'{path}:{node.lineno} reads {node.value.id}.{node.attr}')
    return found


def test_no_module_uses_another_modules_underscored_names():
    package = pathlib.Path(tr.__file__).parent
    found = [f for path in sorted(package.rglob('*.py')) for f in _underscored_imports(path)]
    assert found == []
