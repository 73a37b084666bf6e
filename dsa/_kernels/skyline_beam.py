"""Skyline beam search kernel: the skyline dive's states, searched breadth-first with a width.

The states and moves are those of :func:`dsa._kernels.skyline.dive` (the lowest run of the skyline,
or the zero-slack corner with the fewest candidates, covered by an unplaced buffer, or raised as
waste where there is slack), with the same pruning (:func:`dsa._kernels.skyline._dead`). Where a
dive commits to its first moves and backtracks through the last ones, a beam keeps ``width`` states
side by side, level by level (one move per level): every child of every state is generated, dead
ones are dropped at once, states reached twice (the same skyline and buffers placed, by Zobrist
hash) are kept once, and the ``width`` best survive, at most ``per_parent`` of them from one parent
so that the beam does not collapse onto one branch. Best means the fewest runs in the skyline (of
columns with something left to place): a skyline of few, wide steps leaves room for many buffers,
one of many narrow wells leaves room for few; random tie-breaks. Beam search: B. T. Lowerre, "The
HARPY speech recognition system", PhD thesis, Carnegie Mellon University, 1976; for packing, e.g.
I. Araya and M.-C. Riff, "A beam search approach to the container loading problem", Computers &
Operations Research 43, 2014.

Its use is the search at the lower bound (:func:`dsa.strategies._skyline.bound_look`), where a
wasted byte ends a branch and a dive's early mistakes are found only far below them: on rectangle
cuts of 1,000-1,500 buffers on a fine grid, a beam of a few hundred states plans at the bound where
restarted dives find nothing in 20 s. It is incomplete (a beam that dies out proves nothing).

Each child is checked by ``_dead`` once, when it is generated: a state keeps the well that check
found (where it branches when expanded) and the runs of its skyline (a child's are its parent's
plus the change on the columns it moved, :func:`_starts`), so that expanding it costs a copy of its
arrays rather than a second pass over the columns.

Complexity: per level, O(width x (c (T + c) + n)) for ``T`` columns, ``n`` buffers and ``c``
candidates per state; memory O(width x (n + T)) plus back pointers O(width x (n + T)).
"""
import numpy as np

from dsa._kernels import kernel, njit
from dsa._kernels.rng import uniform
from dsa._kernels.skyline import _alike, _branch_point, _covers, _dead, _mix, _waste_level


@kernel("i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8", "i8", "i8", "i8", "i8",
        "u8[]", "f8", "u8[]r", "b1", "i8", "i8[]", nogil=True)  # (beams of several skylines run on threads)
