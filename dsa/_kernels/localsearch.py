"""Local-search kernels: a fast resumable greedy decoder and a late-acceptance search over orders.

The decoder places rows in a given order at the best-fit (or first-fit) gap among the already placed
rows whose lifetimes intersect theirs, exactly the placement rule of :mod:`dsa._kernels.greedy`
(Pisarchyk & Lee 2020), but organised for being called many thousand times on one problem:

* the placed rows are kept in one list sorted by offset, stored as parallel arrays (offset, top,
  start, end, row); placing a row scans that list once, skipping rows whose lifetimes do not meet
  its own, so no per-row sort or allocation is needed;
* a decode can resume at any position ``p`` of the order: the rows placed before ``p`` keep their
  offsets and are kept in the list, the others are dropped in one pass;
* a decode aborts as soon as its partial cost (peak, area above a line: both only grow while
  decoding) exceeds a threshold, i.e. as soon as the candidate cannot be accepted.

Placing the ``t``-th row costs O(t) (the scan and the insertion), so a full decode of ``m`` rows with
``f`` fixed rows costs O(m (m + f)). This is meant for the few hundred to few thousand rows of one
busy period; the driver cuts larger problems into windows.

The search (:func:`search_chunk`) is a late-acceptance hill climbing (Burke & Bykov 2017) over the
order, with squeaky-wheel moves (Joslin & Clements 1999): a row whose top sits at or near the peak is
moved to an earlier position, so the decoder sees it sooner. See :mod:`dsa.strategies._local_search`.

All functions take numpy arrays and scalars only. Random numbers come from a xorshift64* generator
whose state is one ``uint64`` in a length-1 array, so a search can be cut into chunks and resumed.
"""
import numpy as np
from dsa._kernels import njit
from dsa._kernels.rng import randint, uniform


# random numbers: dsa._kernels.rng (xorshift64*)


# --------------------------------------------------------------------------- decoder
@njit(cache=True)
def _swap(order, pos, i, j):
    """Exchange the rows at positions i and j of an order, keeping ``pos`` (row -> position) in step."""
    a = order[i]
    b = order[j]
    order[i] = b
    order[j] = a
    pos[b] = i
    pos[a] = j


@njit(cache=True)
def init_list(fixed_rows, starts, ends, sizes, offsets, sl_lo, sl_hi, sl_s, sl_e, sl_id):
    """Fill the sorted list with the fixed rows (of non-zero size); return its length.

    ``sl_*`` must have room for every row that will ever be placed (fixed plus free).
    """
    k = 0
    for r in fixed_rows:
        if sizes[r] > 0:
            sl_lo[k] = offsets[r]
            sl_hi[k] = offsets[r] + sizes[r]
            sl_s[k] = starts[r]
            sl_e[k] = ends[r]
            sl_id[k] = r
            k += 1
    idx = np.argsort(sl_lo[:k], kind="mergesort")
    a, b, c, d, e = sl_lo[:k][idx], sl_hi[:k][idx], sl_s[:k][idx], sl_e[:k][idx], sl_id[:k][idx]
    sl_lo[:k] = a
    sl_hi[:k] = b
    sl_s[:k] = c
    sl_e[:k] = d
    sl_id[:k] = e
    return k


