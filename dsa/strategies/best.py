"""Best of a portfolio, then a time-limited search that improves the winner.

Phase 1, the portfolio (XLA's heap simulator plans each buffer set with several orderings and keeps
the smallest heap): the greedy engine of :mod:`dsa.strategies.greedy` (Pisarchyk & Lee, "Efficient
Memory Management for Deep Neural Net Inference", MLSys 2020 workshop, arXiv:2001.03288) with the
orderings size, duration, area, start, conflict and breadth, each with first fit and best fit, plus
``restarts`` random orderings, then the cheap registered constructive strategies (``gergov``,
``buchsbaum``, ``mincost_flow``). Each ordering is computed once and the time-overlap graph is shared
(:class:`dsa.sweep.Sweep`). From ``PARALLEL_MIN_N`` rows on, greedy members run a few at a time on
threads (the placement kernel releases the GIL), with results taken in member order. It stops as soon
as a plan reaches the lower bound (LOAD), which proves it optimal.

Phase 2, the improvement (within what remains of ``time_limit``): a MiniMalloc-style search over
canonical plans (Moffitt, ASPLOS 2023), then a local search over greedy orders (squeaky wheel, Joslin &
Clements 1999, under late acceptance, Burke & Bykov 2017); see :func:`_improve`.

Greedy by size alone misses LOAD on traces where two large buffers that never meet are stacked at
the same offset and block a later pair (see the tests); another ordering often avoids that.

Complexity: phase 1 is (12 + restarts) greedy runs, each O(n log n + E + sum_i k_i log k_i), plus the
members' own costs; phase 2 runs until the time limit, the lower bound or its own stopping rule.
"""
from __future__ import annotations

import itertools
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from dsa.bounds import lower_bound
from dsa.budget import Budget, check_seed, max_threads
from dsa.context import Context
from dsa.solution import Solution, make_solution, plan_peak
from dsa.strategies._call import call
from dsa.strategies._orders import ORDERINGS, order_rows
from dsa.strategies.greedy import FITS, greedy_offsets

__all__ = ["solve", "portfolio_head", "MEMBERS", "STRATEGY_MEMBERS"]

# greedy_by_size (lowest fit) first: on ties the portfolio returns the classic plan
MEMBERS = tuple((order, fit) for order in ("size", *sorted(set(ORDERINGS) - {"size"}))
                for fit in ("first", "best"))
# registered strategies that join the portfolio, with their options, up to STRATEGY_MEMBERS_MAX_N rows
# (beyond it they cost seconds each and rarely beat the greedy members: measured at 100k buffers)
STRATEGY_MEMBERS = (("gergov", {}), ("buchsbaum", {"restarts": 4}), ("mincost_flow", {}))
STRATEGY_MEMBERS_MAX_N = 20_000

# portfolio_head runs greedy members while (members so far) x rows^2 stays within this: its numpy
# engine is O(rows^2) per member (about 20 ms for one member at 1,350 rows, 50 ms at 2,000)
HEAD_WORK = 4_000_000

DEFAULT_TIME_LIMIT = 1.0
# greedy members run on a thread pool from this many rows on, with at most this many threads
PARALLEL_MIN_N = 20_000
MAX_THREADS = 4


