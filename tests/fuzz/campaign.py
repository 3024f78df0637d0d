"""Running many programs: the failures by check, grouped into findings, each shrunk.

Program ``i`` of the campaign with seed ``s`` is ``generate(s * 1_000_000 + i)``: any
finding is reproduced by its seed alone.  The CI slice (tests/test_fuzz.py) and the
command (``python -m tests.fuzz``) both run through ``run``.
"""
from __future__ import annotations

import multiprocessing
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Union

from .generate import generate
from .oracle import (CHECKS, NOT_SMOOTH, PASSED, UNDECIDED, Failure, Run, run_check, signature,
                     usable)
from .programs import Program, render
from .shrink import shrink


@dataclass(frozen=True)
class Failed:
    seed: int
    check: str
    kind: str
    signature: str
    message: str


@dataclass
class Results:
    programs: int = 0
    rejected: int = 0
    seconds: float = 0.0
    failures: list[Failed] = field(default_factory=list)
    passed: dict[str, int] = field(default_factory=dict)      # per check
    not_smooth: dict[str, int] = field(default_factory=dict)  # per check
    undecided: dict[str, int] = field(default_factory=dict)   # per check
    not_smooth_programs: int = 0     # not judged by some check: a kink at the sample point
    undecided_programs: int = 0      # not judged by some check: the reference's own error

    def failing_programs(self) -> int:
        return len({f.seed for f in self.failures})

    def by_check(self, check: str) -> list[Failed]:
        return [f for f in self.failures if f.check == check]

    def findings(self, check: str | None = None) -> dict[tuple[str, str], list[Failed]]:
        """Failures grouped by check and signature, the groups in order of size."""
        groups: dict[tuple[str, str], list[Failed]] = {}
        for f in self.failures:
            if check is None or f.check == check:
                groups.setdefault((f.check, f.signature), []).append(f)
        return dict(sorted(groups.items(), key=lambda kv: -len(kv[1])))


def seed_of(campaign_seed: int, i: int) -> int:
    return campaign_seed * 1_000_000 + i


Outcome = list[Union[Failed, str]]   # per check: the failure, PASSED, SKIPPED, NOT_SMOOTH...


def check_program(seed: int, checks: Iterable[str] = CHECKS) -> Outcome | None:
    """What each check gives on program ``seed`` (None: rejected, its value is unusable)."""
    run = Run(generate(seed))
    if not usable(run):
        return None
    out: Outcome = []
    for name in checks:
        f = run_check(run, name)
        out.append(Failed(seed, name, f.kind, signature(f), f.message)
                   if isinstance(f, Failure) else f)
    return out


def _check_program(args: tuple[int, tuple[str, ...]]) -> Outcome | None:
    return check_program(*args)


def run(seeds: Iterable[int], checks: Iterable[str] = CHECKS, jobs: int = 1) -> Results:
    """Every check on every program."""
    start = time.monotonic()
    res = Results()
    checks = tuple(checks)
    work = [(s, checks) for s in seeds]
    outcomes: Iterator[Outcome | None]
    if jobs > 1:
        with multiprocessing.get_context('spawn').Pool(jobs) as pool:
            outcomes = iter(list(pool.imap(_check_program, work, chunksize=8)))
    else:
        outcomes = map(_check_program, work)
    res.passed = {name: 0 for name in checks}
    res.not_smooth = {name: 0 for name in checks}
    res.undecided = {name: 0 for name in checks}
    for outcome in outcomes:
        res.programs += 1
        if outcome is None:
            res.rejected += 1
            continue
        for name, o in zip(checks, outcome):
            if isinstance(o, Failed):
                res.failures.append(o)
            elif o == PASSED:
                res.passed[name] += 1
            elif o == NOT_SMOOTH:
                res.not_smooth[name] += 1
            elif o == UNDECIDED:
                res.undecided[name] += 1
        res.not_smooth_programs += NOT_SMOOTH in outcome
        res.undecided_programs += UNDECIDED in outcome
    res.seconds = time.monotonic() - start
    return res


def shrunk(f: Failed, seconds: float) -> tuple[Program, str]:
    """The failure's program shrunk, and the check's message on it."""
    program = shrink(generate(f.seed), f.check, f.signature, seconds=seconds)
    failure = run_check(Run(program), f.check)
    return program, failure.message if isinstance(failure, Failure) else f.message


def describe(check: str, group: list[Failed], program: Program, message: str) -> str:
    """A finding as text: the check, how many programs, the numbers, and the program."""
    seeds = ', '.join(str(f.seed) for f in group[:8]) + (', ...' if len(group) > 8 else '')
    return (f'== {check}: {group[0].kind} -- {len(group)} program(s) (seeds {seeds})\n'
            f'{message}\n\n{render(program)}')


def summary(res: Results) -> str:
    def share(n: int) -> str:
        return f'{n} ({100 * n / max(res.programs, 1):.1f}%)'
    lines = [f'{res.programs} programs in {res.seconds:.1f} s ({res.rejected} rejected: value '
             f'not finite or too large); {res.failing_programs()} fail at least one check; '
             f'{share(res.not_smooth_programs)} not judged by some check for a kink at the '
             f'sample point, {share(res.undecided_programs)} for the reference\'s own error']
    lines.append(f'  {"check":22s} {"failing":>8s} {"passing":>8s} {"kink":>8s} '
                 f'{"undecided":>9s}  (the rest: skipped)')
    for check in res.passed:
        failing = len({f.seed for f in res.by_check(check)})
        lines.append(f'  {check:22s} {failing:8d} {res.passed[check]:8d} '
                     f'{res.not_smooth[check]:8d} {res.undecided[check]:9d}')
    return '\n'.join(lines)
