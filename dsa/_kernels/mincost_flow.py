"""Kernels of the ``mincost_flow`` strategy: candidate edges, the min-cost assignment, objects, layout.

All functions take and return arrays and scalars only. Rows here are the *flow rows*: the free,
non-empty buffers of a problem, relabelled ``0 .. m - 1`` in ascending start order (ties by end,
then by original row), so that row ``j`` may only reuse the object of a row ``i`` with
``ends[i] <= starts[j]``.

The assignment is a rectangular assignment problem with ``m`` rows and ``2 m`` columns: column
``i < m`` is "reuse the object of row ``i``" (each usable once), column ``m + j`` is "row ``j`` opens a
new object" (adjacent to row ``j`` only). It is solved by successive shortest augmenting paths with
Dijkstra on reduced costs (Hungarian potentials), one row at a time, as in Crouse, "On implementing
2D rectangular assignment algorithms", IEEE TAES 52(4), 2016, but over sparse adjacency with a binary
heap (:mod:`dsa._kernels.heap`) instead of a dense scan.
"""
import numpy as np
from dsa._kernels import kernel, njit
from dsa._kernels.greedy import _choose, _sort_by_lo
from dsa._kernels.heap import heap_pop, heap_push

_INF = np.iinfo(np.int64).max


@kernel("i8", "i8")
def _compatible(a, b):
    """Alignments ``a`` and ``b`` divide one another (their lcm is their max)."""
    if a >= b:
        return a % b == 0
    return b % a == 0


@kernel("i8", "i8[]r", "i8", "i8[]r", "i8[]r", "i8", "i8", "i8[]", "i8[]", "i8", "i8[]", "i8[]")
def _scan(j, by_end, avail, sizes, aligns, k, window, cols, costs, base, tmp_i, tmp_key):
    """Count (``base < 0``) or write at ``base`` the candidate predecessors of row ``j``.

    Looks at the ``window`` most recently ended compatible rows (ending at or before row ``j``'s
    start) and keeps the ``k`` with the largest saving ``min(size_i, size_j)``, ties to the most
    recently ended (with ``window == k``: simply the ``k`` most recently ended).
    """
    got = 0  # kept so far, in tmp_i / tmp_key: saving descending, then recency
    seen = 0
    t = avail - 1
    while t >= 0 and seen < window:
        i = by_end[t]
        t -= 1
        if not _compatible(aligns[i], aligns[j]):
            continue
        seen += 1
        save = sizes[i] if sizes[i] < sizes[j] else sizes[j]
        if got == k:
            if save <= tmp_key[k - 1]:
                continue  # not strictly better than the worst kept, which ended later
            got -= 1
        q = got  # insertion: after every kept row with a saving >= this one
        while q > 0 and tmp_key[q - 1] < save:
            tmp_key[q] = tmp_key[q - 1]
            tmp_i[q] = tmp_i[q - 1]
            q -= 1
        tmp_key[q] = save
        tmp_i[q] = i
        got += 1
    if base >= 0:
        for q in range(got):
            i = tmp_i[q]
            cols[base + q] = i
            c = sizes[j] - sizes[i]
            costs[base + q] = c if c > 0 else 0
    return got


def _np_candidate_edges(by_end, avail, sizes, aligns, k, window):
    """:func:`candidate_edges` in numpy, one row at a time (same edges, same order)."""
    m = len(avail)
    window = max(window, k)
    indptr = np.zeros(m + 1, dtype=np.int64)
    cols, costs = [], []
    for j in range(m):
        recent = by_end[:avail[j]][::-1]  # the rows ended by row j's start, the last to end first
        a, aj = aligns[recent], aligns[j]
        ok = np.where(a >= aj, a % aj == 0, aj % np.maximum(a, 1) == 0)
        cand = recent[ok][:window]
        save = np.minimum(sizes[cand], sizes[j])
        keep = cand[np.argsort(-save, kind="stable")[:k]]  # saving descending, then recency
        cols.append(keep)
        costs.append(np.maximum(sizes[j] - sizes[keep], 0))
        indptr[j + 1] = indptr[j] + len(keep)
    if m == 0:
        return indptr, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return (indptr, np.concatenate(cols).astype(np.int64, copy=False),
            np.concatenate(costs).astype(np.int64, copy=False))


