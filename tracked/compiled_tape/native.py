"""Kernels compiled by LLVM directly: numba's front end skipped, 10-20x sooner.

numba spends 0.15-0.45 s of CPU on one kernel, nearly all of it in its typing and
lowering (Python), and a compile process first pays ~0.9 s to start Python, import
numba and initialise its compiler: a cold ``tr.compile`` of the demo's MLP took 5 s.
Yet the kernels codegen.py and loops.py write are a small language -- flat arrays
read at integer offsets, scalar arithmetic, NumPy's elementwise functions, ``for i in
range(n)``, ``if``, a conditional expression, ``return`` -- so this module
translates that source to LLVM IR itself (``translate``) and has llvmlite optimise
and compile it (``build``: ~20 ms a kernel, with the GIL released, so in a thread
of the user's process).  Machine code is cached on disk like numba's (cache.py: a
folder per kernel with its IR, object code and MANIFEST) and loaded by llvmlite's
MCJIT (``load``).

The translation keeps numba's semantics for what it accepts: numba's scalar
promotion (``float32 op int64`` is float64, ``int / int`` float64), Python's
comparisons (NaN unequal), truth (NaN true), NumPy's ``maximum``/``minimum`` (NaN
propagates), ``fmax``/``fmin`` (NaN ignored), ``sign``, ``logaddexp``; a kernel
compiled with ``reassoc`` gets the fast-math flags numba gives it (``reassoc``,
``contract``), and ``RADD`` accumulations are reassociable as numba's helper is.
Anything else (``//``, ``%``, ``**``, a function not in the tables) raises
``Unsupported``, and that kernel is compiled by numba as before: the choice is made
per kernel, from its source.  The same libm and LLVM intrinsics numba calls are
called, so results agree with numba's kernels to rounding, and a tape's first run
is compared with the NumPy replay before it is used (firstrun.py) either way.

``$TRACKED_NATIVE=0`` compiles every kernel with numba; the default is native on Linux,
where it is tested, and numba elsewhere (``TRACKED_NATIVE=1`` turns native on).

One module, though long: the compiling process (entries.py) runs it by path, without the
package, to build IR into object code, and the symbols ``build`` registers are the
translation's own function tables.
"""
from __future__ import annotations

import ast
import contextlib
import hashlib
import math
import os
import sys
import threading

__all__ = ['Unsupported', 'enabled', 'fingerprint', 'name_of', 'Deferred', 'kernel_name',
           'text', 'translate', 'build', 'load', 'addresses']


class Unsupported(Exception):
    """The kernel uses something ``translate`` does not: numba compiles it."""


def enabled():
    """Whether kernels are compiled by LLVM directly: ``$TRACKED_NATIVE`` '1', or unset on
    Linux (where it is tested; elsewhere numba compiles unless it is set to '1')."""
    flag = os.environ.get('TRACKED_NATIVE')
    if flag is None:
        return sys.platform.startswith('linux')
    return flag != '0'


# -- types ------------------------------------------------------------------------------

_ll = None


def _llvm():
    """llvmlite's ``ir`` module and our IR types (imported on first use)."""
    global _ll
    if _ll is None:
        from llvmlite import ir
        _ll = (ir, {'f64': ir.DoubleType(), 'f32': ir.FloatType(), 'i64': ir.IntType(64),
                    'b': ir.IntType(1)})
    return _ll


ELEMS = {'np.float64': 'f64', 'np.float32': 'f32', 'np.int64': 'i64', 'np.bool_': 'b'}
CASTS = {'np.float64': 'f64', 'float': 'f64', 'np.float32': 'f32', 'np.int64': 'i64',
         'int': 'i64', 'np.bool_': 'b', 'bool': 'b'}
_RANK = {'b': 0, 'i64': 1, 'f32': 2, 'f64': 3}


def _promote(a, b):
    """numba's type of ``a op b`` for scalar kinds (NumPy's scalar rules: int64 with
    float32 is float64; bool with anything is the other)."""
    if a == b:
        return a
    if {a, b} == {'i64', 'f32'}:
        return 'f64'
    return a if _RANK[a] > _RANK[b] else b


# NumPy (and math) names -> (LLVM intrinsic or libm function, arity)
_INTRINSIC = {'sin': 'sin', 'cos': 'cos', 'exp': 'exp', 'exp2': 'exp2', 'log': 'log',
              'log2': 'log2', 'log10': 'log10', 'sqrt': 'sqrt', 'fabs': 'fabs',
              'absolute': 'fabs', 'abs': 'fabs', 'floor': 'floor', 'ceil': 'ceil',
              'trunc': 'trunc', 'rint': 'rint'}
_LIBM = {'tan': 'tan', 'tanh': 'tanh', 'sinh': 'sinh', 'cosh': 'cosh', 'arcsin': 'asin',
         'arccos': 'acos', 'arctan': 'atan', 'arcsinh': 'asinh', 'arccosh': 'acosh',
         'arctanh': 'atanh', 'expm1': 'expm1', 'log1p': 'log1p', 'cbrt': 'cbrt',
         'asin': 'asin', 'acos': 'acos', 'atan': 'atan', 'asinh': 'asinh', 'acosh': 'acosh',
         'atanh': 'atanh', 'erf': 'erf', 'erfc': 'erfc'}