def beam(cs, ce, sz, al, bs_ptr, bs_rows, be_ptr, be_rows, T, cap, width, per_parent, work_limit, rng, noise, keys,
         path, levels, offsets):
    """One beam search for a plan of peak <= ``cap``; returns ``(status, nodes)``.

    Parameters
    ----------
    cs, ce, sz, al, bs_ptr, bs_rows, be_ptr, be_rows, T, cap
        As for :func:`dsa._kernels.skyline.dive` (no kept buffers, no ceiling).
    width : int
        States kept per level (>= 1).
    per_parent : int
        At most this many of them children of one state (>= 1).
    work_limit : int
        A limit on the work, in column steps (as the dive's).
    rng : uint64 array of length 1
        Random state of the tie-breaks.
    noise : float
        Weight of the random part of a state's score (below 1: ties only).
    keys : uint64 array
        A random key per buffer (the states' hashes).
    path : bool
        As for the dive.
    levels : int
        Levels the back pointers hold (moves to a plan: one per buffer and one per wasted step).
    offsets : int64 array
        Filled with the plan when one is found.

    Returns
    -------
    status : int
        1: a plan (in ``offsets``); 0: the beam died out (no proof of anything); -1: work limit;
        -2: more levels than ``levels`` (the caller grows it and searches again).
    nodes : int
        States generated.
    """
    n = len(sz)
    K = width
    # the states of a level, in generation g of each array (the next level's in 1 - g): skyline and
    # bytes left to place over each column, buffers placed, hash, buffers placed (count). A column's
    # slack is cap minus both: a buffer placed on a run of one height raises the skyline by what it
    # takes from the bytes left, and waste raises it by what it takes from the slack
    H = np.zeros((2, K, T), np.int64)
    R = np.zeros((2, K, T), np.int64)
    P = np.zeros((2, K, n), np.bool_)
    HK = np.zeros((2, K), np.uint64)
    CNT = np.zeros((2, K), np.int64)
    WL = np.zeros((2, K, 5), np.int64)  # the well _dead found in the state (where it branches)
    RU = np.zeros((2, K), np.int64)  # the runs of its skyline (its score, less the noise)
    g = 0
    par = np.zeros((levels, K), np.int32)
    act = np.zeros((levels, K), np.int32)  # the buffer placed, or -1 (waste)
    lvl_at = np.zeros((levels, K), np.int64)  # its offset
    rcap = np.full(n, cap, np.int64)
    hk = _mix(0, cap)
    for r in range(n):
        for t in range(cs[r], ce[r]):
            R[0, 0, t] += sz[r]
    for t in range(T):
        if cap - R[0, 0, t] < 0 and R[0, 0, t] > 0:
            return 0, 0
        hk ^= _mix(t, 0)
    HK[0, 0] = hk
    nb = 1
    if n == 0:
        return 1, 0
    h = np.zeros(T, np.int64)
    rem = np.zeros(T, np.int64)
    slack = np.zeros(T, np.int64)
    placed = np.zeros(n, np.bool_)
    well = np.zeros(5, np.int64)
    probe = np.zeros(5, np.int64)
    cost = np.zeros(1, np.int64)  # (the steps of _dead beyond one pass over the columns)
    reach = np.zeros(T + 1, np.bool_)
    for t in range(T):
        rem[t] = R[0, 0, t]
        slack[t] = cap - rem[t]
    if _dead(cs, ce, sz, al, bs_ptr, bs_rows, be_ptr, be_rows, T, rcap, h, rem, slack, placed, well, True, reach,
             path, cost):
        return 0, 0
    WL[0, 0, :] = well
    RU[0, 0] = _runs(T, h, rem)
    maxc = 16 * K + 64
    c_par = np.zeros(maxc, np.int64)
    c_act = np.zeros(maxc, np.int64)
    c_lvl = np.zeros(maxc, np.int64)
    c_a = np.zeros(maxc, np.int64)
    c_sc = np.zeros(maxc, np.float64)
    c_hk = np.zeros(maxc, np.uint64)
    c_well = np.zeros((maxc, 5), np.int64)
    c_ru = np.zeros(maxc, np.int64)
    tsize = 1
    while tsize < 4 * K:
        tsize *= 2
    table = np.zeros(tsize, np.uint64)
    tmask = np.uint64(tsize - 1)
    taken = np.zeros(K, np.int64)
    big = np.int64(1) << 62
    nodes = 0
    work = 0
    for lev in range(levels):
        nc = 0
        for k in range(nb):
            if CNT[g, k] == n:
                # a plan: follow the back pointers
                j = k
                for v in range(lev - 1, -1, -1):
                    r = act[v, j]
                    if r >= 0:
                        offsets[r] = lvl_at[v, j]
                    j = par[v, j]
                return 1, nodes
            work += 3 * T + n
            if work > work_limit:
                return -1, nodes
            for t in range(T):
                h[t] = H[g, k, t]
                rem[t] = R[g, k, t]
                slack[t] = cap - h[t] - rem[t]
            for r in range(n):
                placed[r] = P[g, k, r]
            well[:] = WL[g, k, :]  # (every state kept was found alive by _dead, which left its well here)
            # the branching point, as the dive's (mrv 3): the lowest, leftmost run, or the zero-slack
            # corner with the fewest candidates
            a, b, hmin, side = _branch_point(T, h, rem, well, 3)
            k0 = be_ptr[b] if side == 1 else bs_ptr[a]
            k1 = be_ptr[b + 1] if side == 1 else bs_ptr[a + 1]
            for q in range(k0, k1):
                r = be_rows[q] if side == 1 else bs_rows[q]
                if not _covers(r, a, b, hmin, cs, ce, sz, al, rcap, placed):
                    continue
                twin = False  # (a buffer identical to one tried before here: the same child)
                for q2 in range(k0, q):
                    r2 = be_rows[q2] if side == 1 else bs_rows[q2]
                    if not placed[r2] and _alike(r2, r, cs, ce, sz, al):
                        twin = True
                        break
                if twin:
                    continue
                work += 3 * T + 4 * (ce[r] - cs[r]) + (k1 - k0)  # (the pruning, the score, the move)
                top = hmin + sz[r]
                ck = HK[g, k] ^ keys[r]
                ru = RU[g, k] - _starts(T, h, rem, cs[r], ce[r])
                for t in range(cs[r], ce[r]):
                    ck ^= _mix(t, h[t]) ^ _mix(t, top)
                    h[t] = top
                    rem[t] -= sz[r]
                placed[r] = True
                nodes += 1
                ru += _starts(T, h, rem, cs[r], ce[r])
                alive = not _dead(cs, ce, sz, al, bs_ptr, bs_rows, be_ptr, be_rows, T, rcap, h, rem, slack, placed,
                                  probe, True, reach, path, cost)
                work += cost[0]
                cost[0] = 0
                if alive and nc < maxc:
                    c_par[nc] = k
                    c_act[nc] = r
                    c_lvl[nc] = hmin
                    c_sc[nc] = ru - noise * uniform(rng)
                    c_hk[nc] = ck
                    c_well[nc, :] = probe
                    c_ru[nc] = ru
                    nc += 1
                for t in range(cs[r], ce[r]):
                    h[t] = hmin
                    rem[t] += sz[r]
                placed[r] = False
                if work > work_limit:
                    return -1, nodes
            if side == 0:
                # waste: raise column a to the lowest level where something can cover it (as the dive)
                lvl, steps = _waste_level(a, hmin, cs, ce, sz, al, bs_ptr, bs_rows, rcap, h, rem, placed)
                work += steps
                if lvl < big and slack[a] >= lvl - hmin and nc < maxc:
                    ru = RU[g, k] - _starts(T, h, rem, a, a + 1)
                    h[a] = lvl
                    slack[a] -= lvl - hmin
                    ru += _starts(T, h, rem, a, a + 1)
                    work += T
                    nodes += 1
                    dead = _dead(cs, ce, sz, al, bs_ptr, bs_rows, be_ptr, be_rows, T, rcap, h, rem, slack, placed,
                                 probe, True, reach, path, cost)
                    work += cost[0]
                    cost[0] = 0
                    if not dead:
                        c_par[nc] = k
                        c_act[nc] = -1
                        c_lvl[nc] = lvl
                        c_a[nc] = a
                        c_sc[nc] = ru + 0.5 - noise * uniform(rng)
                        c_hk[nc] = HK[g, k] ^ _mix(a, hmin) ^ _mix(a, lvl)
                        c_well[nc, :] = probe
                        c_ru[nc] = ru
                        nc += 1
                    h[a] = hmin
                    slack[a] += lvl - hmin
        if nc == 0:
            return 0, nodes
        # the next level: the best children (fewest runs), each state once, at most per_parent of a parent
        g2 = 1 - g
        order = np.argsort(c_sc[:nc])
        table[:] = 0
        taken[:nb] = 0
        nb2 = 0
        for i in order:
            if nb2 >= K:
                break
            k = c_par[i]
            if taken[k] >= per_parent:
                continue
            key = c_hk[i] | np.uint64(1)
            slot = key & tmask
            seen = False
            while table[slot] != 0:
                if table[slot] == key:
                    seen = True
                    break
                slot = (slot + np.uint64(1)) & tmask
            if seen:
                continue
            table[slot] = key
            taken[k] += 1
            work += 3 * T + n
            for t in range(T):
                H[g2, nb2, t] = H[g, k, t]
                R[g2, nb2, t] = R[g, k, t]
            for r in range(n):
                P[g2, nb2, r] = P[g, k, r]
            r = c_act[i]
            CNT[g2, nb2] = CNT[g, k]
            if r >= 0:
                for t in range(cs[r], ce[r]):
                    H[g2, nb2, t] = c_lvl[i] + sz[r]
                    R[g2, nb2, t] -= sz[r]
                P[g2, nb2, r] = True
                CNT[g2, nb2] += 1
                lvl_at[lev, nb2] = c_lvl[i]
            else:
                H[g2, nb2, c_a[i]] = c_lvl[i]
            act[lev, nb2] = r
            par[lev, nb2] = k
            HK[g2, nb2] = c_hk[i]
            WL[g2, nb2, :] = c_well[i]
            RU[g2, nb2] = c_ru[i]
            nb2 += 1
        g = g2
        nb = nb2
        if work > work_limit:
            return -1, nodes
    return -2, nodes


@njit(cache=True)
def _starts(T, h, rem, a, b):
    """The runs of :func:`_runs` that start at columns ``a`` to ``b`` (inclusive, within ``T``): all
    that a move on columns ``[a, b)`` can change."""
    f = 0
    for t in range(a, min(b + 1, T)):
        if rem[t] > 0 and (t == 0 or rem[t - 1] == 0 or h[t - 1] != h[t]):
            f += 1
    return f


@njit(cache=True)
def _runs(T, h, rem):
    """The runs of equal height in the skyline ``h`` over the columns with something left to place."""
    f = 0
    prev = np.int64(-1)
    for t in range(T):
        if rem[t] > 0:
            if h[t] != prev:
                f += 1
            prev = h[t]
        else:
            prev = -1
    return f
