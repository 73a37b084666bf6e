"""The canonical search: a MiniMalloc-style search over canonical placements, and what is built on it.

The decision version "is there a plan with peak <= C?" is answered by a node-limited depth-first
search (:func:`dsa._kernels.canonical.canonical_search`), after M. D. Moffitt, "MiniMalloc: A
Lightweight Memory Allocator for Hardware-Accelerated Machine Learning", ASPLOS 2023: buffers are
placed in non-decreasing offset order, each on the floor or directly on top of a buffer it overlaps
in time, with section inference, a dominance rule and dynamic decomposition pruning the tree.

:class:`CanonicalSearch` holds a problem cut into busy periods and runs the searches (prepare /
race / result). :meth:`CanonicalSearch.lower_peak` (and :func:`lower_peak`) use it as an improvement
heuristic: starting from a plan of peak ``U`` it probes
capacities between the lower bound and ``U - 1`` with growing node limits, keeps the best plan found,
and reports which capacities a *complete* search proved infeasible. :func:`random_dives` restarts
short searches one byte below the incumbent's peak, each under a randomly perturbed preorder, on
problems where the fixed preorders stall. numba cannot read the clock, so
the search runs in node-limited calls and the deadline is checked between calls; one call is sized
from the measured node rate so that it ends near the deadline.

Complexity: preparation is O(n log n + sum of spans + sum of degrees) per busy period (a busy period
is a maximal time range in which something is always alive; periods are independent); each search
node costs O(m + S + deg) for a period of ``m`` buffers and ``S`` sections. Busy periods with more
than ``MAX_BUFFERS`` buffers are not searched (their incumbent offsets are kept).
"""
from __future__ import annotations

import math
import os
import time

import numpy as np

from dsa.bounds import lower_bound
from dsa.budget import Budget, max_threads
from dsa.solution import plan_peak
from dsa.sweep import sections

__all__ = ["CanonicalSearch", "lower_peak", "random_dives", "feasible", "warm", "threads"]

# larger busy periods are left as they are. 10,000 rather than 2,000, with SCAN_ROWS: best at 20 s on
# 9 pinwheel tilings of omnimalloc's of 2,001-5,001 buffers 1.2690 -> 1.2630 x LOAD (below supermalloc on
# 9 rather than 5; a straight dive of the search plans there 2-5 % below what the skyline search reached,
# in 0.03-0.2 s), 13 rectangle cuts of 1,000-5,000 buffers 5 lower, 3 higher, 5 level (mean -0.4 % of
# LOAD); exact on 4 of both: 2 lower, 2 level. 20,000 rather than 10,000 (with MAX_DEGREE_SUM below):
# best at 20 s on a nearly continuous cut of 20,000 buffers 1.3517 -> 1.2028 (the search and the
# random dives found the plans, as on 10,000), on coarse cuts of 20,000 slightly higher
# (short-wide-20000-s34 1.0636 -> 1.0671, pinwheel-20000-s36 1.0442 -> 1.0495, the search's time taken
# from the skyline search)
MAX_BUFFERS = 20_000
# bound on the number of (buffer, time-neighbour) pairs of a period (8 bytes each in the lists; a node
# costs O(m + S + degree)). 16,000,000 rather than 2,000,000: nearly continuous cuts have 4.8 M pairs at
# 10,000 buffers and 12.8 M at 20,000, and without the search (and the random dives, which use its
# periods) best at 20 s stayed near its portfolio's plan there: fine-10000-s35 1.3247 -> 1.2125 x LOAD
# (supermalloc 1.2144), fine-10000-s2 1.3069 -> 1.2003, fine-8000-s1 1.2204 -> 1.2190,
# long-tall-5000-s1 1.0335 both; coarse cuts of 10,000 buffers level or slightly higher
# (pinwheel-10000-s32 1.0475 both, guillotine-10000-s31 1.0525 and 1.0550 -> 1.0600, the search's time
# taken from the skyline search). At 20,000 buffers the process peaked at 0.5 GB
MAX_DEGREE_SUM = 16_000_000
# what preparing a period takes per neighbour pair (lists, sections, features: 0.18-0.22 s for 12.8 M
# pairs, 0.05 s for 4.8 M): a period is left unprepared when the deadline would pass first (at 1 s on
# 20,000 buffers of 12.8 M pairs, best returned 0.26 s late in some runs without this)
PREP_S_PER_PAIR = 2e-8
MAX_SPAN_SUM = 4_000_000    # bound on sum over buffers of the sections they span
# static preorders (tie-breaks of the dynamic order), as letters: T = largest section total the
# buffer meets (recomputed from the unplaced sizes for each piece of a decomposition, as MiniMalloc
# does), W = duration (end - start), C = number of sections spanned, A = area (size x duration),
# Z = size; all descending. Measured on MiniMalloc's challenging instances at LOAD (nodes to a plan,
# per busy period): TWA solves A, I, K (15k-68k), TAW alone solves B (207k), TWC E and G (<21k),
# TCA F and H (<2k); no other 3-letter order of T, W, A, C, Z, O, start, end solves B in 100k.
HEURISTICS = ("TAW", "TWA", "TWC", "TCA")
SYMMETRY = True            # identical buffers are placed in rank order
RERANK = 1                 # 0: static ranks; 1: re-rank new pieces (dynamic T); 2: also narrowed groups
BUDGET0 = 1000             # nodes per probe of the bound in the first round (then see GROWTH)
FIRST_LOOK = 100           # nodes per buffer of the largest period for each preorder's first look at
                           # the bound, before any incumbent is made (see first_look)
FIRST_LOOK_TIME = 0.1      # ... and at most this share of the time left
STEP = 0.005               # grid step of the capacities probed, as a fraction of the lower bound
SCAN0 = 1000               # least nodes per probe of the grid walk below the incumbent ...
SCAN_ROWS = 2              # ... and per buffer of the largest period searched (a plan takes a node each:
                           # with fewer, no probe of a period of thousands of buffers could plan)