def portfolio_head(problem, *, max_work: int = HEAD_WORK):
    """The plan of :func:`solve` when a greedy member reaches the lower bound, made without numba.

    The portfolio runs its greedy members in the order of ``MEMBERS`` (greedy by size with first fit
    first) and stops at the first plan that reaches the lower bound: :func:`solve` returns that plan,
    proven optimal (unless its time limit ends the portfolio before that member). This runs the same
    loop over the same members with the numpy engine of :func:`dsa.strategies.greedy.greedy_offsets`
    (same plans, O(n^2) each), so it stops at the same place, so a process that must not load numba
    (the torch adapter's served process) gets ``solve``'s plan of such problems without starting a
    planner. On the adapter's traces of its example models (69 configurations, up to 1,351 rows) the
    first member reached the bound in 60 and a later one in the other 9, in at most 22 ms.

    Parameters
    ----------
    problem : Problem
    max_work : int
        Members are run while their number times ``len(problem) ** 2`` stays within this; the
        default allows one member at 2,000 rows and all twelve up to 577 rows.

    Returns
    -------
    Solution or None
        As :func:`solve` would return it before the front end's validation (strategy ``"best"``,
        ``stats["member"]``, ``stats["peaks"]`` of the members run, ``stats["portfolio_peak"]``), or
        None when no member allowed by ``max_work`` reaches the bound.
    """
    n = len(problem)
    allowed = max_work // (n * n) if n else len(MEMBERS)
    if allowed < 1:
        return None
    t0 = time.perf_counter()
    bound = lower_bound(problem)
    phase1 = _portfolio(problem, list(MEMBERS[:allowed]), None, bound, 0, 0, Budget(None),
                        engine="numpy")
    if phase1["peak"] is None or phase1["peak"] > bound:
        return None
    stats = {"member": phase1["winner"], "peaks": phase1["peaks"], "portfolio_peak": phase1["peak"],
             "portfolio_s": time.perf_counter() - t0, "improved": 0}
    return make_solution(problem, phase1["best"], strategy="best", stats=stats)


def _member_label(member) -> str:
    if isinstance(member, tuple):
        return member[0] if isinstance(member[1], dict) else "/".join(member)
    return member if isinstance(member, str) else getattr(member, "__name__", "custom")


def _parse_members(members):
    """Turn ``members`` into a list of ``(order, fit)`` pairs, registry names and callables."""
    from dsa.strategies import resolve_name

    if members is None:
        return list(MEMBERS) + list(STRATEGY_MEMBERS)
    if isinstance(members, str) or not hasattr(members, "__iter__"):
        raise ValueError(f"members must be a list of names or callables, got {members!r}")
    out = []
    for m in members:
        if callable(m):
            out.append(m)
        elif isinstance(m, str) and "/" in m:
            order, fit = m.split("/", 1)
            if (order not in ORDERINGS and order != "random") or fit not in FITS:
                raise ValueError(f"unknown greedy member {m!r}: use 'order/fit' with order in "
                                 f"{sorted(ORDERINGS)} or 'random' and fit in {FITS}")
            out.append((order, fit))
        elif isinstance(m, str):
            name = resolve_name(m)
            if name == "best":
                raise ValueError("best cannot be a member of itself")
            out.append(name)
        else:
            raise ValueError(f"a member must be 'order/fit', a strategy name or a callable, got {m!r}")
    if not out:
        raise ValueError("members is empty")
    return out


def _member_offsets(problem, member, context, seed):
    """Offsets of one strategy member, run through :func:`dsa.strategies.call` with the portfolio's
    context (its sweep; no time limit) and ``seed``; None when it gave no plan."""
    member, kw = member if isinstance(member, tuple) else (member, {})
    raw = call(member, problem, context.derive(time_limit=None, node_limit=None, seed=seed), **kw)
    offsets = raw.offsets if isinstance(raw, Solution) else raw
    return None if offsets is None else np.asarray(offsets, dtype=np.int64)


def _is_greedy(member) -> bool:
    return isinstance(member, tuple) and not isinstance(member[1], dict)