_LIBM2 = {'arctan2': 'atan2', 'atan2': 'atan2', 'hypot': 'hypot', 'fmod': 'fmod'}


# -- translation ---------------------------------------------------------------------------

QUICK = '; tracked: quick\n'     # the first line of a quick translation's IR (``build``)
LARGE = 16384            # elements from which a program's kernels are built in full


def fingerprint():
    """A hash of this module's and pyentry.py's source: a native entry's cache name
    includes it, so a new translator never meets the code an old one made."""
    got = _state.get('fingerprint')
    if got is None:
        h = hashlib.sha1()
        here = os.path.dirname(os.path.abspath(__file__))
        for f in ('native.py', 'pyentry.py'):
            with open(os.path.join(here, f), 'rb') as fh:
                h.update(fh.read())
        got = _state['fingerprint'] = h.hexdigest()
    return got


def name_of(what):
    """The cache name of the native code of ``what`` (a string naming it whole: kernel,
    arrays, options): ``n_<hash>``, the translator's fingerprint included, so a name
    known without translating."""
    return 'n_' + hashlib.sha1(f'{fingerprint()}|{what}'.encode()).hexdigest()[:16]


class Deferred:
    """The IR of a native entry, made only when asked for (``text()``): a warm start
    finds the entry by its name and never translates (~3 ms a kernel)."""

    __slots__ = ('make', '_text')

    def __init__(self, make):
        self.make = make
        self._text = None

    def text(self):
        """The IR, made once."""
        if self._text is None:
            self._text = self.make()
        return self._text


def kernel_name(kernel, quick=False):
    """The cache name of ``kernel``'s native code (``translate``'s name)."""
    return name_of(f'{kernel.name}|quick={quick}')


def text(source):
    """The text of ``source``: a string, or a ``Deferred`` made now."""
    return source if isinstance(source, str) else source.text()


def translate(kernel, quick=False):
    """``(name, LLVM IR text)`` of ``kernel`` (codegen.Kernel): ``name`` is
    ``name_of`` the kernel and ``quick`` (the IR's function is called so);
    ``Unsupported`` if the source steps outside the language above.
    ``quick``: built without loop unrolling and interleaving (a program whose arrays
    are all smaller than ``LARGE`` elements gains nothing from them)."""
    ir, _ = _llvm()
    tree = ast.parse(kernel.source)
    fdef = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == kernel.name:
            fdef = node
        elif isinstance(node, ast.FunctionDef) and node.name == 'RADD':
            continue
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name not in (
                'blas_gemm', 'blas_gemv', '_at', '_scalars'):
            raise Unsupported(f'helper {node.name}')
    if fdef is None:
        raise Unsupported('no kernel function')
    name = kernel_name(kernel, quick)
    module = ir.Module(name=kernel.name)
    _Function(module, fdef, name, kernel.reassoc).emit()
    return name, (QUICK if quick else '') + str(module).replace(
        f'; ModuleID = "{kernel.name}"', '')


