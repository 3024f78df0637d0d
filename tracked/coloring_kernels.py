"""The greedy colourings' loops, compiled with numba (imported by tracked.colorings when a
colouring is computed: ``import tracked`` does not import numba)."""
from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

@njit(cache=True, nogil=True)
def distance2_degrees(ptr: Any, idx: Any, tptr: Any, tidx: Any) -> Any:   # pragma: no cover
    """Per column, the other columns it shares a row with (``ptr``/``idx``: rows,
    ``tptr``/``tidx``: columns of the pattern)."""
    n = len(tptr) - 1
    deg = np.zeros(n, np.int64)
    mark = np.full(n, -1, np.int64)
    for j in range(n):
        for a in range(tptr[j], tptr[j + 1]):
            i = tidx[a]
            for b in range(ptr[i], ptr[i + 1]):
                k = idx[b]
                if k != j and mark[k] != j:
                    mark[k] = j
                    deg[j] += 1
    return deg


@njit(cache=True, nogil=True)
def distance2_colors(ptr: Any, idx: Any, tptr: Any, tidx: Any,
                      order: Any) -> Any:                                  # pragma: no cover
    """Columns coloured so that no two of one colour share a row."""
    n = len(tptr) - 1
    color = np.full(n, -1, np.int64)
    forbidden = np.full(n + 1, -1, np.int64)      # forbidden[c] == j: c is taken near j
    for j in order:
        for a in range(tptr[j], tptr[j + 1]):
            i = tidx[a]
            for b in range(ptr[i], ptr[i + 1]):
                c = color[idx[b]]
                if c >= 0:
                    forbidden[c] = j
        c = 0
        while forbidden[c] == j:
            c += 1
        color[j] = c
    return color


@njit(cache=True, nogil=True)
def star_colors(ptr: Any, idx: Any, order: Any) -> Any:                   # pragma: no cover
    """A symmetric pattern's vertices (off-diagonal adjacency ``ptr``/``idx``) coloured
    so that every edge between coloured vertices stays readable: (v, w) from v's row
    (w alone of its colour among v's neighbours) or from w's row."""
    n = len(ptr) - 1
    color = np.full(n, -1, np.int64)
    forbidden = np.full(n + 1, -1, np.int64)
    around = np.zeros(n + 1, np.int64)            # colours among v's coloured neighbours
    for v in order:
        for a in range(ptr[v], ptr[v + 1]):
            c = color[idx[a]]
            if c >= 0:
                forbidden[c] = v
                around[c] += 1
        for a in range(ptr[v], ptr[v + 1]):
            w = idx[a]
            cw = color[w]
            if cw < 0:
                continue
            if around[cw] > 1:
                # (v, w) is not readable from v's row: v must be alone of its colour
                # among w's neighbours
                for b in range(ptr[w], ptr[w + 1]):
                    cx = color[idx[b]]
                    if cx >= 0:
                        forbidden[cx] = v
            for b in range(ptr[w], ptr[w + 1]):
                x = idx[b]
                cx = color[x]
                if x == v or cx < 0 or forbidden[cx] == v:
                    continue
                # v taking x's colour puts it twice in w's row: (w, x) must then be
                # readable from x's row, where w must be alone of its colour
                same = 0
                for e in range(ptr[x], ptr[x + 1]):
                    if color[idx[e]] == cw:
                        same += 1
                if same > 1:
                    forbidden[cx] = v
        for a in range(ptr[v], ptr[v + 1]):
            c = color[idx[a]]
            if c >= 0:
                around[c] = 0
        c = 0
        while forbidden[c] == v:
            c += 1
        color[v] = c
    return color


