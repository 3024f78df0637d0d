"""Random programs from a seed (``generate(seed)``): valid by construction.

Every statement is typed by the shapes of what it reads, so a program never fails in
NumPy for a reason of its own: the fuzzer does not run a program to decide whether to
keep it, and an exception from tracked is always a finding.  The blocks (``MAKERS``)
are weighted so that a program of a few statements usually combines several of
tracked's features; which ones may appear depends on the nesting depth (an inner
function of an inner function computes no Hessian: the reference implementation
differentiates by finite differences, whose cost multiplies with depth).

Smoothness: the operations are smooth except for branches, ``np.where``,
``np.max``, ``np.maximum`` and ``while`` conditions.  A sample point sits on a
boundary more often than chance would say: values have two decimals (0.0 and -0.0
among them, and equal entries), a repeated number and a constant array's entries are
equal by design, and a value can meet the same value closed over.  The reference and
the oracle detect such a point (one-sided differences) and the check is not judged
there; the campaign counts these programs (3-4% of them, mostly for the value check).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable

from .programs import (Atom, Call, Code, Function, Leaf, Node, Program, Ref, Tree, find,
                       tree_nodes)

ARRAY_SHAPES = [(2,), (3,), (2, 3)]
SHAPES = [(), (2,), (3,), (2, 3)]

UNARY = ['np.sin({0})', 'np.cos({0})', 'np.tanh({0})', 'np.exp(np.tanh({0}))', '{0} * {0}',
         'np.log(1.0 + {0} * {0})', 'np.arctan({0})', '-{0}', 'np.sqrt(1.0 + {0} * {0})']
BINARY = ['{0} + {1}', '{0} * {1}', '{0} - {1}', '{0} / (1.0 + {1} * {1})',
          'np.maximum({0}, {1})', 'np.where({0} > {1}, {0}, 0.5 * {1})',
          'np.arctan2({0}, 2.0 + np.cos({1}))', 'np.tanh({0}) * np.exp(np.sin({1}))']
REDUCE = ['np.sum({0})', 'np.mean({0})', 'np.sum({0} * {0})', 'np.prod(np.cos({0}))',
          'np.max({0})', 'np.linalg.norm({0})']


@dataclass
class Scope:
    """What a function's statements may read: its own atoms and trees (parameters and
    results so far) and, through ``closure``, those of the enclosing function."""
    atoms: list[Atom]
    trees: list[Ref]
    depth: int
    closure: Scope | None = None
    frozen: list[Atom] = field(default_factory=list)    # the enclosing atoms visible here


def is_float(a: Atom) -> bool:
    return not a.integer


class Generator:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.counts: dict[str, int] = {}
        self.arrays: dict[str, Any] = {}
        self.numbers: list[float] = []
        self.bound: dict[str, Tree] = {}

    def name(self, prefix: str) -> str:
        k = self.counts.get(prefix, 0)
        self.counts[prefix] = k + 1
        return f'{prefix}{k}'

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    # ---------------------------------------------------------------- arguments

    def value(self) -> float:
        return round(self.rng.uniform(-1.5, 1.5), 2)

    def array_leaf(self) -> Leaf:
        if self.arrays and self.chance(0.35):
            key = self.rng.choice(sorted(self.arrays))          # the same array again: a tie
        else:
            key = self.name('w')
            shape = self.rng.choice(ARRAY_SHAPES)
            self.arrays[key] = self.nested(shape)
        return Leaf(self.name('L'), 'array', key=key, shape=self.shape_of(key))

    def shape_of(self, key: str) -> tuple[int, ...]:
        v = self.arrays[key]
        return (len(v), len(v[0])) if isinstance(v[0], tuple) else (len(v),)

    def nested(self, shape: tuple[int, ...]) -> Any:
        if len(shape) == 1:
            return tuple(self.value() for _ in range(shape[0]))
        return tuple(self.nested(shape[1:]) for _ in range(shape[0]))

    def number_leaf(self) -> Leaf:
        if self.numbers and self.chance(0.4):
            v = self.rng.choice(self.numbers)                     # a repeated number: no tie
        else:
            v = self.value()
            self.numbers.append(v)
        return Leaf(self.name('L'), 'number', literal=v)

    def leaf(self) -> Leaf:
        r = self.rng.random()
        if r < 0.45:
            return self.array_leaf()
        if r < 0.75:
            return self.number_leaf()
        if r < 0.9:
            return Leaf(self.name('L'), 'int', literal=self.rng.randint(1, 3))
        return Leaf(self.name('L'), 'str', literal=self.rng.choice(['tanh', 'x']))

    def tree(self, depth: int) -> Tree:
        if depth >= 2 or self.chance(0.45 if depth else 0.55):
            return self.leaf() if depth else self.rng.choice(
                [self.array_leaf, self.array_leaf, self.number_leaf])()
        kind = self.rng.choice(['tuple', 'list', 'dict'])
        n = self.rng.randint(1, 4)
        keys = tuple(self.rng.sample('abcdefgh', n)) if kind == 'dict' else ('',) * n
        return Node(self.name('L'), kind, keys, tuple(self.tree(depth + 1) for _ in range(n)))

    # ---------------------------------------------------------------- scopes

    def leaf_atoms(self, tree: Tree, via: str) -> list[Atom]:
        out = []
        for t in tree_nodes(tree):
            if not isinstance(t, Leaf) or t.kind in ('str', 'none'):
                continue
            if t.kind == 'atom':
                a = t.literal
                out.append(Atom(t.label, a.shape, via=via, integer=a.integer, plain=a.plain))
            else:
                out.append(Atom(t.label, t.shape, via=via, integer=t.kind == 'int'))
        return out

    def bind(self, scope: Scope, name: str, tree: Tree) -> None:
        self.bound[name] = tree
        scope.atoms += self.leaf_atoms(tree, name)
        scope.trees += [Ref(t.label, name) for t in tree_nodes(tree) if isinstance(t, Node)]

    def pick(self, scope: Scope, ok: Callable[[Atom], bool] = is_float,
             closure: bool = True) -> Atom | None:
        own = [a for a in scope.atoms if ok(a)]
        outer = [a for a in scope.frozen if ok(a)] if closure else []
        if outer and (not own or self.chance(0.25)):
            return self.rng.choice(outer)
        if not own:
            return None
        back = min(int(self.rng.expovariate(0.6)), len(own) - 1)       # recent values first
        return own[-1 - back]

    def resolve(self, t: Any) -> Tree:
        return find(self.bound[t.via], t.label)[0] if isinstance(t, Ref) else t

    # ---------------------------------------------------------------- programs

    def program(self) -> Program:
        args = [self.tree(0) for _ in range(self.rng.choice([1, 2, 2, 3]))]
        if not any(isinstance(t, Leaf) and t.kind in ('array', 'number')
                   for a in args for t in tree_nodes(a)):
            args.append(self.array_leaf())
        scope = Scope([], [], 0)
        params = tuple(f'a{i}' for i in range(len(args)))
        for p, t in zip(params, args):
            self.bind(scope, p, t)
        body = self.body(scope, self.rng.randint(3, 8))
        main = self.result(Function('f', params, tuple(body), '', (), ()), scope, None)
        return Program(tuple(sorted(self.arrays.items())), tuple(args), main, self.seed)

    def body(self, scope: Scope, n: int) -> list[Any]:
        out: list[Any] = []
        makers = [(m, w) for m, w, depth in MAKERS if scope.depth <= depth]
        for _ in range(n):
            for _attempt in range(5):
                maker = self.rng.choices([m for m, _ in makers], [w for _, w in makers])[0]
                stmt = maker(self, scope)
                if stmt is not None:
                    break
            else:
                continue
            out.append(stmt)
            if stmt.shape is None:
                self.bind(scope, stmt.out, self.resolve(stmt.trees[0]))
            else:
                plain = stmt.kind == 'ignore'
                scope.atoms.append(Atom(stmt.out, stmt.shape, plain=plain))
        return out

    def result(self, fn: Function, scope: Scope, depends: Atom | None,
               array: bool = False, aux: bool = False) -> Function:
        """``fn`` with its return value: the last value computed (or read), plus a
        term in ``depends`` so that the derivative taken there is never None."""
        values = [a for a in scope.atoms if is_float(a)]
        variables = [a for a in values if not a.via] or values
        last = variables[-1]
        if array:
            result, atoms = '{0}', [last]
            if depends is not None:
                result += ' + 0.1 * np.sin(np.sum({1}))'
                atoms.append(depends)
            return Function(fn.name, fn.params, fn.body, result, tuple(atoms), last.shape)
        terms = ['np.sum({0})']
        atoms = [last]
        for other in self.rng.sample(variables[:-1], min(len(variables) - 1,
                                                         self.rng.randint(0, 2))):
            terms.append(self.rng.choice(['0.5 * np.sum(np.tanh({%d}))', 'np.sum(np.sin({%d}))'])
                         % len(atoms))
            atoms.append(other)
        if depends is not None:
            terms.append('0.1 * np.sum(np.sin({%d}))' % len(atoms))
            atoms.append(depends)
        result = ' + '.join(terms)
        if aux:
            result = f'({result}, np.cos({{0}}))'
        return Function(fn.name, fn.params, fn.body, result, tuple(atoms), ())

    def function(self, scope: Scope, trees: list[Any], depends: tuple[int, str] | None,
                 array: bool = False, closure: bool = True, aux: bool = False) -> Function:
        """An inner function whose parameters are bound to ``trees``; it closes over
        ``scope``'s values when ``closure``."""
        name = self.name('g')
        params = tuple(f'p{name[1:]}_{i}' for i in range(len(trees)))
        inner = Scope([], [], scope.depth + 1,
                      frozen=(scope.atoms + scope.frozen) if closure else [])
        for p, t in zip(params, trees):
            self.bind(inner, p, self.resolve(t))
        body = self.body(inner, self.rng.randint(1, 3))
        dep = None
        if depends is not None:
            i, label = depends
            dep = next(a for a in self.leaf_atoms(self.resolve(trees[i]), params[i])
                       if a.name == label)
        return self.result(Function(name, params, tuple(body), '', (), ()), inner, dep,
                           array=array, aux=aux)

    # ---------------------------------------------------------------- trees for calls

    def call_tree(self, scope: Scope, ints: bool = True) -> Any:
        """A tree to pass to tracked: one the function holds, a value, or a new
        container (the same value twice, repeated numbers, ints, a string)."""
        r = self.rng.random()
        refs = [t for t in scope.trees if self.float_leaves(self.resolve(t))]
        if refs and r < 0.35:
            return self.rng.choice(refs)
        if r < 0.55:
            a = self.pick(scope)
            if a is not None:
                return Leaf(self.name('L'), 'atom', shape=a.shape, literal=a)
        kind = self.rng.choice(['tuple', 'list', 'dict'])
        items: list[Leaf] = []
        for _ in range(self.rng.randint(2, 3)):
            r = self.rng.random()
            if items and r < 0.25 and items[-1].kind == 'atom':
                a = items[-1].literal                                # the same value again
            elif r < 0.75 or not ints:
                a = self.pick(scope)
            else:
                a = None
            if a is not None:
                items.append(Leaf(self.name('L'), 'atom', shape=a.shape, literal=a))
            elif self.chance(0.5):
                v = self.rng.choice(self.numbers) if self.numbers and self.chance(0.5) \
                    else self.value()
                items.append(Leaf(self.name('L'), 'number', literal=v))
            else:
                kind_ = self.rng.choice(['int', 'str'])
                lit = self.rng.randint(1, 3) if kind_ == 'int' else 'tanh'
                items.append(Leaf(self.name('L'), kind_, literal=lit))
        if not any(self.float_leaves(t) for t in items):
            a = self.pick(scope)
            if a is None:
                return None
            items.append(Leaf(self.name('L'), 'atom', shape=a.shape, literal=a))
        keys = tuple(self.rng.sample('xyzuvw', len(items))) if kind == 'dict' \
            else ('',) * len(items)
        return Node(self.name('L'), kind, keys, tuple(items))

    def float_leaves(self, tree: Tree, arrays_only: bool = False) -> list[Leaf]:
        out = []
        for t in tree_nodes(tree):
            if not isinstance(t, Leaf):
                continue
            if t.kind == 'array' or (t.kind == 'number' and not arrays_only):
                out.append(t)
            elif t.kind == 'atom' and not t.literal.integer and (
                    not arrays_only or t.literal.shape != ()):
                out.append(t)
        return out

    def pick_leaf(self, tree: Any, arrays_only: bool = False) -> Leaf:
        return self.rng.choice(self.float_leaves(self.resolve(tree), arrays_only))

    def identity(self, leaf: Leaf) -> str:
        """Which array object ``leaf`` holds ('' for a number, int or string): the same
        identity in two places is a tie."""
        if leaf.kind == 'array':
            return leaf.key
        if leaf.kind != 'atom' or not leaf.literal.shape:
            return ''
        a = leaf.literal
        if not a.via:
            return a.name
        leaf_read = find(self.bound[a.via], a.name)[0]
        return self.identity(leaf_read) if isinstance(leaf_read, Leaf) else ''


    def ties(self, tree: Any) -> set[str]:
        return {self.identity(t) for t in tree_nodes(self.resolve(tree))
                if isinstance(t, Leaf)} - {''}

    def tangent(self, scope: Scope, tree: Tree) -> Tree:
        """A tangent tree mirroring ``tree``: a value of the same shape at each float leaf
        (one value for a tied array), 0.0 at ints, None at strings."""
        same: dict[str, Atom] = {}

        def mirror(t: Tree) -> Tree:
            if isinstance(t, Node):
                return Node(self.name('L'), t.kind, t.keys, tuple(mirror(i) for i in t.items))
            if t.kind == 'int' or (t.kind == 'atom' and t.literal.integer):
                # an int is a differentiated leaf (API.md §2): its tangent is a number
                return Leaf(self.name('L'), 'number', literal=0.0)
            if t not in self.float_leaves(t):
                return Leaf(self.name('L'), 'none', literal=None)
            tie = self.identity(t)
            if tie and tie in same:
                a = same[tie]
            else:
                shape = t.literal.shape if t.kind == 'atom' else t.shape
                a = self.pick(scope, lambda x: is_float(x) and x.shape == shape) or \
                    Atom('', shape, value=round(self.rng.uniform(-1, 1), 2))
                if tie:
                    same[tie] = a
            return Leaf(self.name('L'), 'atom', shape=a.shape, literal=a)
        return mirror(tree)


