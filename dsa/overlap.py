"""Address-overlap search between buffers alive at the same time.

It sits below both :mod:`dsa.problem` (whose input check rejects colliding fixed buffers) and
:mod:`dsa.validator`, so neither imports the other for it. It shares no code with any strategy.
"""
from __future__ import annotations

from bisect import bisect_left

import numpy as np

from dsa import _kernels
from dsa._kernels import numba_loaded, use_numpy

__all__ = ["find_overlap"]

# Up to this many non-empty rows, the first calls of a process that has loaded numba but not the
# overlap kernel check the plan by the plain-Python sweep below, which spares a first validation the
# kernel's load. See dsa._kernels.use_numpy. (The sweep replaced an all-pairs numpy check here: on
# 390 rows it takes 0.14 ms and 59 KiB where the all-pairs check took 0.66 ms and 445 KiB.)
SMALL_M = 512
# While numba is not loaded in the process, plans are checked by the sweep (about 5 ms per 10k rows
# when few are alive at once, close to the kernel's time with its sorts) rather than by loading
# numba for the check alone: a process that only validates plans made elsewhere (the torch
# adapter's, planned in a helper process) then never pays numba's ~100 MB. The sweep moves up to k
# list items per row (k: rows alive at once), so it is used only while rows x k stays below this
# (at the limit, about 0.1 s in the worst order; 100k rows all alive at once take 0.8 s).
SWEEP_WORK = 1_000_000_000


def find_overlap(starts, ends, sizes, offsets):
    """Return a pair ``(i, j)`` of rows alive at the same time whose address ranges intersect, or None.

    Zero-size rows never overlap. Complexity O(n log n): three sorts, then a sweep over time with a
    Fenwick tree over offsets (numba, compiled on first use). A process that has not loaded numba
    sweeps in plain Python instead (:func:`_sweep_overlap`), unless rows x (rows alive at once)
    exceeds ``SWEEP_WORK``; so do the first calls of a process on up to ``SMALL_M`` non-empty rows.
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
    force = _kernels.FORCE  # tests: "sweep" (or "numpy", the stand-in's name elsewhere) or "kernel"
    if force in ("sweep", "numpy") or (force is None and (
            not numba_loaded() or use_numpy("overlap_check", len(rows), SMALL_M + 1))):
        order, alive = _events(starts, ends)
        if force is not None or len(rows) * alive <= SWEEP_WORK:
            pair = _sweep_overlap(starts, offsets, tops, order)
            return None if pair is None else (int(rows[pair[0]]), int(rows[pair[1]]))
    from dsa._kernels.overlap_check import first_overlap

    i, j = first_overlap(starts, ends, offsets, tops, np.argsort(starts), np.argsort(ends),
                         np.argsort(offsets))
    if i < 0:
        return None
    return int(rows[i]), int(rows[j])


def _events(starts, ends):
    """Event order of a sweep over time (index ``i < n``: end of row i, ``n + i``: its start; ends
    first at equal times, lifetimes being half-open) and the most rows alive at once."""
    n = len(starts)
    times = np.concatenate([ends, starts])
    kinds = np.concatenate([np.zeros(n, np.int8), np.ones(n, np.int8)])  # 0 end, 1 start
    order = np.lexsort((kinds, times))
    alive = int(np.cumsum(np.where(order < n, -1, 1)).max()) if n else 0
    return order, alive


def _sweep_overlap(starts, offsets, tops, order):
    """:func:`find_overlap` on non-empty rows by a sweep over time in plain Python, O(n log n + n k).

    ``order`` comes from :func:`_events`. The rows alive are kept in a list sorted by
    ``(offset, row)``; they never overlap one another (each was checked when it arrived), so an
    arriving row can only collide with its two neighbours in that list. ``k`` is the number of rows
    alive at once (list insertion and removal move them).
    """
    n = len(starts)
    off = offsets.tolist()
    top = tops.tolist()
    live: list[tuple[int, int]] = []
    for event in order.tolist():
        if event < n:  # the end of row ``event``
            key = (off[event], event)
            del live[bisect_left(live, key)]
            continue
        row = event - n
        key = (off[row], row)
        at = bisect_left(live, key)
        if at > 0 and top[live[at - 1][1]] > key[0]:
            return live[at - 1][1], row
        if at < len(live) and live[at][0] < top[row]:
            return live[at][1], row
        live.insert(at, key)
    return None
