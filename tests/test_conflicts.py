"""Conflicts: an INFEASIBLE capacity comes with an irreducible infeasible subset of rows
(``Solution.conflict``), checked by brute force; a filter cut short by the budget returns none."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsa
from dsa.strategies import exact
from conftest import ALIGNMENTS, fields, problems
from naive import brute_force_optimum, lowest_fit_plan


EXERCISED: list = []  # sizes of the instances the brute-force conflict test decided


def _feasible(problem, rows, cap) -> bool:
    """Brute force: a plan of ``rows`` alone fits in ``cap``."""
    f = fields(problem.take(list(rows)))
    return brute_force_optimum(f["starts"], f["ends"], f["sizes"], f["alignments"], f["fixed"]) <= cap


def _floor(problem) -> int:
    """The smallest capacity the input check accepts (the largest buffer, the highest fixed end)."""
    fixed = problem.is_fixed
    tops = (problem.fixed_offsets + problem.sizes)[fixed]
    return int(max(problem.sizes.max(initial=0), tops.max(initial=0)))


def _check_irreducible(problem, conflict, cap):
    assert conflict and list(conflict) == sorted(set(conflict))
    assert not _feasible(problem, conflict, cap), "the conflict is feasible alone"
    for r in conflict:
        rest = [i for i in conflict if i != r]
        assert _feasible(problem, rest, cap), f"the conflict without row {r} is still infeasible"


@st.composite
def crowded(draw):
    """2 to 6 rows on a short horizon (most of them alive together, so that the optimum is usually
    above the smallest capacity the input check accepts), sometimes aligned, sometimes with fixed
    rows (consistent: offsets of a valid plan, as in conftest's ``raw_problems``)."""
    n = draw(st.integers(2, 6))
    starts = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    ends = [s + d for s, d in zip(starts, draw(st.lists(st.integers(1, 4), min_size=n, max_size=n)))]
    sizes = draw(st.lists(st.one_of(st.just(0), st.integers(1, 20)), min_size=n, max_size=n))
    alignments = draw(st.lists(st.sampled_from(ALIGNMENTS), min_size=n, max_size=n)) \
        if draw(st.booleans()) else None
    fixed = None
    if draw(st.booleans()):
        plan = lowest_fit_plan(starts, ends, sizes, draw(st.permutations(range(n))), alignments)
        chosen = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=min(n, 3), unique=True))
        fixed = [plan[i] if i in chosen else -1 for i in range(n)]
    return dsa.Problem(starts, ends, sizes, alignments=alignments, fixed_offsets=fixed)


@given(problem=crowded(), data=st.data())
@settings(max_examples=500)  # (about a third of them have a capacity below the optimum to decide)
def test_conflicts_are_irreducible_by_brute_force(problem, data):
    f = fields(problem)
    opt = brute_force_optimum(f["starts"], f["ends"], f["sizes"], f["alignments"], f["fixed"])
    lo = _floor(problem)
    if lo >= opt:
        return  # (no capacity below the optimum is a valid input)
    EXERCISED.append(len(problem))
    cap = data.draw(st.integers(lo, opt - 1), label="capacity")
    sol = dsa.solve(problem, "exact", capacity=cap)
    assert sol.status is dsa.Status.INFEASIBLE
    _check_irreducible(problem, sol.conflict, cap)
    assert "conflict" in sol.message


@given(problem=problems(max_n=6), data=st.data())
@settings(max_examples=60)
def test_no_conflict_unless_infeasible(problem, data):
    f = fields(problem)
    opt = brute_force_optimum(f["starts"], f["ends"], f["sizes"], f["alignments"], f["fixed"])
    cap = data.draw(st.integers(max(opt, _floor(problem)), max(opt, _floor(problem)) + 10), label="capacity")
    sol = dsa.solve(problem, "exact", capacity=cap)
    assert sol.status is not dsa.Status.INFEASIBLE and sol.conflict is None
    assert dsa.solve(problem, "exact").conflict is None
    assert dsa.solve(problem, "greedy_by_size", capacity=cap).conflict is None


def test_load_above_capacity_gives_the_rows_of_one_section_minimised():
    # LOAD 13 at time 0..4 (rows 0-3); the capacity 10 is exceeded without row 3 too (3+3+5 = 11)
    p = dsa.Problem([0, 0, 0, 0, 6], [4, 4, 4, 4, 9], [3, 3, 5, 2, 9])
    sol = dsa.solve(p, "exact", capacity=10)
    assert sol.status is dsa.Status.INFEASIBLE and sol.conflict == (0, 1, 2)
    _check_irreducible(p, sol.conflict, 10)


