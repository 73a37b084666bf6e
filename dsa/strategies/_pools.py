"""Planning over memory pools: which rows go to fast memory, and where.

A plan over pools (:mod:`dsa.pools`) gives every row a pool it may use and an offset inside it; the
rows of each pool must form a valid plan within its capacity; the objective is the cost
``sum_i cost(pool of i) * weight_i``. For one bounded fast pool and an unbounded slow one this is a
maximum-weight subset of the rows that packs into the fast pool: a knapsack over time whose items are
themselves a Dynamic Storage Allocation problem (NP-hard twice over).

Three planners, one per registered strategy that plans pools:

* :func:`fastest_first` (strategy ``fastest_first``): the baseline that today's planners use. Rows
  are taken largest first; each goes into the cheapest pool it may use where it fits next to the rows
  already there (the lowest fitting gap, best fit). This is the Unified Static Memory Planner of TVM
  (pools with size hints, each buffer into the first pool of its candidate list where it fits;
  TVM RFC 0009, 2021) and ExecuTorch's banked greedy (fill the fastest bank, spill to the next).
* :func:`search` (``best``): the fastest-first plan and three other orders (the saving per byte-time
  of each row first; the shortest-lived first; the smallest area first), then a local search until the
  time limit: move a row to a cheaper pool (into a gap of the pool's plan, or by re-packing that
  pool's rows with the greedy orderings), and when it does not fit, eject the rows of that pool that
  meet it in time and save least per byte-time to their next pool, if the exchange lowers the cost
  (a large-neighbourhood move in the sense of Shaw, CP 1998).
* :func:`exact` (``exact``): a depth-first branch and bound over the assignment of the rows that may
  use more than one pool, dearest saving first, cheapest pool first, pruned by the cost of the
  partial assignment plus the cheapest cost of the rest; every pool's set of rows is checked to pack
  at each step (LOAD first, then the greedy orderings, then the complete canonical search of
  :mod:`dsa.strategies.exact` in decision mode). A completed search proves its incumbent optimal, or
  proves that no assignment fits (status INFEASIBLE), with a conflict: an irreducible infeasible
  subset of rows found by a deletion filter (M. D. Moffitt, "MiniMalloc", ASPLOS 2023; J. W.
  Chinneck, "Feasibility and Infeasibility in Optimization", 2008). When the limits stop it first, the
  bound it reports is the Lagrangian bound below.

The Lagrangian bound (:func:`lagrangian_bound`). Relax "each pool's rows pack" to "the bytes alive in
each pool at each instant stay within its capacity", solve that linear program (HiGHS, through
scipy), and evaluate the Lagrangian function at its dual prices ``y >= 0``:
``L(y) = sum_i min_p (cost_p * w_i + size_i * sum of y over pool p's sections of row i)
- sum y * capacity``. Any ``y >= 0`` gives a valid bound (M. L. Fisher, "The Lagrangian Relaxation
Method for Solving Integer Programming Problems", Management Science 1981), so the LP's tolerances
cannot make it wrong; it is evaluated in floating point with a relative safety margin of 1e-9, and
rounded up to the next cost an assignment can have (:meth:`dsa.pools.PoolSpec.round_up`).

Complexity: fastest first is O(n log n + E + sum_i k_i log k_i) (E: pairs of rows that meet in time,
k_i: the row's neighbours in its pool); a move of the search costs one placement or one greedy
re-pack of a pool; the branch and bound is exponential in the rows with a choice, bounded by the
time and node limits.
"""
from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np

from dsa.budget import Budget
from dsa.context import Context
from dsa.placement import gap_offset, greedy_offsets
from dsa.pools import PoolSpec, make_pool_solution
from dsa.solution import describe_row, plan_peak
from dsa.strategies._orders import order_rows
from dsa.sweep import sections

__all__ = ["fastest_first", "search", "exact", "lagrangian_bound", "conflict_filter", "decide_rows", "spec_of", "more_search", "ORDERS"]

SEARCH_TIME_LIMIT = 1.0     # best's default, as for one slab
EXACT_TIME_LIMIT = 10.0     # exact's default over pools (a search over assignments never ends by itself)
PACK_ORDERS = (("size", "best"), ("area", "best"), ("conflict", "best"), ("duration", "best"), ("size", "first"))
EJECT_MOST = 8              # rows one exchange may move out of a pool
LP_MOST_NONZEROS = 500_000
MAX_DEPTH = 900             # rows with a choice the branch and bound takes on (Python recursion)
DECISION_NODES = 200_000    # search nodes of one "do these rows pack?" decision of exact
SMALL_SEARCH = 20           # rows with a choice up to which exact's incumbent comes without restarts


