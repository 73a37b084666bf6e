"""Kernels of Gergov's two-phase allocator (:mod:`dsa.strategies.gergov`).

* :func:`skyline` -- phase 1, the infeasible skyline placement, with a min-heap of open triples
  ``(offset, window)``, two union-find "next open section" structures over the closed time, and a
  range tree that answers "the first job in rank order whose lifetime lies in ``[L, R]``" with
  deletions, in O(log^2 n) per query.
* :func:`conflicts` -- the conflict graph (time AND address overlap) of a placement, by a sweep over
  time with a max tree over address order: O((m + C) log m) for C conflicts, never the time-overlap
  graph (which has O(n^2) edges when most rows meet, and few of them conflict).
* :func:`colour` -- phase 2, greedy colouring of the conflict graph in the phase-1 selection order,
  on CSR adjacency (the conflict graph, or any graph containing it).
* :func:`rebump` -- the practical fixpoint re-placement that Triton's allocator applies instead of
  stacking colour classes.

Time is measured in sections (indices of the elementary intervals between consecutive event times),
so a job covers the sections ``first[j] .. last[j]`` (inclusive) and a window is a section range.
"""
import numpy as np
from dsa._kernels import kernel, njit

from dsa._kernels.heap import heap_pop, heap_push
from dsa._kernels.sorting import argsort_stable

_BIG32 = np.int32(2**31 - 1)


# ---------------------------------------------------------------------------------------------
# union-find over closed sections: nearest open section to the left / right

@kernel("i8[]", "i8")
def _find(parent, x):
    r = x
    while parent[r] != r:
        r = parent[r]
    while parent[x] != r:
        nxt = parent[x]
        parent[x] = r
        x = nxt
    return r


# ---------------------------------------------------------------------------------------------
# range tree: leaves = jobs sorted by first section; every node keeps its jobs sorted by last
# section and a min segment tree of their ranks (a deleted job has rank BIG)