class _Function:
    """The translation of one kernel function (``translate``)."""

    def __init__(self, module, fdef, name, reassoc):
        ir, K = _llvm()
        self.ir, self.K, self.module, self.fdef = ir, K, module, fdef
        self.flags = ('reassoc', 'contract') if reassoc else ()
        i8p = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(K['i64'], [i8p.as_pointer(), K['i64'].as_pointer(), K['i64'],
                                          K['f64'].as_pointer()])
        self.fn = ir.Function(module, fnty, name=name)
        self.entry = self.fn.append_basic_block('entry')
        body = self.fn.append_basic_block('body')
        self.b = ir.IRBuilder(body)
        args = dict(zip(('P', 'T_', 'p', 'C_'), self.fn.args))
        self.vars = {}                            # name -> (alloca, kind)
        self.params = {'P': (args['P'], 'voidpp'), 'T_': (args['T_'], ('ptr', 'i64')),
                       'C_': (args['C_'], ('ptr', 'f64'))}
        self._assign('p', args['p'], 'i64')

    # -- storage ------------------------------------------------------------------------
    def _slot(self, kind):
        """An alloca of ``kind`` in the entry block (mem2reg makes it a register)."""
        ir = self.ir
        ty = self._lltype(kind)
        b = ir.IRBuilder(self.entry)
        if self.entry.instructions:
            b.position_before(self.entry.instructions[0])
        return b.alloca(ty)

    def _lltype(self, kind):
        if isinstance(kind, tuple):
            return self._elem(kind[1]).as_pointer()
        return self.K[kind]

    def _elem(self, e):
        return self.ir.IntType(8) if e == 'b' else self.K[e]

    def _assign(self, name, value, kind):
        """Store ``value`` into variable ``name`` (created on first assignment)."""
        if name in self.vars:
            slot, have = self.vars[name]
            if have != kind:
                # numba types a variable by all its assignments (an int later given a
                # float is a float throughout); here the first fixes it: only a value
                # that converts to it without loss is taken
                if isinstance(have, tuple) or isinstance(kind, tuple) or \
                        _promote(have, kind) != have:
                    raise Unsupported(f'{name} changes type')
                value = self._cast(value, kind, have)
        else:
            slot = self._slot(kind)
            self.vars[name] = (slot, kind)
        self.b.store(value, slot)

    # -- statements -------------------------------------------------------------------
    def emit(self):
        """Translate the body; the entry block (allocas) jumps to it."""
        body = self.fdef.body
        if not body or not isinstance(body[-1], ast.Return):
            raise Unsupported('the kernel does not end with return')
        self._block(body)
        if not self.b.block.is_terminated:
            self.b.unreachable()             # after the last return: never reached
        self.ir.IRBuilder(self.entry).branch(self.fn.basic_blocks[1])

    def _block(self, stmts):
        for s in stmts:
            self._stmt(s)

    def _stmt(self, s):
        """Translate one statement."""
        b = self.b
        if isinstance(s, ast.Assign):
            if len(s.targets) != 1:
                raise Unsupported('multiple targets')
            t = s.targets[0]
            if isinstance(t, ast.Name):
                v, k = self._expr(s.value)
                self._assign(t.id, v, k)
            elif isinstance(t, ast.Subscript):
                v, k = self._expr(s.value)
                self._store(t, v, k)
            else:
                raise Unsupported('assignment target')
        elif isinstance(s, ast.AugAssign):
            t = s.target
            if isinstance(t, ast.Name):
                old = self._name(t.id)
                v, k = self._binop(s.op, old, self._expr(s.value))
                self._assign(t.id, v, k)
            elif isinstance(t, ast.Subscript):
                ptr, e = self._address(t)
                old = self._load(ptr, e)
                v, k = self._binop(s.op, old, self._expr(s.value))
                b.store(self._to_mem(self._cast(v, k, e), e), ptr)
            else:
                raise Unsupported('augmented target')
        elif isinstance(s, ast.For):
            self._for(s)
        elif isinstance(s, ast.If):
            self._if(s)
        elif isinstance(s, ast.Return):
            if s.value is None:
                raise Unsupported('bare return')
            v, k = self._expr(s.value)
            b.ret(self._cast(v, k, 'i64'))
            self.b.position_at_end(self.fn.append_basic_block('dead'))
        elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            self._expr(s.value)
        elif isinstance(s, ast.Pass):
            pass
        else:
            raise Unsupported(type(s).__name__)

    def _for(self, s):
        """``for i in range(stop)`` or ``range(start, stop)``."""
        K, b = self.K, self.b
        it = s.iter
        if (s.orelse or not isinstance(s.target, ast.Name) or not isinstance(it, ast.Call)
                or not isinstance(it.func, ast.Name) or it.func.id != 'range'
                or it.keywords or not 1 <= len(it.args) <= 2):
            raise Unsupported('loop form')
        bounds = [self._int(a) for a in it.args]
        start, stop = (K['i64'](0), bounds[0]) if len(bounds) == 1 else bounds
        counter = self._slot('i64')
        b.store(start, counter)
        head = self.fn.append_basic_block('head')
        loop = self.fn.append_basic_block('loop')
        after = self.fn.append_basic_block('after')
        b.branch(head)
        b.position_at_end(head)
        i = b.load(counter)
        b.cbranch(b.icmp_signed('<', i, stop), loop, after)
        b.position_at_end(loop)
        self._assign(s.target.id, i, 'i64')
        self._block(s.body)
        if not b.block.is_terminated:
            b.store(b.add(b.load(counter), K['i64'](1)), counter)
            b.branch(head)
        b.position_at_end(after)

    def _branch(self, test):
        """Branch on the truth of expression ``test``: ``(else block, join block)``, the
        builder at the start of the ``then`` block."""
        cond = self._truth(self._expr(test))
        then, other, after = (self.fn.append_basic_block(n) for n in ('then', 'else', 'join'))
        self.b.cbranch(cond, then, other)
        self.b.position_at_end(then)
        return other, after

    def _if(self, s):
        """``if``/``else``; a branch ending in ``return`` does not jump on."""
        b = self.b
        other, after = self._branch(s.test)
        self._block(s.body)
        if not b.block.is_terminated:
            b.branch(after)
        b.position_at_end(other)
        self._block(s.orelse)
        if not b.block.is_terminated:
            b.branch(after)
        b.position_at_end(after)

    # -- memory -----------------------------------------------------------------------
    def _address(self, sub):
        """The element pointer and element kind of ``array[index]``."""
        base, kind = self._expr(sub.value)
        if not (isinstance(kind, tuple) and kind[0] == 'ptr'):
            raise Unsupported('subscript of a non-array')
        if isinstance(sub.slice, ast.Slice):
            raise Unsupported('slice as element')
        idx = self._int(sub.slice)
        return self.b.gep(base, [idx]), kind[1]

    def _load(self, ptr, e):
        v = self.b.load(ptr)
        if e == 'b':
            return self.b.icmp_unsigned('!=', v, self.ir.IntType(8)(0)), 'b'
        return v, e

    def _to_mem(self, v, e):
        return self.b.zext(v, self.ir.IntType(8)) if e == 'b' else v

    def _store(self, target, v, k):
        ptr, e = self._address(target)
        self.b.store(self._to_mem(self._cast(v, k, e), e), ptr)

    # -- expressions ------------------------------------------------------------------
    def _name(self, name):
        """A variable, a parameter or ``BIG``."""
        if name in self.vars:
            slot, kind = self.vars[name]
            return self.b.load(slot), kind
        if name in self.params:
            return self.params[name]
        if name == 'BIG':
            return self.K['i64'](1 << 50), 'i64'
        raise Unsupported(f'name {name}')

    def _int(self, node):
        """An index or loop bound: int64 (a bool is 0 or 1)."""
        v, k = self._expr(node)
        if k == 'b':
            return self.b.zext(v, self.K['i64'])
        if k != 'i64':
            raise Unsupported('a non-integer index or bound')
        return v

    def _expr(self, e):
        """``(LLVM value, kind)`` of an expression (kind: 'f64', 'f32', 'i64', 'b',
        ('ptr', element kind), 'voidp', 'voidpp')."""
        K, b = self.K, self.b
        if isinstance(e, ast.Constant):
            v = e.value
            if isinstance(v, bool):
                return K['b'](int(v)), 'b'
            if isinstance(v, int):
                return K['i64'](v), 'i64'
            if isinstance(v, float):
                return K['f64'](v), 'f64'
            raise Unsupported('constant')
        if isinstance(e, ast.Name):
            return self._name(e.id)
        if isinstance(e, ast.Attribute):
            full = _dotted(e)
            consts = {'np.inf': math.inf, 'math.inf': math.inf, 'np.nan': math.nan,
                      'math.nan': math.nan, 'np.pi': math.pi, 'math.pi': math.pi,
                      'np.e': math.e, 'math.e': math.e}
            if full in consts:
                return K['f64'](consts[full]), 'f64'
            raise Unsupported(full)
        if isinstance(e, ast.Subscript):
            base, kind = self._expr(e.value)
            if kind == 'voidpp':
                return b.load(b.gep(base, [self._int(e.slice)])), 'voidp'
            if not (isinstance(kind, tuple) and kind[0] == 'ptr'):
                raise Unsupported('subscript')
            if isinstance(e.slice, ast.Slice):
                sl = e.slice
                if sl.step is not None or sl.lower is None:
                    raise Unsupported('slice form')
                return b.gep(base, [self._int(sl.lower)]), kind
            return self._load(b.gep(base, [self._int(e.slice)]), kind[1])
        if isinstance(e, ast.BinOp):
            return self._binop(e.op, self._expr(e.left), self._expr(e.right))
        if isinstance(e, ast.UnaryOp):
            v, k = self._expr(e.operand)
            if isinstance(e.op, ast.USub):
                if k == 'b':
                    v, k = self._cast(v, k, 'i64'), 'i64'
                return (b.fneg(v, flags=self.flags) if k in ('f64', 'f32')
                        else b.neg(v)), k
            if isinstance(e.op, ast.UAdd):
                return v, k
            if isinstance(e.op, ast.Not):
                return b.not_(self._truth((v, k))), 'b'
            if isinstance(e.op, ast.Invert) and k in ('b', 'i64'):
                return b.not_(v), k
            raise Unsupported('unary operator')
        if isinstance(e, ast.Compare):
            if len(e.ops) != 1:
                raise Unsupported('chained comparison')
            return self._compare(e.ops[0], self._expr(e.left), self._expr(e.comparators[0]))
        if isinstance(e, ast.BoolOp):
            vals = [self._expr(x) for x in e.values]
            if any(k != 'b' for _, k in vals):
                raise Unsupported('and/or of non-booleans')
            out = vals[0][0]
            for v, _ in vals[1:]:
                out = b.and_(out, v) if isinstance(e.op, ast.And) else b.or_(out, v)
            return out, 'b'
        if isinstance(e, ast.IfExp):
            return self._ifexp(e)
        if isinstance(e, ast.Call):
            return self._call(e)
        raise Unsupported(type(e).__name__)

    def _ifexp(self, e):
        """``a if c else b``, evaluating only the branch taken (it may read past an array)."""
        b = self.b
        other, after = self._branch(e.test)
        v1, k1 = self._expr(e.body)
        then_end = b.block
        b.position_at_end(other)
        v2, k2 = self._expr(e.orelse)
        if isinstance(k1, tuple) or isinstance(k2, tuple):
            raise Unsupported('conditional array')
        k = _promote(k1, k2)
        v2 = self._cast(v2, k2, k)
        other_end = b.block
        b.branch(after)
        b.position_at_end(then_end)
        v1 = self._cast(v1, k1, k)
        b.branch(after)
        b.position_at_end(after)
        phi = b.phi(self.K[k])
        phi.add_incoming(v1, then_end)
        phi.add_incoming(v2, other_end)
        return phi, k

    def _truth(self, vk):
        """Python's truth of a scalar (NaN is true)."""
        v, k = vk
        b, K = self.b, self.K
        if k == 'b':
            return v
        if k == 'i64':
            return b.icmp_signed('!=', v, K['i64'](0))
        if k in ('f64', 'f32'):
            return b.fcmp_unordered('!=', v, K[k](0.0))
        raise Unsupported('truth of an array')

    def _cast(self, v, k, to):
        """``v`` of kind ``k`` as kind ``to`` (numba's implicit conversions)."""
        if k == to:
            return v
        b, K = self.b, self.K
        if isinstance(k, tuple) or isinstance(to, tuple) or k in ('voidp', 'voidpp'):
            raise Unsupported('cast of a pointer')
        if to == 'b':
            return self._truth((v, k))
        if k == 'b':
            return b.uitofp(v, K[to]) if to in ('f64', 'f32') else b.zext(v, K[to])
        if k == 'i64':
            return b.sitofp(v, K[to])
        if to == 'i64':
            return b.fptosi(v, K['i64'])
        return b.fpext(v, K[to]) if to == 'f64' else b.fptrunc(v, K[to])

    def _binop(self, op, x, y):
        """``x op y`` with numba's promotion; ``//``, ``%`` and ``**`` are not taken."""
        (v1, k1), (v2, k2) = x, y
        b = self.b
        if isinstance(k1, tuple) or isinstance(k2, tuple) or 'voidp' in (k1, k2):
            raise Unsupported('arithmetic on arrays')
        if isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
            k = 'b' if k1 == k2 == 'b' else 'i64'
            if _promote(k1, k2) not in ('b', 'i64'):
                raise Unsupported('bitwise operator on floats')
            v1, v2 = self._cast(v1, k1, k), self._cast(v2, k2, k)
            f = {ast.BitAnd: b.and_, ast.BitOr: b.or_, ast.BitXor: b.xor}[type(op)]
            return f(v1, v2), k
        k = _promote(k1, k2)
        if k == 'b':
            k = 'i64'
        if isinstance(op, ast.Div) and k == 'i64':
            k = 'f64'
        v1, v2 = self._cast(v1, k1, k), self._cast(v2, k2, k)
        if k in ('f64', 'f32'):
            fl = self.flags
            ops = {ast.Add: b.fadd, ast.Sub: b.fsub, ast.Mult: b.fmul, ast.Div: b.fdiv}
            if type(op) not in ops:
                raise Unsupported(type(op).__name__)
            return ops[type(op)](v1, v2, flags=fl), k
        ops = {ast.Add: b.add, ast.Sub: b.sub, ast.Mult: b.mul}
        if type(op) not in ops:
            raise Unsupported(type(op).__name__)
        return ops[type(op)](v1, v2), k

    def _compare(self, op, x, y):
        """One comparison; NaN compares unequal (``!=`` is unordered)."""
        (v1, k1), (v2, k2) = x, y
        if isinstance(k1, tuple) or isinstance(k2, tuple):
            raise Unsupported('comparison of arrays')
        sym = {ast.Eq: '==', ast.NotEq: '!=', ast.Lt: '<', ast.LtE: '<=', ast.Gt: '>',
               ast.GtE: '>='}.get(type(op))
        if sym is None:
            raise Unsupported(type(op).__name__)
        k = _promote(k1, k2)
        if k == 'b':
            k = 'i64'
        v1, v2 = self._cast(v1, k1, k), self._cast(v2, k2, k)
        b = self.b
        if k == 'i64':
            return b.icmp_signed(sym, v1, v2), 'b'
        if sym == '!=':
            return b.fcmp_unordered('!=', v1, v2), 'b'
        return b.fcmp_ordered(sym, v1, v2), 'b'

    # -- calls --------------------------------------------------------------------------
    def _call(self, e):
        """A call: ``carray``, ``U``, a cast, ``RADD``, BLAS, a NumPy or math function."""
        if e.keywords:
            raise Unsupported('keyword arguments')
        f = _dotted(e.func)
        b = self.b
        if f == 'carray':
            return self._carray(e)
        if f == 'U':
            return self._int(e.args[0]), 'i64'
        if f in CASTS and len(e.args) == 1:
            v, k = self._expr(e.args[0])
            return self._cast(v, k, CASTS[f]), CASTS[f]
        if f == 'RADD':
            (v1, k1), (v2, k2) = (self._expr(a) for a in e.args)
            k = _promote(k1, k2)
            if k not in ('f64', 'f32'):
                return self._binop(ast.Add(), (v1, k1), (v2, k2))
            return b.fadd(self._cast(v1, k1, k), self._cast(v2, k2, k),
                          flags=('reassoc',)), k
        if f in ('blas_gemm', 'blas_gemv'):
            return self._blas(f, e.args)
        if f == 'abs':
            f = 'np.abs'
        mod, _, fn = f.partition('.')
        if mod not in ('np', 'math') or not fn:
            raise Unsupported(f'call of {f}')
        args = [self._expr(a) for a in e.args]
        if any(isinstance(k, tuple) or k in ('voidp', 'voidpp') for _, k in args):
            raise Unsupported('a function of an array')
        return self._math(fn, args)

    def _carray(self, e):
        """``carray(pointer, (BIG,), dtype)``: the pointer as an array of ``dtype``."""
        if len(e.args) not in (2, 3):
            raise Unsupported('carray form')
        v, k = self._expr(e.args[0])
        if len(e.args) == 2:
            if not (isinstance(k, tuple) and k[0] == 'ptr'):
                raise Unsupported('carray of a pointer without dtype')
            return v, k
        dt = _dotted(e.args[2])
        if k != 'voidp' or dt not in ELEMS:
            raise Unsupported('carray form')
        elem = ELEMS[dt]
        return self.b.bitcast(v, self._elem(elem).as_pointer()), ('ptr', elem)

    def _declare(self, name, k, n):
        """The declaration of function ``name`` of ``n`` arguments of kind ``k``."""
        ir = self.ir
        ty = self.K[k]
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ty, [ty] * n), name=name)
        return fn

    def _intrinsic(self, base, k, n=1):
        return self._declare(f'llvm.{base}.{"f64" if k == "f64" else "f32"}', k, n)

    def _libm(self, base, k, n=1):
        return self._declare(base if k == 'f64' else base + 'f', k, n)

    def _math(self, fn, args):
        """A NumPy (or math) function of one or two scalars, with NumPy's special values."""
        b, K = self.b, self.K
        if len(args) == 1:
            (v, k), = args
            if fn in ('abs', 'absolute', 'fabs') and k in ('i64', 'b'):
                if fn == 'fabs':
                    v, k = self._cast(v, k, 'f64'), 'f64'
                else:
                    v = self._cast(v, k, 'i64')
                    return b.select(b.icmp_signed('<', v, K['i64'](0)), b.neg(v), v), 'i64'
            if fn == 'sign':
                if k in ('i64', 'b'):
                    v = self._cast(v, k, 'i64')
                    one, zero = K['i64'](1), K['i64'](0)
                    pos = b.select(b.icmp_signed('>', v, zero), one, zero)
                    return b.select(b.icmp_signed('<', v, zero), K['i64'](-1), pos), 'i64'
                one, zero = K[k](1.0), K[k](0.0)         # zeros and NaN: themselves
                r = b.select(b.fcmp_ordered('<', v, zero), K[k](-1.0), v)
                return b.select(b.fcmp_ordered('>', v, zero), one, r), k
            if fn in ('isnan', 'isinf', 'isfinite'):
                if k not in ('f64', 'f32'):
                    return K['b'](int(fn == 'isfinite')), 'b'
                if fn == 'isnan':
                    return b.fcmp_unordered('uno', v, v), 'b'
                a = b.call(self._intrinsic('fabs', k), [v])
                if fn == 'isinf':
                    return b.fcmp_ordered('==', a, K[k](math.inf)), 'b'
                return b.fcmp_ordered('<', a, K[k](math.inf)), 'b'
            if k in ('i64', 'b'):
                v, k = self._cast(v, k, 'f64'), 'f64'
            if fn in _INTRINSIC:
                return b.call(self._intrinsic(_INTRINSIC[fn], k), [v]), k
            if fn in _LIBM:
                return b.call(self._libm(_LIBM[fn], k), [v]), k
            fl = self.flags
            if fn in ('rad2deg', 'degrees'):
                return b.fmul(v, K[k](180.0 / math.pi), flags=fl), k
            if fn in ('deg2rad', 'radians'):
                return b.fmul(v, K[k](math.pi / 180.0), flags=fl), k
            if fn == 'square':
                return b.fmul(v, v, flags=fl), k
            if fn == 'negative':
                return b.fneg(v, flags=fl), k
            if fn == 'positive':
                return v, k
            raise Unsupported(f'np.{fn}')
        if len(args) != 2:
            raise Unsupported(f'np.{fn} of {len(args)} arguments')
        (v1, k1), (v2, k2) = args
        k = _promote(k1, k2)
        if fn in ('maximum', 'minimum') and k in ('i64', 'b'):
            k = 'i64' if k == 'b' and 'b' not in (k1, k2) else k
            v1, v2 = self._cast(v1, k1, k), self._cast(v2, k2, k)
            if k == 'b':
                return (b.or_(v1, v2) if fn == 'maximum' else b.and_(v1, v2)), 'b'
            sym = '>=' if fn == 'maximum' else '<='
            return b.select(b.icmp_signed(sym, v1, v2), v1, v2), k
        if k in ('i64', 'b'):
            k = 'f64'
        v1, v2 = self._cast(v1, k1, k), self._cast(v2, k2, k)
        if fn in ('maximum', 'minimum'):
            sym = '>=' if fn == 'maximum' else '<='
            r = b.select(b.fcmp_ordered(sym, v1, v2), v1, v2)
            r = b.select(b.fcmp_unordered('uno', v2, v2), v2, r)
            return b.select(b.fcmp_unordered('uno', v1, v1), v1, r), k
        if fn in ('fmax', 'fmin'):
            return b.call(self._intrinsic('maxnum' if fn == 'fmax' else 'minnum', k, 2),
                          [v1, v2]), k
        if fn in ('power', 'pow'):
            return b.call(self._intrinsic('pow', k, 2), [v1, v2]), k
        if fn == 'copysign':
            return b.call(self._intrinsic('copysign', k, 2), [v1, v2]), k
        if fn in _LIBM2:
            return b.call(self._libm(_LIBM2[fn], k, 2), [v1, v2]), k
        if fn in ('logaddexp', 'logaddexp2'):
            return self._logaddexp(v1, v2, k, fn == 'logaddexp2'), k
        raise Unsupported(f'np.{fn}')

    def _logaddexp(self, x, y, k, base2):
        """NumPy's ``npy_logaddexp`` (``2``): equal arguments (infinities) add log 2."""
        b, K = self.b, self.K
        ln2 = math.log(2)
        if base2:
            def tail(t):                 # log2(1 + 2**t)
                e = b.call(self._intrinsic('exp2', k), [t])
                return b.fmul(b.call(self._libm('log1p', k), [e]), K[k](1 / ln2))
            same = b.fadd(x, K[k](1.0))
        else:
            def tail(t):
                e = b.call(self._intrinsic('exp', k), [t])
                return b.call(self._libm('log1p', k), [e])
            same = b.fadd(x, K[k](ln2))
        d = b.fsub(x, y)
        # x + tail(-d) if d > 0, y + tail(d) if d <= 0: one tail of the larger argument
        up = b.fcmp_ordered('>', d, K[k](0.0))
        r = b.fadd(b.select(up, x, y), tail(b.select(up, b.fneg(d), d)))
        r = b.select(b.fcmp_unordered('uno', d, d), d, r)
        return b.select(b.fcmp_ordered('==', x, y), same, r)

    def _blas(self, f, args):
        """A call of numba's ``numba_xxgemm``/``numba_xxgemv`` at the address its first
        argument holds (codegen._BLAS: the same calls)."""
        ir, K, b = self.ir, self.K, self.b
        i8, i32, i64 = ir.IntType(8), ir.IntType(32), K['i64']
        ptr = i8.as_pointer()
        vals = [self._expr(a) for a in args]
        fnptr = self._cast(vals[0][0], vals[0][1], 'i64')

        def at(arr, off):
            v, k = arr
            if not (isinstance(k, tuple) and k[0] == 'ptr'):
                raise Unsupported('BLAS operand')
            return b.bitcast(b.gep(v, [self._cast(off[0], off[1], 'i64')]), ptr), k[1]

        def scalars(elem):
            one, zero = self._slot(elem), self._slot(elem)
            b.store(K[elem](1.0), one)
            b.store(K[elem](0.0), zero)
            return b.bitcast(one, ptr), b.bitcast(zero, ptr)

        def ints(vs):
            return [self._cast(v, k, 'i64') for v, k in vs]

        if f == 'blas_gemm':
            kind, ta, tb = (b.trunc(v, i8) for v in ints(vals[1:4]))
            m, n, kk = ints(vals[4:7])
            A, elem = at(vals[7], vals[8])
            B, _ = at(vals[10], vals[11])
            C, _ = at(vals[13], vals[14])
            lda, ldb, ldc = ints([vals[9], vals[12], vals[15]])
            one, zero = scalars(elem)
            fnty = ir.FunctionType(i32, [i8, i8, i8, i64, i64, i64, ptr, ptr, i64, ptr, i64,
                                         ptr, ptr, i64])
            b.call(b.inttoptr(fnptr, fnty.as_pointer()),
                   [kind, ta, tb, m, n, kk, one, A, lda, B, ldb, zero, C, ldc])
        else:
            kind, trans = (b.trunc(v, i8) for v in ints(vals[1:3]))
            m, n = ints(vals[3:5])
            A, elem = at(vals[5], vals[6])
            lda, = ints([vals[7]])
            X, _ = at(vals[8], vals[9])
            Y, _ = at(vals[10], vals[11])
            one, zero = scalars(elem)
            fnty = ir.FunctionType(i32, [i8, i8, i64, i64, ptr, ptr, i64, ptr, ptr, ptr])
            b.call(b.inttoptr(fnptr, fnty.as_pointer()),
                   [kind, trans, m, n, one, A, lda, X, zero, Y])
        return K['i64'](0), 'i64'