# ---------------------------------------------------------------- blocks

def numpy_expression(g: Generator, s: Scope) -> Code | None:
    a = g.pick(s)
    if a is None:
        return None
    r = g.rng.random()
    if r < 0.35:
        return Code('numpy', g.name('v'), a.shape, ('{out} = ' + g.rng.choice(UNARY),), (a,))
    if r < 0.7:
        n = g.pick(s, lambda x: x.integer) if g.chance(0.3) else None
        if n is not None:                           # an integer argument used as a number
            return Code('numpy', g.name('v'), a.shape, ('{out} = {0} * {1}',), (a, n))
        b = g.pick(s, lambda x: is_float(x) and x.shape in (a.shape, ()))
        if b is None:
            return None
        return Code('numpy', g.name('v'), a.shape, ('{out} = ' + g.rng.choice(BINARY),), (a, b))
    if r < 0.85 and a.shape:
        if len(a.shape) == 2 and g.chance(0.5):
            t, shape = g.rng.choice([('np.sum({0}, axis=0)', (3,)), ('np.mean({0}, axis=1)', (2,))])
            return Code('numpy', g.name('v'), shape, ('{out} = ' + t,), (a,))
        return Code('numpy', g.name('v'), (), ('{out} = ' + g.rng.choice(REDUCE),), (a,))
    return indexing(g, s, a) or linalg(g, s)


