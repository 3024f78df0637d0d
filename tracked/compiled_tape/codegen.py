"""Code generation: a program becomes steps of small numba kernels run by a tiny VM.

Why not one function per tape: numba's compile time grows much faster than the
size of one function (a 200-statement loop compiles in ~1 s, 200 loops in one
function in ~14 s), and a driver with one call site per step was measured at
~0.1 s per call site.  Instead every step is a call of a *kernel* generated from
an operation signature (the fused operation sequence, operand layout kinds and
dtypes, never sizes, offsets or float constants: those are read at run time from
an integer table ``T`` and a constant table ``C``), and a generated VM loops over
the steps, dispatching on the kernel number.  A W1-like tape of 1 600 operations
needs a handful of distinct kernels; compile time grows with the number of
distinct kernels, i.e. at most linearly with the tape.

Kernel kinds:
- ``ew``: a run of elementwise instructions of one shape fused into one loop over
  elements with scalar temporaries (flat when every operand is contiguous or a
  broadcast scalar, else nested loops with strides); only values needed elsewhere
  are stored; a full ``np.sum``/``np.mean`` of a fused value is accumulated in
  the same loop (the one reassociable operation of the loop, so that it can
  vectorise); the adjoint of a stencil (scatter-adds of ``x[1:]``, ``x[:-1]``
  into one zeroed buffer) is accumulated in the same loop, carried in registers.
- ``reduce``: sum/mean/max/min over axes of any strided value.
- ``matmul``: loops for small products, BLAS (``np.dot`` into the output) for
  large 2-d ones.
- ``fill``, ``guard``; and ``fallback``: an instruction the generator cannot
  compile runs in NumPy between VM segments (the VM returns, Python runs it and
  writes its value into its buffer, the VM resumes) -- per instruction, never for
  the whole tape.

The generator reads the recorded instructions, which are the registry's forward
functions: the derivative rules exist once, in the registry.
"""
import hashlib

import numpy as np

from .buffers import Storage, KERNEL_DTYPES
from .record import Ref

__all__ = ['Kernel', 'Step', 'EWGroup', 'ew_kernel', 'reduce_kernel', 'matmul_kernel']

MAX_FUSED = 24           # instructions per fused kernel: compile time, and kernel reuse
MAX_NDIM = 4
BLAS_MIN_FLOPS = 32 ** 3
MAX_CARRY = 8            # widest stencil (elements) whose adjoint is carried in registers

_F8 = np.dtype(np.float64)

# --------------------------------------------------------------------------
# Elementwise operations: name -> scalar expression template
# --------------------------------------------------------------------------

_UNARY_NP = ['sin', 'cos', 'tan', 'arcsin', 'arccos', 'arctan', 'sinh', 'cosh', 'tanh',
             'arcsinh', 'arccosh', 'arctanh', 'exp', 'expm1', 'exp2', 'log', 'log1p', 'log2',
             'log10', 'sqrt', 'cbrt', 'sign', 'floor', 'ceil', 'trunc', 'rint', 'deg2rad',
             'rad2deg', 'degrees', 'radians']
_BINARY_NP = ['maximum', 'minimum', 'fmax', 'fmin', 'arctan2', 'hypot', 'logaddexp',
              'logaddexp2', 'fmod']

EW = {
    'np.add': '({0} + {1})', 'np.subtract': '({0} - {1})', 'np.multiply': '({0} * {1})',
    'np.divide': '({0} / {1})', 'np.true_divide': '({0} / {1})',
    'np.negative': '(-{0})', 'np.positive': '{0}', 'np.copy': '{0}',
    'np.absolute': 'abs({0})', 'np.fabs': 'abs({0})', 'np.square': '({0} * {0})',
    'np.reciprocal': '(1.0 / {0})',
    'np.where': '({1} if {0} else {2})',
    'np.less': '({0} < {1})', 'np.less_equal': '({0} <= {1})',
    'np.greater': '({0} > {1})', 'np.greater_equal': '({0} >= {1})',
    'np.equal': '({0} == {1})', 'np.not_equal': '({0} != {1})',
    'np.logical_and': '({0} and {1})', 'np.logical_or': '({0} or {1})',
    'np.logical_not': '(not {0})',
}
EW.update({f'np.{n}': f'np.{n}({{0}})' for n in _UNARY_NP})
EW.update({f'np.{n}': f'np.{n}({{0}}, {{1}})' for n in _BINARY_NP})
_BOOL_OK = {'np.where', 'np.less', 'np.less_equal', 'np.greater', 'np.greater_equal',
            'np.equal', 'np.not_equal', 'np.logical_and', 'np.logical_or', 'np.logical_not',
            'np.copy', 'np.positive', 'astype'}
