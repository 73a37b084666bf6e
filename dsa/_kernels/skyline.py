"""Skyline search kernel: a depth-first search that fills the lowest, leftmost gap of a skyline.

The time axis is cut into ``T`` elementary columns (between consecutive distinct start and end
times). The skyline ``h[t]`` is the top of what is placed over column ``t``. Each node takes the
lowest column ``a`` that still has unplaced buffers alive (the leftmost one among equals) and the
maximal run ``[a, b)`` of such columns at that height, and branches over

* the unplaced buffers whose lifetimes lie inside ``[a, b)``, placed at that height (those starting
  at ``a`` first: they leave no hole on the left), and, last,
* "waste": raise the run to the lower of its two neighbours (nothing will ever fill that space).

Buffers keep their lifetimes, so this is the bottom-left rule of skyline packing (Burke, Kendall and
Whitwell, "A new placement heuristic for the orthogonal stock-cutting problem", Operations Research
52(4), 2004) turned into a complete search over canonical plans, as in MiniMalloc (M. D. Moffitt,
ASPLOS 2023). Pruning: the bytes still to place over each column must fit between the skyline and
the capacity (``slack``), so wasted space is charged at once; when the capacity equals the bytes
alive at every instant (a perfect tiling) any waste ends the branch. A run with higher neighbours on
both sides (a closed well) must have its bottom row covered, end to end, by unplaced buffers lying
inside it (or wasted where there is slack): a chain of lifetimes from its left side to its right
side, found by one backward pass over its columns. Of candidates identical in columns, size and
alignment, a node tries only the first: the others lead to the same subtree, relabelled. A ceiling
over each column (the lowest bottom of buffers kept above the ones searched) bounds the capacity
there, so that a band between kept buffers can be re-packed.

A table of dead states (the skyline and the set of buffers placed, hashed as in Zobrist's scheme: A.
L. Zobrist, "A new hashing method with application for game playing", 1970) outlives a dive: a
state searched to the end without a plan, by this dive or an earlier one at the same capacity and
with the same kept buffers, is not searched again whatever path leads back to it (independent
regions of the skyline filled in another order lead to the same state).

One kernel call is one dive with a node limit; the driver restarts it with random tie-breaks.
All arrays; no allocation in the loop.
"""
import numpy as np

from dsa._kernels import kernel, njit
from dsa._kernels.rng import uniform


