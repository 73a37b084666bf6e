"""The one door between the front end and the strategies.

* :class:`dsa.context.Context`: the sweep, the lower bound, the limits and the incumbent of one
  problem, shared with derived contexts.
* :func:`dsa.strategies.call`: hands a strategy the context (or its sweep) and the options it takes.
* Strategies report facts (offsets, a proven bound, ``limit_reached``); only
  :func:`dsa.solution.finalize` decides the status and the gap. :func:`dsa.solver.conclude` is the
  front end's last phase, for code that runs a strategy elsewhere.
"""
from __future__ import annotations

import ast
import warnings
from pathlib import Path

import numpy as np
import pytest

import dsa
from dsa.context import Context
from dsa.solution import Status, finalize
from dsa.solver import UnknownOptionWarning, conclude
from dsa.strategies import call, get_strategy, strategy_options
from dsa.sweep import Sweep

ROOT = Path(__file__).resolve().parents[1]
P = dsa.Problem([0, 1, 5], [2, 3, 6], [4, 8, 2])


# ---------------------------------------------------------------- Context
def test_context_holds_the_facts_of_one_problem():
    ctx = Context(P, time_limit=2, node_limit=1e3, seed=7)
    assert ctx.problem is P and isinstance(ctx.sweep, Sweep) and ctx.sweep.problem is P
    assert ctx.load == 12 and ctx.lower_bound == dsa.lower_bound(P)
    assert (ctx.time_limit, ctx.node_limit, ctx.seed) == (2.0, 1000, 7)
    assert ctx.incumbent is None and ctx.incumbent_peak is None
    budget = ctx.budget()
    assert budget.time_limit == 2.0 and budget.node_limit == 1000
    assert ctx.budget(time_limit=5).time_limit == 5.0


@pytest.mark.parametrize("bad", [{"time_limit": 0}, {"node_limit": 1.5}, {"seed": -1}])
def test_context_checks_its_limits(bad):
    with pytest.raises(ValueError):
        Context(P, **bad)


def test_a_context_takes_only_a_sweep_of_its_own_problem():
    with pytest.raises(ValueError, match="same problem"):
        Context(P, sweep=Sweep(dsa.Problem([0], [1], [1])))


def test_the_incumbent_is_the_lowest_plan_offered_and_derived_contexts_share_it():
    ctx = Context(P, time_limit=1.0)
    child = ctx.derive(time_limit=None, seed=3)
    assert child.sweep is ctx.sweep and child.time_limit is None and child.seed == 3
    assert ctx.offer([0, 4, 0]) and ctx.incumbent_peak == 12
    assert not child.offer([0, 4, 100]) and child.incumbent_peak == 12  # higher: not kept
    assert child.offer([0, 4, 0]) is False  # not lower either
    assert ctx.incumbent.tolist() == [0, 4, 0] and child.incumbent is not None
    with pytest.raises(TypeError, match="derive takes"):
        ctx.derive(sweep=None)


# ---------------------------------------------------------------- strategies.call
def test_strategy_options_read_the_signature():
    names, var_kw = strategy_options("greedy")
    assert names == {"order", "fit", "seed", "sweep"} and not var_kw
    assert "context" in strategy_options("best")[0] and "verbose" in strategy_options("exact")[0]
    assert strategy_options(lambda problem, **kw: None) == (frozenset(), True)
    with pytest.raises(ValueError, match="unknown strategy"):
        strategy_options("nope")


def test_call_hands_the_context_and_the_options_a_strategy_takes():
    seen = {}

    def takes_context(problem, *, context, sweep, seed=None, time_limit=None, colour="red"):
        seen.update(context=context, sweep=sweep, seed=seed, time_limit=time_limit, colour=colour)
        return np.zeros(len(problem), dtype=np.int64)

    ctx = Context(P, time_limit=3, seed=5)
    call(takes_context, P, ctx, colour="blue", shape="round")  # shape: not taken, dropped
    assert seen == {"context": ctx, "sweep": ctx.sweep, "seed": 5, "time_limit": 3.0, "colour": "blue"}
    call(takes_context, P, ctx, seed=9, time_limit=None)  # options override the context
    assert seen["seed"] == 9 and seen["time_limit"] is None


def test_call_gives_any_keyword_strategies_the_limits_but_not_the_context_object():
    seen = {}

    def anything(problem, **kw):
        seen.update(kw)
        return np.zeros(len(problem), dtype=np.int64)

    call(anything, P, Context(P, seed=1), order="x")
    assert set(seen) == {"seed", "sweep", "order"}