@njit(cache=True)
def decode(order, p0, pos, starts, ends, sizes, aligns, offsets, tops_prefix, area_prefix,
           sl_lo, sl_hi, sl_s, sl_e, sl_id, sl_len, best_fit, line, w_peak, lex, th_pk, th_sc):
    """Place ``order[p0:]`` after ``order[:p0]`` (already placed), aborting above a threshold.

    Parameters
    ----------
    order : int64 array
        The free rows in decoding order.
    p0 : int
        First position to (re)place; rows ``order[:p0]`` keep their offsets.
    pos : int64 array
        ``pos[r]`` is the position of free row ``r`` in ``order``; -1 for fixed rows.
    offsets : int64 array
        Offsets of all rows; filled in for ``order[p0:]``.
    tops_prefix : int64 array
        ``tops_prefix[t]`` is the peak after placing ``order[:t]`` (fixed rows included); updated
        for ``t > p0``. Length ``len(order) + 1``.
    sl_lo, sl_hi, sl_s, sl_e, sl_id : arrays
        The placed rows sorted by offset: offset, top, start, end, row id. Rows at positions
        ``>= p0`` are dropped first.
    sl_len : int
        Current length of the list.
    area_prefix : float64 array
        Like ``tops_prefix`` for the bytes x time of the placed free rows above ``line``.
    best_fit : bool
    line, w_peak, lex, th_pk, th_sc
        The cost is ``(peak, area)`` compared lexicographically when ``lex``, else
        ``area + w_peak * peak``; the decode stops as soon as it exceeds ``(th_pk, th_sc)`` (resp.
        ``th_sc``).

    Returns
    -------
    (peak, area, sl_len, done)
        ``done`` is the number of positions decoded (``len(order)`` unless aborted); ``peak`` the
        peak (over fixed rows and ``order[:done]``).
    """
    # drop the rows from position p0 on, keeping the list sorted
    k = 0
    for i in range(sl_len):
        r = sl_id[i]
        if pos[r] < p0:
            if k != i:
                sl_lo[k] = sl_lo[i]
                sl_hi[k] = sl_hi[i]
                sl_s[k] = sl_s[i]
                sl_e[k] = sl_e[i]
                sl_id[k] = r
            k += 1
    n_sl = k
    peak = tops_prefix[p0]
    area = area_prefix[p0]
    m = len(order)
    for t in range(p0, m):
        r = order[t]
        size = sizes[r]
        if size == 0:
            offsets[r] = 0
            tops_prefix[t + 1] = peak
            area_prefix[t + 1] = area
            continue
        a = aligns[r]
        s = starts[r]
        e = ends[r]
        prev = np.int64(0)
        best = np.int64(-1)
        best_gap = np.int64(0)
        for i in range(n_sl):
            if sl_s[i] < e and s < sl_e[i]:
                cand = prev
                if a > 1:
                    cand = (prev + a - 1) // a * a
                gap = sl_lo[i] - cand
                if gap >= size:
                    if not best_fit:
                        best = cand
                        break
                    if best < 0 or gap < best_gap:
                        best = cand
                        best_gap = gap
                        if gap == size:
                            break  # a perfect fit: no smaller gap exists, and it is the lowest
                h = sl_hi[i]
                if h > prev:
                    prev = h
        if best < 0:
            best = prev
            if a > 1:
                best = (prev + a - 1) // a * a
        top = best + size
        offsets[r] = best
        if top > peak:
            peak = top
        tops_prefix[t + 1] = peak
        if top > line:
            area += np.float64(top - max(best, line)) * (e - s)
        area_prefix[t + 1] = area
        # insert into the list, after the rows with offset <= best
        lo_i = 0
        hi_i = n_sl
        while lo_i < hi_i:
            mid = (lo_i + hi_i) >> 1
            if sl_lo[mid] <= best:
                lo_i = mid + 1
            else:
                hi_i = mid
        for i in range(n_sl, lo_i, -1):
            sl_lo[i] = sl_lo[i - 1]
            sl_hi[i] = sl_hi[i - 1]
            sl_s[i] = sl_s[i - 1]
            sl_e[i] = sl_e[i - 1]
            sl_id[i] = sl_id[i - 1]
        sl_lo[lo_i] = best
        sl_hi[lo_i] = top
        sl_s[lo_i] = s
        sl_e[lo_i] = e
        sl_id[lo_i] = r
        n_sl += 1
        if lex:
            if peak > th_pk or (peak == th_pk and area > th_sc):
                return peak, area, n_sl, t + 1
        elif area + w_peak * peak > th_sc:
            return peak, area, n_sl, t + 1
    return peak, area, n_sl, m


# --------------------------------------------------------------------------- search
@njit(cache=True)
def _save(p0, order, pos, offsets, tops, area, sl_lo, sl_hi, sl_s, sl_e, sl_id, n_sl,
          order2, pos2, offsets2, tops2, area2, sl_lo2, sl_hi2, sl_s2, sl_e2, sl_id2):
    """Copy the decode state from position ``p0`` on (the list in full) into the ``*2`` arrays."""
    m = len(order)
    for t in range(p0, m):
        r = order[t]
        order2[t] = r
        pos2[r] = t
        offsets2[r] = offsets[r]
        tops2[t + 1] = tops[t + 1]
        area2[t + 1] = area[t + 1]
    sl_lo2[:n_sl] = sl_lo[:n_sl]
    sl_hi2[:n_sl] = sl_hi[:n_sl]
    sl_s2[:n_sl] = sl_s[:n_sl]
    sl_e2[:n_sl] = sl_e[:n_sl]
    sl_id2[:n_sl] = sl_id[:n_sl]


