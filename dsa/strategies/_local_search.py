"""A seeded local search over greedy orders that lowers the peak of a plan.

The search works on orders, not offsets: a plan is the output of the greedy decoder of
:mod:`dsa.strategies.greedy` (best or first fit; Pisarchyk & Lee, "Efficient Memory Management for
Deep Neural Net Inference", MLSys 2020 workshop, arXiv:2001.03288) applied to an order of the
buffers. It is

* squeaky wheel optimisation (D. E. Joslin and D. P. Clements, "Squeaky Wheel Optimization",
  JAIR 10, 1999): the buffers whose tops sit at or near the peak are the "squeaky" ones and are moved
  earlier in the order, so the decoder places them before the buffers that pushed them up;
* driven by late-acceptance hill climbing (E. K. Burke and Y. Bykov, "The late acceptance
  hill-climbing heuristic", EJOR 258(1), 2017): a candidate is accepted if it is no worse than the
  current plan or than the plan of ``hist_len`` iterations ago, which lets the search cross plateaus;
* with a secondary objective below the peak (the number of buffers touching the peak, then the
  bytes x time above the lower bound) so that moves which do not yet lower the peak still count.

Evaluation re-decodes only from the first changed position of the order and stops as soon as the
candidate cannot be accepted; see :mod:`dsa._kernels.localsearch`. numba cannot read the clock, so
the search runs in chunks of iterations and the deadline is checked between chunks; all state (the
random generator included) is carried over, so a run is reproducible for a seed and an iteration
count, whatever the chunking.

Problems with more than ``window`` free buffers are improved one time window at a time: the buffers
whose lifetimes meet a window around the peak are searched, every other buffer stays where it is
and acts as a fixed obstacle.

Complexity: each iteration costs one (partial) decode, O(m (m + f)) for ``m`` searched and ``f``
obstacle buffers; memory O(n + hist_len).
"""
from __future__ import annotations

import time

import numpy as np

from dsa.bounds import lower_bound
from dsa.budget import check_seed
from dsa.solution import plan_peak
from dsa.strategies._canonical_search import HEURISTICS
from dsa.strategies._orders import ORDERINGS

__all__ = ["search_orders", "repair_windows", "REPAIR_WINDOWS", "REPAIR_SLICE_S", "REPAIR_HEURISTICS"]

_DEFAULTS = dict(hist_len=64, stall=20000, band_div=8, lex=False, w_peak=0.0, line_frac=0.5, blame=False,
                 p_squeaky_insert=0.45, p_squeaky_swap=0.2, p_random_swap=0.2, p_flip_fit=0.01)


