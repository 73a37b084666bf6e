"""Exact minimisation of the peak by a complete search over canonical plans (anytime).

What it does. Offline DSA asks for offsets that minimise the peak; its decision version asks whether
a plan fits in a capacity ``C``. This strategy answers the decision version with the depth-first
search over *canonical* plans of :mod:`dsa._kernels.canonical`, after M. D. Moffitt, "MiniMalloc: A
Lightweight Memory Allocator for Hardware-Accelerated Machine Learning", ASPLOS 2023: buffers are
placed in increasing (lowest feasible offset, preorder rank) order, each on the floor or directly
on top of a buffer it meets in time; section inference, dominance, a rule on buffers whose place is
already determined, dynamic decomposition into independent time ranges and symmetry breaking between
identical buffers prune the tree. A search that ends without exhausting its node budget is a proof:
"no plan with peak <= C".

Minimisation (no capacity given). The proven lower bound ``lo`` starts at :func:`dsa.lower_bound`
(LOAD, strengthened by the rows' alignments, and the end of the highest fixed buffer). The greedy
members of the portfolio of :mod:`dsa.strategies.best` run first (a millisecond or two; on most
real traces one of them reaches ``lo``, which ends the call). Then a first look
(:meth:`dsa.strategies._canonical_search.CanonicalSearch.first_look`) searches ``lo`` itself with
every preorder, 100 nodes per buffer each and at most a tenth of the time left: a plan there is
optimal and ends the call. Otherwise the incumbent is the lower of the greedy members' plan and
that of the portfolio's costlier members (its strategy members, each run only where the time left
is likely to hold it, see ``best.STRATEGY_WAVES``; without its improvement phase; under a time limit,
members likely to end after ``best.portfolio_hold`` of it are held back, as in ``best``); under a
time limit, :func:`dsa.strategies.best.bound_look` (restarted skyline dives at ``lo``, a share of
the time left, on problems where they can plan there: a plan is optimal and ends the call) runs,
and :meth:`~dsa.strategies._canonical_search.CanonicalSearch.lower_peak` (the improvement phase of
``best`` too) runs rounds with a node budget that grows threefold after each
round that did not lower the peak (one that did keeps its budget), its searches of ``lo`` going on
from where the first look left them:

1. probe ``lo`` with every static preorder: a plan there is optimal; a completed search raises
   ``lo`` by one;
2. scan capacities from just below the incumbent's peak down towards ``lo`` on a grid (0.5 % of the
   bound), every preorder at each, with budgets that add up to about the budget of one probe of
   step 1; a plan lowers the incumbent (the scan goes on below it), a completed search raises ``lo``
   to the probed capacity plus one; the scan of a round ends after two capacities in a row that hit
   the limit. Which capacities are easy is erratic (a capacity 1 % lower can take a thousand times
   fewer nodes), so many small probes beat a few large ones here.

It stops when ``lo`` reaches the incumbent's peak (status OPTIMAL, ``lower_bound`` = peak) or when
the time or node limit runs out (LIMIT_REACHED, with the incumbent and the proven ``lower_bound``).
Probing the bound first suits the common case where the optimum equals LOAD (it is reached after
a few hundred thousand nodes on MiniMalloc's challenging instances); the descending probes make the
search anytime when it does not.

Decision mode (``problem.capacity`` set, as ``dsa.solve(..., capacity=C)`` does). The greedy
members' plan is taken if it fits. When ``C`` is the bound, the first look comes next (it is the
first round of the decision's own search, so nothing is lost when it fails; above the bound a failed
look would be wasted, and the portfolio's plan often fits there); then the costlier members' plan is
taken if it fits. Otherwise the search stops at the first plan within ``C`` (status FEASIBLE, or
OPTIMAL when it meets the bound), or proves that none exists (status INFEASIBLE,
``lower_bound = C + 1``, the portfolio's plan is returned for inspection), or runs out of budget
(LIMIT_REACHED).

Conflicts. A capacity proven infeasible comes with ``conflict``: the rows of an irreducible
infeasible subset (infeasible together, feasible once any one is removed), found by the deletion
filter of MiniMalloc (:func:`conflict_filter`) within what is left of the time and node limits.
When they run out first, no conflict is returned (``stats["conflict_cut"]``, and
``stats["infeasible_core"]``: rows proven infeasible together, not proven irreducible).

Complexity: the portfolio costs a few greedy runs, O(n log n + E) each. A search node costs
O(m + S + deg) for a busy period of ``m`` buffers and ``S`` sections; the number of nodes is
exponential in the worst case (the problem is strongly NP-hard), so the search is bounded by
``time_limit`` and ``node_limit``. Busy periods of more than
``dsa.strategies._canonical_search.MAX_BUFFERS`` buffers are not searched; nothing is proven about
them. In minimisation under a time limit (and no node limit), time that the canonical search leaves
(such a period sets the peak), and what is left after the canonical search had its share of it
(``best.CANONICAL_SHARE`` on problems of more than ``best.LARGE_ROWS`` rows, ``CANONICAL_SHARE`` on
smaller ones where the skyline search runs, see :func:`dsa.strategies.best.skyline_runs`), go to
:func:`dsa.strategies.best.improve_plan` (the skyline search of :mod:`dsa.strategies._skyline`, in
turns with canonical dives under randomly perturbed preorders, with time windows around the peak
re-planned by the canonical search, or with the local search over greedy orders)
until the limit: the call never returns early with the portfolio's plan.
"""
from __future__ import annotations

