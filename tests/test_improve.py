"""The two searches behind best's improvement phase: the canonical search (its proofs against brute
force) and the local search over greedy orders."""
from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsa
from conftest import fields, problems
from dsa.strategies import _canonical_search as canonical
from dsa.strategies._local_search import search_orders
from naive import brute_force_optimum, naive_validate


def _optimum(problem) -> int:
    f = fields(problem)
    return brute_force_optimum(f["starts"], f["ends"], f["sizes"], f["alignments"], f["fixed"])


def _valid(problem, offsets) -> bool:
    return naive_validate(**fields(problem), offsets=np.asarray(offsets).tolist()) == []


# ---------------------------------------------------------------- canonical search
@given(problem=problems(max_n=7), slack=st.integers(-3, 3))
@settings(max_examples=300)
def test_feasible_agrees_with_brute_force(problem, slack):
    """At capacities around the optimum: a plan below it is impossible, and a proof above it is a bug."""
    opt = _optimum(problem)
    cap = max(int(problem.sizes.max(initial=0)), opt + slack)
    status, offsets, nodes = canonical.feasible(problem, cap, node_limit=1_000_000)
    assert status in ("found", "infeasible")  # tiny instances: the search always completes
    if status == "found":
        assert _valid(problem, offsets) and dsa.solution.plan_peak(problem, offsets) <= cap
    assert (status == "found") == (cap >= opt)


@given(problem=problems(max_n=5), copies=st.lists(st.integers(0, 4), min_size=1, max_size=3),
       slack=st.integers(-2, 2))
@settings(max_examples=200)
def test_feasible_with_identical_buffers_agrees_with_brute_force(problem, copies, slack):
    """Identical buffers (same lifetime, size and alignment) are placed in a fixed order by the
    search (symmetry breaking): that must never lose a plan."""
    rows = [i for i in copies if i < problem.n and problem.fixed_offsets[i] == -1]
    if not rows:
        return
    f = fields(problem)
    for key in ("starts", "ends", "sizes", "alignments"):
        f[key] = f[key] + [f[key][i] for i in rows]
    f["fixed"] = f["fixed"] + [-1] * len(rows)
    problem = dsa.Problem(f["starts"], f["ends"], f["sizes"], alignments=f["alignments"],
                          fixed_offsets=f["fixed"])
    opt = _optimum(problem)
    cap = max(int(problem.sizes.max(initial=0)), opt + slack)
    status, offsets, nodes = canonical.feasible(problem, cap, node_limit=1_000_000)
    assert status in ("found", "infeasible")
    if status == "found":
        assert _valid(problem, offsets) and dsa.solution.plan_peak(problem, offsets) <= cap
    assert (status == "found") == (cap >= opt)


@given(problem=problems(max_n=7))
@settings(max_examples=100)
def test_search_improve_reaches_and_proves_the_optimum(problem):
    start = dsa.solve(problem, "bump").offsets
    out, stats = canonical.lower_peak(problem, start, time_limit=5.0)
    assert _valid(problem, out)
    opt = _optimum(problem)
    assert dsa.solution.plan_peak(problem, out) == opt
    assert stats["proven_lower_bound"] <= opt


