"""Greedy placement kernel: place rows in a given order at the best-fit or first-fit gap among the
already-placed rows whose lifetimes intersect theirs.

The time-overlap graph comes as CSR adjacency (:func:`dsa._kernels.time_overlap.overlap_csr`, built
once per problem), so placing a row costs O(k log k) for its k placed neighbours: O(n log n + sum k log k)
overall.
"""
import numpy as np
from dsa._kernels import kernel

from dsa._kernels.heap import heap_pop, heap_push
from dsa._kernels.sorting import sort_pairs

from dsa._kernels.time_overlap import overlap_csr  # noqa: F401  (re-exported: older imports name it here)


# sort the first k (lo, hi) pairs by lo (mincost_flow's kernels import it under this name); a loop of
# our own instead of np.argsort, whose numba version costs seconds to compile in every process
_sort_by_lo = sort_pairs

# the placement kernels read their stop flag once per this many rows (a row costs 0.1-30 us)
STOP_EVERY = 256


# nogil: a portfolio runs several placements on threads
@kernel("i8[]r", "i8[]r", "i8[]r", "i8[]", "i8[]r", "i4[]r", "b1", "i8[]r", nogil=True)
def place(order, sizes, aligns, offsets, indptr, indices, best_fit, stop):
    """Place the rows of ``order`` one by one; ``offsets`` holds -1 for unplaced rows and is filled in.

    A row goes into the smallest gap that fits it (``best_fit``; ties to the lowest offset) or the
    lowest gap that fits it (first fit) between its placed time-neighbours, gaps starting at 0 and
    aligned up to the row's alignment; if no gap fits, on top of its highest placed neighbour.

    ``stop`` (one element) is read every ``STOP_EVERY`` rows: once another thread has set it to a
    non-zero value, the kernel returns at once, the rows not placed yet left at -1.
    """
    n_max = 0
    for i in range(len(indptr) - 1):
        d = indptr[i + 1] - indptr[i]
        if d > n_max:
            n_max = d
    lo = np.empty(n_max, dtype=np.int64)
    hi = np.empty(n_max, dtype=np.int64)
    for i in range(len(order)):
        if i % STOP_EVERY == 0 and stop[0] != 0:
            return offsets
        r = order[i]
        size = sizes[r]
        a = aligns[r]
        if size == 0:
            offsets[r] = 0
            continue
        k = 0
        for e in range(indptr[r], indptr[r + 1]):
            j = indices[e]
            if offsets[j] >= 0 and sizes[j] > 0:
                lo[k] = offsets[j]
                hi[k] = offsets[j] + sizes[j]
                k += 1
        _sort_by_lo(lo, hi, k)
        offsets[r] = _choose(lo, hi, k, size, a, best_fit)
    return offsets


@kernel("i8[]r", "i8[]r", "i8", "i8", "i8", "b1", nogil=True)
def _choose(lo, hi, k, size, a, best_fit):
    """The offset for a row of ``size`` (alignment ``a``) among ``k`` obstacles ``[lo, hi)`` sorted by
    ``lo``: the smallest fitting gap (``best_fit``; ties to the lowest) or the lowest fitting gap,
    gaps starting at 0 and aligned up; on top of the highest obstacle when no gap fits."""
    best = np.int64(-1)
    best_gap = np.int64(-1)
    prev = np.int64(0)
    for t in range(k):
        cand = (prev + a - 1) // a * a
        gap = lo[t] - cand
        if gap >= size:
            if not best_fit:
                return cand
            if best < 0 or gap < best_gap:
                best = cand
                best_gap = gap
        if hi[t] > prev:
            prev = hi[t]
    if best < 0:
        best = (prev + a - 1) // a * a
    return best


@kernel("i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]", "b1", "i8[]r", nogil=True)
def place_dense(order, starts, ends, sizes, aligns, offsets, best_fit, stop):
    """The placement rule of :func:`place` without the overlap graph, for densely overlapping rows.

    All placed rows are kept in one list sorted by offset; a row scans it once, skipping the rows
    that do not meet it in time, and is then inserted at its offset. O(n) memory and O(n) work per
    row whatever the overlap: O(n^2) in all, which beats the graph (O(n^2) memory) when most pairs
    of rows meet. Same plans as :func:`place`, and the same ``stop``.
    """
    n = len(sizes)
    lst = np.empty(n, dtype=np.int64)
    m = 0
    for j in range(n):  # rows placed beforehand (fixed ones), by offset
        if offsets[j] >= 0 and sizes[j] > 0:
            lst[m] = j
            m += 1
    if m > 1:
        by = np.argsort(offsets[lst[:m]], kind="mergesort")
        lst[:m] = lst[:m][by]
    lo = np.empty(n, dtype=np.int64)
    hi = np.empty(n, dtype=np.int64)
    for i in range(len(order)):
        if i % STOP_EVERY == 0 and stop[0] != 0:
            return offsets
        r = order[i]
        size = sizes[r]
        if size == 0:
            offsets[r] = 0
            continue
        s = starts[r]
        e = ends[r]
        k = 0
        for t in range(m):  # the placed rows that meet r, already in offset order
            j = lst[t]
            if starts[j] < e and ends[j] > s:
                lo[k] = offsets[j]
                hi[k] = offsets[j] + sizes[j]
                k += 1
        offsets[r] = _choose(lo, hi, k, size, aligns[r], best_fit)
        m = _insert_by_offset(lst, m, offsets, r)
    return offsets


