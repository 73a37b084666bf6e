"""Orderings for the greedy engine: each maps a problem to a permutation of its rows.

All ties are broken deterministically by an explicit key, ending in the row index, so a plan does
not depend on the sort algorithm.
"""
from __future__ import annotations

import numpy as np

from dsa.budget import check_seed
from dsa.sweep import sections

__all__ = ["ORDERINGS", "order_rows"]


def _lex(*keys) -> np.ndarray:
    """Rows sorted by ``keys`` (first key most significant), ties to the lower row index."""
    n = len(keys[0])
    return np.lexsort((np.arange(n),) + tuple(reversed(keys)))


def by_size(p):
    """Size descending, then lifetime descending, then start ascending (Pisarchyk & Lee 2020)."""
    return _lex(-p.sizes, -p.durations, p.starts)


def by_duration(p):
    """Lifetime descending, then size descending, then start ascending."""
    return _lex(-p.durations, -p.sizes, p.starts)


def by_area(p):
    """size x lifetime descending (as float, no overflow), then size descending."""
    return _lex(-(p.sizes.astype(np.float64) * p.durations), -p.sizes, p.starts)


def by_start(p):
    """Start ascending, then lifetime descending, then size descending (the order of a linear scan)."""
    return _lex(p.starts, -p.durations, -p.sizes)


def by_conflict(p):
    """Bytes of the buffers whose lifetimes intersect this one, descending; then size descending.

    The weighted degree of a row in the interval graph is (bytes of rows starting before its end) minus
    (bytes of rows ending at or before its start) minus its own size: O(n log n) with prefix sums.
    """
    s_order = np.argsort(p.starts, kind="stable")
    e_order = np.argsort(p.ends, kind="stable")
    s_cum = np.r_[0, np.cumsum(p.sizes[s_order].astype(np.float64))]
    e_cum = np.r_[0, np.cumsum(p.sizes[e_order].astype(np.float64))]
    started = s_cum[np.searchsorted(p.starts[s_order], p.ends, side="left")]
    finished = e_cum[np.searchsorted(p.ends[e_order], p.starts, side="right")]
    weight = started - finished - p.sizes
    return _lex(-weight, -p.sizes, p.starts)


def by_breadth(p):
    """Greedy-by-breadth visiting order (Pisarchyk & Lee 2020, offsets variant).

    Time is cut into sections between consecutive event times; a section's breadth is the bytes alive
    in it. Sections are visited by breadth descending (ties: earlier first) and, within a section, its
    unvisited rows by size descending. A row is therefore first visited at its widest section, so the
    order is a sort by (max breadth over the row's lifetime desc, index of that section, size desc).
    The range argmax uses a sparse table: O(n log n).
    """
    n = len(p)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    times, first, last = sections(p.starts, p.ends)  # sections first..last inclusive
    sizes = p.sizes.astype(np.float64)
    delta = (np.bincount(first, weights=sizes, minlength=len(times))
             - np.bincount(last + 1, weights=sizes, minlength=len(times)))
    breadth = np.cumsum(delta)[:-1]                     # one value per section
    table = [np.arange(len(breadth))]
    width = 1
    while 2 * width <= len(breadth):
        prev = table[-1]
        a, b = prev[:-width], prev[width:]
        table.append(np.where(breadth[b] > breadth[a], b, a))
        width *= 2
    span = last - first + 1
    level = np.floor(np.log2(span)).astype(np.int64)
    # guard against float rounding in log2
    level = np.where((1 << (level + 1)) <= span, level + 1, level)
    level = np.where((1 << level) > span, level - 1, level)
    c1 = np.empty(n, dtype=np.int64)
    c2 = np.empty(n, dtype=np.int64)
    for lv in range(int(level.max()) + 1):
        rows = level == lv
        c1[rows] = table[lv][first[rows]]
        c2[rows] = table[lv][last[rows] - (1 << lv) + 1]
    better2 = (breadth[c2] > breadth[c1]) | ((breadth[c2] == breadth[c1]) & (c2 < c1))
    section = np.where(better2, c2, c1)
    return _lex(-breadth[section], section, -p.sizes, -p.durations)


ORDERINGS = {
    "size": by_size,
    "duration": by_duration,
    "area": by_area,
    "start": by_start,
    "conflict": by_conflict,
    "breadth": by_breadth,
}


def order_rows(problem, order: str, seed=None) -> np.ndarray:
    """The permutation of rows for ordering ``order`` (a name in ``ORDERINGS`` or ``"random"``)."""
    if order == "random":
        return np.random.default_rng(check_seed(seed)).permutation(len(problem))
    try:
        return ORDERINGS[order](problem)
    except KeyError:
        raise ValueError(f"unknown order {order!r}; valid orders: {', '.join(sorted(ORDERINGS))}, random") from None
