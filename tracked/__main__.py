"""``python -m tracked``: train a small classifier on real data, eagerly and with a compiled tape.

The data are scikit-learn's bundled handwritten digits (1797 images of 8x8 pixels,
loaded from the installed package, no download).  The same model, from the same
initial weights, is trained twice on the same batches: once with gradients from the
eager tape, once with a tape recorded on the first batch and compiled with numba.
The demo prints the test accuracy and time per training step of each, and checks
the gradient against central finite differences and between the two tapes.
"""
import argparse
import sys
import time
from typing import Any

import numpy as np

import tracked as tr

USAGE_EXAMPLE = 'python -m tracked --epochs 20 --hidden 32 --batch-size 100 --lr 0.01'


def _positive(kind: Any) -> Any:
    def parse(text: Any) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f'expected a positive {kind.__name__}, got {text!r}')
        if not value > 0:
            raise argparse.ArgumentTypeError(f'expected a positive {kind.__name__}, got {text!r}')
        return value
    return parse


def parse_args(argv: Any) -> Any:
    p = argparse.ArgumentParser(
        prog='python -m tracked',
        description='Train a small classifier on scikit-learn\'s handwritten digits with '
                    'tracked, once with eager gradients and once with a compiled tape; '
                    'print test accuracy, time per step and a gradient check.',
        epilog=f'example: {USAGE_EXAMPLE}')
    p.add_argument('--epochs', type=_positive(int), default=20,
                   help='passes over the training set (default 20)')
    p.add_argument('--hidden', type=_positive(int), default=32,
                   help='hidden units (default 32)')
    p.add_argument('--batch-size', type=_positive(int), default=100,
                   help='examples per step (default 100)')
    p.add_argument('--lr', type=_positive(float), default=0.01,
                   help='Adam learning rate (default 0.01)')
    p.add_argument('--seed', type=int, default=0,
                   help='random seed for weights and shuffling (default 0)')
    p.add_argument('--eager-only', action='store_true', help='skip the compiled tape')
    p.add_argument('--no-progress', action='store_true', help='hide the progress bars')
    return p.parse_args(argv)


# --------------------------------------------------------------------------
# Data and model
# --------------------------------------------------------------------------

def load_digits(seed: Any, n_test: int = 297) -> Any:
    """(x_train, y_train, x_test, y_test): pixels scaled to [0, 1], integer labels."""
    try:
        from sklearn.datasets import load_digits as sk_load_digits
    except ImportError:
        sys.exit('The demonstration uses the handwritten digits bundled with scikit-learn, '
                 'which is not installed.\nInstall the demo extra: pip install -e \'.[demo]\' '
                 '(or pip install scikit-learn tqdm), then run python -m tracked again.')
    digits = sk_load_digits()
    x = digits.data.astype(np.float64) / 16.0
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def make_model(n_in: Any, hidden: Any, n_out: Any, seed: Any) -> Any:
    rng = np.random.default_rng(seed)
    return tr.nn.Chain(tr.nn.Dense(n_in, hidden, tr.nn.relu, rng=rng),
                       tr.nn.Dense(hidden, n_out, rng=rng))


def loss(model: Any, x: Any, y: Any) -> Any:
    """Mean cross-entropy of the model's logits against one-hot targets."""
    return tr.nn.logitcrossentropy(model(x), y)