import dataclasses
import sys
import time

import numpy as np

from dsa.budget import Budget
from dsa.context import Context
from dsa.solution import finalize, make_solution, plan_peak
from dsa.strategies._call import call

__all__ = ["solve", "conflict_filter"]

BUDGET0_PER_BUFFER = 2   # first round: this many nodes per buffer of the largest period, per probe
GROWTH = 2               # the node budget per probe is multiplied by this after every round
# under a time limit (and no node limit), the share of the time left that the canonical search's
# lower_peak gets in minimisation; best.improve_plan (skyline search, random dives, local search)
# gets the rest unless the search proved the plan optimal (rectangle cuts, where the optimum is LOAD:
# the skyline search reaches plans the canonical search does not). Where the skyline search runs:
# with the whole time for the canonical search on problems of up to 1,000 rows, 6 rectangle cuts of
# 300-800 buffers at 60 s ended at 1.0825 x LOAD on average, their last plan found within 6.4 s;
# with half of it, 1.0456; at 60 s MiniMalloc's challenging J ends at 1014784 either way, D at
# 1022976-1025024 from run to run (1024000 in a run of the previous rule)
CANONICAL_SHARE = 0.5
# ... where the skyline search is to run in the time left to it (best.skyline_runs: no fixed offsets,
# its kernel compiled or time to compile it); otherwise it keeps the whole time. On problems of more
# than best.LARGE_ROWS movable rows it gets best's share instead, best.CANONICAL_SHARE
# (no probe completes on busy periods of thousands of buffers within seconds, so no proof comes of the
# time). At 20 s, 8 rectangle cuts of 1,500-5,000 buffers, that share (0.15) against 0.5: lower on 5
# (by 0.3-1.4 % of LOAD), level on 3; mean 1.1290 -> 1.1248 x LOAD
# the time limit handed to the portfolio once the call's own budget is spent (best.solve needs a
# positive one; it runs its first member whatever the limit, so that there is a plan)
MIN_PORTFOLIO_S = 1e-6


class _Log:
    """Progress lines on stderr, MIP-solver style (only when ``verbose``)."""

    def __init__(self, verbose, t0):
        self.verbose = bool(verbose)
        self.t0 = t0
        self.last = -1.0

    def header(self, problem, load, peak):
        if self.verbose:
            print(f"exact: {problem.n} buffers, LOAD {load}, portfolio peak {peak}", file=sys.stderr)
            print(f"{'time':>8} {'nodes':>12} {'incumbent':>12} {'bound':>12} {'gap':>8}  event",
                  file=sys.stderr)

    def line(self, nodes, peak, bound, event, force=False):
        if not self.verbose:
            return
        now = time.perf_counter() - self.t0
        if not force and now - self.last < 1.0:
            return
        self.last = now
        gap = (peak - bound) / peak if peak else 0.0
        print(f"{now:8.2f} {nodes:12d} {peak:12d} {bound:12d} {100 * gap:7.3f}%  {event}",
              file=sys.stderr, flush=True)