@kernel("i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]", "b1", "i8[]r", nogil=True)
def place_by_start(order, starts, ends, sizes, aligns, offsets, best_fit, stop):
    """The placement rule of :func:`place` for an ``order`` whose starts never decrease, without the
    overlap graph: a sweep over time.

    Taken in such an order, the placed rows that meet a row are exactly those still alive at its
    start, so the sweep keeps those alone, in one list sorted by offset (rows leave it, through a heap
    of their ends, once their lifetime is over). A row scans the list once and is inserted at its
    offset: O(n log n + n L) for at most ``L`` rows alive at once, against ``O(E log n)`` for ``E``
    intersecting pairs with the graph. Same plans as :func:`place` (the obstacles are the same, in
    the same offset order), and the same ``stop``.

    Rows placed beforehand (``offsets`` >= 0 on entry: fixed rows, not in ``order``) are obstacles
    too: each joins the list when the sweep reaches its start, and a row also meets those that start
    after its own start and before its end, which it looks up in the fixed rows sorted by start (those
    are sorted by offset and merged with the list: O(L + f log f) for ``f`` of them).
    """
    n = len(offsets)
    nf = 0
    for j in range(n):  # rows placed beforehand (fixed ones), taken by start
        if offsets[j] >= 0 and sizes[j] > 0:
            nf += 1
    fs = np.empty(nf, dtype=np.int64)  # their starts ...
    fx = np.empty(nf, dtype=np.int64)  # ... and rows, by start (ties in any order)
    nf = 0
    for j in range(n):
        if offsets[j] >= 0 and sizes[j] > 0:
            fs[nf] = starts[j]
            fx[nf] = j
            nf += 1
    _sort_by_lo(fs, fx, nf)
    p = 0  # the next fixed row the sweep has not reached
    lst = np.empty(n, dtype=np.int64)  # the live rows, by offset (distinct: they meet and have a size)
    m = 0
    ends_heap = np.empty(n, dtype=np.int64)  # the live rows, a min-heap on their ends
    rows_heap = np.empty(n, dtype=np.int64)
    hn = 0
    lo = np.empty(n, dtype=np.int64)
    hi = np.empty(n, dtype=np.int64)
    flo = np.empty(nf, dtype=np.int64)
    fhi = np.empty(nf, dtype=np.int64)
    for k in range(len(order)):
        if k % STOP_EVERY == 0 and stop[0] != 0:
            return offsets
        r = order[k]
        size = sizes[r]
        if size == 0:
            offsets[r] = 0
            continue
        s = starts[r]
        while hn > 0 and ends_heap[0] <= s:  # rows whose lifetime is over leave the list
            hn = heap_pop(ends_heap, rows_heap, hn)
            m = _remove_by_offset(lst, m, offsets, rows_heap[hn])
        # then the fixed rows that the sweep reaches join it, if alive (after: one may sit where a
        # row that just left did, and the list finds rows by offset)
        while p < nf and fs[p] <= s:
            j = fx[p]
            p += 1
            if ends[j] > s:
                m = _insert_by_offset(lst, m, offsets, j)
                hn = heap_push(ends_heap, rows_heap, hn, ends[j], j)
        for t in range(m):
            j = lst[t]
            lo[t] = offsets[j]
            hi[t] = offsets[j] + sizes[j]
        f = 0
        q = p
        while q < nf and fs[q] < ends[r]:  # fixed rows that start during its lifetime
            j = fx[q]
            q += 1
            flo[f] = offsets[j]
            fhi[f] = offsets[j] + sizes[j]
            f += 1
        if f > 0:  # ... sorted by offset, and merged from the back with the live rows
            _sort_by_lo(flo, fhi, f)
            a = m - 1
            b = f - 1
            for t in range(m + f - 1, -1, -1):
                if b < 0:
                    break
                if a >= 0 and lo[a] > flo[b]:
                    lo[t] = lo[a]
                    hi[t] = hi[a]
                    a -= 1
                else:
                    lo[t] = flo[b]
                    hi[t] = fhi[b]
                    b -= 1
        offsets[r] = _choose(lo, hi, m + f, size, aligns[r], best_fit)
        m = _insert_by_offset(lst, m, offsets, r)
        hn = heap_push(ends_heap, rows_heap, hn, ends[r], r)
    return offsets


@kernel("i8[]r", "i8", "i8[]r", "i8")
def _after(lst, m, offsets, value):
    """The first index of ``lst[:m]`` (rows by offset) whose row's offset exceeds ``value``."""
    left = 0
    right = m
    while left < right:
        mid = (left + right) // 2
        if offsets[lst[mid]] <= value:
            left = mid + 1
        else:
            right = mid
    return left


@kernel("i8[]", "i8", "i8[]r", "i8")
def _insert_by_offset(lst, m, offsets, r):
    """Insert row ``r`` into ``lst[:m]`` (rows by offset) after the rows whose offset is at most its
    own; returns ``m + 1``."""
    at = _after(lst, m, offsets, offsets[r])
    for t in range(m, at, -1):
        lst[t] = lst[t - 1]
    lst[at] = r
    return m + 1


@kernel("i8[]", "i8", "i8[]r", "i8")
def _remove_by_offset(lst, m, offsets, r):
    """Remove row ``r`` from ``lst[:m]`` (rows by offset, no two at the same one); returns ``m - 1``."""
    at = _after(lst, m, offsets, offsets[r]) - 1
    for t in range(at, m - 1):
        lst[t] = lst[t + 1]
    return m - 1
