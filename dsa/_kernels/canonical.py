"""Private numba kernel: node-limited depth-first search over canonical placements.

The search decides "is there a plan whose peak is at most ``cap``?" for one time-connected group of
buffers, after the ideas of MiniMalloc (M. D. Moffitt, "MiniMalloc: A Lightweight Memory Allocator for
Hardware-Accelerated Machine Learning", ASPLOS 2023): buffers are placed in non-decreasing
``(offset, rank)`` order, each at the lowest offset its already placed time-neighbours allow (on the
floor or directly on top of one of them), which reaches every *canonical* plan; partial plans are
pruned by section inference, by a dominance rule and by a rule on buffers whose final offset is
already determined, and the remaining buffers are split into independent groups whenever no
unplaced buffer crosses a section boundary.

Terms. Time is cut into *sections* at every distinct start and end; buffer ``i`` lives in sections
``slo[i] .. shi[i]-1``. ``key(i) = (lowest offset i can take now, rank[i])``; ranks are distinct,
so keys are distinct. A plan is *stable* when no buffer can move down; every feasible instance has a
stable plan, and the search follows the stable plan's key order, which is why none of the rules
below can cut away the last stable plan:

* canonical order: a placement's key exceeds the previous placement's key (within one group);
* dominance: a free buffer ``b`` is skipped when its offset is at or above ``low(y) + size(y)`` of an
  unplaced free buffer ``y``, since ``y`` would then fit underneath and the plan is not stable;
* determined buffers: a fixed buffer, or one with no unplaced time-neighbour, ends at exactly its
  current key; if such a key is below the last placement's key the node is dead, and no candidate
  with a larger key is tried (this generalises MiniMalloc's "hatless" pruning);
* section inference: in every section of the group, the unplaced buffers go at or above a *floor*
  (the offset of the last placement, since keys only grow in a group, and the lowest offset any of
  them can still take), and their sizes must fit between it and ``cap``. Two cheap tests decide it
  exactly. (1) ``o`` plus the group's largest section total must fit, for a try at offset ``o``
  (on the tried buffer's own sections, ``o + size + total - size`` is the same sum): the frame drops
  the candidates that fail when it collects them. (2) After a placement, a section fails only where
  a neighbour's lowest offset rose, and only if no unplaced buffer there can still go at or below
  ``cap - total``: those sections are scanned for one, and a neighbour whose new lowest offset
  plus the group's largest total fits cannot make any of its sections fail. Every accepted
  placement leaves each section of its group with such a buffer (or none unplaced), so no floor
  needs to be stored;
* decomposition: a group whose remaining buffers split at section boundaries that no unplaced buffer
  crosses is solved piece by piece; if one piece has no plan, the whole group has none and the
  search jumps back past the other pieces.

* symmetry breaking: identical free buffers (same sections, size, alignment) are placed in rank
  order; swapping two of them in a stable plan gives a stable plan, so one with them in rank order
  (lower rank lower) survives;
* dynamic preorder: each new piece of a decomposition re-ranks its buffers (a permutation of their
  ranks, so ranks stay distinct) with the "largest section total" key recomputed from the unplaced
  sizes, as MiniMalloc re-sorts each sub-partition; the canonical order restarts in a new piece,
  and every change is undone on backtracking. Twins keep their relative order (equal keys, ties
  kept), so the symmetry rule stays consistent.

Only when the search is exhausted (no node limit hit) is the answer "infeasible" returned. The
search's state lives in arrays its caller owns (:func:`new_state`), so a search stopped at its node
limit, or by another thread's stop flag, resumes exactly where it stopped.

Complexity: entering a frame costs O(m + S) (its candidates are collected once, on a stack above
its parent's); each try costs O(candidates + deg + the spans and section lists of the neighbours
whose lowest offset rose high enough to matter, see (2)) for ``m``
buffers and ``S`` sections; the search is exponential in the worst case and is cut off after
``node_limit`` nodes. Memory is O(m^2 / 2) for the candidate stack (virtual: only the part the
current path uses is touched) plus O(m + S + sum(deg) + sum(spans)).
"""
from __future__ import annotations

import numpy as np
from dsa._kernels import kernel, njit

from dsa._kernels.sorting import argsort_stable

FOUND = 0
INFEASIBLE = 1
LIMIT = 2


@kernel("i8", "i8", "i8", "i8")
def _key_less(a_off, a_rank, b_off, b_rank):
    return a_off < b_off or (a_off == b_off and a_rank < b_rank)