class _Search:
    """State of one late-acceptance search over the order of the rows ``free``.

    Rows in ``fixed`` keep ``offsets`` and are obstacles; every other row is ignored.
    """

    def __init__(self, problem, offsets, free, fixed, start_order, best_fit, line, rng_seed, params):
        from dsa._kernels import localsearch as K

        self.K = K
        n = len(problem)
        self.problem = problem
        self.free = free
        m = len(free)
        cap = m + len(fixed)
        self.starts, self.ends = problem.starts, problem.ends
        self.sizes, self.aligns = problem.sizes, problem.alignments
        self.durations = problem.ends - problem.starts
        self.base_offsets = offsets.copy()
        self.pos = np.full(n, -1, dtype=np.int64)
        self.order = np.asarray(start_order, dtype=np.int64).copy()
        self.pos[self.order] = np.arange(m)
        self.offsets = offsets.copy()
        self.tops = np.zeros(m + 1, dtype=np.int64)
        self.area = np.zeros(m + 1, dtype=np.float64)
        self.sl = [np.empty(cap, dtype=np.int64) for _ in range(5)]
        n0 = K.init_list(fixed, self.starts, self.ends, self.sizes, self.offsets, *self.sl)
        fixed_nz = fixed[self.sizes[fixed] > 0] if len(fixed) else fixed
        self.tops[0] = int((self.offsets[fixed_nz] + self.sizes[fixed_nz]).max()) if len(fixed_nz) else 0
        lex = bool(params["lex"])
        w_peak = float(params["w_peak"])
        peak, area, n_sl, _ = K.decode(self.order, 0, self.pos, self.starts, self.ends, self.sizes,
                                       self.aligns, self.offsets, self.tops, self.area, *self.sl, n0,
                                       best_fit, line, w_peak, True, np.int64(1) << 62, np.inf)
        k1 = peak if lex else 0
        k2 = area if lex else area + w_peak * peak
        # candidate copies
        self.order_c = self.order.copy()
        self.pos_c = self.pos.copy()
        self.offsets_c = self.offsets.copy()
        self.tops_c = self.tops.copy()
        self.area_c = self.area.copy()
        self.cl = [a.copy() for a in self.sl]
        self.best_order = self.order.copy()
        self.best_offsets = self.offsets.copy()
        hist_len = max(1, int(params["hist_len"]))
        self.hist_pk = np.full(hist_len, k1, dtype=np.int64)
        self.hist_sc = np.full(hist_len, k2, dtype=np.float64)
        self.st = np.array([k1, peak, n_sl, 0, 0, 0, int(best_fit), int(best_fit), 0, peak],
                           dtype=np.int64)
        self.fst = np.array([k2, k2], dtype=np.float64)
        self.prm = np.array([line, hist_len, int(params["stall"]), max(1, int(params["band_div"])),
                             int(lex), int(bool(params["blame"]))], dtype=np.int64)
        self.fprm = np.array([params["p_squeaky_insert"], params["p_squeaky_swap"],
                              params["p_random_swap"], params["p_flip_fit"], w_peak], dtype=np.float64)
        seed = int(rng_seed) & ((1 << 64) - 1)
        self.rng = np.array([seed or 0x9E3779B97F4A7C15], dtype=np.uint64)

    @property
    def best_peak(self) -> int:
        return int(self.st[1])

    @property
    def iterations(self) -> int:
        return int(self.st[4])

    def run(self, iters: int) -> None:
        self.K.search_chunk(int(iters), self.rng, self.st, self.fst, self.prm, self.fprm,
                            self.hist_pk, self.hist_sc, self.starts, self.ends, self.sizes, self.aligns,
                            self.order, self.pos, self.offsets, self.tops, self.area, *self.sl,
                            self.order_c, self.pos_c, self.offsets_c, self.tops_c, self.area_c, *self.cl,
                            self.best_order, self.best_offsets)


class _Improvements(list):
    """The list of ``(seconds, peak)`` of a search, which also tells ``progress`` of each new entry."""

    def __init__(self, items, progress=None):
        super().__init__(items)
        self.progress = progress

    def append(self, item) -> None:
        super().append(item)
        if self.progress is not None:
            self.progress(*item)


def _start_orders(problem, offsets, free, order):
    """Candidate start orders of the free rows: the given order, or the input plan's rows by offset
    and the named orderings."""
    mask = np.zeros(len(problem), dtype=bool)
    mask[free] = True
    if order is not None:
        order = np.asarray(order, dtype=np.int64)
        order = order[mask[order]]
        seen = np.zeros(len(problem), dtype=bool)
        seen[order] = True
        return [np.concatenate([order, free[~seen[free]]])]
    cands = [free[np.lexsort((free, offsets[free]))]]
    for fn in ORDERINGS.values():
        o = np.asarray(fn(problem), dtype=np.int64)
        cands.append(o[mask[o]])
    return cands


def _run(search, target, deadline, cap, stats, t0, best_peak, stop_below=None):
    """Run ``search`` in chunks until the deadline, ``cap`` iterations, ``target`` or (if given) a
    best peak below ``stop_below``; log new best peaks in ``stats``. Chunks aim at about 10 ms."""
    chunk = 16
    while search.iterations < cap and search.best_peak > target:
        if stop_below is not None and search.best_peak < stop_below:
            break
        now = time.perf_counter()
        if now >= deadline:
            break
        search.run(int(min(chunk, cap - search.iterations)))
        dt = time.perf_counter() - now
        if search.best_peak < best_peak and stop_below is None:
            best_peak = search.best_peak
            stats["improvements"].append((time.perf_counter() - t0, best_peak))
        if dt < 0.005:
            chunk = min(chunk * 2, 1 << 20)
        elif dt > 0.02 and chunk > 1:
            chunk //= 2


def _window_rows(problem, r, target):
    """Rows whose lifetimes meet a time window around row ``r``, about ``target`` of them.

    The window ``[start_r - w, end_r + w)`` is widened by doubling ``w``; O(log(T) log n).
    """
    ss = np.sort(problem.starts)
    es = np.sort(problem.ends)

    def count(a, b):
        return int(np.searchsorted(ss, b, "left") - np.searchsorted(es, a, "right"))

    a, b = int(problem.starts[r]), int(problem.ends[r])
    w = 1
    span = int(problem.ends.max() - problem.starts.min()) + 1
    while count(a - w, b + w) < target and w < span:
        w *= 2
    lo, hi = w // 2, w
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(a - mid, b + mid) <= target:
            lo = mid
        else:
            hi = mid
    a, b = a - lo, b + lo
    return np.flatnonzero((problem.starts < b) & (problem.ends > a)).astype(np.int64)