def test_a_fixed_row_can_be_part_of_the_conflict():
    # row 0 is pinned at 4: row 1 (size 4) fits below it, row 2 (size 3) above it, not both rows 1
    # and 3 (size 4 each) under a capacity of 10
    p = dsa.Problem([0, 0, 0], [2, 2, 2], [3, 4, 4], fixed_offsets=[4, -1, -1])
    sol = dsa.solve(p, "exact", capacity=10)
    assert sol.status is dsa.Status.INFEASIBLE and sol.conflict == (0, 1, 2)
    _check_irreducible(p, sol.conflict, 10)
    assert dsa.solve(p.take([1, 2]), "exact", capacity=10).success


def test_alignment_conflict_found_by_the_search():
    # LOAD 10 fits 10, alignment 4 does not: three rows alive together need 0, 4, 8 + 4
    p = dsa.Problem([0, 0, 2, 6], [3, 3, 5, 8], [3, 3, 4, 9], alignments=[4, 4, 4, 1])
    sol = dsa.solve(p, "exact", capacity=10)
    assert sol.status is dsa.Status.INFEASIBLE and sol.conflict == (0, 1, 2)
    _check_irreducible(p, sol.conflict, 10)


def test_conflict_filter_directly():
    p = dsa.Problem([0, 0, 0, 5], [4, 4, 4, 9], [3, 3, 3, 8], capacity=8)
    conflict, core, info = exact.conflict_filter(p)
    assert conflict == (0, 1, 2) and core.tolist() == [0, 1, 2] and info["conflict_decisions"] >= 3
    with pytest.raises(ValueError, match="capacity"):
        exact.conflict_filter(p.replace(capacity=None))


def test_a_filter_cut_short_sets_no_conflict(monkeypatch):
    p = dsa.Problem([0, 0, 0, 0, 6], [4, 4, 4, 4, 9], [3, 3, 5, 2, 9])

    class Spent(exact.Budget):
        @property
        def exhausted(self):
            return True

    original = exact.conflict_filter

    def cut(problem, *, budget=None, seed=None, sweep=None):
        return original(problem, budget=Spent(), seed=seed, sweep=sweep)

    # a core that needs the search: the lower bound decides no subset of this one
    q = dsa.Problem([0, 0, 2, 6], [3, 3, 5, 8], [3, 3, 4, 9], alignments=[4, 4, 4, 1])
    monkeypatch.setattr(exact, "conflict_filter", cut)
    sol = dsa.solve(q, "exact", capacity=10)
    assert sol.status is dsa.Status.INFEASIBLE and sol.conflict is None
    assert sol.stats["conflict_cut"] is True
    assert set(sol.stats["infeasible_core"]) >= {0, 1, 2}
    assert "could not be minimised" in sol.message
    assert not _feasible(q, sol.stats["infeasible_core"], 10)
    sol = dsa.solve(p, "exact", capacity=10)  # (the same without a search: the bound decides)
    assert sol.status is dsa.Status.INFEASIBLE and sol.conflict is None
    assert not _feasible(p, sol.stats["infeasible_core"], 10)


def test_a_node_limit_is_respected_by_the_filter():
    q = dsa.Problem([0, 0, 2, 6], [3, 3, 5, 8], [3, 3, 4, 9], alignments=[4, 4, 4, 1])
    sol = dsa.solve(q, "exact", capacity=10, node_limit=1_000_000)
    assert sol.conflict == (0, 1, 2)
    assert sol.stats["nodes"] + sol.stats["conflict_nodes"] <= 1_000_000


def test_finalize_keeps_a_conflict_only_when_infeasible():
    from dsa.solution import finalize, make_solution

    p = dsa.Problem([0, 0], [1, 1], [4, 4], capacity=8)
    raw = make_solution(p, [0, 4], strategy="by hand", conflict=[0, 1])
    assert finalize(p, raw, 8).conflict is None  # the plan fits: no conflict
    raw = make_solution(p, [0, 4], strategy="by hand", conflict=[0, 7])
    assert raw.conflict is None  # not rows of the problem




@pytest.mark.parametrize("name", ["A.1048576", "B.1048576", "C.1048576"])
def test_minimalloc_below_best_known_conflict_or_limit(name):
    import dsa.data

    problem = dsa.data.load(name).replace(capacity=None)
    best = dsa.solve(problem, "best", time_limit=2.0, seed=0)
    step = int(problem.alignments.max(initial=1))
    cap = best.peak - step
    sol = dsa.solve(problem, "exact", capacity=cap, time_limit=5.0)
    if sol.status is dsa.Status.INFEASIBLE:
        if sol.conflict is None:
            assert sol.stats["conflict_cut"] and "could not be minimised" in sol.message
        else:
            # irreducible by exact itself: the conflict alone is infeasible, each row removed fits
            rows = list(sol.conflict)
            assert dsa.solve(problem.take(rows), "exact", capacity=cap).status is dsa.Status.INFEASIBLE
            for r in rows[:8]:
                rest = [i for i in rows if i != r]
                assert dsa.solve(problem.take(rest), "exact", capacity=cap).success
    else:
        assert sol.conflict is None
        assert sol.success or sol.status is dsa.Status.LIMIT_REACHED