def indexing(g: Generator, s: Scope, a: Atom) -> Code | None:
    if not a.shape:
        return None
    i = g.pick(s, lambda x: x.integer)
    if len(a.shape) == 1:
        n = a.shape[0]
        options = [('{0}[0]', ()), ('{0}[-1]', ()), ('{0}[::-1]', a.shape),
                   ('{0}[[0, 0, 1]]', (3,))] + ([('{0}[1:]', (n - 1,))] if n == 3 else [])
        if i is not None:
            options.append(('{0}[{1} %% %d]' % n, ()))
    else:
        options = [('{0}[0]', (3,)), ('{0}[:, 1]', (2,)), ('{0}[1, 2]', ()),
                   ('{0}.T[0]', (2,)), ('{0}.reshape(3, 2)[1]', (2,))]
        if i is not None:
            options.append(('{0}.ravel()[{1} % 6]', ()))
    template, shape = g.rng.choice(options)
    atoms = (a, i) if i is not None and '{1}' in template else (a,)
    return Code('index', g.name('v'), shape, ('{out} = ' + template,), atoms)


def linalg(g: Generator, s: Scope) -> Code | None:
    a = g.pick(s, lambda x: is_float(x) and x.shape != ())
    if a is None:
        return None
    if a.shape == (2, 3):
        b = g.pick(s, lambda x: is_float(x) and x.shape == (3,))
        if b is not None:
            return Code('linalg', g.name('v'), (2,), ('{out} = {0} @ {1}',), (a, b))
        return Code('linalg', g.name('v'), (), ('{out} = np.trace({0} @ {0}.T)',), (a,))
    b = g.pick(s, lambda x: is_float(x) and x.shape != ())
    if b is None:
        return None
    if a.shape == b.shape:
        return Code('linalg', g.name('v'), (), ('{out} = np.dot({0}, {1})',), (a, b))
    if a.shape == (2,) and b.shape == (2, 3):
        return Code('linalg', g.name('v'), (3,), ('{out} = {0} @ {1}',), (a, b))
    if a.shape == (2,) and b.shape == (3,):
        return Code('linalg', g.name('v'), (2, 3), ('{out} = np.outer({0}, {1})',), (a, b))
    return None