@kernel("i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8", "i8", pure=_np_candidate_edges)
def candidate_edges(by_end, avail, sizes, aligns, k, window):
    """CSR of the candidate predecessors of each flow row, with their edge costs.

    ``by_end`` lists the rows by ascending end (ties: ascending row), ``avail[j]`` is the number of
    rows with ``end <= starts[j]``. Row ``j``'s candidates are rows ``i`` with ``ends[i] <= starts[j]``
    whose alignment divides or is divided by ``aligns[j]``: of the ``window`` such rows that ended
    last, the ``k`` with the largest saving ``min(sizes[i], sizes[j])`` (ties to the later end, then
    the higher row). With ``k >= m`` this is every predecessor: the full, exact edge set. The cost of
    ``i -> j`` is ``max(0, sizes[j] - sizes[i])``.

    Returns ``(indptr, cols, costs)``; the cols of row ``j`` are by saving, then recency.
    """
    m = len(avail)
    window = max(window, k)
    indptr = np.zeros(m + 1, dtype=np.int64)
    dummy = np.empty(0, dtype=np.int64)
    w = min(k, m) + 1
    tmp_i = np.empty(w, dtype=np.int64)
    tmp_key = np.empty(w, dtype=np.int64)
    for j in range(m):
        indptr[j + 1] = indptr[j] + _scan(j, by_end, avail[j], sizes, aligns, k, window, dummy, dummy, -1,
                                          tmp_i, tmp_key)
    cols = np.empty(indptr[m], dtype=np.int64)
    costs = np.empty(indptr[m], dtype=np.int64)
    for j in range(m):
        _scan(j, by_end, avail[j], sizes, aligns, k, window, cols, costs, indptr[j], tmp_i, tmp_key)
    return indptr, cols, costs


@njit(cache=True)
def assign(indptr, cols, costs, new_costs):
    """Min-cost assignment: each row gets its new-object column or one candidate predecessor column.

    Parameters are the CSR of :func:`candidate_edges` and ``new_costs[j]`` (the cost of row ``j``
    opening an object, its size). Returns ``(pred, total, explored)``: ``pred[j]`` is the row whose
    object row ``j`` reuses (-1: a new object), ``total`` the minimum cost, ``explored`` the number
    of columns settled by Dijkstra over all augmentations (a work measure).

    Each of the ``m`` augmentations runs Dijkstra from the new row on reduced costs
    ``cost - u[row] - v[col] >= 0`` and stops at the first free column it settles, so its cost is
    O(d log d) in the part d of the graph it explores; worst case O(m (E + m) log m) overall.
    """
    m = len(new_costs)
    nc = 2 * m
    u = np.zeros(m, dtype=np.int64)
    v = np.zeros(nc, dtype=np.int64)
    col4row = np.full(m, -1, dtype=np.int64)
    row4col = np.full(nc, -1, dtype=np.int64)
    dist = np.full(nc, _INF, dtype=np.int64)
    path = np.full(nc, -1, dtype=np.int64)
    in_sc = np.zeros(nc, dtype=np.bool_)
    touched = np.empty(nc, dtype=np.int64)
    sr = np.empty(m, dtype=np.int64)
    sc = np.empty(nc, dtype=np.int64)
    cap = len(cols) + m + 1  # each row is scanned at most once per augmentation
    hkey = np.empty(cap, dtype=np.int64)
    hval = np.empty(cap, dtype=np.int64)
    explored = 0
    for cur in range(m):
        nt = 0
        nsr = 0
        nsc = 0
        hn = 0
        i = cur
        minval = np.int64(0)
        sink = -1
        while sink < 0:
            sr[nsr] = i
            nsr += 1
            base = minval - u[i]
            for e in range(indptr[i], indptr[i + 1] + 1):
                if e < indptr[i + 1]:
                    c = cols[e]
                    cost = costs[e]
                else:  # the row's own new-object column
                    c = m + i
                    cost = new_costs[i]
                if in_sc[c]:
                    continue
                r = base + cost - v[c]
                if r < dist[c]:
                    if dist[c] == _INF:
                        touched[nt] = c
                        nt += 1
                    dist[c] = r
                    path[c] = i
                    hn = heap_push(hkey, hval, hn, r, c)
            # settle the closest unsettled column (lazy deletion of stale heap entries)
            while True:
                d = hkey[0]
                c = hval[0]
                hn = heap_pop(hkey, hval, hn)
                if not in_sc[c] and d == dist[c]:
                    break
            minval = d
            in_sc[c] = True
            sc[nsc] = c
            nsc += 1
            if row4col[c] < 0:
                sink = c
            else:
                i = row4col[c]
        explored += nsc
        # dual update keeps every reduced cost non-negative and the matched ones at zero
        u[cur] += minval
        for t in range(nsr):
            r = sr[t]
            if r != cur:
                u[r] += minval - dist[col4row[r]]
        for t in range(nsc):
            c = sc[t]
            v[c] -= minval - dist[c]
            in_sc[c] = False
        # augment along the path
        c = sink
        while True:
            r = path[c]
            row4col[c] = r
            prev = col4row[r]
            col4row[r] = c
            if r == cur:
                break
            c = prev
        for t in range(nt):
            dist[touched[t]] = _INF
    pred = np.full(m, -1, dtype=np.int64)
    total = np.int64(0)
    for j in range(m):
        c = col4row[j]
        if c < m:
            pred[j] = c
        else:
            total += new_costs[j]
    for j in range(m):
        if pred[j] >= 0:
            for e in range(indptr[j], indptr[j + 1]):
                if cols[e] == pred[j]:
                    total += costs[e]
                    break
    return pred, total, explored


