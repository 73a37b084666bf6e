"""Address-overlap search between buffers alive at the same time.

It sits below both :mod:`dsa.problem` (whose input check rejects colliding fixed buffers) and
:mod:`dsa.validator`, so neither imports the other for it. It shares no code with any strategy.
"""
from __future__ import annotations

from bisect import bisect_left

import numpy as np

from dsa import _kernels
from dsa._kernels import ENGINES, use_numpy

__all__ = ["find_overlap"]

# Below this many non-empty rows, engine="auto" checks the plan by the plain-Python sweep below, which
# spares a check the kernel's load (numba's import and the kernel: about 0.5 s and ~100 MB in a fresh
# process), as dsa.placement.SMALL_N spares a small plan the greedy kernel: a small problem is then
# planned and checked without numba. Above it the kernel is faster (with its sorts, 8 us at 32 rows
# where the sweep takes 19 us; 16 us at 256 rows, 93 us for the sweep). See dsa._kernels.use_numpy.
# (The sweep replaced an all-pairs numpy check here: on 390 rows it takes 0.14 ms and 59 KiB where
# the all-pairs check took 0.66 ms and 445 KiB.)
SMALL_M = 32
# With engine="numpy", plans are checked by the sweep (about 4 ms per 10k rows when few are alive at
# once, 2-3 times the kernel's time with its sorts) rather than by loading numba for the check
# alone: a process that only validates plans made elsewhere (the torch adapter's, planned in a
# helper process) asks for it and never pays numba's ~100 MB. The sweep moves up to k list items per
# row (k: rows alive at once), so it is used only while rows x k stays below this (at the limit,
# about 0.1 s in the worst order; 100k rows all alive at once take 0.8 s); beyond it, the kernel.
SWEEP_WORK = 1_000_000_000


def find_overlap(starts, ends, sizes, offsets, *, engine: str = "auto"):
    """Return a pair ``(i, j)`` of rows alive at the same time whose address ranges intersect, or None.

    Zero-size rows never overlap. Complexity O(n log n): three sorts, then a sweep over time with a
    Fenwick tree over offsets (numba, compiled on first use). With ``engine="auto"``, plans of fewer
    than ``SMALL_M`` non-empty rows are swept in plain Python instead (:func:`_sweep_overlap`, O(n log n
    + n k) for ``k`` rows alive at once; see :func:`dsa._kernels.use_numpy` for the override).
    So are plans of up to ``dsa._kernels.PURE_MAX_ROWS`` rows while the kernel is neither compiled nor
    in numba's cache (a cold start: the sweep takes milliseconds there, the compile about a second).
    ``engine="numpy"`` sweeps whatever the size unless rows x k exceeds ``SWEEP_WORK`` (a process
    that must not load numba asks for it); ``engine="kernel"`` always takes the kernel. Both paths
    find an overlap in the same plans.
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
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; valid engines: {', '.join(ENGINES)}")
    forced = engine == "auto" and _kernels.FORCE is not None  # tests: "sweep" (or "numpy") or "kernel"
    if use_numpy(len(rows), SMALL_M, engine):
        order, alive = _events(starts, ends)
        if forced or engine == "auto" or len(rows) * alive <= SWEEP_WORK:
            pair = _sweep_overlap(starts, offsets, tops, order)
            return None if pair is None else (int(rows[pair[0]]), int(rows[pair[1]]))
    from dsa._kernels.overlap_check import first_overlap

    if engine == "auto" and not forced and len(rows) <= _kernels.PURE_MAX_ROWS and not _kernels.compiled(first_overlap):
        # the kernel is neither compiled nor in numba's cache (a cold start): the sweep (milliseconds
        # at this size) spares the compile (about a second); same verdict
        order, alive = _events(starts, ends)
        if len(rows) * alive <= SWEEP_WORK:
            pair = _sweep_overlap(starts, offsets, tops, order)
            return None if pair is None else (int(rows[pair[0]]), int(rows[pair[1]]))
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