def control(g: Generator, s: Scope) -> Code | None:
    a = g.pick(s)
    c = g.pick(s)
    if a is None or c is None:
        return None
    b = g.pick(s, lambda x: is_float(x) and x.shape in (a.shape, ())) or a
    r = g.rng.random()
    u1, u2 = (t.replace('{0}', '{1}') for t in g.rng.sample(UNARY, 2))
    lines: tuple[str, ...]
    if r < 0.4:
        lines = ('if np.sum({0}) > 0.0:', '    {out} = ' + u1, 'else:', '    {out} = ' + u2)
        return Code('branch', g.name('v'), a.shape, lines, (c, a))
    n = g.pick(s, lambda x: x.integer)
    if r < 0.75:
        count = '{2} % 3 + 1' if n is not None and g.chance(0.6) else '2'
        lines = ('{out} = {0} * 1.0', 'for _ in range(%s):' % count,
                 '    {out} = np.sin({out}) * 0.8 + 0.3 * {1}')
        atoms = (a, b, n) if n is not None and '{2}' in count else (a, b)
        return Code('loop', g.name('v'), a.shape, lines, atoms)
    lines = ('{out} = {0} * 1.0', '{out}_k = 0',
             'while np.sum({out} * {out}) < 4.0 and {out}_k < 3:',
             '    {out} = 1.5 * {out} + 0.2 * {1}', '    {out}_k += 1')
    return Code('while', g.name('v'), a.shape, lines, (a, b))