@kernel("i4[]r", "i4[]r", "i4[]r")
def _build_tree(first, last, rank):
    m = len(first)
    size = 1
    height = 0
    while size < m:
        size *= 2
        height += 1
    levels = height + 1
    first64 = np.empty(m, dtype=np.int64)
    for i in range(m):
        first64[i] = first[i]
    perm = argsort_stable(first64)  # the stable order, as np.argsort(kind="mergesort")
    leaf_first = first[perm]
    leaf_of = np.empty(m, dtype=np.int64)
    key = np.empty((levels, size), dtype=np.int32)
    who = np.empty((levels, size), dtype=np.int32)
    pos = np.empty((levels, m), dtype=np.int32)
    seg = np.empty((levels, 2 * size), dtype=np.int32)
    for p in range(size):
        if p < m:
            j = perm[p]
            leaf_of[j] = p
            key[0, p] = last[j]
            who[0, p] = j
            pos[0, j] = 0
        else:
            key[0, p] = _BIG32
            who[0, p] = -1
    for h in range(1, levels):
        b = 1 << h
        half = b >> 1
        for k in range(size // b):
            s = k * b
            i = s
            j = s + half
            end_i = s + half
            end_j = s + b
            t = s
            while t < s + b:
                if j >= end_j or (i < end_i and key[h - 1, i] <= key[h - 1, j]):
                    key[h, t] = key[h - 1, i]
                    who[h, t] = who[h - 1, i]
                    i += 1
                else:
                    key[h, t] = key[h - 1, j]
                    who[h, t] = who[h - 1, j]
                    j += 1
                if who[h, t] >= 0:
                    pos[h, who[h, t]] = t - s
                t += 1
    for h in range(levels):
        b = 1 << h
        for k in range(size // b):
            base = 2 * k * b
            for i in range(b):
                w = who[h, k * b + i]
                seg[h, base + b + i] = rank[w] if w >= 0 else _BIG32
            for i in range(b - 1, 0, -1):
                x = seg[h, base + 2 * i]
                y = seg[h, base + 2 * i + 1]
                seg[h, base + i] = x if x < y else y
    return leaf_first, leaf_of, key, seg, pos


@kernel("i4[,]r", "i4[,]r", "i8", "i8", "i8", "i4")
def _node_min(key, seg, h, k, hi_last, best):
    """Smallest rank in node (h, k) among jobs with last section <= ``hi_last`` (or ``best``)."""
    b = 1 << h
    base = 2 * k * b
    if seg[h, base + 1] >= best:
        return best
    s = k * b
    if key[h, s] > hi_last:
        return best
    if key[h, s + b - 1] <= hi_last:
        return seg[h, base + 1]
    lo = 1
    hi = b - 1
    while lo < hi:  # count of keys <= hi_last
        mid = (lo + hi) >> 1
        if key[h, s + mid] <= hi_last:
            lo = mid + 1
        else:
            hi = mid
    l = b
    r = b + lo
    res = best
    while l < r:
        if l & 1:
            v = seg[h, base + l]
            if v < res:
                res = v
            l += 1
        if r & 1:
            r -= 1
            v = seg[h, base + r]
            if v < res:
                res = v
        l >>= 1
        r >>= 1
    return res


@kernel("i4[]r", "i4[,]r", "i4[,]r", "i8", "i8")
def _query(leaf_first, key, seg, lo_first, hi_last):
    """Smallest rank of a remaining job with ``first >= lo_first`` and ``last <= hi_last`` (BIG: none)."""
    size = key.shape[1]
    lo = 0  # np.searchsorted(leaf_first, lo_first, side="left"), as a loop (cheaper to compile)
    hi = len(leaf_first)
    while lo < hi:
        mid = (lo + hi) >> 1
        if leaf_first[mid] < lo_first:
            lo = mid + 1
        else:
            hi = mid
    lo2 = 0  # np.searchsorted(leaf_first, hi_last, side="right")
    hi = len(leaf_first)
    while lo2 < hi:
        mid = (lo2 + hi) >> 1
        if leaf_first[mid] <= hi_last:
            lo2 = mid + 1
        else:
            hi = mid
    hi = lo2
    best = _BIG32
    l = lo + size
    r = hi + size
    h = 0
    while l < r:
        if l & 1:
            best = _node_min(key, seg, h, l - (size >> h), hi_last, best)
            l += 1
        if r & 1:
            r -= 1
            best = _node_min(key, seg, h, r - (size >> h), hi_last, best)
        l >>= 1
        r >>= 1
        h += 1
    return best


@kernel("i4[,]", "i4[,]r", "i8[]r", "i8")
def _delete(seg, pos, leaf_of, j):
    p = leaf_of[j]
    for h in range(seg.shape[0]):
        b = 1 << h
        k = p >> h
        base = 2 * k * b
        i = b + pos[h, j]
        seg[h, base + i] = _BIG32
        i >>= 1
        while i >= 1:
            x = seg[h, base + 2 * i]
            y = seg[h, base + 2 * i + 1]
            seg[h, base + i] = x if x < y else y
            i >>= 1


# ---------------------------------------------------------------------------------------------

@kernel("i4[]r", "i4[]r", "i8[]r", "i8[]r", "i4[]r", "i8")
def skyline(first, last, sizes, aligns, rank, n_sections):
    """Phase 1: the skyline placement alpha' of jobs ``0..m-1`` (sizes > 0).

    Parameters are per job: sections ``first..last`` of its lifetime, size, alignment and rank (its
    position in the candidate order J; smaller is tried first). Returns ``(alpha, sel)``: the
    aligned skyline offset of every job and the jobs in selection order.

    Open triples ``(w, [a, b])`` have disjoint windows. The minimum triple takes the first job in
    rank order whose lifetime meets its window and no other open window. The sections outside every
    open window are closed; so that job is the first remaining job whose lifetime lies inside the
    window widened over the closed sections on either side (a remaining job always meets some open
    window, so it meets this one). When no job qualifies, the window is closed.
    """
    m = len(first)
    alpha = np.full(m, -1, dtype=np.int64)
    sel = np.empty(m, dtype=np.int64)
    if m == 0:
        return alpha, sel
    job_of_rank = np.empty(m, dtype=np.int64)
    for j in range(m):
        job_of_rank[rank[j]] = j
    leaf_first, leaf_of, key, seg, pos = _build_tree(first, last, rank)
    # left[k + 1] == k + 1 while section k is open; index 0 is the "none" sentinel
    left = np.arange(n_sections + 1, dtype=np.int64)
    # right[k] == k while section k is open; index n_sections is the sentinel
    right = np.arange(n_sections + 1, dtype=np.int64)
    # min-heap of open triples keyed by (offset, first section of the window): (w, a << 32 | b)
    cap = 3 * m + 4
    hw = np.empty(cap, dtype=np.int64)
    hab = np.empty(cap, dtype=np.int64)
    hs = heap_push(hw, hab, 0, 0, n_sections - 1)
    placed = 0
    while hs > 0 and placed < m:
        hs = heap_pop(hw, hab, hs)
        w = hw[hs]
        a = hab[hs] >> 32
        b = hab[hs] & 0xFFFFFFFF
        lo = _find(left, a)              # (nearest open section left of a) + 1
        hi = _find(right, b + 1) - 1     # nearest open section right of b, minus one
        r = _query(leaf_first, key, seg, lo, hi)
        if r == _BIG32:
            for k in range(a, b + 1):  # close the window
                left[k + 1] = k
                right[k] = k + 1
            continue
        j = job_of_rank[r]
        _delete(seg, pos, leaf_of, j)
        al = aligns[j]
        off = (w + al - 1) // al * al
        alpha[j] = off
        sel[placed] = j
        placed += 1
        c = first[j] if first[j] > a else a
        d = last[j] if last[j] < b else b
        hs = heap_push(hw, hab, hs, off + sizes[j], (np.int64(c) << 32) | np.int64(d))
        if a < first[j]:
            hs = heap_push(hw, hab, hs, w, (a << 32) | (np.int64(first[j]) - 1))
        if last[j] < b:
            hs = heap_push(hw, hab, hs, w, ((np.int64(last[j]) + 1) << 32) | b)
    return alpha, sel[:placed]


@njit(cache=True)
def _report(mx, size, p, lo_x, out, node, first, width):
    """Write to ``out`` the leaves ``< p`` of the max tree ``mx`` (``size`` leaves, node ``v`` has
    children ``2v`` and ``2v + 1``) whose value exceeds ``lo_x``; return their count. Subtrees whose
    maximum is at most ``lo_x``, or that start at or after leaf ``p``, are skipped. ``node``,
    ``first`` and ``width`` are the depth-first stack (two entries per level of the tree)."""
    k = 0
    if p <= 0 or mx[1] <= lo_x:
        return k
    node[0] = 1
    first[0] = 0
    width[0] = size
    top = 1
    while top > 0:
        top -= 1
        v = node[top]
        left = first[top]
        w = width[top]
        if mx[v] <= lo_x or left >= p:
            continue
        if w == 1:
            out[k] = left
            k += 1
            continue
        half = w >> 1
        node[top] = 2 * v + 1
        first[top] = left + half
        width[top] = half
        node[top + 1] = 2 * v
        first[top + 1] = left
        width[top + 1] = half
        top += 2
    return k


@kernel("i8[]", "i8", "i8")
def _tree_set(mx, v, value):
    """Set leaf ``v`` (an index into the heap-ordered max tree ``mx``) to ``value`` and update the
    maxima on its path to the root."""
    mx[v] = value
    v >>= 1
    while v >= 1:
        a = mx[2 * v]
        b = mx[2 * v + 1]
        mx[v] = a if a > b else b
        v >>= 1


@njit(cache=True)
def conflicts(sel, offsets, sizes, starts, ends):
    """The conflict graph of the rows of ``sel``: pairs whose lifetimes AND ranges
    ``[offsets, offsets + sizes)`` intersect, as CSR adjacency over all rows (``indptr``, ``indices``).

    No time-overlap graph is built: a sweep over time keeps the rows alive at each start in a max
    tree over address order (leaves: rows by offset; value: the row's top while it is alive), and a
    row that starts reports the live rows with offset below its top and top above its offset. Every
    pair that meets in time is looked at once, when the later of the two starts, but only the pairs
    that also meet in address are visited. O((m + C) log m) time and O(n + C) memory for ``m`` rows
    in ``sel`` and ``C`` conflicting pairs, whatever the number of pairs that meet in time.
    """
    n = len(offsets)
    m = len(sel)
    indptr = np.zeros(n + 1, dtype=np.int64)
    if m == 0:
        return indptr, np.zeros(0, dtype=np.int64)
    lo = offsets[sel]
    by_lo = np.argsort(lo, kind="mergesort")
    lo_sorted = lo[by_lo]
    leaf = np.empty(n, dtype=np.int64)  # leaf of each row of sel
    for q in range(m):
        leaf[sel[by_lo[q]]] = q
    size = 1
    while size < m:
        size *= 2
    floor = np.iinfo(np.int64).min
    mx = np.full(2 * size, floor, dtype=np.int64)
    by_start = sel[np.argsort(starts[sel], kind="mergesort")]
    by_end = sel[np.argsort(ends[sel], kind="mergesort")]
    cap = 2 * m + 16
    ex = np.empty(cap, dtype=np.int64)
    ey = np.empty(cap, dtype=np.int64)
    ne = 0
    hits = np.empty(m, dtype=np.int64)
    node = np.empty(130, dtype=np.int64)  # depth-first stack of _report
    first = np.empty(130, dtype=np.int64)
    width = np.empty(130, dtype=np.int64)
    e = 0
    for x in by_start:
        # rows that ended by x's start leave the tree (they started before it: end > start)
        while e < m and ends[by_end[e]] <= starts[x]:
            _tree_set(mx, leaf[by_end[e]] + size, floor)
            e += 1
        lx = offsets[x]
        hx = lx + sizes[x]
        p = np.searchsorted(lo_sorted, hx)  # rows with offset < hx
        k = _report(mx, size, p, lx, hits, node, first, width)
        if ne + k > cap:
            while ne + k > cap:
                cap *= 2
            ex2 = np.empty(cap, dtype=np.int64)
            ey2 = np.empty(cap, dtype=np.int64)
            ex2[:ne] = ex[:ne]
            ey2[:ne] = ey[:ne]
            ex = ex2
            ey = ey2
        for t in range(k):
            ex[ne] = x
            ey[ne] = sel[by_lo[hits[t]]]
            ne += 1
        _tree_set(mx, leaf[x] + size, hx)
    for t in range(ne):
        indptr[ex[t] + 1] += 1
        indptr[ey[t] + 1] += 1
    for i in range(n):
        indptr[i + 1] += indptr[i]
    fill = indptr[:n].copy()
    indices = np.empty(2 * ne, dtype=np.int64)
    for t in range(ne):
        indices[fill[ex[t]]] = ey[t]
        fill[ex[t]] += 1
        indices[fill[ey[t]]] = ex[t]
        fill[ey[t]] += 1
    return indptr, indices


@kernel("i8[]r", "i8[]r", "i8[]r", "i8[]r", "i4[]r")
def colour(sel, offsets, sizes, indptr, indices):
    """Greedy colouring in the order ``sel`` of the conflict graph of ``offsets``.

    Two rows of ``sel`` conflict when their lifetimes intersect (CSR ``indptr``/``indices``) and their
    address ranges ``[offsets, offsets + sizes)`` intersect. Each row takes the smallest colour
    not used by a conflicting row coloured before it. Rows outside ``sel`` are ignored. Returns
    ``(colours, n_edges)`` with ``colours[i] == -1`` for rows outside ``sel``.
    """
    n = len(offsets)
    col = np.full(n, -1, dtype=np.int64)
    stamp = np.zeros(len(sel) + 1, dtype=np.int64)
    edges = 0
    for t in range(len(sel)):
        x = sel[t]
        lo = offsets[x]
        hi = lo + sizes[x]
        for e in range(indptr[x], indptr[x + 1]):
            y = indices[e]
            cy = col[y]
            if cy >= 0 and offsets[y] < hi and lo < offsets[y] + sizes[y]:
                stamp[cy] = t + 1
                edges += 1
        c = 0
        while stamp[c] == t + 1:
            c += 1
        col[x] = c
    return col, edges


@njit(cache=True)
def rebump(sel, offsets, sizes, aligns, starts, ends, max_rounds):
    """Triton's fixpoint: colour the conflicts, lift every row of colour > 0 above its conflicts, repeat.

    ``offsets`` (rows of ``sel``; others ignored) is updated in place. In each round the conflict graph
    of the current offsets (:func:`conflicts`) is coloured greedily in the order ``sel``; then, in that
    order, every row of colour > 0 moves to the aligned top of its highest conflicting neighbour
    (neighbours' current offsets, which may already have moved in this round). Returns
    ``(rounds, converged)``. O((m + C) log m) per round for ``C`` conflicting pairs.
    """
    for rnd in range(max_rounds):
        indptr, indices = conflicts(sel, offsets, sizes, starts, ends)
        if len(indices) == 0:
            return rnd, True
        col, _ = colour(sel, offsets, sizes, indptr, indices)
        for t in range(len(sel)):
            x = sel[t]
            if col[x] == 0:
                continue
            top = offsets[x]
            for e in range(indptr[x], indptr[x + 1]):
                y = indices[e]
                v = offsets[y] + sizes[y]
                if v > top:
                    top = v
            al = aligns[x]
            offsets[x] = (top + al - 1) // al * al
    return max_rounds, False
