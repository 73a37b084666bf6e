"""Placement: buffers taken in a given order, each put in the lowest or the tightest gap it fits.

The placement rule of the greedy strategies (:mod:`dsa.strategies.greedy` and its presets, the
greedy members of :mod:`dsa.strategies.best`) and of :func:`dsa.compact`, which re-places a plan in
ascending offset order with first fit. It lives below the strategies so that both use one copy:
each buffer goes into a gap between the already-placed buffers whose lifetimes intersect its own, the
smallest gap that fits (best fit, ties to the lowest offset) or the lowest one (first fit); when no
gap fits, on top of the highest of them. Fixed buffers are placed first, at their offsets.

This is the offset-calculation scheme of Y. Pisarchyk and J. Lee, "Efficient Memory Management for
Deep Neural Net Inference", MLSys 2020 workshop, arXiv:2001.03288, generalised to any ordering,
per-buffer alignment and fixed offsets.

Complexity: O(n log n + E + sum_i k_i log k_i) time, where E is the number of intersecting lifetime
pairs and k_i the placed neighbours of buffer i; O(n + E) memory. Orders by start (over the buffers
that are not fixed) take a sweep over time instead: O(n log n + n L + n f log f) time for at most L
buffers alive at once and f fixed ones, O(n) memory.
"""
from __future__ import annotations

import numpy as np

from dsa._kernels import ENGINES, use_numpy

__all__ = ["greedy_offsets", "gap_offset", "by_start", "FITS"]

FITS = ("best", "first")

# Below this many rows, engine="auto" places by a numpy loop, without numba, unless the overlap graph
# is built already: a small plan then costs no numba import and no kernel load (about 0.5 s in a fresh
# process), and the loop (about 10 us per row) costs about as much as calling the kernel (about
# 0.13 ms; 0.35 ms against it at 32 rows). dsa.address_overlap.SMALL_M is the validator's limit, the
# same. Both paths give the same plan (tested). See dsa._kernels.use_numpy.
SMALL_N = 32


def greedy_offsets(problem, order, fit: str = "best", *, sweep=None, engine: str = "auto",
                   stop=None) -> np.ndarray:
    """Offsets from placing the non-fixed rows in ``order`` (an array of row indices) with ``fit``.

    Rows missing from ``order`` that are not fixed are placed last, by index; a row may appear once
    at most, and every entry must be a row index in ``[0, n)`` (a ``ValueError`` names the first
    that is not). ``sweep`` (a :class:`dsa.sweep.Sweep` of ``problem``) supplies the time-overlap
    graph; without one it is built.
    With ``engine="auto"``, problems of fewer than ``SMALL_N`` rows whose overlap graph is not built
    yet are placed by a numpy loop instead of the numba kernel (a rule on the size alone, see
    :func:`dsa._kernels.use_numpy`; the environment variable ``DSA_ENGINE`` overrides it), and
    problems whose rows mostly meet in time (:attr:`dsa.sweep.Sweep.dense`) by a kernel that needs no
    overlap graph, and so are orders whose starts never decrease (over the rows that are not fixed: a
    sweep over time, :func:`dsa._kernels.greedy.place_by_start`: O(n log n + n L) for at most ``L``
    rows alive at once; 0.16-0.2 s against 1.8-1.9 s with the graph, and 0.4 s to build it, on a
    rectangle cut of 100,000 buffers; fixed rows are looked up by start). ``engine="numpy"`` always
    takes the numpy loop (O(n^2) time and O(n) memory; numba is never imported), ``engine="kernel"``
    the kernels. All paths give the same plan.

    ``stop``, an int64 array of one element, lets another thread cut a placement short: once it is
    non-zero, the kernels return within a few hundred rows, the rows not placed yet left at -1 (the
    numpy loop does not read it). Without one, every row is placed.
    """
    if fit not in FITS:
        raise ValueError(f"unknown fit {fit!r}; valid fits: {', '.join(FITS)}")
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; valid engines: {', '.join(ENGINES)}")
    if stop is not None and not (isinstance(stop, np.ndarray) and stop.dtype == np.int64 and stop.shape == (1,)):
        raise ValueError(f"stop must be an int64 numpy array of one element, got {stop!r}")

    n = len(problem)
    offsets = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return offsets
    order = _rows(order, n)
    fixed = problem.is_fixed
    offsets[fixed] = problem.fixed_offsets[fixed]
    order = order[~fixed[order]]
    if len(order) != n - int(fixed.sum()):
        seen = np.zeros(n, dtype=bool)
        seen[order] = True
        order = np.concatenate([order, np.flatnonzero(~seen & ~fixed)])
    cold = sweep is None or "overlap" not in sweep.__dict__
    if use_numpy(n, SMALL_N if cold else 0, engine):
        return _place_small(problem, order, offsets, fit == "best")
    from dsa._kernels.greedy import place, place_by_start, place_dense
    from dsa.sweep import Sweep

    stop = np.zeros(1, dtype=np.int64) if stop is None else stop

    if by_start(problem, order):
        place_by_start(order, problem.starts, problem.ends, problem.sizes, problem.alignments, offsets,
                       fit == "best", stop)
        return offsets
    sweep = sweep or Sweep(problem)
    if "overlap" not in sweep.__dict__ and sweep.dense:
        # most pairs meet: the overlap graph would take O(n^2) memory for little gain
        place_dense(order, problem.starts, problem.ends, problem.sizes, problem.alignments, offsets,
                    fit == "best", stop)
        return offsets
    indptr, indices = sweep.overlap
    place(order, problem.sizes, problem.alignments, offsets, indptr, indices, fit == "best", stop)
    return offsets