def in_place(g: Generator, s: Scope) -> Code | None:
    a = g.pick(s, lambda x: is_float(x) and x.shape != ())
    b = g.pick(s)
    if a is None or b is None:
        return None
    # no write through a view (y[-1] += v on a matrix adds into a row view): tracked
    # refuses those, as documented (README, In-place writes)
    last = '-1' if len(a.shape) == 1 else '-1, -1'
    writes = ['{out}[0] = np.tanh(np.sum({1}))', '{out}[%s] += np.sin(np.sum({1}))' % last,
              '{out} *= 1.5', '{out}[1:] = {out}[:-1] * 0.5']
    if b.shape in ((), a.shape):
        writes.append('{out} += np.cos({1})')
    lines = ('{out} = {0} * 1.0 + 0.0 * np.sum({1})',) + tuple(
        g.rng.sample(writes, g.rng.randint(1, 2)))
    return Code('in-place', g.name('v'), a.shape, lines, (a, b))


def custom_rule(g: Generator, s: Scope) -> Code | None:
    a = g.pick(s)
    if a is None:
        return None
    name = g.rng.choices(['r_tanh', 'r_tanh_jvp', 'r_softplus', 'r_mul', 'r_mul_jvp',
                          'r_sin_opaque', 'r_exp_opaque'], [3, 3, 2, 3, 3, 1, 1])[0]
    if name.startswith('r_mul'):
        b = g.pick(s, lambda x: is_float(x) and x.shape in (a.shape, ()))
        if b is None:
            return None
        return Code('rule', g.name('v'), a.shape, ('{out} = %s({0}, {1})' % name,), (a, b))
    return Code('rule', g.name('v'), a.shape, ('{out} = %s({0})' % name,), (a,))


