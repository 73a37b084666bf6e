"""Kernels of Gergov's two-phase allocator (:mod:`dsa.strategies.gergov`).

* :func:`skyline` -- phase 1, the infeasible skyline placement, with a min-heap of open triples
  ``(offset, window)``, two union-find "next open section" structures over the closed time, and a
  range tree that answers "the first job in rank order whose lifetime lies in ``[L, R]``" with
  deletions, in O(log^2 n) per query.
* :func:`colour` -- phase 2, greedy colouring of the conflict graph (time AND address overlap) in the
  phase-1 selection order, on the time-overlap CSR adjacency of :class:`dsa.sweep.Sweep`.
* :func:`rebump` -- the practical fixpoint re-placement that Triton's allocator applies instead of
  stacking colour classes.

Time is measured in sections (indices of the elementary intervals between consecutive event times),
so a job covers the sections ``first[j] .. last[j]`` (inclusive) and a window is a section range.
"""
import numpy as np
from dsa._kernels import njit

_BIG32 = np.int32(2**31 - 1)


# ---------------------------------------------------------------------------------------------
# binary min-heap of triples, keyed by (offset, first section of the window)

@njit(cache=True)
def _less(hw, ha, i, j):
    return hw[i] < hw[j] or (hw[i] == hw[j] and ha[i] < ha[j])


@njit(cache=True)
def _swap(hw, ha, hb, i, j):
    hw[i], hw[j] = hw[j], hw[i]
    ha[i], ha[j] = ha[j], ha[i]
    hb[i], hb[j] = hb[j], hb[i]


@njit(cache=True)
def _push(hw, ha, hb, size, w, a, b):
    i = size
    hw[i] = w
    ha[i] = a
    hb[i] = b
    while i > 0:
        p = (i - 1) >> 1
        if _less(hw, ha, i, p):
            _swap(hw, ha, hb, i, p)
            i = p
        else:
            break
    return size + 1


@njit(cache=True)
def _pop(hw, ha, hb, size):
    """Move the minimum to slot ``size - 1`` and restore the heap on the first ``size - 1`` slots."""
    last = size - 1
    _swap(hw, ha, hb, 0, last)
    i = 0
    while True:
        c = 2 * i + 1
        if c >= last:
            break
        if c + 1 < last and _less(hw, ha, c + 1, c):
            c += 1
        if _less(hw, ha, c, i):
            _swap(hw, ha, hb, i, c)
            i = c
        else:
            break
    return last


# ---------------------------------------------------------------------------------------------
# union-find over closed sections: nearest open section to the left / right

@njit(cache=True)
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

@njit(cache=True)
def _build_tree(first, last, rank):
    m = len(first)
    size = 1
    height = 0
    while size < m:
        size *= 2
        height += 1
    levels = height + 1
    perm = np.argsort(first, kind="mergesort")
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


@njit(cache=True)
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


@njit(cache=True)
def _query(leaf_first, key, seg, lo_first, hi_last):
    """Smallest rank of a remaining job with ``first >= lo_first`` and ``last <= hi_last`` (BIG: none)."""
    size = key.shape[1]
    lo = np.searchsorted(leaf_first, lo_first, side="left")
    hi = np.searchsorted(leaf_first, hi_last, side="right")
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


@njit(cache=True)
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

@njit(cache=True)
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
    cap = 3 * m + 4
    hw = np.empty(cap, dtype=np.int64)
    ha = np.empty(cap, dtype=np.int64)
    hb = np.empty(cap, dtype=np.int64)
    hs = _push(hw, ha, hb, 0, 0, 0, n_sections - 1)
    placed = 0
    while hs > 0 and placed < m:
        hs = _pop(hw, ha, hb, hs)
        w = hw[hs]
        a = ha[hs]
        b = hb[hs]
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
        hs = _push(hw, ha, hb, hs, off + sizes[j], c, d)
        if a < first[j]:
            hs = _push(hw, ha, hb, hs, w, a, first[j] - 1)
        if last[j] < b:
            hs = _push(hw, ha, hb, hs, w, last[j] + 1, b)
    return alpha, sel[:placed]


@njit(cache=True)
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
def rebump(sel, offsets, sizes, aligns, indptr, indices, max_rounds):
    """Triton's fixpoint: colour the conflicts, lift every row of colour > 0 above its conflicts, repeat.

    ``offsets`` (rows of ``sel``; others ignored) is updated in place. In each round the conflict graph
    of the current offsets is coloured greedily in the order ``sel``; then, in that order, every row of
    colour > 0 moves to the aligned top of its highest conflicting neighbour (neighbours' current
    offsets, which may already have moved in this round). Returns ``(rounds, converged)``.
    """
    n = len(offsets)
    member = np.zeros(n, dtype=np.bool_)
    for x in sel:
        member[x] = True
    conf = np.zeros(len(indices), dtype=np.bool_)
    col = np.full(n, -1, dtype=np.int64)
    stamp = np.zeros(len(sel) + 1, dtype=np.int64)
    for rnd in range(max_rounds):
        any_conf = False
        for t in range(len(sel)):
            x = sel[t]
            lo = offsets[x]
            hi = lo + sizes[x]
            for e in range(indptr[x], indptr[x + 1]):
                y = indices[e]
                c = member[y] and offsets[y] < hi and lo < offsets[y] + sizes[y]
                conf[e] = c
                if c:
                    any_conf = True
        if not any_conf:
            return rnd, True
        for x in sel:
            col[x] = -1
        for t in range(len(sel)):
            x = sel[t]
            for e in range(indptr[x], indptr[x + 1]):
                if conf[e]:
                    cy = col[indices[e]]
                    if cy >= 0:
                        stamp[cy] = rnd * (len(sel) + 1) + t + 1
            c = 0
            while stamp[c] == rnd * (len(sel) + 1) + t + 1:
                c += 1
            col[x] = c
        for t in range(len(sel)):
            x = sel[t]
            if col[x] == 0:
                continue
            top = offsets[x]
            for e in range(indptr[x], indptr[x + 1]):
                if conf[e]:
                    y = indices[e]
                    v = offsets[y] + sizes[y]
                    if v > top:
                        top = v
            al = aligns[x]
            offsets[x] = (top + al - 1) // al * al
    return max_rounds, False