@njit(cache=True)
def _gcd(a, b):
    while b:
        a, b = b, a % b
    return a


@kernel("i8[]r", "i8[]r", "i8[]r")
def objects_from_pred(pred, sizes, aligns):
    """Group flow rows into objects: the chains of ``pred``, cut where alignments stop dividing.

    A chain is cut before a row whose alignment neither divides nor is a multiple of the alignment
    of the chain so far (the lcm of its members), so that each object's alignment is the largest of
    its members'. Returns ``(obj_ptr, members, obj_size, obj_align)``: object ``o`` holds rows
    ``members[obj_ptr[o]:obj_ptr[o + 1]]`` in chain (time) order; objects are numbered by their first
    member, in row (start) order.
    """
    m = len(pred)
    succ = np.full(m, -1, dtype=np.int64)
    for j in range(m):
        if pred[j] >= 0:
            succ[pred[j]] = j
    members = np.empty(m, dtype=np.int64)
    head = np.zeros(m + 1, dtype=np.bool_)  # head[t]: position t starts an object
    t = 0
    for j in range(m):
        if pred[j] < 0:
            a = aligns[j]
            x = j
            first = True
            while x >= 0:
                b = aligns[x]
                if first or (a % b != 0 and b % a != 0):
                    head[t] = True
                    a = b
                    first = False
                elif b > a:
                    a = b
                members[t] = x
                t += 1
                x = succ[x]
    n_obj = 0
    for p in range(m):
        if head[p]:
            n_obj += 1
    obj_ptr = np.empty(n_obj + 1, dtype=np.int64)
    obj_size = np.zeros(n_obj, dtype=np.int64)
    obj_align = np.ones(n_obj, dtype=np.int64)
    o = -1
    for p in range(m):
        if head[p]:
            o += 1
            obj_ptr[o] = p
        x = members[p]
        if sizes[x] > obj_size[o]:
            obj_size[o] = sizes[x]
        if aligns[x] > obj_align[o]:
            obj_align[o] = aligns[x]
    obj_ptr[n_obj] = m
    return obj_ptr, members, obj_size, obj_align


@njit(cache=True)
def stack_objects(obj_ptr, members, obj_size, obj_align, base, offsets):
    """Stack the objects in index order from ``base`` up (TFLite's ObjectsToOffsets, aligned).

    ``members`` hold problem rows; ``offsets`` (one per problem row) get each member's object offset.
    Returns the top of the stack.
    """
    top = base
    for o in range(len(obj_size)):
        a = obj_align[o]
        x = (top + a - 1) // a * a
        for p in range(obj_ptr[o], obj_ptr[o + 1]):
            offsets[members[p]] = x
        top = x + obj_size[o]
    return top