def _dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return _dotted(node.value) + '.' + node.attr
    raise Unsupported('callee')


# -- compiling and loading --------------------------------------------------------------

_state: dict = {}
# LLVM jobs run in any thread (the tiering threads, native_ops's), each parsing into an
# LLVM context of its own and with a target machine of its own, never llvmlite's global
# context, which numba compiles in from other threads.  At exit, ``_close`` waits for
# the jobs in flight and lets no other start: LLVM working in a daemon thread while the
# interpreter finalised aborted the process (an assertion in LLVM, or a segfault) in a
# script that exited within a second of its first gradient.
_jobs = threading.Condition()
_init = threading.Lock()


@contextlib.contextmanager
def _job():
    """Count one LLVM job in flight; RuntimeError once the interpreter is exiting."""
    with _jobs:
        if _state.get('closed'):
            raise RuntimeError('the interpreter is exiting: no native build now')
        _state['active'] = _state.get('active', 0) + 1
    try:
        yield
    finally:
        with _jobs:
            _state['active'] -= 1
            _jobs.notify_all()


def _close():
    with _jobs:
        _state['closed'] = True
        _jobs.wait_for(lambda: not _state.get('active'), timeout=30)


def _machine(opt=3):
    """llvmlite's binding and a new target machine for this CPU (numba's settings: the
    host's CPU name and features, optimisation level 3 unless ``opt``): one per job, as
    an execution engine owns the one it is given."""
    with _init:
        if 'llvm' not in _state:
            import atexit

            import llvmlite.binding as llvm
            atexit.register(_close)
            # numba initialises LLVM on import; this is the same call, idempotent
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _register_symbols(llvm)
            _state.update(llvm=llvm, target=llvm.Target.from_default_triple(),
                          cpu=(llvm.get_host_cpu_name(),
                               llvm.get_host_cpu_features().flatten()))
    llvm = _state['llvm']
    cpu, features = _state['cpu']
    tm = _state['target'].create_target_machine(cpu=cpu, features=features, opt=opt, jit=True)
    return llvm, tm


