"""The fused loop generator (loops.py) on its own: a Loop of operand storages and scalar
templates becomes a numba kernel that reads its sizes and offsets from ``T``."""
import numpy as np

from tracked.compiled_tape.buffers import Storage
from tracked.compiled_tape.codegen import Constants
from tracked.compiled_tape.loops import Loop, loop_kernel, map_loop
from tracked.compiled_tape.vm import run_kernel


def _run(loop, arrays):
    """Compile ``loop`` and run it on ``arrays`` (one per kernel parameter)."""
    constants = Constants()
    kernel, slots, params = loop_kernel(loop, constants)
    run_kernel(kernel, arrays, params, constants.values)
    return kernel, slots


def test_a_loop_reads_operands_and_writes_stores_and_sums():
    a = np.zeros(10)
    a[:4] = [1.0, 2.0, 3.0, 4.0]
    x = Storage('mem', np.float64, 0, 0, (4,))
    scale = Storage('const', np.float64, value=np.float64(2.5))
    y, total = Storage('mem', np.float64, 0, 4, (4,)), Storage('mem', np.float64, 0, 9, ())
    loop = Loop((4,), [x, scale], [('({0} * {1})', [('x', 0), ('x', 1)]),
                                   ('np.sin({0})', [('t', 0)])],
                stores=[(1, y)], sums=[(0, 'mean', total)])
    kernel, slots = _run(loop, [a, a, a])
    assert slots == [0, 0, 0] and kernel.arrays == ('F', 'F', 'F')
    assert 't1 = np.sin(t0)' in kernel.source and 'for i in range(n):' in kernel.source
    np.testing.assert_allclose(a[4:8], np.sin(2.5 * np.arange(1.0, 5.0)), rtol=1e-15)
    assert a[9] == 2.5 * 10 / 4


def test_a_strided_copy_is_a_loop_nest():
    src = np.arange(12.0)
    dst = np.zeros(6)
    # the transpose of a 3 x 2 block of a 3 x 4 array, into a contiguous 2 x 3
    loop = map_loop('{0}', [Storage('mem', np.float64, 1, 1, (2, 3), (1, 4))],
                    Storage('mem', np.float64, 2, 0, (2, 3)))
    kernel, slots = _run(loop, [src, dst])
    assert slots == [1, 2] and 'for i1 in range(n1):' in kernel.source
    np.testing.assert_array_equal(dst.reshape(2, 3), src.reshape(3, 4)[:, 1:3].T)
