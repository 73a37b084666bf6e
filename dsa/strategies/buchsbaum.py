"""Boxing (Buchsbaum et al.): group similar buffers into boxes, pack the boxes, unbox, squeeze.

Buffers are rounded up into geometric height classes (powers of ``1 + epsilon``; a class's unit height
is its largest member). Within a class the buffers are unit-height jobs, boxed ``H`` to a box
(``H = box height // unit``) after Theorem 2 of the paper. Critical times are random: every distinct
start gets a random priority and a job belongs to the highest-priority start inside its lifetime, which
is the recursion "jobs live at the critical time / strictly before / strictly after", one random
critical time per node. Around each critical time, Lemma 1 leaves the ``H * ceil(1/eps^2)``
earliest-starting and ``H * ceil(1/eps^2)`` latest-ending jobs unresolved and cuts the rest into
alternating vertical strips (earliest starts, sorted by end) and horizontal strips (latest ends, sorted
by start) of ``H * ceil(1/eps)`` jobs, chunked into boxes of ``H``. The unresolved jobs of the class are
interval-graph coloured into rows (optimal: lowest free row), bundled ``H`` rows at a time, one box per
busy stretch of a bundle. Boxes are jobs of their own height, so boxing repeats over up to four levels
of growing box height (the size-ratio reduction of Theorem 16, simplified to a geometric ladder of box
heights, ratio 8, ending at the largest buffer); the items left at the top are packed by best-fit
greedy, largest first. Unboxing adds up box and internal offsets into a loose plan, which the squeeze
(:func:`dsa.compaction.compact`: ascending loose offset, lowest fit) tightens.

Each of ``restarts`` starts draws new critical times and (after the first) a new epsilon within a factor
``spread`` of ``epsilon``, which moves the class boundaries; the lowest plan is kept, and the
greedy-by-size plan (better of best fit and first fit) is returned instead when it is lower. Fixed
buffers are left out of the boxing and keep their offsets (the squeeze places them first), zero-size
buffers sit at offset 0, and alignment is restored by the squeeze. The default epsilon is 1.5, as
practical implementations use epsilon > 1: below 1 the outer strips (``H / eps^2`` jobs on each side)
leave nearly every job of a practical trace unresolved.

    A. L. Buchsbaum, H. Karloff, C. Kenyon, N. Reingold and M. Thorup, "OPT versus LOAD in Dynamic
    Storage Allocation", STOC 2003, pp. 556-564; SIAM J. Comput. 33(3):632-646, 2004.

The paper's (2 + epsilon) guarantee needs its exact parameters (several critical points per level,
gaps of the colouring rows as further critical points, the full ratio reduction); this practical,
randomised version is a heuristic without that proof.

Complexity per start: O(L n log n) for boxing over L <= 4 levels (sorts, a sparse table for the
critical times, heap-based interval colouring), plus one greedy pass over the top-level items and one
compaction pass, each O(n log n + E + sum_i k_i log k_i) with E the intersecting lifetime pairs and k_i
the placed neighbours of buffer i. Memory O(n + E). Total: ``restarts`` times that, plus two greedy
passes for the fallback.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dsa.budget import check_seed
from dsa.solution import make_solution, plan_peak

__all__ = ["solve", "boxes", "Box", "default_restarts"]

_MAX_LEVELS = 4        # rungs of the box-height ladder
_LADDER = 8.0          # ratio between consecutive box heights


@dataclass(frozen=True, eq=False)
class Box:
    """One box of the boxing: a job of height ``height`` alive over ``[start, end)`` that holds members.

    Attributes
    ----------
    start, end : int
        The box's lifetime: the union of its members' lifetimes (one stretch).
    height : int
        The box's height: slots used x the unit height of the class boxed into it.
    level : int
        Boxing level, 0 for boxes of buffers; boxes of level ``k`` hold buffers and boxes of lower levels.
    kind : str
        ``"strip"`` (a Lemma 1 strip chunk) or ``"rows"`` (a bundle of interval-colouring rows).
    rows : numpy.ndarray of int64
        Problem rows placed directly in this box.
    row_offsets : numpy.ndarray of int64
        Their offsets inside the box.
    children : numpy.ndarray of int64
        Indices (in the returned list) of the boxes placed in this box.
    child_offsets : numpy.ndarray of int64
        Their offsets inside the box.
    parent : int
        Index of the box holding this one, or -1 for a top-level box.
    """

    start: int
    end: int
    height: int
    level: int
    kind: str
    rows: np.ndarray
    row_offsets: np.ndarray
    children: np.ndarray
    child_offsets: np.ndarray
    parent: int


def default_restarts(n: int) -> int:
    """Starts run by default for ``n`` buffers: 64 up to ~15k buffers, then fewer (10 at 10^5,
    never below 4), keeping 10^5 buffers to a couple of seconds."""
    return int(max(4, min(64, 1_000_000 // max(n, 1))))


def _check_epsilon(epsilon) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.integer, np.floating)) \
            or not math.isfinite(epsilon) or epsilon <= 0:
        raise ValueError(f"epsilon must be a positive number, got {epsilon!r}")
    return float(epsilon)


class _Boxing:
    """The item forest of one start: items ``0 .. m-1`` are the boxed rows, later items are boxes.

    Arrays over items: lifetime ``s, e`` (rank-compressed times), height ``h``, ``parent`` (-1 when
    not in a box), ``inner`` (offset inside the parent), ``level`` (-1 for rows) and ``strip`` (a
    Lemma 1 strip box rather than a bundle of colouring rows). ``top`` lists the items in no box.
    """

    def __init__(self, s, e, h, capacity):
        m = len(s)
        self.m = m
        self.n = m
        self.s = np.empty(capacity, dtype=np.int64)
        self.e = np.empty(capacity, dtype=np.int64)
        self.h = np.empty(capacity, dtype=np.int64)
        self.s[:m], self.e[:m], self.h[:m] = s, e, h
        self.parent = np.full(capacity, -1, dtype=np.int64)
        self.inner = np.zeros(capacity, dtype=np.int64)
        self.level = np.full(capacity, -1, dtype=np.int64)
        self.strip = np.zeros(capacity, dtype=bool)
        self.top = np.arange(m, dtype=np.int64)
        self.levels = 0

    def add_boxes(self, bs, be, bh, level, strip) -> int:
        """Append boxes; return the index of the first."""
        k, first = len(bs), self.n
        sl = slice(first, first + k)
        self.s[sl], self.e[sl], self.h[sl], self.level[sl], self.strip[sl] = bs, be, bh, level, strip
        self.n += k
        return first


def _ladder(h_max: int, h_min: int) -> list[float]:
    """Box heights of the levels: a geometric ladder of ratio ``_LADDER`` ending at ``h_max``, with as
    many rungs (at most ``_MAX_LEVELS``) as leave at least two of the smallest items per box."""
    n_levels = 1
    while n_levels < _MAX_LEVELS and h_max / _LADDER ** n_levels >= 2 * h_min:
        n_levels += 1
    return [h_max / _LADDER ** (n_levels - 1 - lv) for lv in range(n_levels)]


def _box_items(rows_s, rows_e, rows_h, rng, epsilon: float) -> _Boxing:
    """Run the boxing levels on the free, non-empty rows (times rank-compressed)."""
    from dsa._kernels import python_path
    from dsa._kernels.buchsbaum import box_class

    m = len(rows_s)
    ladder = _ladder(int(rows_h.max()), int(rows_h.min())) if m else []
    bx = _Boxing(rows_s, rows_e, rows_h, m * (len(ladder) + 1))
    a1 = math.ceil(1.0 / epsilon)
    a2 = math.ceil(1.0 / epsilon ** 2)
    log_base = math.log1p(epsilon)
    for box_h in ladder:
        top = bx.top
        small = top[bx.h[top] * 2 <= box_h]
        if len(small) == 0:
            continue
        cls = np.floor(np.log(bx.h[small].astype(np.float64)) / log_base).astype(np.int64)
        order = np.lexsort((small, cls))
        small, cls = small[order], cls[order]
        cuts = np.flatnonzero(np.diff(cls)) + 1
        boxed = []
        for items in np.split(small, cuts):
            unit = int(bx.h[items].max())
            H = int(box_h // unit)
            if H < 2:
                continue
            # random critical times: a random priority per distinct start, drawn anew for each class
            prio = rng.random(len(items))
            # (while the kernel is not compiled, small classes run its Python version: same result)
            box_of, slot, bs, be, bn, n_strip = python_path(box_class, len(items))(
                bx.s[items], bx.e[items], H, H * a2, H * a1, prio)
            strip = np.arange(len(bs)) < n_strip
            first = bx.add_boxes(bs, be, bn * unit, bx.levels, strip)
            bx.parent[items] = box_of + first
            bx.inner[items] = slot * unit
            boxed.append(items)
        if not boxed:
            continue
        gone = np.zeros(bx.n, dtype=bool)
        gone[np.concatenate(boxed)] = True
        bx.top = np.concatenate([top[~gone[top]], np.flatnonzero(bx.level[:bx.n] == bx.levels)])
        bx.levels += 1
    return bx


def _compress_times(problem):
    """Starts and ends replaced by their ranks among all event times (order-preserving)."""
    from dsa.sweep import sections

    times, first, last = sections(problem.starts, problem.ends)
    return first, last + 1, times


def _pack_top(bx: _Boxing) -> np.ndarray:
    """Loose offsets of all items: best-fit greedy (largest first) on the top items, then unboxing."""
    from dsa._kernels import python_path
    from dsa._kernels.buchsbaum import unbox
    from dsa._kernels.greedy import place
    from dsa._kernels.time_overlap import overlap_csr

    top = bx.top
    s, e, h = bx.s[top], bx.e[top], bx.h[top]
    offsets = np.full(len(top), -1, dtype=np.int64)
    if len(top):
        indptr, indices = overlap_csr(s, e)
        order = np.lexsort((np.arange(len(top)), s, -(e - s), -h))
        place(order, h, np.ones(len(top), dtype=np.int64), offsets, indptr, indices, True,
              np.zeros(1, dtype=np.int64))
    top_off = np.zeros(bx.n, dtype=np.int64)
    top_off[top] = offsets
    return python_path(unbox, bx.n)(bx.parent[:bx.n], bx.inner[:bx.n], top_off)


def _free_rows(problem) -> np.ndarray:
    """Rows that the boxing places: not fixed, size > 0."""
    return np.flatnonzero(problem.is_movable)


def _one_start(problem, rows, rs, re, rng, epsilon, sweep):
    """One randomised start: boxing, packing, unboxing, squeeze. Returns (offsets, loose peak, boxing)."""
    from dsa.compaction import compact

    bx = _box_items(rs, re, problem.sizes[rows], rng, epsilon)
    item_off = _pack_top(bx)
    loose = np.zeros(len(problem), dtype=np.int64)
    fixed = problem.is_fixed
    loose[fixed] = problem.fixed_offsets[fixed]
    loose[rows] = item_off[:len(rows)]
    loose_peak = int((item_off[:len(rows)] + problem.sizes[rows]).max()) if len(rows) else 0
    return compact(problem, loose, sweep=sweep), loose_peak, bx


def boxes(problem, *, epsilon: float = 1.5, seed=None) -> list[Box]:
    """The boxes of one randomised start of the boxing (before packing and squeezing).

    Parameters
    ----------
    problem : Problem
    epsilon : float
        Height classes are powers of ``1 + epsilon``; Lemma 1 strips hold ``H * ceil(1/eps^2)``
        (outer) and ``H * ceil(1/eps)`` (inner) jobs.
    seed : int, optional
        Seed of the random critical times.

    Returns
    -------
    list of Box
        Boxes in creation order (members before the boxes that hold them). Rows that are fixed,
        have size 0, or are in no box are resolved directly (packed at the top level).
    """
    epsilon = _check_epsilon(epsilon)
    rows = _free_rows(problem)
    rs, re, times = _compress_times(problem)
    bx = _box_items(rs[rows], re[rows], problem.sizes[rows], np.random.default_rng(check_seed(seed)), epsilon)
    m, n = bx.m, bx.n
    parent = bx.parent[:n]
    out = []
    members = [[] for _ in range(n - m)]
    for item in range(n):
        if parent[item] >= 0:
            members[parent[item] - m].append(item)
    for b in range(m, n):
        mem = np.asarray(members[b - m], dtype=np.int64)
        is_row = mem < m
        par = int(parent[b])
        out.append(Box(start=int(times[bx.s[b]]), end=int(times[bx.e[b]]), height=int(bx.h[b]),
                       level=int(bx.level[b]), kind="strip" if bx.strip[b] else "rows",
                       rows=rows[mem[is_row]], row_offsets=bx.inner[mem[is_row]],
                       children=mem[~is_row] - m, child_offsets=bx.inner[mem[~is_row]],
                       parent=par - m if par >= 0 else -1))
    return out


def _greedy_fallback(problem, sweep):
    """The greedy-by-size plan (size order; best fit and first fit, the lower one) and its name."""
    from dsa.strategies._orders import by_size
    from dsa.strategies.greedy import greedy_offsets

    order = by_size(problem)
    best = None
    for fit in ("best", "first"):
        offsets = greedy_offsets(problem, order, fit, sweep=sweep)
        peak = plan_peak(problem, offsets)
        if best is None or peak < best[1]:
            best = (offsets, peak, f"greedy_by_size/{fit}")
    return best


def solve(problem, *, epsilon: float = 1.5, spread: float = 4.0, restarts: int | None = None,
          seed=None, sweep=None):
    """Plan by boxing (Buchsbaum et al. 2004) with random restarts, keeping the lowest plan.

    Parameters
    ----------
    problem : Problem
    epsilon : float, default 1.5
        Precision of the height classes (powers of ``1 + epsilon``) and of the Lemma 1 strips
        (``H * ceil(1/eps^2)`` outer, ``H * ceil(1/eps)`` inner jobs). The first start uses it as
        given. Values below 1 follow the paper's regime but leave almost every job unresolved at
        practical sizes (strips of ``H / eps^2`` jobs each side); above 1 each strip is ``H`` jobs.
    spread : float, default 4.0
        Starts after the first draw their epsilon log-uniformly in ``[epsilon / spread,
        epsilon * spread]``, which moves the class boundaries between starts. 1 keeps every start at
        ``epsilon`` (then only the critical times differ).
    restarts : int, optional
        Number of random starts (critical times, and epsilon within ``spread``, drawn anew each
        time). Default :func:`default_restarts` of the number of buffers (64 up to ~15k buffers,
        10 at 10^5, at least 4).
    seed : int, optional
        Seed of the random starts; the same seed gives the same plan.
    sweep : dsa.sweep.Sweep, optional
        The shared planning context (passed by :func:`dsa.solve`).

    Returns
    -------
    Solution
        ``stats``: ``boxes`` and ``levels`` (of the best start), ``best_start`` (its index) and its
        ``best_epsilon``, ``boxing_peak`` (the best start's peak after the squeeze), ``loose_peak``
        (its peak before the squeeze), ``greedy_peak`` (greedy by size, the better of best and first
        fit), ``fallback`` (True when the greedy plan was lower and is returned), ``winner``
        (``"boxing"`` or the greedy variant) and ``restarts``.
    """
    from dsa.sweep import Sweep

    epsilon = _check_epsilon(epsilon)
    if isinstance(spread, bool) or not isinstance(spread, (int, float, np.integer, np.floating)) \
            or not math.isfinite(spread) or spread < 1:
        raise ValueError(f"spread must be a number >= 1, got {spread!r}")
    n = len(problem)
    if restarts is None:
        restarts = default_restarts(n)
    if isinstance(restarts, bool) or not isinstance(restarts, (int, np.integer)) or restarts < 1:
        raise ValueError(f"restarts must be a positive int, got {restarts!r}")
    sweep = sweep or Sweep(problem)
    load = sweep.load
    greedy, greedy_peak, greedy_name = _greedy_fallback(problem, sweep)
    rows = _free_rows(problem)
    rs, re, _ = _compress_times(problem)
    rs, re = rs[rows], re[rows]
    rng = np.random.default_rng(check_seed(seed))
    best = None
    for k in range(int(restarts)):
        eps = epsilon if k == 0 else epsilon * float(spread ** rng.uniform(-1.0, 1.0))
        offsets, loose_peak, bx = _one_start(problem, rows, rs, re, rng, eps, sweep)
        peak = plan_peak(problem, offsets)
        if best is None or peak < best[1]:
            best = (offsets, peak, loose_peak, bx.n - bx.m, bx.levels, k, eps)
        if peak <= load or len(rows) == 0:
            break
    offsets, peak, loose_peak, n_boxes, levels, best_start, best_eps = best
    fallback = greedy_peak < peak
    stats = {"boxes": int(n_boxes), "levels": int(levels), "best_start": int(best_start),
             "best_epsilon": best_eps, "boxing_peak": int(peak), "loose_peak": int(loose_peak),
             "greedy_peak": int(greedy_peak), "fallback": bool(fallback),
             "winner": greedy_name if fallback else "boxing", "restarts": int(restarts)}
    return make_solution(problem, greedy if fallback else offsets, strategy="buchsbaum", stats=stats)