def solve(problem, *, time_limit: float | None = None, node_limit: int | None = None,
          seed=None, verbose: bool = False, sweep=None, context=None):
    """Minimise the peak (or decide ``problem.capacity``) by a complete canonical search.

    Parameters
    ----------
    problem : Problem
        With ``capacity`` set, the decision version is solved (see the module docstring).
    time_limit : float, optional
        Seconds for the whole call (checked between node-limited kernel calls, each sized from the
        measured node rate). None: no limit, the search runs until it proves its answer.
    node_limit : int, optional
        The most search nodes in all. None: no limit.
    seed : int, optional
        Passed to the portfolio (the search itself is deterministic under a node limit).
    verbose : bool, default False
        Print progress lines (elapsed time, nodes, incumbent, bound, gap) on stderr.
    sweep : dsa.sweep.Sweep, optional
        The shared time-axis facts (the context's sweep when ``context`` is given).
    context : dsa.context.Context, optional
        The planning context (passed by :func:`dsa.solve` through :func:`dsa.strategies.call`): its
        lower bound starts the search and the portfolio runs in it.

    Returns
    -------
    Solution
        The facts of the search, to which :func:`dsa.solution.finalize` gives a status:
        ``lower_bound`` is the bound the search proved (the peak itself when it proved the plan
        optimal, ``C + 1`` when a capacity ``C`` is proven infeasible), and the result says when the
        time or node limit stopped the search (LIMIT_REACHED once finalized). ``stats``: ``nodes``,
        ``probes`` (the number of node-limited searches), ``proofs`` (capacities proven
        infeasible, at most 20 listed), ``portfolio_peak`` (of the greedy members alone when they
        reached the bound or the first look planned there), ``first_look`` (whether its plan was
        kept), ``rounds``, ``threads`` and ``search_s``; ``portfolio_held`` when, minimising under a
        time limit, members of the portfolio were held back so that the searches get the time (see
        :func:`dsa.strategies.best.portfolio_hold`); ``phases``, ``(name, start_s, end_s, cpu_s)`` of
        each phase in the order they ran, as in ``best`` (see :mod:`dsa.strategies._phases`; the
        canonical search's looks and rounds are ``"canonical"``, the conflict filter is not a phase).

    Examples
    --------
    >>> import dsa
    >>> p = dsa.Problem([0, 0], [1, 1], [3, 3], alignments=[4, 4])
    >>> sol = dsa.solve(p, "exact")
    >>> sol.peak, sol.lower_bound, sol.status.value
    (7, 7, 'optimal')
    """
    t0 = time.perf_counter()
    budget = Budget(time_limit, node_limit)
    raw = _search(problem, time_limit=time_limit, node_limit=node_limit, seed=seed, verbose=verbose,
                  sweep=sweep, context=context, budget=budget)
    cap = problem.capacity
    if cap is None or raw.lower_bound <= cap:
        return raw
    # proven infeasible: the rows that make it so (a deletion filter over the decision search)
    conflict, core, info = conflict_filter(problem, budget=budget, seed=seed, sweep=sweep)
    stats = {**raw.stats, **info, "search_s": time.perf_counter() - t0}
    if conflict is None:
        stats["conflict_cut"] = True
        stats["infeasible_core"] = [int(i) for i in core]
    return dataclasses.replace(raw, stats=stats, conflict=conflict)