_ARITY = {'np.where': 3, 'np.clip': 3, 'np.power': 2, 'astype': 1}


def _is_scalar_const(v):
    return isinstance(v, (bool, int, float, np.generic)) or (
        isinstance(v, np.ndarray) and v.ndim == 0)


def _pow_template(e):
    """Cheap forms of ``x ** e`` for common constant exponents."""
    try:
        e = float(e)
    except (TypeError, ValueError):
        return None
    return {2.0: '({0} * {0})', 1.0: '(+{0})', 3.0: '({0} * {0} * {0})', 0.5: 'np.sqrt({0})',
            -1.0: '(1.0 / {0})', -2.0: '(1.0 / ({0} * {0}))', 4.0: '(({0} * {0}) * ({0} * {0}))'
            }.get(e)


# --------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------

class Kernel:
    """A generated numba function: ``name``, ``source``, and its array parameters' dtype codes."""

    __slots__ = ('name', 'source', 'arrays', 'returns', 'reassoc')

    def __init__(self, body_lines, arrays, returns=False, reassoc=False, helpers=''):
        params = ', '.join([f'a{k}' for k in range(len(arrays))] + ['T', 'p', 'C'])
        text = '\n'.join(['def KNAME(' + params + '):'] + ['    ' + ln for ln in body_lines])
        text += helpers           # functions the kernel calls, defined after it
        self.reassoc = reassoc     # accumulations may be reordered (vectorised sums)
        digest = hashlib.sha1((text + repr(arrays) + repr(reassoc)).encode()).hexdigest()[:16]
        self.name = f'k_{digest}'
        self.source = text.replace('KNAME', self.name)
        self.arrays = tuple(arrays)
        self.returns = returns


class Step:
    """One VM step: a kernel (or None for a fallback) with its array slots and parameters."""

    __slots__ = ('kind', 'kernel', 'slots', 'params', 'instrs', 'guard')

    def __init__(self, kind, kernel=None, slots=(), params=(), instrs=(), guard=-1):
        self.kind = kind
        self.kernel = kernel
        self.slots = list(slots)          # per array parameter: slot in its dtype's tuple
        self.params = list(params)        # ints after the slots in T
        self.instrs = list(instrs)
        self.guard = guard


class _Ctx:
    """Constants collected while generating: the float table ``C``."""

    def __init__(self):
        self.C = []

    def const(self, v):
        self.C.append(float(v))
        return len(self.C) - 1


def _code(dtype):
    return KERNEL_DTYPES.get(np.dtype(dtype))


def _idx(name, ndim, strided):
    """Index expression into array parameter ``name`` inside the loop nest."""
    # An unsigned index: numba then skips the negative-index wraparound test, which
    # otherwise blocks vectorisation (7x slower loops measured with signed offsets).
    if not strided:
        return f'U(o{name} + i)'
    return f'U(o{name} + ' + ' + '.join(f'i{d} * s{name}_{d}' for d in range(ndim)) + ')' \
        if ndim else f'U(o{name})'


class EWGroup:
    """A run of fused elementwise instructions sharing one iteration shape."""

    def __init__(self, shape):
        self.shape = shape
        self.instrs = []          # Instr
        self.reductions = []      # (instr, operand instr index, 'sum'|'mean')
        self.members = set()
        self.pending = set()      # results of reductions: not usable inside the group
        self.scatters = []        # (instr, region storage): accumulated into, in the loop
        self.chains = set()


