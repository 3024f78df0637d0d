"""Walk the rule registry: every registered NumPy callable has finite-difference cases,
and every case is checked on every path (ReverseDiff style: one oracle, all paths).

Each family's test module lists ``CASES``; a rule that is registered without a case
fails here, so a new rule is tested by being registered.  Per case:

- eager: ``tr.gradcheck`` to order 2 (the nested path: the pullback is
  differentiated on an outer tape);
- recorded: a ``GradientTape`` of a scalar loss of the case (``Case.loss``: linear,
  ``sum(w * y)``, and quadratic, ``sum(w * y + u * y * y / 2)``) recorded at one
  sample and replayed at another, against eager ``tr.withgradient`` there;
- compiled: the same tape compiled with numba.  numba compiles each new kernel and
  each tape's VM once per machine (cached on disk, ``~/.cache/tracked``), 0.3-1 s
  each.  Measured on the shared 2-core machine: every case with the linear loss
  (846 tapes) took 4 min cold and 5 s warm; both losses (1,692 tapes) take well
  over 10 min cold.  So by default a fixed subset is compiled (``COMPILED``: ~320
  tapes, 2-4 min cold depending on the load, ~5 s warm) that covers every rule,
  every primitive and every form of instruction any case records (see
  ``_recorded_items``).  ``TRACKED_SWEEP=rules`` compiles the smallest cover (every
  rule and primitive once: ~160 tapes, ~70 s cold), ``TRACKED_SWEEP=all`` every
  case with both losses;
- ``AutoCompiled`` on a few cases, and a ``HessianTape`` sweep over the
  elementwise and reduction families (compiled for one case of a dozen rules: all 76
  rules of those families compiled pass too, ~70 s cold);
- lists: every case whose constants or held arguments can be Python lists, called
  with them as lists (``Case.check_lists``) on the eager, nested and recorded paths
  (~10 s), and compiled (numba, in the foreground) for one case of each rule that
  raised with lists before they were converted at recording (~3 s warm, ~20 s cold).
"""
import importlib
import os
import pkgutil

import numpy as np
import pytest

import tests.rules as family_tests
import tracked as tr
from tracked import registry


def _family_cases():
    families = {}
    for mod in pkgutil.iter_modules(family_tests.__path__):
        if mod.name.startswith('test_') and mod.name != 'test_systematic':
            try:
                module = importlib.import_module(f'tests.rules.{mod.name}')
            except pytest.skip.Exception:      # an optional dependency (SciPy) is missing
                continue
            families[mod.name[5:]] = list(getattr(module, 'CASES', []))
    return families


FAMILIES = _family_cases()
ALL_CASES = [c for cases in FAMILIES.values() for c in cases]


LOSSES = ['linear', 'quadratic']     # see Case.loss


def _ids(cases):
    return [c.id for c in cases]


def rules_without_cases(cases):
    """The names of the registered rules that no case of ``cases`` covers."""
    covered = {c.covers for c in cases}
    return [registry.display_name(f) if callable(f) else repr(f)
            for f in registry.RULES if f not in covered]


def test_every_rule_has_cases():
    missing = rules_without_cases(ALL_CASES)
    assert not missing, (f'rules registered without a finite-difference case: '
                         f'{", ".join(missing)}; add a case(...) to the CASES of their '
                         f'family in tests/rules/')


def test_a_rule_without_cases_is_named():
    def uncovered(x):
        return x
    registry.defvjp(uncovered, lambda g, ans, x: g)
    try:
        with pytest.raises(AssertionError, match=r'without a finite-difference case: '
                                                 r'tests\.rules\.test_systematic\.uncovered;'):
            test_every_rule_has_cases()
    finally:
        del registry.RULES[uncovered]


@pytest.mark.parametrize('c', ALL_CASES, ids=_ids(ALL_CASES))
def test_rule_against_finite_differences(c):
    c.check()


# --------------------------------------------------------------------------
# Recorded tapes, replayed in NumPy
# --------------------------------------------------------------------------

@pytest.mark.parametrize('kind', LOSSES)
@pytest.mark.parametrize('c', ALL_CASES, ids=_ids(ALL_CASES))
def test_rule_replayed_on_a_tape(c, kind):
    c.check_replay(kind=kind)


# --------------------------------------------------------------------------
# Compiled tapes: every rule and every recorded primitive at least once
# --------------------------------------------------------------------------

def _recorded_items(c, kind):
    """What compiling case ``c`` with loss ``kind`` exercises: its rule, and each form
    of instruction its recorded tape runs, forward and backward: the primitive
    (non-differentiable functions included), which arguments are recorded values,
    None or constants, and the names of its keywords (the code generator
    specialises on these: a ``None`` clip bound or an ``ord=`` is another kernel).
    Second: whether it records at all."""
    items = {('rule', c.covers)}
    try:
        tape = tr.GradientTape(c.loss(kind), *c.points(0))
    except Exception:          # test_rule_replayed_on_a_tape reports it
        return items, False
    for ins in getattr(tape, 'instructions', ()):
        prim = getattr(ins, 'prim', None)
        if prim is not None:
            items.add(('primitive', prim))
            items.add(('form', prim, tuple(_arg_kind(a) for a in ins.args),
                       tuple(sorted(ins.kwargs))))
    return items, True