@given(problem=problems(max_n=8), slice_=st.integers(1, 7), slack=st.integers(-2, 1))
@settings(max_examples=150)
def test_a_search_resumed_in_slices_explores_the_same_nodes(problem, slice_, slack):
    """Calls with node limits a, b, ... on one kept search explore exactly the nodes of one call
    with limit a + b + ...: same answer, same node count, same plan."""
    prep = canonical.CanonicalSearch(problem)
    cap = max(int(problem.sizes.max(initial=0)), _optimum(problem) + slack)
    for per in prep.periods:
        whole, nodes, plan = per.search(cap, 10**6, "TAW")
        runs, total, calls = {}, 0, 0
        while True:
            status, used, out = per.search(cap, slice_, "TAW", runs)
            total += used
            calls += 1
            assert used <= slice_
            if status != 2:
                break
        assert (status, total) == (whole, nodes)
        assert calls == max(1, -(-nodes // slice_))  # no call without progress
        if status == 0:
            assert np.array_equal(out, plan)
        assert per.search(cap, 5, "TAW", runs)[:2] == (status, 0)  # a finished search answers again


def test_a_long_search_resumed_in_slices_finds_the_same_plan():
    """MiniMalloc's B at LOAD: the TAW preorder plans it after about 200k nodes, in one call or in
    slices of 9999 nodes."""
    p = dsa.data.load("B.1048576").replace(capacity=None)
    per = canonical.CanonicalSearch(p).periods[0]
    cap = dsa.load(p)
    whole, nodes, plan = per.search(cap, 10**6, "TAW")
    assert whole == 0 and nodes > 100_000
    runs, total = {}, 0
    while True:
        status, used, out = per.search(cap, 9999, "TAW", runs)
        total += used
        if status != 2:
            break
    assert (status, total) == (0, nodes) and np.array_equal(out, plan)


def test_a_stop_flag_ends_a_search_that_goes_on_later():
    """``stop[0] = 1`` ends a call before its node limit (from another thread too); the kept search
    then resumes and ends where an uninterrupted one does."""
    import threading

    p = dsa.data.load("B.1048576").replace(capacity=None)
    per = canonical.CanonicalSearch(p).periods[0]
    cap = dsa.load(p)
    stop = np.ones(1, np.int64)
    runs = {}
    assert per.search(cap, 10**6, "TAW", runs, stop)[:2] == (2, 0)
    stop[0] = 0
    result = {}
    worker = threading.Thread(target=lambda: result.update(r=per.search(cap, 10**12, "TWC", runs, stop)))
    worker.start()
    key = (cap, "TWC", id(per))
    while key not in runs or runs[key][0][0][0] == 0:  # until the search has started (phase 0: fresh)
        worker.join(0.001)
    stop[0] = 1
    worker.join(120)
    assert not worker.is_alive() and result["r"][0] == 2 and result["r"][1] < 10**12
    stop[0] = 0
    status, used, out = per.search(cap, 10**6, "TAW", runs, stop)
    assert (status, used) == (0, per.search(cap, 10**6, "TAW")[1])


@given(problem=problems(max_n=7))
@settings(max_examples=200)
def test_the_first_look_plans_at_the_bound_or_not_at_all(problem):
    """A plan from the first look is valid and its peak is the bound; where the optimum is above
    the bound it finds nothing."""
    offsets, nodes, searches = canonical.CanonicalSearch(problem).first_look()
    bound = dsa.lower_bound(problem)
    if offsets is not None:
        assert _valid(problem, offsets) and dsa.solution.plan_peak(problem, offsets) == bound
    if _optimum(problem) > bound:
        assert offsets is None
    assert searches <= len(canonical.HEURISTICS) and (nodes > 0) == (searches > 0)


def test_the_searches_start_from_the_bound_strengthened_by_alignment():
    """LOAD is 12 here but every plan needs 68 (the lower buffer pads to 64 bytes): the searches
    start at dsa.lower_bound, so a plan at 68 is known optimal without searching below it."""
    p = dsa.Problem([0, 0], [2, 2], [4, 8], alignments=64)
    assert (dsa.load(p), dsa.lower_bound(p)) == (12, 68)
    offsets, nodes, _ = canonical.CanonicalSearch(p).first_look()
    assert dsa.solution.plan_peak(p, offsets) == 68 and _valid(p, offsets)
    out, stats = canonical.lower_peak(p, offsets, time_limit=5.0)
    assert stats["proven_lower_bound"] == 68 and stats["nodes"] == 0
    sol = dsa.solve(p, "exact")
    assert (sol.peak, sol.lower_bound, sol.status) == (68, 68, dsa.Status.OPTIMAL)


def test_lower_peak_goes_on_with_the_searches_of_the_first_look(monkeypatch):
    """When the first look does not plan, lower_peak's probes of the bound resume its searches (no
    search of the bound starts afresh); without them lower_peak starts its own."""
    import dsa._kernels.canonical as kernel

    monkeypatch.setattr(canonical, "THREADS", 1)
    p = dsa.data.load("A.1048576").replace(capacity=None)  # planned at LOAD after ~67k nodes
    search = canonical.CanonicalSearch(p)
    offsets, nodes, searches = search.first_look()
    m = max(len(per.rows) for per in search.periods)
    assert offsets is None and searches == len(canonical.HEURISTICS) == len(search.runs)
    assert nodes == searches * canonical.FIRST_LOOK * m
    fresh = []
    real = kernel.new_state
    canonical.warm()  # (its search of one buffer is not one of these)
    monkeypatch.setattr(kernel, "new_state", lambda *a: fresh.append(a) or real(*a))
    start = dsa.solve(p, "best", improve=False).offsets
    bound_only = len(canonical.HEURISTICS) * max(canonical.BUDGET0, 2 * m)  # round 1's probe of the bound
    _, stats = search.lower_peak(start, time_limit=60, node_limit=bound_only)
    assert stats["nodes"] == bound_only and fresh == []
    _, stats = canonical.lower_peak(p, start, time_limit=60, node_limit=bound_only)
    assert stats["nodes"] == bound_only and len(fresh) == len(canonical.HEURISTICS)


def test_loading_the_kernel_is_not_taken_from_the_time_limit(monkeypatch):
    """A fresh process compiles the kernel at its first search (seconds); the threads' deadline
    must not count it, or they are stopped before they search at all (seen on CI)."""
    import time

    real = canonical.warm

    def slow_load():
        time.sleep(1.0)
        real()

    monkeypatch.setattr(canonical, "warm", slow_load)
    p = dsa.data.load("E.1048576").replace(capacity=None)
    start = dsa.solve(p, "greedy_by_size").offsets
    out, stats = canonical.lower_peak(p, start, time_limit=0.5)
    assert stats["nodes"] > 0 and dsa.solution.plan_peak(p, out) == dsa.load(p)


def test_search_keeps_a_plan_it_cannot_improve_and_stops_on_large_periods(monkeypatch):
    monkeypatch.setattr(canonical, "MAX_BUFFERS", 2000)
    big = dsa.generate.random_trace(3000, seed=0)  # one busy period of more than MAX_BUFFERS rows
    start = dsa.solve(big, "greedy_by_size").offsets
    # no time limit: a search that did not stop at once here would never return
    out, stats = canonical.lower_peak(big, start, time_limit=math.inf)
    assert np.array_equal(out, start) and stats["nodes"] == 0 and stats["probes"] == []


@pytest.mark.parametrize("node_limit", [1, 3, 4_999])
def test_a_node_limit_too_small_to_share_ends_the_search(node_limit):
    """Fewer nodes left than preorders in a batch give each search 0: the search must end there,
    not start round after round with nothing to spend (it looped, its budget growing without end)."""
    p = dsa.data.load("A.1048576").replace(capacity=None)
    start = dsa.solve(p, "greedy_by_size").offsets
    out, stats = canonical.lower_peak(p, start, time_limit=60.0, node_limit=node_limit)
    assert stats["nodes"] <= node_limit + len(p) and _valid(p, out)


def test_search_honours_a_node_limit():
    p = dsa.data.load("A.1048576").replace(capacity=None)
    start = dsa.solve(p, "greedy_by_size").offsets
    out, stats = canonical.lower_peak(p, start, time_limit=60.0, node_limit=5000)
    assert stats["nodes"] <= 5000 + len(p)  # the last call may finish its current node budget
    assert _valid(p, out) and dsa.solution.plan_peak(p, out) <= dsa.solution.plan_peak(p, start)


# ---------------------------------------------------------------- local search over greedy orders
@given(problem=problems(max_n=12), seed=st.integers(0, 100))
@settings(max_examples=100)
def test_local_search_is_valid_and_never_worse(problem, seed):
    start = dsa.solve(problem, "bump").offsets
    out, stats = search_orders(problem, start, time_limit=math.inf, iterations=200, seed=seed)
    assert _valid(problem, out)
    assert stats["final_peak"] == dsa.solution.plan_peak(problem, out) <= stats["start_peak"]
    fixed = problem.is_fixed
    assert np.array_equal(out[fixed], problem.fixed_offsets[fixed])


def test_local_search_is_reproducible_for_a_seed_and_an_iteration_count():
    p = dsa.data.load("B.1048576").replace(capacity=None)
    start = dsa.solve(p, "greedy_by_size").offsets
    a, sa = search_orders(p, start, time_limit=math.inf, iterations=3000, seed=4)
    b, sb = search_orders(p, start, time_limit=math.inf, iterations=3000, seed=4)
    assert np.array_equal(a, b) and sa["iterations"] == sb["iterations"] == 3000
    assert sa["final_peak"] < sa["start_peak"]  # 3000 iterations lower this instance's greedy peak


def test_local_search_works_a_window_at_a_time_on_large_problems():
    p = dsa.generate.random_trace(3000, seed=3)
    start = dsa.solve(p, "greedy_by_size").offsets
    out, stats = search_orders(p, start, time_limit=math.inf, iterations=2000, seed=0, window=200)
    assert _valid(p, out) and stats["final_peak"] <= stats["start_peak"]


def test_local_search_rejects_unknown_parameters():
    p = dsa.Problem([0, 1], [2, 3], [1, 1])
    with pytest.raises(TypeError, match="unknown search parameters"):
        search_orders(p, [0, 1], time_limit=0.1, colour="blue")


@pytest.mark.parametrize("kind", ["uniform", "dnn"])
def test_a_periods_time_neighbours_are_those_of_the_whole_matrix(monkeypatch, kind):
    p = dsa.generate.random_trace(300, seed=5, kind=kind)
    rows = np.arange(len(p))
    per = canonical._Period(p, rows)
    st, en = p.starts, p.ends
    ov = (st[:, None] < en[None, :]) & (st[None, :] < en[:, None])
    np.fill_diagonal(ov, False)
    assert np.array_equal(per.adj_ptr, np.concatenate([[0], np.cumsum(ov.sum(axis=1))]))
    for i in range(len(p)):  # (in any order: the search does not depend on it)
        assert sorted(per.adj[per.adj_ptr[i]:per.adj_ptr[i + 1]]) == np.flatnonzero(ov[i]).tolist()
    # over MAX_DEGREE_SUM neighbour pairs in all (counted before the lists are made): not searched
    monkeypatch.setattr(canonical, "MAX_DEGREE_SUM", int(ov.sum()) - 1)
    assert not canonical._Period(p, rows).searchable
    monkeypatch.setattr(canonical, "MAX_DEGREE_SUM", int(ov.sum()))
    assert canonical._Period(p, rows).searchable
    # a deadline the preparation would outlast (PREP_S_PER_PAIR a pair): left unprepared, as late
    soon = time.perf_counter() + 60.0
    monkeypatch.setattr(canonical, "PREP_S_PER_PAIR", 120.0 / int(ov.sum()))
    late = canonical._Period(p, rows, soon)
    assert late.late and not late.searchable
    monkeypatch.setattr(canonical, "PREP_S_PER_PAIR", 30.0 / int(ov.sum()))
    assert canonical._Period(p, rows, soon).searchable


def test_the_canonical_search_does_not_depend_on_the_order_of_the_neighbour_lists():
    # the lists come in start order, not sorted: every search gives the same answer, node count
    # and plan with each buffer's neighbours sorted
    for p in (dsa.generate.rectangle_cut(120, seed=3, pinwheel=0.5),
              dsa.generate.random_trace(150, seed=2, kind="uniform")):
        search = canonical.CanonicalSearch(p)
        load = dsa.load(p)
        for per in (q for q in search.periods if q.searchable and len(q.rows) > 1):
            ordered = np.concatenate([np.sort(per.adj[per.adj_ptr[i]:per.adj_ptr[i + 1]])
                                      for i in range(len(per.rows))]).astype(np.int64)
            assert not np.array_equal(ordered, per.adj) or len(per.rows) < 3
            for cap in (load, int(load * 1.05), int(load * 1.2)):
                for h in canonical.HEURISTICS[:2]:
                    got = per.search(cap, 2000, h)
                    given = per.adj
                    per.adj = ordered
                    try:
                        again = per.search(cap, 2000, h)
                    finally:
                        per.adj = given
                    assert got[:2] == again[:2] and np.array_equal(got[2], again[2])


def test_a_dive_stops_when_its_flag_is_set():
    # random_dives sets the flag at its deadline (Budget.alarm), so a dive still running stops there
    # (checked every 256 nodes) instead of going on to its node limit
    p = dsa.generate.rectangle_cut(1500, seed=3, cells_per_buffer=1024)
    search = canonical.CanonicalSearch(p)
    per = max(search.periods, key=lambda per: len(per.rows))
    key = per.feats["W"].astype(np.float64)
    cap = dsa.load(p)
    status, nodes, _ = per.dive(cap, 10**9, key, np.ones(1, np.int64))
    assert status == 2 and nodes <= 256  # LIMIT at the first check
    status, nodes, _ = per.dive(cap, 5000, key, np.zeros(1, np.int64))
    assert status == 2 and nodes == 5000  # (unset: the node limit ends it)


def test_random_dives_with_no_time_left_return_the_plan():
    # (the deadline's alarm needs a positive limit: one already past must not fail)
    p = dsa.generate.rectangle_cut(1500, seed=3, cells_per_buffer=1024)
    start = dsa.solve(p, "greedy_by_size").offsets
    for limit in (0.0, 1e-9):
        out, stats = canonical.random_dives(p, start, time_limit=limit, seed=1)
        dsa.validate(p, out)
        assert np.array_equal(out, start) and stats["dives"] == 0