def ew_kernel(group, storages, stored, out_storage, ctx):
    """Kernel and T parameters for a fused group.  ``stored``: instr indices to write
    out; ``out_storage(i)``: the storage they are written to."""
    shape = group.shape
    ndim = len(shape)
    ext = {}              # external key -> (param name, storage)
    arrays, slots, params = [], [], []
    lines_pre, lines_loop, lines_post = [], [], []
    operands = []         # (name, storage, is_output)
    local = {}
    strided = False

    def ext_operand(key, s):
        if key in ext:
            return ext[key]
        if s.kind == 'const':
            if isinstance(s.value, (bool, np.bool_)):
                tok = 'True' if s.value else 'False'
            elif isinstance(s.value, (int, np.integer)):
                tok = f'np.int64({int(s.value)})'
            else:
                tok = f'c{len(ext)}'
                lines_pre.append(f'{tok} = C[T[p + {len(params)}]]')
                params.append(ctx.const(s.value))
            ext[key] = tok
            return tok
        k = len(arrays)
        arrays.append(_code(s.dtype))
        slots.append(s.slot)
        tok = f'x{k}'
        operands.append((k, s, False))
        ext[key] = tok
        return tok

    # operand tokens, in order
    body = []
    for ins in group.instrs:
        toks = []
        for a in ins.args:
            if type(a) is Ref:
                if a.i in local:
                    toks.append(local[a.i])
                else:
                    toks.append(ext_operand(('r', a.i), storages[a.i]))
            else:
                toks.append(a)
        body.append((ins, toks))
        local[ins.i] = f't{len(local)}'

    # decide the loop form
    for k, s, _ in operands:
        if not (s.broadcast_scalar() or (s.shape == shape and s.contiguous())):
            strided = True
    outs = []
    for ins in group.instrs:
        if ins.i in stored:
            s = out_storage(ins.i)
            outs.append((ins.i, s))
            if not (s.shape == shape and s.contiguous()):
                strided = True
    for i, region in group.scatters:
        if not (region.shape == shape and region.contiguous()):
            strided = True
    if ndim == 0:
        strided = False

    # loads of external arrays
    loads = {}
    for k, s, _ in operands:
        if s.broadcast_scalar():
            loads[k] = ('pre', f'x{k} = a{k}[U(o{k})]')
        else:
            loads[k] = ('loop', f'x{k} = a{k}[{_idx(k, ndim, strided)}]')

    # the scalar code
    for ins, toks in body:
        expr = _expr(ins, toks, ext_operand, ctx, lines_pre, params)
        lines_loop.append(f'{local[ins.i]} = {expr}')
    out_tokens = []
    for i, s in outs:
        k = len(arrays)
        arrays.append(_code(s.dtype))
        slots.append(s.slot)
        operands.append((k, s, True))
        out_tokens.append((k, i, s))
        lines_loop.append(f'a{k}[{_idx(k, ndim, strided)}] = {local[i]}')
    same = {}                 # accumulations into one region: summed first, one update
    for i, region in group.scatters:
        key = (region.slot, region.off, region.strides_for(shape), region.dtype)
        same.setdefault(key, (region, []))[1].append(local[i])
    for cluster in _carry_clusters(list(same.values()), shape, strided, operands):
        region = cluster[0][0]
        k = len(arrays)
        arrays.append(_code(region.dtype))
        slots.append(region.slot)
        operands.append((k, region, True))
        if len(cluster) == 1:
            lines_loop.append(f'a{k}[{_idx(k, ndim, strided)}] += ' + ' + '.join(cluster[0][1]))
            continue
        # Shifted regions of one buffer (the adjoint of a stencil: x[1:], x[:-1], ...):
        # element o + i takes the delta-d terms of iteration i - d, carried in registers
        # w1..wW, so each element is updated once and no iteration reads what the one
        # before wrote.  Width 1 then vectorises (W3 n=1e5: a call went from ~175 to
        # ~53 µs, against updates of a[o + i] and a[o + 1 + i] through memory); wider
        # windows are chained recurrences that LLVM leaves scalar (still ~8% faster).
        by_delta = {r.off - region.off: terms for r, terms in cluster}
        width = max(by_delta)
        lines_pre.extend(f'w{k}_{j} = 0.0' for j in range(1, width + 1))
        lines_loop.append(f'a{k}[U(o{k} + i)] += w{k}_1 + (' + ' + '.join(by_delta[0]) + ')')
        for j in range(1, width + 1):
            parts = ([f'w{k}_{j + 1}'] if j < width else []) + (
                ['(' + ' + '.join(by_delta[j]) + ')'] if j in by_delta else [])
            lines_loop.append(f'w{k}_{j} = ' + ' + '.join(parts))
        lines_post.append('if n > 0:')
        lines_post.extend(f'    a{k}[U(o{k} + n - 1 + {j})] += w{k}_{j}'
                          for j in range(1, width + 1))
    accs = []
    radd = False
    for rins, src, op in group.reductions:
        s = out_storage(rins.i)
        k = len(arrays)
        arrays.append(_code(s.dtype))
        slots.append(s.slot)
        operands.append((k, s, True))
        if rins.dtype.kind == 'f':
            lines_pre.append(f'r{k} = 0.0')
            lines_loop.append(f'r{k} = RADD(r{k}, {local[src]})')
            radd = True
        else:
            lines_pre.append(f'r{k} = 0')
            lines_loop.append(f'r{k} += {local[src]}')
        accs.append((k, op, s))

    # parameters: sizes, then offsets/strides per array operand
    head = []
    if strided:
        for d in range(ndim):
            head.append(f'n{d} = T[p + {len(params)}]')
            params.append(shape[d])
    else:
        head.append(f'n = T[p + {len(params)}]')
        params.append(int(np.prod(shape, dtype=np.int64)))
    for k, s, is_out in operands:
        head.append(f'o{k} = T[p + {len(params)}]')
        params.append(s.off)
        if strided and not s.broadcast_scalar() and not any(k == a for a, _, _ in accs):
            st = s.strides_for(shape)
            for d in range(ndim):
                head.append(f's{k}_{d} = T[p + {len(params)}]')
                params.append(st[d])
    for k, op, s in accs:
        if op == 'mean':
            head.append(f'cnt{k} = T[p + {len(params)}]')
            params.append(max(int(np.prod(shape, dtype=np.int64)), 1))
            lines_post.append(f'a{k}[U(o{k})] = r{k} / cnt{k}')
        else:
            lines_post.append(f'a{k}[U(o{k})] = r{k}')
    pre = head + lines_pre + [ln for where, ln in loads.values() if where == 'pre']
    loop_loads = [ln for where, ln in loads.values() if where == 'loop']
    lines = list(pre)
    inner = loop_loads + lines_loop
    if ndim == 0:
        lines += [ln.replace(' + i)]', ')]') for ln in inner]
    elif strided:
        for d in range(ndim):
            lines.append('    ' * d + f'for i{d} in range(n{d}):')
        lines += ['    ' * ndim + ln for ln in inner]
    else:
        lines.append('for i in range(n):')
        lines += ['    ' + ln for ln in inner]
    lines += lines_post
    # Elementwise arithmetic is not reassociated (values match the eager tape exactly);
    # float sums are, through RADD, so that loops with a sum can vectorise.
    return Kernel(lines, arrays, helpers=_RADD if radd else ''), slots, params