def by_start(problem, order) -> bool:
    """Whether :func:`greedy_offsets` places ``order`` (a permutation of the rows) by a sweep over
    time, without the overlap graph: the starts of its rows that are not fixed never decrease (fixed
    rows are not placed, wherever ``order`` has them). Taken in such an order, the placed rows that
    meet a row are those alive at its start and the fixed rows that start during its lifetime (O(n L)
    for at most ``L`` rows alive at once). ``order`` is checked as :func:`greedy_offsets` checks it."""
    order = _rows(order, len(problem))
    order = order[~problem.is_fixed[order]]
    if len(order) < 2:
        return False
    return bool((np.diff(problem.starts[order]) >= 0).all())


def _rows(order, n: int) -> np.ndarray:
    """``order`` as an int64 array of distinct row indices in ``[0, n)``; a ``ValueError`` names the
    first entry that is not one (out of range, or a row seen before), and says so for an order that
    is not a 1-D array of integers. O(len(order) + n)."""
    rows = np.asarray(order)
    if rows.ndim != 1 or (rows.size and not np.issubdtype(rows.dtype, np.integer)):
        raise ValueError(f"order must be a 1-D array of row indices (integers), got shape {rows.shape} "
                         f"and dtype {rows.dtype}")
    rows = rows.astype(np.int64, copy=False)
    if rows.size == 0:
        return rows
    outside = np.flatnonzero((rows < 0) | (rows >= n))
    if outside.size:
        k = int(outside[0])
        have = f"rows 0..{n - 1}" if n else "no rows"
        raise ValueError(f"order[{k}] = {int(rows[k])} is not a row index: the problem has {have}")
    if np.bincount(rows, minlength=n).max() > 1:
        first = np.zeros(rows.size, dtype=bool)
        first[np.unique(rows, return_index=True)[1]] = True  # (a row's later entries are the repeats)
        k = int(np.argmin(first))
        raise ValueError(f"order[{k}] = {int(rows[k])} repeats a row: each row may appear once")
    return rows


def _place_small(problem, order, offsets, best_fit: bool) -> np.ndarray:
    """The placement rule of the kernel ``dsa._kernels.greedy.place``, one numpy step per row: O(n^2)."""
    starts, ends, sizes, aligns = problem.starts, problem.ends, problem.sizes, problem.alignments
    solid = sizes > 0
    for r in order.tolist():
        size = int(sizes[r])
        if size == 0:
            offsets[r] = 0
            continue
        near = (offsets >= 0) & solid & (starts < ends[r]) & (ends > starts[r])
        offsets[r] = gap_offset(offsets[near], offsets[near] + sizes[near], size, int(aligns[r]), best_fit)
    return offsets


def gap_offset(lo, hi, size: int, align: int, best_fit: bool = True) -> int:
    """The offset of a buffer of ``size`` bytes placed among neighbours occupying ``[lo, hi)`` (any order):
    the smallest gap that fits (``best_fit``; ties to the lowest) or the lowest one, at a multiple of
    ``align``; on top of the highest neighbour when no gap fits; 0 without neighbours. The rule of
    :func:`greedy_offsets`, in numpy: O(k log k) for ``k`` neighbours."""
    if len(lo) == 0:
        return 0
    by_lo = np.argsort(lo, kind="stable")
    lo, hi = lo[by_lo], hi[by_lo]
    # the gap before neighbour t starts at the highest top among neighbours below it (or 0)
    below = np.maximum.accumulate(np.r_[0, hi])
    cand = -(-below[:-1] // align) * align
    room = lo - cand
    fits = np.flatnonzero(room >= size)
    if len(fits) == 0:
        return int(-(-int(below[-1]) // align) * align)
    if best_fit:
        return int(cand[fits[np.argmin(room[fits])]])  # argmin: ties to the lowest offset
    return int(cand[fits[0]])
