"""Boxing kernels of the ``buchsbaum`` strategy (Buchsbaum et al., "OPT versus LOAD in Dynamic
Storage Allocation", SIAM J. Comput. 33(3), 2004): unit-height jobs of one height class are grouped
into boxes that hold up to ``H`` of them.

* :func:`box_class` boxes the jobs of one class: random critical points (a random priority per
  candidate time; each job goes to the highest-priority critical time it contains, which is the
  recursion "jobs live at the critical point / strictly left / strictly right"), Lemma 1 strips
  around each critical time, then interval-graph colouring of the unresolved jobs into rows that are
  bundled ``H`` at a time into boxes, one box per busy stretch of the bundle.
* :func:`unbox` turns the offsets of the top-level items into offsets of every item.

Functions on arrays and scalars only.
"""
import numpy as np
from dsa._kernels import kernel

from dsa._kernels.heap import heap_pop, heap_push
from dsa._kernels.sorting import argsort_stable, search_left


def _np_unique(a):
    return np.unique(a)


@kernel("i8[]r", pure=_np_unique)
def _unique(a):
    """``np.unique(a)``: the sorted distinct values (numba's own costs a second to compile per process)."""
    order = argsort_stable(a)
    out = np.empty(len(a), dtype=np.int64)
    k = 0
    for i in range(len(a)):
        v = a[order[i]]
        if k == 0 or out[k - 1] != v:
            out[k] = v
            k += 1
    return out[:k].copy()


@kernel("i8[]r", "i8[]r", "i8[]r", "f8[]r")
def _critical_nodes(starts, ends, cand, prio):
    """For each job, the index in ``cand`` of the highest-priority time in ``[start, end)``.

    ``cand`` is sorted and holds every job's start, so the range is never empty. Sparse table: O(c log c
    + m) for c candidates and m jobs.
    """
    c = len(cand)
    levels = 1
    while (1 << levels) <= c:
        levels += 1
    table = np.empty((levels, c), dtype=np.int64)
    for i in range(c):
        table[0, i] = i
    for k in range(1, levels):
        w = 1 << (k - 1)
        for i in range(c - (1 << k) + 1):
            a = table[k - 1, i]
            b = table[k - 1, i + w]
            table[k, i] = a if prio[a] >= prio[b] else b
    m = len(starts)
    node = np.empty(m, dtype=np.int64)
    for j in range(m):
        lo = search_left(cand, starts[j])  # np.searchsorted(cand, starts), as a loop
        hi = search_left(cand, ends[j]) - 1
        span = hi - lo + 1
        k = 0
        while (1 << (k + 1)) <= span:
            k += 1
        a = table[k, lo]
        b = table[k, hi - (1 << k) + 1]
        node[j] = a if prio[a] >= prio[b] else b
    return node


@kernel("i8[]r", "i8", "i8[]r", "i8[]r", "i8[]", "i8[]", "i8[]", "i8[]", "i8[]", "i8")
def _new_box(members, count, starts, ends, box_of, slot, bs, be, bn, nb):
    """Make box ``nb`` of ``members[:count]`` stacked in that order; return ``nb + 1``."""
    lo = starts[members[0]]
    hi = ends[members[0]]
    for k in range(count):
        j = members[k]
        box_of[j] = nb
        slot[j] = k
        if starts[j] < lo:
            lo = starts[j]
        if ends[j] > hi:
            hi = ends[j]
    bs[nb] = lo
    be[nb] = hi
    bn[nb] = count
    return nb + 1