def _portfolio(problem, members, sweep, bound, restarts, seed, budget, members_max_n=None,
               engine="auto", context=None):
    """Phase 1: run the members in order, keep the lowest peak; stop at ``bound``, or when the budget
    is spent once a plan exists (``cut`` in the result says so). ``engine`` is the greedy members'
    (see :func:`dsa.strategies.greedy.greedy_offsets`).

    On large problems consecutive greedy members run a few at a time on a thread pool (the
    placement kernel releases the GIL); results are taken in member order, so the outcome does not
    depend on the number of threads. Random restarts are drawn one by one, never listed up front.
    """
    rng = np.random.default_rng(check_seed(seed))
    stream = itertools.chain(members, itertools.repeat(("random", "best"), int(restarts)))
    orders: dict = {}
    state = {"best": None, "peak": None, "winner": None, "peaks": {}, "random": 0, "cut": False}

    def prepare(member):
        order, fit = member
        if order == "random":
            rows = order_rows(problem, "random", rng.integers(2**63))
            label = f"random{state['random']}/{fit}"
            state["random"] += 1
        else:
            if order not in orders:
                orders[order] = order_rows(problem, order)
            rows, label = orders[order], f"{order}/{fit}"
        return label, rows, fit

    def record(label, offsets) -> bool:
        """Keep ``offsets`` if lowest so far; True once the bound is reached."""
        peak = plan_peak(problem, offsets)
        state["peaks"][label] = peak
        if state["peak"] is None or peak < state["peak"]:
            state["best"], state["peak"], state["winner"] = offsets, peak, label
        return state["peak"] <= bound

    def place(job):
        return greedy_offsets(problem, job[1], job[2], sweep=sweep, engine=engine)

    workers = max_threads(min(os.cpu_count() or 1, MAX_THREADS)) if len(problem) >= PARALLEL_MIN_N else 1
    pool = ThreadPoolExecutor(workers) if workers > 1 else None
    try:
        member, done = next(stream, None), False
        while member is not None and not done:
            if state["best"] is not None and budget.exhausted:
                state["cut"] = True
                break
            if _is_greedy(member):
                wave = []
                while member is not None and _is_greedy(member) and len(wave) < workers:
                    wave.append(prepare(member))
                    member = next(stream, None)
                results = pool.map(place, wave) if pool is not None else map(place, wave)
                for job, offsets in zip(wave, results):
                    if record(job[0], offsets):
                        done = True
                        break
                continue
            current, member = member, next(stream, None)
            if members_max_n is not None and (len(problem) > members_max_n or sweep.dense):
                continue  # large or densely overlapping: the default strategy members cost too much
            label = _member_label(current)
            if context is None:
                context = Context(problem, sweep=sweep)
            offsets = _member_offsets(problem, current, context, seed)
            if offsets is None or offsets.shape != (len(problem),):
                state["peaks"][label] = None
                continue
            done = record(label, offsets)
    finally:
        if pool is not None:
            pool.shutdown()
    return state


def _improve(problem, offsets, bound, budget, seed):
    """Phase 2: search for a lower plan until the budget, the bound or a proof ends it.

    1. A MiniMalloc-style search over canonical plans (:mod:`dsa.strategies._canonical_search`; Moffitt,
       ASPLOS 2023) probes capacities below the incumbent's peak with node-limited searches whose
       budgets grow round by round; a probe it completes without a plan proves a lower bound. It
       works on busy periods of up to ``_canonical_search.MAX_BUFFERS`` buffers and stops early when the peak
       is set by a larger one.
    2. With time left, a local search over greedy orders (:mod:`dsa.strategies._local_search`: squeaky
       wheel moves under late acceptance; around the peak, a time window at a time, on large
       problems) takes over.

    Returns ``(offsets, proven_bound, stats)``.
    """
    from dsa.strategies._canonical_search import lower_peak
    from dsa.strategies._local_search import search_orders

    out, info = lower_peak(problem, offsets, time_limit=budget.remaining())
    proven = int(info["proven_lower_bound"])
    stats = {"nodes": info["nodes"], "search_probes": len(info["probes"]),
             "search_s": info["time"]}
    if plan_peak(problem, out) > max(bound, proven) and not budget.exhausted:
        t0 = time.perf_counter()
        out, info = search_orders(problem, out, time_limit=budget.remaining(), seed=seed)
        stats.update(local_iterations=info["iterations"], local_s=time.perf_counter() - t0)
    return out, proven, stats


