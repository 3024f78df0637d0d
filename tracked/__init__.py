"""tracked: reverse-mode automatic differentiation of NumPy code by operator overloading."""
from importlib import metadata as _metadata

try:
    __version__ = _metadata.version('tracked')
except _metadata.PackageNotFoundError:      # imported from a source tree, not installed
    __version__ = '0+unknown'

from . import box as _box, dispatch as _dispatch, forward as _forward, views as _views
from . import native_ops as _native_ops, tape as _tape
from .box import back
from .boxes import TrackedArray, TrackedReal
from . import rules
from . import api  # noqa: F401
from .api import gradient, withgradient, pullback  # noqa: F401
from .jacobians import (jacobian, withjacobian, hessian, hessian_reverse,  # noqa: F401
                        diaghessian, jvp, hvp)
from . import tree_util  # noqa: F401
from .tree_util import leaf, register_node  # noqa: F401
from .functors import fmap, param, data, grad, zero_grad, istracked  # noqa: F401
from .custom import rule  # noqa: F401
from .ignoring import ignore_derivatives, non_differentiable  # noqa: F401
from .checkpoint import checkpoint  # noqa: F401
from .backends import AutoTracked, AutoFiniteDifferences  # noqa: F401
from .compiled_tape import (GradientTape, JacobianTape, HessianTape, compile,  # noqa: F401
                            TapeGuardError, AutoCompiled)
from .testing import gradcheck, jvpcheck  # noqa: F401
try:            # sparse derivatives need SciPy, an optional extra: without it, stand-ins
    from .sparsity import jacobian_sparsity, hessian_sparsity  # noqa: F401
    from .colorings import coloring, Coloring  # noqa: F401
except ImportError as _e:
    from .extras import needs_extra as _needs_extra
    jacobian_sparsity, hessian_sparsity, coloring, Coloring = (  # type: ignore[assignment, misc]
        _needs_extra(_n, _e) for _n in ('jacobian_sparsity', 'hessian_sparsity', 'coloring',
                                        'Coloring'))
from . import nn  # noqa: F401
from .nn import (Dense, Embedding, Chain, relu, sigmoid, tanh, softmax, logsoftmax,  # noqa: F401
                 logsumexp, mse, crossentropy, logitcrossentropy, onehot)
from .flat import destructure, nparams  # noqa: F401
from .layers import BatchNorm, LayerNorm, Dropout, trainmode, testmode  # noqa: F401
from .duplicated import Duplicated, Const  # noqa: F401
from . import show  # noqa: F401  (print(layer) lists the model Flux's way)
from . import optimise  # noqa: F401
from .optimise import Descent, Momentum, Adam, AdamW, setup, update, train  # noqa: F401

# The core's modules are connected here, by registration (each sits below the ones it
# hands work to): the derivative rules, the box types recording makes, forward mode's
# apply, the view tracking of in-place writes and the printing of models.
rules.install()
_box.register_types(TrackedArray, TrackedReal)
_dispatch.register_forward(_forward.forward_apply)
_dispatch.register_views(_views.note, _views.write)
nn.register_printer(show.summary)             # print(layer) lists the model Flux's way
_tape.on_first_backward.append(_native_ops.start)   # the recording methods in LLVM IR

__all__ = [
    # tracked values (Tracker style)
    'TrackedArray', 'TrackedReal', 'param', 'back', 'data', 'grad', 'zero_grad', 'istracked',
    # gradients (Zygote style) and backends
    'gradient', 'withgradient', 'pullback', 'jacobian', 'withjacobian', 'hessian',
    'hessian_reverse', 'diaghessian', 'jvp', 'hvp',
    # sparse derivatives (SciPy)
    'jacobian_sparsity', 'hessian_sparsity', 'coloring', 'Coloring',
    'AutoTracked', 'AutoCompiled', 'AutoFiniteDifferences',
    # models as trees
    'fmap', 'leaf', 'register_node', 'tree_util',
    # control of differentiation
    'rule', 'ignore_derivatives', 'non_differentiable', 'checkpoint', 'gradcheck', 'jvpcheck',
    # recorded and compiled tapes
    'GradientTape', 'JacobianTape', 'HessianTape', 'compile', 'TapeGuardError',
    # layers, activations, losses (tracked.nn)
    'nn', 'Dense', 'Embedding', 'Chain', 'relu', 'sigmoid', 'tanh', 'softmax', 'logsoftmax',
    'logsumexp', 'mse', 'crossentropy', 'logitcrossentropy', 'onehot',
    # layers with state, flat parameter vectors, gradients stored with the model
    'BatchNorm', 'LayerNorm', 'Dropout', 'trainmode', 'testmode',
    'destructure', 'nparams', 'Duplicated', 'Const',
    # optimisers (tracked.optimise)
    'optimise', 'Descent', 'Momentum', 'Adam', 'AdamW', 'setup', 'update', 'train',
]