# A float add that may be reassociated: the accumulation of a fused sum, so that LLVM
# can vectorise the loop (the rest of the kernel keeps exact IEEE order; the fastmath
# flag stays on this one instruction when it is inlined).
_RADD = """

@njit(cache=True, error_model='numpy', nogil=True, fastmath={'reassoc'})
def RADD(a, b):
    return a + b
"""


def _carry_clusters(regions, shape, strided, operands):
    """Split accumulation regions ``[(storage, terms)]`` into lists updated together.

    In a flat loop, float regions of one buffer whose offsets are a few elements apart
    and whose union is contiguous form one cluster (updated through carried registers);
    every other region is a cluster of its own.
    """
    n = int(np.prod(shape, dtype=np.int64))
    if strided or not shape or n == 0:
        return [[r] for r in regions]
    out, pool = [], {}
    for r in regions:
        s = r[0]
        if s.dtype.kind == 'f':
            pool.setdefault((s.slot, s.dtype), []).append(r)
        else:
            out.append([r])
    for (slot, dtype), rs in pool.items():
        rs.sort(key=lambda r: r[0].off)
        runs = [[rs[0]]]
        for r in rs[1:]:
            first, last = runs[-1][0][0].off, runs[-1][-1][0].off
            if r[0].off - last <= n and r[0].off - first <= MAX_CARRY:
                runs[-1].append(r)
            else:
                runs.append([r])
        for run in runs:
            lo, hi = run[0][0].off, run[-1][0].off + n
            if len(run) > 1 and any(                 # the buffer is also read or written
                    s.kind == 'mem' and s.slot == slot and s.dtype == dtype and
                    s.span()[0] < hi and s.span()[1] >= lo for _, s, _ in operands):
                out.extend([r] for r in run)
            else:
                out.append(run)
    return out