def ignore(g: Generator, s: Scope) -> Code | None:
    a = g.pick(s)
    if a is None:
        return None
    b = g.pick(s, lambda x: is_float(x) and x.shape in (a.shape, ()))
    if b is not None and g.chance(0.5):
        return Code('ignore', g.name('v'), a.shape,
                    ('{out} = tr.ignore_derivatives(lambda: np.sin({0}) * {1})',), (a, b))
    return Code('ignore', g.name('v'), a.shape, ('{out} = tr.ignore_derivatives({0})',), (a,))


def checkpoint(g: Generator, s: Scope) -> Call | None:
    trees = [g.call_tree(s) for _ in range(g.rng.choice([1, 1, 2]))]
    if any(t is None for t in trees):
        return None
    i = g.rng.randrange(len(trees))
    dep = (i, g.pick_leaf(trees[i]).label)
    fn = g.function(s, trees, dep, array=True)
    call = 'tr.checkpoint({fn}, ' + ', '.join(f'{{t{k}}}' for k in range(len(trees))) + ')'
    return Call('checkpoint', g.name('v'), fn.shape, ('{out} = ' + call,), fn, tuple(trees), ())


def fmap(g: Generator, s: Scope) -> Call | None:
    tree = g.call_tree(s)
    if tree is None:
        return None
    c = g.pick(s, lambda x: is_float(x) and x.shape == ())
    options = ['2.0 * l', 'np.sin(l) + l'] + (['l * {0}'] if c is not None else [])
    body = g.rng.choice(options)
    return Call('fmap', g.name('m'), None, ('{out} = tr.fmap(lambda l: %s, {t0})' % body,),
                None, (tree,), (c,) if c is not None and '{0}' in body else ())


def destructure(g: Generator, s: Scope) -> Call | None:
    tree = g.call_tree(s)
    if tree is None:
        return None
    first = '{out}_flat, {out}_re = tr.destructure({t0})'
    if g.chance(0.5):
        return Call('destructure', g.name('v'), (),
                    (first, '{out} = np.sum(np.sin({out}_flat) * {out}_flat)'), None, (tree,), ())
    return Call('destructure', g.name('m'), None,
                (first, '{out} = {out}_re(np.cos({out}_flat) * 2.0)'), None, (tree,), ())


def first_order(g: Generator, s: Scope) -> Call | None:
    """An inner gradient, withgradient, pullback, jacobian or jvp, combined into a value."""
    op = g.rng.choice(['gradient', 'gradient', 'withgradient', 'pullback', 'jacobian', 'jvp'])
    trees = [g.call_tree(s) for _ in range(g.rng.choice([1, 1, 2]))]
    if any(t is None for t in trees):
        return None
    i = g.rng.randrange(len(trees))
    leaf = g.pick_leaf(trees[i])
    shape = leaf.literal.shape if leaf.kind == 'atom' else leaf.shape
    targs = ', '.join(f'{{t{k}}}' for k in range(len(trees)))
    out = g.name('v')
    lines: tuple[str, ...]
    if op == 'gradient':
        fn = g.function(s, trees, (i, leaf.label))
        return Call(op, out, shape, ('{out} = tr.gradient({fn}, %s)[%d]{p0}' % (targs, i),),
                    fn, tuple(trees), (), ((i, leaf.label),))
    if op == 'withgradient':
        aux = g.chance(0.4)
        fn = g.function(s, trees, (i, leaf.label), aux=aux)
        val = '{out}_r.val[0] * 0.5 + np.sum({out}_r.val[1])' if aux else '{out}_r.val * 0.5'
        lines = ('{out}_r = tr.withgradient({fn}, %s)' % targs,
                 '{out} = %s + {out}_r.grad[%d]{p0}' % (val, i))
        return Call(op, out, shape, lines, fn, tuple(trees), (), ((i, leaf.label),))
    fn = g.function(s, trees, (i, leaf.label), array=True)
    if op == 'pullback':
        dy = g.pick(s, lambda x: is_float(x) and x.shape == fn.shape) or \
            Atom('', fn.shape, value=0.7)
        lines = ('{out}_y, {out}_b = tr.pullback({fn}, %s)' % targs,
                 '{out} = np.sum({out}_y * {0}) + {out}_b({0})[%d]{p0} + '
                 '{out}_b(2.0 * {0})[%d]{p0}' % (i, i))
        return Call(op, out, shape, lines, fn, tuple(trees), (dy,), ((i, leaf.label),))
    if op == 'jacobian':
        mode = g.rng.choice(['', '', ", mode='forward'", ", mode='reverse'"])
        lines = ('{out} = np.sum(np.tanh(tr.jacobian({fn}, %s%s)[%d]{p0}))' % (targs, mode, i),)
        return Call(op, out, (), lines, fn, tuple(trees), (), ((i, leaf.label),))
    tangents: list[Any] = [g.tangent(s, g.resolve(t)) for t in trees]
    if len(trees) == 2 and g.chance(0.5) and not (g.ties(trees[0]) & g.ties(trees[1])):
        tangents[1 - i] = None                                 # a constant argument
    n = len(trees)
    lines = ('{out}_y, {out}_t = tr.jvp({fn}, (%s,), (%s,))'
             % (targs, ', '.join(f'{{t{n + k}}}' for k in range(n))),
             '{out} = np.sum({out}_y) + np.sum(np.tanh({out}_t))')
    return Call('jvp', out, (), lines, fn, tuple(trees) + tuple(tangents), ())