@kernel("i8[]r", "i8[]r", "i8", "i8", "i8", "f8[]r")
def box_class(starts, ends, H, outer, inner, prio):
    """Box ``m`` unit-height jobs (lifetimes ``[starts, ends)``) into boxes of at most ``H`` slots.

    Parameters
    ----------
    starts, ends : int64 arrays
        The jobs of one height class.
    H : int
        Jobs per box (slots).
    outer, inner : int
        Lemma 1 strip sizes: ``H * ceil(1 / eps**2)`` and ``H * ceil(1 / eps)``.
    prio : float64 array
        Random priorities, at least one per distinct start: the candidate critical times are the
        jobs' distinct starts, and the k-th smallest gets ``prio[k]``.

    Returns
    -------
    box_of, slot : int64 arrays (m,)
        The box of each job and its slot in it (internal offset = slot x unit height).
    box_start, box_end, box_slots : int64 arrays (n_boxes,)
        Each box's time span and number of slots used.
    n_strip : int
        How many of the boxes came from Lemma 1 strips (they come first); the rest bundle rows of
        the interval colouring of the unresolved jobs.
    """
    m = len(starts)
    box_of = np.full(m, -1, dtype=np.int64)
    slot = np.zeros(m, dtype=np.int64)
    bs = np.empty(m, dtype=np.int64)
    be = np.empty(m, dtype=np.int64)
    bn = np.empty(m, dtype=np.int64)
    nb = 0
    if m == 0:
        return box_of, slot, bs[:0], be[:0], bn[:0], 0
    cand = _unique(starts)
    node = _critical_nodes(starts, ends, cand, prio[:len(cand)])
    order = argsort_stable(node)
    unresolved = np.zeros(m, dtype=np.bool_)
    taken = np.zeros(m, dtype=np.bool_)
    buf = np.empty(m, dtype=np.int64)
    i = 0
    while i < m:
        j = i
        while j < m and node[order[j]] == node[order[i]]:
            j += 1
        g = order[i:j]
        size = j - i
        i = j
        # Lemma 1 on the jobs live at this critical time
        if size <= 2 * outer:
            for k in range(size):
                unresolved[g[k]] = True
            continue
        by_start = g[argsort_stable(starts[g])]
        by_end = g[argsort_stable(-ends[g])]
        ps = 0
        pe = 0
        left = size
        # outer strips: the earliest starts and the latest ends stay unresolved
        for side in range(2):
            got = 0
            while got < outer:
                if side == 0:
                    r = by_start[ps]
                    ps += 1
                else:
                    r = by_end[pe]
                    pe += 1
                if not taken[r]:
                    taken[r] = True
                    unresolved[r] = True
                    got += 1
            left -= outer
        side = 0
        while left > 0:
            want = inner if inner < left else left
            got = 0
            while got < want:
                if side == 0:
                    r = by_start[ps]
                    ps += 1
                else:
                    r = by_end[pe]
                    pe += 1
                if not taken[r]:
                    taken[r] = True
                    buf[got] = r
                    got += 1
            left -= want
            strip = buf[:want].copy()
            # vertical strips (earliest starts) sorted by end, horizontal ones by start
            key = ends[strip] if side == 0 else starts[strip]
            strip = strip[argsort_stable(key)]
            for c0 in range(0, want, H):
                c1 = c0 + H if c0 + H < want else want
                nb = _new_box(strip[c0:c1], c1 - c0, starts, ends, box_of, slot, bs, be, bn, nb)
            side ^= 1
    n_strip = nb
    # interval-graph colouring of the unresolved jobs (lowest free row), rows bundled H at a time
    un = np.flatnonzero(unresolved)
    u = len(un)
    if u > 0:
        un = un[argsort_stable(starts[un])]
        row = np.empty(u, dtype=np.int64)
        busy = np.empty(u, dtype=np.int64)   # heap of (end << 32 | row): rows in use
        free = np.empty(u, dtype=np.int64)   # heap of rows released
        unused = np.zeros(u, dtype=np.int64)  # (the heaps' values: the keys are distinct)
        nbusy = 0
        nfree = 0
        nrows = 0
        for k in range(u):
            r = un[k]
            while nbusy > 0 and (busy[0] >> 32) <= starts[r]:
                nbusy = heap_pop(busy, unused, nbusy)
                nfree = heap_push(free, unused, nfree, busy[nbusy] & 0xFFFFFFFF, 0)
            if nfree > 0:
                nfree = heap_pop(free, unused, nfree)
                x = free[nfree]
            else:
                x = nrows
                nrows += 1
            row[k] = x
            nbusy = heap_push(busy, unused, nbusy, (ends[r] << 32) | x, 0)
        # bundle rows [0, H), [H, 2H), ...; a bundle makes one box per stretch where it is busy
        grp = row // H
        perm = argsort_stable(grp)       # stable: by start within a bundle
        used = np.zeros(H, dtype=np.int64)
        p = 0
        while p < u:
            q = p
            g0 = grp[perm[p]]
            reach = ends[un[perm[p]]]
            while q < u and grp[perm[q]] == g0 and (q == p or starts[un[perm[q]]] < reach):
                e = ends[un[perm[q]]]
                if e > reach:
                    reach = e
                q += 1
            # slots: the bundle's rows that this stretch uses, renumbered densely
            for k in range(H):
                used[k] = -1
            lo = starts[un[perm[p]]]
            ns = 0
            for k in range(p, q):
                rr = row[perm[k]] - g0 * H
                if used[rr] < 0:
                    used[rr] = 0
            for k in range(H):
                if used[k] == 0:
                    used[k] = ns
                    ns += 1
            for k in range(p, q):
                r = un[perm[k]]
                box_of[r] = nb
                slot[r] = used[row[perm[k]] - g0 * H]
            bs[nb] = lo
            be[nb] = reach
            bn[nb] = ns
            nb += 1
            p = q
    return box_of, slot, bs[:nb].copy(), be[:nb].copy(), bn[:nb].copy(), n_strip


@kernel("i8[]r", "i8[]r", "i8[]r")
def unbox(parent, inner, top_offsets):
    """Offsets of every item: ``top_offsets`` for items without a parent (``parent < 0``), else the
    parent's offset plus ``inner``. Parents have larger indices than their members."""
    n = len(parent)
    off = np.empty(n, dtype=np.int64)
    for i in range(n - 1, -1, -1):
        if parent[i] < 0:
            off[i] = top_offsets[i]
        else:
            off[i] = off[parent[i]] + inner[i]
    return off
