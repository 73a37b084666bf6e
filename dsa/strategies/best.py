"""Best of a portfolio, then a time-limited search that improves the winner.

Phase 1, the portfolio (XLA's heap simulator plans each buffer set with several orderings and keeps
the smallest heap): the greedy engine of :mod:`dsa.strategies.greedy` (Pisarchyk & Lee, "Efficient
Memory Management for Deep Neural Net Inference", MLSys 2020 workshop, arXiv:2001.03288) with the
orderings size, duration, area, start, conflict and breadth, each with first fit and best fit, plus
``restarts`` random orderings, then the cheap registered constructive strategies (``gergov``,
``buchsbaum``, ``mincost_flow``). Each ordering is computed once and the time-overlap graph is shared
(:class:`dsa.sweep.Sweep`). From ``PARALLEL_MIN_N`` rows on, greedy members run a few at a time on
threads (the placement kernel releases the GIL), with results taken in member order, and from
``STARTS_FIRST_MIN_N`` rows on those by start first (a sweep over time, without the graph: a plan
comes early). It stops as soon as a plan reaches the lower bound (LOAD), which proves it optimal;
once a plan exists, a wave of greedy members still running at the deadline is stopped there and
dropped.

Phase 2, the improvement (within what remains of ``time_limit``): a MiniMalloc-style search over
canonical plans (Moffitt, ASPLOS 2023), then restarted skyline dives (bottom-left fill with
backtracking and Luby restarts, :mod:`dsa.strategies._skyline`), on large problems then the
canonical search's dives restarted under randomly perturbed preorders (GRASP, Feo & Resende 1995),
then a local search over greedy orders (squeaky wheel, Joslin & Clements 1999, under late
acceptance, Burke & Bykov 2017), restarted
from the incumbent until the time limit; on large problems the random dives again, in turns with
the skyline search, or where they cannot run a large-neighbourhood search (Shaw, CP 1998) whose
repair step is the canonical search re-plans time windows around the peak instead. See
:func:`_improve` and :func:`improve_plan`. It stops before the limit only at a proven bound.

Greedy by size alone misses LOAD on traces where two large buffers that never meet are stacked at
the same offset and block a later pair (see the tests); another ordering often avoids that.

Complexity: phase 1 is (12 + restarts) greedy runs, each O(n log n + E + sum_i k_i log k_i), plus the
members' own costs; phase 2 runs until the time limit, the lower bound or its own stopping rule.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from dsa._kernels import jit_seconds
from dsa.bounds import lower_bound
from dsa.budget import Budget, check_seconds, check_seed, max_threads
from dsa.context import Context
from dsa.placement import by_start
from dsa.solution import Solution, make_solution, plan_peak
from dsa.strategies._call import call
from dsa.strategies._orders import ORDERINGS, order_rows
from dsa.strategies._phases import Phases
from dsa.strategies.greedy import FITS, greedy_offsets

__all__ = ["solve", "portfolio_head", "improve_plan", "skyline_runs", "skyline_width", "MEMBERS",
           "STRATEGY_MEMBERS"]

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
# once a plan exists, a member that is not a greedy pass (a strategy, a callable) runs only while the
# time left is at least this many times the longest greedy wave so far, and at least the longest such
# member so far: one cannot be stopped once started, and it takes several greedy passes (on rectangle
# cuts of 10,000-20,000 buffers gergov took 7-8 times a greedy wave and buchsbaum's 4 restarts 7
# times; at 20,000 buffers with a 3 s limit buchsbaum started 0.3 s before the deadline and ended
# 1.1 s after it) ...
STRATEGY_WAVES = 8
# ... or, for these strategies, this many: mincost_flow pairs every two buffers up to 1,000 rows
# (0.2 s at 1,000 rows of a rectangle cut, 64-123 greedy passes; 2-3 beyond, where it takes windows)
MEMBER_WAVES = {"mincost_flow": 130}
# greedy members run on a thread pool from this many rows on, with at most this many threads
PARALLEL_MIN_N = 20_000
MAX_THREADS = 4
# from this many rows on the portfolio runs its members by start first (see
# _starts_first): below it, a pass with the overlap graph takes 0.15 s at most
STARTS_FIRST_MIN_N = 20_000
# a wave of greedy members is stopped at the deadline (Budget.alarm) only after a wave that took at
# least this long: the timer thread costs about 0.3 ms a wave, as much as a pass on 150 buffers
ALARM_MIN_WAVE_S = 0.005
# with the improvement phase to come, once it has a plan the portfolio starts no member (a wave of
# greedy members, a strategy member) likely to end more than this share of the time limit into the
# call, or PORTFOLIO_MIN_S if later (see portfolio_hold and _portfolio's hold). On problems of
# 10,000-50,000 buffers the members took 4-16 s of a 20 s limit and their plans came in the first
# 0.3-2.7 s; with a share of 0.1, best at 20 s on 8 rectangle cuts of 10,000-100,000 buffers: lower
# on 3 (long-tall-50000-s44 1.0564 -> 1.0263, pinwheel-50000-s42 1.0335 -> 1.0279,
# pinwheel-20000-s36 1.0495 -> 1.0442), level on 5; exact on long-tall-50000-s44 1.0564 -> 1.0229
# (its portfolio had taken 15.6 s). The floor leaves the portfolio as it was at the default time
# limit and wherever its members take under a second
PORTFOLIO_SHARE = 0.1
PORTFOLIO_MIN_S = 1.0


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
    from dsa.strategies import resolve_name, strategy_options

    if members is None:
        return list(MEMBERS) + list(STRATEGY_MEMBERS)
    if isinstance(members, str) or not hasattr(members, "__iter__"):
        raise ValueError(f"members must be a list of names or callables, got {members!r}")

    def strategy(raw):
        name = resolve_name(raw)
        if name == "best":
            raise ValueError("best cannot be a member of itself")
        return name

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
            out.append(strategy(m))
        elif isinstance(m, tuple) and len(m) == 2 and isinstance(m[0], str) and isinstance(m[1], dict):
            name = strategy(m[0])
            names, any_keyword = strategy_options(name)
            unknown = sorted(str(k) for k in m[1] if k not in names and not any_keyword)
            if unknown:  # (a misspelt option would be dropped without a word)
                raise ValueError(f"member {m!r}: {name} takes no option {', '.join(unknown)}; it takes "
                                 f"{', '.join(sorted(names)) or 'none'}")
            out.append((name, dict(m[1])))
        else:
            raise ValueError(f"a member must be 'order/fit', a strategy name, a (strategy name, options) "
                             f"pair or a callable, got {m!r}")
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


def member_waves(member) -> int:
    """How many of the longest greedy wave the time left must hold for ``member`` (not a greedy
    pass) to start once a plan exists: ``MEMBER_WAVES`` for the strategies named there, else
    ``STRATEGY_WAVES``."""
    name = member[0] if isinstance(member, tuple) else member  # (a callable: not found)
    return MEMBER_WAVES.get(name, STRATEGY_WAVES) if isinstance(name, str) else STRATEGY_WAVES


def _is_greedy(member) -> bool:
    return isinstance(member, tuple) and not isinstance(member[1], dict)


def portfolio_hold(seconds):
    """How long the portfolio may go on starting members once it has a plan, in a call with
    ``seconds`` left whose improvement phase is to run: ``PORTFOLIO_SHARE`` of them, at least
    ``PORTFOLIO_MIN_S`` (None without a time limit: no hold)."""
    return None if seconds is None else max(PORTFOLIO_SHARE * seconds, PORTFOLIO_MIN_S)


def _starts_first(problem) -> bool:
    """Whether the portfolio runs its members that order by start first: from ``STARTS_FIRST_MIN_N``
    rows on. Their greedy passes are sweeps over time, without the overlap graph (0.2 s against
    1.8 s and 0.4 s for the graph on a rectangle cut of 100,000 buffers; fixed rows are looked up by
    start), so a plan exists early, and the waves after it can be cut short at the deadline."""
    return len(problem) >= STARTS_FIRST_MIN_N


def _portfolio(problem, members, sweep, bound, restarts, seed, budget, members_max_n=None,
               engine="auto", context=None, progress=None, hold=None):
    """Phase 1: run the members in order, keep the lowest peak; stop at ``bound``, or once a plan
    exists when the budget is spent or has less time left than the last wave of greedy members took
    (on large problems with long lifetimes one greedy pass can take a second), and skip a member that
    is not a greedy pass when less time is left than ``STRATEGY_WAVES`` (``MEMBER_WAVES``) times the
    longest greedy wave, or than the longest such member so far took (``cut`` in the result says that
    one of these happened). Once a plan exists, a greedy pass still running at the deadline is
    stopped there and dropped (its peak in ``peaks`` is None), unless the wave before took less than
    ``ALARM_MIN_WAVE_S`` (passes that short end soon enough, and the timer costs as much).
    ``engine`` is the greedy members' (see :func:`dsa.strategies.greedy.greedy_offsets`).

    From ``STARTS_FIRST_MIN_N`` rows on, the members that order by start run first: their passes
    are sweeps over time, about ten times cheaper than the others (see
    :func:`dsa.placement.greedy_offsets`), so that a plan exists early. Between plans of the same
    peak the member that comes first in ``members`` wins all the same.

    On large problems consecutive greedy members run a few at a time on a thread pool (the
    placement kernel releases the GIL); results are taken in member order, so the outcome does not
    depend on the number of threads. Random restarts are drawn one by one, never listed up front.

    ``progress``, if given, is called with the peak each time a member's plan is lower than all
    before (as the members find them: a log shows the incumbent fall from the first member on).

    ``hold`` (a :class:`dsa.budget.Budget`, optional) holds the portfolio back: once a plan exists,
    no wave of greedy members starts that would end after its deadline if it took as long as the
    last, and no other member once the longest such member so far would end after it, so that the
    time goes to the search after the portfolio (``held`` in the result says that one was held
    back; unlike ``cut``, this is not the time limit's doing). Being a budget, its deadline moves
    with kernel loading as the call's does.
    """
    rng = np.random.default_rng(check_seed(seed))
    indexed = list(enumerate(members))  # (position, member): ties between plans go to the first
    if _starts_first(problem):
        indexed.sort(key=lambda item: not (_is_greedy(item[1]) and item[1][0] == "start"))
    stream = itertools.chain(indexed, ((len(indexed) + k, ("random", "best")) for k in range(int(restarts))))
    orders: dict = {}
    state = {"best": None, "peak": None, "winner": None, "peaks": {}, "random": 0, "cut": False, "held": False,
             "wave_max": 0.0, "position": None}  # (the longest wave of greedy members)

    def held(seconds):
        # whether the hold leaves less than ``seconds``: a member that long would end after it
        return hold is not None and (hold.exhausted or hold.remaining() < seconds)

    def prepare(item):
        position, (order, fit) = item
        if order == "random":
            rows = order_rows(problem, "random", rng.integers(2**63))
            label = f"random{state['random']}/{fit}"
            state["random"] += 1
        else:
            if order not in orders:
                orders[order] = order_rows(problem, order)
            rows, label = orders[order], f"{order}/{fit}"
        return label, rows, fit, position

    def record(label, offsets, position) -> bool:
        """Keep ``offsets`` if lowest so far (on a tie, if its member comes first in ``members``);
        True once the bound is reached."""
        peak = plan_peak(problem, offsets)
        state["peaks"][label] = peak
        lower = state["peak"] is None or peak < state["peak"]
        if lower or (peak == state["peak"] and position < state["position"]):
            state["best"], state["peak"], state["winner"], state["position"] = offsets, peak, label, position
        if lower and progress is not None:
            progress(peak)
        return state["peak"] <= bound

    stop = np.zeros(1, dtype=np.int64)  # set at the deadline while a wave runs once a plan exists

    def place(job):
        return greedy_offsets(problem, job[1], job[2], sweep=sweep, engine=engine, stop=stop)

    workers = max_threads(min(os.cpu_count() or 1, MAX_THREADS)) if len(problem) >= PARALLEL_MIN_N else 1
    pool = ThreadPoolExecutor(workers) if workers > 1 else None
    wave_s = 0.0  # how long the last wave of greedy members took
    member_max = 0.0  # the longest member that is not a greedy pass (see STRATEGY_WAVES)
    try:
        item, done = next(stream, None), False
        while item is not None and not done:
            position, member = item
            if state["best"] is not None and budget.exhausted:
                state["cut"] = True
                break
            if _is_greedy(member):
                if state["best"] is not None and budget.remaining() < wave_s:
                    state["cut"] = True  # another wave would end past the deadline
                    break
                if state["best"] is not None and held(wave_s):
                    state["held"] = True  # the time is the improvement phase's
                    break
                wave = []
                while item is not None and _is_greedy(item[1]) and len(wave) < workers:
                    wave.append(prepare(item))
                    item = next(stream, None)
                t_wave, jit_wave = time.perf_counter(), jit_seconds()
                if sweep is not None and not sweep.dense and not all(by_start(problem, job[1]) for job in wave):
                    sweep.overlap  # (here, not in each thread: see solve)
                # with a plan in hand, a pass still running at the deadline stops there (its rows
                # not placed yet left at -1) and is dropped
                stop[0] = 0
                armed = state["best"] is not None and wave_s >= ALARM_MIN_WAVE_S
                with budget.alarm(stop) if armed else contextlib.nullcontext():
                    results = list(pool.map(place, wave) if pool is not None else map(place, wave))
                for job, offsets in zip(wave, results):
                    if stop[0] and (offsets < 0).any():
                        state["peaks"][job[0]], state["cut"] = None, True
                        continue
                    if record(job[0], offsets, job[3]):
                        done = True
                        break
                # (a first call's compile, which moves the deadline too, does not count)
                wave_s = time.perf_counter() - t_wave - (jit_seconds() - jit_wave)
                state["wave_max"] = max(state["wave_max"], wave_s)
                continue
            current, item = member, next(stream, None)
            if members_max_n is not None and (len(problem) > members_max_n or sweep.dense):
                continue  # large or densely overlapping: the default strategy members cost too much
            if (state["best"] is not None and budget.deadline is not None
                    and budget.remaining() < max(member_waves(current) * state["wave_max"], member_max)):
                state["cut"] = True  # it would likely end past the deadline (later ones may be greedy)
                continue
            if state["best"] is not None and held(member_max):
                # (likewise; judged by the longest such member so far, not by the waves above: those
                # bound its cost from above, for the deadline, where the hold is a soft share)
                state["held"] = True
                continue
            label = _member_label(current)
            if context is None:
                context = Context(problem, sweep=sweep)
            t_member, jit_member = time.perf_counter(), jit_seconds()
            offsets = _member_offsets(problem, current, context, seed)
            member_max = max(member_max, time.perf_counter() - t_member - (jit_seconds() - jit_member))
            if offsets is None or offsets.shape != (len(problem),):
                state["peaks"][label] = None
                continue
            done = record(label, offsets, position)
    finally:
        if pool is not None:
            pool.shutdown()
    return state


def _derived_seed(seed, k: int) -> int:
    """The seed of the ``k``-th restart of the local search (``k >= 1``), drawn from ``seed``."""
    state = np.random.SeedSequence([check_seed(seed), k]).generate_state(1, dtype=np.uint32)
    return int(state[0])


# windows of the k-th restart of the local search on large problems (rows per window; cycled)
RESTART_WINDOWS = (1000, 600, 1500, 400, 2000)
# share of the time left that a turn of window repairs gets on large problems (the local search gets
# what it leaves; measured on rectangle cuts of 3,000-5,000 buffers at 5 s: 1.0 beat 0.5 on 2 seeds)
REPAIR_SHARE = 1.0
# problems of more than this many movable rows are large: the canonical search gets CANONICAL_SHARE of
# the time left (in best and in exact), and improve_plan's turns include window repairs
LARGE_ROWS = 1000
# share of the time left that the canonical search of the whole problem gets on problems of more than
# LARGE_ROWS rows, improve_plan the rest (rectangle cuts of 1,500 rows at 5 s: its probes stop finding
# plans after a few tenths of a second; 0.3 gave a mean of 1.0855 x LOAD against 1.0935 with 1.0, and
# with the skyline search in improve_plan 0.15 and 0.2 below did better than 0.3 and 0.5)
CANONICAL_SHARE = 0.15
# the same on problems of at most LARGE_ROWS rows, where it gets at least CANONICAL_MIN_S seconds (or all
# the time left, if less): it finds its plans early or not at all, and on MiniMalloc's challenging
# instances (150-450 rows) it needs most of the default second
CANONICAL_SHARE_SMALL = 0.2
CANONICAL_MIN_S = 1.0
# ... except on tilings (every busy period above the bound has it as its bytes alive at every instant,
# as in rectangle cuts), where it gets its share alone: there the skyline search and the dives after
# it plan what the canonical search does not, and at short limits the floor left them nothing. best on
# 40 random draws of 100-400 buffers (seeds 1000-1039 of benchmarks/peers_generated.random_settings):
# at 1 s, 34 -> 35 at LOAD, mean 1.0134 -> 1.0067 x LOAD (all six above LOAD lower); at 2 s, 34 ->
# 36, 1.0085 -> 1.0048; at 5 s (the floor no longer binds past the share) 36 and 35, 1.0042 and
# 1.0047 (random1035 at LOAD at 4.65 s one way, 1.04 the other). MiniMalloc's instances are no
# tilings: level
# share of the time left that improve_plan gives the skyline search first (dsa.strategies._skyline),
# under a deadline (rectangle cuts of 400-3,000 buffers at 5 s: 0.75 gave 1.0876 x LOAD against
# 1.1005 without it, 6 instances), and each of its later turns
SKYLINE_SHARE = 0.75
# ... but its first turn gets this share instead on problems of at most DIVE_MIN_ROWS movable rows
# where random dives take the turns after it (SMALL_DIVE_TURNS), so that the dives start sooner. On
# tall cuts (64-256 cells per buffer) the first search did not stall: it kept its whole share (9.5 s
# of best at 20 s on tall-256-700-s53), lowering the peak by 1.4 % of LOAD, and the dives' first
# turn after it, at 16.8 s, lowered it by as much in 1 s. best at 20 s against 0.75, seeds 0 and 1:
# on pinwheel-350-s0, guillotine-700-s0, pinwheel-550-s1, long-tall-250-s2, the tall set's three
# cuts under 1,000 buffers and random823, random829 and random831, 8 of 20 runs lower (by 0.2-1.3 %
# of LOAD), none higher, means 1.0706 -> 1.0680 and 1.0633 -> 1.0623 x LOAD (long-tall-250-s2 still
# at LOAD, but found at 14-20 s instead of 8-14 s); on 12 cuts no run had seen (the tall set's four
# families and four of the main set's, 350-950 buffers, seeds 91-102), 1.0537 -> 1.0510 (6 lower, 1
# higher) and 1.0526 -> 1.0531 (2 lower, 4 higher: long-tall-500-s99 lost LOAD, 1.0056, and
# pinwheel-950-s101 went 1.0645 -> 1.0726); on long cuts the first search is what finds LOAD, but on
# six long-tall cuts of 250-950 buffers drawn to check that (seeds 111-116), 4 were lower, 1 higher
# (1.0250 -> 1.0375), mean 1.0308 -> 1.0261. 0.25 and 0.55 on the 12 unseen cuts, seed 0: 1.0537 and
# 1.0519. On larger problems, where the dives run before the turns anyway, 0.4 was worse (6 cuts of
# 1,200-4,000 buffers: 3 higher, 1 lower)
SMALL_SKYLINE_SHARE = 0.4
# restarted skyline dives at the lower bound (bound_look) get this share of the time left, when at
# least BOUND_LOOK_MIN_S seconds are left, before the canonical search (best) or its rounds (exact):
# on rectangle cuts, where the optimum is the bound, they reach it on some instances of 200-400
# buffers (exact at 60 s planned 3 of 12 cuts of 200-950 buffers at the bound in 0.8-1.3 s, where it
# took 1.3-48 s before)
BOUND_LOOK_SHARE = 0.2
BOUND_LOOK_MIN_S = 2.0
# ... and only where no busy period above the bound has more rows than this: on rectangle cuts of
# 16 cells per buffer, restarted dives at the bound found no plan beyond 400 buffers in 10 s, and on
# 3,000-5,000 buffers best at 20 s lost 0.6-1.6 % to the time it took (the improvement phase's large
# problems start at 1,000 movable rows too)
BOUND_LOOK_MAX_ROWS = 1000
# ... beyond which the look gets this share of the time left instead: guillotine cuts on a fine grid
# (omnimalloc's TilingSource, 2,000 and 5,000 buffers; rectangle_cut at aspect 100 and thousands of
# cells per buffer) are planned at the bound by the first dives, in 0.03-0.4 s, where the improvement
# phase took 5 s (on coarse grids they are not)
BOUND_LOOK_LARGE_SHARE = 0.02
# ... on problems of at most this many movable rows (beyond it, none): on larger ones a single dive
# outlasts such a share many times (rectangle cuts at 18 s: 0.36-0.65 s up to 20,000 buffers, 3 s at
# 50,000)
BOUND_LOOK_LARGE_MAX_ROWS = 20_000
# before the look at the whole: where every busy period above the bound has it as its bytes alive at
# every instant (a plan there tiles it), the periods cut into layers and merged buffers planned apart
# (dsa.strategies._layers) for up to this share of the time left (0.3 before the rectangles in blocks
# whose program stopped at its limit, _layers.LARGE_RECTANGLE: on balanced cuts those cuts need about
# 3.5 s before their leaves are looked at, more than the cuts' half of the layers' time at 0.3 (about
# 3 s at time_limit=20, _layers.SPLIT_SHARE). best at 20 s with 0.45 and them,
# against 0.3 and none: see LARGE_RECTANGLE; the large set, 10,000-20,000 buffers, seed 0: 1.0976 ->
# 1.0895 x LOAD, fine-10000-s35 1.2128 -> 1.1528, short-wide-20000-s34 1.0707 -> 1.0813, the others
# level or lower. Where the layers plan nothing on large coarse cuts, their time is not missed: best
# at 20 s with no layers at all on the main set's five coarse cuts of 1,500-5,000 buffers gave the
# same peaks, to the byte, as with 0.3: the improvement phase stalls before the end) ...
LAYERS_SHARE = 0.45
# ... but this share where less than BOUND_LOOK_MIN_S is left (best at its default second): there the
# cuts that need the larger share do not finish, and the improvement phase misses the time (27 cuts of
# 1,500-5,000 buffers, best at time_limit=1: 0.45 gave 1.1254 x LOAD against 1.1242 with 0.3, 6
# higher, none lower)
LAYERS_BRIEF_SHARE = 0.3
# ... on problems of more than this many movable rows (and at most BOUND_LOOK_LARGE_MAX_ROWS). With
# merges (dsa.strategies._contract), small tilings gain too (best at 20 s, seed 0, when the merges
# came in): the random set (12 cuts of 225-4,385 buffers) 1.0469 -> 1.0210 x LOAD, random606-313 and
# random601-1695 planned at LOAD in 0.1-0.3 s (1.114 and 1.187 before); the main set level (1.0473 ->
# 1.0481, the coarse cuts' spread); 12 fresh draws of 1,000-5,000 buffers 1.0911 -> 1.0726. Before
# merges, from 1,000 rows up
LAYERS_MIN_ROWS = 0
# ... and where some leaves are not planned within their bands, the plan with those leaves planned
# above their bands (what lies above them moved up as much), when lower than the incumbent: the
# improvement phase starts from it
LAYERS_PARTIAL = True
# on problems of at most BOUND_LOOK_MAX_ROWS movable rows, the layers get this share of the look's own
# share (BOUND_LOOK_SHARE) instead, and the look at the whole what they leave of it: the looks at the
# bound take no more of the time than before the layers ran there (at 5 s into a 20 s call, the main
# set's mean was 1.1078 x LOAD with LAYERS_SHARE there too, against 1.0672 before; the coarse cuts
# improve only once the looks have failed)
LAYERS_SMALL_SHARE = 0.5
# the layers run with any time left, the look at the whole only from BOUND_LOOK_MIN_S on: below it
# (best at its default second) the layers take all of the look's share on those problems instead.
# Before, below BOUND_LOOK_MIN_S neither ran, and the layers plan many tilings at the bound in
# 0.02-0.2 s. best at time_limit=1 (one process, kernels loaded), random draws of rectangle cuts
# (benchmarks/peers_generated.random_settings): seeds 1000-1039 at 100-400 buffers, 18 -> 34 of 40 at
# LOAD, mean 1.0640 -> 1.0135 x LOAD (0.1 of the time left instead of 0.2: 33, 1.0158; 0.4: 34,
# 1.0128); seeds 600-623 at 200-5,000 buffers (above BOUND_LOOK_MAX_ROWS the share is LAYERS_SHARE),
# 7 -> 21 of 24 at LOAD, mean 1.1070 -> 1.0178 (one higher: random602, coarse, 1.1111 -> 1.1212);
# exact at 1 s on the first 40, 27 -> 34 at LOAD. MiniMalloc's challenging instances and the real
# traces are no tilings (the layers return at once, SciPy not imported): best at 1 s level (mean
# 1.0062 -> 1.0056, D's spread). In a fresh process SciPy's import (about 0.3 s) took all of the
# layers' share at 1 s: it is not counted in it (random1034 and random1006 then planned at LOAD in
# 0.8 s, 0.5 s of it loading kernels). The look at the whole below BOUND_LOOK_MIN_S as well: 34 of
# 40, mean 1.0145, not kept
LAYERS_SHORT_SHARE = BOUND_LOOK_SHARE
# the skyline search's kernel takes about 3 s to compile: with an empty numba cache (no `dsa warmup`)
# it runs only in calls that have at least this long left, so that a short call does not spend more
# than its budget compiling a search it would run for a second (stats["skyline"] says so)
SKYLINE_COLD_MIN_S = 5.0
# once the skyline search has stalled, turns alternate: a local-search run (on large problems a turn
# of window repairs) for LOCAL_SHARE of the time left, then the skyline search again from the
# incumbent with a new seed (its probe lengths start short again), while at least
# SKYLINE_AGAIN_MIN_S is left. Rectangle cuts of 300-1,000 buffers at 20 s, 2 x 12 instances (those
# above 1,000 had window repairs until the deadline in that run): 1.0642 -> 1.0607 and 1.0712 ->
# 1.0693 x LOAD against giving the local search all of the time after one skyline search (0.1 and
# 0.6 instead of 0.3: 1.0610, 1.0605); 6 cuts of 1,200-4,000 buffers at 20 s, window repairs until
# the deadline against LOCAL_SHARE of it: 1.0824 -> 1.0810 (one instance lower, none higher)
LOCAL_SHARE = 0.3
# on problems of more than DIVE_MIN_ROWS movable rows, after the first skyline search, improve_plan runs
# canonical dives under randomly perturbed preorders (_canonical_search.random_dives) for this share of
# the time left (they stop early once they stall). best at 20 s on 17 rectangle cuts of 1,500-5,000
# buffers, against no dives: seed 0 -0.36 % of LOAD on average (9 lower, by up to 2.1 %, 2 higher),
# seed 1 -0.26 % (8 lower, by up to 1.9 %, 6 higher, by up to 0.7 %); seed 0 with all of the time
# left -0.47 % (10 lower, 3 higher). Before the skyline search they did better there (-0.53 % and
# -0.44 % on the two seeds) but cost 2.7 % of LOAD on a nearly continuous cut
# (continuous-1500-s14, 1.192 -> 1.219 on both seeds), where the skyline search is the one that gains;
# after it, 1.192 and 1.180 there. With 0.6, the turns after the dives (window repairs and the
# skyline search again) lowered the peak in 1 of 15 cuts of 1,500-5,000 buffers at 20 s, while
# dives from the same plans went on finding lower ones until the end: all of the time left (until
# they stall), and the dives again in place of the window repairs in the turns, gave 1,500-5,000
# buffers, 15 cuts, best at 20 s, 3 seeds: -0.19 %, -0.32 % and -0.10 % of LOAD on average, 27 of 45
# runs lower (by up to 1.3 %), 1 higher (0.15 %)
DIVE_SHARE = 1.0
# on smaller problems the look at LOAD and the skyline search lose the time the dives take: on 6 cuts
# of 250-700 buffers, 3 seeds, with dives from 0 rows: 6 runs lower, 3 higher, 9 level, mean -0.09 %
DIVE_MIN_ROWS = LARGE_ROWS
# ... but there they take the local search's turns (between the skyline search's restarts), where
# the skyline search runs. Traced in best at 20 s on 7 cuts of 250-800 buffers, the local search's
# turns lowered the peak in 3 of 63 (all on tall-64-400-s51, in its last 3 s), the dives in those
# turns in 6 of 105 (their turns are shorter: they stop once they stall). On those 7 cuts
# (pinwheel-350-s0, guillotine-700-s0, pinwheel-550-s1, long-tall-250-s2 and the tall set's three
# under 1,000), against the local search: seed 0, mean 1.0730 -> 1.0638 x LOAD, 5 lower
# (long-tall-250-s2 to LOAD, tall-256-700-s53 1.1413 -> 1.1256), none higher; seed 1, 1.0554 ->
# 1.0533, 4 lower, 1 higher (1.0390 -> 1.0401). Random draws of 200-1,000 buffers (seeds 800-811 and
# 820-831), seed 0: 21 of 24 level (19 at LOAD both ways), random829 1.1305 -> 1.1175, random831
# 1.0493 -> 1.0360, random823 1.0800 -> 1.1000 (a rerun without the change: 1.1000; 1.1000 both ways
# on seeds 1 and 2). exact at 60 s on the four of them it leaves above LOAD: random829 1.1264 ->
# 1.1140, the others level. The dives' turn before the first restart, and dives on a stalled skyline
# thread (IDLE_DIVES), stay on larger problems: with the latter on small ones too, pinwheel-350-s0
# went 1.0533 -> 1.0667 and long-tall-250-s2 lost LOAD
SMALL_DIVE_TURNS = True
SKYLINE_AGAIN_MIN_S = 0.5
# every other one of those restarts searches the problem with time reversed (the same plans: the dives
# fill from the other end of time and reach other plans). best at 20 s, 16 + 8 rectangle cuts of
# 250-5,000 buffers, one at a time: lower on 7, higher on 3, level on 14; means 1.0688 -> 1.0679 and
# 1.0959 -> 1.0927 x LOAD. (Rounds taking turns between both directions in the first search as well
# were no better: 1.0688 -> 1.0689, 5 lower and 5 higher.)
REVERSE_AGAIN = True
# skyline searches run side by side in improve_plan, each on its own thread (the kernel releases the
# GIL); None: as many as the canonical search would use (dsa.strategies._canonical_search.threads).
# Before, one ran and the second of two cores idled through most of a call. best at 20 s, 10 rectangle
# cuts of 550-5,001 buffers (omnimalloc's pinwheel tilings among them), 2 against 1: lower on 5 (by
# 0.1-2.1 % of LOAD), higher on 1 (0.8 %), level on 4; mean 1.1247 -> 1.1198 x LOAD
SKYLINE_THREADS: int | None = None
# where random dives run (more than DIVE_MIN_ROWS movable rows), a skyline search that stalls while
# another of its turn still runs gives its thread to random dives (one thread, from the turn's
# incumbent) until the last search of the turn ends, rather than wait. Traces of best at 20 s on cuts
# of 3,000-5,000 buffers had 7-9 of the 26 thread-seconds of the skyline turns waiting so (9.2 -> 1.7
# on fine-5000-s3). 15 cuts of 1,500-5,000 buffers, 3 seeds: 8 of 45 runs lower, 3 higher, -0.28 % of
# LOAD on average (-0.02 % without continuous-1500-s14, whose seed-2 run fell 1.151 -> 1.033)
IDLE_DIVES = True
# elsewhere (smaller problems, or where the dives cannot lower the peak) such a thread searches again
# with the skyline search, from its own plan (the others' are not known until they end) with a new
# seed (every other time with time reversed), until the last search of the turn ends. On 7 cuts of
# 250-800 buffers and random829 and random831 (767 and 750 buffers), best at 20 s had 0.1-7.3 of the
# 21 thread-seconds of the skyline turns waiting so. Against waiting, 2 seeds: mean -0.16 % of LOAD,
# 8 of 18 runs lower (pinwheel-550-s1 1.0638 -> 1.0532 and long-tall-250-s2 1.0160 -> 1.0000 on seed
# 0, pinwheel-350-s0 1.0667 -> 1.0533 on seed 1, the others by less than 0.3 %), 5 higher
# (pinwheel-350-s0 1.0533 -> 1.0667 on seed 0, the others by less than 0.2 %), 5 level
IDLE_SKYLINE = True


def skyline_width() -> int:
    """How many skyline searches :func:`improve_plan` runs side by side.

    Returns
    -------
    int
        ``SKYLINE_THREADS``, or when it is None the threads the canonical search would use
        (:func:`dsa.strategies._canonical_search.threads`: the cores this process may use, at most 4,
        capped by :func:`dsa.budget.thread_limit`); never more than those, at least 1.
    """
    from dsa.strategies._canonical_search import threads

    return threads() if SKYLINE_THREADS is None else max(1, min(int(SKYLINE_THREADS), threads()))


def _movable(problem) -> int:
    """The rows a search places: neither fixed nor of size 0."""
    return int(np.count_nonzero(problem.is_movable))


def skyline_runs(problem, seconds: float) -> bool:
    """Whether :func:`improve_plan` would run the skyline search with ``seconds`` left.

    Parameters
    ----------
    problem : Problem
    seconds : float
        The time left.

    Returns
    -------
    bool
        True on problems without fixed offsets once the search's kernel is compiled (in this process
        or in numba's cache), or with at least ``SKYLINE_COLD_MIN_S`` seconds left.
    """
    from dsa.strategies._skyline import ready, supported

    return SKYLINE_SHARE > 0 and supported(problem) and (seconds >= SKYLINE_COLD_MIN_S or ready())


def bound_look(problem, offsets, target, budget, seed, stats=None, phases=None):
    """Restarted skyline dives at ``target`` (the lower bound) for ``BOUND_LOOK_SHARE`` of the time
    left (:func:`dsa.strategies._skyline.bound_look`): a plan there (returned; None otherwise) is
    optimal. Only under a deadline with at least ``BOUND_LOOK_MIN_S`` seconds left, where the skyline
    search runs (:func:`skyline_runs`); with less left, only the layers below run (for
    ``LAYERS_SHORT_SHARE`` of the time left on problems of at most ``BOUND_LOOK_MAX_ROWS`` movable
    rows). When a busy period above ``target`` has more than
    ``BOUND_LOOK_MAX_ROWS`` rows, the look gets ``BOUND_LOOK_LARGE_SHARE`` of the time left instead,
    and none on problems of more than ``BOUND_LOOK_LARGE_MAX_ROWS`` movable rows (the chance that
    such dives complete a plan at the bound falls steeply with the rows on most problems, so the time
    goes to the improvement phase; on guillotine cuts on a fine grid the first dives plan there at
    once, at any size). Past the time
    and the skyline's conditions, ``stats`` (a dict) gets ``bound_look`` (whether a plan at ``target``
    was found) and ``bound_look_s`` (seconds spent).

    Before that look, on problems of more than ``LAYERS_MIN_ROWS`` (and at most
    ``BOUND_LOOK_LARGE_MAX_ROWS``) movable rows whose busy periods above ``target`` have ``target``
    bytes alive at every instant (a plan there tiles them), those periods are cut into layers, their
    buffers merged where a tiling allows, and planned apart by :func:`dsa.strategies._layers.plan`,
    for up to ``LAYERS_SHARE`` of the time left (``LAYERS_BRIEF_SHARE`` with less than
    ``BOUND_LOOK_MIN_S`` left; on problems of at most ``BOUND_LOOK_MAX_ROWS``
    movable rows, ``LAYERS_SMALL_SHARE`` of the look's share, the look at the whole then getting what
    they leave of that share; SciPy's import, where there is a tiling to cut and the process has not
    imported it yet, is not counted in either share). With ``LAYERS_PARTIAL``, where some leaves are
    not planned within their bands, that gives a plan above ``target`` but below ``offsets``' peak
    (those leaves searched apart first, for a share of the call's time left, where they hold few of
    the buffers: ``_layers.REPAIR_SHARE``): the look at the whole starts from it, and it is returned
    if the look finds nothing (the caller tells the two apart by the peak). ``stats`` also gets ``layer_plan``
    (whether the layers gave the plan at ``target``), ``layer_partial_peak`` (the peak of such a
    lower plan) and the counts of :func:`dsa.strategies._layers.plan` (``layers``,
    ``layer_programs``, ``layer_s``, ``layer_repaired``, ...). ``phases`` (a
    :class:`dsa.strategies._phases.Phases`, optional) records the layers and the look at the whole as
    the phases ``"layers"`` and ``"look"``."""
    from dsa.strategies import _skyline
    from dsa.strategies._phases import record

    left = budget.remaining()
    if budget.deadline is None or not skyline_runs(problem, left):
        return None
    if plan_peak(problem, offsets) <= target:
        return None
    movable = _movable(problem)
    layers = LAYERS_SHARE > 0 and LAYERS_MIN_ROWS < movable <= BOUND_LOOK_LARGE_MAX_ROWS
    whole = left >= BOUND_LOOK_MIN_S      # (the look at the whole)
    if not (layers or whole):
        return None
    began = time.perf_counter()
    total = left
    imported = 0.0                        # (seconds SciPy's import took here, out of the shares)
    out = lower = None
    if layers:
        # (layers and merged buffers plan tilings that the look at the whole does not; nothing runs
        # where there is no tiling to cut)
        from dsa.strategies import _layers

        if _layers.tiles(problem, offsets, target):
            # (SciPy's import, once per process and only where there is a tiling to cut, is not
            # counted in the looks' shares: about 0.3 s, all of the layers' share at short limits)
            t = time.perf_counter()
            _layers.available()
            imported = time.perf_counter() - t
            left = budget.remaining()
            # (on problems of at most BOUND_LOOK_MAX_ROWS rows the look at the whole has its full
            # share: the layers take part of that share, not time of their own; all of it where the
            # look at the whole does not run)
            share = (LAYERS_SHARE if whole else LAYERS_BRIEF_SHARE) if movable > BOUND_LOOK_MAX_ROWS else (
                LAYERS_SMALL_SHARE * BOUND_LOOK_SHARE if whole else LAYERS_SHORT_SHARE)
            with record(phases, "layers"):
                out = _layers.plan(problem, offsets, target, time.perf_counter() + share * left, seed=seed,
                                   stats=stats, partial=LAYERS_PARTIAL, repair_until=budget.deadline)
        peak = None if out is None else int(plan_peak(problem, out))
        if peak is not None and peak > target:
            lower, out = out, None        # (some leaves above their bands: a lower plan, not the bound)
            if stats is not None:
                stats["layer_partial_peak"] = peak
        if stats is not None:
            stats["layer_plan"] = out is not None
        left = budget.remaining()
    if out is None and left > 0 and whole:
        now = time.perf_counter()
        large = now + BOUND_LOOK_LARGE_SHARE * left if movable <= BOUND_LOOK_LARGE_MAX_ROWS else None
        until = now + BOUND_LOOK_SHARE * left
        if movable <= BOUND_LOOK_MAX_ROWS:
            until = max(now, began + imported + BOUND_LOOK_SHARE * total)   # (what the layers left of it)
        with record(phases, "look"):
            out = _skyline.bound_look(problem, offsets if lower is None else lower, target, until, seed=seed,
                                      max_rows=BOUND_LOOK_MAX_ROWS, large_deadline=large)
    if stats is not None:
        stats["bound_look"], stats["bound_look_s"] = out is not None, time.perf_counter() - began
    return lower if out is None else out


def improve_plan(problem, offsets, target, budget, seed, *, t0=None, log=None, search=None, phases=None):
    """Run the local search over greedy orders until the budget ends or the plan reaches ``target``.

    Under a deadline, on problems without fixed offsets, the skyline search of
    :mod:`dsa.strategies._skyline` runs first, for ``SKYLINE_SHARE`` of the time left
    (``SMALL_SKYLINE_SHARE`` on problems of at most ``DIVE_MIN_ROWS`` movable rows, where the random
    dives below take the turns after it; with an empty numba cache, only when at least
    ``SKYLINE_COLD_MIN_S`` seconds are left: its kernel takes about 3 s to compile; ``dsa warmup``
    compiles it). Each of its turns runs :func:`skyline_width`
    searches side by side on threads (the kernel releases the GIL), from the same incumbent, each
    with a seed of its own, every other one with time reversed; the lowest plan is kept, and once one
    reaches ``target`` the others stop at their next round. Then turns alternate until the deadline:

    - even turns: the local search over greedy orders
      (:func:`dsa.strategies._local_search.search_orders`; its first run with ``seed``, restarts from
      the incumbent with a seed derived from ``seed`` and the restart's number and a window of
      another size, ``RESTART_WINDOWS``), or, on problems of more than 1,000 movable rows, a
      large-neighbourhood search whose repair step is the canonical search
      (:func:`dsa.strategies._local_search.repair_windows`, ``REPAIR_SHARE`` of the time left);
      where the skyline search ran, the random dives below take these turns instead, on problems
      of any size (on those of at most ``DIVE_MIN_ROWS`` movable rows, with ``SMALL_DIVE_TURNS``),
      while they can lower the peak (no busy period at it is too large for them);
    - odd turns, where the skyline search ran: the skyline search again, from the incumbent with a
      new seed (every other time with time reversed, ``REVERSE_AGAIN``), while
      ``SKYLINE_AGAIN_MIN_S`` is left, and the even turns between two of them get
      ``LOCAL_SHARE`` of the time left; without the skyline search (or with less than
      ``SKYLINE_AGAIN_MIN_S`` left), the local search on problems of up to 1,000 movable rows,
      window repairs on larger ones.

    On problems of more than ``DIVE_MIN_ROWS`` movable rows, a skyline search that stalls while
    another of its turn still runs gives its thread to the random dives below (one thread, from the
    turn's incumbent, until the last search of the turn ends; ``IDLE_DIVES``); elsewhere (or once the
    dives cannot lower the peak) it searches again, from its own plan with a new seed, until then
    (``IDLE_SKYLINE``). The lowest plan of the turn is kept.

    On problems of more than ``DIVE_MIN_ROWS`` (1,000) movable rows, under a deadline, canonical
    dives under randomly perturbed preorders
    (:func:`dsa.strategies._canonical_search.random_dives`) run after the first skyline search (or
    first, where it does not run) and before the turns, for ``DIVE_SHARE`` of the time left; they
    stop early once they stall, and run again in the even turns (``stats["dives"]``,
    ``stats["dives_planned"]``, summed over their runs; on smaller problems they run in those turns
    only). Once a turn of theirs cannot hold a single
    dive (near the deadline, or where a dive of the period at the peak takes longer than the turn),
    they get no more turns (``stats["dives_short"]``): the skyline search takes every turn while
    ``SKYLINE_AGAIN_MIN_S`` is left, the window repairs the time after that.

    So the budget is spent improving. Without a deadline
    (``budget.deadline`` None) the local search runs once, as ``search_orders`` does.

    Parameters
    ----------
    problem : Problem
    offsets : array of int
        A valid plan; the result is never worse.
    target : int
        A peak that ends the search (the proven lower bound).
    budget : dsa.budget.Budget
    seed : int
    t0 : float, optional
        ``time.perf_counter()`` at the start of the call: improvement times are counted from it.
    log : callable, optional
        Called as ``log(seconds, peak)`` at each lower peak.
    search : dsa.strategies._canonical_search.CanonicalSearch, optional
        The problem already cut into busy periods (the caller's canonical search), for the random
        dives; default: cut here, once, if they run.
    phases : dsa.strategies._phases.Phases, optional
        Records each turn as a phase: ``"skyline"``, ``"dives"``, ``"local"`` or ``"repair"``.

    Returns
    -------
    (offsets, stats)
        ``stats``: ``local_iterations``, ``local_s``, ``local_restarts``; when the skyline search
        ran, ``skyline_probes``, ``skyline_nodes``, ``skyline_restarts``, ``skyline_s`` (seconds of
        its turns), ``skyline_idle_s`` (seconds its threads waited, summed over threads: each search
        stops at its own stall, and where neither random dives nor a new search take its thread,
        it then waits for the slowest of its turn; ``skyline_nodes`` and ``skyline_probes`` count
        those new searches too), ``skyline_bottom_share`` (the largest share of a busy period's
        bytes x time that a climb covered with no waste, see
        :func:`dsa.strategies._skyline.skyline_search`) and ``skyline_flat`` (plans its flattening
        re-packs took at the same peak); where random dives ran (on small
        problems too, in the turns), ``dives``, ``dives_planned`` (random dives run, and those that
        lowered a busy period, the skyline turns' included), ``dives_s`` (seconds of their own
        runs), ``dives_short`` (True once a turn of theirs could not hold a dive and they were left
        out of the later turns); on large problems ``repair_windows`` (windows tried) and
        ``repaired`` (windows re-planned below the peak), where those ran; and
        ``improvements`` (a list of ``(seconds since t0, peak)``).
    """
    from dsa.strategies._local_search import repair_windows, search_orders
    from dsa.strategies._phases import record
    from dsa.strategies._skyline import skyline_search
    from dsa.strategies._skyline import supported as skyline_supported
    from dsa.strategies._skyline import warm as skyline_warm

    start = time.perf_counter()
    t0 = start if t0 is None else t0
    out = np.asarray(offsets, dtype=np.int64)
    peak = plan_peak(problem, out)
    stats = {"local_iterations": 0, "local_restarts": 0, "improvements": []}
    state = {"peak": peak}

    def progress(seconds, new_peak):
        if new_peak < state["peak"]:  # (as the search finds it: the log shows the incumbent falling)
            state["peak"] = new_peak
            stats["improvements"].append((began - t0 + seconds, new_peak))
            if log is not None:
                log(began - t0 + seconds, new_peak)

    # on large problems (the local search works a window at a time there, and the canonical search
    # cannot take a whole busy period) the repair of time windows by the canonical search comes first,
    # local-search runs when it stops before the deadline
    movable = _movable(problem)
    large = budget.deadline is not None and movable > LARGE_ROWS
    skyline = budget.deadline is not None and peak > target and skyline_runs(problem, budget.remaining())
    if budget.deadline is not None and peak > target and not skyline and skyline_supported(problem):
        stats["skyline"] = "skipped: its kernel is not compiled yet (run dsa warmup)"

    lock = threading.Lock()

    def shared(seconds, new_peak):
        # (searches on several threads report to one log, each at the time it reports: under the lock
        # those times only grow, where each search's own clock starts a little apart)
        with lock:
            progress(time.perf_counter() - began, new_peak)

    # canonical dives under perturbed preorders (while none has shown that they cannot lower the
    # peak: dives["on"]): in the turns between the skyline search's restarts, and on large problems a
    # turn of them before those restarts and on stalled skyline threads
    big = movable > DIVE_MIN_ROWS
    dives = {"on": budget.deadline is not None and (big or SMALL_DIVE_TURNS) and DIVE_SHARE > 0,
             "search": search, "short": False}

    cutting = threading.Lock()

    def dive_search():
        from dsa.strategies._canonical_search import CanonicalSearch

        with cutting:  # (the problem cut into busy periods, once: 10-15 ms at 5,000-10,000 rows)
            if dives["search"] is None:
                dives["search"] = CanonicalSearch(problem, deadline=budget.deadline)
            return dives["search"]

    def dive_run(limit, key, report, stop=None, turn=False):
        # random dives from the incumbent for ``limit`` seconds, seeded by ``key``, until ``stop``
        # (the dives of improve_plan's turns and those on a stalled skyline search's thread): counted
        # in stats, and turned off once they show that they cannot lower the peak; their own turns
        # stop once one could not hold a single dive (dives["short"]): those turns only get shorter,
        # and near the deadline such turns returned at once, dozens of them (128 in the last 0.15 s
        # of best at 20 s on a pinwheel cut of 5,000 buffers), each starting a timer thread (a
        # stalled skyline search's thread, whose time can be longer, still takes dives)
        from dsa.strategies._canonical_search import random_dives

        new, info = random_dives(problem, out, time_limit=limit, seed=_derived_seed(seed, key),
                                 progress=report, search=dive_search(), stop=stop)
        with lock:
            stats["dives"] = stats.get("dives", 0) + info["dives"]
            stats["dives_planned"] = stats.get("dives_planned", 0) + info["planned"]
            dives["on"] = dives["on"] and not info["blocked"]
            if turn and info["short"] and info["dives"] == 0:
                dives["short"] = stats["dives_short"] = True
        return new

    def skyline_run(k, reverse=False, share=SKYLINE_SHARE):
        # skyline searches from the incumbent, ``share`` of the time left, side by side on
        # skyline_width() threads: the first with its k-th seed in the direction asked, the others with
        # seeds of their own, every other one with time the other way; the lowest plan is kept. A
        # search that stalls before the others gives its thread to random dives (IDLE_DIVES) or
        # searches again from its own plan (IDLE_SKYLINE)
        limit = budget.remaining() * share
        width = skyline_width()
        running = [width]
        end = time.perf_counter() + limit

        def one(w):
            from dsa.budget import thread_limit

            t = time.perf_counter()
            infos = []  # (one per search this thread ran)

            def search(start, r, seconds, stop):
                # the r-th search on thread w: seeded by k, w and r, every other one the other way
                got, info = skyline_search(problem, start, time_limit=seconds,
                                           seed=_derived_seed(seed, 5000 + k + 100_000 * w + 1_000_000 * r),
                                           progress=shared, reverse=reverse != ((w + r) % 2 == 1), stop=stop)
                infos.append(info)
                return got, info

            new, info = search(out, 0, limit, lambda: state["peak"] <= target)  # (another reached it)
            with lock:
                running[0] -= 1
                others = running[0] > 0
            if IDLE_DIVES and others and dives["on"] and big and info.get("skyline_stalled"):
                with thread_limit(1):
                    got = dive_run(max(0.0, end - time.perf_counter()), 9000 + k + 100_000 * w, shared,
                                   stop=lambda: running[0] == 0 or state["peak"] <= target)
                if plan_peak(problem, got) < plan_peak(problem, new):
                    new = got
            elif IDLE_SKYLINE and others and info.get("skyline_stalled"):
                r = 0  # (the searches again on this thread)
                while (running[0] > 0 and state["peak"] > target
                       and end - time.perf_counter() >= SKYLINE_AGAIN_MIN_S):
                    r += 1
                    got, info = search(new, r, end - time.perf_counter(),
                                       lambda: running[0] == 0 or state["peak"] <= target)
                    if plan_peak(problem, got) < plan_peak(problem, new):
                        new = got
                    if not info.get("skyline_stalled"):
                        break
            return new, infos, time.perf_counter() - t

        if width > 1:
            skyline_warm()  # (once, before the threads: each would load the kernels otherwise)
        t = time.perf_counter()
        with record(phases, "skyline"):
            if width > 1:
                with ThreadPoolExecutor(width) as pool:
                    runs = list(pool.map(one, range(width)))
            else:
                runs = [one(0)]
        wall = time.perf_counter() - t
        stats["skyline_s"] += wall
        for _, infos, took in runs:
            for info in infos:
                stats["skyline_nodes"] += info["skyline_nodes"]
                stats["skyline_probes"] += info["skyline_probes"]
                stats["skyline_bottom_share"] = max(stats["skyline_bottom_share"], info["skyline_bottom_share"])
                stats["skyline_flat"] += info.get("skyline_flat", 0)
            # (each search stops at its own stall; its thread then waits for the slowest)
            stats["skyline_idle_s"] += max(0.0, wall - took)
        return min((new for new, _, _ in runs), key=lambda new: plan_peak(problem, new))

    if skyline:
        # restarted skyline dives below the incumbent (dsa.strategies._skyline) come first
        stats.update(skyline_nodes=0, skyline_probes=0, skyline_restarts=0, skyline_s=0.0, skyline_idle_s=0.0,
                     skyline_bottom_share=0.0, skyline_flat=0)
        began = time.perf_counter()
        # (on small problems a shorter first turn, so that the dives' turns come sooner)
        new = skyline_run(0, share=SKYLINE_SHARE if big or not dives["on"] else SMALL_SKYLINE_SHARE)
        if plan_peak(problem, new) < peak:
            out = new
            peak = state["peak"] = plan_peak(problem, out)

    def dives_turn(k, share):
        # the dives' own turn (dives["on"]): share of the time left
        t = time.perf_counter()
        with record(phases, "dives"):
            new = dive_run(budget.remaining() * share, 7000 + k, progress, turn=True)
        stats["dives_s"] = stats.get("dives_s", 0.0) + time.perf_counter() - t
        return new

    if dives["on"] and big and peak > target and not budget.exhausted:
        # they come next; they stop early when they stall, and the turns below get the rest
        began = time.perf_counter()
        new = dives_turn(0, DIVE_SHARE)
        if plan_peak(problem, new) < peak:
            out = new
            peak = state["peak"] = plan_peak(problem, out)
    k = 0  # local-search runs
    turn = 0
    while peak > target and not budget.exhausted:
        began = time.perf_counter()
        # after the skyline search, odd turns run it again from the incumbent (with a new seed), and
        # every turn once the dives' turns cannot hold a dive (as when those turns returned at once)
        again = skyline and (turn % 2 == 1 or dives["short"])
        if again and budget.remaining() >= SKYLINE_AGAIN_MIN_S:
            stats["skyline_restarts"] += 1
            # every other restart with time reversed (another neighbourhood of the same plan)
            new = skyline_run(turn, reverse=REVERSE_AGAIN and stats["skyline_restarts"] % 2 == 1)
        elif skyline and dives["on"] and not dives["short"] and (turn % 2 == 0 or again):
            new = dives_turn(1 + turn, LOCAL_SHARE)  # (in turns with the skyline search, the dives again)
        elif large and (turn % 2 == 0 or again):
            share = LOCAL_SHARE if skyline else REPAIR_SHARE
            with record(phases, "repair"):
                new, info = repair_windows(problem, out, time_limit=budget.remaining() * share,
                                           seed=_derived_seed(seed, 1000 + turn), progress=progress)
            stats["repair_windows"] = stats.get("repair_windows", 0) + info["windows"]
            stats["repaired"] = stats.get("repaired", 0) + info["repaired"]
        else:
            kw = {} if k == 0 else {"window": RESTART_WINDOWS[k % len(RESTART_WINDOWS)]}
            share = LOCAL_SHARE if skyline and not again else 1.0
            with record(phases, "local"):
                new, info = search_orders(problem, out, time_limit=budget.remaining() * share,
                                          seed=seed if k == 0 else _derived_seed(seed, k), progress=progress,
                                          **kw)
            stats["local_iterations"] += info["iterations"]
            k += 1
        turn += 1
        new_peak = plan_peak(problem, new)
        if new_peak < peak:
            out = new
            progress(time.perf_counter() - began, new_peak)  # (if the search did not)
            peak = state["peak"] = new_peak
        if budget.deadline is None:
            break  # no deadline: one run, which ends by its own stopping rule
    stats["local_restarts"] = max(0, k - 1)
    stats["local_s"] = time.perf_counter() - start
    return out, stats


def _improve(problem, offsets, bound, budget, seed, t0, log=None, phases=None):
    """Phase 2: search for a lower plan until the budget, the bound or a proof ends it.

    0. :func:`bound_look`: restarted skyline dives at the bound, a share of the time left (a small
       one on large busy periods; a plan there ends the phase).
    1. A MiniMalloc-style search over canonical plans (:mod:`dsa.strategies._canonical_search`; Moffitt,
       ASPLOS 2023) probes capacities below the incumbent's peak with node-limited searches whose
       budgets grow round by round; a probe it completes without a plan proves a lower bound. It
       works on busy periods of up to ``_canonical_search.MAX_BUFFERS`` buffers and stops early when the peak
       is set by a larger one. On problems of more than 1,000 rows it gets ``CANONICAL_SHARE`` of
       the time left, on smaller ones ``CANONICAL_SHARE_SMALL`` of it but at least
       ``CANONICAL_MIN_S`` seconds (none on tilings) when the skyline search is to run (else all
       of it).
    2. With time left, :func:`improve_plan`: under a deadline the skyline search of
       :mod:`dsa.strategies._skyline` (restarted bottom-left dives below the incumbent, and re-packs
       of what lies above a random level of it) gets ``SKYLINE_SHARE`` of the time left; on
       problems of more than 1,000 movable rows canonical dives under randomly perturbed preorders
       come next (until they stall, at most ``DIVE_SHARE`` of the time left); then, where the
       skyline search ran, those random dives again, at any size, while they can lower the peak;
       else a local search over greedy orders (:mod:`dsa.strategies._local_search`: squeaky wheel
       moves under late acceptance) on problems of up to 1,000 rows, and on larger ones time
       windows around the peak re-planned by the canonical search; each restarted from the
       incumbent until the time limit, in turns with the skyline search again from the incumbent
       (see :func:`improve_plan`).

    Returns ``(offsets, proven_bound, stats)``; ``stats["improvements"]`` lists ``(seconds since t0,
    peak)`` of each lower plan. ``phases`` (optional) records the phases (see
    :mod:`dsa.strategies._phases`).
    """
    from dsa.strategies._canonical_search import CanonicalSearch
    from dsa.strategies._phases import record

    improvements = []
    start_peak = plan_peak(problem, offsets)

    def progress(event, c, new_peak, new_lo, nodes):
        if event == "plan":
            improvements.append((time.perf_counter() - t0, new_peak))
            if log is not None:
                log(improvements[-1][0], new_peak)

    # restarted skyline dives at the bound first: where they plan there (perfect tilings of a few
    # hundred buffers), they take a fraction of a second, the canonical search far longer
    looked = {}
    look = bound_look(problem, offsets, bound, budget, seed, looked, phases=phases)
    if look is not None:
        peak = plan_peak(problem, look)
        progress("plan", bound, peak, bound, 0)
        if peak <= bound:
            return look, 0, {**looked, "improvements": improvements}
        offsets, start_peak = look, peak   # (lower, from the layers: go on from it)
    movable = _movable(problem)
    left = budget.remaining()
    if budget.deadline is not None:
        if movable > LARGE_ROWS:
            left *= CANONICAL_SHARE
        elif skyline_runs(problem, left):  # (the share left over is the skyline search's)
            from dsa.strategies import _layers

            # (no floor on tilings: see CANONICAL_MIN_S)
            floor = 0.0 if _layers.tiles(problem, offsets, bound) else CANONICAL_MIN_S
            left = max(left * CANONICAL_SHARE_SMALL, min(left, floor))
    # (the random dives of improve_plan use its busy periods too; a period whose preparation the
    # deadline cuts short is not searched)
    with record(phases, "canonical"):
        search = CanonicalSearch(problem, deadline=budget.deadline)
        out, info = search.lower_peak(offsets, time_limit=left, progress=progress)
    proven = int(info["proven_lower_bound"])
    stats = {"nodes": info["nodes"], "search_probes": len(info["probes"]),
             "search_s": info["time"]}
    stats.update(looked)
    if plan_peak(problem, out) > start_peak:  # (never: lower_peak keeps the incumbent)
        out = offsets
    if plan_peak(problem, out) > max(bound, proven) and not budget.exhausted:
        out, info = improve_plan(problem, out, max(bound, proven), budget, seed, t0=t0, log=log,
                                 search=search, phases=phases)
        improvements += info.pop("improvements")
        stats.update(info)
    stats["improvements"] = improvements
    return out, proven, stats


def solve(problem, *, time_limit: float = DEFAULT_TIME_LIMIT, members=None, restarts: int = 0,
          improve: bool = True, seed=None, sweep=None, context=None, verbose: bool = False,
          portfolio_time=None):
    """Plan with every member and keep the lowest peak; then improve it within ``time_limit``.

    Parameters
    ----------
    problem : Problem
    time_limit : float, default 1.0
        Seconds for the whole call. The portfolio runs its members until the limit (at least one,
        so that there is a plan: one greedy pass, which takes up to a second on rectangle cuts of
        50,000 buffers), and the improvement phase gets what remains. A member that cannot be
        stopped once started (a strategy, a callable) starts only while the time left is likely to
        hold it (see ``STRATEGY_WAVES``). Once a plan exists, no member starts that is likely to end
        more than ``portfolio_time`` seconds into the call (by default, only with ``improve``).
    members : list, optional
        The portfolio: greedy members as ``"order/fit"`` strings (``"size/first"``), registered
        strategy names (``"gergov"``), ``(name, options)`` pairs (``("buchsbaum", {"restarts": 4})``:
        the strategy with those options, each one it must take, else ``ValueError``) and callables
        ``f(problem) -> Solution or offsets``. Default: every ordering x both fits, then the cheap
        constructive strategies (``STRATEGY_MEMBERS``, on problems of up to
        ``STRATEGY_MEMBERS_MAX_N`` rows that do not overlap densely).
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
    verbose : bool, default False
        Print the incumbent's peak to stderr each time it falls (seconds since the call began, peak,
        peak / lower bound).
    portfolio_time : float, optional
        Seconds into the call after which the portfolio, once it has a plan, starts no member likely
        to end later (``stats["portfolio_held"]`` says that one was held back), so that the time goes
        to the improvement phase. Default, under a time limit and with ``improve``:
        ``PORTFOLIO_SHARE`` (0.1) of ``time_limit``, at least ``PORTFOLIO_MIN_S`` (1 s), so that on
        problems where each member takes seconds (tens of thousands of buffers) most of the time is
        the search's; otherwise the members run until the time limit.

    Returns
    -------
    Solution
        ``stats["member"]`` names the winning member of the portfolio and ``stats["peaks"]`` maps
        every member that ran to its peak; ``stats["portfolio_peak"]``, ``stats["portfolio_s"]``,
        ``stats["portfolio_wave_s"]`` (the longest wave of greedy members), ``stats["portfolio_held"]``
        (when members were held back, see ``portfolio_time``), ``stats["improved"]`` (bytes
        the improvement phase saved), ``stats["nodes"]`` (of the canonical search),
        ``stats["search_probes"]``, ``stats["search_s"]``, and when the local search ran
        ``stats["local_iterations"]``, ``stats["local_restarts"]``, ``stats["local_s"]`` (and on
        large problems ``stats["dives"]``, ``stats["dives_planned"]``, ``stats["repair_windows"]``,
        ``stats["repaired"]``) describe phase 2.
        ``stats["last_improvement_s"]`` is when (seconds since the call began) the returned plan's
        peak was first reached, ``stats["last_improvement_fraction"]`` the same as a share of
        ``time_limit``, and ``stats["improvements"]`` lists ``(seconds, peak)`` of each lower
        incumbent (first the portfolio's, as its members find them). ``stats["phases"]`` lists
        ``(name, start_s, end_s, cpu_s)`` of each phase in the order they ran (``"portfolio"``, then
        as they run ``"layers"``, ``"look"``, ``"canonical"``, and a turn each of ``"skyline"``,
        ``"dives"``, ``"local"``, ``"repair"``), times in seconds since the call began, ``cpu_s`` the
        process's CPU seconds over the phase (all threads: divided by the phase's length, the cores it
        kept busy; see :mod:`dsa.strategies._phases`). Phase 2 runs until the time
        limit unless it reaches the lower bound. A capacity the search proved infeasible raises
        ``lower_bound`` above LOAD. The result reports that a limit stopped it (status
        ``LIMIT_REACHED`` once finalized) when the time limit cut the portfolio
        (``stats["portfolio_cut"]``) or the improvement phase short of the lower bound.
    """
    if not isinstance(restarts, (int, np.integer)) or isinstance(restarts, bool) or restarts < 0:
        raise ValueError(f"restarts must be a non-negative int, got {restarts!r}")
    portfolio_time = check_seconds(portfolio_time, "portfolio_time")
    t_call = time.perf_counter()
    budget = Budget(time_limit)
    if portfolio_time is None and improve and budget.deadline is not None:
        portfolio_time = portfolio_hold(budget.remaining())
    # (a Budget, made with the call's: kernel loading, which a first call in a process pays, moves both)
    hold = None if portfolio_time is None else Budget.lasting(portfolio_time)
    seed = 0 if seed is None else seed
    context = context if context is not None else Context(problem, sweep=sweep)
    sweep = context.sweep
    if not sweep.dense and not _starts_first(problem):
        # a portfolio runs many greedy passes: build the graph (and use the kernels) once (where the
        # passes by start come first, the portfolio builds it after them, if time is left)
        sweep.overlap
    bound = context.lower_bound
    default_members = members is None
    members = _parse_members(members)

    def log(seconds, peak):
        print(f"best: {seconds:8.3f} s  peak {peak}  ({peak / bound if bound else 1.0:.4f} x bound {bound})",
              file=sys.stderr, flush=True)

    log = log if verbose else None
    improvements = []  # (seconds since the call began, peak) of each lower incumbent

    def found(peak):
        # a member's plan lower than the portfolio's before: logged as found, not when the last
        # member ends (on 5,000 buffers the strategy members take most of a second after it)
        improvements.append((time.perf_counter() - t_call, peak))
        if log is not None:
            log(*improvements[-1])

    t0 = time.perf_counter()
    phases = Phases(t_call)
    with phases("portfolio"):
        phase1 = _portfolio(problem, members, sweep, bound, restarts, seed, budget,
                            STRATEGY_MEMBERS_MAX_N if default_members else None, context=context,
                            progress=found, hold=hold)
    best, best_peak = phase1["best"], phase1["peak"]
    stats = {"member": phase1["winner"], "peaks": phase1["peaks"], "portfolio_peak": best_peak,
             "portfolio_s": time.perf_counter() - t0, "portfolio_wave_s": phase1["wave_max"],
             "improved": 0}
    limited, proven, message = False, 0, ""
    if phase1["held"]:
        stats["portfolio_held"] = True  # (members held back for the improvement phase)
    if phase1["cut"]:
        stats["portfolio_cut"] = True  # the time limit ended the portfolio before all members ran
        limited = True
        message = (f"the time limit ({budget.time_limit:g} s) ended the portfolio at peak {best_peak} "
                   f"(lower bound {bound}; members run: {len(phase1['peaks'])})")
    if improve and best is not None and best_peak > bound:
        if not budget.exhausted:
            offsets, proven, info = _improve(problem, best, bound, budget, seed, t_call, log, phases)
            peak = plan_peak(problem, offsets)
            improvements += [(t, p) for t, p in info.pop("improvements") if p < best_peak]
            if peak < best_peak:
                best, stats["improved"] = offsets, best_peak - peak
            stats.update(info)
            if budget.exhausted and plan_peak(problem, best) > max(bound, proven):
                limited = True
                message = (f"the time limit ({budget.time_limit:g} s) ended the improvement phase at peak "
                           f"{plan_peak(problem, best)}, above the lower bound {max(bound, proven)}")
        elif not limited:
            # the portfolio ran every member but used the whole time: the improvement phase never started
            limited = True
            message = (f"the time limit ({budget.time_limit:g} s) ended the search after the portfolio, at peak "
                       f"{best_peak} (lower bound {bound}): the improvement phase did not run")
    if improvements:
        stats["last_improvement_s"] = improvements[-1][0]
        if budget.time_limit is not None and budget.time_limit > 0:
            stats["last_improvement_fraction"] = min(1.0, improvements[-1][0] / budget.time_limit)
    stats["improvements"] = improvements
    stats["phases"] = phases.rows
    context.offer(best)
    # facts only (the plan, what was proven, whether the time limit cut the work short): dsa.solve's
    # finalize decides the status
    return make_solution(problem, best, strategy="best", stats=stats, lower_bound=proven,
                         limit_reached=limited, message=message)
