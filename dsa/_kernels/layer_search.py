"""The smallest layer of a block by depth-first search over its equations (branch and bound).

A layer program (see :func:`dsa.strategies._layers.find_layer`) asks for a 0/1 choice ``x`` of
groups of buffers, the seed's group chosen, such that every equation ``sum_j a_rj x_j = 0`` holds
(one per instant: the bytes of chosen groups ending there, less those starting), with the least
weight (buffers chosen) below that of all groups. The coefficients are integers, so the equations are
exact: an equation with few free terms has few balanced completions, and constraint propagation
fixes many variables at once, where a linear relaxation sees only fractions.

The search: propagate every equation (bounds: a term that the others cannot make up for is
forced in or out; and, with at most :data:`ENUM_MAX` free terms, every completion enumerated, so
that the terms in all of them are forced in and those in none out), then branch on the free term of
largest size in the equation with the fewest free terms, leaving it out first (small layers first). A
complete assignment is a layer; the search goes on for a lighter one, cutting branches whose chosen
weight already reaches the lightest found (branch and bound; a term whose weight would reach it is
only left out). The search ends when the tree is
exhausted (then the lightest found is proven the smallest, or that there is none) or when its work
limit is spent (each term looked at, and each subset enumerated, is one unit).

Constraint propagation on linear equations over 0/1 variables is the core of CP and pseudo-Boolean
solvers; see K. R. Apt, "Principles of Constraint Programming", Cambridge University Press 2003,
chapter 6 (bounds consistency), here with subset enumeration on short equations in place of a
general domain filter.

Measured on 22 blocks (the first one to three) of 14 tall and coarse cuts, 131 searches of 1.5e9
units (about a second; 1-7 seeds a block): 66 were proven both ways, and branching on the largest
term rather than the first took 4-42 % fewer units where they were proven. Propagating the longer
equations exactly too (dynamic programming over the sums their free terms reach) took more units for
the same proofs and proved nothing more: not kept.

Complexity: a node costs the equations its assignments touch (each O(terms), or O(2 ** ENUM_MAX)
enumerated) plus O(equations) to pick the branch; the tree is exponential in the worst case, hence
the work limit.
"""
import numpy as np

from dsa._kernels import kernel

ENUM_MAX = 12   # equations with at most this many free terms are propagated by enumerating subsets


@kernel("i8", "i8", "i8[]", "i8[]", "i8", "i8[]r", "i8[]r", "i8[]r", "i8[]", "i8[]", "i8[]", "i8[]",
        "b1[]", "i8[]", "i8")
def _set(u, val, x, trail, tl, col_ptr, col_rows, col_vals, free, pos, neg, fixed, queued, queue, qn):
    """Give group ``u`` the value ``val``: on the trail, its equations' free terms and sums updated
    and those equations queued. Returns the trail's and the queue's new lengths."""
    x[u] = val
    trail[tl] = u
    for q in range(col_ptr[u], col_ptr[u + 1]):
        r = col_rows[q]
        c = col_vals[q]
        free[r] -= 1
        if c > 0:
            pos[r] -= c
        else:
            neg[r] -= c
        if val == 1:
            fixed[r] += c
        if not queued[r]:
            queued[r] = True
            queue[qn] = r
            qn += 1
    return tl + 1, qn


@kernel("i8", "i8[]r", "i8[]r", "i8[]r", "i8[]", "i8[]", "i8[]", "i8[]", "b1")
def _release(u, col_ptr, col_rows, col_vals, free, pos, neg, fixed, chosen):
    """Count group ``u``'s terms as free in its equations again (the free terms, the sums of the free
    positive and negative ones), taking them out of ``fixed`` where it was ``chosen``."""
    for q in range(col_ptr[u], col_ptr[u + 1]):
        r = col_rows[q]
        c = col_vals[q]
        free[r] += 1
        if c > 0:
            pos[r] += c
        else:
            neg[r] += c
        if chosen:
            fixed[r] -= c


@kernel("i8", "i8[]", "i8[]r", "i8[]r", "i8[]r", "i8[]", "i8[]", "i8[]", "i8[]")
def _unset(u, x, col_ptr, col_rows, col_vals, free, pos, neg, fixed):
    """Undo :func:`_set` for group ``u`` (its equations' free terms and sums as before it was
    given a value; nothing is queued). Returns the value it had."""
    val = x[u]
    x[u] = -1
    _release(u, col_ptr, col_rows, col_vals, free, pos, neg, fixed, val == 1)
    return val