def _improve_windows(problem, work, fixed_mask, bound, start_peak, rng_seed, prm, window, deadline,
                     cap, stats, t0):
    """Improve a large plan one time window at a time.

    Repeatedly take a row at the peak, search the order of the (about ``window``) free rows whose
    lifetimes meet a time window around it, with every other row as a fixed obstacle, until that
    window's peak drops below the global peak; windows that cannot be lowered are not retried.
    Returns the plan and the iterations done.
    """
    plan = work.copy()
    peak = start_peak
    done = 0
    tried = np.zeros(len(problem), dtype=bool)
    sub_seed = rng_seed
    slice_s = max(0.02, (deadline - time.perf_counter()) / 4)
    while done < cap and time.perf_counter() < deadline and peak > bound:
        tops = plan + problem.sizes
        cand = np.flatnonzero((tops == peak) & ~tried & ~fixed_mask & (problem.sizes > 0))
        if len(cand) == 0:
            break
        r = int(cand[0])
        rows = _window_rows(problem, r, window)
        in_win = np.zeros(len(problem), dtype=bool)
        in_win[rows] = True
        free = rows[~fixed_mask[rows] & (problem.sizes[rows] > 0)]
        a, b = problem.starts[free].min(), problem.ends[free].max()
        fixed = np.flatnonzero((problem.starts < b) & (problem.ends > a) & ~(in_win & ~fixed_mask)
                               & (problem.sizes > 0)).astype(np.int64)
        order = free[np.lexsort((free, plan[free]))]   # first fit of this order is no worse
        sub_peak = int((plan[free] + problem.sizes[free]).max())
        line = bound + int(float(prm["line_frac"]) * (sub_peak - bound))
        sub_seed = (sub_seed * 6364136223846793005 + 1442695040888963407) & ((1 << 64) - 1)
        search = _Search(problem, plan, free, fixed, order, False, line, sub_seed, prm)
        slice_end = min(deadline, time.perf_counter() + slice_s)
        _run(search, bound, slice_end, cap - done, stats, t0, peak, stop_below=peak)
        done += search.iterations
        if int((search.best_offsets[free] + problem.sizes[free]).max()) < sub_peak:
            plan[free] = search.best_offsets[free]
        new_peak = plan_peak(problem, plan)
        if new_peak < peak:
            peak = new_peak
            stats["improvements"].append((time.perf_counter() - t0, peak))
            tried[:] = False
        else:
            tried[rows] = True
    return plan, done