# what native code calls by name: CPython's API (pyentry.py) and the C math library
PYTHON_API = ('PyLong_FromLongLong', 'PyEval_SaveThread', 'PyEval_RestoreThread',
              'PyType_IsSubtype', 'PyErr_SetString',
              # tracked/native_ops.py's methods
              'PyDict_GetItem', 'PyObject_VectorcallDict', 'PyType_GenericAlloc', 'PyTuple_Pack',
              'PyIter_Next', 'Py_IncRef', 'Py_DecRef', 'PyLong_AsLongLong', 'PyObject_GetAttr',
              'PyDict_New', 'PyDict_SetItem', 'PyUnicode_Compare',
              # tracked/native_backward.py's sweep
              'PyDict_DelItem', 'PySet_Contains', 'PySet_Add', 'PySet_Discard', 'PySet_Size',
              'PyLong_FromVoidPtr', 'PyNumber_Multiply', 'PyNumber_Negative', 'PyList_Append',
              'PyList_SetItem', 'PyList_Size', 'PyList_GetItem', 'PyDict_Size',
              'PyErr_SetString')


def _register_symbols(llvm):
    """Tell LLVM where the functions native code calls are, from the ones this process
    loaded, so that linking never depends on the platform's symbol search (an unresolved
    symbol aborts the process inside LLVM)."""
    import ctypes
    import ctypes.util
    for name in PYTHON_API:
        llvm.add_symbol(name, ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value)
    path = ctypes.util.find_library('m')
    libm = ctypes.CDLL(path) if path else None
    # libm's functions and those LLVM's intrinsics may become calls of
    names = {*_LIBM.values(), *_LIBM2.values(), *_INTRINSIC.values(), 'pow', 'fmax', 'fmin',
             'copysign'}
    for base in names:
        for name in (base, base + 'f'):
            if libm is not None and llvm.address_of_symbol(name) is None:
                fn = getattr(libm, name, None)
                if fn is not None:
                    llvm.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)