@njit(cache=True)
def _worse(a1, a2, b1, b2):
    """Whether the cost ``(a1, a2)`` is lexicographically greater than ``(b1, b2)``."""
    return a1 > b1 or (a1 == b1 and a2 > b2)


@njit(cache=True)
def search_chunk(iters, rng, st, fst, prm, fprm, hist_k1, hist_k2,
                 starts, ends, sizes, aligns,
                 order, pos, offsets, tops, area, sl_lo, sl_hi, sl_s, sl_e, sl_id,
                 order_c, pos_c, offsets_c, tops_c, area_c, cl_lo, cl_hi, cl_s, cl_e, cl_id,
                 best_order, best_offsets):
    """Run ``iters`` iterations of late-acceptance hill climbing over the order; resumable.

    The current solution lives in ``order, pos, offsets, tops, area, sl_*``; the candidate is built
    in the ``*_c`` / ``cl_*`` copies, which equal the current ones on entry and on exit.

    The cost of a plan is the pair ``(peak, area)`` compared lexicographically (``lex``), or
    ``(0, area + w_peak * peak)``, where ``area`` is the bytes x time of the rows above ``line``.

    ``st`` (int64): ``[cur_k1, best_peak, n_sl, -, iterations, last_improve, best_fit,
    best_best_fit, accepted, cur_peak]``; ``fst`` (float64): ``[cur_k2, best_k2]``.
    ``prm`` (int64): ``[line, hist_len, stall, band_div, lex, blame]``; ``fprm`` (float64):
    ``[p_squeaky_insert, p_squeaky_swap, p_random_swap, p_flip_fit, w_peak]`` (the remaining move
    probability is a random insertion).

    Moves: (a) a row whose top is within ``(peak - line) / band_div`` of the peak moves to a uniformly
    drawn earlier position (squeaky wheel, Joslin & Clements 1999); (b) it swaps with a uniformly
    drawn earlier row; (c) two rows at most ``m / 8 + 1`` apart swap; (d) the placement rule flips
    between best and first fit; (e) a random row moves to a random position. Only the positions from
    the first changed one are re-decoded, and the decode aborts as soon as the candidate's partial
    cost (peak and area only grow while decoding) exceeds the late-acceptance threshold. After
    ``stall`` iterations without a lower peak the search restarts from the best plan.

    Each iteration costs one decode, O(m (m + f)) at worst for ``m`` free and ``f`` fixed rows.
    """
    m = len(order)
    line = prm[0]
    hlen = prm[1]
    stall = prm[2]
    band_div = prm[3]
    lex = prm[4] != 0
    blame = prm[5] != 0
    p_ins = fprm[0]
    p_swp = p_ins + fprm[1]
    p_rsw = p_swp + fprm[2]
    p_flip = p_rsw + fprm[3]
    w_peak = fprm[4]
    crit = np.empty(m, dtype=np.int64)
    for _ in range(iters):
        it = st[4]
        bf = st[6] != 0
        if stall > 0 and it - st[5] > stall:
            # restart from the best plan
            for t in range(m):
                order_c[t] = best_order[t]
                pos_c[best_order[t]] = t
            bf = st[7] != 0
            pk, ar, n_c, done = decode(order_c, 0, pos_c, starts, ends, sizes, aligns, offsets_c,
                                       tops_c, area_c, cl_lo, cl_hi, cl_s, cl_e, cl_id, st[2], bf,
                                       line, w_peak, True, np.int64(1) << 62, np.inf)
            _save(0, order_c, pos_c, offsets_c, tops_c, area_c, cl_lo, cl_hi, cl_s, cl_e, cl_id, n_c,
                  order, pos, offsets, tops, area, sl_lo, sl_hi, sl_s, sl_e, sl_id)
            st[0] = pk if lex else 0
            fst[0] = ar if lex else ar + w_peak * pk
            st[9] = pk
            st[2] = n_c
            st[6] = 1 if bf else 0
            st[5] = it
            for h in range(hlen):
                hist_k1[h] = st[0]
                hist_k2[h] = fst[0]
            st[4] = it + 1
            continue
        cur_peak = st[9]
        u = uniform(rng)
        p0 = m
        if u < p_swp:
            band = (cur_peak - line) // band_div
            if band < 1:
                band = 1
            nc = 0
            for t in range(1, m):
                r = order[t]
                if offsets[r] + sizes[r] > cur_peak - band:
                    crit[nc] = t
                    nc += 1
            if nc > 0:
                i = crit[randint(rng, nc)]
                j = randint(rng, i)
                if blame:
                    # the earlier-placed rows that meet row order[i] in time and lie below it
                    r = order[i]
                    nb = 0
                    for q in range(st[2]):
                        if sl_lo[q] >= offsets[r]:
                            break
                        rq = sl_id[q]
                        if pos[rq] >= 0 and pos[rq] < i and sl_s[q] < ends[r] and starts[r] < sl_e[q]:
                            nb += 1
                            if randint(rng, nb) == 0:
                                j = pos[rq]
                if u < p_ins:
                    r = order_c[i]
                    for t in range(i, j, -1):
                        order_c[t] = order_c[t - 1]
                        pos_c[order_c[t]] = t
                    order_c[j] = r
                    pos_c[r] = j
                else:
                    _swap(order_c, pos_c, i, j)
                p0 = j
        elif u < p_rsw:
            if m > 1:
                w = m // 8 + 1
                i = randint(rng, m - 1)
                j = i + 1 + randint(rng, min(w, m - 1 - i))
                _swap(order_c, pos_c, i, j)
                p0 = i
        elif u < p_flip:
            bf = not bf
            p0 = 0
        elif m > 1:
            i = randint(rng, m)
            j = randint(rng, m - 1)
            if j >= i:
                j += 1
            r = order_c[i]
            if j < i:
                for t in range(i, j, -1):
                    order_c[t] = order_c[t - 1]
                    pos_c[order_c[t]] = t
            else:
                for t in range(i, j):
                    order_c[t] = order_c[t + 1]
                    pos_c[order_c[t]] = t
            order_c[j] = r
            pos_c[r] = j
            p0 = min(i, j)
        if p0 >= m:
            st[4] = it + 1
            continue
        hv = it % hlen
        th1 = hist_k1[hv]
        th2 = hist_k2[hv]
        if _worse(st[0], fst[0], th1, th2):
            th1 = st[0]
            th2 = fst[0]
        pk, ar, n_c, done = decode(order_c, p0, pos_c, starts, ends, sizes, aligns, offsets_c, tops_c,
                                   area_c, cl_lo, cl_hi, cl_s, cl_e, cl_id, st[2], bf, line, w_peak,
                                   lex, th1, th2)
        k1 = pk if lex else 0
        k2 = ar if lex else ar + w_peak * pk
        if done == m and not _worse(k1, k2, th1, th2):
            _save(p0, order_c, pos_c, offsets_c, tops_c, area_c, cl_lo, cl_hi, cl_s, cl_e, cl_id, n_c,
                  order, pos, offsets, tops, area, sl_lo, sl_hi, sl_s, sl_e, sl_id)
            st[0] = k1
            fst[0] = k2
            st[9] = pk
            st[2] = n_c
            st[6] = 1 if bf else 0
            st[8] += 1
            if pk < st[1] or (pk == st[1] and k2 < fst[1]):
                if pk < st[1]:
                    st[5] = it
                st[1] = pk
                fst[1] = k2
                st[7] = st[6]
                best_order[:] = order
                for r in order:
                    best_offsets[r] = offsets[r]
        else:
            _save(p0, order, pos, offsets, tops, area, sl_lo, sl_hi, sl_s, sl_e, sl_id, st[2],
                  order_c, pos_c, offsets_c, tops_c, area_c, cl_lo, cl_hi, cl_s, cl_e, cl_id)
        hist_k1[hv] = st[0]
        hist_k2[hv] = fst[0]
        st[4] = it + 1
    return st[4]