# the probe budget is multiplied by this after every round that did not lower the peak. A round that
# lowered it keeps its budget: probes cheap enough to plan there are likely to plan below the new peak
# too, and larger ones would be spent on the same capacities. From the portfolio's plan (1.24 x LOAD),
# the search reached MiniMalloc's J at 1014784 after 15.1 s when every round grew the budget (its
# rounds had grown large while the peak was still falling), after 6.4 s with this rule
GROWTH = 3
MISSES = 2                 # the walk of a round stops after this many capacities in a row hit the limit
WALK = 1.0                 # nodes of a round's grid walk (per capacity, over the preorders) / budget
MAX_RUNS = 64              # searches kept for resumption (the oldest are dropped beyond this)
# random_dives: the spread of the perturbation of the duration preorder (log-normal). From best's plans
# at 5 s, 15 s of dives on random605 (3,695 buffers): 0.05 -> 1.1740, 0.02 -> 1.1767, 0.3-1.0 (and
# area or sections as the base order) -> no plan at all below the start
DIVE_NOISE = 0.05
DIVE_NODES = 4             # node limit of a random dive, per buffer of its period
DIVE_STALL_SHARE = 0.25    # the dives stop after this share of their time without a lower peak ...
DIVE_STALL_MIN_S = 1.0     # ... or this many seconds, if more
# a dive's first descent scans the unplaced buffers at every node, so it takes about this many seconds
# times its period's rows squared (4,001 rows: 42 ms per descent, 55 ms with backtracking to 8 nodes
# per row); a dive starts only where the time left holds one (the figure is then measured: 10,000
# rows at 1 s, dives started 0.04 s before the deadline ended 0.2 s after it)
DIVE_ROW2_S = 3e-9
# probes of one capacity with different preorders run this many at a time, in threads (the kernel
# releases the GIL); None: the cores this process may use, at most len(HEURISTICS)
THREADS: int | None = None


def threads() -> int:
    """THREADS (or the cores, at most one per preorder), capped by :func:`dsa.budget.max_threads`."""
    if THREADS is not None:
        return max_threads(max(1, int(THREADS)))
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max_threads(max(1, min(len(HEURISTICS), cores)))


def _past(deadline) -> bool:
    """Whether the ``time.perf_counter()`` deadline (None: none) has passed."""
    return deadline is not None and time.perf_counter() >= deadline


