"""Slow, obviously-correct reference code for the tests.

Nothing here imports dsa or its kernels: every function works on plain Python lists (numpy arrays
are accepted and converted), so the tests compare dsa against an independent implementation.

* :func:`naive_validate` checks a plan pair by pair, O(n^2).
* :func:`naive_load` evaluates the bytes alive at every event time, O(n^2).
* :func:`brute_force_optimum` finds the optimal peak of a tiny instance (n <= 7) by trying every
  order of the buffers with "lowest aligned offset that fits" placement.
* :func:`exhaustive_optimum` tries every offset vector; used only to check brute_force_optimum.
"""
from __future__ import annotations

import itertools
import math
from collections import namedtuple

__all__ = ["Issue", "naive_validate", "naive_load", "brute_force_optimum", "exhaustive_optimum",
           "lowest_fit_plan", "time_overlap"]

# rule: the rule names of dsa.validate ("negative", "alignment", "fixed", "capacity", "overlap", ...)
Issue = namedtuple("Issue", "rule rows message")


def _ints(values):
    return [int(v) for v in values]


def time_overlap(s1, e1, s2, e2) -> bool:
    """Half-open lifetimes [s1, e1) and [s2, e2) share an instant."""
    return s1 < e2 and s2 < e1


def space_overlap(o1, z1, o2, z2) -> bool:
    """Address ranges [o1, o1 + z1) and [o2, o2 + z2) share a byte (empty ranges share nothing)."""
    return z1 > 0 and z2 > 0 and o1 < o2 + z2 and o2 < o1 + z1


def naive_validate(starts, ends, sizes, offsets, alignments=None, fixed=None, capacity=None) -> list:
    """Every way in which ``offsets`` is not a valid plan, as a list of :class:`Issue` (empty: valid).

    ``fixed[i]`` is the pinned offset of row i, or -1 / None when row i is free.
    """
    starts, ends, sizes = _ints(starts), _ints(ends), _ints(sizes)
    n = len(starts)
    issues = []
    if len(offsets) != n:
        return [Issue("shape", (), f"{len(offsets)} offsets for {n} rows")]
    offs = []
    for i, o in enumerate(offsets):
        if isinstance(o, bool) or int(o) != o:
            issues.append(Issue("integer", (i,), f"row {i}: offset {o!r} is not an integer"))
        offs.append(int(o))
    aligns = [1] * n if alignments is None else _ints(alignments)
    for i in range(n):
        if offs[i] < 0:
            issues.append(Issue("negative", (i,), f"row {i}: negative offset {offs[i]}"))
        if offs[i] % aligns[i] != 0:
            issues.append(Issue("alignment", (i,), f"row {i}: offset {offs[i]} not a multiple of {aligns[i]}"))
        if fixed is not None and fixed[i] is not None and int(fixed[i]) >= 0 and offs[i] != int(fixed[i]):
            issues.append(Issue("fixed", (i,), f"row {i}: offset {offs[i]} != fixed {int(fixed[i])}"))
        if capacity is not None and offs[i] + sizes[i] > capacity:
            issues.append(Issue("capacity", (i,), f"row {i}: ends at {offs[i] + sizes[i]} > {capacity}"))
    for i in range(n):
        for j in range(i + 1, n):
            if (time_overlap(starts[i], ends[i], starts[j], ends[j])
                    and space_overlap(offs[i], sizes[i], offs[j], sizes[j])):
                issues.append(Issue("overlap", (i, j), f"rows {i} and {j} overlap"))
    return issues


def naive_load(starts, ends, sizes) -> int:
    """Most bytes alive at one instant: for every event time t, sum the sizes with start <= t < end."""
    starts, ends, sizes = _ints(starts), _ints(ends), _ints(sizes)
    best = 0
    for t in set(starts) | set(ends):
        live = sum(z for s, e, z in zip(starts, ends, sizes) if s <= t < e)
        best = max(best, live)
    return best