def search_orders(problem, offsets, *, time_limit: float = 1.0, seed=None, order=None, iterations=None,
                  window: int = 1000, progress=None, **params):
    """Lower the peak of a plan by a seeded local search over greedy orders.

    Parameters
    ----------
    problem : Problem
    offsets : array of int
        A valid plan (e.g. the portfolio's); the result is never worse than it.
    time_limit : float, default 1.0
        Seconds of search (wall clock, checked between chunks of iterations).
    seed : int, optional
        Seed of the search. With ``iterations`` set, the result depends only on the problem, the
        input plan, ``order``, ``seed`` and ``iterations``.
    order : array of int, optional
        A start order (row indices), e.g. the one that produced ``offsets``; by default the search
        starts from the best of the input plan's rows sorted by offset and the named orderings,
        decoded with best and first fit.
    iterations : int, optional
        Stop after this many iterations (also bounded by ``time_limit``; pass ``time_limit=inf`` for
        a run of exactly ``iterations`` iterations).
    window : int, default 1000
        Problems with more free rows are improved one time window of about this many rows at a
        time (each window gets a quarter of the remaining time; with a finite ``time_limit`` the
        result then also depends on timing).
    **params
        Search parameters (defaults in ``_DEFAULTS``): ``hist_len`` (late-acceptance history, 64),
        ``stall`` (iterations without a lower peak before a restart from the best, 20000),
        ``lex`` (cost ``(peak, area)`` lexicographic if true, else ``area + w_peak * peak``; False),
        ``w_peak`` (0), ``line_frac`` (the area counts bytes x time above
        ``LOAD + line_frac * (start_peak - LOAD)``, 0.5), ``band_div`` (a row is squeaky when its top
        is within (peak - line) / band_div of the peak, 8), ``blame`` (move a squeaky row just before
        a row below it that it meets in time, instead of to a uniform earlier position; False) and
        the move probabilities ``p_squeaky_insert`` (0.45), ``p_squeaky_swap`` (0.2),
        ``p_random_swap`` (0.2), ``p_flip_fit`` (0.01); the rest is a random insertion.

    Returns
    -------
    (offsets, stats)
        The best plan found, and ``stats`` with ``iterations``, ``improvements`` (a list of
        ``(seconds, peak)``, the first being the start), ``start_peak`` and ``final_peak``.
    """
    t0 = time.perf_counter()
    unknown = set(params) - set(_DEFAULTS)
    if unknown:
        raise TypeError(f"unknown search parameters {sorted(unknown)}; valid: {sorted(_DEFAULTS)}")
    prm = {**_DEFAULTS, **params}
    n = len(problem)
    offsets = np.asarray(offsets, dtype=np.int64)
    start_peak = plan_peak(problem, offsets)
    stats = {"iterations": 0, "improvements": _Improvements([(0.0, start_peak)], progress),
             "start_peak": start_peak, "final_peak": start_peak}
    if n == 0:
        return offsets.copy(), stats
    fixed_mask = problem.is_fixed
    # the plan we work on: fixed rows at their offsets, zero-size rows at 0 (they block nothing)
    work = offsets.copy()
    zero = (problem.sizes == 0) & ~fixed_mask
    work[zero] = 0
    free = np.flatnonzero(~fixed_mask & (problem.sizes > 0)).astype(np.int64)
    fixed = np.flatnonzero(fixed_mask).astype(np.int64)
    bound = lower_bound(problem)
    if len(free) == 0 or start_peak <= bound:
        stats["final_peak"] = start_peak
        return offsets.copy(), stats
    seed_seq = np.random.SeedSequence(check_seed(seed))
    rng_seed = int(seed_seq.generate_state(1, dtype=np.uint64)[0])
    deadline = t0 + time_limit
    cap = np.inf if iterations is None else int(iterations)
    if len(free) > window:
        result, done = _improve_windows(problem, work, fixed_mask, bound, start_peak, rng_seed, prm,
                                        window, deadline, cap, stats, t0)
        stats["iterations"] = done
        result[zero] = 0
        if plan_peak(problem, result) >= start_peak:
            result = offsets.copy()
        stats["final_peak"] = plan_peak(problem, result)
        return result, stats

    line = bound + int(float(prm["line_frac"]) * (start_peak - bound))
    # start: best of the candidate orders x both fits
    best = None
    for o in _start_orders(problem, work, free, order):
        for bf in (True, False):
            s = _Search(problem, work, free, fixed, o, bf, line, rng_seed, prm)
            if best is None or s.best_peak < best.best_peak:
                best = s
    search = best
    best_peak = start_peak
    if search.best_peak < best_peak:
        best_peak = search.best_peak
        stats["improvements"].append((time.perf_counter() - t0, best_peak))
    _run(search, bound, deadline, cap, stats, t0, best_peak)
    best_peak = min(best_peak, search.best_peak)
    stats["iterations"] = search.iterations
    if best_peak < start_peak:
        result = search.best_offsets.copy()
        result[zero] = 0
    else:
        result = offsets.copy()
    stats["final_peak"] = plan_peak(problem, result)
    return result, stats


# repair_windows: rows contained in the k-th window (cycled), and seconds of canonical search per window
REPAIR_WINDOWS = (400, 800, 200, 1200)
REPAIR_SLICE_S = 0.2
# ... with these static preorders (dsa.strategies._canonical_search.HEURISTICS, tuned on MiniMalloc's
# instances, and WAT: duration, then area, then the largest section total, supermalloc's first
# preorder). best at 20 s on 13 cuts of 1,500-5,000 buffers (4 of omnimalloc's pinwheel tilings among
# them): 5 lower (by 0.1-0.7 % of LOAD), 8 level, none higher; mean 1.1624 -> 1.1612 x LOAD
REPAIR_HEURISTICS = (*HEURISTICS, "WAT")