def build(ir, optimise=True):
    """Object code of the LLVM IR ``ir``, optimised as numba optimises (O3, loop
    vectorisation, for this CPU; a ``quick`` translation without unrolling and
    interleaving), or not at all (native_ops's calls of CPython's API: 30 ms instead of
    0.3 s, and llvmlite runs one LLVM call at a time in a process, so the kernels of a
    tape compiling meanwhile waited for it).  llvmlite releases the GIL while LLVM works."""
    with _job():
        llvm, tm = _machine(3 if optimise else 0)
        mod = llvm.parse_assembly(ir, context=llvm.create_context())
        mod.triple = tm.triple
        mod.data_layout = str(tm.target_data)
        mod.verify()
        if not optimise:
            return tm.emit_object(mod)
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pto.loop_vectorization = pto.slp_vectorization = True
        # unrolled and interleaved vector loops: a third of the build time, and 15% on a
        # loop over 1e5 elements (W3), nothing measurable on the small workloads
        pto.loop_unrolling = pto.loop_interleaving = not ir.startswith(QUICK)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        return tm.emit_object(mod)


def load(name, obj):
    """Load object code ``obj`` into this process; the address of its function
    ``name``.  Each load has an execution engine of its own (kept for the process's
    life: kernels are never unloaded), so loading an entry again -- a test's new
    "process", a rebuilt entry -- never meets a symbol already defined."""
    return addresses(obj, [name])[name]


def addresses(obj, names):
    """``load`` for several functions of one object: ``{name: address}``."""
    with _job():
        llvm, tm = _machine()
        # (the engine keeps its module, which keeps its context)
        ee = llvm.create_mcjit_compiler(llvm.parse_assembly('', context=llvm.create_context()),
                                        tm)
        ee.add_object_file(llvm.ObjectFileRef.from_data(obj))
        ee.finalize_object()
        out = {name: ee.get_function_address(name) for name in names}
        missing = [name for name, addr in out.items() if not addr]
        if missing:
            raise RuntimeError(f'{missing} not in the object code loaded for them')
        _state.setdefault('engines', []).append(ee)
    return out
