"""Overlap detection for the validator: an O(n log n) sweep over time with a Fenwick tree over offsets.

While no two live buffers overlap, the live buffers are disjoint address ranges. A new buffer
``[o, o + s)`` then collides with a live one iff a live buffer *starts* in ``[o, o + s)``, or the live
buffer with the largest offset below ``o`` reaches past ``o``. Both questions are Fenwick queries over
the buffers' ranks by offset, so each allocation costs O(log n).
"""
import numpy as np
from numba import njit


@njit(cache=True)
def _fen_add(tree, i, v):
    i += 1
    while i < len(tree):
        tree[i] += v
        i += i & (-i)


@njit(cache=True)
def _fen_prefix(tree, i):
    """Sum of positions ``[0, i)``."""
    s = 0
    while i > 0:
        s += tree[i]
        i -= i & (-i)
    return s


@njit(cache=True)
def _fen_kth(tree, k, top_bit):
    """Position (0-based) of the k-th (1-based) set element."""
    pos = 0
    step = top_bit
    while step > 0:
        nxt = pos + step
        if nxt < len(tree) and tree[nxt] < k:
            pos = nxt
            k -= tree[nxt]
        step >>= 1
    return pos


@njit(cache=True)
def first_overlap(event_rows, event_is_alloc, rank, lo_rank, hi_rank, offsets, tops, row_of_rank):
    """Return ``(i, j)``: the first pair of rows found overlapping in time and address, or ``(-1, -1)``.

    ``event_rows`` / ``event_is_alloc`` list the alloc and free events in time order (frees first at
    equal times). ``rank[i]`` is row i's position in offset order; ``[lo_rank[i], hi_rank[i])`` are the
    ranks whose offsets lie in ``[offsets[i], tops[i])``.
    """
    n = len(rank)
    tree = np.zeros(n + 1, dtype=np.int64)
    top_bit = 1
    while top_bit * 2 <= n:
        top_bit *= 2
    for e in range(len(event_rows)):
        i = event_rows[e]
        if not event_is_alloc[e]:
            _fen_add(tree, rank[i], -1)
            continue
        below = _fen_prefix(tree, lo_rank[i])
        inside = _fen_prefix(tree, hi_rank[i]) - below
        if inside > 0:
            return i, row_of_rank[_fen_kth(tree, below + 1, top_bit)]
        if below > 0:
            j = row_of_rank[_fen_kth(tree, below, top_bit)]
            if tops[j] > offsets[i]:
                return i, j
        _fen_add(tree, rank[i], 1)
    return -1, -1