def test_call_without_a_context_builds_one():
    raw = call("greedy_by_size", P)
    assert raw.offsets is not None and raw.strategy == "greedy_by_size"


def test_solve_hands_its_strategy_one_context():
    seen = []

    def takes_context(problem, *, context, node_limit=None):
        seen.append((context, node_limit))
        return dsa.compact(problem, np.zeros(len(problem), dtype=np.int64) + 100, sweep=context.sweep)

    sol = dsa.solve(P, takes_context, time_limit=4, seed=2, node_limit=10)
    ctx, node_limit = seen[0]
    assert sol.success and ctx.problem.n == P.n and (ctx.time_limit, ctx.seed) == (4.0, 2)
    assert ctx.node_limit == 10 and node_limit == 10
    with pytest.raises(TypeError, match="context is computed by dsa.solve"):
        dsa.solve(P, takes_context, context=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownOptionWarning)
        with pytest.raises(UnknownOptionWarning, match="node_limit"):
            dsa.solve(P, "greedy", node_limit=5)  # a strategy without a node limit: warned, as before


# ---------------------------------------------------------------- facts in, status from finalize
def test_strategies_report_facts_and_finalize_decides_the_status():
    """exact proves the optimum: its raw result says so by its bound, finalize calls it OPTIMAL."""
    p = dsa.Problem([0, 0], [1, 1], [3, 3], alignments=[4, 4])
    raw = call("exact", p, Context(p))
    assert raw.status is Status.FEASIBLE and raw.lower_bound == raw.peak == 7
    assert finalize(p, raw, dsa.lower_bound(p)).status is Status.OPTIMAL
    assert dsa.solve(p, "exact").status is Status.OPTIMAL


def test_a_capacity_below_the_bound_is_infeasible_by_finalize():
    p = dsa.Problem([0, 0], [2, 2], [4, 4], capacity=6)
    raw = call("exact", p, Context(p))
    assert raw.status is Status.FEASIBLE and raw.lower_bound == 8
    assert dsa.solve(p, "exact").status is Status.INFEASIBLE


def test_a_limit_is_a_fact_of_the_raw_result():
    q = dsa.data.load("A.1048576")  # MiniMalloc's: the portfolio stays above LOAD
    p = dsa.Problem(q.starts, q.ends, q.sizes)
    raw = call("exact", p, Context(p), node_limit=1, time_limit=None)
    assert raw.status is Status.LIMIT_REACHED and "stopped the search" in raw.message
    sol = dsa.solve(p, "exact", node_limit=1)
    assert sol.status is Status.LIMIT_REACHED and sol.message == raw.message and sol.peak == raw.peak


def _strategy_modules():
    return sorted((ROOT / "dsa" / "strategies").glob("*.py"))


@pytest.mark.parametrize("path", _strategy_modules(), ids=lambda p: p.stem)
def test_no_strategy_decides_a_status_or_computes_the_gap(path):
    """Strategies never import Status, never pass ``status=`` to make_solution, never set ``gap``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "dsa.solution":
            assert "Status" not in {a.name for a in node.names}, f"{path.name} imports Status"
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "make_solution":
            assert "status" not in {k.arg for k in node.keywords}, f"{path.name}:{node.lineno} passes status="
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            key = node.slice
            assert not (isinstance(key, ast.Constant) and key.value == "gap"), f"{path.name}:{node.lineno} sets gap"
        if isinstance(node, ast.keyword) and node.arg == "gap":
            raise AssertionError(f"{path.name} sets gap")


# ---------------------------------------------------------------- conclude
def test_conclude_is_the_front_ends_last_phase():
    raw = get_strategy("greedy_by_size")(P)
    sol = conclude(P, raw)
    want = dsa.solve(P, "greedy_by_size")
    assert (sol.status, sol.peak, sol.lower_bound, sol.message) == (want.status, want.peak, want.lower_bound,
                                                                     want.message)
    assert conclude(P, [0, 4, 0], strategy="by hand").strategy == "by hand"
    bad = conclude(P, [0, 2, 0], strategy="by hand")
    assert bad.status is Status.ERROR and "failed validation" in bad.message
    assert conclude(P, None, strategy="x").status is Status.ERROR
    unchecked = conclude(P, [0, 4, 0], validate=False, extra_stats={"where": "here"})
    assert unchecked.status is Status.UNCHECKED and unchecked.stats["where"] == "here"