@njit(cache=True)
def _dead(cs, ce, sz, al, bs_ptr, bs_rows, be_ptr, be_rows, T, rcap, h, rem, slack, placed, well, right, reach, path,
          cost):
    """Whether some corner of the skyline can no longer be filled.

    A run ``[x, y)`` of columns at one height ``H`` whose left neighbour is higher has its bottom-left
    cell covered only by a buffer that starts at column ``x`` (one alive before ``x`` would sit above
    the neighbour); when the slack at ``x`` is 0 the cell cannot stay empty, so such an unplaced buffer
    must exist, ending before the first higher column and fitting under its room (``rcap``: the
    capacity, or a ceiling over its columns where lower). The same holds on the
    right (a buffer ending at ``y``). O(T + buffers starting or ending at the corners).

    With ``path``, a closed well (higher neighbours on both sides) needs a chain of unplaced buffers
    inside it whose lifetimes cover its bottom row end to end, columns with slack excepted; ``reach``
    (length ``T + 1``) is work space. O(T + buffers starting in closed wells) more.

    ``well`` receives ``[x, y, H, count, side]`` of the zero-slack run with higher neighbours on both sides
    (its candidates are final) that has the fewest candidates (``count`` = -1: none such), on its
    left (``side`` 0: buffers starting at ``x``) or, when ``right``, right corner (1: buffers ending
    at ``y``).

    ``cost[0]`` is raised by the steps taken beyond one pass over the columns, in the callers' unit
    of work (a column step): the columns of closed wells and beyond the corners, and each buffer
    looked at (about 2 ns each, against about 3 for a column step: on a rectangle cut of 50,000
    buffers over 700 columns, the dives at the bound looked at 19,000-37,000 buffers a node, placed
    ones too, and took 42-56 us a node for 1,400 column steps).
    """
    well[3] = -1
    steps = 0
    t = 0
    while t < T:
        if rem[t] == 0:
            t += 1
            continue
        H = h[t]
        x = t
        y = t
        while y < T and rem[y] > 0 and h[y] == H:
            y += 1
        closed = (x == 0 or rem[x - 1] == 0 or h[x - 1] > H) and (y == T or rem[y] == 0 or h[y] > H)
        if path and closed:
            # a closed well: its bottom row is covered by buffers lying inside it, end to end (or
            # wasted where there is slack). reach[u]: a chain of such buffers leads from column u to y
            reach[y] = True
            steps += y - x
            for u in range(y - 1, x - 1, -1):
                ok = slack[u] > 0 and reach[u + 1]
                k = bs_ptr[u]
                while not ok and k < bs_ptr[u + 1]:
                    r = bs_rows[k]
                    k += 1
                    steps += 1
                    if not placed[r] and ce[r] <= y and reach[ce[r]] and H + sz[r] <= rcap[r] and (
                            al[r] <= 1 or H % al[r] == 0):
                        ok = True
                reach[u] = ok
            if not reach[x]:
                cost[0] += steps
                return True
        if slack[x] == 0 and (x == 0 or rem[x - 1] == 0 or h[x - 1] > H):
            lim = y
            while lim < T and rem[lim] > 0 and h[lim] <= H:
                lim += 1
            cnt = 0
            steps += lim - y
            for k in range(bs_ptr[x], bs_ptr[x + 1]):
                r = bs_rows[k]
                steps += 1
                if not placed[r] and ce[r] <= lim and H + sz[r] <= rcap[r] and (al[r] <= 1 or H % al[r] == 0):
                    if path and closed and not reach[ce[r]]:
                        continue  # (no chain from its end to the well's right side)
                    cnt += 1
                    if lim != y:
                        break
            if cnt == 0:
                cost[0] += steps
                return True
            if lim == y and (well[3] < 0 or cnt < well[3]):
                well[0] = x
                well[1] = y
                well[2] = H
                well[3] = cnt
                well[4] = 0
        if slack[y - 1] == 0 and (y == T or rem[y] == 0 or h[y] > H):
            lim = x - 1
            while lim >= 0 and rem[lim] > 0 and h[lim] <= H:
                lim -= 1
            cnt = 0
            steps += x - 1 - lim
            for k in range(be_ptr[y], be_ptr[y + 1]):
                r = be_rows[k]
                steps += 1
                if not placed[r] and cs[r] > lim and H + sz[r] <= rcap[r] and (al[r] <= 1 or H % al[r] == 0):
                    cnt += 1
                    if lim != x - 1:
                        break
            if cnt == 0:
                cost[0] += steps
                return True
            if right and lim == x - 1 and (well[3] < 0 or cnt < well[3]):
                well[0] = x
                well[1] = y
                well[2] = H
                well[3] = cnt
                well[4] = 1
        t = y
    cost[0] += steps
    return False


@njit(cache=True)
def _branch_point(T, h, rem, well, mrv):
    """Where a node branches: ``(a, b, hmin, side)``, the lowest, leftmost run ``[a, b)`` of columns
    with something left to place, at height ``hmin`` (side 0: its left corner), or with ``mrv``
    (see :func:`dive`) the zero-slack well that :func:`_dead` left in ``well``."""
    a = -1
    hmin = np.int64(1) << 62
    for t in range(T):
        if rem[t] > 0 and h[t] < hmin:
            hmin = h[t]
            a = t
    b = a
    while b < T and rem[b] > 0 and h[b] == hmin:
        b += 1
    if well[3] >= 0 and ((mrv == 1 and well[3] <= 1) or mrv >= 2):
        # the most constrained zero-slack well instead (a forced move if 1 candidate)
        return well[0], well[1], well[2], well[4]
    return a, b, hmin, np.int64(0)


@njit(cache=True)
def _covers(r, a, b, hmin, cs, ce, sz, al, rcap, placed):
    """Whether the unplaced buffer ``r`` can cover the cell ``(a, hmin)`` of the run ``[a, b)``: its
    lifetime inside the run, its top under its room, ``hmin`` aligned for it."""
    return (not placed[r] and ce[r] <= b and cs[r] >= a and hmin + sz[r] <= rcap[r]
            and (al[r] <= 1 or hmin % al[r] == 0))


@njit(cache=True)
def _alike(q, r, cs, ce, sz, al):
    """Whether buffers ``q`` and ``r`` are interchangeable (the same columns, size and alignment):
    placing one where the other was tried leads to the same subtree, relabelled."""
    return cs[q] == cs[r] and ce[q] == ce[r] and sz[q] == sz[r] and al[q] == al[r]