def batches(x: Any, y: Any, batch_size: Any, epochs: Any, seed: Any) -> list[tuple[Any, Any]]:
    """Shuffled full batches (the last partial one is dropped), ``epochs`` passes."""
    rng = np.random.default_rng(seed + 1)
    yhot = tr.nn.onehot(y, 10)
    out = []
    for _ in range(epochs):
        order = rng.permutation(len(y))
        for i in range(len(y) // batch_size):
            idx = order[i * batch_size:(i + 1) * batch_size]
            out.append((x[idx], yhot[idx]))
    return out


def accuracy(model: Any, x: Any, y: Any) -> Any:
    return float(np.mean(np.argmax(model(x), axis=-1) == y))


# --------------------------------------------------------------------------
# The two runs and the checks
# --------------------------------------------------------------------------

def run(args: Any, out: Any = print) -> Any:
    x_train, y_train, x_test, y_test = load_digits(args.seed)
    if args.batch_size > len(y_train):
        sys.exit(f'--batch-size {args.batch_size} is larger than the training set '
                 f'({len(y_train)} examples)')
    data = batches(x_train, y_train, args.batch_size, args.epochs, args.seed)
    n_in = x_train.shape[1]
    out(f'tracked demo: a {n_in}-{args.hidden}-10 classifier (relu, softmax cross-entropy) '
        f'on scikit-learn\'s handwritten digits')
    out(f'  {len(y_train)} training and {len(y_test)} test images of 8x8 pixels; '
        f'Adam(lr={args.lr}), batch {args.batch_size}, {args.epochs} epochs = {len(data)} steps')
    out('')
    results = {}
    models = {}

    model = make_model(n_in, args.hidden, 10, args.seed)
    state = tr.setup(tr.Adam(args.lr), model)
    t0 = time.perf_counter()
    losses = tr.train(loss, model, data, state, progress=not args.no_progress,
                      desc='eager tape   ')
    elapsed = time.perf_counter() - t0
    results['eager'] = dict(accuracy=accuracy(model, x_test, y_test),
                            step=elapsed / len(data), loss=losses[-1])
    models['eager'] = model

    if not args.eager_only:
        model = make_model(n_in, args.hidden, 10, args.seed)
        state = tr.setup(tr.Adam(args.lr), model)
        t0 = time.perf_counter()
        # compiled before training (not in the background, tr.compile's default): the
        # demo compares the compiled tape's speed with the eager one's from its first step
        ctape = tr.compile(tr.GradientTape(loss, model, *data[0], wrt=(0,)), background=False)
        compile_time = time.perf_counter() - t0
        t0 = time.perf_counter()
        losses = tr.train(loss, model, data, state, tape=ctape,
                          progress=not args.no_progress, desc='compiled tape')
        elapsed = time.perf_counter() - t0
        results['compiled'] = dict(accuracy=accuracy(model, x_test, y_test),
                                   step=elapsed / len(data), loss=losses[-1],
                                   compile=compile_time)
        models['compiled'] = (model, ctape)

    xb, yb = data[0]
    emodel = models['eager']
    results['eager']['gradient'] = _per_call(lambda: tr.gradient(lambda m: loss(m, xb, yb),
                                                                 emodel))
    if 'compiled' in models:
        cmodel, ctape = models['compiled']
        buffers = ctape.gradient(cmodel, xb, yb)
        results['compiled']['gradient'] = _per_call(
            lambda: ctape.gradient(cmodel, xb, yb, out=buffers))

    out('')
    out(f'  {"":15}{"test accuracy":>15}{"time per step":>16}{"gradient alone":>16}'
        f'{"final loss":>12}')
    for name, r in results.items():
        out(f'  {name + " tape":15}{100 * r["accuracy"]:>13.1f} %{_us(r["step"]):>16}'
            f'{_us(r["gradient"]):>16}{r["loss"]:>12.4f}')
    if 'compiled' in results:
        r = results['compiled']
        out(f'  recording and compiling the tape took {r["compile"]:.2f} s; a compiled step is '
            f'{results["eager"]["step"] / r["step"]:.1f}x faster, its gradient '
            f'{results["eager"]["gradient"] / r["gradient"]:.1f}x')
    out('')
    results['check'] = gradient_check(models, *data[0], args.seed, out)
    return results


def _per_call(fn: Any, repeats: int = 5, number: int = 30) -> Any:
    """Median seconds per call of ``fn``."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return float(np.median(times))


def _us(seconds: Any) -> Any:
    return f'{seconds * 1e6:,.0f} µs' if seconds < 0.1 else f'{seconds:.2f} s'


def gradient_check(models: Any, xb: Any, yb: Any, seed: Any, out: Any) -> Any:
    """Reverse mode against central differences along a random direction, and eager vs compiled."""
    model = models['eager']
    grads = tr.gradient(loss, model, xb, yb)[0]
    rng = np.random.default_rng(seed + 2)
    params = [model.layers[0].weight, model.layers[0].bias,
              model.layers[1].weight, model.layers[1].bias]
    gparams = [grads.layers[0].weight, grads.layers[0].bias,
               grads.layers[1].weight, grads.layers[1].bias]
    direction = [rng.standard_normal(p.shape) for p in params]
    reverse = sum(float(np.sum(g * v)) for g, v in zip(gparams, direction))
    eps = 1e-6

    def shifted(s: Any) -> Any:
        for p, v in zip(params, direction):
            p += s * v
        value = float(loss(model, xb, yb))
        for p, v in zip(params, direction):
            p -= s * v
        return value
    numeric = (shifted(eps) - shifted(-eps)) / (2 * eps)
    rel = abs(reverse - numeric) / max(abs(numeric), 1e-12)
    out(f'  gradient check on a batch of {len(xb)} images, along a random direction in all '
        f'{sum(p.size for p in params):,} parameters:')
    out(f'    reverse mode {reverse:.10f}   central differences {numeric:.10f}   '
        f'relative difference {rel:.1e}')
    ok = rel < 1e-5
    check = dict(reverse=reverse, numeric=numeric, relative=rel)
    if 'compiled' in models:
        cmodel, ctape = models['compiled']
        eager_grad = tr.gradient(loss, cmodel, xb, yb)[0]
        compiled_grad = ctape.gradient(cmodel, xb, yb)
        compiled_grad = compiled_grad[0] if isinstance(compiled_grad, tuple) else compiled_grad
        diff = max(float(np.max(np.abs(e.weight - c.weight))) for e, c in
                   zip(eager_grad.layers, compiled_grad.layers))
        diff = max([diff] + [float(np.max(np.abs(e.bias - c.bias))) for e, c in
                             zip(eager_grad.layers, compiled_grad.layers)])
        out(f'    eager and compiled tape agree: largest gradient difference {diff:.1e}')
        check['compiled_vs_eager'] = diff
        ok = ok and diff < 1e-8
    out(f'  {"passed" if ok else "FAILED"}')
    check['ok'] = ok
    return check


def main(argv: Any = None) -> Any:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    results = run(args)
    return 0 if results['check']['ok'] else 1


if __name__ == '__main__':
    sys.exit(main())
