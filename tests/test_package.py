"""The package's metadata: __version__ from the installed distribution, __all__ complete."""
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
