"""Address-overlap search between buffers alive at the same time.

It sits below both :mod:`dsa.problem` (whose input check rejects colliding fixed buffers) and
:mod:`dsa.validator`, so neither imports the other for it. It shares no code with any strategy.
"""
from __future__ import annotations

import numpy as np

from dsa._kernels import use_numpy

__all__ = ["find_overlap"]

# Up to this many non-empty rows, the first calls of a process check every pair at once in numpy
# (O(m^2) memory, about a millisecond), which spares a first validation the numba import and kernel
# load. See dsa._kernels.use_numpy.
SMALL_M = 512


def find_overlap(starts, ends, sizes, offsets):
    """Return a pair ``(i, j)`` of rows alive at the same time whose address ranges intersect, or None.

    Zero-size rows never overlap. Complexity O(n log n): three sorts, then a sweep over time with a
    Fenwick tree over offsets (numba, compiled on first use). Up to ``SMALL_M`` non-empty rows, every
    pair is checked at once in numpy instead in the first calls of a process.
    """
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    rows = np.flatnonzero(sizes > 0)
    if len(rows) < 2:
        return None
    if len(rows) != len(sizes):
        starts, ends, sizes, offsets = starts[rows], ends[rows], sizes[rows], offsets[rows]
    tops = offsets + sizes
    if use_numpy("overlap_check", len(rows), SMALL_M + 1):
        clash = ((starts[:, None] < ends[None, :]) & (starts[None, :] < ends[:, None])
                 & (offsets[:, None] < tops[None, :]) & (offsets[None, :] < tops[:, None]))
        np.fill_diagonal(clash, False)
        hits = np.argwhere(clash)
        if len(hits) == 0:
            return None
        i, j = hits[0]
        return int(rows[i]), int(rows[j])
    from dsa._kernels.overlap_check import first_overlap

    i, j = first_overlap(starts, ends, offsets, tops, np.argsort(starts), np.argsort(ends),
                         np.argsort(offsets))
    if i < 0:
        return None
    return int(rows[i]), int(rows[j])