def naive_aligned_load(starts, ends, sizes, alignments=None) -> int:
    """LOAD strengthened by alignment, instant by instant: with ``g`` the gcd of the alignments of
    the non-empty rows, the live rows' sizes rounded up to ``g``, summed, less the largest padding
    among them (the row on top needs no padding); at least LOAD."""
    starts, ends, sizes = _ints(starts), _ints(ends), _ints(sizes)
    aligns = [1] * len(sizes) if alignments is None else _ints(alignments)
    g = math.gcd(*[a for a, z in zip(aligns, sizes) if z > 0]) if any(sizes) else 1
    best = naive_load(starts, ends, sizes)
    for t in set(starts):
        live = [z for s, e, z in zip(starts, ends, sizes) if s <= t < e and z > 0]
        if live:
            rounded = [-(-z // g) * g for z in live]
            best = max(best, sum(rounded) - max(r - z for r, z in zip(rounded, live)))
    return best


def _lowest_fit(placed, s, e, z, a):
    """Lowest multiple of ``a`` where [x, x + z) collides with no placed (start, end, offset, size).

    The answer is 0 or align_up(top of a placed time-neighbour): if x > 0 is the lowest feasible
    aligned offset, x - a is infeasible, so some neighbour j meets [x - a, x - a + z) but not
    [x, x + z); then x - a < top_j <= x, i.e. x = align_up(top_j). So trying those candidates in
    increasing order is the same as scanning 0, a, 2a, ...
    """
    if z == 0:
        return 0
    nbrs = [(o, oz) for (ps, pe, o, oz) in placed if oz > 0 and time_overlap(s, e, ps, pe)]
    cands = sorted({0} | {-(-(o + oz) // a) * a for o, oz in nbrs})
    for x in cands:
        if all(not space_overlap(x, z, o, oz) for o, oz in nbrs):
            return x
    raise AssertionError("unreachable: the highest candidate always fits")


def lowest_fit_plan(starts, ends, sizes, order, alignments=None, fixed=None) -> list:
    """Offsets from placing rows in ``order`` at their lowest aligned fitting offset (fixed rows first)."""
    starts, ends, sizes = _ints(starts), _ints(ends), _ints(sizes)
    n = len(starts)
    aligns = [1] * n if alignments is None else _ints(alignments)
    pinned = [fixed is not None and fixed[i] is not None and int(fixed[i]) >= 0 for i in range(n)]
    offsets = [None] * n
    placed = []
    for i in range(n):
        if pinned[i]:
            offsets[i] = int(fixed[i])
            placed.append((starts[i], ends[i], offsets[i], sizes[i]))
    for i in order:
        if pinned[i]:
            continue
        offsets[i] = _lowest_fit(placed, starts[i], ends[i], sizes[i], aligns[i])
        placed.append((starts[i], ends[i], offsets[i], sizes[i]))
    return offsets


def brute_force_optimum(starts, ends, sizes, alignments=None, fixed=None) -> int:
    """The optimal peak, by trying every order of the free rows with lowest-aligned-fit placement.

    Exact: take an optimal plan and place its rows in increasing order of their optimal offsets.
    By induction each row lands at or below its optimal offset o: every earlier time-neighbour has
    optimal offset <= o, so (being disjoint from this row in the optimal plan) its optimal top is
    <= o, and its current top is no higher; fixed rows sit where the optimal plan has them. So o
    is free and the lowest fit is <= o. One of the orders tried therefore reaches the optimal peak.

    The search is a depth-first walk over orders with a shared prefix, cut off when the partial
    peak already reaches the best found. Keep n <= 7.
    """
    starts, ends, sizes = _ints(starts), _ints(ends), _ints(sizes)
    n = len(starts)
    assert n <= 8, "brute force is for tiny instances"
    aligns = [1] * n if alignments is None else _ints(alignments)
    pinned = [fixed is not None and fixed[i] is not None and int(fixed[i]) >= 0 for i in range(n)]
    placed = [(starts[i], ends[i], int(fixed[i]), sizes[i]) for i in range(n) if pinned[i]]
    base_peak = max([o + z for (_, _, o, z) in placed], default=0)
    free = [i for i in range(n) if not pinned[i]]
    # a trivial valid plan: every free row above everything else, one after the other
    best = [base_peak + sum(sizes[i] + aligns[i] for i in free)]

    def walk(remaining, peak):
        if peak >= best[0]:
            return
        if not remaining:
            best[0] = peak
            return
        for k, i in enumerate(remaining):
            x = _lowest_fit(placed, starts[i], ends[i], sizes[i], aligns[i])
            placed.append((starts[i], ends[i], x, sizes[i]))
            walk(remaining[:k] + remaining[k + 1:], max(peak, x + sizes[i]))
            placed.pop()

    walk(free, base_peak)
    return best[0]


def exhaustive_optimum(starts, ends, sizes, alignments=None) -> int:
    """The optimal peak by trying every aligned offset vector below a trivial upper bound (n <= 4)."""
    starts, ends, sizes = _ints(starts), _ints(ends), _ints(sizes)
    n = len(starts)
    aligns = [1] * n if alignments is None else _ints(alignments)
    bound = sum(z + a for z, a in zip(sizes, aligns))
    best = bound
    for offs in itertools.product(*[range(0, bound, a) for a in aligns]):
        peak = max((o + z for o, z in zip(offs, sizes)), default=0)
        if peak < best and not naive_validate(starts, ends, sizes, offs, aligns):
            best = peak
    return best if n else 0
