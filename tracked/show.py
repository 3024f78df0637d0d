"""Models printed Flux's way: one line per layer with its parameter count, and a total.

``str(model)`` (``print(model)``) of a ``tr.nn`` layer or ``Chain``, and the ``repr`` of
``tr.Duplicated``, are written here, after Flux's ``show`` for ``text/plain``: counts
in Flux's digit grouping (``25_450``), non-trainable arrays (``BatchNorm``'s running
statistics) counted apart, and a total line with the arrays, parameters and bytes of
a model with more than two parameter arrays.  Bytes are those of the arrays' data
(Flux's ``summarysize`` adds the structs).  ``repr`` stays the one-line form.
"""
import numpy as np

from .flat import trainable
from .layers import State
from .nn import FUNCTION_TYPES, Chain, function_name
from .tree_util import flatten

__all__ = ['summary', 'format_bytes']


def format_bytes(n):
    """``format_bytes(n)``: a byte count as Julia's ``Base.format_bytes`` writes it.

    >>> import tracked as tr
    >>> tr.show.format_bytes(101800), tr.show.format_bytes(24)
    ('99.414 KiB', '24 bytes')
    """
    if n < 1024:
        return f'{n} byte{"" if n == 1 else "s"}'
    for unit in ('KiB', 'MiB', 'GiB', 'TiB'):
        n /= 1024
        if n < 1024 or unit == 'TiB':
            return f'{n:.3f} {unit}'


def _counts(tree):
    """(trainable arrays, non-trainable arrays) of a tree, each once."""
    params = flatten(tree, trainable)[0]
    states = flatten(tree, lambda x: isinstance(x, State))[0]
    seen = {id(a) for a in params}
    others = [a for s in states for a in s.arrays() if id(a) not in seen]
    return params, others


def summary(model):
    """``summary(model)``: the text ``print(model)`` shows for a ``tr.nn`` model.

    >>> import tracked as tr
    >>> print(tr.show.summary(tr.Chain(tr.Dense(784, 32, tr.sigmoid), tr.Dense(32, 10),
    ...                                tr.softmax)))
    Chain(
      Dense(784 => 32, sigmoid),            # 25_120 parameters
      Dense(32 => 10),                      # 330 parameters
      softmax,
    )                   # Total: 4 arrays, 25_450 parameters, 198.828 KiB.
    """
    lines: list[str] = []
    _show(model, 0, lines)
    # As in Flux, only a container gets the total line.
    return '\n'.join(lines) + (_total(*_counts(model)) if isinstance(model, Chain) else '')


def _show(x, indent, lines):
    """Append ``x``'s lines at ``indent`` (nested ones end with a comma)."""
    comma = ',' if indent else ''
    if isinstance(x, Chain):
        lines.append(' ' * indent + 'Chain(')
        for layer in x.layers:
            _show(layer, indent + 2, lines)
        lines.append(' ' * indent + ')' + comma)
        return
    text = function_name(x) if isinstance(x, FUNCTION_TYPES) else repr(x)
    line = ' ' * indent + text + comma
    params, others = _counts(x)
    if params or others:
        # Flux's columns: a top-level layer's comment at 20, nested ones at 40.
        line += ' ' * max(2, (20 if indent == 0 else 39) - indent - len(text))
        line += f'# {sum(a.size for a in params):_} parameters'
        if others:
            extra = ' non-trainable' if indent == 0 else ''
            line += f', plus {sum(a.size for a in others):_}{extra}'
    lines.append(line)


def _total(params, others, extra_bytes=0):
    """Flux's total line, for more than two parameter arrays ('' otherwise)."""
    if len(params) <= 2:
        return ''
    n = sum(a.size for a in params)
    nbytes = format_bytes(sum(a.nbytes for a in params + others) + extra_bytes)
    if not others:
        return f'{" " * 18}# Total: {len(params)} arrays, {n:_} parameters, {nbytes}.'
    k = sum(a.size for a in others)
    return (f'{" " * 8}# Total: {len(params)} trainable arrays, {n:_} parameters,\n'
            f'{" " * 10}# plus {len(others)} non-trainable, {k:_} parameters, {nbytes}.')


def show_duplicated(dup):
    """The ``repr`` of ``tr.Duplicated``: the model, the norm of the stored gradient and,
    for more than two arrays, the total (bytes of the model and its gradient)."""
    lines = ['Duplicated(']
    _show(dup.val, 2, lines)
    norm = float(np.sqrt(sum(float(np.vdot(g, g).real) for g in dup.buffers)))
    lines.append(f'  # norm(∇) ≈ {float(f"{norm:.3g}")}')
    params, others = _counts(dup.val)
    return '\n'.join(lines) + '\n)' + _total(params, others,
                                            sum(g.nbytes for g in dup.buffers))

