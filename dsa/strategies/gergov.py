"""Gergov's two-phase allocator: an infeasible skyline placement, then conflict colouring.

Phase 1 gives every buffer an offset alpha'(j) that respects only part of the constraints. It keeps
open triples ``(w, X)``, an offset and a time window, the windows disjoint; at first one window
spans the whole horizon at offset 0. The triple of lowest ``w`` takes the first buffer of a
candidate order J whose lifetime meets ``X`` and no other open window. The buffer sits at ``w``
(aligned up) and the triple is replaced by the part of ``X`` under the buffer, raised to the
buffer's top, and the parts of ``X`` left and right of it, still at ``w``; a triple that no buffer
fits is closed. A buffer is only checked against the skyline inside ``X``, so alpha' may overlap
where a lifetime leaves its window. Phase 2 colours the conflict graph (lifetimes and alpha' ranges
both intersect) greedily in the phase-1 selection order and makes the plan valid:

* ``"stack"``: colour class ``c`` moves up by ``c`` times the alpha' height (Gergov's construction,
  as in Levental's implementation);
* ``"rebump"``: colour-0 buffers keep alpha', every other one is lifted onto its highest conflicting
  neighbour, and colouring and lifting repeat until nothing conflicts (Triton's fixpoint);
* ``"squeeze"``: buffers are placed first fit in ascending alpha' (ties in selection order) among
  their already placed time-neighbours, i.e. compaction in alpha' order rather than in final order.

Each plan then goes through :func:`dsa.compaction.compact` (``compact=True``), which slides every
buffer down as far as it fits and never raises the peak. :func:`solve` runs every combination of the
given candidate orders and variants and keeps the lowest peak; by default the orders ``area`` and
``breadth`` with ``stack`` and ``squeeze``, which on the MiniMalloc challenging instances matched or
beat greedy-by-size on 9 of 11 (a size-ordered J alone, as Triton has it, on 4). Fixed buffers keep
their offsets (``stack`` and ``rebump`` put the free buffers above the highest fixed one before
compaction); zero-size buffers sit at offset 0.

    J. Gergov, "Algorithms for compile-time memory optimization", Proc. 10th ACM-SIAM Symposium on
    Discrete Algorithms (SODA), 1999, pp. 907-908.

Complexity per order: phase 1 is O(n log^2 n) time and O(n log n) memory (a heap of at most 3n + 1
triples, union-find over the closed time sections, and a range tree answering "the first buffer in
J lying inside the window widened over its closed neighbourhood" with deletions); phase 2 is
O(n + E) for E intersecting lifetime pairs, on the time-overlap graph, or, when most buffers meet
(E = O(n^2)), O((n + C) log n) time and O(n + C) memory for C conflicting pairs, which a sweep over
time with a max tree over alpha' order finds without that graph; ``stack`` is O(n), ``rebump``
O((n + C) log n) per round (always the sweep); ``squeeze`` and compaction are one greedy pass
each, O(n log n + E + sum_i k_i log k_i) for k_i placed neighbours of buffer i, or O(n^2) time and
O(n) memory without the overlap graph when most pairs of buffers meet
(:attr:`dsa.sweep.Sweep.dense`).
"""
from __future__ import annotations

import math

import numpy as np

from dsa.solution import make_solution, plan_peak
from dsa.sweep import sections

__all__ = ["solve", "skyline_placement", "conflict_colouring", "VARIANTS", "ORDERS"]

VARIANTS = ("stack", "rebump", "squeeze")
ORDERS = ("size", "duration", "area", "start", "conflict", "breadth")
# chosen by measurement (see the module docstring): two candidate orders x the two linear re-placements
DEFAULT_ORDERS = ("area", "breadth")
DEFAULT_VARIANTS = ("stack", "squeeze")

# rebump rounds before giving up on the fixpoint (then the plan is repaired by a first-fit pass)
_MAX_ROUNDS = 10_000
_MAX_VALUE = 2**62


def _jobs(problem) -> np.ndarray:
    """Rows that take part in both phases: free and of positive size."""
    return np.flatnonzero(problem.is_movable)