def _search(problem, *, time_limit, node_limit, seed, verbose, sweep, context, budget=None):
    """:func:`solve` without the conflict filter: the search's raw result (``budget``: the call's)."""
    from dsa.strategies import _canonical_search as canonical
    from dsa.strategies import best
    from dsa.strategies._phases import Phases

    t0 = time.perf_counter()
    phases = Phases(t0)   # (stats["phases"]: see dsa.strategies._phases)
    budget = budget if budget is not None else Budget(time_limit, node_limit)
    log = _Log(verbose, t0)
    context = context if context is not None else Context(problem, sweep=sweep)
    bound = context.lower_bound
    # busy periods (those whose preparation the deadline cuts short are not searched); searches kept
    # for resumption
    search = canonical.CanonicalSearch(problem, deadline=budget.deadline)
    cap = problem.capacity
    lo = bound  # the searches start from the same bound
    zero = problem.sizes == 0

    cut = []  # set when the time limit stops the portfolio before all its members ran
    held = []  # set when members were held back for the searches (see best.portfolio_hold)
    wave = [0.0]  # the longest wave of the portfolio's greedy members
    # minimising under a time limit, the portfolio starts no member likely to end after this, once it
    # has a plan, as in best (where each member takes seconds, most of the time is the searches')
    # (a Budget: kernel loading moves its deadline as it moves the call's)
    hold = None
    if cap is None and budget.deadline is not None:
        hold = Budget.lasting(best.portfolio_hold(budget.remaining()))

    def start(members):
        """The portfolio's plan with ``members`` (the greedy ones, or then the costlier ones), within
        what is left of the time limit (the portfolio always runs its first member: a plan)."""
        left = None if budget.deadline is None else max(budget.remaining(), MIN_PORTFOLIO_S)
        sol = call(best.solve, problem, context, time_limit=left, improve=False, members=members,
                   seed=seed, portfolio_time=None if hold is None else hold.remaining())
        if sol.stats.get("portfolio_cut"):
            cut.append(True)
        if sol.stats.get("portfolio_held"):
            held.append(True)
        wave[0] = max(wave[0], sol.stats.get("portfolio_wave_s", 0.0))
        out = np.asarray(sol.offsets, dtype=np.int64).copy()
        out[zero] = search.base[zero]  # zero-size rows: offset 0 or their fixed offset
        return out, plan_peak(problem, out)

    # the portfolio's greedy members first (a millisecond or two: on most real traces one of them
    # reaches the bound), then a first look at the bound, then the costlier members: best's strategy
    # members, where best runs them by default, those that the time left is likely to hold (the
    # portfolio runs the first it is given whatever its limit, and knows no greedy wave's time in
    # that call; see best.STRATEGY_WAVES)
    with phases("portfolio"):
        offsets, peak = start([f"{order}/{fit}" for order, fit in best.MEMBERS])
    found_s = time.perf_counter() - t0  # (when the incumbent was found)
    log.header(problem, bound, peak)
    log.line(0, peak, lo, "plan of the portfolio's greedy members", force=True)
    costlier = (list(best.STRATEGY_MEMBERS) if len(problem) <= best.STRATEGY_MEMBERS_MAX_N
                and not context.sweep.dense else [])
    first, used, searches = None, 0, 0
    if peak > lo and (cap is None or cap == lo):
        canonical.warm()  # loading the kernel does not count (budget.deadline moves by the load time)
        look_until = budget.deadline  # (under a time limit, a share of what is left)
        if look_until is not None:
            look_until = time.perf_counter() + canonical.FIRST_LOOK_TIME * budget.remaining()
        # (searches of the bound, resumed by later rounds, are kept in search.runs)
        with phases("canonical"):
            first, used, searches = search.first_look(deadline=look_until, node_limit=node_limit)
        budget.spend(used)
    if first is None and peak > lo and (cap is None or peak > cap) and costlier:
        fit = [m for m in costlier if budget.remaining() > 0 and (
            budget.deadline is None or budget.remaining() >= best.member_waves(m) * wave[0])]
        if len(fit) < len(costlier):
            cut.append(True)  # no time left for some of the costlier members
        if fit and hold is not None and hold.exhausted:
            held.append(True)  # (the time is the searches'; within the hold, best's applies to each)
            fit = []
        if fit:
            with phases("portfolio"):
                full, full_peak = start(fit)
            if full_peak < peak:
                offsets, peak = full, full_peak
                found_s = time.perf_counter() - t0
                log.line(used, peak, lo, "plan of the portfolio's strategy members", force=True)
    portfolio_peak = peak
    if first is not None:
        offsets = first
        peak = plan_peak(problem, offsets)
        found_s = time.perf_counter() - t0
        log.line(used, peak, lo, "plan found at the bound", force=True)
    stats = {"portfolio_peak": portfolio_peak, "first_look": first is not None, "nodes": used,
             "probes": searches, "proofs": [], "rounds": 0, "threads": canonical.threads()}
    state = {"offsets": offsets, "peak": peak, "lo": lo, "found_s": found_s}
    # a period too large to search keeps its portfolio plan: no capacity below its peak can be
    # reached (or disproved) by the search
    stuck = search.stuck(offsets)
    largest = max((len(per.rows) for per in search.periods), default=1)
    heuristics = canonical.HEURISTICS
    limited = False  # whether the time or node limit stopped the search before it was done
    nb = max(64, BUDGET0_PER_BUFFER * largest)

    def record(c, outcome, plans, used):
        """Book one node-limited search of capacity ``c`` (outcome "found", "infeasible" or "limit")."""
        budget.spend(used)
        stats["nodes"] += used
        stats["probes"] += 1
        search.result(state["offsets"], plans)  # a period planned within c never raises the peak
        new = plan_peak(problem, state["offsets"])
        if new < state["peak"]:
            state["peak"] = new
            log.line(stats["nodes"], new, state["lo"], f"plan found at capacity {c}", force=True)
        if outcome == "infeasible":
            # (several raced searches may prove the same capacity)
            if len(stats["proofs"]) < 20 and c not in stats["proofs"]:
                stats["proofs"].append(c)
            state["lo"] = max(state["lo"], c + 1)
            log.line(stats["nodes"], state["peak"], state["lo"], f"capacity {c} proven infeasible",
                     force=True)
        else:
            log.line(stats["nodes"], state["peak"], state["lo"], f"round {stats['rounds']}")

    if cap is not None and state["peak"] > cap and (lo > cap or stuck > cap):
        pass  # proven infeasible, or a period too large to search is above cap: nothing to search
    elif cap is not None and state["peak"] > cap:
        # decision mode: a plan within cap, or a proof that there is none. Every preorder's search
        # is raced each round and resumed the next; a proof ends the race, a plan the later
        # preorders' searches (not under a node limit, where each search runs its share)
        canonical.warm()  # loading the kernel does not count (budget.deadline moves by the load time)
        with search.prepare(), phases("canonical"):  # threads for the searchable periods, a fresh node rate
            done = False
            while not done:
                share = budget.grant(nb * len(heuristics)) // len(heuristics)
                if share > 0:
                    for result in search.race(cap, state["offsets"], share, heuristics,
                                              deadline=budget.deadline, cancel=node_limit is None,
                                              final=True):
                        record(cap, *result)
                if state["peak"] <= cap or state["lo"] > cap:
                    done = True  # a plan within cap, or a proof that there is none
                elif budget.exhausted or share <= 0:
                    done = limited = True
                stats["rounds"] += 1
                nb *= GROWTH
        stats["threads"] = search.width
    elif cap is None and max(lo, stuck) < state["peak"]:
        def progress(event, c, new_peak, new_lo, nodes):
            if new_peak < state["peak"]:
                state["found_s"] = time.perf_counter() - t0
            state["peak"], state["lo"] = new_peak, new_lo
            if event == "proof" and len(stats["proofs"]) < 20 and c not in stats["proofs"]:
                stats["proofs"].append(c)
            text = {"plan": f"plan found at capacity {c}", "proof": f"capacity {c} proven infeasible",
                    "probe": "searching"}[event]
            log.line(nodes, new_peak, new_lo, text, force=event != "probe")

        if node_limit is None:
            # restarted skyline dives at the bound itself, where any waste ends a branch at once
            look = best.bound_look(problem, state["offsets"], state["lo"], budget, 0 if seed is None else seed,
                                   stats, phases=phases)
            if look is not None:   # (at the bound, or lower than the incumbent: see best.bound_look)
                state["offsets"], state["peak"] = look, plan_peak(problem, look)
                state["found_s"] = time.perf_counter() - t0
                text = "plan found at the bound" if state["peak"] <= state["lo"] else "plan found by the layers"
                log.line(stats["nodes"], state["peak"], state["lo"], text, force=True)
        if max(lo, stuck) < state["peak"]:  # (unless the look planned at the bound)
            left = budget.remaining()
            movable = int(np.count_nonzero(problem.is_movable))
            if (node_limit is None and budget.deadline is not None
                    and (movable > best.LARGE_ROWS
                         or best.skyline_runs(problem, left * (1 - CANONICAL_SHARE)))):
                # the rest goes to best.improve_plan (below) unless this proves the plan optimal
                left *= best.CANONICAL_SHARE if movable > best.LARGE_ROWS else CANONICAL_SHARE
            with phases("canonical"):
                out, info = search.lower_peak(state["offsets"], time_limit=left,
                                              node_limit=None if node_limit is None else node_limit - used,
                                              progress=progress)
            state["offsets"] = out
            state["peak"] = plan_peak(problem, out)
            state["lo"] = max(state["lo"], int(info["proven_lower_bound"]))
            stats["nodes"] = used + info["nodes"]
            stats["probes"] += len(info["probes"])
            stats["rounds"] = info.get("rounds", 0)
            stats["threads"] = info.get("threads", 1)
            if max(state["lo"], stuck) < state["peak"]:
                limited = True
    if (cap is None and node_limit is None and budget.deadline is not None and not budget.exhausted
            and state["lo"] < state["peak"]):
        # time left and no proof: the canonical search had its share (CANONICAL_SHARE, or best's on
        # large problems), or cannot lower the peak (a busy period too large to search sets it), so
        # best's improvement phase (skyline search, random dives, local search) spends the rest
        def improved(seconds, new_peak):
            state["found_s"] = seconds
            log.line(stats["nodes"], new_peak, state["lo"], "plan found by the improvement phase",
                     force=True)

        out, info = best.improve_plan(problem, state["offsets"], state["lo"], budget,
                                      0 if seed is None else seed, t0=t0,
                                      log=improved, search=search, phases=phases)
        if plan_peak(problem, out) < state["peak"]:
            state["offsets"], state["peak"] = out, plan_peak(problem, out)
        info.pop("improvements")
        stats.update(info)
        limited = limited or state["lo"] < state["peak"]
    stats["last_improvement_s"] = state["found_s"]
    if budget.time_limit is not None:
        stats["last_improvement_fraction"] = min(1.0, state["found_s"] / budget.time_limit)
    peak, lo = state["peak"], state["lo"]
    lo = min(lo, peak)  # (a plan of peak P proves nothing above P)
    if held:
        stats["portfolio_held"] = True
    if cut:
        stats["portfolio_cut"] = True
        if cap is None and lo < peak:
            limited = True  # unproven, and the time limit cut the portfolio short
    stats["search_s"] = time.perf_counter() - t0
    stats["phases"] = phases.rows
    message = ""
    if limited:
        limit = "node limit" if node_limit is not None and stats["nodes"] >= node_limit else "time limit"
        if cap is not None and peak > cap:
            message = (f"the {limit} stopped the search before it found a plan within the capacity {cap} "
                       f"or proved there is none (best peak {peak}, lower bound {lo})")
        else:
            message = (f"the {limit} stopped the search at peak {peak}, proven lower bound {lo}"
                       + ("; the portfolio was cut short" if cut else ""))
    # facts only: the plan, the proven bound, whether a limit stopped the search; finalize (in
    # dsa.solve) decides the status (OPTIMAL at the bound, INFEASIBLE above the capacity, ...)
    raw = make_solution(problem, state["offsets"], strategy="exact", stats=stats, lower_bound=lo,
                        limit_reached=limited, message=message)
    if log.verbose:
        log.line(stats["nodes"], peak, lo, f"done: {finalize(problem, raw, bound).status.value}", force=True)
    return raw


