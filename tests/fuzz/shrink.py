"""Greedy shrinking: the smallest program (by the candidates below) that still fails the
same check with the same kind of failure.

Candidates, largest reductions first: drop a statement (its readers read one of its
own operands of the same shape instead, or a constant); drop a term of a function's
result; drop a write of an in-place block; drop an argument, or a leaf of a tree,
that nothing reads.  A candidate counts only if it is a valid program (it renders,
and the reference implementation runs it), so shrinking never turns a finding into
a bug of the generator's.
"""
from __future__ import annotations

import dataclasses
import re
import time
from typing import Any, Iterator

from .oracle import Failure, Run, run_check, signature, usable
from .programs import Atom, Call, Code, Function, Leaf, Node, Program, Ref, transform, walk
from .programs import build as build_program
from .reference import NotSmooth, Reference


def _replace_var(program: Program, out: str, by: Atom) -> Program:
    def fn(obj: Any) -> Any:
        if isinstance(obj, Atom) and obj.name == out and not obj.via:
            return by
        return obj
    return transform(program, fn)


def _rebind(program: Program, old: str, new: str) -> Program:
    """Readers of the tree bound to ``old`` read the same labels through ``new``."""
    def fn(obj: Any) -> Any:
        if isinstance(obj, (Atom, Ref)) and obj.via == old:
            return dataclasses.replace(obj, via=new)
        return obj
    return transform(program, fn)


def _drop_statement(program: Program, out: str) -> Program:
    def fn(obj: Any) -> Any:
        if isinstance(obj, Function) and any(s.out == out for s in obj.body):
            return dataclasses.replace(obj, body=tuple(s for s in obj.body if s.out != out))
        return obj
    return transform(program, fn)


def _constant(a: Atom) -> Atom:
    return Atom('', a.shape, integer=a.integer, value=2 if a.integer else 0.5)


def _without_statement(program: Program, s: Any) -> Iterator[Program]:
    if s.shape is None:                    # a tree: its readers read its input's tree
        source = s.trees[0]
        if not any(isinstance(o, (Atom, Ref)) and o.via == s.out for o in walk(program)):
            yield _drop_statement(program, s.out)
        elif isinstance(source, Ref):
            yield _drop_statement(_rebind(program, s.out, source.via), s.out)
        return
    users = [a for a in walk(program) if isinstance(a, Atom) and a.name == s.out and not a.via]
    if not users:
        yield _drop_statement(program, s.out)
        return
    like = users[0]
    fits = lambda a: a.shape == like.shape and a.integer == like.integer and a.name  # noqa: E731
    # one of its operands, an argument's leaf (readable everywhere), or a constant
    reads = list(dict.fromkeys(a for a in walk(program) if isinstance(a, Atom)
                               and a.via in program.main.params and fits(a)))
    options = [a for a in s.atoms if fits(a)] + reads[:3] + [_constant(like)]
    for by in options:
        yield _drop_statement(_replace_var(program, s.out, by), s.out)


def _result_terms(program: Program) -> Iterator[Program]:
    for fn in [f for f in walk(program) if isinstance(f, Function)]:
        terms = fn.result.split(' + ')
        if len(terms) < 2 or fn.result.startswith('('):
            continue
        for k in range(len(terms)):
            kept = ' + '.join(t for i, t in enumerate(terms) if i != k)
            used = sorted({int(m) for m in re.findall(r'\{(\d+)\}', kept)})
            renumber = {old: new for new, old in enumerate(used)}
            result = re.sub(r'\{(\d+)\}', lambda m: '{%d}' % renumber[int(m.group(1))], kept)
            atoms = tuple(fn.atoms[i] for i in used)
            yield _replace_function(program, fn.name, result=result, atoms=atoms)


def _replace_function(program: Program, name: str, **changes: Any) -> Program:
    def fn(obj: Any) -> Any:
        if isinstance(obj, Function) and obj.name == name:
            return dataclasses.replace(obj, **changes)
        return obj
    return transform(program, fn)


