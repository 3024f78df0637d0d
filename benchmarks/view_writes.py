"""What a write through a view costs (tracked/views.py): a stencil loop written with a
view (``inner = u[1:-1]; inner += ...``, NumPy style) against the same update written
without one (``u[1:-1] = u[1:-1] + ...``), eager gradients, interleaved (A/B).

    python benchmarks/view_writes.py [--n 1000] [--steps 50]

Each step of the view form writes once through a live view: the root's new value is
one ``view_update`` entry, and the view is recomputed (one slice entry); the plain form
records one ``setitem`` entry.  The difference per step over the number of steps is
the cost of one write through a view.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))    # this checkout's tracked, not an installed one

import numpy as np  # noqa: E402

import tracked as tr  # noqa: E402
from common import interleaved_us  # noqa: E402


def with_view(steps):
    def f(u0):
        u = u0 * 1.0
        for _ in range(steps):
            inner = u[1:-1]
            inner += 0.1 * (u[:-2] - 2.0 * u[1:-1] + u[2:])
        return np.sum(u ** 2)
    return f


def without_view(steps):
    def f(u0):
        u = u0 * 1.0
        for _ in range(steps):
            u[1:-1] = u[1:-1] + 0.1 * (u[:-2] - 2.0 * u[1:-1] + u[2:])
        return np.sum(u ** 2)
    return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--n', type=int, default=1000)
    ap.add_argument('--steps', type=int, default=50)
    args = ap.parse_args()
    u0 = np.sin(np.linspace(0, 3, args.n))
    a, b = with_view(args.steps), without_view(args.steps)
    assert np.allclose(tr.gradient(a, u0)[0], tr.gradient(b, u0)[0], rtol=1e-12)
    t = interleaved_us({'view': lambda: tr.gradient(a, u0),
                        'no view': lambda: tr.gradient(b, u0),
                        'NumPy f': lambda: b(u0)})
    per = (t['view'] - t['no view']) / args.steps
    print(f'n={args.n}, {args.steps} steps; median us per gradient: view {t["view"]:.0f}, '
          f'no view {t["no view"]:.0f} (ratio {t["view"] / t["no view"]:.2f}); '
          f'NumPy f alone {t["NumPy f"]:.0f}')
    print(f'cost of one write through a view: {per:.1f} us')


if __name__ == '__main__':
    main()