def _value_keys(problem, spec: PoolSpec):
    """Per row: what moving it from its dearest to its cheapest allowed pool saves, and that per byte-time."""
    costs = spec.costs
    allowed = spec.allowed
    hi = np.where(allowed, costs[None, :], -np.inf).max(axis=1) if len(problem) else np.zeros(0)
    lo = np.where(allowed, costs[None, :], np.inf).min(axis=1) if len(problem) else np.zeros(0)
    gain = spec.weights.astype(np.float64) * (hi - lo)
    area = np.maximum(problem.sizes, 1).astype(np.float64) * problem.durations.astype(np.float64)
    return gain, gain / area


def _ordering(problem, spec, name) -> np.ndarray:
    """Rows in the order of ``name``: a greedy ordering of :mod:`dsa.strategies._orders`, ``"value"``
    (saving per byte-time, highest first) or ``"short"`` (shortest lifetime first, then largest); an
    array is taken as the order itself."""
    if not isinstance(name, str):
        return np.asarray(name, dtype=np.int64)
    rows = np.arange(len(problem))
    if name == "value":
        gain, density = _value_keys(problem, spec)
        return np.lexsort((rows, -problem.sizes, -gain, -density))
    if name == "short":
        return np.lexsort((rows, -problem.sizes, problem.durations))
    return order_rows(problem, name)


ORDERS = ("size", "value", "short", "area")


def _time_neighbours(sweep):
    """The time-overlap graph of the sweep's problem as CSR ``(indptr, indices)`` (built once per call,
    in the planning context's :class:`dsa.sweep.Sweep`), or None where it would be dense (most rows
    meet: scanning every row is then as fast and takes no O(n^2) memory)."""
    if len(sweep.problem) < 64 or sweep.dense:
        return None
    return sweep.overlap


class _Plan:
    """An assignment and offsets over the pools, with the moves the planners make on it."""

    def __init__(self, problem, spec: PoolSpec, neighbours=None):
        self.problem, self.spec, self.neighbours = problem, spec, neighbours
        n = len(problem)
        self.pool = np.full(n, -1, dtype=np.int64)
        self.offsets = np.full(n, -1, dtype=np.int64)
        self.caps = [spec.capacity(p) for p in range(len(spec))]
        self.fixed = problem.is_fixed

    def copy(self) -> "_Plan":
        other = _Plan.__new__(_Plan)
        other.problem, other.spec, other.caps, other.neighbours = self.problem, self.spec, self.caps, self.neighbours
        other.fixed = self.fixed
        other.pool, other.offsets = self.pool.copy(), self.offsets.copy()
        return other

    def meets(self, r: int, p: int, exclude=None) -> np.ndarray:
        """The rows of pool ``p`` (with bytes) whose lifetimes meet row ``r``'s."""
        pr = self.problem
        if self.neighbours is not None:
            indptr, indices = self.neighbours
            cand = indices[indptr[r]:indptr[r + 1]]
            keep = (self.pool[cand] == p) & (pr.sizes[cand] > 0)
            if exclude is not None and len(exclude):
                keep &= ~np.isin(cand, exclude)
            return np.sort(cand[keep])
        near = (self.pool == p) & (pr.sizes > 0) & (pr.starts < pr.ends[r]) & (pr.ends > pr.starts[r])
        near[r] = False
        if exclude is not None:
            near[exclude] = False
        return np.flatnonzero(near)

    def fit(self, r: int, p: int, exclude=None) -> int | None:
        """Row ``r``'s offset in pool ``p`` next to the rows there (best fit), or None when it does not
        fit the capacity (or is fixed elsewhere)."""
        pr = self.problem
        size = int(pr.sizes[r])
        if self.fixed[r]:
            return int(pr.fixed_offsets[r])
        if size == 0:
            return 0
        near = self.meets(r, p, exclude)
        off = gap_offset(self.offsets[near], self.offsets[near] + pr.sizes[near], size, int(pr.alignments[r]))
        cap = self.caps[p]
        return off if cap is None or off + size <= cap else None

    def rows(self, p: int) -> np.ndarray:
        return np.flatnonzero(self.pool == p)

    def cost(self) -> Fraction:
        return self.spec.exact_cost(self.pool)


def _pack(problem, rows, cap, orders=PACK_ORDERS):
    """Offsets (aligned with ``rows``) of a greedy plan of ``rows`` within ``cap`` (the lowest peak
    among the orderings when ``cap`` is None), or None when no ordering fits."""
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) == 0:
        return np.zeros(0, dtype=np.int64)
    sub = problem.take(rows)
    best, best_peak = None, None
    for order, fit in orders:
        offsets = greedy_offsets(sub, order_rows(sub, order), fit)
        peak = plan_peak(sub, offsets)
        if cap is not None and peak <= cap:
            return offsets
        if best_peak is None or peak < best_peak:
            best, best_peak = offsets, peak
    return best if cap is None else None


