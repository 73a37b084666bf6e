"""The mincost_flow strategy: valid plans, an optimal flow, time-disjoint objects, candidate sets."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsa
import dsa.generate
from conftest import fields, problems
from naive import naive_validate
from dsa.strategies import mincost_flow

OPTIONS = [dict(layout=layout, compact=compact, candidates=candidates)
           for layout in ("gap", "stack") for compact in (True, False) for candidates in ("auto", 1, 2)]


def _flow_rows(problem) -> list[int]:
    """Free, non-empty rows (the ones the flow assigns), in start order (ties: end, row)."""
    f = fields(problem)
    rows = [i for i in range(len(problem)) if f["fixed"][i] < 0 and f["sizes"][i] > 0]
    return sorted(rows, key=lambda i: (f["starts"][i], f["ends"][i], i))


def _divides(a: int, b: int) -> bool:
    return max(a, b) % min(a, b) == 0


def _may_reuse(problem, i: int, j: int) -> bool:
    """Row j may take over row i's object: i ends by j's start and their alignments divide."""
    return (int(problem.ends[i]) <= int(problem.starts[j])
            and _divides(int(problem.alignments[i]), int(problem.alignments[j])))


def _cost(problem, pred: dict) -> int:
    """The flow cost of an assignment ``{row: predecessor row or None}``."""
    z = problem.sizes.tolist()
    return sum(z[j] if i is None else max(0, z[j] - z[i]) for j, i in pred.items())


def brute_force_flow_cost(problem) -> int:
    """Minimum cost over every assignment: each flow row opens an object or takes over one earlier
    row's object (each row's object taken over at most once), under the full candidate set."""
    rows = _flow_rows(problem)
    z = problem.sizes.tolist()
    best = [sum(z[j] for j in rows)]

    def rec(t: int, used: frozenset, cost: int) -> None:
        if cost >= best[0]:
            return
        if t == len(rows):
            best[0] = cost
            return
        j = rows[t]
        for i in rows[:t]:
            if i not in used and _may_reuse(problem, i, j):
                rec(t + 1, used | {i}, cost + max(0, z[j] - z[i]))
        rec(t + 1, used, cost + z[j])

    rec(0, frozenset(), 0)
    return best[0]


# ---------------------------------------------------------------- valid plans through the front end
@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: "-".join(map(str, o.values())))
@given(problem=problems())
@settings(max_examples=40)
def test_plan_is_valid(opts, problem):
    sol = dsa.solve(problem, strategy=mincost_flow.solve, **opts)
    assert sol.success and sol.status is not dsa.Status.ERROR, sol.message
    assert sol.offsets.dtype == np.int64 and sol.offsets.shape == (len(problem),)
    dsa.validate(problem, sol)
    assert naive_validate(**fields(problem), offsets=sol.offsets.tolist()) == []
    if not opts["compact"]:
        assert sol.peak == sol.stats["peak_before_compaction"]
    else:
        assert sol.peak <= sol.stats["peak_before_compaction"]
    again = dsa.solve(problem, strategy=mincost_flow.solve, **opts)
    assert np.array_equal(sol.offsets, again.offsets)


@given(problem=problems())
@settings(max_examples=60)
def test_objects_share_offsets_without_compaction(problem):
    """Every member of an object sits at its object's offset, aligned for all of them; zero-size
    free rows sit at 0; fixed rows keep their offsets; the stack starts above every fixed row."""
    res = mincost_flow.shared_objects(problem)
    f = fields(problem)
    for layout in ("gap", "stack"):
        sol = dsa.solve(problem, strategy=mincost_flow.solve, layout=layout, compact=False)
        off = sol.offsets.tolist()
        for members, align in zip(res["objects"], res["alignments"].tolist()):
            assert len({off[x] for x in members}) == 1
            assert off[members[0]] % align == 0
        base = max([o + z for o, z in zip(f["fixed"], f["sizes"]) if o >= 0], default=0)
        for i in range(len(problem)):
            if f["fixed"][i] >= 0:
                assert off[i] == f["fixed"][i]
            elif f["sizes"][i] == 0:
                assert off[i] == 0
            elif layout == "stack":
                assert off[i] >= base


# ---------------------------------------------------------------- the flow
@given(problem=problems(max_n=7))
@settings(max_examples=150)
def test_flow_is_optimal(problem):
    res = mincost_flow.shared_objects(problem, candidates=None)
    assert res["flow_cost"] == brute_force_flow_cost(problem)
    pred = {j: (None if res["pred"][j] < 0 else int(res["pred"][j])) for j in _flow_rows(problem)}
    assert _cost(problem, pred) == res["flow_cost"]


@given(problem=problems())
def test_objects_are_time_disjoint_chains(problem):
    res = mincost_flow.shared_objects(problem, candidates=None)
    f = fields(problem)
    seen = []
    for members, size, align in zip(res["objects"], res["sizes"].tolist(), res["alignments"].tolist()):
        members = members.tolist()
        assert members
        seen += members
        for a, b in zip(members, members[1:]):
            assert f["ends"][a] <= f["starts"][b]  # one after the other, never alive together
            assert res["pred"][b] == a
        assert size == max(f["sizes"][x] for x in members)
        assert all(align % f["alignments"][x] == 0 for x in members)
    assert sorted(seen) == sorted(_flow_rows(problem))  # every free, non-empty row in exactly one object
    # each row's object is taken over at most once, and only by a later row that may reuse it
    preds = [int(i) for i in res["pred"] if i >= 0]
    assert len(preds) == len(set(preds))
    for j, i in enumerate(res["pred"].tolist()):
        if i >= 0:
            assert _may_reuse(problem, i, j)
    if len(res["objects"]) == sum(res["pred"][j] < 0 for j in _flow_rows(problem)):
        # no chain was cut for alignment: the flow cost bounds the object bytes from above
        assert res["sizes"].sum() <= res["flow_cost"]


def test_flow_reuses_across_a_free_and_takes_the_cheaper_chain():
    # 0:[0,2) 8B, 1:[2,4) 4B, 2:[4,6) 8B -> one object of 8 bytes, cost 8 + 0 + 4
    p = dsa.Problem([0, 2, 4], [2, 4, 6], [8, 4, 8])
    res = mincost_flow.shared_objects(p, candidates=None)
    assert res["flow_cost"] == 12 and res["sizes"].tolist() == [8]
    # two big buffers that never meet end up in one object, the small one alone
    p = dsa.Problem([0, 0, 3], [2, 9, 5], [100, 1, 100])
    res = mincost_flow.shared_objects(p, candidates=None)
    assert sorted(res["sizes"].tolist()) == [1, 100] and res["flow_cost"] == 101


# ---------------------------------------------------------------- candidate sets
@given(problem=problems(), extra=st.integers(0, 3))
def test_k_at_least_n_is_the_full_candidate_set(problem, extra):
    full = mincost_flow.shared_objects(problem, candidates=None)
    big = mincost_flow.shared_objects(problem, candidates=len(problem) + extra + 1)
    assert np.array_equal(full["pred"], big["pred"])
    assert full["flow_cost"] == big["flow_cost"] and full["edges"] == big["edges"]
    # the full set is every (earlier, compatible) pair
    rows = _flow_rows(problem)
    assert full["edges"] == sum(_may_reuse(problem, i, j) for i in rows for j in rows)
    a = dsa.solve(problem, strategy=mincost_flow.solve, candidates=None)
    b = dsa.solve(problem, strategy=mincost_flow.solve, candidates=len(problem) + extra + 1)
    assert np.array_equal(a.offsets, b.offsets)


@given(problem=problems(max_n=8), k=st.integers(1, 3))
def test_restricted_candidates_are_the_k_most_recent(problem, k):
    from dsa._kernels.mincost_flow import candidate_edges

    rows = np.asarray(_flow_rows(problem), dtype=np.int64)
    if not len(rows):
        return
    s, e, z, a = (problem.starts[rows], problem.ends[rows], problem.sizes[rows], problem.alignments[rows])
    by_end = np.argsort(e, kind="stable")
    indptr, cols, costs = candidate_edges(by_end, np.searchsorted(e[by_end], s, side="right"), z, a, k, k)
    for j in range(len(rows)):
        got = cols[indptr[j]:indptr[j + 1]].tolist()
        compat = [i for i in range(len(rows)) if e[i] <= s[j] and _divides(int(a[i]), int(a[j]))]
        expect = sorted(compat, key=lambda i: (-e[i], -i))[:k]  # latest end first (stable by end)
        assert sorted(got) == sorted(expect)
        assert len(got) == min(k, len(compat))
        for i, c in zip(got, costs[indptr[j]:indptr[j + 1]].tolist()):
            assert c == max(0, int(z[j]) - int(z[i]))
    # a restricted flow is still a valid plan, never cheaper than the exact flow
    exact = mincost_flow.shared_objects(problem, candidates=None)["flow_cost"]
    assert mincost_flow.shared_objects(problem, candidates=k)["flow_cost"] >= exact


def test_window_prefers_the_largest_saving():
    # row 3 [10, 11) of 100 bytes: the last to end is row 2 (1 byte), row 0 (100 bytes) ended first
    p = dsa.Problem([0, 2, 4, 10], [1, 3, 5, 11], [100, 1, 1, 100])
    recent = mincost_flow.shared_objects(p, candidates=1)
    assert recent["pred"].tolist() == [-1, 0, 1, 2]
    best = mincost_flow.shared_objects(p, candidates=1, window=3)
    assert best["pred"][3] == 0


def test_bad_options():
    p = dsa.Problem([0], [1], [4])
    for bad in (0, -1, "all", 1.5, True):
        with pytest.raises(ValueError, match="candidates"):
            mincost_flow.solve(p, candidates=bad)
    with pytest.raises(ValueError, match="window"):
        mincost_flow.solve(p, candidates=2, window=0)
    with pytest.raises(ValueError, match="layout"):
        mincost_flow.solve(p, layout="tower")


def test_empty_and_trivial_problems():
    for p in (dsa.Problem([], [], []), dsa.Problem([0, 0], [1, 1], [0, 0]),
              dsa.Problem([0, 1], [2, 3], [4, 8], fixed_offsets=[0, 4])):
        for layout in mincost_flow.LAYOUTS:
            sol = dsa.solve(p, strategy=mincost_flow.solve, layout=layout, compact=False)
            assert sol.success, sol.message
            assert sol.stats["objects"] == 0


def test_larger_trace_is_valid_with_restricted_candidates():
    p = dsa.generate.random_trace(3000, seed=4)
    sol = dsa.solve(p, strategy=mincost_flow.solve)
    assert sol.success and sol.stats["candidates"] == mincost_flow.AUTO_CANDIDATES
    assert sol.peak <= sol.stats["peak_before_compaction"]


@given(problem=problems(alignment=False))
@settings(max_examples=60)
def test_compacted_plan_no_worse_than_bump_without_alignment(problem):
    # what tests/test_properties.py asks of every registered strategy (compaction is a first fit)
    assert dsa.solve(problem, strategy=mincost_flow.solve).peak <= dsa.solve(problem, "bump").peak


# -- densely overlapping rows: no time-overlap graph --------------------------------------------------

def _dense(n=2000, seed=0):
    """Rows that mostly meet in time, plus short ones that chain into objects of several members."""
    rng = np.random.default_rng(seed)
    long = n * 3 // 4
    starts = np.r_[rng.integers(0, 100, long), rng.integers(0, 300, n - long)]
    ends = starts + np.r_[rng.integers(150, 300, long), rng.integers(1, 20, n - long)]
    return dsa.Problem(starts, ends, rng.integers(1, 1 << 16, n), alignments=rng.choice([1, 8, 64], n))


def test_dense_instances_plan_without_the_overlap_graph(monkeypatch):
    """On rows that mostly meet in time, the gap layout (and the compaction) scan the placed rows
    instead of building the O(n^2) overlap graph; the plan is the one the graph gives."""
    from dsa.sweep import Sweep

    p = _dense()
    with_graph = Sweep(p)
    assert with_graph.dense
    with_graph.overlap
    want = mincost_flow.solve(p, sweep=with_graph)
    assert want.stats["objects"] < len(p)  # some objects have several members

    def boom(self):
        raise AssertionError("the time-overlap graph was built")

    monkeypatch.setattr(Sweep, "overlap", property(boom))
    sol = dsa.solve(p, "mincost_flow")
    assert sol.success, sol.message
    assert sol.offsets.tolist() == want.offsets.tolist()
    assert naive_validate(**fields(p), offsets=sol.offsets.tolist()) == []


@given(problem=problems(max_n=25), candidates=st.sampled_from(["auto", 1, 2]))
@settings(max_examples=80)
def test_the_layout_without_the_graph_gives_the_same_plan(problem, candidates):
    """The list-scanning layout (taken when the rows are dense) places every object where the
    overlap graph's layout does, fixed rows, alignments and multi-member objects included."""
    import dsa.sweep
    from dsa.sweep import Sweep

    with_graph = Sweep(problem)
    with_graph.overlap
    want = mincost_flow.solve(problem, candidates=candidates, compact=False, sweep=with_graph)
    with pytest.MonkeyPatch.context() as mp:  # every problem counts as dense
        mp.setattr(dsa.sweep, "DENSE_PAIRS", -1)
        mp.setattr(dsa.sweep, "DENSE_SHARE", 10**9)
        fresh = Sweep(problem)  # (dense unless no two rows meet)
        got = mincost_flow.solve(problem, candidates=candidates, compact=False, sweep=fresh)
        assert not (fresh.dense and "overlap" in fresh.__dict__)
    assert got.offsets.tolist() == want.offsets.tolist()