def _const_tok(v, ext_operand):
    s = Storage('const', np.asarray(v).dtype, value=np.asarray(v)[()])
    return ext_operand(('c', id(v), repr(v)), s)


def _expr(ins, toks, ext_operand, ctx, lines_pre, params):
    name = ins.name
    toks = [t if isinstance(t, str) else _const_tok(t, ext_operand) for t in toks]
    if name == 'np.power':
        e = ins.args[1]
        if type(e) is not Ref:
            form = _pow_template(np.asarray(e)[()])
            if form is not None:
                return form.format(toks[0])
        return f'np.power({toks[0]}, {toks[1]})'
    if name == 'astype':
        code = _code(ins.dtype)
        return {'F': 'np.float64({0})', 'I': 'np.int64({0})', 'B': '({0} != 0)'}[code].format(toks[0])
    if name == 'np.clip':
        x, lo, hi = toks
        out = x
        if ins.args[1] is not None:
            out = f'np.maximum({out}, {lo})'
        if ins.args[2] is not None:
            out = f'np.minimum({out}, {hi})'
        return out
    return EW[name].format(*toks)


def ew_supported(ins, storages):
    """Whether ``ins`` can be a fused elementwise instruction."""
    name = ins.name
    if name not in EW and name not in ('np.power', 'astype', 'np.clip'):
        return False
    if ins.kwargs:
        return False
    if _code(ins.dtype) is None or len(ins.shape) > MAX_NDIM:
        return False
    if ins.dtype.kind == 'b' and name not in _BOOL_OK:
        return False
    if name == 'np.power' and ins.dtype.kind != 'f':
        return False
    args = ins.args
    n = _ARITY.get(name)
    if name == 'astype':
        args = args[:1]
    elif name == 'np.clip':
        if len(args) != 3:
            return False
        args = [a for a in args if a is not None]
    elif n is not None and len(args) != n:
        return False
    for a in args:
        if type(a) is Ref:
            s = storages[a.i]
            if s is None or _code(s.dtype) is None:
                return False
            if len(s.shape) > len(ins.shape):
                return False
        elif not _is_scalar_const(a):
            if isinstance(a, np.ndarray) and _code(a.dtype) is not None and a.ndim <= len(ins.shape):
                continue
            return False
    return True


# --------------------------------------------------------------------------
# Other kernels
# --------------------------------------------------------------------------

def reduce_kernel(op, ndim, dtype_in, dtype_out):
    arrays = [_code(dtype_in), _code(dtype_out)]
    L = []
    for d in range(ndim):
        L.append(f'n{d} = T[p + {d}]')
    q = ndim
    L.append(f'fa = T[p + {q}]')
    for d in range(ndim):
        L.append(f'sa{d} = T[p + {q + 1 + d}]')
    q += 1 + ndim
    L.append(f'fo = T[p + {q}]')
    for d in range(ndim):
        L.append(f'so{d} = T[p + {q + 1 + d}]')
    q += 1 + ndim
    L.append(f'm = T[p + {q}]')
    L.append(f'cnt = T[p + {q + 1}]')
    init = {'sum': '0', 'mean': '0', 'max': '-np.inf', 'min': 'np.inf'}[op]
    if np.dtype(dtype_out).kind == 'f' and op in ('sum', 'mean'):
        init = '0.0'
    L.append('for j in range(m):')
    L.append(f'    a1[U(fo + j)] = {init}')
    ia = 'U(fa' + ''.join(f' + i{d} * sa{d}' for d in range(ndim)) + ')'
    io = 'U(fo' + ''.join(f' + i{d} * so{d}' for d in range(ndim)) + ')'
    for d in range(ndim):
        L.append('    ' * d + f'for i{d} in range(n{d}):')
    ind = '    ' * ndim
    if op in ('sum', 'mean'):
        L.append(ind + f'a1[{io}] += a0[{ia}]')
    else:
        cmp = '>' if op == 'max' else '<'
        L.append(ind + f'v = a0[{ia}]')
        L.append(ind + f'if v {cmp} a1[{io}] or v != v:')
        L.append(ind + f'    a1[{io}] = v')
    if op == 'mean':
        L.append('for j in range(m):')
        L.append('    a1[U(fo + j)] /= cnt')
    return Kernel(L, arrays, reassoc=op in ('sum', 'mean'))


