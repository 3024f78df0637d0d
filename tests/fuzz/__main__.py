"""The campaign command: ``python -m tests.fuzz --programs 5000 --seed 0 [--jobs 1]``.

Prints the summary (programs run, failing programs per check, time), then each
finding (failures of one check with one signature) with its first program shrunk.
"""
from __future__ import annotations

import argparse
import sys
import time

from . import campaign
from .oracle import CHECKS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m tests.fuzz', description=__doc__)
    parser.add_argument('--programs', type=int, default=1000)
    parser.add_argument('--seed', type=int, default=0, help='campaign seed (0: CI programs first)')
    parser.add_argument('--jobs', type=int, default=1, help='processes (default 1)')
    parser.add_argument('--checks', default=','.join(CHECKS),
                        help='comma-separated subset of: ' + ', '.join(CHECKS))
    parser.add_argument('--shrink-seconds', type=float, default=20.0,
                        help='time to shrink each finding (0: no shrinking)')
    args = parser.parse_args(argv)
    checks = [c.strip() for c in args.checks.split(',')]
    unknown = set(checks) - set(CHECKS)
    if unknown:
        parser.error(f'unknown checks {sorted(unknown)}')
    seeds = [campaign.seed_of(args.seed, i) for i in range(args.programs)]
    res = campaign.run(seeds, checks, jobs=args.jobs)
    print(campaign.summary(res), flush=True)
    start = time.monotonic()
    findings = res.findings()
    print(f'\n{len(findings)} findings (check and signature)\n')
    for (check, _), group in findings.items():
        if args.shrink_seconds > 0:
            program, message = campaign.shrunk(group[0], args.shrink_seconds)
        else:
            program, message = campaign.generate(group[0].seed), group[0].message
        print(campaign.describe(check, group, program, message), flush=True)
    print(f'shrinking took {time.monotonic() - start:.1f} s')
    return 1 if res.failures else 0


if __name__ == '__main__':
    sys.exit(main())
