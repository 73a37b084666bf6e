"""Compaction: slide every buffer of a valid plan down as far as it goes, never raising the peak.

Buffers are re-placed in ascending order of their current offset (ties by row), each at the lowest
aligned offset where it fits among the already re-placed buffers whose lifetimes intersect its own.
Fixed buffers stay put. This is the "squeeze" that practical versions of Gergov's and Buchsbaum et
al.'s algorithms end with (idealloc calls it best fit over ascending loose offsets).

Why it never moves a buffer up: when buffer ``i`` is re-placed, its placed neighbours all had old
offsets at most ``i``'s, so (the plan being valid) their old tops, and hence their new ones, are at
most ``i``'s old offset; the old offset is aligned and free of every neighbour, so the lowest fit is
at or below it. Hence the new peak is at most the old one.

Complexity: O(n log n + E + sum_i k_i log k_i), as one greedy pass (:mod:`dsa.placement`).
"""
from __future__ import annotations

import numpy as np

from dsa.placement import greedy_offsets

__all__ = ["compact"]


def compact(problem, offsets, *, sweep=None) -> np.ndarray:
    """Return a plan no higher than ``offsets`` with every buffer moved down as far as it fits.

    Parameters
    ----------
    problem : Problem
    offsets : array_like of int
        A valid plan of ``problem`` (one offset per row). An invalid plan gives an undefined (but
        still valid) result; the peak guarantee needs a valid input.
    sweep : dsa.sweep.Sweep, optional
        The problem's shared planning context, to reuse its time-overlap graph.

    Returns
    -------
    numpy.ndarray of int64
        The compacted offsets; fixed rows keep their fixed offsets.

    Examples
    --------
    >>> import dsa
    >>> p = dsa.Problem([0, 0, 5], [4, 9, 9], [2, 3, 2])
    >>> dsa.compact(p, [10, 0, 20]).tolist()
    [3, 0, 3]
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    if offsets.shape != (len(problem),):
        raise ValueError(f"expected {len(problem)} offsets, one per row, got shape {offsets.shape}")
    order = np.argsort(offsets, kind="stable")
    return greedy_offsets(problem, order, "first", sweep=sweep)
