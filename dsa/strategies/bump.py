"""Bump allocation: the baseline every planner must beat.

Buffers are taken in order of allocation (start time; at equal times frees come first). A cursor
hands out the next aligned offset and only moves up; it returns to the base when no buffer is alive,
as in a linear arena reset between independent phases (the bump allocator of Levental's memory
planning survey and TFLite Micro's linear planner, with reset). Fixed buffers keep their offsets and
the cursor's base is the top of the highest fixed buffer, so the plan is always valid.

Its peak is the largest total (plus alignment padding) of the buffers of one busy period, which is at
least the peak of any greedy plan of :mod:`dsa.strategies.greedy` on unaligned problems.

Complexity: O(n log n).
"""
from __future__ import annotations

import numpy as np

from dsa.solution import make_solution

__all__ = ["solve"]


def solve(problem):
    """Plan with a bump pointer that resets whenever nothing is alive."""
    n = len(problem)
    offsets = np.zeros(n, dtype=np.int64)
    fixed = problem.is_fixed
    offsets[fixed] = problem.fixed_offsets[fixed]
    base = int((problem.fixed_offsets[fixed] + problem.sizes[fixed]).max()) if fixed.any() else 0
    rows = np.flatnonzero(~fixed & (problem.sizes > 0))
    m = len(rows)
    # events of the free rows: frees (kind 0) before allocs (kind 1) at equal times, then by row
    times = np.concatenate([problem.ends[rows], problem.starts[rows]])
    kinds = np.r_[np.zeros(m, dtype=np.int64), np.ones(m, dtype=np.int64)]
    which = np.r_[rows, rows]
    events = np.lexsort((which, kinds, times))
    cursor, live = base, 0
    sizes, aligns = problem.sizes, problem.alignments
    for e in events.tolist():
        r = int(which[e])
        if kinds[e] == 0:
            live -= 1
            if live == 0:
                cursor = base
            continue
        a = int(aligns[r])
        off = -(-cursor // a) * a
        offsets[r] = off
        cursor = off + int(sizes[r])
        live += 1
    return make_solution(problem, offsets, strategy="bump")