def test_json_plan_carries_the_conflict(tmp_path):
    p = dsa.Problem([0, 0, 0, 5], [4, 4, 4, 9], [3, 3, 3, 8], ids=["a", "b", "c", "d"])
    sol = dsa.solve(p, "exact", capacity=8)
    path = tmp_path / "plan.json"
    dsa.io.write_json(path, p.replace(capacity=8), sol)
    doc = json.loads(path.read_text())
    assert doc["solution"]["conflict"] == [0, 1, 2]
    assert doc["solution"]["conflict_ids"] == ["a", "b", "c"]
    problem, offsets = dsa.io.read_plan(path)
    assert np.array_equal(offsets, sol.offsets)


def _infeasible():
    ids = ["in", "</script><b>x", "w", "out"]
    p = dsa.Problem([0, 0, 0, 5], [4, 4, 4, 9], [3, 3, 3, 8], ids=ids)
    return p, dsa.solve(p, "exact", capacity=8)


def test_heap_map_page_lists_the_conflict():
    from dsa._heap_html import page_data, render_page

    p, sol = _infeasible()
    assert sol.offsets is not None  # exact returns its best plan (above the capacity) for inspection
    doc = page_data(p.replace(capacity=8), sol.offsets, solution=sol)
    assert doc["conflict"] == [0, 1, 2]
    ok = dsa.solve(p, "exact", capacity=9)
    assert page_data(p, ok.offsets, solution=ok)["conflict"] == []
    page = render_page(p.replace(capacity=8), sol.offsets, solution=sol)
    assert "<b>x" not in page  # ids stay inside the escaped JSON


def test_browser_outlines_the_conflict_and_names_it_in_the_tooltip(tmp_path):
    from test_heap_html import _body, _browse, _parse
    from dsa.plot import heap_map

    p, sol = _infeasible()
    path = heap_map(p.replace(capacity=8), sol, tmp_path / "map.html")
    dom = _browse(tmp_path, f"{path.as_uri()}#hover=1", "--dump-dom")
    body = _body(dom)
    assert body.get("data-status") == "ok", body.get("data-error")
    page = _parse(dom)
    tooltip = "".join(page.tooltip)
    assert "b" not in page.tooltip_tags
    assert "conflictone of the 3 buffers that cannot fit together" in tooltip
    assert "conflict (outlined)" in dom and "3 buffers" in dom


def test_cli_prints_the_conflict_rows_with_their_ids(tmp_path, capsys):
    from dsa.cli import main

    src = tmp_path / "p.csv"
    src.write_text("id,start,end,size\nin,0,4,3\nmid,0,4,3\nw,0,4,3\nout,5,9,8\n")
    out = tmp_path / "plan.json"
    html = tmp_path / "map.html"
    code = main(["solve", str(src), "--strategy", "exact", "--capacity", "8", "--output", str(out),
                 "--plot", str(html)])
    text = capsys.readouterr().out
    assert code != 0 and "status=infeasible" in text
    assert "conflict: these 3 buffers cannot fit in the capacity 8 together" in text
    for i, label in enumerate(["in", "mid", "w"]):
        assert f"row {i} id={label!r} lifetime=[0, 5) size=3" in text  # (CSV ends are inclusive)
    assert "'out'" not in text.split("conflict:")[1]
    doc = json.loads(out.read_text())
    assert doc["solution"]["conflict_ids"] == ["in", "mid", "w"]
    assert '"conflict":[0,1,2]' in html.read_text()


def test_solve_many_carries_the_conflict():
    p, _ = _infeasible()
    sols = dsa.solve_many([p.replace(capacity=8), p.replace(capacity=9)], strategy="exact", n_jobs=1)
    assert sols[0].status is dsa.Status.INFEASIBLE and sols[0].conflict == (0, 1, 2)
    assert sols[1].success and sols[1].conflict is None


def test_a_strategy_returning_a_finalized_infeasible_solution_keeps_one_conflict_sentence():
    p, sol = _infeasible()
    again = dsa.solve(p, lambda problem: sol, capacity=8)
    assert again.status is dsa.Status.INFEASIBLE and again.conflict == (0, 1, 2)
    assert again.message.count("conflict: rows") == 1
