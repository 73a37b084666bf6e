"""``mip`` over memory pools: an assignment-and-placement MIP, solved by HiGHS.

The big-M model of Sekiyama et al. (arXiv:1804.10001, 2018; see :mod:`dsa.strategies.mip`) with an
assignment layer, as in the multi-bank models of memory allocation for DSPs (e.g. Ko and Bhattacharyya,
"Partitioning and allocation of memory for DSP", 2003): a binary ``x[i, p]`` per row and pool it may
use (each row in exactly one), an integer offset per row in units of its alignment, and an order
binary ``z[i, j]`` per pair of rows that meet in time and share a pool they may use. The disjunction
of a pair is enforced only when both rows are in the same pool (two more big-M terms), and a row's top
stays within the capacity of its pool (``o_i + s_i <= sum_p cap_p x[i, p]``, exact). Unbounded pools
get the horizon ``sum_i (s_i + alignment_i - 1)``, within which any set of rows packs. The objective
is the cost ``sum cost_p * weight_i * x[i, p]``.

Numerics, as for one slab: the model works in the largest unit that loses no plan (the gcd of the
sizes and fixed values, compatible with the alignments), and a solver's verdict is taken as a proof
only when every number of the model stays within ``dsa.strategies.mip.TRUSTED_UNITS`` units; beyond
that the heuristic's plan is returned with the Lagrangian bound of :mod:`dsa.strategies._pools`. The
solver's plan gives an assignment and an order per pool, which is re-placed in bytes (lowest fit, in
the order of the model's offsets) and kept only if every pool fits; a solver's "infeasible" is
confirmed by the complete assignment search of :func:`dsa.strategies._pools.exact` before it is
reported, so a wrong verdict can cost a proof but never give a false one. Only HiGHS (scipy) plans
pools.

Size: ``sum_i |allowed_i|`` assignment binaries, ``m`` offsets and one order binary per pair of rows
that meet in time, with two constraints per pair and shared pool: exponential to solve in the worst
case, meant for tens of rows.
"""
from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np

from dsa.budget import Budget
from dsa.placement import greedy_offsets
from dsa.pools import make_pool_solution
from dsa.solution import plan_peak
from dsa.strategies import _pools
from dsa.strategies._mip_model import model_unit

__all__ = ["solve_pools"]

DEFAULT_TIME_LIMIT = 10.0
MAX_PAIRS = 20_000


def _model_rows(problem):
    return np.flatnonzero(problem.sizes > 0)