def second_order(g: Generator, s: Scope) -> Call | None:
    """An inner hessian, hvp or diaghessian (forward over reverse, or reverse over reverse)."""
    op = g.rng.choice(['hessian', 'hessian_reverse', 'hvp', 'diaghessian'])
    if op == 'diaghessian':
        tree = g.call_tree(s)
        if tree is None:
            return None
        leaf = g.pick_leaf(tree)
        shape = leaf.literal.shape if leaf.kind == 'atom' else leaf.shape
        fn = g.function(s, [tree], (0, leaf.label))
        return Call(op, g.name('v'), shape, ('{out} = tr.diaghessian({fn}, {t0})[0]{p0}',), fn,
                    (tree,), (), ((0, leaf.label),))
    x = g.pick(s, lambda a: is_float(a) and len(a.shape) <= 1)
    if x is None:
        return None
    tree = Leaf(g.name('L'), 'atom', shape=x.shape, literal=x)
    fn = g.function(s, [tree], (0, tree.label))
    if op == 'hvp':
        v = g.pick(s, lambda a: is_float(a) and a.shape == x.shape) or Atom('', x.shape)
        return Call(op, g.name('v'), x.shape, ('{out} = tr.hvp({fn}, {t0}, {0})',), fn, (tree,),
                    (v,))
    return Call(op, g.name('v'), (), ('{out} = np.sum(np.sin(tr.%s({fn}, {t0})))' % op,), fn,
                (tree,), ())


def duplicated(g: Generator, s: Scope) -> Call | None:
    """``gradient`` with ``Duplicated``/``Const`` arguments, which hold plain values (the API
    refuses a Duplicated model that depends on an outer differentiation)."""
    plain = [a for a in s.atoms if a.plain and is_float(a)]
    arrays = [a for a in plain if a.shape] or [Atom('', g.rng.choice(ARRAY_SHAPES), value=g.value(),
                                                  plain=True)]
    model = [g.rng.choice(arrays)] + g.rng.sample(plain, min(len(plain), g.rng.randint(0, 2)))
    items = [Leaf(g.name('L'), 'atom', shape=a.shape, literal=a) for a in model]
    if g.chance(0.5):
        items.append(Leaf(g.name('L'), 'number', literal=g.value()))
    tree = Node(g.name('L'), 'tuple', ('',) * len(items), tuple(items))
    c = g.rng.choice(plain or arrays)
    const = Leaf(g.name('L'), 'atom', shape=c.shape, literal=c)
    fn = g.function(s, [tree, const], (0, items[0].label), closure=False)
    line = '{out} = tr.gradient({fn}, tr.Duplicated({t0}), tr.Const({t1}))[0]{p0}'
    return Call('duplicated', g.name('v'), items[0].shape, (line,), fn, (tree, const), (),
                ((0, items[0].label),))


# (maker, weight, deepest nesting depth where it may appear)
MAKERS: list[tuple[Callable[[Generator, Scope], Any], float, int]] = [
    (numpy_expression, 8, 2), (control, 2, 2), (in_place, 1.5, 2), (custom_rule, 1.5, 2),
    (ignore, 1, 0), (checkpoint, 1.2, 1), (fmap, 1.2, 2), (destructure, 1, 2),
    (first_order, 3, 1), (second_order, 1, 0), (duplicated, 1, 0),
]


def generate(seed: int) -> Program:
    """The program of ``seed`` (the same on every machine and run)."""
    return Generator(seed).program()