def skyline_placement(problem, rows=None, *, order: str = "size"):
    """Phase 1: the (generally infeasible) skyline offsets alpha' and the selection order.

    Parameters
    ----------
    problem : Problem
    rows : array_like of int, optional
        The rows to place (default: every free row of positive size). Fixed offsets are ignored.
    order : str, default "size"
        The candidate order J (an ordering name of :mod:`dsa.strategies.greedy`): a triple takes
        the first qualifying row in this order.

    Returns
    -------
    alpha : numpy.ndarray of int64
        alpha'(j) for the rows placed, -1 for the others. Each is a multiple of the row's alignment.
    sel : numpy.ndarray of int64
        The rows in the order phase 1 selected them.

    Examples
    --------
    >>> import dsa
    >>> p = dsa.Problem([0, 0, 2], [4, 2, 4], [4, 2, 3])
    >>> alpha, sel = skyline_placement(p)
    >>> alpha.tolist(), sel.tolist()
    ([0, 4, 4], [0, 2, 1])
    """
    from dsa._kernels import python_path
    from dsa._kernels.gergov import skyline
    from dsa.strategies._orders import order_rows

    n = len(problem)
    rows = _jobs(problem) if rows is None else np.asarray(rows, dtype=np.int64)
    alpha = np.full(n, -1, dtype=np.int64)
    if len(rows) == 0:
        return alpha, np.zeros(0, dtype=np.int64)
    if np.any(problem.sizes[rows] <= 0):
        raise ValueError("skyline_placement takes rows of positive size only")
    starts, ends = problem.starts[rows], problem.ends[rows]
    times, first, last = sections(starts, ends)
    first, last = first.astype(np.int32), last.astype(np.int32)
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; valid: {', '.join(ORDERS)}")
    position = np.empty(n, dtype=np.int64)
    position[order_rows(problem, order)] = np.arange(n)
    rank = np.empty(len(rows), dtype=np.int32)
    rank[np.argsort(position[rows], kind="stable")] = np.arange(len(rows), dtype=np.int32)
    # (on a small problem, while the kernel is not compiled, its Python version: same result)
    local_alpha, local_sel = python_path(skyline, len(rows))(
        first, last, problem.sizes[rows], problem.alignments[rows], rank, len(times) - 1)
    if len(local_sel) != len(rows):  # cannot happen: every remaining job meets an open window
        raise RuntimeError("phase 1 left buffers unplaced")
    alpha[rows] = local_alpha
    return alpha, rows[local_sel]


def conflict_colouring(problem, alpha, sel, *, sweep=None):
    """Phase 2: greedy colouring of the conflict graph of ``alpha`` in the order ``sel``.

    Rows of ``sel`` conflict when their lifetimes and their ranges ``[alpha, alpha + size)`` both
    intersect. The time-overlap graph of ``sweep`` is scanned when it is built or cheap (O(n + E));
    when most pairs of rows meet in time (:attr:`dsa.sweep.Sweep.dense`) the conflicts are found
    instead by a sweep over time (:func:`dsa._kernels.gergov.conflicts`), in O((m + C) log m) time and
    O(n + C) memory for ``m`` rows and ``C`` conflicts. Same colours either way.

    Returns
    -------
    colours : numpy.ndarray of int64
        Colour of every row of ``sel`` (0, 1, ...), -1 for the other rows.
    n_edges : int
        Number of conflicting pairs.
    """
    from dsa._kernels import python_path
    from dsa._kernels.gergov import colour, conflicts
    from dsa.sweep import Sweep

    sel = np.asarray(sel, dtype=np.int64)
    alpha = np.asarray(alpha, dtype=np.int64)
    sweep = sweep or Sweep(problem)
    if "overlap" in sweep.__dict__ or not sweep.dense:
        # the time-overlap graph, which the greedy passes that follow (squeeze, compaction) use too
        indptr, indices = sweep.overlap
    else:
        # most pairs meet in time (O(n^2) edges, of which a handful conflict): the conflict graph
        # alone, by a sweep over time with an index over alpha'
        indptr, indices = conflicts(sel, alpha, problem.sizes, problem.starts, problem.ends)
    col, edges = python_path(colour, len(sel))(sel, alpha, problem.sizes, indptr, indices)
    return col, int(edges)


def _lcm(values) -> int:
    out = 1
    for v in np.unique(values):
        out = math.lcm(out, int(v))
        if out > _MAX_VALUE:
            break
    return out


def _first_fit(problem, sel, sweep, *keys):
    """First fit of the rows of ``sel`` sorted by ``keys`` (first most significant; ties in ``sel`` order)."""
    from dsa.strategies.greedy import greedy_offsets

    order = sel[np.lexsort((np.arange(len(sel)),) + tuple(k[sel] for k in reversed(keys)))]
    return greedy_offsets(problem, order, "first", sweep=sweep)