@kernel("i8", "i8[]", "i8[]", "i8[]", "i8[]", "i8[]", "i8[]", "i8[]", "i8[]", "i8[]", "i8[]", "i8[]", "i8[]", "i8", "i8")
def _undo(c, off, minoff, total, cuts, unb, sz, slo, shi, adj_ptr, adj, mlog_b, mlog_v, m_from, m_to):
    """Take buffer ``c`` off the plan, replaying the undo log ``[m_from, m_to)`` backwards."""
    for k in range(m_to - 1, m_from - 1, -1):
        minoff[mlog_b[k]] = mlog_v[k]
    for s in range(slo[c], shi[c]):
        total[s] += sz[c]
    for s in range(slo[c], shi[c] - 1):
        cuts[s] += 1
    for k in range(adj_ptr[c], adj_ptr[c + 1]):
        unb[adj[k]] += 1
    off[c] = -1


@kernel("i8[]", "i8[]", "i8[]", "i8", "i8")
def _keep_nonempty(nonempty, p_lo, p_hi, ptop, npieces):
    """Keep the pieces ``ptop ..`` whose ``nonempty`` flag is set, in order; returns how many."""
    k = 0
    for q in range(npieces):
        if nonempty[q]:
            p_lo[ptop + k] = p_lo[ptop + q]
            p_hi[ptop + k] = p_hi[ptop + q]
            k += 1
    return k


@kernel("i8[]", "i8[]r", "i8", "i8", "i8", "i8[]r", "i8[]r", "i8[]r", "i8[,]r", "i8", "i8[]", "i8[]", "i8")
def _rerank(rank, ulist, ucount, lo, hi, slo, shi, total, keys, tpos, rk_b, rk_v, rktop):
    """Re-rank the unplaced buffers of the group ``[lo, hi)`` by the static preorder ``keys`` (larger
    first, row by row), with row ``tpos`` replaced by the largest *current* section total the buffer
    meets; ties keep the current order. The group's ranks are permuted among themselves (so ranks stay
    distinct) and every change is logged. Returns the new log top (unchanged when the log is full)."""
    g = np.empty(ucount, np.int64)
    k = 0
    for q in range(ucount):
        y = ulist[q]
        if shi[y] > lo and slo[y] < hi:
            g[k] = y
            k += 1
    if k < 2 or rktop + k > rk_b.size:
        return rktop
    g = g[:k]
    cur = np.empty(k, np.int64)
    for q in range(k):
        cur[q] = rank[g[q]]
    idx = argsort_stable(cur)  # ranks are distinct: the one order
    vals = np.empty(k, np.int64)
    for j in range(keys.shape[0] - 1, -1, -1):
        for q in range(k):
            y = g[idx[q]]
            if j == tpos:
                t = 0
                for s in range(slo[y], shi[y]):
                    if total[s] > t:
                        t = total[s]
                vals[q] = -t
            else:
                vals[q] = -keys[j, y]
        perm = argsort_stable(vals)
        idx = idx[perm]
    rs = cur[argsort_stable(cur)]
    for q in range(k):
        y = g[idx[q]]
        if rank[y] != rs[q]:
            rk_b[rktop] = y
            rk_v[rktop] = rank[y]
            rktop += 1
            rank[y] = rs[q]
    return rktop


# Layout of a search's state (see :func:`new_state`): slot 0 holds the scalars below, slot 1 the
# ranks (re-ranked in place), the rest the arrays of the depth-first search.
_PHASE, _RESULT, _DEPTH, _ENTERING, _RKTOP, _MTOP, _PTOP, _RTOP, _UCOUNT, _STAMP, _NODES = range(11)
NSLOTS = 36
FRESH, RUNNING, DONE = 0, 1, 2


@kernel("i8[]", "i8", "i8", "i8", "i8", "i8", "i8", "i8", "i8")
def _pause(sc, depth, rktop, mtop, ptop, rtop, ucount, stamp, nodes):
    """Keep the scalars of a search stopped before its next try (it resumes there)."""
    sc[_DEPTH] = depth
    sc[_ENTERING] = 0
    sc[_RKTOP] = rktop
    sc[_MTOP] = mtop
    sc[_PTOP] = ptop
    sc[_RTOP] = rtop
    sc[_UCOUNT] = ucount
    sc[_STAMP] = stamp
    sc[_NODES] += nodes