@njit(cache=True)
def _waste_level(a, hmin, cs, ce, sz, al, bs_ptr, bs_rows, rcap, h, rem, placed):
    """``(level, work)``: the level to raise column ``a`` (at ``hmin``) to when nothing covers the
    cell ``(a, hmin)`` (``1 << 62``: none), and the column steps it took. What can cover column ``a``
    above ``hmin`` is a buffer alive before ``a`` (above the left neighbour) or one starting at ``a``,
    which lands on the highest column of its lifetime: the lowest of these levels."""
    lvl = np.int64(1) << 62
    work = 0
    if a > 0 and rem[a - 1] > 0 and h[a - 1] < lvl:
        lvl = h[a - 1]
    for k in range(bs_ptr[a], bs_ptr[a + 1]):
        r = bs_rows[k]
        if placed[r]:
            continue
        work += ce[r] - cs[r]
        land = hmin
        for t in range(cs[r], ce[r]):
            if h[t] > land:
                land = h[t]
        if al[r] > 1:
            land = (land + al[r] - 1) // al[r] * al[r]
        if hmin < land < lvl and land + sz[r] <= rcap[r]:
            lvl = land
    return lvl, work


@njit(cache=True)
def _mix(t, v):
    """64 hash bits of the pair ``(t, v)`` (splitmix64's finaliser; S. Vigna, after Steele, Lea and
    Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014)."""
    z = np.uint64(t) * np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(v) * np.uint64(0xC2B2AE3D27D4EB4F)
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


@kernel("i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8", "i8", "i8", "i8", "u8[]", "f8",
        "i8[]", "b1[]r", "i8[]r", "i8[]r", "i8", "b1", "b1", "u8[]r", "u8[]", "u8", "i8[]", "i8[]", "i8[]", "b1[]", "i8[]",
        "i8[]", "i8[]", "i8[]", "i8[]", "i8[]", "i8[]", "i8[]", "i8[]", "u8[]", "i8[]", "f8[]",
        nogil=True)  # (dives of several problems run on threads side by side: _skyline.bound_look)