def _raw_plan(problem, variant, alpha, sel, col, sweep, stats):
    """The uncompacted plan of ``variant`` (a valid plan in every case)."""
    n = len(problem)
    if variant == "squeeze":
        return _first_fit(problem, sel, sweep, alpha)
    fixed = problem.is_fixed
    sizes = problem.sizes
    offsets = np.zeros(n, dtype=np.int64)
    offsets[fixed] = problem.fixed_offsets[fixed]
    if len(sel) == 0:
        return offsets
    # free rows go above every fixed row, at a multiple of every free row's alignment
    unit = _lcm(problem.alignments[sel])
    fixed_top = int((offsets[fixed] + sizes[fixed]).max()) if fixed.any() else 0
    base = -(-fixed_top // unit) * unit
    height = int((alpha[sel] + sizes[sel]).max())
    if variant == "stack":
        n_col = int(col.max()) + 1
        step = -(-height // unit) * unit if n_col > 1 else 0
        if base + (n_col - 1) * step + height > _MAX_VALUE:
            # alignments with a huge common multiple: place the colour classes by first fit instead
            stats["fallback"] = "first fit in (colour, alpha') order"
            return _first_fit(problem, sel, sweep, col, alpha)
        offsets[sel] = base + alpha[sel] + col[sel] * step
        return offsets
    # rebump
    from dsa._kernels.gergov import rebump

    lifted = alpha.copy()
    rounds, converged = rebump(sel, lifted, sizes, problem.alignments, problem.starts, problem.ends,
                               _MAX_ROUNDS)
    stats["rounds"] = int(rounds)
    if not converged or base + int((lifted[sel] + sizes[sel]).max()) > _MAX_VALUE:
        # no fixpoint within _MAX_ROUNDS, or no room above the fixed rows: first fit instead
        stats["fallback"] = "first fit in lifted order"
        return _first_fit(problem, sel, sweep, lifted)
    offsets[sel] = base + lifted[sel]
    return offsets


def _names(value, valid, what) -> tuple:
    names = (value,) if isinstance(value, str) else tuple(value)
    if not names:
        raise ValueError(f"{what} needs at least one name; valid: {', '.join(valid)}")
    for name in names:
        if name not in valid:
            raise ValueError(f"unknown {what} {name!r}; valid: {', '.join(valid)}")
    return tuple(dict.fromkeys(names))


def solve(problem, *, order=DEFAULT_ORDERS, variant=DEFAULT_VARIANTS, compact: bool = True, sweep=None):
    """Plan with Gergov's skyline placement and conflict colouring.

    Every combination of ``order`` and ``variant`` is run (phase 1 once per order) and the plan with
    the lowest peak is kept; the search stops early when a plan reaches the lower bound.

    Parameters
    ----------
    problem : Problem
    order : str or sequence of str, default ("area", "breadth")
        The candidate order J of phase 1 (which buffer a triple takes when several qualify): any
        ordering of :mod:`dsa.strategies.greedy` except ``"random"`` (``"size"``, ``"duration"``,
        ``"area"``, ``"start"``, ``"conflict"``, ``"breadth"``). ``"size"`` is Triton's choice.
    variant : str or sequence of str, default ("stack", "squeeze")
        How phase 2 turns the skyline into a valid plan: ``"stack"`` shifts colour class ``c`` up by
        ``c`` times the skyline height (the paper's construction); ``"rebump"`` lifts conflicting
        buffers onto their neighbours until nothing conflicts (Triton; O((n + C) log n) per round for
        C conflicts, and up to thousands of rounds, so not in the default); ``"squeeze"`` places
        buffers first fit in ascending skyline offset.
    compact : bool, default True
        End every member with :func:`dsa.compaction.compact`, which never raises the peak.
    sweep : dsa.sweep.Sweep, optional
        The shared planning context (passed by :func:`dsa.solve`).

    Returns
    -------
    Solution
        ``stats``: ``member`` (the winning ``order/variant``), ``colours`` (phase-2 colours of the
        winner's skyline), ``conflicts`` (conflicting pairs under that alpha'), ``alpha_height``
        (``max(alpha' + size)``), ``peak_raw`` (the winner's peak before compaction), ``peaks``
        (final peak of every member that ran) and, for ``"rebump"``, ``rounds``.

    Raises
    ------
    ValueError
        For an unknown order or variant.

    Examples
    --------
    >>> import dsa
    >>> p = dsa.Problem([0, 0, 2, 4], [4, 2, 6, 6], [4, 2, 3, 2])
    >>> sol = dsa.solve(p, solve, variant="stack")
    >>> sol.peak, sol.status.value
    (7, 'optimal')
    """
    from dsa.bounds import lower_bound
    from dsa.compaction import compact as compact_plan
    from dsa.sweep import Sweep

    orders = _names(order, ORDERS, "order")
    variants = _names(variant, VARIANTS, "variant")
    sweep = sweep or Sweep(problem)
    bound = lower_bound(problem, sweep=sweep)
    best = None
    peaks = {}
    for od in orders:
        alpha, sel = skyline_placement(problem, order=od)
        if len(sel):
            col, edges = conflict_colouring(problem, alpha, sel, sweep=sweep)
            phase = {"colours": int(col.max()) + 1, "conflicts": edges,
                     "alpha_height": int((alpha[sel] + problem.sizes[sel]).max())}
        else:
            col = np.full(len(problem), -1, dtype=np.int64)
            phase = {"colours": 0, "conflicts": 0, "alpha_height": 0}
        for v in variants:
            member = f"{od}/{v}"
            member_stats = dict(phase)
            raw = _raw_plan(problem, v, alpha, sel, col, sweep, member_stats)
            member_stats["peak_raw"] = plan_peak(problem, raw)
            final = compact_plan(problem, raw, sweep=sweep) if compact else raw
            peaks[member] = plan_peak(problem, final)
            if best is None or peaks[member] < peaks[best[0]]:
                best = (member, final, member_stats)
            if peaks[best[0]] <= bound:
                break
        if peaks[best[0]] <= bound:
            break
    member, offsets, stats = best
    stats.update({"member": member, "peaks": peaks})
    return make_solution(problem, offsets, strategy="gergov", stats=stats)