def fastest_first(problem, spec: PoolSpec, order="size", neighbours=None):
    """Each row, in ``order`` (largest first by default; a name of :func:`_ordering` or an array of
    rows), into the cheapest pool it may use where it fits.

    Returns
    -------
    (_Plan, None) or (None, int)
        The plan, or the first row that fits in no pool it may use.

    ``neighbours`` is the time-overlap graph (:func:`_time_neighbours`); None scans every row.
    """
    plan = _Plan(problem, spec, neighbours)
    fixed = np.flatnonzero(problem.is_fixed)
    for r in fixed.tolist():
        plan.pool[r] = int(np.flatnonzero(spec.allowed[r])[0])
        plan.offsets[r] = problem.fixed_offsets[r]
    rank = spec.rank.tolist()
    fixed_mask = plan.fixed
    for r in _ordering(problem, spec, order).tolist():
        if fixed_mask[r]:
            continue
        for p in rank:
            if not spec.allowed[r, p]:
                continue
            off = plan.fit(r, p)
            if off is not None:
                plan.pool[r], plan.offsets[r] = p, off
                break
        else:
            return None, r
    return plan, None


class _Improver:
    """The local search of :func:`search` on one plan (see the module docstring)."""

    def __init__(self, problem, spec: PoolSpec, plan: _Plan, budget: Budget):
        self.problem, self.spec, self.plan, self.budget = problem, spec, plan, budget
        self.costs, self.weights = spec.exact_costs, spec.exact_weights
        _, self.density = _value_keys(problem, spec)
        self.moves = 0
        self.cost = plan.cost()

    def saving(self, r: int, p_from: int, p_to: int) -> Fraction:
        return (self.costs[p_from] - self.costs[p_to]) * self.weights[r]

    def place_elsewhere(self, plan: _Plan, q: int, above: int) -> bool:
        """Put row ``q`` (taken out of a pool) in the cheapest pool after ``above`` in rank where it fits."""
        rank = self.spec.rank.tolist()
        for p in rank[rank.index(above) + 1:]:
            if not self.spec.allowed[q, p]:
                continue
            off = plan.fit(q, p)
            if off is None and plan.caps[p] is not None:
                if not self.repack(plan, p, extra=[q]):
                    continue
                return True
            if off is not None:
                plan.pool[q], plan.offsets[q] = p, off
                return True
        return False

    def repack(self, plan: _Plan, p: int, extra=(), drop=()) -> bool:
        """Re-plan pool ``p`` with rows ``extra`` added and ``drop`` removed; True (and applied) if it fits."""
        rows = plan.rows(p)
        if len(drop):
            rows = rows[~np.isin(rows, drop)]
        rows = np.union1d(rows, np.asarray(extra, dtype=np.int64))
        offsets = _pack(self.problem, rows, plan.caps[p])
        if offsets is None:
            return False
        plan.pool[rows], plan.offsets[rows] = p, offsets
        return True

    def try_move(self, r: int, p: int, cheap: bool = False) -> bool:
        """Move row ``r`` to the cheaper pool ``p``: into a gap, or (unless ``cheap``) by a re-pack or by
        an exchange."""
        plan = self.plan
        off = plan.fit(r, p)
        if off is not None:
            plan.pool[r], plan.offsets[r] = p, off
            return True
        if cheap:
            return False
        if self.eject_insert(r, p):
            return True
        trial = plan.copy()
        if self.repack(trial, p, extra=[r]):
            self.plan = trial
            return True
        # the exchange: rows of p that meet r, the least saving per byte-time first, go to their next pool
        gain = self.saving(r, plan.pool[r], p)
        victims = [q for q in plan.meets(r, p).tolist() if not plan.fixed[q]]
        victims.sort(key=lambda q: (self.density[q], q))
        loss = Fraction(0)
        for k, q in enumerate(victims[:EJECT_MOST]):
            if self.budget.exhausted:
                return False
            loss += self.saving(q, p, self._next_pool(q, p))
            if loss >= gain:
                return False
            out = np.asarray(victims[:k + 1], dtype=np.int64)
            trial = plan.copy()
            trial.pool[out] = -1
            if not self.repack(trial, p, extra=[r]):
                continue
            if all(self.place_elsewhere(trial, q, p) for q in out.tolist()) and trial.cost() < self.cost:
                self.plan = trial
                return True
        return False

    def eject_insert(self, r: int, p: int) -> bool:
        """Put row ``r`` at the offset of pool ``p`` where the rows it displaces (those that meet it in
        time and in address) save the least, if they save less than ``r`` does; they go to their next
        pool. Candidate offsets: the floor and the top of every row of ``p`` that meets ``r``."""
        plan, pr = self.plan, self.problem
        size, align = int(pr.sizes[r]), int(pr.alignments[r])
        cap = plan.caps[p]
        near = plan.meets(r, p)
        if len(near) == 0:
            return False
        lo = plan.offsets[near]
        hi = lo + pr.sizes[near]
        cand = np.unique(np.r_[0, -(-hi // align) * align, (lo // align) * align])
        if cap is not None:
            cand = cand[cand + size <= cap]
        if len(cand) == 0:
            return False
        hit = (lo[None, :] < cand[:, None] + size) & (hi[None, :] > cand[:, None])  # (candidates, neighbours)
        loss = np.array([float(self.saving(q, p, self._next_pool(q, p))) if not plan.fixed[q] else np.inf
                         for q in near.tolist()])
        total = np.where(hit, loss[None, :], 0.0).sum(axis=1)
        best = int(np.argmin(total))
        gain = self.saving(r, plan.pool[r], p)
        if not total[best] < float(gain):
            return False
        out = near[hit[best]]
        trial = plan.copy()
        trial.pool[out] = -1
        trial.pool[r], trial.offsets[r] = p, int(cand[best])
        if not all(self.place_elsewhere(trial, int(q), p) for q in out.tolist()):
            return False
        if trial.cost() >= self.cost:
            return False
        self.plan = trial
        return True

    def _next_pool(self, q: int, p: int) -> int:
        rank = self.spec.rank.tolist()
        for nxt in rank[rank.index(p) + 1:]:
            if self.spec.allowed[q, nxt]:
                return nxt
        return p  # (none: the exchange is not possible; its saving is 0 and the loss check stops it)

    def run(self, bound: Fraction) -> bool:
        """Improve until no move helps, the bound is met, or the budget runs out (then True)."""
        problem, spec = self.problem, self.spec
        rank = spec.rank.tolist()
        improved = True
        order = np.argsort(-self.density, kind="stable").tolist()
        fixed = problem.is_fixed
        while improved:
            improved = False
            # every pass tries the cheap moves (into a gap) of all rows before the dear ones (re-packs)
            for p, cheap in [(p, cheap) for cheap in (True, False) for p in (rank[:-1] if len(rank) > 1 else [])]:
                for r in order:
                    if self.cost <= bound:
                        return False
                    if self.budget.exhausted or self.budget.remaining() <= 0:
                        return True
                    now = self.plan.pool[r]
                    if fixed[r] or problem.sizes[r] == 0 or not spec.allowed[r, p] \
                            or rank.index(now) <= rank.index(p):
                        continue
                    if spec.costs[now] == spec.costs[p]:
                        continue
                    if self.try_move(r, p, cheap):
                        self.moves += 1
                        self.cost = self.plan.cost()
                        improved = True
        return False


def _finish(problem, spec: PoolSpec, plan: _Plan) -> _Plan:
    """Re-pack each unbounded pool with the greedy orderings, keeping the lowest peak (its cost is the same)."""
    for p in range(len(spec)):
        if spec.capacity(p) is None:
            rows = plan.rows(p)
            offsets = _pack(problem, rows, None)
            if offsets is not None and len(rows) and \
                    int((offsets + problem.sizes[rows]).max()) < int((plan.offsets[rows] + problem.sizes[rows]).max()):
                plan.offsets[rows] = offsets
    return plan


def spec_of(context) -> PoolSpec:
    spec = getattr(context, "pools", None)
    if spec is None:
        raise ValueError("planning over pools needs a context with pools (use dsa.solve(..., pools=[...]))")
    return spec


def _constructive(problem, spec, orders=ORDERS, neighbours=None, budget=None):
    """The best of the fastest-first plans over ``orders`` (ties to the first): ``(plan, order, failed_row)``.

    The first order always runs; the others while ``budget`` has time left."""
    best = best_cost = winner = None
    failed = None
    for k, order in enumerate(orders):
        if k and budget is not None and budget.remaining() <= 0:
            break
        plan, bad = fastest_first(problem, spec, order, neighbours)
        if plan is None:
            failed = bad if failed is None else failed
            continue
        cost = plan.cost()
        if best is None or cost < best_cost:
            best, best_cost, winner = plan, cost, order
    return best, winner, failed


def solve_fastest_first(problem, *, context=None):
    """The strategy ``fastest_first`` over pools: see :func:`fastest_first`."""
    spec = spec_of(context)
    plan, bad = fastest_first(problem, spec, neighbours=_time_neighbours(context.sweep))
    if plan is None:
        return make_pool_solution(problem, spec, None, None, strategy="fastest_first",
                                  message=f"{describe_row(problem, bad)} (size {problem.sizes[bad]}) fits in no pool it "
                                          "may use next to the rows placed before it (largest first)")
    return make_pool_solution(problem, spec, plan.pool, plan.offsets, strategy="fastest_first",
                              stats={"order": "size"})


def search(problem, *, context=None, time_limit: float | None = None, seed=None, restarts: bool = True,
           target: float | None = None):
    """``best`` over pools: constructive plans, then the local search of :class:`_Improver` (see the module);
    with ``restarts``, random restarts until the time limit, the trivial bound or ``target`` (a proven
    bound on the cost: a plan that meets it is optimal)."""
    spec = spec_of(context)
    t0 = time.perf_counter()
    budget = Budget(SEARCH_TIME_LIMIT if time_limit is None else time_limit, None)
    neighbours = _time_neighbours(context.sweep)
    plan, winner, failed = _constructive(problem, spec, neighbours=neighbours, budget=budget)
    if plan is None:
        return make_pool_solution(problem, spec, None, None, strategy="best",
                                  message=f"{describe_row(problem, failed)} (size {problem.sizes[failed]}) fits in no "
                                          "pool it may use next to the rows placed before it, in every order tried")
    start_cost = plan.cost()
    bound = Fraction(spec.exact_cost(spec.cheapest()))
    if target is not None and math.isfinite(target):
        bound = max(bound, Fraction(target))
    improver = _Improver(problem, spec, plan, budget)
    stopped = improver.run(bound) if start_cost > bound else False
    best, best_cost, moves, n_restarts = improver.plan, improver.cost, improver.moves, 0
    last = time.perf_counter() - t0
    # restarts until the deadline: the saving-per-byte-time order with random noise, then the local search
    rng = np.random.default_rng(seed)
    _, density = _value_keys(problem, spec)
    while restarts and not stopped and best_cost > bound and budget.remaining() > 0 and len(problem):
        n_restarts += 1
        noisy = density * rng.lognormal(0.0, 0.5, len(problem))
        plan, _ = fastest_first(problem, spec, np.lexsort((np.arange(len(problem)), -problem.sizes, -noisy)),
                                neighbours)
        if plan is None:
            continue
        improver = _Improver(problem, spec, plan, budget)
        stopped = improver.run(bound)
        moves += improver.moves
        if improver.cost < best_cost:
            best, best_cost, last = improver.plan, improver.cost, time.perf_counter() - t0
    stopped = stopped or (restarts and best_cost > bound and budget.remaining() <= 0)
    plan = _finish(problem, spec, best)
    return make_pool_solution(problem, spec, plan.pool, plan.offsets, strategy="best", limit_reached=stopped,
                              stats={"winner": winner, "moves": moves, "restarts": n_restarts,
                                     "constructive_cost": float(start_cost), "last_improvement_s": last,
                                     "search_s": time.perf_counter() - t0})


# ---------------------------------------------------------------------------------------- bounds
def lagrangian_bound(problem, spec: PoolSpec, time_limit: float | None = None) -> float:
    """A proven lower bound on the cost: the Lagrangian bound at the dual prices of the LP relaxation.

    Returns :meth:`PoolSpec.trivial_bound` when scipy is not installed, when every pool is unbounded,
    when the relaxation would have more than ``LP_MOST_NONZEROS`` nonzeros, or when the LP solver
    does not finish within ``time_limit`` seconds. See the module
    docstring for the relaxation and why its value is a proof whatever the LP solver's tolerances.
    """
    trivial = spec.trivial_bound()
    n, k = spec.allowed.shape
    bounded = [p for p in range(k) if spec.capacity(p) is not None]
    if n == 0 or not bounded:
        return trivial
    try:
        from scipy.optimize import linprog
        from scipy.sparse import coo_matrix
    except ImportError:
        return trivial
    sizes = problem.sizes
    times, first, last = sections(problem.starts, problem.ends)
    pairs = [(i, p) for i in range(n) for p in range(k) if spec.allowed[i, p]]
    var = {ip: v for v, ip in enumerate(pairs)}
    rows_c, cols_c, vals_c, caps = [], [], [], []
    nnz = 0
    for p in bounded:
        cap = spec.capacity(p)
        members = np.flatnonzero(spec.allowed[:, p] & (sizes > 0))
        if len(members) == 0:
            continue
        # bytes alive per section among the rows that may use p: only sections above cap can bind
        delta = np.zeros(len(times) + 1, dtype=np.int64)
        np.add.at(delta, first[members], sizes[members])
        np.add.at(delta, last[members] + 1, -sizes[members])
        alive = np.cumsum(delta)[:-1]
        binding = np.flatnonzero(alive > cap)
        if len(binding) == 0:
            continue
        index = np.full(len(times), -1, dtype=np.int64)
        index[binding] = np.arange(len(binding)) + len(caps)
        for i in members.tolist():
            secs = index[first[i]:last[i] + 1]
            secs = secs[secs >= 0]
            nnz += len(secs)
            if nnz > LP_MOST_NONZEROS:
                return trivial
            rows_c.extend(secs.tolist())
            cols_c.extend([var[(i, p)]] * len(secs))
            vals_c.extend([float(sizes[i])] * len(secs))
        caps.extend([float(cap)] * len(binding))
    if not caps:
        return trivial
    m = len(pairs)
    a_ub = coo_matrix((vals_c, (rows_c, cols_c)), shape=(len(caps), m)).tocsr()
    a_eq = coo_matrix(([1.0] * m, ([i for i, _ in pairs], list(range(m)))), shape=(n, m)).tocsr()
    c = np.array([spec.pools[p].cost * float(spec.weights[i]) for i, p in pairs])
    options = {} if time_limit is None else {"time_limit": max(float(time_limit), 0.01)}
    res = linprog(c, A_ub=a_ub, b_ub=np.array(caps), A_eq=a_eq, b_eq=np.ones(n), bounds=(0, 1), method="highs",
                  options=options)
    if res.status != 0 or getattr(res, "ineqlin", None) is None:
        return trivial
    y = np.maximum(-np.asarray(res.ineqlin.marginals, dtype=np.float64), 0.0)
    # L(y) = sum_i min_p (c_p w_i + s_i * sum of y over p's sections of i) - sum y * cap
    price = a_ub.T @ y  # sum over the binding sections of each (i, p) of size_i * y
    term = c + price
    best = np.full(n, np.inf)
    np.minimum.at(best, np.array([i for i, _ in pairs]), term)
    value = float(best.sum() - float(np.dot(y, caps)))
    scale = float(np.abs(best).sum() + np.dot(y, caps)) + 1.0
    value -= 1e-9 * scale
    return max(trivial, spec.round_up(value))


# ---------------------------------------------------------------------------------------- exact
class _Stop(Exception):
    pass


class _AssignmentSearch:
    """The branch and bound of :func:`exact` (see the module docstring) on one problem."""

    def __init__(self, problem, spec: PoolSpec, budget: Budget, seed=None):
        self.problem, self.spec, self.budget, self.seed = problem, spec, budget, seed
        n, k = spec.allowed.shape
        self.n, self.k = n, k
        self.caps = [spec.capacity(p) for p in range(k)]
        self.costs, self.weights = spec.exact_costs, spec.exact_weights
        _, first, last = sections(problem.starts, problem.ends)
        self.first, self.last = first, last
        self.live = [np.zeros(int(last.max()) + 1 if n else 0, dtype=np.int64) for _ in range(k)]
        self.memo = {}          # (pool, rows) -> offsets, False or None
        self.unknown = False    # a decision ran out of budget: the search is not complete
        self.nodes = 0
        self.decisions = 0

    def packs(self, p: int, rows) -> bool | None:
        """Whether ``rows`` pack into pool ``p``: True, False, or None (the decision's budget ran out)."""
        cap = self.caps[p]
        if cap is None:
            return True
        key = (p, tuple(rows))
        if key in self.memo:
            found = self.memo[key]
            return None if found is None else found is not False
        rows = np.asarray(rows, dtype=np.int64)
        offsets = _pack(self.problem, rows, cap)
        if offsets is None:
            offsets = self._decide(rows, cap)
        self.memo[key] = offsets
        return None if offsets is None else offsets is not False

    def _decide(self, rows, cap):
        from dsa.strategies import call

        sub = self.problem.take(rows).replace(capacity=cap)
        left = self.budget.remaining()
        if left <= 0:
            raise _Stop
        nodes = DECISION_NODES
        if self.budget.node_limit is not None:
            nodes = min(nodes, max(self.budget.node_limit - self.budget.nodes, 1))
        raw = call("exact", sub, Context(sub, time_limit=None if left == float("inf") else left, node_limit=nodes))
        self.budget.spend(int(raw.stats.get("nodes", 0)))
        self.decisions += 1
        if raw.offsets is not None and plan_peak(sub, raw.offsets) <= cap:
            return np.asarray(raw.offsets, dtype=np.int64)
        if raw.lower_bound > cap:
            return False
        return None

    def offsets_of(self, p: int, rows) -> np.ndarray:
        """The offsets of a set of rows known to pack into ``p``."""
        cap = self.caps[p]
        if cap is None:
            return _pack(self.problem, rows, None)
        found = self.memo.get((p, tuple(rows)))
        if found is None or found is False:
            found = _pack(self.problem, rows, cap)
        return found

    def run(self, free, fixed_pool, incumbent_cost=None, first=False):
        """Search the assignments of rows ``free`` (the others are in ``fixed_pool``).

        Returns ``(pool, offsets, cost, complete)``: the best assignment found below
        ``incumbent_cost`` (None: none found) and whether the search was complete.
        With ``first``, stop at the first assignment that packs (the decision version).
        """
        spec = self.spec
        members = [sorted(np.flatnonzero(fixed_pool == p).tolist()) for p in range(self.k)]
        for p in range(self.k):
            rows = members[p]
            if rows:
                np.add.at(self.live[p], np.concatenate([np.arange(self.first[i], self.last[i] + 1) for i in rows]),
                          np.concatenate([np.full(self.last[i] - self.first[i] + 1, self.problem.sizes[i])
                                          for i in rows]))
                if self.caps[p] is not None and int(self.live[p].max()) > self.caps[p]:
                    return None, None, None, True
                verdict = self.packs(p, rows)
                if verdict is None:
                    return None, None, None, False
                if not verdict:
                    return None, None, None, True
        cheapest = [min(self.costs[p] for p in range(self.k) if spec.allowed[i, p]) for i in range(self.n)]
        rest = [Fraction(0)] * (len(free) + 1)
        for d in range(len(free) - 1, -1, -1):
            rest[d] = rest[d + 1] + cheapest[free[d]] * self.weights[free[d]]
        base = sum((self.costs[fixed_pool[i]] * self.weights[i] for i in range(self.n) if fixed_pool[i] >= 0),
                   Fraction(0))
        assign = fixed_pool.copy()
        found = {"cost": incumbent_cost, "pool": None}
        rank = spec.rank.tolist()

        def dive(d: int, acc: Fraction):
            self.nodes += 1
            if self.nodes % 64 == 0 and (self.budget.exhausted or self.budget.remaining() <= 0):
                raise _Stop
            if self.budget.node_limit is not None:
                self.budget.spend(1)
            if d == len(free):
                found["cost"], found["pool"] = acc, assign.copy()
                if first:
                    raise _Found
                return
            r = free[d]
            size = int(self.problem.sizes[r])
            for p in rank:
                if not spec.allowed[r, p]:
                    continue
                value = acc + self.costs[p] * self.weights[r]
                if not first and found["cost"] is not None and value + rest[d + 1] >= found["cost"]:
                    break  # (pools come cheapest first: the rest cost at least as much)
                span = slice(self.first[r], self.last[r] + 1)
                cap = self.caps[p]
                if cap is not None and size and int(self.live[p][span].max()) + size > cap:
                    continue
                members[p].append(r)
                members[p].sort()
                verdict = self.packs(p, members[p]) if size else True
                if verdict:
                    self.live[p][span] += size
                    assign[r] = p
                    try:
                        dive(d + 1, value)
                    finally:
                        self.live[p][span] -= size
                        assign[r] = -1
                        members[p].remove(r)
                else:
                    members[p].remove(r)
                    if verdict is None:
                        self.unknown = True

        complete = True
        try:
            dive(0, base)
        except _Found:
            pass
        except _Stop:
            complete = False
        complete = complete and not self.unknown
        if found["pool"] is None:
            return None, None, None, complete
        pool = found["pool"]
        offsets = np.full(self.n, -1, dtype=np.int64)
        for p in range(self.k):
            rows = np.flatnonzero(pool == p)
            if len(rows):
                offsets[rows] = self.offsets_of(p, rows.tolist())
        return pool, offsets, found["cost"], complete


class _Found(Exception):
    pass


def _split(problem, spec: PoolSpec):
    """Rows with a choice (sorted by saving, largest first), and the pool of the others (-1 for the free)."""
    n = len(problem)
    fixed_pool = np.full(n, -1, dtype=np.int64)
    choices = spec.allowed.sum(axis=1) if n else np.zeros(0, dtype=np.int64)
    cheapest = spec.cheapest()
    forced = (choices == 1) | problem.is_fixed | (problem.sizes == 0)
    fixed_pool[forced] = cheapest[forced]
    gain, _ = _value_keys(problem, spec)
    free = np.flatnonzero(~forced)
    free = free[np.lexsort((free, -problem.sizes[free], -gain[free]))]
    return free.tolist(), fixed_pool


def _subspec(spec: PoolSpec, rows) -> PoolSpec:
    return PoolSpec(spec.pools, spec.allowed[rows].copy(), spec.weights[rows].copy())


def decide_rows(problem, spec, rows, budget, seed):
    """Whether rows ``rows`` fit in their allowed pools together: True, False, or None (budget ran out)."""
    rows = np.asarray(rows, dtype=np.int64)
    sub, sub_spec = problem.take(rows), _subspec(spec, rows)
    free, fixed_pool = _split(sub, sub_spec)
    if len(free) > MAX_DEPTH:
        return None
    searcher = _AssignmentSearch(sub, sub_spec, budget, seed)
    pool, _, _, complete = searcher.run(free, fixed_pool, first=True)
    if pool is not None:
        return True
    return False if complete else None


def conflict_filter(problem, spec: PoolSpec, budget: Budget, seed=None):
    """An irreducible infeasible subset of rows over the pools, by a deletion filter (see the module).

    Returns the rows (sorted tuple), or None when the budget ran out first.
    """
    core = list(range(len(problem)))
    for r in sorted(core, key=lambda i: (int(problem.sizes[i]), i)):
        if r not in core:
            continue
        rest = [i for i in core if i != r]
        verdict = decide_rows(problem, spec, rest, budget, seed)
        if verdict is None:
            return None
        if not verdict:
            core = rest
    return tuple(core)


def more_search(problem, context, budget, seed, bound, pool, offsets, cost):
    """best's search over pools for the time left in ``budget`` (until ``bound``); the better of its plan
    and the given one ``(pool, offsets, cost)``."""
    left = budget.remaining()
    if left <= 0 or (cost is not None and float(cost) <= bound):
        return pool, offsets, cost
    more = search(problem, context=context, time_limit=left, seed=None if seed is None else seed + 1, target=bound)
    if more.pool is not None:
        more_cost = spec_of(context).exact_cost(more.pool)
        if cost is None or more_cost < cost:
            return more.pool, more.offsets, more_cost
    return pool, offsets, cost


def exact(problem, *, context=None, time_limit: float | None = None, node_limit: int | None = None, seed=None):
    """``exact`` over pools: the branch and bound of :class:`_AssignmentSearch` (see the module)."""
    spec = spec_of(context)
    t0 = time.perf_counter()
    limit = EXACT_TIME_LIMIT if time_limit is None else time_limit
    budget = Budget(limit, node_limit)
    stats = {}
    bound = max(spec.trivial_bound(), lagrangian_bound(problem, spec, time_limit=budget.remaining() / 4))
    stats["lagrangian_bound"] = bound
    # the incumbent: the search of best, with at most a fifth of the time (and a second), until the bound;
    # without its restarts when few rows have a choice (the branch and bound is quick there)
    free, fixed_pool = _split(problem, spec)
    head = search(problem, context=context, time_limit=max(min(limit / 5, 1.0), 1e-3), seed=seed, target=bound,
                  restarts=len(free) > SMALL_SEARCH)
    inc_pool, inc_offsets = head.pool, head.offsets
    inc_cost = spec.exact_cost(inc_pool) if inc_pool is not None else None
    if inc_cost is not None and float(inc_cost) <= bound:
        return make_pool_solution(problem, spec, inc_pool, inc_offsets, strategy="exact", cost_bound=float(inc_cost),
                                  stats={**stats, "nodes": 0, "search_s": time.perf_counter() - t0})
    complete = False
    searcher = None
    if len(free) <= MAX_DEPTH:
        searcher = _AssignmentSearch(problem, spec, budget, seed)
        pool, offsets, cost, complete = searcher.run(free, fixed_pool, incumbent_cost=inc_cost)
        if pool is not None:
            inc_pool, inc_offsets, inc_cost = pool, offsets, cost
        stats.update(nodes=searcher.nodes, decisions=searcher.decisions)
    else:  # too many rows with a choice for the branch and bound: best's search spends the time left
        stats["branch_and_bound"] = f"not run: {len(free)} rows with a choice, more than {MAX_DEPTH}"
        inc_pool, inc_offsets, inc_cost = more_search(problem, context, budget, seed, bound, inc_pool,
                                                       inc_offsets, inc_cost)
    stats["search_s"] = time.perf_counter() - t0
    conflict = None
    if complete and inc_pool is None:
        conflict = conflict_filter(problem, spec, budget, seed)
        stats["conflict_cut"] = conflict is None
        return make_pool_solution(problem, spec, None, None, strategy="exact", cost_bound=math.inf, conflict=conflict,
                                  stats=stats)
    if complete:
        return make_pool_solution(problem, spec, inc_pool, inc_offsets, strategy="exact",
                                  cost_bound=spec.cost(inc_pool), stats=stats)
    return make_pool_solution(problem, spec, inc_pool, inc_offsets, strategy="exact", cost_bound=bound,
                              limit_reached=True, stats=stats,
                              message="" if inc_pool is not None else
                              "a time or node limit stopped the search before it found an assignment that fits")