def dive(cs, ce, sz, al, bs_ptr, bs_rows, be_ptr, be_rows, T, cap, node_limit, work_limit, rng, noise, offsets,
         keep, h0, ceil, mrv, path, twins, keys, memo, salt, h, rem, slack, placed, rcap, fr_a, fr_b, fr_h, fr_c0,
         fr_cn, fr_w, fr_i, fr_act, fr_k, cand, score):
    """One depth-first search for a plan of peak <= ``cap``; returns ``(status, nodes)``.

    Parameters
    ----------
    cs, ce : int64 arrays
        First and one-past-last column of each buffer (buffers of size 0 must be left out).
    sz, al : int64 arrays
        Sizes and alignments.
    bs_ptr, bs_rows : int64 arrays
        Buffers grouped by first column: ``bs_rows[bs_ptr[t]:bs_ptr[t + 1]]`` start at column ``t``.
    be_ptr, be_rows : int64 arrays
        The same grouped by end column.
    T : int
        Number of columns.
    cap : int
        Capacity.
    node_limit : int
    work_limit : int
        A limit on the work, counted in column steps (two passes over the columns per node, the
        columns of the buffers each node places or looks at to raise a column, and the columns and
        buffers that the dead-end check :func:`_dead` looks at): a node's cost grows with the
        columns, with long lifetimes and with the buffers, so that a caller with a deadline limits
        this too.
    rng : uint64 array of length 1
        Random state (tie-breaks perturbed by ``noise``).
    noise : float
        Weight of the random part of a candidate's score (0: deterministic).
    offsets : int64 array
        Filled with the plan when one is found (rows in ``keep`` are left as they are).
    keep : bool array
        Buffers already placed (they are not searched).
    h0 : int64 array
        The skyline at the start (the top of the kept buffers over each column).
    ceil : int64 array
        A ceiling over each column (length ``T``): the buffers placed there must end at or below it
        as well as ``cap`` (a value of ``cap`` or more sets none). Kept buffers above a band being
        re-packed leave their lowest bottom here.
    mrv : int
        0: branch on the lowest run; 1: on a zero-slack well with a single candidate (a forced
        move) when there is one; 2: on the zero-slack well with the fewest candidates when there is
        one (its left corner); 3: the same, right corners too.
    path : bool
        Check that every closed well's bottom row can be covered by a chain of buffers (and count
        only the left-corner candidates that begin such a chain).
    twins : bool
        Skip a candidate identical (columns, size, alignment) to one already tried at the same node:
        its subtree is the same, with the two buffers swapped.
    keys : uint64 array
        A random key per buffer (the hash of a state XORs the keys of the buffers placed and a hash
        of each column's height).
    memo : uint64 array
        A table of states found dead (a power of two long; length 0: none), kept from dive to dive:
        a node whose state (the skyline and the buffers placed) has been searched to the end without
        a plan is not searched again, whatever the path that led to it. It holds only for dives with
        the same capacity, kept buffers and ceiling, which ``salt`` must tell apart: the caller
        changes it when they change. Direct-mapped (a new entry replaces an old one); a collision of
        two 64-bit hashes can only cut a branch that held a plan, never yield a wrong one.
    salt : uint64
        Mixed into every hash, with ``cap``.
    h, rem, slack : int64 arrays of length ``T``; placed : bool array; rcap : int64 array (the room
    of each buffer: the lowest of ``cap`` and the ceilings over its columns); fr_* : frame stacks of
    length ``len(fr_a)`` (``fr_k``: each frame's state hash); cand, score : candidate stack. Work
    space.

    Returns
    -------
    status : int
        1: a plan (in ``offsets``); 0: none exists in the canonical space (a proof for this capacity
        when ``noise`` is 0 and no stack overflowed); -1: node or work limit, or the candidate stack
        was too small; -2: the frame stack was too small (the caller grows it and dives again).
    nodes : int
    """
    n = len(sz)
    well = np.zeros(5, dtype=np.int64)
    cost = np.zeros(1, dtype=np.int64)  # (the steps of _dead beyond one pass over the columns)
    reach = np.zeros(T + 1, dtype=np.bool_)
    well[3] = -1
    for t in range(T):
        h[t] = h0[t]
        rem[t] = 0
    left = 0
    for r in range(n):
        placed[r] = keep[r]
        if not keep[r]:
            left += 1
            rc = cap
            for t in range(cs[r], ce[r]):
                rem[t] += sz[r]
                if ceil[t] < rc:
                    rc = ceil[t]
            rcap[r] = rc
    for t in range(T):
        slack[t] = min(cap, ceil[t]) - h[t] - rem[t]
        if slack[t] < 0 and rem[t] > 0:
            return 0, 0
    mask = np.uint64(len(memo) - 1)
    hk = _mix(salt, cap)  # the state's hash
    for t in range(T):
        hk ^= _mix(t, h[t])
    depth = 0
    ctop = 0
    nodes = 0
    maxd = len(fr_a)
    maxc = len(cand)
    truncated = False
    need_new = True
    work = 0
    big = np.int64(1) << 62
    while True:
        if need_new:
            if left == 0:
                return 1, nodes
            nodes += 1
            work += 2 * T
            if nodes > node_limit or work > work_limit:
                return -1, nodes
            if depth >= maxd:
                return -2, nodes
            fr_k[depth] = hk
            cost[0] = 0
            dead = (len(memo) > 0 and memo[hk & mask] == hk) or _dead(
                cs, ce, sz, al, bs_ptr, bs_rows, be_ptr, be_rows, T, rcap, h, rem, slack, placed, well,
                mrv == 3, reach, path, cost)
            work += cost[0]
            if dead:
                # no alternatives: a frame that is exhausted at once
                fr_a[depth] = 0
                fr_b[depth] = 0
                fr_h[depth] = 0
                fr_c0[depth] = ctop
                fr_cn[depth] = 0
                fr_w[depth] = -1
                fr_i[depth] = 0
                depth += 1
                need_new = False
                if depth == 1:
                    return 0, nodes
                # (falls through to the exhausted-frame handling below)
        if need_new:
            a, b, hmin, side = _branch_point(T, h, rem, well, mrv)
            # candidates: the unplaced buffers that can cover the cell (a, hmin): they start at a,
            # end by b and fit under cap at an aligned hmin
            c0 = ctop
            k0 = be_ptr[b] if side == 1 else bs_ptr[a]
            k1 = be_ptr[b + 1] if side == 1 else bs_ptr[a + 1]
            work += k1 - k0
            for k in range(k0, k1):
                r = be_rows[k] if side == 1 else bs_rows[k]
                if not _covers(r, a, b, hmin, cs, ce, sz, al, rcap, placed):
                    continue
                if ctop >= maxc:
                    truncated = True
                    break
                sc = np.float64(ce[r] - cs[r]) / T + np.float64(sz[r]) / cap
                if (ce[r] == b and side == 0) or (cs[r] == a and side == 1):
                    sc += 2.0
                if noise > 0.0:
                    sc += noise * uniform(rng)
                # insertion into the frame's candidates, by decreasing score
                j = ctop
                work += ctop - c0
                while j > c0 and score[j - 1] < sc:
                    cand[j] = cand[j - 1]
                    score[j] = score[j - 1]
                    j -= 1
                cand[j] = r
                score[j] = sc
                ctop += 1
            lvl, steps = _waste_level(a, hmin, cs, ce, sz, al, bs_ptr, bs_rows, rcap, h, rem, placed)
            work += steps
            b = a + 1
            w = 0
            if side == 0 and lvl < big and slack[a] >= lvl - hmin:
                w = 1
            fr_a[depth] = a
            fr_b[depth] = b
            fr_h[depth] = hmin
            fr_c0[depth] = c0
            fr_cn[depth] = ctop - c0
            fr_w[depth] = lvl if w == 1 else -1
            fr_i[depth] = 0
            depth += 1
        f = depth - 1
        ok = False
        total = fr_cn[f] + (1 if fr_w[f] >= 0 else 0)
        while fr_i[f] < total:
            k = fr_i[f]
            fr_i[f] = k + 1
            a = fr_a[f]
            hmin = fr_h[f]
            if k < fr_cn[f]:
                r = cand[fr_c0[f] + k]
                if placed[r]:
                    continue
                if twins:
                    # a buffer identical to a candidate tried before at this frame (same columns,
                    # size and alignment) leads to the same subtree, relabelled: skip it
                    same = False
                    for j in range(fr_c0[f], fr_c0[f] + k):
                        if _alike(cand[j], r, cs, ce, sz, al):
                            same = True
                            break
                    if same:
                        continue
                work += ce[r] - cs[r]
                for t in range(cs[r], ce[r]):
                    hk ^= _mix(t, h[t]) ^ _mix(t, hmin + sz[r])
                    h[t] = hmin + sz[r]
                    rem[t] -= sz[r]
                hk ^= keys[r]
                placed[r] = True
                offsets[r] = hmin
                left -= 1
                fr_act[f] = r
            else:
                d = fr_w[f] - hmin
                for t in range(a, fr_b[f]):
                    hk ^= _mix(t, h[t]) ^ _mix(t, fr_w[f])
                    h[t] = fr_w[f]
                    slack[t] -= d
                fr_act[f] = -1
            ok = True
            break
        if ok:
            need_new = True
            continue
        # the top frame is exhausted: pop it (its state is dead: remember it) and undo its parent's
        # action
        if len(memo) > 0 and not truncated:
            memo[fr_k[f] & mask] = fr_k[f]
        ctop = fr_c0[f]
        depth -= 1
        if depth == 0:
            return (-1 if truncated else 0), nodes
        g = depth - 1
        hmin = fr_h[g]
        r = fr_act[g]
        if r >= 0:
            for t in range(cs[r], ce[r]):
                hk ^= _mix(t, h[t]) ^ _mix(t, hmin)
                h[t] = hmin
                rem[t] += sz[r]
            hk ^= keys[r]
            placed[r] = False
            left += 1
        else:
            d = fr_w[g] - hmin
            for t in range(fr_a[g], fr_b[g]):
                hk ^= _mix(t, h[t]) ^ _mix(t, hmin)
                h[t] = hmin
                slack[t] += d
        need_new = False


@kernel("i8[]r", "i8[]r", "i8[]r", "i8[]")
def cover_max(cs, ce, vals, out):
    """Raise ``out[t]`` to the highest ``vals[i]`` of the ranges ``[cs[i], ce[i])`` that hold ``t``.

    The ranges are taken from the highest value down, and each column is set once, by the first
    range that reaches it: a pointer from each column to the next one not yet set (path halving)
    skips the set ones. O(n log n + T + n alpha) for ``n`` ranges over ``T = len(out)`` columns,
    where filling the ranges one by one costs the sum of their lengths (up to ``n T``).
    """
    T = len(out)
    nxt = np.arange(T + 1)  # nxt[t]: a column >= t, the next one not yet set where nxt[t] == t
    order = np.argsort(-vals, kind="mergesort")
    for i in order:
        t = cs[i]
        while t < ce[i]:
            # the next column not set yet, from t (path halving)
            while nxt[t] != t:
                nxt[t] = nxt[nxt[t]]
                t = nxt[t]
            if t >= ce[i]:
                break
            if vals[i] > out[t]:
                out[t] = vals[i]
            nxt[t] = t + 1
            t += 1
