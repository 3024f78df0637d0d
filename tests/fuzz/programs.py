"""Programs as data (frozen dataclasses), rendered as Python source and built by ``exec``.

A ``Program`` is a function ``f(a0, a1, ...)`` over argument trees (``Node``s of
``Leaf``s: float arrays, the same array object in several places, Python floats,
ints, strings) whose body is a sequence of statements, each one block of the fuzzer:
``Code`` (NumPy lines: expressions, branches, loops, in-place writes, custom rules,
``ignore_derivatives``) or ``Call`` (tracked called on an inner ``Function`` and/or
trees: ``gradient``, ``jacobian``, ``hvp``, ``checkpoint``, ``fmap``, ``destructure``,
``Duplicated``...).  Statements read ``Atom``s: variables, leaves of a tree bound to a
name (a parameter, or the tree a statement returned), constants.

Leaves and nodes carry unique labels and are read by label, so a statement never
holds a path: the renderer computes it, and the shrinker can drop a leaf from a
container without rewriting the readers of its neighbours.

``render(program)`` is the source a person can paste (imports, rules, ``f`` and
``args``); ``build(program, tr)`` runs the same source with ``tr`` bound to tracked,
a stand-in for it (``reference.py``), or a proxy.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterator, Union

import numpy as np

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Atom:
    """A value a statement reads: variable ``name``; the leaf labelled ``name`` of the
    tree bound to ``via``; or, with ``name=''``, the constant ``value`` of ``shape``.
    ``plain``: never tracked (a constant, or the result of ``ignore_derivatives``)."""
    name: str
    shape: Shape
    via: str = ''
    integer: bool = False
    value: float = 0.5
    plain: bool = False


@dataclass(frozen=True)
class Leaf:
    """A leaf of a tree.  ``kind``: 'array' (the array ``key``: one key in two places is
    one object in two places), 'number', 'int', 'str', 'none' (``literal``), or 'atom'
    (the value of the Atom ``literal``, in a tree built by the program)."""
    label: str
    kind: str
    key: str = ''
    shape: Shape = ()
    literal: Any = None


@dataclass(frozen=True)
class Node:
    label: str
    kind: str                       # 'tuple', 'list' or 'dict'
    keys: tuple[str, ...]           # a dict's keys ('' for tuple and list items)
    items: tuple[Any, ...]          # Leaf | Node


Tree = Union[Leaf, Node]


@dataclass(frozen=True)
class Ref:
    """The subtree labelled ``label`` of the tree bound to ``via``."""
    label: str
    via: str


TreeArg = Union[Ref, Leaf, Node]


@dataclass(frozen=True)
class Code:
    """Lines of code that assign ``out`` (of ``shape``); ``{out}`` and ``{0}``, ``{1}``...
    (the atoms) in ``lines`` are filled in by the renderer."""
    kind: str
    out: str
    shape: Shape
    lines: tuple[str, ...]
    atoms: tuple[Atom, ...]


@dataclass(frozen=True)
class Call:
    """A call of tracked: ``lines`` with ``{fn}`` (the inner function's name), ``{t0}``...
    (trees; a None tree renders as ``None``), ``{0}``... (atoms) and ``{p0}``... (the path of
    label ``picks[k][1]`` in tree ``picks[k][0]``).  ``shape`` None: ``out`` is a tree
    shaped like ``trees[0]`` (``fmap``, ``destructure``'s rebuild)."""
    kind: str
    out: str
    shape: Shape | None
    lines: tuple[str, ...]
    fn: Function | None
    trees: tuple[Any, ...]          # TreeArg | None
    atoms: tuple[Atom, ...]
    picks: tuple[tuple[int, str], ...] = ()


Stmt = Union[Code, Call]


@dataclass(frozen=True)
class Function:
    """``def name(*params): body; return result`` (``result`` a template over ``atoms``)."""
    name: str
    params: tuple[str, ...]
    body: tuple[Any, ...]           # Stmt
    result: str
    atoms: tuple[Atom, ...]
    shape: Shape


@dataclass(frozen=True)
class Program:
    arrays: tuple[tuple[str, Any], ...]      # (key, values as nested tuples)
    args: tuple[Any, ...]                    # Tree per argument
    main: Function
    seed: int = 0


# --------------------------------------------------------------------------
# Custom rules a program may call (defined before f when it calls them)
# --------------------------------------------------------------------------

RULES = {
    'r_tanh': '''@tr.rule
def r_tanh(x):
    y = np.tanh(x)
    return y, lambda dy: (dy * (1.0 - y * y),)''',
    'r_tanh_jvp': '''@tr.rule(jvp=lambda t, y, x: t[0] * (1.0 - y * y))
def r_tanh_jvp(x):
    y = np.tanh(x)
    return y, lambda dy: (dy * (1.0 - y * y),)''',
    'r_softplus': '''@tr.rule
def r_softplus(x):
    y = np.logaddexp(0.0, x)
    return y, lambda dy: (dy / (1.0 + np.exp(-x)),)''',
    'r_mul': '''@tr.rule
def r_mul(x, y):
    return x * y, lambda dy: (dy * y, dy * x)''',
    'r_mul_jvp': '''@tr.rule(jvp=lambda t, out, x, y: (0.0 if t[0] is None else t[0] * y)
                          + (0.0 if t[1] is None else x * t[1]))
def r_mul_jvp(x, y):
    return x * y, lambda dy: (dy * y, dy * x)''',
    # forwards that cannot run on tracked values: opaque, first order everywhere
    'r_sin_opaque': '''@tr.rule
def r_sin_opaque(x):
    y = np.sin(np.asarray(x, dtype=float))
    return y, lambda dy: (dy * np.cos(x),)''',
    'r_exp_opaque': '''@tr.rule(opaque=True)
def r_exp_opaque(x):
    y = np.exp(0.5 * np.tanh(x))
    return y, lambda dy: (dy * 0.5 * y * (1.0 - np.tanh(x) ** 2),)''',
}
OPAQUE_RULES = ('r_sin_opaque', 'r_exp_opaque')


# --------------------------------------------------------------------------
# Walking programs
# --------------------------------------------------------------------------

def tree_nodes(tree: Tree) -> Iterator[Tree]:
    """``tree`` and everything under it, depth first."""
    yield tree
    if isinstance(tree, Node):
        for item in tree.items:
            yield from tree_nodes(item)


def find(tree: Tree, label: str) -> tuple[Tree, tuple[Any, ...]]:
    """The subtree labelled ``label`` and its path (keys and indices) from ``tree``."""
    if tree.label == label:
        return tree, ()
    if isinstance(tree, Node):
        for i, (key, item) in enumerate(zip(tree.keys, tree.items)):
            try:
                sub, path = find(item, label)
            except KeyError:
                continue
            return sub, ((key if tree.kind == 'dict' else i),) + path
    raise KeyError(label)


def walk(obj: Any) -> Iterator[Any]:
    """Every dataclass instance inside ``obj`` (statements, atoms, trees, functions)."""
    if dataclasses.is_dataclass(obj):
        yield obj
        for field in dataclasses.fields(obj):
            yield from walk(getattr(obj, field.name))
    elif isinstance(obj, tuple):
        for v in obj:
            yield from walk(v)


def transform(obj: Any, fn: Any) -> Any:
    """``obj`` rebuilt bottom-up with ``fn`` applied to every dataclass instance."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {f.name: transform(getattr(obj, f.name), fn) for f in dataclasses.fields(obj)}
        return fn(dataclasses.replace(obj, **changes))
    if isinstance(obj, tuple):
        return tuple(transform(v, fn) for v in obj)
    return obj


def rules_used(program: Program) -> list[str]:
    text = '\n'.join(line for s in walk(program) if isinstance(s, (Code, Call))
                     for line in s.lines)
    return [name for name in RULES if name + '(' in text]


def functions(program: Program) -> list[Function]:
    return [s for s in walk(program) if isinstance(s, Function)]


def statements(program: Program) -> list[Stmt]:
    return [s for s in walk(program) if isinstance(s, (Code, Call))]


# --------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------

def _path(path: tuple[Any, ...]) -> str:
    return ''.join(f'[{k!r}]' for k in path)


class _Renderer:
    def __init__(self, program: Program) -> None:
        self.program = program
        self.bound: dict[str, Tree] = {f'a{i}': t for i, t in enumerate(program.args)}
        counts: dict[str, int] = {}
        for t in program.args:
            for n in tree_nodes(t):
                if isinstance(n, Leaf) and n.kind == 'array':
                    counts[n.key] = counts.get(n.key, 0) + 1
        self.shared = {k for k, c in counts.items() if c > 1}
        self.values = dict(program.arrays)

    def resolve(self, t: Any) -> Tree:
        if isinstance(t, Ref):
            return find(self.bound[t.via], t.label)[0]
        return t

    def atom(self, a: Atom) -> str:
        if not a.name:
            value = int(a.value) if a.integer else a.value
            return repr(value) if a.shape == () else f'np.full({a.shape!r}, {value!r})'
        if a.via:
            return a.via + _path(find(self.bound[a.via], a.name)[1])
        return a.name

    def tree(self, t: Any) -> str:
        if t is None:
            return 'None'
        if isinstance(t, Ref):
            return t.via + _path(find(self.bound[t.via], t.label)[1])
        if isinstance(t, Leaf):
            if t.kind == 'atom':
                return self.atom(t.literal)
            if t.kind == 'array':
                return self.array(t.key)
            return repr(t.literal)
        parts = [self.tree(item) for item in t.items]
        if t.kind == 'dict':
            return '{' + ', '.join(f'{k!r}: {p}' for k, p in zip(t.keys, parts)) + '}'
        if t.kind == 'list':
            return '[' + ', '.join(parts) + ']'
        return '(' + ', '.join(parts) + (',)' if len(parts) == 1 else ')')

    def array(self, key: str) -> str:
        return key if key in self.shared else array_source(self.values[key])

    def function(self, fn: Function, indent: str) -> list[str]:
        lines = [f'{indent}def {fn.name}({", ".join(fn.params)}):']
        for s in fn.body:
            lines += self.statement(s, indent + '    ')
        result = fn.result.format(*[self.atom(a) for a in fn.atoms])
        return lines + [f'{indent}    return {result}']

    def statement(self, s: Stmt, indent: str) -> list[str]:
        atoms = [self.atom(a) for a in s.atoms]
        fields: dict[str, str] = {'out': s.out}
        lines: list[str] = []
        if isinstance(s, Call):
            trees = [None if t is None else self.resolve(t) for t in s.trees]
            if s.fn is not None:
                for p, t in zip(s.fn.params, trees):
                    if t is not None:
                        self.bound[p] = t
                lines += self.function(s.fn, indent)
                fields['fn'] = s.fn.name
            fields.update({f't{i}': self.tree(t) for i, t in enumerate(s.trees)})
            for k, (i, label) in enumerate(s.picks):
                tree = trees[i]
                assert tree is not None
                fields[f'p{k}'] = _path(find(tree, label)[1])
            if s.shape is None:
                assert trees[0] is not None
                self.bound[s.out] = trees[0]
        return lines + [indent + line.format(*atoms, **fields) for line in s.lines]

    def source(self, imports: bool) -> str:
        out = ['import numpy as np', 'import tracked as tr', ''] if imports else []
        for name in rules_used(self.program):
            out += ['', RULES[name], '']
        out += [''] + self.function(self.program.main, '') + ['', '']
        for key in sorted(self.shared):
            out.append(f'{key} = {array_source(self.values[key])}')
        args = ', '.join(self.tree(t) for t in self.program.args)
        out.append(f'args = ({args}{"," if len(self.program.args) == 1 else ""})')
        return '\n'.join(out).strip('\n') + '\n'


def array_source(values: Any) -> str:
    return f'np.array({_nested_list(values)})'


def _nested_list(values: Any) -> str:
    if isinstance(values, tuple):
        return '[' + ', '.join(_nested_list(v) for v in values) + ']'
    return repr(values)


def render(program: Program, imports: bool = True) -> str:
    """The program as Python source: imports, custom rules, ``f`` and ``args``; running
    it and calling ``f(*args)`` is what the fuzzer does."""
    return _Renderer(program).source(imports)


def build(program: Program, tr: Any) -> Any:
    """``f`` of the rendered program, with ``tr`` as the program's ``tr``."""
    namespace: dict[str, Any] = {'np': np, 'tr': tr}
    exec(compile(render(program, imports=False), f'<program {program.seed}>', 'exec'),
         namespace)
    return namespace['f']


def make_args(program: Program) -> tuple[Any, ...]:
    """The program's arguments: new array objects, one per key (shared where the key
    repeats), Python numbers, ints and strings."""
    arrays = {key: np.array(values, dtype=float) for key, values in program.arrays}

    def value(t: Tree) -> Any:
        if isinstance(t, Node):
            vals = [value(item) for item in t.items]
            if t.kind == 'dict':
                return dict(zip(t.keys, vals))
            return list(vals) if t.kind == 'list' else tuple(vals)
        if t.kind == 'array':
            return arrays[t.key]
        return t.literal
    return tuple(value(t) for t in program.args)


# --------------------------------------------------------------------------
# What a program exercises (the CI slice asserts that it covers every feature)
# --------------------------------------------------------------------------

def _reads_outside(fn: Function) -> bool:
    """Whether ``fn`` reads a value it neither receives nor computes (a closure)."""
    own = set(fn.params) | {s.out for s in walk(fn.body) if isinstance(s, (Code, Call))}
    inner = {p for f in walk(fn.body) if isinstance(f, Function) for p in f.params}
    for a in walk(fn):
        if isinstance(a, Atom) and a.name and (a.via or a.name) not in own | inner:
            return True
    return False


def features(program: Program) -> set[str]:
    """The features of tracked and the tree shapes a program combines."""
    out = {f'block: {s.kind}' for s in statements(program)}
    out |= {f'rule: {name}' for name in rules_used(program)}
    keys = [t.key for a in program.args for t in tree_nodes(a)
            if isinstance(t, Leaf) and t.kind == 'array']
    numbers = [t.literal for a in program.args for t in tree_nodes(a)
               if isinstance(t, Leaf) and t.kind == 'number']
    if len(keys) > len(set(keys)):
        out.add('arguments: a tied array')
    per_arg = [{t.key for t in tree_nodes(a) if isinstance(t, Leaf) and t.kind == 'array'}
               for a in program.args]
    if any(per_arg[i] & per_arg[j] for i in range(len(per_arg)) for j in range(i)):
        out.add('arguments: an array tied across arguments')
    if len(numbers) > len(set(numbers)):
        out.add('arguments: a repeated number')
    for a in program.args:
        for t in tree_nodes(a):
            out.add(f'arguments: {t.kind}')
    for s in statements(program):
        if not isinstance(s, Call):
            continue
        for tree in s.trees:
            if isinstance(tree, Node):
                atoms = [i.literal for i in tree.items if isinstance(i, Leaf) and i.kind == 'atom']
                if len(atoms) > len(set(atoms)):
                    out.add('built tree: the same value twice')
                out |= {f'built tree: {i.kind}' for i in tree.items if isinstance(i, Leaf)}
            if tree is None:
                out.add('jvp: a None tangent')
        if s.fn is not None:
            if _reads_outside(s.fn):
                out.add(f'{s.kind}: a closure')
            if any(isinstance(t, Call) and t.fn is not None for t in walk(s.fn.body)):
                out.add('nesting: three levels')
        line = ' '.join(s.lines)
        for mode in ('forward', 'reverse'):
            if f"mode='{mode}'" in line:
                out.add(f'jacobian: {mode} mode')
        if '.val[1]' in line:
            out.add('withgradient: an auxiliary output')
    tree_vars = {s.out: s.kind for s in statements(program) if s.shape is None}
    for a in walk(program):
        if isinstance(a, Atom) and a.via in tree_vars and a.integer:
            out.add(f'{tree_vars[a.via]}: an int leaf read back')
    return out
