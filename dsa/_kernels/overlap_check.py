"""Overlap detection for the validator: an O(n log n) sweep over time with a Fenwick tree over offsets.

While no two live buffers overlap, the live buffers are disjoint address ranges. A new buffer
``[o, o + s)`` then collides with a live one iff the live buffer with the smallest offset ``>= o``
starts before ``o + s``, or the live buffer with the largest offset ``< o`` reaches past ``o``. Both
are order-statistic queries on a Fenwick tree over the buffers' ranks by offset, so each allocation
costs O(log n).
"""
import numpy as np
from dsa._kernels import kernel, njit


@kernel("i4[]", "i8", "i8")
def _fen_add(tree, i, v):
    i += 1
    while i < len(tree):
        tree[i] += v
        i += i & (-i)


@kernel("i4[]r", "i8")
def _fen_prefix(tree, i):
    """Sum of positions ``[0, i)``."""
    s = 0
    while i > 0:
        s += tree[i]
        i -= i & (-i)
    return s


@kernel("i4[]r", "i8", "i8")
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


@kernel("i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]r")
def first_overlap(starts, ends, offsets, tops, by_start, by_end, by_offset):
    """Return ``(i, j)``: the first pair of rows found overlapping in time and address, or ``(-1, -1)``.

    ``by_start``, ``by_end`` and ``by_offset`` sort the rows by start, end and offset. Allocations are
    swept in start order, merged with the frees (frees first at equal times). A new row ``i`` is
    checked against the live row just below its offset (does it reach past ``offsets[i]``?) and the
    live row at or just above it (does it begin before ``tops[i]``?).
    """
    m = len(starts)
    rank = np.empty(m, dtype=np.int64)
    lo = np.empty(m, dtype=np.int64)   # first rank holding a row's offset value
    first = 0
    for k in range(m):
        r = by_offset[k]
        rank[r] = k
        if k > 0 and offsets[r] != offsets[by_offset[k - 1]]:
            first = k
        lo[r] = first
    tree = np.zeros(m + 1, dtype=np.int32)
    top_bit = 1
    while top_bit * 2 <= m:
        top_bit *= 2
    live = 0
    f = 0
    for a in range(m):
        i = by_start[a]
        while f < m and ends[by_end[f]] <= starts[i]:
            _fen_add(tree, rank[by_end[f]], -1)
            live -= 1
            f += 1
        below = _fen_prefix(tree, lo[i])
        if below < live:
            j = by_offset[_fen_kth(tree, below + 1, top_bit)]
            if offsets[j] < tops[i]:
                return i, j
        if below > 0:
            j = by_offset[_fen_kth(tree, below, top_bit)]
            if tops[j] > offsets[i]:
                return i, j
        _fen_add(tree, rank[i], 1)
        live += 1
    return -1, -1