def _contained_window(problem, r, target, shift=0.5):
    """A time range ``[a, b)`` around row ``r``'s lifetime that contains about ``target`` lifetimes
    (widened on both sides by doubling, then bisected), its width shared between the two sides as
    ``shift`` (in [0, 1]) to 1 - ``shift``; O(n log T)."""
    starts, ends = problem.starts, problem.ends
    a0, b0 = int(starts[r]), int(ends[r])
    lo_t, hi_t = int(starts.min()), int(ends.max())

    def count(w):
        return int(np.count_nonzero((starts >= a0 - w) & (ends <= b0 + w)))

    w = 1
    while count(w) < target and (a0 - w > lo_t or b0 + w < hi_t):
        w *= 2
    lo, hi = w // 2, w
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(mid) <= target:
            lo = mid
        else:
            hi = mid
    left = int(round(2 * lo * float(shift)))
    return max(lo_t, a0 - left), b0 + 2 * lo - left


def repair_windows(problem, offsets, *, time_limit: float, seed=None, progress=None):
    """Lower the peak of a plan by large-neighbourhood search with an exact repair step.

    Each step takes a random row at the peak and a time range ``[a, b)`` around it that contains
    about ``REPAIR_WINDOWS[k]`` lifetimes (cycled), placed at random around the row's lifetime; the
    rows whose lifetimes lie inside it are ripped up and re-placed by the canonical search of
    :mod:`dsa.strategies._canonical_search` (MiniMalloc's, Moffitt, ASPLOS 2023; with the static
    preorders ``REPAIR_HEURISTICS``), for ``REPAIR_SLICE_S`` seconds, below the current peak: every
    other row that meets ``[a, b)`` is a fixed obstacle, cut to ``[a, b)`` in time and to the peak
    minus one in address. A window re-planned below the peak is kept; the peak falls once every row
    at it has been moved. This is the large-neighbourhood search of Shaw (CP 1998) with the exact search as repair.

    Parameters
    ----------
    problem : Problem
    offsets : array of int
        A valid plan; the result is never worse.
    time_limit : float
        Seconds (finite).
    seed : int, optional
        Seed of the choice of rows at the peak.
    progress : callable, optional
        Called as ``progress(seconds, peak)`` each time the peak falls.

    Returns
    -------
    (offsets, stats)
        ``stats``: ``windows`` (repairs tried), ``repaired`` (windows re-planned below the peak),
        ``improvements`` (``(seconds, peak)``, the first being the start).
    """
    from dsa.problem import Problem
    from dsa.strategies._canonical_search import lower_peak

    t0 = time.perf_counter()
    deadline = t0 + float(time_limit)
    plan = np.asarray(offsets, dtype=np.int64).copy()
    peak = plan_peak(problem, plan)
    stats = {"windows": 0, "repaired": 0, "improvements": _Improvements([(0.0, peak)], progress)}
    bound = lower_bound(problem)
    rng = np.random.default_rng(check_seed(seed))
    movable = problem.is_movable
    sized = problem.sizes > 0
    while peak > bound and time.perf_counter() < deadline:
        cand = np.flatnonzero((plan + problem.sizes == peak) & movable)
        if len(cand) == 0:
            break
        r = int(cand[rng.integers(len(cand))])
        a, b = _contained_window(problem, r, REPAIR_WINDOWS[stats["windows"] % len(REPAIR_WINDOWS)],
                                 rng.random())
        stats["windows"] += 1
        inside = (problem.starts >= a) & (problem.ends <= b)
        free = np.flatnonzero(inside & movable)
        cap = peak - 1
        obst = np.flatnonzero((problem.starts < b) & (problem.ends > a) & sized & ~(inside & movable)
                              & (plan < cap))
        k = len(free)
        sub = Problem(np.concatenate([problem.starts[free], np.maximum(problem.starts[obst], a)]),
                      np.concatenate([problem.ends[free], np.minimum(problem.ends[obst], b)]),
                      np.concatenate([problem.sizes[free],
                                      np.minimum(problem.sizes[obst], cap - plan[obst])]),
                      alignments=np.concatenate([problem.alignments[free], np.ones(len(obst), np.int64)]),
                      fixed_offsets=np.concatenate([np.full(k, -1, dtype=np.int64), plan[obst]]))
        start = np.concatenate([plan[free], plan[obst]])
        slice_s = max(0.0, min(REPAIR_SLICE_S, deadline - time.perf_counter()))
        out, _ = lower_peak(sub, start, time_limit=slice_s, heuristics=REPAIR_HEURISTICS)
        if plan_peak(sub, out) <= cap:  # every ripped-up row is below the peak (obstacles are exact there)
            plan[free] = out[:k]
            stats["repaired"] += 1
            new = plan_peak(problem, plan)
            if new < peak:
                peak = new
                stats["improvements"].append((time.perf_counter() - t0, peak))
    return plan, stats