@kernel("i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8[]r", "i8", "i8", "b1[]")
def smallest_layer(indptr, indices, data, col_ptr, col_rows, col_vals, weight, seed, work_limit, best):
    """Search for the lightest 0/1 solution with ``x[seed] = 1`` and weight below ``weight.sum()``.

    The equations are a CSR matrix (``indptr``, ``indices``, ``data``) over the groups, and the
    same by column (``col_ptr``, ``col_rows``, ``col_vals``). ``best`` (one bool per group) gets the
    lightest solution found. Returns ``(found, proven, work)``: ``proven`` where the search was
    exhausted (the solution found is then the lightest, or none exists), ``work`` the units spent.
    """
    m = len(weight)
    R = len(indptr) - 1
    x = np.full(m, -1, np.int64)
    fixed = np.zeros(R, np.int64)     # (the sum of the chosen terms)
    free = np.zeros(R, np.int64)      # (free terms)
    pos = np.zeros(R, np.int64)       # (the sum of the free positive terms)
    neg = np.zeros(R, np.int64)       # (... and of the free negative ones)
    for u in range(m):                # (every group free: its terms counted as free)
        _release(u, col_ptr, col_rows, col_vals, free, pos, neg, fixed, False)
    trail = np.empty(m, np.int64)
    queue = np.empty(R, np.int64)
    queued = np.zeros(R, np.bool_)
    dvar = np.empty(m, np.int64)
    dmark = np.empty(m, np.int64)
    dphase = np.empty(m, np.int64)
    terms = np.empty(ENUM_MAX, np.int64)
    vals = np.empty(ENUM_MAX, np.int64)
    sums = np.empty(1 << ENUM_MAX, np.int64)
    limit = weight.sum()              # (a layer is lighter than every group together)
    found = False
    chosen = 0                        # (the weight chosen)
    tl = 0
    qn = 0
    depth = 0
    work = 0

    # assign x[seed] = 1, queue every equation
    for r in range(R):
        queue[qn] = r
        qn += 1
        queued[r] = True
    v = seed
    val = 1
    while True:
        # -- assign (v, val), then propagate --
        tl, qn = _set(v, val, x, trail, tl, col_ptr, col_rows, col_vals, free, pos, neg, fixed,
                      queued, queue, qn)
        if val == 1:
            chosen += weight[v]
        work += 1 + col_ptr[v + 1] - col_ptr[v]
        conflict = chosen >= limit
        while qn > 0 and not conflict:
            qn -= 1
            r = queue[qn]
            queued[r] = False
            need = -fixed[r]
            if free[r] == 0:
                if need != 0:
                    conflict = True
                continue
            if need < neg[r] or need > pos[r]:
                conflict = True
                continue
            work += indptr[r + 1] - indptr[r]
            k = 0
            if free[r] <= ENUM_MAX:
                for p in range(indptr[r], indptr[r + 1]):
                    if x[indices[p]] < 0:
                        terms[k] = indices[p]
                        vals[k] = data[p]
                        k += 1
                sums[0] = 0
                for j in range(k):
                    step = 1 << j
                    for s in range(step):
                        sums[step + s] = sums[s] + vals[j]
                every = (1 << k) - 1
                some = 0
                for s in range(1 << k):
                    if sums[s] == need:
                        every &= s
                        some |= s
                work += 1 << k
                if some == 0 and need != 0:
                    conflict = True
                    continue
                if some == 0:           # (only the empty set: every free term out)
                    every = 0
                for j in range(k):
                    if (every >> j) & 1:
                        fix = 1
                    elif not (some >> j) & 1:
                        fix = 0
                    else:
                        continue
                    u = terms[j]
                    if x[u] >= 0:
                        continue
                    tl, qn = _set(u, fix, x, trail, tl, col_ptr, col_rows, col_vals, free, pos, neg,
                                  fixed, queued, queue, qn)
                    if fix == 1:
                        chosen += weight[u]
                    work += 1 + col_ptr[u + 1] - col_ptr[u]
                if chosen >= limit:
                    conflict = True
            else:
                hi = pos[r]
                lo = neg[r]
                for p in range(indptr[r], indptr[r + 1]):
                    u = indices[p]
                    if x[u] >= 0:
                        continue
                    c = data[p]
                    fix = -1
                    if c > 0:
                        if need > hi - c:
                            fix = 1
                        elif need - c < lo:
                            fix = 0
                    else:
                        if need < lo - c:
                            fix = 1
                        elif need - c > hi:
                            fix = 0
                    if fix < 0:
                        continue
                    tl, qn = _set(u, fix, x, trail, tl, col_ptr, col_rows, col_vals, free, pos, neg,
                                  fixed, queued, queue, qn)
                    if fix == 1:
                        chosen += weight[u]
                    work += 1 + col_ptr[u + 1] - col_ptr[u]
                    break               # (the bounds changed: look at the equation again)
                if chosen >= limit:
                    conflict = True
        if not conflict:
            # -- branch: the equation with the fewest free terms, its largest free one, out first --
            pick = -1
            fewest = m + 1
            for r in range(R):
                if 0 < free[r] < fewest:
                    fewest = free[r]
                    pick = r
            work += R
            if pick < 0:
                # (every equation holds: a layer, the free groups out of it; lighter than any before)
                for j in range(m):
                    best[j] = x[j] == 1
                found = True
                limit = chosen
                conflict = True
            else:
                u = -1
                largest = 0
                for p in range(indptr[pick], indptr[pick + 1]):
                    if x[indices[p]] < 0 and abs(data[p]) > largest:
                        u = indices[p]
                        largest = abs(data[p])
                dvar[depth] = u
                dmark[depth] = tl
                # (where taking u would reach the lightest layer found, only leaving it out is tried)
                dphase[depth] = 1 if chosen + weight[u] >= limit else 0
                depth += 1
                v = u
                val = 0
                if work > work_limit:
                    return found, False, work
                continue
        # -- backtrack: undo to the last decision whose other branch is untried --
        for j in range(qn):
            queued[queue[j]] = False
        qn = 0
        while depth > 0 and dphase[depth - 1] == 1:
            depth -= 1
        if depth == 0:
            return found, True, work
        mark = dmark[depth - 1]
        while tl > mark:
            tl -= 1
            u = trail[tl]
            if _unset(u, x, col_ptr, col_rows, col_vals, free, pos, neg, fixed) == 1:
                chosen -= weight[u]
        # (the state at the decision was propagated: only the other branch's equations are queued)
        dphase[depth - 1] = 1
        v = dvar[depth - 1]
        val = 1
        if work > work_limit:
            return found, False, work
