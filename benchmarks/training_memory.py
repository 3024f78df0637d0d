"""Memory over a long run: 10^4 steps of each training loop of the README and the
training guide (tests/compiled_tape/training.py), on a small model with the kernels in
use, and what stays allocated after them (tracemalloc), with the time per step under
tracemalloc and the tapes the loop's backend keeps.

    python benchmarks/training_memory.py [STEPS]      # default 10000

Run with a cache folder of its own (TRACKED_CACHE_DIR=$(mktemp -d)): the compiled
styles compile a few kernels first.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, 'tests', 'compiled_tape')]

import training  # noqa: E402


def main(steps):
    print(f'{"style":32s} {"kept after":>12s} {"per step":>10s} {"tapes":>6s}')
    for style in training.STYLES:
        kept, seconds, tapes = training.loop(style, steps)
        print(f'{style:32s} {kept / 1024:9.1f} KB {seconds / steps * 1e6:7.0f} us {tapes:6d}',
              flush=True)


if __name__ == '__main__':
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