def new_state(rank, n_sections, n_adj, rerank):
    """Arrays that hold one search between calls of :func:`canonical_search` (fresh: not started).

    ``rank`` is copied (the search re-ranks its own copy). The state of a search that returned
    ``LIMIT`` resumes where it stopped: calls with node limits ``a`` then ``b`` explore exactly the
    nodes of one call with limit ``a + b``.
    """
    m = len(rank)
    S = n_sections
    i64 = np.int64
    st = [np.zeros(16, i64), np.array(rank, dtype=i64, copy=True)]
    rk = 64 * m + 1024 if rerank else 1
    st += [np.empty(rk, i64), np.empty(rk, i64)]                       # 2, 3: rank undo log
    st += [np.zeros(m + 1, i64), np.zeros(m + 1, i64)]                 # 4, 5: f_rk, f_new
    st += [np.empty(m, i64) for _ in range(5)]                         # 6-10: off, ulist, upos, minoff, unb
    st += [np.empty(S, i64), np.empty(max(S - 1, 1), i64)]             # 11, 12: total, cuts
    st += [np.empty(n_adj + 1, i64), np.empty(n_adj + 1, i64)]         # 13, 14: minoff undo log
    st += [np.empty(S, i64), np.empty(S, i64)]                         # 15, 16: mark, piece_of
    st += [np.empty(m + 1, i64) for _ in range(7)]                     # 17-23: frames
    st += [np.empty(m + 2, i64) for _ in range(4)]                     # 24-27: decomposition records
    st += [np.empty(S + 2 * m + 4, i64), np.empty(S + 2 * m + 4, i64)]  # 28, 29: pieces
    st += [np.empty(S + 1, i64)]                                       # 30: nonempty
    st += [np.empty(m * (m + 1) // 2 + 1, i64)]                        # 31: candidate stack
    st += [np.empty(m + 1, i64) for _ in range(4)]                     # 32-35: f_cs, f_ce, f_vt, f_tm
    assert len(st) == NSLOTS
    return tuple(st)


@njit(cache=True, nogil=True)  # nogil: probes run in threads side by side (dsa.strategies._canonical_search)
def canonical_search(sz, al, fx, slo, shi, adj_ptr, adj, sec_ptr, sec_buf, cap,
                     node_limit, out, keys, tpos, twin, rerank, state, stop):
    """Decide whether the buffers fit in ``cap``, exploring at most ``node_limit`` more nodes.

    Parameters
    ----------
    sz, al, fx : int64 arrays of length m
        Sizes (all > 0), alignments (>= 1) and fixed offsets (-1: free).
    slo, shi : int64 arrays
        Section span ``[slo, shi)`` of each buffer; sections are numbered ``0 .. S-1``.
    adj_ptr, adj : int64 arrays
        CSR lists of the time-overlapping buffers of each buffer.
    sec_ptr, sec_buf : int64 arrays
        CSR lists of the buffers alive in each section (``S + 1`` pointers).
    cap : int
        The capacity to decide (the same in every call on one state).
    node_limit : int
        The most placements to try in this call.
    out : int64 array of length m
        Receives the offsets when a plan is found.
    keys : int64 array of shape (K, m)
        The static preorder that the state's ranks were made from (row 0 most significant, larger
        first); used to re-rank the buffers of each new group of a decomposition.
    tpos : int
        Row of ``keys`` that stands for "largest section total met": it is recomputed from the
        unplaced sizes when a group is re-ranked (-1: never re-rank).
    twin : int64 array of length m
        For a free buffer, the free buffer of next lower rank with the same sections, size and
        alignment (-1: none); a buffer is never placed before its twin (symmetry breaking).
    rerank : int
        0: static ranks; 1: re-rank each piece of a decomposition; 2: also re-rank when a placement
        only narrows the group (the canonical order then restarts at the placement's offset).
    state : tuple of int64 arrays
        The search, made by :func:`new_state` with the static ranks (distinct; the tie-break of
        the dynamic order, smaller first) and the same ``rerank``. A call on a state that stopped
        at its node limit goes on from there; a finished state returns its answer again (0 nodes).
    stop : int64 array of length 1
        Another thread may set ``stop[0] != 0`` to end the call early (checked every 256 nodes;
        the state stays resumable and the call returns ``LIMIT``).

    Returns
    -------
    status : int
        ``FOUND`` (0), ``INFEASIBLE`` (1, proven by an exhausted search) or ``LIMIT`` (2).
    nodes : int
        Placements tried in this call.
    """
    (sc, rank, rk_b, rk_v, f_rk, f_new, off, ulist, upos, minoff, unb, total, cuts,
     mlog_b, mlog_v, mark, piece_of, f_buf, f_lo, f_hi, f_ko, f_kr, f_bar, f_m0,
     r_depth, r_pbeg, r_pend, r_pcur, p_lo, p_hi, nonempty, cstack, f_cs, f_ce, f_vt, f_tm) = state
    m = sz.size
    S = sec_ptr.size - 1
    if sc[_PHASE] == DONE:
        return sc[_RESULT], 0
    if tpos < 0:
        rerank = 0
    big = np.int64(2**62)
    nodes = 0
    if sc[_PHASE] == FRESH:
        sc[_PHASE] = DONE
        sc[_RESULT] = INFEASIBLE
        if m == 0:
            sc[_RESULT] = FOUND
            return FOUND, 0
        for i in range(m):
            off[i] = -1
            ulist[i] = i
            upos[i] = i
            minoff[i] = 0
            unb[i] = adj_ptr[i + 1] - adj_ptr[i]
            if fx[i] >= 0 and fx[i] + sz[i] > cap:
                return INFEASIBLE, 0
            if sz[i] > cap:
                return INFEASIBLE, 0
        ucount = m
        for s in range(S):
            total[s] = 0
            mark[s] = 0
            piece_of[s] = -1
        for s in range(cuts.size):
            cuts[s] = 0
        for i in range(m):
            for s in range(slo[i], shi[i]):
                total[s] += sz[i]
            for s in range(slo[i], shi[i] - 1):
                cuts[s] += 1
        for s in range(S):
            if total[s] > cap:
                return INFEASIBLE, 0
        rktop = 0
        mtop = 0
        stamp = 0
        ptop = 0
        # root record: the pieces of [0, S) cut where nothing crosses
        for q in range(S + 1):
            nonempty[q] = 0
        npieces = 0
        a = 0
        for s in range(S):
            piece_of[s] = npieces
            if s == S - 1 or cuts[s] == 0:
                p_lo[ptop + npieces] = a
                p_hi[ptop + npieces] = s + 1
                npieces += 1
                a = s + 1
        for i in range(m):
            nonempty[piece_of[slo[i]]] = 1
        r_depth[0] = -1
        r_pbeg[0] = ptop
        k = _keep_nonempty(nonempty, p_lo, p_hi, ptop, npieces)
        r_pend[0] = ptop + k
        r_pcur[0] = ptop
        ptop += k
        rtop = 1
        depth = 0
        # enter frame 0
        f_lo[0] = p_lo[0]
        f_hi[0] = p_hi[0]
        f_ko[0] = -1
        f_kr[0] = -1
        f_bar[0] = 0
        f_new[0] = 1
        f_buf[0] = -1
        entering = True
        sc[_PHASE] = RUNNING
    else:
        depth = sc[_DEPTH]
        entering = sc[_ENTERING] != 0
        rktop = sc[_RKTOP]
        mtop = sc[_MTOP]
        ptop = sc[_PTOP]
        rtop = sc[_RTOP]
        ucount = sc[_UCOUNT]
        stamp = sc[_STAMP]
    while True:
        d = depth
        lo = f_lo[d]
        hi = f_hi[d]
        if entering:
            entering = False
            f_rk[d] = rktop
            if rerank and f_new[d]:
                rktop = _rerank(rank, ulist, ucount, lo, hi, slo, shi, total, keys, tpos,
                                rk_b, rk_v, rktop)
            # the frame's candidates are fixed while it lives (every try is undone before the
            # next): the unplaced buffers of the group with a key above the frame's start, below
            # the dominance bound mh and not above the first determined key, whose twin is placed.
            # They go on a stack above the parent frame's; each placement takes one off.
            # one pass over the unplaced buffers of the group: the dominance bound mh, the first
            # determined key (ho, hr), and the buffers above the frame's start whose twin is
            # placed; a second pass over those few drops the ones mh or (ho, hr) rule out, and
            # sets aside (counted, not kept) those that fail section inference (1): a try at offset
            # o fails it exactly when o + (the largest section total of the group) > cap
            tmax = 0
            for s in range(lo, hi):
                if total[s] > tmax:
                    tmax = total[s]
            f_tm[d] = tmax
            mh = big
            ho = big
            hr = big
            cs = f_ce[d - 1] if d > 0 else 0
            ce = cs
            lko = f_ko[d]
            lkr = f_kr[d]
            for k in range(ucount):
                y = ulist[k]
                if shi[y] <= lo or slo[y] >= hi:
                    continue
                if fx[y] >= 0:
                    yo = fx[y]
                else:
                    yo = minoff[y]
                    v = yo + sz[y]
                    if v < mh:
                        mh = v
                if fx[y] >= 0 or unb[y] == 0:
                    if _key_less(yo, rank[y], ho, hr):
                        ho = yo
                        hr = rank[y]
                if yo >= mh or not _key_less(lko, lkr, yo, rank[y]):
                    continue  # (mh only falls during the pass)
                if twin[y] >= 0 and off[twin[y]] < 0:
                    continue
                cstack[ce] = y
                ce += 1
            w = cs
            vt = 0
            for k in range(cs, ce):
                y = cstack[k]
                yo = fx[y] if fx[y] >= 0 else minoff[y]
                if yo < mh and not _key_less(ho, hr, yo, rank[y]):
                    if yo + tmax > cap:
                        vt += 1  # fails the section inference: counted, never tried
                    else:
                        cstack[w] = y
                        w += 1
            ce = w
            f_vt[d] = vt
            f_cs[d] = cs
            f_ce[d] = ce
        # next candidate: the smallest key left on the frame's stack (all are above the last tried)
        best = -1
        bk = -1
        bo = big
        br = big
        for k in range(f_cs[d], f_ce[d]):
            y = cstack[k]
            yo = fx[y] if fx[y] >= 0 else minoff[y]
            if _key_less(yo, rank[y], bo, br):
                best = y
                bk = k
                bo = yo
                br = rank[y]
        if best < 0 and f_vt[d] > 0:
            # the candidates that fail the section inference have the largest keys of the frame:
            # they count as tried nodes now, in bulk (so node counts and node-limited stops are
            # those of trying them one by one), and are never placed
            if nodes >= node_limit or stop[0] != 0:
                _pause(sc, depth, rktop, mtop, ptop, rtop, ucount, stamp, nodes)
                return LIMIT, nodes
            t = min(f_vt[d], node_limit - nodes)
            nodes += t
            f_vt[d] -= t
            continue
        if best < 0:
            # frame exhausted: backtrack
            b = f_bar[d]
            if b >= 0:
                rd = r_depth[b]
                if rd < 0:
                    sc[_PHASE] = DONE
                    sc[_RESULT] = INFEASIBLE
                    sc[_NODES] += nodes
                    return INFEASIBLE, nodes
                for e in range(d - 1, rd, -1):
                    c = f_buf[e]
                    _undo(c, off, minoff, total, cuts, unb, sz, slo, shi, adj_ptr, adj,
                          mlog_b, mlog_v, f_m0[e], f_m0[e + 1])
                    ucount += 1
                rtop = b
                ptop = r_pbeg[b]
                d = rd
            else:
                d = d - 1
            c = f_buf[d]
            _undo(c, off, minoff, total, cuts, unb, sz, slo, shi, adj_ptr, adj,
                  mlog_b, mlog_v, f_m0[d], mtop)
            ucount += 1
            mtop = f_m0[d]
            for k in range(rktop - 1, f_rk[d + 1] - 1, -1):
                rank[rk_b[k]] = rk_v[k]
            rktop = f_rk[d + 1]
            depth = d
            continue
        if nodes >= node_limit or ((nodes & 255) == 0 and stop[0] != 0):
            # stop before placing: a later call recomputes this same candidate and goes on
            _pause(sc, depth, rktop, mtop, ptop, rtop, ucount, stamp, nodes)
            return LIMIT, nodes
        nodes += 1
        c = best
        f_ce[d] -= 1  # off the frame's stack (the last candidate takes its place)
        cstack[bk] = cstack[f_ce[d]]
        f_ko[d] = bo
        f_kr[d] = br
        o = bo
        h = o + sz[c]
        if h > cap:
            continue
        ok = True
        f_buf[d] = c
        f_m0[d] = mtop
        off[c] = o
        ucount -= 1
        last = ulist[ucount]
        pc = upos[c]
        ulist[pc] = last
        upos[last] = pc
        ulist[ucount] = c
        upos[c] = ucount
        # neighbours: raise their lowest offsets, count their unplaced neighbours
        stamp += 1
        for kk in range(adj_ptr[c], adj_ptr[c + 1]):
            y = adj[kk]
            unb[y] -= 1
            if off[y] >= 0:
                continue
            if minoff[y] < h:
                mlog_b[mtop] = y
                mlog_v[mtop] = minoff[y]
                mtop += 1
                v = h
                if fx[y] < 0:
                    r = v % al[y]
                    if r:
                        v += al[y] - r
                    if v + sz[y] > cap:
                        ok = False
                elif v > fx[y]:
                    ok = False
                minoff[y] = v
        for s in range(slo[c], shi[c]):
            total[s] -= sz[c]
        for s in range(slo[c], shi[c] - 1):
            cuts[s] -= 1
        if ok:
            # section inference (2): a section can fail only where a neighbour's lowest offset rose
            # (the minoff log of this placement), outside c's own sections (there it is test (1)),
            # and only if no unplaced buffer there can still go at or below cap - total; a
            # neighbour that can, with the group's largest total, vouches for all its sections
            tm = f_tm[d]
            for s in range(slo[c], shi[c]):
                mark[s] = stamp
            for k in range(f_m0[d], mtop):
                y = mlog_b[k]
                yv = fx[y] if fx[y] >= 0 else minoff[y]
                if yv + tm <= cap:
                    continue
                for s in range(slo[y], shi[y]):
                    if mark[s] == stamp:
                        continue
                    mark[s] = stamp
                    thr = cap - total[s]
                    if yv <= thr:
                        continue
                    witness = False
                    for kk in range(sec_ptr[s], sec_ptr[s + 1]):
                        z = sec_buf[kk]
                        if off[z] < 0 and (fx[z] if fx[z] >= 0 else minoff[z]) <= thr:
                            witness = True
                            break
                    if not witness:  # (y itself is unplaced here, so the section is not empty)
                        ok = False
                        break
                if not ok:
                    break
        if not ok:
            _undo(c, off, minoff, total, cuts, unb, sz, slo, shi, adj_ptr, adj,
                  mlog_b, mlog_v, f_m0[d], mtop)
            ucount += 1
            mtop = f_m0[d]
            continue
        f_m0[d + 1] = mtop
        # what is left of the group, and does it split?
        newcut = False
        for s in range(slo[c], shi[c] - 1):
            if cuts[s] == 0:
                newcut = True
                break
        nlo = lo
        nhi = hi
        nko = o
        nkr = rank[c]
        nbar = -1
        nnew = False
        left = 0
        if newcut:
            npieces = 0
            a = lo
            for s in range(lo, hi):
                piece_of[s] = npieces
                if s == hi - 1 or cuts[s] == 0:
                    p_lo[ptop + npieces] = a
                    p_hi[ptop + npieces] = s + 1
                    nonempty[npieces] = 0
                    npieces += 1
                    a = s + 1
            for k in range(ucount):
                y = ulist[k]
                if shi[y] > lo and slo[y] < hi:
                    nonempty[piece_of[slo[y]]] = 1
                    left += 1
            k = _keep_nonempty(nonempty, p_lo, p_hi, ptop, npieces)
            if k == 1:
                nlo = p_lo[ptop]
                nhi = p_hi[ptop]
                if rerank == 2:
                    nkr = -1
                    nnew = True
            elif k >= 2:
                r_depth[rtop] = d
                r_pbeg[rtop] = ptop
                r_pend[rtop] = ptop + k
                r_pcur[rtop] = ptop
                ptop += k
                nbar = rtop
                rtop += 1
                nlo = p_lo[r_pbeg[nbar]]
                nhi = p_hi[r_pbeg[nbar]]
                nko = -1
                nkr = -1
                nnew = True
        else:
            for k in range(ucount):
                y = ulist[k]
                if shi[y] > lo and slo[y] < hi:
                    left += 1
                    break
        if left == 0:
            # the current group is done: move to the next piece of the innermost record
            while True:
                r = rtop - 1
                r_pcur[r] += 1
                if r_pcur[r] < r_pend[r]:
                    nlo = p_lo[r_pcur[r]]
                    nhi = p_hi[r_pcur[r]]
                    nko = -1
                    nkr = -1
                    nbar = r
                    nnew = True
                    break
                if r_depth[r] < 0:
                    for i in range(m):
                        out[i] = off[i]
                    sc[_PHASE] = DONE
                    sc[_RESULT] = FOUND
                    sc[_NODES] += nodes
                    return FOUND, nodes
                rtop = r
                ptop = r_pbeg[r]
        depth = d + 1
        f_lo[depth] = nlo
        f_hi[depth] = nhi
        f_ko[depth] = nko
        f_kr[depth] = nkr
        f_bar[depth] = nbar
        f_new[depth] = 1 if nnew else 0
        entering = True