def _shorter_results(program: Program) -> Iterator[Program]:
    """A function returns one value it computes (cutting the chain after it)."""
    for fn in [f for f in walk(program) if isinstance(f, Function)]:
        if fn.result.startswith('('):
            continue
        mine = [Atom(s.out, s.shape) for s in fn.body if s.shape is not None]
        for a in mine + list(fn.atoms):
            if a.integer or a in fn.atoms[:1] and len(fn.atoms) == 1:
                continue
            if fn.shape == ():
                yield _replace_function(program, fn.name, result='np.sum({0})', atoms=(a,))
            elif a.shape == fn.shape:
                yield _replace_function(program, fn.name, result='{0}', atoms=(a,))


def _fewer_writes(program: Program) -> Iterator[Program]:
    for s in [s for s in walk(program) if isinstance(s, Code) and s.kind == 'in-place']:
        for k in range(1, len(s.lines)):
            lines = s.lines[:k] + s.lines[k + 1:]
            if len(lines) < 2:
                continue
            yield transform(program, lambda o, s=s, lines=lines: dataclasses.replace(
                o, lines=lines) if isinstance(o, Code) and o.out == s.out else o)


def _read_labels(program: Program) -> set[str]:
    labels: set[str] = set()
    for obj in walk(program):
        if isinstance(obj, Atom) and obj.via:
            labels.add(obj.name)
        elif isinstance(obj, Ref):
            labels.add(obj.label)
        elif isinstance(obj, Call):
            labels.update(label for _, label in obj.picks)
    return labels


def _fewer_leaves(program: Program) -> Iterator[Program]:
    read = _read_labels(program)
    vias = {o.via for o in walk(program) if isinstance(o, (Atom, Ref))}
    for k in range(len(program.args)):
        if f'a{k}' not in vias:
            yield _drop_argument(program, k)
    for node in [n for n in walk(program) if isinstance(n, Node)]:
        for j, item in enumerate(node.items):
            inside = {o.label for o in walk(item) if isinstance(o, (Leaf, Node))}
            if inside & read:
                continue
            yield transform(program, lambda o, node=node, j=j: dataclasses.replace(
                o, items=o.items[:j] + o.items[j + 1:], keys=o.keys[:j] + o.keys[j + 1:])
                if isinstance(o, Node) and o.label == node.label else o)


def _drop_argument(program: Program, k: int) -> Program:
    n = len(program.args)
    for j in range(k + 1, n):
        program = _rebind(program, f'a{j}', f'a{j - 1}')
    main = dataclasses.replace(program.main, params=tuple(f'a{i}' for i in range(n - 1)))
    args = program.args[:k] + program.args[k + 1:]
    keys = {o.key for a in args for o in walk(a) if isinstance(o, Leaf) and o.kind == 'array'}
    arrays = tuple((key, v) for key, v in program.arrays if key in keys)
    return dataclasses.replace(program, args=args, main=main, arrays=arrays)


def candidates(program: Program) -> Iterator[Program]:
    for s in sorted((s for s in walk(program) if isinstance(s, (Code, Call))),
                    key=lambda s: -len(list(walk(s)))):         # the largest blocks first
        yield from _without_statement(program, s)
    yield from _result_terms(program)
    yield from _shorter_results(program)
    yield from _fewer_writes(program)
    yield from _fewer_leaves(program)


def valid(program: Program) -> Run | None:
    """The program's Run if it renders, has a usable value and the reference
    implementation runs it."""
    try:
        run = Run(program)
        if not usable(run):
            return None
        build_program(program, Reference())(*run.args())
    except NotSmooth:
        pass
    except Exception:
        return None
    return run


def shrink(program: Program, check: str, sig: str, seconds: float = 20.0) -> Program:
    """A smaller program on which ``check`` fails with the same signature (the same
    program if none is found within ``seconds``)."""
    deadline = time.monotonic() + seconds

    def fails(p: Program) -> bool:
        run = valid(p)
        if run is None:
            return False
        f = run_check(run, check)
        return isinstance(f, Failure) and signature(f) == sig
    progress = True
    while progress and time.monotonic() < deadline:
        progress = False
        for cand in candidates(program):
            if time.monotonic() > deadline:
                break
            if cand != program and fails(cand):
                program = cand
                progress = True
                break
    return program