def matmul_kernel(variant):
    """variant: 'loop', 'mv' (n == 1), or 'blas' + transposition flags 'NN', 'TN', ..."""
    arrays = ['F', 'F', 'F']
    L = ['m = T[p]', 'k = T[p + 1]', 'n = T[p + 2]',
         'fa = T[p + 3]', 'sa0 = T[p + 4]', 'sa1 = T[p + 5]',
         'fb = T[p + 6]', 'sb0 = T[p + 7]', 'sb1 = T[p + 8]', 'fo = T[p + 9]']
    if variant == 'mvc':           # rows of A and b contiguous: slices, vectorisable
        L += ['vb = a1[fb:fb + k]',
              'for i in range(m):',
              '    ra = a0[fa + i * sa0:fa + i * sa0 + k]',
              '    acc = 0.0',
              '    for l in range(k):',
              '        acc += ra[l] * vb[l]',
              '    a2[U(fo + i)] = acc']
    elif variant == 'dotc':        # rows of A and columns of B contiguous
        L += ['for i in range(m):',
              '    ra = a0[fa + i * sa0:fa + i * sa0 + k]',
              '    for j in range(n):',
              '        cb = a1[fb + j * sb1:fb + j * sb1 + k]',
              '        acc = 0.0',
              '        for l in range(k):',
              '            acc += ra[l] * cb[l]',
              '        a2[U(fo + i * n + j)] = acc']
    elif variant == 'loopc':       # rows of B contiguous: axpy on rows
        L += ['for i in range(m):',
              '    ro = a2[fo + i * n:fo + i * n + n]',
              '    for j in range(n):',
              '        ro[j] = 0.0',
              '    for l in range(k):',
              '        av = a0[U(fa + i * sa0 + l * sa1)]',
              '        rb = a1[fb + l * sb0:fb + l * sb0 + n]',
              '        for j in range(n):',
              '            ro[j] += av * rb[j]']
    elif variant == 'mv':
        L += ['for i in range(m):',
              '    acc = 0.0',
              '    for l in range(k):',
              '        acc += a0[U(fa + i * sa0 + l * sa1)] * a1[U(fb + l * sb0)]',
              '    a2[U(fo + i)] = acc']
    elif variant == 'loop':
        L += ['for i in range(m):',
              '    for j in range(n):',
              '        a2[U(fo + i * n + j)] = 0.0',
              '    for l in range(k):',
              '        av = a0[U(fa + i * sa0 + l * sa1)]',
              '        for j in range(n):',
              '            a2[U(fo + i * n + j)] += av * a1[U(fb + l * sb0 + j * sb1)]']
    else:
        ta, tb = variant[4], variant[5]
        L.append('A = a0[fa:fa + m * k].reshape((k, m)).T' if ta == 'T'
                 else 'A = a0[fa:fa + m * k].reshape((m, k))')
        L.append('B = a1[fb:fb + k * n].reshape((n, k)).T' if tb == 'T'
                 else 'B = a1[fb:fb + k * n].reshape((k, n))')
        L.append('np.dot(A, B, a2[fo:fo + m * n].reshape((m, n)))')
    return Kernel(L, arrays, reassoc=True)


def fill_kernel(code):
    return Kernel(['v = C[T[p]]', 'fo = T[p + 1]', 'm = T[p + 2]',
                   'for j in range(m):', '    a0[U(fo + j)] = v'], [code])


def guard_kernel(kind, code):
    """Returns True when the guard holds."""
    if kind == 'mask-count':
        L = ['n = T[p]', 'fo = T[p + 1]', 'c = 0',
             'for j in range(n):', '    if a0[U(fo + j)]:', '        c += 1',
             'return c == T[p + 2]']
    elif kind == 'bool':
        L = ['v = a0[U(T[p + 1])]', 'return (v != 0) == (C[T[p + 2]] != 0)']
    else:
        L = ['v = a0[U(T[p + 1])]', 'r = C[T[p + 2]]', 'return v == r or (v != v and r != r)']
    return Kernel(L, [code], returns=True)