def _arg_kind(a):
    return ('recorded' if type(a).__name__ == 'Ref' else 'None' if a is None else 'constant')


def _compiled_subset(kinds):
    """A fixed greedy cover of the items of ``_recorded_items`` (those of ``kinds``)
    over all (case, loss) pairs (in case order, the quadratic loss first, pairs that
    record first); the items covered and all items."""
    recorded = [((c, kind), *_recorded_items(c, kind))
                for c in ALL_CASES for kind in reversed(LOSSES)]
    recorded = [(pair, {i for i in items if i[0] in kinds}, ok) for pair, items, ok in recorded]
    chosen, covered = [], set()
    for want_ok in (True, False):
        for pair, items, ok in recorded:
            if ok == want_ok and items - covered:
                chosen.append(pair)
                covered |= items
    all_items = set().union(*(items for _, items, _ in recorded))
    order = {pair: n for n, (pair, _, _) in enumerate(recorded)}
    return sorted(chosen, key=order.get), covered, all_items


SWEEP = os.environ.get('TRACKED_SWEEP', 'forms')
COMPILED, COMPILED_ITEMS, ALL_ITEMS = _compiled_subset(
    ('rule', 'primitive') if SWEEP == 'rules' else ('rule', 'primitive', 'form'))
if SWEEP == 'all':
    COMPILED = [(c, kind) for c in ALL_CASES for kind in reversed(LOSSES)]
COMPILED_IDS = [f'{c.id}-{kind}' for c, kind in COMPILED]


def test_compiled_subset_covers_every_rule_and_primitive():
    rules = {('rule', f) for f in registry.RULES}
    prims = {('primitive', p) for p in registry.RULES.values()
             if isinstance(p, registry.Primitive)}
    unrecorded = prims - ALL_ITEMS
    assert not unrecorded, \
        f'registered primitives that no case records: {sorted(map(str, unrecorded))}'
    missing = (rules | ALL_ITEMS) - COMPILED_ITEMS
    assert not missing, f'not compiled by any case of the subset: {sorted(map(str, missing))}'


@pytest.mark.parametrize('c, kind', COMPILED, ids=COMPILED_IDS)
def test_rule_compiled(c, kind):
    c.check_replay(compiled=True, kind=kind)


# --------------------------------------------------------------------------
# AutoCompiled on a few cases (kernels shared with test_rule_compiled)
# --------------------------------------------------------------------------

def _first_of_each_family(cases, n=2):
    out = []
    for fam in FAMILIES.values():
        out += [c for c in fam if c in cases][:n]
    return out


AUTO = _first_of_each_family([c for c, _ in COMPILED])


@pytest.mark.parametrize('compile', [True, False], ids=['compiled', 'numpy'])
@pytest.mark.parametrize('c', AUTO, ids=_ids(AUTO))
def test_rule_autocompiled(c, compile):
    c.check_autocompiled(compile=compile)


# --------------------------------------------------------------------------
# HessianTape over the elementwise and reduction rules
# --------------------------------------------------------------------------

HESSIAN = FAMILIES['elementwise'] + FAMILIES['reductions']


@pytest.mark.parametrize('c', HESSIAN, ids=_ids(HESSIAN))
def test_rule_hessian_tape(c):
    c.check_hessian_tape()


def _first_case_of(rules, cases):
    out = []
    for f in rules:
        out += [c for c in cases if c.covers is f][:1]
    return out


HESSIAN_COMPILED = _first_case_of(
    [np.tanh, np.power, np.maximum, np.clip, np.where, np.sum, np.max, np.prod, np.cumsum,
     np.var, np.linalg.norm, np.average], HESSIAN)


@pytest.mark.parametrize('c', HESSIAN_COMPILED, ids=_ids(HESSIAN_COMPILED))
def test_rule_hessian_tape_compiled(c):
    c.check_hessian_tape(compiled=True)


# --------------------------------------------------------------------------
# Python lists where the case takes arrays (constants, held arguments)
# --------------------------------------------------------------------------

LISTS = [c for c in ALL_CASES if c.list_variants()]


@pytest.mark.parametrize('c', LISTS, ids=_ids(LISTS))
def test_rule_with_lists(c):
    c.check_lists()


# Compiled: for each rule that raised with lists on the recorded path before operands
# were converted at recording (a pullback or a composite read a list), one of the cases
# that raised (operator.setitem raised on the nested path only).
LISTS_COMPILED = [next(c for c in LISTS if c.id.startswith(prefix)) for prefix in (
    "einsum('ij,jk->ik'", 'solve((3, 3),(3,))', 'lstsq.x(4,3)', 'interp((7,),(6,),(6,))',
    'polyval((4,)', 'polyfit((7,),(7,),1)', 'trapezoid(', 'gradient((4, 5),(5,)',
    'cov(aweights', 'quantile(weights=', 'insert((3, 4),1', 'bincount(')]


@pytest.mark.parametrize('c', LISTS_COMPILED, ids=_ids(LISTS_COMPILED))
def test_rule_with_lists_compiled(c):
    c.check_lists(paths=('compiled',))