def _periods(problem, rows) -> list[np.ndarray]:
    """``rows`` cut into busy periods of their own: time ranges that no row of them spans (each
    period can be planned apart from the others, so a set of rows is infeasible exactly when one of
    its periods is)."""
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) == 0:
        return []
    rows = rows[np.lexsort((rows, problem.starts[rows]))]
    starts, ends = problem.starts[rows], problem.ends[rows]
    reach = np.maximum.accumulate(ends)
    cuts = np.flatnonzero(starts[1:] >= reach[:-1]) + 1
    return [np.sort(part) for part in np.split(rows, cuts)]


def conflict_filter(problem, *, budget=None, seed=None, sweep=None):
    """An irreducible infeasible subset of the rows of ``problem`` at its capacity, by a deletion filter.

    The rows are infeasible together (no plan within ``problem.capacity`` exists) and each row is
    needed: once any one of them is removed, a plan fits. This is the deletion filter of
    M. D. Moffitt, "MiniMalloc: A Lightweight Memory Allocator for Hardware-Accelerated Machine
    Learning", ASPLOS 2023 (after Chinneck's filters for irreducible infeasible subsets of linear
    programs). It starts from a small infeasible core: the rows alive at a section whose live bytes
    exceed the capacity when LOAD does, or else the busy period that is infeasible. Then each row of
    the core in turn, the smallest first, is removed and the capacity is decided again on the rows
    left, with the search of :func:`solve` (a lower bound above the capacity decides it at once):
    if they are still infeasible, the row stays out, and the core shrinks to their busy period that
    is infeasible; if a plan fits, the row is kept. A row kept is needed in the end too, since a
    plan of a superset is a plan of every subset; fixed rows are rows like any other (a subset keeps
    their offsets) and alignments are kept.

    Parameters
    ----------
    problem : Problem
        With ``capacity`` set, and proven infeasible at it.
    budget : dsa.budget.Budget, optional
        The time and nodes the filter may spend (each decision gets what is left); None: no limit.
    seed : int, optional
        Passed to the portfolio that starts each decision.
    sweep : dsa.sweep.Sweep, optional
        Unused (the sub-problems have their own); accepted for symmetry with :func:`solve`.

    Returns
    -------
    conflict : tuple of int or None
        The rows of an irreducible infeasible subset, sorted; None when the budget ran out first.
    core : numpy.ndarray of int64
        Rows proven infeasible together (the conflict itself when the filter finished, else the
        smallest proven core when it was cut short; all rows when nothing was proven yet).
    info : dict
        ``conflict_s`` (seconds), ``conflict_decisions`` (capacities decided on subsets) and
        ``conflict_nodes`` (search nodes they used).

    Notes
    -----
    Complexity: one decision per row of the core (each exponential in the worst case, bounded by the
    budget), plus one per busy period when the core is split.

    Examples
    --------
    >>> import dsa
    >>> from dsa.strategies.exact import conflict_filter
    >>> p = dsa.Problem([0, 0, 0, 5], [4, 4, 4, 9], [3, 3, 3, 8], capacity=8)
    >>> conflict_filter(p)[0]
    (0, 1, 2)
    """
    from dsa.bounds import live_bytes, load, lower_bound

    t0 = time.perf_counter()
    budget = budget if budget is not None else Budget()
    cap = problem.capacity
    if cap is None:
        raise ValueError("conflict_filter needs a problem with a capacity")
    info = {"conflict_s": 0.0, "conflict_decisions": 0, "conflict_nodes": 0}
    every = np.arange(len(problem), dtype=np.int64)

    def decide(rows):
        """``(verdict, core)``: True and an infeasible period of ``rows``; False (a plan fits all of
        them); None when the budget ran out before a decision."""
        unknown = False
        parts = _periods(problem, rows)
        subs = [problem.take(part) for part in parts]
        bounds = [lower_bound(sub) for sub in subs]
        for k in np.argsort([-b for b in bounds], kind="stable"):
            if bounds[k] > cap:
                return True, parts[k]
        for k in sorted(range(len(parts)), key=lambda k: len(parts[k])):
            left = budget.remaining()
            nodes = None if budget.node_limit is None else budget.node_limit - budget.nodes
            if budget.exhausted or left <= 0 or (nodes is not None and nodes <= 0):
                return None, None
            raw = _search(subs[k], time_limit=None if left == float("inf") else left, node_limit=nodes,
                          seed=seed, verbose=False, sweep=None, context=None)
            used = int(raw.stats.get("nodes", 0))
            budget.spend(used)
            info["conflict_nodes"] += used
            info["conflict_decisions"] += 1
            if raw.lower_bound > cap:
                return True, parts[k]
            if raw.peak is None or raw.peak > cap:
                unknown = True
        return (None, None) if unknown else (False, None)

    def done(conflict, core):
        info["conflict_s"] = time.perf_counter() - t0
        return conflict, np.asarray(core, dtype=np.int64), info

    # the first core: the rows alive where the live bytes exceed the capacity, else a busy period
    core = every
    if load(problem) > cap:
        times, live = live_bytes(problem)
        t = times[int(np.argmax(live))]
        core = np.flatnonzero((problem.starts <= t) & (problem.ends > t)).astype(np.int64)
    if len(core) == len(problem) and len(_periods(problem, core)) == 1:
        verdict, part = True, core  # (the problem itself is proven infeasible)
    else:
        verdict, part = decide(core)
    if verdict is None:
        return done(None, every)
    if not verdict:  # (cannot happen for a problem proven infeasible; kept as a guard)
        raise RuntimeError("conflict_filter: the rows are not infeasible at the capacity")
    core = part
    sizes = problem.sizes
    for r in sorted(core.tolist(), key=lambda i: (int(sizes[i]), i)):
        if r not in core:
            continue  # dropped with a period that was not the infeasible one
        verdict, part = decide(core[core != r])
        if verdict is None:
            return done(None, core)
        if verdict:
            core = part
    return done(tuple(int(i) for i in core), core)