class _Period:
    """One busy period prepared for the kernel (rows with size > 0 only)."""

    __slots__ = ("rows", "sz", "al", "fx", "slo", "shi", "adj_ptr", "adj", "sec_ptr", "sec_buf",
                 "ranks", "keys", "twins", "feats", "ident", "searchable", "late")

    def __init__(self, problem, rows, deadline=None):
        self.rows = rows
        self.ranks = {}
        self.keys = {}
        self.twins = {}
        self.searchable = len(rows) <= MAX_BUFFERS
        self.late = self.searchable and _past(deadline)  # (left unsearchable by the deadline)
        if not self.searchable or self.late:
            self.searchable = False
            return
        st = problem.starts[rows]
        en = problem.ends[rows]
        self.sz = np.ascontiguousarray(problem.sizes[rows], dtype=np.int64)
        self.al = np.ascontiguousarray(problem.alignments[rows], dtype=np.int64)
        self.fx = np.ascontiguousarray(problem.fixed_offsets[rows], dtype=np.int64)
        m = len(rows)
        times, first, last = sections(st, en)
        self.slo = first.astype(np.int64)
        self.shi = (last + 1).astype(np.int64)
        spans = self.shi - self.slo
        self.searchable = int(spans.sum()) <= MAX_SPAN_SUM
        if not self.searchable:
            return
        S = len(times) - 1
        # time-overlap lists (CSR; the search does not depend on their order), counted first in
        # O(m log m): rows in start order that start before a row ends overlap it
        by_start = np.sort(st)
        later = np.searchsorted(by_start, np.sort(en), side="left")
        pairs = 2 * (int(later.sum()) - m * (m + 1) // 2)
        if pairs > MAX_DEGREE_SUM:
            self.searchable = False
            return
        if _past(deadline if deadline is None else deadline - PREP_S_PER_PAIR * pairs):
            self.searchable = False
            self.late = True
            return
        from dsa._kernels.time_overlap import overlap_csr

        ptr, adj = overlap_csr(st, en)  # O(m log m + pairs)
        self.adj_ptr = ptr.astype(np.int64)
        self.adj = adj.astype(np.int64)
        # buffers alive in each section (CSR, grouped by section)
        owner = np.repeat(np.arange(m, dtype=np.int64), spans)
        sec = np.arange(len(owner), dtype=np.int64) - np.repeat(np.cumsum(spans) - spans, spans) \
            + np.repeat(self.slo, spans)
        order = np.argsort(sec, kind="stable")
        self.sec_buf = owner[order]
        self.sec_ptr = np.zeros(S + 1, np.int64)
        np.cumsum(np.bincount(sec, minlength=S), out=self.sec_ptr[1:])
        # static features for the preorders
        total = np.zeros(S, np.int64)
        np.add.at(total, sec, self.sz[owner])
        tbuf = np.zeros(m, np.int64)
        np.maximum.at(tbuf, owner, total[sec])
        width = (en - st).astype(np.int64)
        feats = {"T": tbuf, "W": width, "C": spans.astype(np.int64), "A": self.sz * width,
                 "Z": self.sz}
        # identical free buffers (same sections, size and alignment) are interchangeable
        self.feats = feats
        self.ident = np.lexsort((self.al, self.sz, self.shi, self.slo))

    def _order(self, h):
        """Rank, key rows and twins of the static preorder ``h`` (computed once)."""
        if h not in self.ranks:
            m = len(self.rows)
            keys = [np.arange(m)] + [-self.feats[c] for c in reversed(h)]
            order = np.lexsort(keys)
            rank = np.empty(m, np.int64)
            rank[order] = np.arange(m, dtype=np.int64)
            self.ranks[h] = rank
            self.keys[h] = np.ascontiguousarray(np.stack([self.feats[c] for c in h]), dtype=np.int64)
            self.twins[h] = _twins(self.ident, rank, self.fx < 0, self.slo, self.shi, self.sz, self.al)
        return self.ranks[h], self.keys[h], self.twins[h]

    def search(self, cap, node_limit, heuristic, runs=None, stop=None):
        """Search capacity ``cap`` with the preorder ``heuristic`` for at most ``node_limit`` nodes.

        With a dict ``runs``, the search is kept there under ``(cap, heuristic, id(self))`` and a
        later call with the same key goes on where this one stopped instead of starting over (a
        node-limited depth-first search started again repeats its whole prefix). ``stop``, an
        int64 array of length 1, lets another thread end the call early (``stop[0] = 1``).
        Returns ``(status, nodes, offsets)``.
        """
        from dsa._kernels.canonical import new_state

        rank, keys, twins = self._order(heuristic)
        key = (int(cap), heuristic, id(self))
        run = runs.pop(key, None) if runs is not None else None  # put back last: recently used
        if run is not None:
            runs[key] = run
        else:
            state = new_state(rank, len(self.sec_ptr) - 1, len(self.adj), RERANK)
            run = (state, np.zeros(len(self.rows), np.int64))
            if runs is not None:
                runs[key] = run
        state, out = run
        return self._search(cap, node_limit, keys, heuristic.find("T"), twins, state, out, stop)

    def dive(self, cap, node_limit, key, stop=None):
        """Search capacity ``cap`` for at most ``node_limit`` nodes with the preorder that ranks the
        buffers by ``key`` (an array of floats, one per row of the period; larger first, ties by
        row), from scratch and not kept, until ``stop[0]`` (a one-element int64 array, optional) is
        set. Returns ``(status, nodes, offsets)`` as :meth:`search`."""
        from dsa._kernels.canonical import new_state

        m = len(self.rows)
        rank = np.empty(m, np.int64)
        rank[np.lexsort((np.arange(m), -np.asarray(key, dtype=np.float64)))] = np.arange(m)
        keys = np.ascontiguousarray((m - rank)[None, :], dtype=np.int64)  # (the same order, as keys)
        twins = _twins(self.ident, rank, self.fx < 0, self.slo, self.shi, self.sz, self.al)
        state = new_state(rank, len(self.sec_ptr) - 1, len(self.adj), RERANK)
        return self._search(cap, node_limit, keys, -1, twins, state, np.zeros(m, np.int64), stop)

    def _search(self, cap, node_limit, keys, tpos, twins, state, out, stop):
        """One call of the search kernel (see :meth:`search`)."""
        from dsa._kernels.canonical import canonical_search

        if not SYMMETRY:
            twins = np.full(len(self.rows), -1, np.int64)
        if stop is None:
            stop = np.zeros(1, np.int64)
        status, nodes = canonical_search(self.sz, self.al, self.fx, self.slo, self.shi,
                                         self.adj_ptr, self.adj, self.sec_ptr, self.sec_buf,
                                         int(cap), int(node_limit), out, keys,
                                         int(tpos), twins, RERANK, state, stop)
        return int(status), int(nodes), out


_warm = []


def warm() -> None:
    """Load the search kernel now (compile it, or read it from numba's cache: a one-off cost of up to
    several seconds per process) by a search of one buffer, with the argument types of every search.

    Callers do this before their clock starts: a search raced in threads is stopped at its
    deadline, and one stopped while the kernel compiles would have spent its whole time on that.
    """
    if not _warm:
        from dsa.problem import Problem

        CanonicalSearch(Problem([0], [1], [1])).periods[0].search(1, 1, HEURISTICS[0])
        _warm.append(True)


def _twins(ident, rank, free, slo, shi, sz, al):
    """For each free buffer, the identical free buffer of next lower rank (-1: none).

    ``ident`` orders the buffers so that identical ones (same sections, size and alignment) are
    adjacent; O(m log m), in numpy (random dives rank every dive afresh)."""
    m = len(rank)
    twin = np.full(m, -1, np.int64)
    if m < 2:
        return twin
    a = np.asarray(ident)
    new = np.ones(m, bool)  # where a group of identical buffers starts, in ``ident`` order
    new[1:] = ((slo[a[1:]] != slo[a[:-1]]) | (shi[a[1:]] != shi[a[:-1]]) | (sz[a[1:]] != sz[a[:-1]])
               | (al[a[1:]] != al[a[:-1]]))
    group = np.empty(m, np.int64)
    group[a] = np.cumsum(new)
    rows = np.flatnonzero(free)
    order = rows[np.lexsort((rank[rows], group[rows]))]  # free buffers by group, then rank
    same = group[order[1:]] == group[order[:-1]]
    twin[order[1:][same]] = order[:-1][same]
    return twin


class CanonicalSearch:
    """A problem cut into busy periods for the canonical search, and the searches run on it.

    The interface is prepare / race / result: the constructor cuts the problem into busy periods
    (its zero-size rows set aside); :meth:`prepare` starts the threads that the races of one phase
    run on (a context manager: leaving it stops them); :meth:`race` probes one capacity with
    several preorders side by side and returns the plans that do not depend on timing;
    :meth:`result` writes such plans into a plan. :meth:`first_look` and :meth:`lower_peak` are the
    two searches built on them. Searches stopped at their node limit are kept in :attr:`runs` and
    resumed by the next race of the same capacity (the first look's searches of the bound by the
    probes of the bound that follow).

    Parameters
    ----------
    problem : dsa.Problem
    deadline : float, optional
        A ``time.perf_counter()`` time: the busy periods not prepared by then (their time-overlap
        lists and sections: 10-15 ms at 5,000-10,000 rows of coarse cuts, 0.2 s for 12.8 M
        neighbour pairs), or whose preparation would end after it (``PREP_S_PER_PAIR`` a pair), are
        left unsearchable, so that a caller out of time does not overrun it. Default: none.

    Attributes
    ----------
    periods : list
        The busy periods of the rows with size > 0, in time order; each has ``rows`` (ascending row
        indices) and ``searchable`` (False when it is too large to search: more than
        ``MAX_BUFFERS`` buffers, ``MAX_SPAN_SUM`` section spans or ``MAX_DEGREE_SUM`` neighbours;
        or when ``deadline`` passed before it was prepared).
    cut_short : bool
        Whether ``deadline`` left a period unsearchable.
    base : numpy.ndarray
        Offsets of the zero-size rows (0, or their fixed offset) and a starting point.
    runs : dict
        Searches kept for resumption, keyed by ``(capacity, preorder, period)``.
    """

    def __init__(self, problem, *, deadline=None):
        self.problem = problem
        n = problem.n
        sizes = problem.sizes
        live = np.flatnonzero(sizes > 0)
        self.periods = []
        if len(live):
            order = live[np.argsort(problem.starts[live], kind="stable")]
            st = problem.starts[order]
            run_end = np.maximum.accumulate(problem.ends[order])
            new = np.ones(len(order), bool)
            new[1:] = st[1:] >= run_end[:-1]
            bounds = np.flatnonzero(new).tolist() + [len(order)]
            for a, b in zip(bounds[:-1], bounds[1:]):
                self.periods.append(_Period(problem, np.sort(order[a:b]), deadline))
        self.cut_short = any(per.late for per in self.periods)
        base = np.zeros(n, np.int64)
        fixed = problem.fixed_offsets != -1
        base[fixed] = problem.fixed_offsets[fixed]
        self.base = base  # offsets of zero-size rows (and a starting point)
        self.runs = {}
        self.width = 1
        self._pool = None
        self._rate = [2e5]  # nodes per second, measured by the searches of the current phase

    def stuck(self, offsets) -> int:
        """The highest peak in ``offsets`` of a period too large to search (0: none). No capacity
        below it can be reached or disproved by the search."""
        return max((plan_peak(self.problem, offsets, per.rows) for per in self.periods
                    if not per.searchable), default=0)

    def prepare(self, periods=None, *, width=None, heuristics=HEURISTICS):
        """Start a phase of races: ``width`` searches side by side (default :func:`threads`) on a
        thread pool, and a fresh node rate. The ranks of the preorders ``heuristics`` of
        ``periods`` (default: the searchable ones) are computed first, since the threads read them
        from a cache that is not locked. Returns the search itself, a context manager that stops the
        threads on leaving."""
        self.close()
        self.width = threads() if width is None else width
        if periods is None:
            periods = [per for per in self.periods if per.searchable]
        self._pool = _pool(self.width, periods, heuristics)
        self._rate = [2e5]
        return self

    def close(self) -> None:
        """Stop the threads started by :meth:`prepare` (waiting for them)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def race(self, cap, incumbent, share, heuristics=HEURISTICS, *, deadline=None, resume=True,
             cancel=True, final=True) -> list:
        """Probe capacity ``cap`` with each preorder of ``heuristics``, ``share`` nodes each, for
        every period whose plan in ``incumbent`` exceeds ``cap``: side by side on the threads of
        :meth:`prepare`, else one after the other until one plans or proves.

        With ``resume``, searches go on from where earlier ones of the same capacity stopped (and
        are kept in :attr:`runs`). With ``cancel``, a proof ends the other searches, and when
        ``final`` (a plan at ``cap`` settles the question) a plan ends those of later preorders:
        the first preorder that plans within its share wins whichever thread finishes first. Every
        search is stopped at ``deadline``.

        Returns
        -------
        list of (outcome, plans, nodes)
            One per preorder that ran, in preorder order: ``outcome`` is ``"found"``,
            ``"infeasible"`` (proven) or ``"limit"``; ``plans`` maps period index to local offsets
            and holds only plans that do not depend on timing (see :func:`_usable`).
        """
        results = _race(self, self.problem, incumbent, cap, share, heuristics, deadline, self._rate,
                        self.runs if resume else None, self._pool, cancel, final)
        return _usable(results)

    def result(self, offsets, plans):
        """Write the periods' ``plans`` (from :meth:`race`) into ``offsets`` in place; return it."""
        for pi, out in plans.items():
            offsets[self.periods[pi].rows] = out
        return offsets

    def first_look(self, *, deadline=None, node_limit=None):
        """Search the lower bound before any incumbent is made: a plan there is optimal.

        Every static preorder gets ``FIRST_LOOK`` nodes per buffer of the largest period, raced
        (the first preorder that plans within its share wins, so the plan does not depend on
        timing). On MiniMalloc's benchmark the optimum is usually the bound and one of the
        preorders reaches it within a few nodes per buffer, sooner than the portfolio's costlier
        members (``gergov``, ``buchsbaum``, ``mincost_flow``) make an incumbent. When the look
        fails, its searches are kept in :attr:`runs`, and the probes of the bound that follow
        (:meth:`lower_peak`'s; the rounds of ``exact``'s decision mode when the capacity is the
        bound) go on with them: nothing is searched twice.

        Returns
        -------
        offsets : numpy.ndarray or None
            A plan whose peak is the bound, or None.
        nodes : int
            Nodes explored.
        searches : int
            Node-limited searches run: one per preorder (fewer on one thread, where the first plan
            or proof ends the look).
        """
        problem = self.problem
        if not self.periods or not all(per.searchable for per in self.periods):
            return None, 0, 0
        lb = lower_bound(problem)  # a plan there is optimal; below it none exists
        share = FIRST_LOOK * max(len(per.rows) for per in self.periods)
        if node_limit is not None:
            share = min(share, int(node_limit) // len(HEURISTICS))
        if share <= 0 or (deadline is not None and time.perf_counter() >= deadline):
            return None, 0, 0
        unplanned = np.full(problem.n, lb + 1, np.int64)  # every period is above the bound
        with self.prepare(self.periods):
            results = self.race(lb, unplanned, share, HEURISTICS, deadline=deadline,
                                cancel=node_limit is None, final=True)
        nodes = sum(r[2] for r in results)
        offsets = self.base.copy()
        planned = set()
        for _, plans, _ in results:
            for pi, out in plans.items():
                if pi not in planned:
                    offsets[self.periods[pi].rows] = out
                    planned.add(pi)
        if len(planned) < len(self.periods):
            return None, nodes, len(results)
        return offsets, nodes, len(results)

    def lower_peak(self, offsets, *, time_limit: float, node_limit: int | None = None, progress=None,
                   heuristics=HEURISTICS):
        """Lower the peak of a plan by probing smaller capacities with a node-limited canonical search.

        Capacities are probed in rounds whose node budget grows ``GROWTH``-fold after each round
        that did not lower the peak (one that did keeps its budget). A round first probes
        the proven lower bound with every static preorder (a plan there is optimal: the common case on
        real traces and on MiniMalloc's benchmark; each round's searches of the bound go on where the
        last round's stopped, and the first plan or proof there ends the others), then walks a grid of
        capacities (``STEP`` x the bound apart) from one below the best peak down towards the bound,
        every preorder at each, with per-probe budgets that add up to about ``WALK`` x the budget (at
        least ``SCAN0`` each). A plan found lowers the peak (the walk goes on below it); a search that
        completes without a plan proves a lower bound; the walk of a round ends after ``MISSES``
        capacities in a row that no preorder planned within its budget (the next round, with larger
        budgets, starts again from the top). Which capacities are cheap to plan is erratic, so many
        small probes beat a few large ones. The probes of the bound go on with the searches that
        :meth:`first_look` (or an earlier call) left in :attr:`runs`.

        Parameters
        ----------
        offsets : array_like of int
            A valid plan (the incumbent); it is returned unchanged if nothing better is found.
        time_limit : float
            Seconds to spend, checked between node-limited kernel calls (each call is sized from the
            measured node rate). The first call in a process may add the kernel's load/compile time.
        node_limit : int, optional
            The most nodes to spend in all.
        progress : callable, optional
            Called after every probe as ``progress(event, capacity, peak, bound, nodes)`` with event
            ``"plan"`` (the peak went down), ``"proof"`` (the bound went up) or ``"probe"``.
        heuristics : tuple of str, optional
            The static preorders probed (default ``HEURISTICS``; letters as there).

        Returns
        -------
        offsets : numpy.ndarray
            The best plan found, never worse than the input.
        stats : dict
            ``nodes``; ``probes``, a list of ``(capacity, outcome, nodes)`` with outcome ``"found"``,
            ``"infeasible"`` (proven by an exhausted search) or ``"limit"``; ``proven_lower_bound``, the
            largest ``C + 1`` for which "no plan with peak <= C" was proven, else the lower bound
            (:func:`dsa.bounds.lower_bound`); ``peak``; ``time``; ``rounds``.
        """
        return _lower_peak(self, offsets, time_limit=time_limit, node_limit=node_limit,
                           progress=progress, heuristics=tuple(heuristics))


def _fit(limit, deadline, rate):
    """``limit`` nodes, cut to what the node rate ``rate[0]`` (nodes per second) allows before
    ``deadline``: a node-limited call sized so that it ends near the deadline."""
    return min(limit, int(max(deadline - time.perf_counter(), 0.0) * rate[0]))


def _learn(rate, nodes, seconds):
    """Fold a call of ``nodes`` nodes that took ``seconds`` into the node rate ``rate[0]`` (calls too
    short to time are left out)."""
    if nodes >= 200 and seconds > 1e-3:
        rate[0] = 0.5 * rate[0] + 0.5 * nodes / seconds


def _decide(search, cap, node_limit, periods, heuristics=HEURISTICS, deadline=None, rate=None):
    """Round-robin search of capacity ``cap`` over ``periods`` (indices into search.periods).

    Returns ``(status, plans, nodes)`` where plans maps period index -> local offsets.
    """
    plans = {}
    nodes = 0
    todo = list(periods)
    for pi in todo:
        if not search.periods[pi].searchable:
            return "limit", plans, nodes
    limit = max(64, 2 * max((len(search.periods[pi].rows) for pi in todo), default=1))
    runs = {}  # each (period, preorder) search goes on where its last call stopped
    while todo:
        remaining = todo
        todo = []
        for pi in remaining:
            per = search.periods[pi]
            done = False
            for h in heuristics:
                lim = limit
                if node_limit is not None:
                    lim = min(lim, node_limit - nodes)
                if deadline is not None and rate is not None:
                    lim = _fit(lim, deadline, rate)
                if lim <= 0:
                    return "limit", plans, nodes
                t = time.perf_counter()
                status, used, out = per.search(cap, lim, h, runs)
                dt = time.perf_counter() - t
                nodes += used
                if rate is not None and used > 1000 and dt > 0:
                    rate[0] = 0.5 * rate[0] + 0.5 * used / dt
                if status == 0:
                    plans[pi] = out
                    done = True
                    break
                if status == 1:
                    return "infeasible", plans, nodes
            if not done:
                todo.append(pi)
        if node_limit is not None and nodes >= node_limit:
            break
        if deadline is not None and time.perf_counter() >= deadline:
            break
        limit *= 2
    return ("found" if not todo else "limit"), plans, nodes


def feasible(problem, capacity, *, node_limit):
    """Decide whether ``problem`` has a plan with peak at most ``capacity``.

    Parameters
    ----------
    problem : dsa.Problem
    capacity : int
    node_limit : int
        The most search nodes to spend, over all busy periods and calls.

    Returns
    -------
    status : str
        ``"found"``, ``"infeasible"`` (proven by a complete search) or ``"limit"``.
    offsets : numpy.ndarray or None
        A plan with peak <= capacity when found.
    nodes : int
        Nodes explored.
    """
    search = CanonicalSearch(problem)
    status, plans, nodes = _decide(search, int(capacity), int(node_limit),
                                   range(len(search.periods)))
    if status != "found":
        return status, None, nodes
    offsets = search.base.copy()
    for pi, out in plans.items():
        offsets[search.periods[pi].rows] = out
    return status, offsets, nodes


def _probe(search, problem, best, cap, budget, heuristic, deadline, rate, runs=None, stop=None):
    """One node-limited attempt at capacity ``cap`` for every period whose plan exceeds it.

    ``runs`` and ``stop`` are passed to :meth:`_Period.search` (resumed searches, early end).
    Returns ``(outcome, plans, nodes)``; outcome is "found", "infeasible" (proven) or "limit".
    """
    plans = {}
    nodes = 0
    outcome = "found"
    for pi, per in enumerate(search.periods):
        if plan_peak(problem, best, per.rows) <= cap:
            continue
        if not per.searchable:
            return "limit", plans, nodes
        lim = budget if deadline is None else _fit(budget, deadline, rate)
        if lim <= 0:
            return "limit", plans, nodes
        t = time.perf_counter()
        status, used, out = per.search(cap, lim, heuristic, runs, stop)
        dt = time.perf_counter() - t
        nodes += used
        if stop is not None and stop[0] and status == 2:
            return "limit", plans, nodes
        _learn(rate, used, dt)
        if status == 1:
            return "infeasible", plans, nodes
        if status == 2:
            outcome = "limit"  # keep going: a later period may still be proven infeasible
        else:
            plans[pi] = out
    return outcome, plans, nodes


def _race(search, problem, best, cap, share, batch, deadline, rate, runs, pool, cancel, final):
    """Probe ``cap`` with each preorder of ``batch`` (``share`` nodes each), side by side on
    ``pool`` when it is given, else one after the other until one plans or proves.

    With ``cancel``, a proof ends the other searches (a stop flag the kernel reads every 256 nodes),
    and when ``final`` (a plan at ``cap`` settles the question: the bound, or a decision) a plan
    ends the searches of *later* preorders: earlier ones run their share, so the first preorder that
    plans within its share wins whichever thread finishes first, and the answer does not depend on
    timing. On the pool, every search is stopped at ``deadline``. Returns the ``_probe`` results in
    preorder order; see :func:`_usable` for which of their plans may be used.
    """
    stops = [np.zeros(1, np.int64) for _ in batch]

    def one(j):
        result = _probe(search, problem, best, cap, share, batch[j], deadline, rate, runs, stops[j])
        if cancel and result[0] == "infeasible":
            for other in stops:
                other[0] = 1
        elif cancel and result[0] == "found" and final:
            for other in stops[j + 1:]:
                other[0] = 1
        return result

    if pool is None or len(batch) == 1:
        results = []
        for j in range(len(batch)):
            results.append(one(j))
            if results[-1][0] != "limit":
                break
        return results
    futures = [pool.submit(one, j) for j in range(len(batch))]
    if deadline is not None:  # the calls are sized from a node rate that may be stale: at the
        from concurrent.futures import wait  # deadline, the waiting thread stops them

        if wait(futures, timeout=max(0.0, deadline - time.perf_counter())).not_done:
            for stop in stops:
                stop[0] = 1
    return [f.result() for f in futures]


def _usable(results):
    """The plans of raced ``results`` that do not depend on timing, as ``(outcome, plans, nodes)``
    in preorder order: none once a search proved the capacity infeasible (the proof settles it,
    and the searches it stopped stopped at a moment that depends on timing); otherwise those up to
    the first search that planned or proved (later ones may have been stopped by it)."""
    if any(r[0] == "infeasible" for r in results):
        return [(r[0], {}, r[2]) for r in results]
    out, decided = [], False
    for outcome, plans, nodes in results:
        out.append((outcome, {} if decided else plans, nodes))
        decided = decided or outcome != "limit"
    return out


def _pool(width, periods=(), heuristics=HEURISTICS):
    """A thread pool of ``width`` searches side by side (None for one). The ranks of the preorders
    ``heuristics`` of ``periods`` are computed first, since the threads read them from a cache that
    is not locked."""
    if width <= 1:
        return None
    for per in periods:
        for h in heuristics:
            per._order(h)
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=width, thread_name_prefix="dsa-search")


def lower_peak(problem, offsets, *, time_limit: float, node_limit: int | None = None, seed=None,
               progress=None, heuristics=HEURISTICS):
    """Lower the peak of a plan by probing smaller capacities with a node-limited canonical search.

    A fresh :class:`CanonicalSearch` of ``problem`` runs :meth:`CanonicalSearch.lower_peak` (with the
    static preorders ``heuristics``); see there. ``seed`` is unused (the search is deterministic
    under a node limit); it is accepted for a uniform signature.

    Returns
    -------
    offsets : numpy.ndarray
    stats : dict
    """
    return CanonicalSearch(problem).lower_peak(offsets, time_limit=time_limit, node_limit=node_limit,
                                               progress=progress, heuristics=heuristics)


def random_dives(problem, offsets, *, time_limit: float, seed=None, progress=None, search=None, stop=None):
    """Lower the peak of a plan by canonical dives under randomly perturbed preorders.

    Each dive is a node-limited search (``DIVE_NODES`` nodes per buffer: a plan takes one node per
    buffer, so little backtracking) of one busy period that reaches the incumbent's peak, at one byte
    below that peak, with a preorder that ranks the buffers by their duration times
    ``exp(DIVE_NOISE * z)``, ``z`` drawn from the standard normal for each buffer and each dive. A
    dive that plans lowers that period; the peak falls once every period at it has been lowered.
    Dives run side by side on :func:`threads` threads (the kernel releases the GIL), each with a
    generator of its own, until the time limit, the lower bound, a dive that ends without a plan
    (a complete search: that period cannot go lower), or ``DIVE_STALL_SHARE`` of the time limit (at
    least ``DIVE_STALL_MIN_S``) without a lower peak, so that the caller's other searches get the
    rest.

    The dives do not start from the incumbent: they are restarts of a randomised constructive
    search, GRASP-style (T. A. Feo and M. G. C. Resende, "Greedy randomized adaptive search
    procedures", Journal of Global Optimization 6, 1995), with the canonical search of MiniMalloc
    (Moffitt, ASPLOS 2023) as the constructive step, at a capacity the incumbent sets. On rectangle
    cuts of thousands of buffers the deterministic preorders stall after a few seconds, while small
    perturbations of the duration order (many durations are equal there, the rest close) keep
    finding lower plans: from ``best``'s plans at 5 s, 15 s of dives on 6 such cuts of 1,500-4,000
    buffers lowered all 6, by 0.3-1.8 % of LOAD (see ``DIVE_NOISE``).

    Parameters
    ----------
    problem : Problem
    offsets : array of int
        A valid plan; the result is never worse.
    time_limit : float
        Seconds (checked between dives; one dive takes a few hundredths of a second at thousands of
        buffers, and a dive still running at the time limit is stopped there: at 20,000 buffers one
        had ended 0.46 s after it).
    seed : int, optional
        Seed of the perturbations (which thread plans first depends on timing, so the result can
        change from run to run on several threads).
    progress : callable, optional
        Called as ``progress(seconds, peak)`` each time the peak falls.
    search : CanonicalSearch, optional
        The problem already cut into periods (default: a new one).
    stop : callable, optional
        Called between dives; the dives end once it returns True.

    Returns
    -------
    (offsets, stats)
        ``stats``: ``dives``, ``planned`` (dives that lowered a period), ``improvements`` (a list
        of ``(seconds, peak)``, the first being the start), ``stalled`` (True when the dives
        stopped for want of progress), ``blocked`` (True when no dive can lower the peak: a
        busy period too large to search reaches it, or a complete search proved that one cannot go
        below it) and ``short`` (True when they stopped because the time left could not hold
        another dive: a dive of the period drawn was measured to take longer, or the node rate
        left it fewer nodes than the period has buffers).
    """
    import threading

    from dsa.budget import check_seed

    t0 = time.perf_counter()
    deadline = t0 + float(time_limit)
    search = CanonicalSearch(problem) if search is None else search
    best = np.array(offsets, dtype=np.int64, copy=True)
    zero = problem.sizes == 0
    best[zero] = search.base[zero]
    peak = plan_peak(problem, best)
    stats = {"dives": 0, "planned": 0, "improvements": [(0.0, peak)], "stalled": False, "blocked": False,
             "short": False}
    lb = lower_bound(problem)
    if peak <= lb:
        return best, stats
    if peak <= search.stuck(best) or not search.periods:
        stats["blocked"] = True
        return best, stats
    warm()
    lock = threading.Lock()
    # the incumbent's peak, when it last fell, and whether a dive proved that it cannot
    state = {"peak": peak, "last": t0, "stop": False}
    stall = max(DIVE_STALL_MIN_S, DIVE_STALL_SHARE * float(time_limit))
    rate = [2e5]  # nodes per second, measured
    cost = [DIVE_ROW2_S]  # seconds of a dive per row squared, measured
    highs = [plan_peak(problem, best, per.rows) for per in search.periods]

    def work(rng):
        while time.perf_counter() < deadline and not state["stop"] and not (stop is not None and stop()):
            if time.perf_counter() - state["last"] > stall:
                stats["stalled"] = True
                return
            with lock:
                peak = state["peak"]
                if peak <= lb:
                    return
                at = [j for j, per in enumerate(search.periods) if per.searchable and highs[j] >= peak]
                if len(at) < sum(1 for h in highs if h >= peak):
                    stats["blocked"] = True  # a period too large to search sets the peak
                    return
                j = at[int(rng.integers(len(at)))]
                m = len(search.periods[j].rows)
                if deadline - time.perf_counter() < cost[0] * m * m:
                    stats["short"] = True  # (the time left cannot hold a dive of this period)
                    return
                # (a dive that would outlast the deadline at the measured node rate is cut to fit;
                # one with fewer nodes than buffers cannot plan, and is not started nor counted)
                limit = _fit(DIVE_NODES * m, deadline, rate)
                if limit < m:
                    stats["short"] = True
                    return
                stats["dives"] += 1
            per = search.periods[j]
            key = per.feats["W"] * np.exp(DIVE_NOISE * rng.standard_normal(m))
            began = time.perf_counter()
            status, nodes, out = per.dive(peak - 1, limit, key, flag)
            took = time.perf_counter() - began
            _learn(rate, nodes, took)
            if limit == DIVE_NODES * m:  # (a whole dive, not one cut to fit)
                cost[0] = 0.5 * cost[0] + 0.5 * took / (m * m)
            if status == 1:  # a complete search without a plan: no dive can lower this period
                state["stop"] = stats["blocked"] = True
                return
            if status != 0:
                continue
            with lock:
                high = int((out + per.sz).max())
                if high < highs[j]:
                    best[per.rows] = out
                    highs[j] = high
                    stats["planned"] += 1
                    new = max(highs)
                    if new < state["peak"]:
                        state["peak"] = new
                        state["last"] = time.perf_counter()
                        stats["improvements"].append((time.perf_counter() - t0, new))
                        if progress is not None:
                            progress(time.perf_counter() - t0, new)

    gens = [np.random.default_rng(s) for s in np.random.SeedSequence(check_seed(seed)).spawn(threads())]
    flag = np.zeros(1, np.int64)  # set at the deadline: a dive still running stops there
    with Budget.lasting(deadline - time.perf_counter()).alarm(flag):
        if len(gens) == 1:
            work(gens[0])
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(len(gens), thread_name_prefix="dsa-dive") as pool:
                list(pool.map(work, gens))
    return best, stats


def _lower_peak(search, offsets, *, time_limit: float, node_limit: int | None = None, progress=None,
                heuristics=HEURISTICS):
    """:meth:`CanonicalSearch.lower_peak` (documented there)."""
    t0 = time.perf_counter()
    deadline = t0 + float(time_limit)
    problem = search.problem
    best = np.array(offsets, dtype=np.int64, copy=True)
    zero = problem.sizes == 0
    best[zero] = search.base[zero]  # zero-size rows: offset 0, or their fixed offset
    lb = lower_bound(problem)  # a plan there is optimal; below it none exists
    peak = plan_peak(problem, best)
    stats = {"nodes": 0, "probes": [], "proven_lower_bound": min(lb, peak), "peak": peak,
             "time": 0.0}
    # a period too large to search that reaches the peak caps what the search can gain
    stuck = search.stuck(best)
    if peak <= max(lb, stuck):
        stats["time"] = time.perf_counter() - t0
        return best, stats
    w0 = time.perf_counter()
    warm()  # the kernel's one-off load is not taken from the time limit
    deadline += time.perf_counter() - w0
    if deadline == math.inf:
        deadline = None
    state = {"peak": peak, "lo": lb}
    largest = max((len(per.rows) for per in search.periods if per.searchable), default=1)
    budget = max(BUDGET0, 2 * largest)
    step = max(1, int(lb * STEP))

    def spent():
        return ((deadline is not None and time.perf_counter() >= deadline)
                or (node_limit is not None and stats["nodes"] >= node_limit))

    # (periods at or below the bound are never probed: every capacity probed is at least lb)
    search.prepare([per for per in search.periods
                    if per.searchable and plan_peak(problem, best, per.rows) > lb], heuristics=heuristics)
    width = search.width

    def apply(cap, outcome, plans, nodes):
        stats["nodes"] += nodes
        stats["probes"].append((cap, outcome, nodes))
        for pi, out in plans.items():  # a period's plan replaces the incumbent's if it is lower
            rows = search.periods[pi].rows
            if plan_peak(problem, best, rows) > int((out + problem.sizes[rows]).max()):
                best[rows] = out
        new = plan_peak(problem, best)
        if new < state["peak"]:
            state["peak"] = new
            if progress is not None:
                progress("plan", cap, new, state["lo"], stats["nodes"])
        if outcome == "infeasible":
            state["lo"] = max(state["lo"], cap + 1)
            stats["proven_lower_bound"] = state["lo"]
            if progress is not None:
                progress("proof", cap, state["peak"], state["lo"], stats["nodes"])
        elif progress is not None:
            progress("probe", cap, state["peak"], state["lo"], stats["nodes"])

    # searches of the bound stopped at their node limit, resumed by the next round's probe of the
    # bound (walk probes start afresh: the grid below the incumbent moves as it falls, and many
    # small fresh probes of changing capacities find plans more often than a few deep ones)
    runs = search.runs
    cancel = node_limit is None  # under a node limit every search runs its share (same node counts)

    def prune():
        """Forget searches of capacities that will not be probed again (at or above the peak, or
        proven infeasible), then the oldest beyond ``MAX_RUNS``."""
        for key in [k for k in runs if not (floor() <= k[0] < state["peak"])]:
            del runs[key]
        while len(runs) > MAX_RUNS:
            del runs[next(iter(runs))]  # the least recently used (a probe moves its runs last)

    def probe(cap, nb, hs, group=None):
        """Probe ``cap`` with the preorders ``hs``, in batches of ``group`` (default ``width``)
        raced on the pool (:func:`_race`), until a batch plans or proves something. A search of
        the bound goes on from where the last probe of the bound left it, so the bound is probed as
        one batch of every preorder: a thread that ends its search takes the next instead of
        waiting for its partner, a plan there (optimal) stops the later preorders and a proof all
        others (not under a node limit, where every search runs its share). Below the bound the
        others run their share, since they may plan lower still. Results are applied in preorder
        order (:func:`_usable`), so the plan does not depend on which thread finished first."""
        outcome = "limit"
        group = group or width
        for i in range(0, len(hs), group):
            batch = hs[i:i + group]
            share = nb
            if node_limit is not None:
                share = min(nb, (node_limit - stats["nodes"]) // len(batch))
            if share <= 0 or spent():
                return "stop"
            results = search.race(cap, best, share, batch, deadline=deadline, resume=cap <= floor(),
                                  cancel=cancel, final=cap <= floor())
            for result in results:
                apply(cap, *result)
            prune()
            decided = [r[0] for r in results if r[0] != "limit"][:1]
            if decided == ["infeasible"]:
                return "infeasible"
            if decided == ["found"] or plan_peak(problem, best) <= cap:
                return "found"
        return outcome

    def floor():
        return max(state["lo"], stuck)

    try:
        while floor() < state["peak"] and not spent():
            round_peak = state["peak"]
            # 1. the bound itself, with every preorder ("stop": the time is up, or too few nodes are
            #    left to give each search one)
            if probe(floor(), budget, heuristics, len(heuristics)) == "stop":
                break
            if floor() >= state["peak"] or spent():
                break
            # 2. a grid from just below the incumbent down towards the bound, every preorder at
            #    each capacity, with budgets that add up to about WALK x budget; it ends after MISSES
            #    capacities in a row that hit the limit (there the budgets of this round are too small)
            ncaps = max(1, (state["peak"] - 1 - floor()) // step)
            nb = max(SCAN0, SCAN_ROWS * largest, int(WALK * budget) // ncaps)
            cap = state["peak"] - 1
            outcome = None
            misses = 0
            while floor() < cap < state["peak"] and outcome != "stop" and misses < MISSES:
                outcome = probe(cap, nb, heuristics)
                misses = misses + 1 if outcome == "limit" else 0
                cap = min(cap - step, state["peak"] - 1)
            stats["rounds"] = stats.get("rounds", 0) + 1
            if outcome == "stop":
                break
            if state["peak"] >= round_peak:
                budget *= GROWTH  # (a round that lowered the peak keeps its budget: see GROWTH)
    finally:
        search.close()
    stats["threads"] = width
    peak = state["peak"]
    stats["peak"] = peak
    stats["time"] = time.perf_counter() - t0
    return best, stats