def solve(problem, *, time_limit: float = DEFAULT_TIME_LIMIT, members=None, restarts: int = 0,
          improve: bool = True, seed=None, sweep=None, context=None):
    """Plan with every member and keep the lowest peak; then improve it within ``time_limit``.

    Parameters
    ----------
    problem : Problem
    time_limit : float, default 1.0
        Seconds for the whole call. The portfolio runs its members until the limit (at least one,
        so that there is a plan; with the default members at most a few tenths of a second at 100k
        buffers), and the improvement phase gets what remains.
    members : list, optional
        The portfolio: greedy members as ``"order/fit"`` strings (``"size/first"``), registered
        strategy names (``"gergov"``) and callables ``f(problem) -> Solution or offsets``. Default:
        every ordering x both fits, then the cheap constructive strategies.
    restarts : int, default 0
        Random orderings tried after the members (best fit), seeded from ``seed``.
    improve : bool, default True
        Run the improvement phase.
    seed : int, optional
        Seed of the random orderings, the randomised members and the improvement phase (None means
        0, so that plain calls repeat). With the same seed the plan is the same whenever the
        improvement phase ends before the time limit (bound reached, or its own stopping rule); a
        search cut by the clock depends on the machine's speed.
    sweep : dsa.sweep.Sweep, optional
        The shared time-axis facts (the context's sweep when ``context`` is given).
    context : dsa.context.Context, optional
        The planning context (passed by :func:`dsa.solve` through :func:`dsa.strategies.call`): its
        sweep and lower bound are used, the portfolio's members get it, and the plan is offered to it
        as the incumbent.

    Returns
    -------
    Solution
        ``stats["member"]`` names the winning member of the portfolio and ``stats["peaks"]`` maps
        every member that ran to its peak; ``stats["portfolio_peak"]``, ``stats["improved"]`` (bytes
        the improvement phase saved), ``stats["nodes"]`` (of the canonical search),
        ``stats["search_probes"]``, ``stats["search_s"]``, and when the local search ran
        ``stats["local_iterations"]`` and ``stats["local_s"]`` describe phase 2. A capacity the search
        proved infeasible raises ``lower_bound`` above LOAD. The result reports that a limit stopped it
        (status ``LIMIT_REACHED`` once finalized) when the time limit cut the portfolio
        (``stats["portfolio_cut"]``) or the improvement phase short of the lower bound.
    """
    if not isinstance(restarts, (int, np.integer)) or isinstance(restarts, bool) or restarts < 0:
        raise ValueError(f"restarts must be a non-negative int, got {restarts!r}")
    budget = Budget(time_limit)
    seed = 0 if seed is None else seed
    context = context if context is not None else Context(problem, sweep=sweep)
    sweep = context.sweep
    if not sweep.dense:
        sweep.overlap  # a portfolio runs many greedy passes: build the graph (and use the kernels) once
    bound = context.lower_bound
    default_members = members is None
    members = _parse_members(members)
    t0 = time.perf_counter()
    phase1 = _portfolio(problem, members, sweep, bound, restarts, seed, budget,
                        STRATEGY_MEMBERS_MAX_N if default_members else None, context=context)
    best, best_peak = phase1["best"], phase1["peak"]
    stats = {"member": phase1["winner"], "peaks": phase1["peaks"], "portfolio_peak": best_peak,
             "portfolio_s": time.perf_counter() - t0, "improved": 0}
    limited, proven, message = False, 0, ""
    if phase1["cut"]:
        stats["portfolio_cut"] = True  # the time limit ended the portfolio before all members ran
        limited = True
        message = (f"the time limit ({budget.time_limit:g} s) ended the portfolio at peak {best_peak} "
                   f"(lower bound {bound}; members run: {len(phase1['peaks'])})")
    if improve and best is not None and best_peak > bound and not budget.exhausted:
        offsets, proven, info = _improve(problem, best, bound, budget, seed)
        peak = plan_peak(problem, offsets)
        if peak < best_peak:
            best, stats["improved"] = offsets, best_peak - peak
        stats.update(info)
        if budget.exhausted and plan_peak(problem, best) > max(bound, proven):
            limited = True
            message = (f"the time limit ({budget.time_limit:g} s) ended the improvement phase at peak "
                       f"{plan_peak(problem, best)}, above the lower bound {max(bound, proven)}")
    elif improve and best is not None and best_peak > bound and not limited:
        # the portfolio ran every member but used the whole time: the improvement phase never started
        limited = True
        message = (f"the time limit ({budget.time_limit:g} s) ended the search after the portfolio, at peak "
                   f"{best_peak} (lower bound {bound}): the improvement phase did not run")
    context.offer(best)
    # facts only (the plan, what was proven, whether the time limit cut the work short): dsa.solve's
    # finalize decides the status
    return make_solution(problem, best, strategy="best", stats=stats, lower_bound=proven,
                         limit_reached=limited, message=message)
