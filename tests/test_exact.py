"""The ``exact`` strategy: proven optima on tiny instances (against brute force), decision mode,
limits and progress output."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

import dsa
from dsa.strategies import _canonical_search as canonical
from dsa.strategies import best
from conftest import fields, problems
from naive import brute_force_optimum, naive_validate

EXAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "minimalloc" / "examples" / "input.12.csv"
# the MiniMalloc README example (5 buffers, LOAD 12), inline so the test does not need the data folder
EXAMPLE_ROWS = [(0, 3, 4), (3, 9, 4), (0, 9, 4), (9, 21, 4), (0, 21, 4)]


def _optimum(problem) -> int:
    f = fields(problem)
    return brute_force_optimum(f["starts"], f["ends"], f["sizes"], f["alignments"], f["fixed"])


@given(problem=problems(max_n=7))
@settings(max_examples=150)
def test_tiny_instances_are_solved_and_proven_optimal(problem):
    sol = dsa.solve(problem, "exact")
    assert naive_validate(**fields(problem), offsets=sol.offsets.tolist()) == []
    assert sol.peak == _optimum(problem)
    assert sol.status is dsa.Status.OPTIMAL and sol.lower_bound == sol.peak


@given(problem=problems(max_n=7))
@settings(max_examples=100)
def test_decision_mode_agrees_with_brute_force(problem):
    opt = _optimum(problem)
    biggest = int(problem.sizes.max(initial=0))
    fixed_top = int((problem.fixed_offsets + problem.sizes)[problem.is_fixed].max(initial=0))
    for cap in {opt - 1, opt}:
        if cap < max(biggest, fixed_top, 0):
            continue
        sol = dsa.solve(problem, "exact", capacity=cap)
        if cap >= opt:
            assert sol.success and sol.peak <= cap
        else:
            assert sol.status is dsa.Status.INFEASIBLE and sol.lower_bound == cap + 1


def _example():
    if EXAMPLE.exists():
        return dsa.io.read_csv(EXAMPLE)
    return dsa.Problem.from_intervals(EXAMPLE_ROWS)


def test_minimalloc_example_fits_12_and_not_11():
    p = _example()
    sol = dsa.solve(p, "exact", capacity=12)
    assert sol.success and sol.peak == 12
    sol = dsa.solve(p, "exact", capacity=11)
    assert sol.status is dsa.Status.INFEASIBLE and not sol.success and sol.lower_bound >= 12


def test_the_greedy_members_then_a_first_look_then_the_whole_portfolio():
    """Minimising, and deciding the bound itself, the first look at the bound comes after the
    greedy members and before the costlier members of the portfolio; a plan of the greedy members
    that reaches the bound, or that fits a looser capacity, is the answer with no search."""
    greedy = [f"{order}/{fit}" for order, fit in best.MEMBERS]
    e = dsa.data.load("E.1048576").replace(capacity=None)  # the greedy members stay above LOAD
    greedy_peak = dsa.solve(e, "best", improve=False, members=greedy).peak
    assert greedy_peak > dsa.load(e)
    for sol in (dsa.solve(e, "exact"), dsa.solve(e, "exact", capacity=dsa.load(e))):
        assert sol.status is dsa.Status.OPTIMAL and sol.peak == dsa.load(e)
        assert sol.stats["first_look"] and sol.stats["portfolio_peak"] == greedy_peak
        assert sol.stats["nodes"] > 0
    sol = dsa.solve(e, "exact", capacity=greedy_peak)
    assert sol.status is dsa.Status.FEASIBLE and sol.peak == sol.stats["portfolio_peak"] == greedy_peak
    assert sol.stats["nodes"] == sol.stats["probes"] == 0 and not sol.stats["first_look"]
    trace = dsa.data.load("resnet18_b1_224")  # a real trace: a greedy member reaches LOAD
    sol = dsa.solve(trace, "exact")
    assert sol.status is dsa.Status.OPTIMAL and sol.stats["nodes"] == 0 and not sol.stats["first_look"]


def test_the_first_look_takes_at_most_a_tenth_of_the_time_left(monkeypatch):
    """Under a time limit the look at the bound gets a share of it; the rest goes to the portfolio
    and the improvement rounds (their searches of the bound go on from the look's)."""
    import time

    seen = []
    real = canonical.CanonicalSearch.first_look

    def spy(self, *, deadline=None, node_limit=None):
        seen.append(deadline - time.perf_counter())
        return real(self, deadline=deadline, node_limit=node_limit)

    monkeypatch.setattr(canonical.CanonicalSearch, "first_look", spy)
    d = dsa.data.load("D.1048576").replace(capacity=None)
    sol = dsa.solve(d, "exact", time_limit=2.0)
    assert len(seen) == 1 and 0 < seen[0] <= canonical.FIRST_LOOK_TIME * 2.0
    assert sol.status is dsa.Status.LIMIT_REACHED and not sol.stats["first_look"]


def test_decision_mode_proves_infeasibility_by_search():
    # a 1-byte 4-aligned and a 2-byte 2-aligned buffer alive together: LOAD and the aligned bound
    # are 3, but every plan needs 4 (the 2-byte one at 2 above the other): only the search can tell
    p = dsa.Problem([0, 0], [1, 1], [1, 2], alignments=[4, 2])
    sol = dsa.solve(p, "exact", capacity=3)
    assert dsa.load(p) == 3 and dsa.lower_bound(p) == 3
    assert sol.status is dsa.Status.INFEASIBLE and sol.lower_bound == 4
    assert sol.stats["proofs"] == [3]
    sol = dsa.solve(p, "exact")
    assert (sol.peak, sol.lower_bound, sol.status) == (4, 4, dsa.Status.OPTIMAL)


def test_challenging_instance_reaches_load():
    p = dsa.data.load("H.1048576").replace(capacity=None)
    sol = dsa.solve(p, "exact", time_limit=30)
    assert sol.status is dsa.Status.OPTIMAL and sol.peak == dsa.load(p)


def test_time_limit_returns_the_incumbent_with_limit_reached():
    p = dsa.data.load("D.1048576").replace(capacity=None)  # optimum unknown, above LOAD
    portfolio = dsa.solve(p, "best", improve=False)
    sol = dsa.solve(p, "exact", time_limit=0.5)
    assert sol.status is dsa.Status.LIMIT_REACHED and sol.success
    assert sol.message.startswith(f"the time limit stopped the search at peak {sol.peak}"), sol.message
    assert sol.peak <= portfolio.peak and sol.lower_bound == dsa.load(p)
    # the message above is written only when the deadline stopped the search; how far past its limit a
    # call returns is measured by benchmarks/time_limits.py, not asserted here (a loaded machine)
    assert sol.stats["nodes"] > 0
    assert sol.stats["gap"] == pytest.approx((sol.peak - sol.lower_bound) / sol.peak)


def test_node_limit_is_honoured():
    p = dsa.data.load("D.1048576").replace(capacity=None)
    sol = dsa.solve(p, "exact", node_limit=3000)
    assert sol.status is dsa.Status.LIMIT_REACHED and "the node limit stopped" in sol.message
    assert 0 < sol.stats["nodes"] <= 3000
    dec = dsa.solve(p, "exact", capacity=990_000, node_limit=3000)
    assert dec.stats["nodes"] <= 3000 and dec.status is not dsa.Status.INFEASIBLE
    if dec.status is dsa.Status.LIMIT_REACHED:
        assert "within the capacity 990000" in dec.message, dec.message


def test_verbose_prints_progress_on_stderr(capsys):
    p = dsa.data.load("D.1048576").replace(capacity=None)
    dsa.solve(p, "exact", time_limit=0.3, verbose=True)
    out = capsys.readouterr()
    assert out.out == ""
    lines = out.err.strip().splitlines()
    assert lines[0].startswith("exact:") and "incumbent" in lines[1] and "gap" in lines[1]
    assert "done: limit_reached" in lines[-1]
    # the first line is the greedy members' plan, logged before the first look and the strategy
    # members run (the header's portfolio peak is that plan's)
    assert lines[2].endswith("plan of the portfolio's greedy members")
    assert lines[2].split()[2] == lines[0].rsplit(" ", 1)[1]


def test_identical_buffers_are_interchangeable():
    # six identical buffers and a blocker: symmetry breaking must not lose the optimum
    p = dsa.Problem([0] * 6 + [0], [4] * 6 + [2], [3] * 6 + [5], alignments=[2] * 6 + [1])
    sol = dsa.solve(p, "exact")
    assert sol.status is dsa.Status.OPTIMAL and sol.peak == _optimum(p)
    assert np.unique(sol.offsets[:6]).size == 6


def test_cli_prints_the_proven_bound(tmp_path, capsys):
    from dsa.cli import main

    path = tmp_path / "two.csv"
    path.write_text("id,lower,upper,size,alignment\na,0,1,3,4\nb,0,1,3,4\n")
    main(["solve", str(path), "--strategy", "exact", "--time-limit", "5"])
    out = capsys.readouterr().out
    assert "optimal" in out and "7" in out


def test_a_raced_search_gives_the_same_plan_every_time(monkeypatch):
    """Without a node limit the preorders race, but a plan at the bound stops only later preorders:
    the first preorder that plans within its share wins whichever thread finishes first. On A
    both TWA and TCA plan at LOAD; the plan must not depend on which one gets there first."""

    monkeypatch.setattr(canonical, "THREADS", 2)
    p = dsa.data.load("A.1048576").replace(capacity=None)
    plans = [dsa.solve(p, "exact", time_limit=60) for _ in range(3)]
    assert all(s.status is dsa.Status.OPTIMAL and s.stats["threads"] == 2 for s in plans)
    assert all(np.array_equal(plans[0].offsets, s.offsets) for s in plans[1:])
    decided = [dsa.solve(p.replace(capacity=dsa.load(p)), "exact", time_limit=60) for _ in range(3)]
    assert all(np.array_equal(decided[0].offsets, s.offsets) for s in decided[1:])


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", ["E", "A"])  # planned by the first look at the bound; by improve
def test_a_node_limited_search_is_deterministic_on_any_number_of_threads(name, threads, monkeypatch):
    """Probes side by side are applied in preorder order: under a node limit, the same plan every time
    (minimising, and deciding a capacity)."""

    p = dsa.data.load(f"{name}.1048576").replace(capacity=None)
    monkeypatch.setattr(canonical, "THREADS", threads)
    first = dsa.solve(p, "exact", node_limit=1_000_000)
    again = dsa.solve(p, "exact", node_limit=1_000_000)
    assert first.stats["first_look"] == (name == "E")
    assert first.status is dsa.Status.OPTIMAL and first.peak == dsa.load(p)
    assert first.stats["threads"] == threads
    assert np.array_equal(first.offsets, again.offsets)
    dsa.validate(p, first)
    # decision mode races its preorders too: under a node limit each runs its share, same plan
    decide = [dsa.solve(p.replace(capacity=dsa.load(p)), "exact", node_limit=1_000_000) for _ in range(2)]
    assert decide[0].status is dsa.Status.OPTIMAL and decide[0].stats["threads"] == threads
    assert decide[0].stats["nodes"] == decide[1].stats["nodes"]
    assert np.array_equal(decide[0].offsets, decide[1].offsets)
    dsa.validate(p.replace(capacity=dsa.load(p)), decide[0])


# -- the time limit covers the portfolio too --------------------------------------------------------

def _spy_portfolio(monkeypatch):
    """Record the keyword arguments of every portfolio run of ``exact`` and the members it ran."""
    calls = []
    real = best.solve

    def spy(problem, **kw):
        sol = real(problem, **kw)
        calls.append({**kw, "ran": list(sol.stats["peaks"])})
        return sol

    monkeypatch.setattr(best, "solve", spy)
    return calls


def test_the_costlier_members_run_once_and_only_where_the_time_left_holds_them(monkeypatch):
    """After the greedy members and the first look, exact runs best's strategy members alone (the
    greedy ones are not run twice), with the options best gives them; it skips those for which the
    time left is less than their waves (best.member_waves) times the longest greedy wave, and then
    says the portfolio was cut."""
    e = dsa.data.load("E.1048576").replace(capacity=None)  # the greedy members stay above LOAD
    monkeypatch.setattr(canonical, "FIRST_LOOK", 0)  # (no plan at the bound from the first look)
    calls = _spy_portfolio(monkeypatch)
    sol = dsa.solve(e, "exact", time_limit=5.0)
    greedy = [f"{order}/{fit}" for order, fit in best.MEMBERS]
    assert [c["members"] for c in calls] == [greedy, list(best.STRATEGY_MEMBERS)]
    assert calls[1]["ran"] == [name for name, _ in best.STRATEGY_MEMBERS]
    assert not sol.stats.get("portfolio_cut")
    calls.clear()
    monkeypatch.setattr(best, "MEMBER_WAVES", {"mincost_flow": 10**9})  # (only that one is too long)
    sol = dsa.solve(e, "exact", time_limit=5.0)
    assert [c["members"] for c in calls] == [greedy, list(best.STRATEGY_MEMBERS[:2])]
    assert sol.stats["portfolio_cut"]
    calls.clear()
    monkeypatch.setattr(best, "STRATEGY_WAVES", 10**9)
    sol = dsa.solve(e, "exact", time_limit=5.0)
    assert [c["members"] for c in calls] == [greedy] and sol.stats["portfolio_cut"]


def test_the_portfolio_runs_within_the_time_left(monkeypatch):
    """exact hands its portfolio what is left of its time limit (not the portfolio's own default
    of a second), and no limit when it has none."""
    calls = _spy_portfolio(monkeypatch)
    e = dsa.data.load("E.1048576").replace(capacity=None)
    dsa.solve(e, "exact", time_limit=5.0)
    assert calls and all(c.get("time_limit") is not None and 0 < c["time_limit"] <= 5.0 for c in calls)
    calls.clear()
    dsa.solve(dsa.Problem.from_intervals(EXAMPLE_ROWS), "exact")
    assert calls and all("time_limit" in c and c["time_limit"] is None for c in calls)


def test_minimising_under_a_time_limit_the_portfolio_is_held_back_as_in_best(monkeypatch):
    """exact hands its portfolio best's hold (best.portfolio_hold of its time limit): with the hold
    at 0 only the first greedy member runs and no costlier one starts (stats["portfolio_held"]);
    deciding a capacity, or without a time limit, nothing is held back."""
    monkeypatch.setattr(best, "PORTFOLIO_SHARE", 0.0)
    monkeypatch.setattr(best, "PORTFOLIO_MIN_S", 0.0)
    calls = _spy_portfolio(monkeypatch)
    e = dsa.data.load("E.1048576").replace(capacity=None)  # (no greedy member reaches LOAD)
    sol = dsa.solve(e, "exact", time_limit=3.0)
    assert sol.success and sol.stats["portfolio_held"] and not sol.stats.get("portfolio_cut")
    assert [c["ran"] for c in calls] == [["size/first"]]
    calls.clear()
    capped = e.replace(capacity=int(dsa.solve(e, "greedy_by_size").peak))
    sol = dsa.solve(capped, "exact", time_limit=3.0)
    assert sol.success and calls and all(c["portfolio_time"] is None for c in calls)
    assert not sol.stats.get("portfolio_held")
    calls.clear()
    dsa.solve(dsa.Problem.from_intervals(EXAMPLE_ROWS), "exact")
    assert calls and all(c["portfolio_time"] is None for c in calls)


def test_a_spent_budget_still_gives_the_first_members_plan(monkeypatch):
    """With the time already spent when the call starts, exact runs only the portfolio's first
    member (greedy by size, first fit: there must be a plan), skips the costlier members and the
    search, and says LIMIT_REACHED with that plan, validated."""
    import time

    from dsa.budget import Budget
    from dsa.strategies import exact

    class Spent(Budget):
        @property
        def deadline(self):
            return None if self.time_limit is None else time.perf_counter() - 1.0

        def remaining(self):
            return 0.0 if self.time_limit is not None else float("inf")

        @property
        def exhausted(self):
            return self.time_limit is not None

    monkeypatch.setattr(exact, "Budget", Spent)
    calls = _spy_portfolio(monkeypatch)
    e = dsa.data.load("E.1048576").replace(capacity=None)  # the greedy members stay above LOAD
    sol = dsa.solve(e, "exact", time_limit=10.0)
    assert len(calls) == 1 and calls[0]["ran"] == ["size/first"]
    assert calls[0]["time_limit"] <= exact.MIN_PORTFOLIO_S
    assert sol.status is dsa.Status.LIMIT_REACHED and sol.success and sol.stats["portfolio_cut"]
    assert sol.message.endswith("the portfolio was cut short"), sol.message
    assert sol.stats["nodes"] == 0
    first = dsa.solve(e, "best", members=["size/first"], improve=False)
    assert sol.peak == first.peak > dsa.load(e)
    assert naive_validate(**fields(e), offsets=sol.offsets.tolist()) == []
