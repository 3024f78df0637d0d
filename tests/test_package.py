"""The package's metadata: __version__ from the installed distribution, __all__ complete."""
import types
from importlib import metadata

import tracked as tr

# Submodules that tracked imports for its own use; they are not part of the public API.
INTERNAL_MODULES = {'api', 'arguments', 'backends', 'compiled_tape', 'custom', 'forward',
                    'functors', 'jacobians', 'registry', 'rules', 'tape', 'testing', 'values'}


def test_version_is_the_installed_distributions():
    assert tr.__version__ == metadata.version('tracked')


def test_all_lists_every_public_name_and_nothing_else():
    names = {n for n, v in vars(tr).items() if not n.startswith('_')
             and not (isinstance(v, types.ModuleType) and n in INTERNAL_MODULES)}
    assert sorted(tr.__all__) == sorted(names)
    assert len(tr.__all__) == len(set(tr.__all__))


def test_star_import_gives_the_api():
    namespace = {}
    exec('from tracked import *', namespace)
    assert {'gradient', 'param', 'GradientTape', 'nn', 'Adam'} <= set(namespace)