@kernel("i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]", "i8[]r", "i4[]r", "b1")
def place_objects(order, obj_ptr, members, obj_size, obj_align, sizes, offsets, indptr, indices, best_fit):
    """Place whole objects, in ``order``, by a gap search over everything placed that meets them in time.

    An object is the set of its members' lifetimes (disjoint intervals). Its obstacles are the placed
    rows (``offsets >= 0``, size > 0; fixed rows are placed beforehand) that are time-neighbours of
    any member, from the problem's overlap CSR ``(indptr, indices)``. The object takes the smallest
    (``best_fit``; ties to the lowest) or the lowest aligned gap of its size between them, or the top
    of the highest of them; every member gets the object's offset. ``members`` hold problem rows.
    """
    n_max = 0
    for o in range(len(obj_size)):
        d = 0
        for p in range(obj_ptr[o], obj_ptr[o + 1]):
            x = members[p]
            d += indptr[x + 1] - indptr[x]
        if d > n_max:
            n_max = d
    lo = np.empty(n_max, dtype=np.int64)
    hi = np.empty(n_max, dtype=np.int64)
    for o in order:
        size = obj_size[o]
        a = obj_align[o]
        k = 0
        for p in range(obj_ptr[o], obj_ptr[o + 1]):
            x = members[p]
            for e in range(indptr[x], indptr[x + 1]):
                y = indices[e]
                if offsets[y] >= 0 and sizes[y] > 0:
                    lo[k] = offsets[y]
                    hi[k] = offsets[y] + sizes[y]
                    k += 1
        _sort_by_lo(lo, hi, k)
        best = _choose(lo, hi, k, size, a, best_fit)  # the greedy engine's gap rule
        for p in range(obj_ptr[o], obj_ptr[o + 1]):
            offsets[members[p]] = best
    return offsets


@njit(cache=True)
def place_objects_dense(order, obj_ptr, members, obj_size, obj_align, sizes, starts, ends, offsets,
                        best_fit):
    """:func:`place_objects` without the overlap graph, for problems whose rows mostly meet in time.

    Every placed row is kept in one list sorted by offset (its lifetime and address range stored
    in the list, so that a scan reads memory in order); an object scans it once, keeping the rows
    that meet one of its members in time (the members are disjoint and in time order, so a binary
    search over their starts finds the only one that can meet a given row), and its members are then
    inserted at the object's offset. The obstacles are those of :func:`place_objects` (without its
    repeats of a row that meets several members, which never change the gap chosen), already in
    offset order, so the plan is the same. O(n) memory; O(n log c) work per object of ``c``
    members, O(n^2 log c) in all, which beats the graph's O(n^2) memory when most rows meet.
    """
    n = len(sizes)
    ls = np.empty(n, dtype=np.int64)  # the placed rows by offset: start, end, offset, top
    le = np.empty(n, dtype=np.int64)
    llo = np.empty(n, dtype=np.int64)
    lhi = np.empty(n, dtype=np.int64)
    m = 0
    pre = np.empty(n, dtype=np.int64)
    for j in range(n):  # rows placed beforehand (fixed ones), by offset
        if offsets[j] >= 0 and sizes[j] > 0:
            pre[m] = j
            m += 1
    pre = pre[:m][np.argsort(offsets[pre[:m]], kind="mergesort")]
    for t in range(m):
        j = pre[t]
        ls[t] = starts[j]
        le[t] = ends[j]
        llo[t] = offsets[j]
        lhi[t] = offsets[j] + sizes[j]
    lo = np.empty(n, dtype=np.int64)
    hi = np.empty(n, dtype=np.int64)
    for o in order:
        p0 = obj_ptr[o]
        p1 = obj_ptr[o + 1]
        c = p1 - p0
        k = 0
        if c == 1:
            s = starts[members[p0]]
            e = ends[members[p0]]
            for t in range(m):
                if ls[t] < e and le[t] > s:
                    lo[k] = llo[t]
                    hi[k] = lhi[t]
                    k += 1
        else:
            for t in range(m):
                # the last member starting before row t ends is the only one that can meet it
                left = p0
                right = p1
                while left < right:
                    mid = (left + right) // 2
                    if starts[members[mid]] < le[t]:
                        left = mid + 1
                    else:
                        right = mid
                if left > p0 and ends[members[left - 1]] > ls[t]:
                    lo[k] = llo[t]
                    hi[k] = lhi[t]
                    k += 1
        best = _choose(lo, hi, k, obj_size[o], obj_align[o], best_fit)
        # insert the members after the rows whose offset is at most the object's
        left = 0
        right = m
        while left < right:
            mid = (left + right) // 2
            if llo[mid] <= best:
                left = mid + 1
            else:
                right = mid
        for t in range(m - 1, left - 1, -1):
            ls[t + c] = ls[t]
            le[t + c] = le[t]
            llo[t + c] = llo[t]
            lhi[t + c] = lhi[t]
        for p in range(p0, p1):
            x = members[p]
            offsets[x] = best
            q = left + p - p0
            ls[q] = starts[x]
            le[q] = ends[x]
            llo[q] = best
            lhi[q] = best + sizes[x]
        m += c
    return offsets