def solve_pools(problem, *, context=None, time_limit: float | None = DEFAULT_TIME_LIMIT, seed=None,
                backend: str = "highs"):
    """``mip`` over pools (see the module docstring)."""
    from dsa.strategies.mip import TRUSTED_UNITS

    spec = _pools.spec_of(context)
    if backend != "highs":
        raise ValueError(f"mip plans pools with the 'highs' backend only, not {backend!r}")
    from dsa.strategies._mip_highs import require, thread_cap

    optimize, sparse = require()
    t0 = time.perf_counter()
    limit = DEFAULT_TIME_LIMIT if time_limit is None else time_limit
    budget = Budget(limit, None)
    bound = max(spec.trivial_bound(), _pools.lagrangian_bound(problem, spec, time_limit=budget.remaining() / 4))
    stats = {"lagrangian_bound": bound}
    # the heuristic: best over pools with a fifth of the time (at most a second), until the bound
    head = _pools.search(problem, context=context, time_limit=max(min(limit / 5, 1.0), 1e-3), seed=seed,
                         target=bound)
    inc_pool, inc_offsets = head.pool, head.offsets
    inc_cost = spec.exact_cost(inc_pool) if inc_pool is not None else None

    def finish(pool, offsets, cost_bound, *, limit_reached=False, message="", conflict=None):
        stats["search_s"] = time.perf_counter() - t0
        return make_pool_solution(problem, spec, pool, offsets, strategy="mip", cost_bound=cost_bound,
                                  limit_reached=limit_reached, message=message, conflict=conflict, stats=stats)

    if inc_cost is not None and float(inc_cost) <= bound:
        stats["solver_status"] = "not run: the heuristic's plan meets the bound"
        return finish(inc_pool, inc_offsets, float(inc_cost))

    n, k = spec.allowed.shape
    rows = _model_rows(problem)
    sizes, aligns = problem.sizes, problem.alignments
    fixed = problem.is_fixed
    caps = [spec.capacity(p) for p in range(k)]
    unit = model_unit(problem)
    mult = np.maximum(aligns // unit, 1)  # offsets are mult_i * k_i units
    s_u = sizes // unit
    horizon = int((s_u[rows] + mult[rows] - 1).sum()) if len(rows) else 0
    cap_u = [horizon if c is None else min(c // unit, horizon) for c in caps]
    trusted = max(cap_u + [1]) <= TRUSTED_UNITS
    # pairs of model rows that meet in time and share an allowed pool
    pos = {int(i): a for a, i in enumerate(rows.tolist())}
    pairs = []
    st, en = problem.starts, problem.ends
    order = rows[np.argsort(st[rows], kind="stable")]
    for a, i in enumerate(order.tolist()):
        for j in order[a + 1:].tolist():
            if st[j] >= en[i]:
                break
            common = np.flatnonzero(spec.allowed[i] & spec.allowed[j]).tolist()
            if common:
                pairs.append((min(i, j), max(i, j), common))
            if len(pairs) > MAX_PAIRS:
                break
    if not trusted or len(pairs) > MAX_PAIRS:
        stats["solver_status"] = ("not run: " + (f"model numbers up to {max(cap_u)} units, above {TRUSTED_UNITS}"
                                  if not trusted else f"more than {MAX_PAIRS} pairs"))
        inc_pool, inc_offsets, inc_cost = _pools.more_search(problem, context, budget, seed, bound, inc_pool,
                                                             inc_offsets, inc_cost)
        if inc_cost is not None and float(inc_cost) <= bound:
            return finish(inc_pool, inc_offsets, float(inc_cost))
        return finish(inc_pool, inc_offsets, bound, limit_reached=True,
                      message=f"the MIP was not solved ({stats['solver_status'][9:]}); the plan is best's over "
                              "pools and the bound the Lagrangian one")
    # variables: x (row, pool) for allowed pairs, then one offset per model row, then one z per pair
    xs = [(int(i), p) for i in rows.tolist() for p in range(k) if spec.allowed[i, p]]
    xv = {ip: v for v, ip in enumerate(xs)}
    ko = len(xs)
    zo = ko + len(rows)
    nv = zo + len(pairs)
    lb, ub = np.zeros(nv), np.ones(nv)
    for a, i in enumerate(rows.tolist()):
        top = max(cap_u[p] for p in range(k) if spec.allowed[i, p])
        if fixed[i]:
            lb[ko + a] = ub[ko + a] = problem.fixed_offsets[i] // unit // mult[i]
        else:
            ub[ko + a] = max((top - s_u[i]) // mult[i], 0)
    c = np.zeros(nv)
    for (i, p), v in xv.items():
        c[v] = spec.pools[p].cost * float(spec.weights[i])
    a_r, a_c, a_v, lo_b, hi_b = [], [], [], [], []

    def row(entries, lo, hi):
        r = len(lo_b)
        for col, val in entries:
            a_r.append(r)
            a_c.append(col)
            a_v.append(float(val))
        lo_b.append(lo)
        hi_b.append(hi)

    for a, i in enumerate(rows.tolist()):
        mine = [(xv[(i, p)], 1.0) for p in range(k) if spec.allowed[i, p]]
        row(mine, 1.0, 1.0)
        row([(ko + a, mult[i])] + [(xv[(i, p)], -cap_u[p]) for p in range(k) if spec.allowed[i, p]],
            -np.inf, -float(s_u[i]))
    for z, (i, j, common) in enumerate(pairs):
        big = max(cap_u[p] for p in range(k) if spec.allowed[i, p] or spec.allowed[j, p])
        oi, oj = ko + pos[i], ko + pos[j]
        for p in common:
            xi, xj = xv[(i, p)], xv[(j, p)]
            # i below j: m_i k_i + s_i <= m_j k_j + M (1 - z) + M (2 - x_ip - x_jp)
            row([(oi, mult[i]), (oj, -mult[j]), (zo + z, big), (xi, big), (xj, big)], -np.inf,
                3.0 * big - float(s_u[i]))
            # j below i: m_j k_j + s_j <= m_i k_i + M z + M (2 - x_ip - x_jp)
            row([(oj, mult[j]), (oi, -mult[i]), (zo + z, -big), (xi, big), (xj, big)], -np.inf,
                2.0 * big - float(s_u[j]))
    a_mat = sparse.csr_array((a_v, (a_r, a_c)), shape=(len(lo_b), nv))
    left = budget.remaining()
    options = {"disp": False, "mip_rel_gap": 0.0, "time_limit": max(float(left), 0.01)}
    cap_threads = thread_cap()
    if cap_threads is not None:
        options["threads"] = int(cap_threads)
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Unrecognized options", category=RuntimeWarning)
        res = optimize.milp(c, integrality=np.ones(nv), bounds=optimize.Bounds(lb, ub),
                            constraints=optimize.LinearConstraint(a_mat, lo_b, hi_b), options=options)
    stats.update(solver_status=f"{res.status}: {res.message}", variables=nv, constraints=len(lo_b))
    # the solver's plan: an assignment and an order per pool, re-placed in bytes and kept if it fits
    if res.x is not None:
        x = np.asarray(res.x)
        pool = spec.cheapest().copy()
        for i in rows.tolist():
            options_i = [p for p in range(k) if spec.allowed[i, p]]
            pool[i] = max(options_i, key=lambda p: x[xv[(i, p)]])
        offsets = np.zeros(n, dtype=np.int64)
        fits = True
        for p in range(k):
            members = np.flatnonzero(pool == p)
            if not len(members):
                continue
            sub = problem.take(members)
            key = np.array([x[ko + pos[int(i)]] * mult[i] if int(i) in pos else 0.0 for i in members])
            placed = greedy_offsets(sub, np.argsort(key, kind="stable"), "first")
            if caps[p] is not None and plan_peak(sub, placed) > caps[p]:
                fits = False
                break
            offsets[members] = placed
        if fits:
            cost = spec.exact_cost(pool)
            if inc_cost is None or cost < inc_cost:
                inc_pool, inc_offsets, inc_cost = pool, offsets, cost
        else:
            stats["rejected_plan"] = True
    if res.status == 2:
        # confirmed by the complete assignment search before it is reported
        verdict = _pools.decide_rows(problem, spec, np.arange(n), budget, seed)
        stats["infeasible_confirmed"] = verdict is False
        if verdict is False and inc_pool is None:
            conflict = _pools.conflict_filter(problem, spec, budget, seed)
            stats["conflict_cut"] = conflict is None
            return finish(None, None, math.inf, conflict=conflict)
    dual = getattr(res, "mip_dual_bound", None)
    if dual is not None and np.isfinite(dual) and res.status in (0, 1):
        proven = spec.round_up(float(dual) - 1e-9 * (abs(float(dual)) + 1.0))
        if inc_cost is not None:
            proven = min(proven, float(inc_cost))
        stats["solver_bound"] = proven
        bound = max(bound, proven)
    if inc_pool is None:
        return finish(None, None, bound, limit_reached=res.status == 1)
    if Fraction(bound) >= inc_cost:
        return finish(inc_pool, inc_offsets, spec.cost(inc_pool))
    return finish(inc_pool, inc_offsets, bound, limit_reached=res.status != 0)
