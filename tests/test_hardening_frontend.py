"""The front end's checks of options and of what a strategy hands back.

Options (``time_limit``, ``node_limit``, ``seed``) are refused with a message naming them, whether
they reach a strategy through :func:`dsa.solve` or directly; a strategy's word about its plan is
checked against facts (offsets that are no plan give ERROR; INFEASIBLE needs a proven bound above the
capacity; a plan that fits is never INFEASIBLE or NO_FIT); and every status comes with a message.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import dsa
from dsa.solution import Status, finalize, make_solution, plan_peak

TWO = [(0, 2, 3), (1, 3, 5)]  # LOAD 8


# ---------------------------------------------------------------- options
@pytest.mark.parametrize("strategy", ["best", "exact", "buchsbaum", "greedy"])
@pytest.mark.parametrize("seed", [-1, "x", 1.5, True, [1, 2]])
def test_a_bad_seed_names_the_option(strategy, seed):
    # before: numpy's "expected non-negative integer" or "SeedSequence expects int..."
    kw = {"order": "random"} if strategy == "greedy" else {}
    with pytest.raises(ValueError, match=r"seed must be a non-negative integer \(or None\), got "):
        dsa.solve(TWO, strategy, seed=seed, **kw)


def test_a_bad_seed_names_the_option_in_strategies_called_directly():
    from dsa.strategies import _local_search, _orders, buchsbaum

    p = dsa.Problem.from_intervals(TWO)
    match = r"seed must be a non-negative integer \(or None\), got -1"
    with pytest.raises(ValueError, match=match):
        buchsbaum.solve(p, seed=-1)
    with pytest.raises(ValueError, match=match):
        buchsbaum.boxes(p, seed=-1)
    with pytest.raises(ValueError, match=match):
        _orders.order_rows(p, "random", -1)
    with pytest.raises(ValueError, match=match):
        _local_search.search_orders(p, np.array([0, 8]), time_limit=0.1, seed=-1)  # a plan above LOAD: it searches


def test_good_seeds_still_work():
    a = dsa.solve(TWO, "greedy", order="random", seed=np.int64(3))
    b = dsa.solve(TWO, "greedy", order="random", seed=3)
    assert a.success and np.array_equal(a.offsets, b.offsets)
    assert dsa.solve(TWO, "buchsbaum", seed=2**70).success  # any non-negative int, as numpy takes


@pytest.mark.parametrize("strategy", ["best", "exact", "mip", "greedy_by_size"])
def test_time_limit_takes_integral_numpy_scalars_and_refuses_bools(strategy):
    # before: np.int64(1) was refused while np.float64(1) and True were accepted
    for ok in (np.int64(1), np.float64(1.0), 1, 0.5):
        assert dsa.solve(TWO, strategy, time_limit=ok).success
    for bad in (True, np.True_, False, 0, -1.0, float("nan"), "1"):
        with pytest.raises(ValueError, match=r"time_limit must be a positive number of seconds, got "):
            dsa.solve(TWO, strategy, time_limit=bad)


@pytest.mark.parametrize("bad, shown", [(float("inf"), "inf"), (float("nan"), "nan"), (True, "True"),
                                        (0, "0"), (2.5, "2.5")])
def test_node_limit_names_the_option(bad, shown):
    # before: inf raised OverflowError and nan "cannot convert float NaN to integer"
    with pytest.raises(ValueError, match=rf"node_limit must be a positive integer \(None for no limit\), "
                                         rf"got {shown}"):
        dsa.solve(TWO, "exact", node_limit=bad)
    assert dsa.solve(TWO, "exact", node_limit=np.int64(1000)).success


# ---------------------------------------------------------------- offsets that are no plan
def _returns(offsets, as_solution):
    def strategy(problem):
        if as_solution:
            return make_solution(problem, offsets, strategy="hostile")
        return offsets
    return strategy


@pytest.mark.parametrize("validate", [True, False])
@pytest.mark.parametrize("as_solution", [True, False])
@pytest.mark.parametrize("offsets, match", [
    ([-8, 0], r"negative offset: row 0: offset -8 is negative"),
    ([2**63 - 4, 0], r"beyond int64: row 0: offset 9223372036854775804 plus size 8 does not fit in a 64-bit"),
    ([2**63, 0], r"row 0: offset 9223372036854775808 plus size 8 does not fit in a 64-bit integer"),
    ([0, 2**64], r"row 1: offset 18446744073709551616 plus size 8 does not fit in a 64-bit integer"),
    ([0, -(2**64)], r"row 1: offset -18446744073709551616 is negative"),
    (np.array([2**63 + 8, 0], dtype=np.uint64), r"row 0: offset 9223372036854775816 plus size 8"),
    (np.array([0.0, 2.0**63]), r"row 1: offset 9223372036854775808 plus size 8"),
])
def test_offsets_out_of_range_are_an_error_never_a_wrapped_peak(offsets, match, as_solution, validate):
    # before: peak 8 (wrapped around) and status UNCHECKED with validate=False; uint64 offsets
    # became negative; Python ints beyond int64 made make_solution raise OverflowError
    p = dsa.Problem([0, 0], [1, 1], [8, 8])
    sol = dsa.solve(p, _returns(offsets, as_solution), validate=validate)
    assert sol.status is Status.ERROR and not sol.success
    assert sol.offsets is None and sol.peak is None
    assert sol.message.startswith("the strategy returned")
    assert re.search(match, sol.message), sol.message


def test_a_hand_made_solution_with_a_wrapping_offset_is_an_error():
    p = dsa.Problem([0, 0], [1, 1], [8, 8])
    raw = dsa.Solution(offsets=np.array([2**63 - 4, 0]), peak=8, lower_bound=0, status=Status.FEASIBLE,
                       success=True)
    for validate in (True, False):
        sol = dsa.solve(p, lambda problem: raw, validate=validate)
        assert sol.status is Status.ERROR and sol.peak is None and "64-bit integer" in sol.message
    sol = finalize(p, raw, 8)
    assert sol.status is Status.ERROR and sol.peak is None


def test_plan_peak_never_wraps():
    p = dsa.Problem([0, 0], [1, 1], [8, 8], ids=["a", "b"])
    with pytest.raises(ValueError, match=r"row 0 \(id 'a'\): offset 9223372036854775804 plus size 8 does not fit"):
        plan_peak(p, np.array([2**63 - 4, 0]))
    with pytest.raises(ValueError, match=r"row 1 \(id 'b'\): offset 9223372036854775816"):
        plan_peak(p, np.array([0, 2**63 + 8], dtype=np.uint64))
    assert plan_peak(p, np.array([0, 8], dtype=np.uint32)) == 16
    assert plan_peak(p, [0, 8]) == 16 and plan_peak(p, np.array([0.0, 8.0])) == 16


# ---------------------------------------------------------------- a strategy's status against facts
CAP = dsa.Problem([0, 0], [1, 1], [8, 8], capacity=100)  # LOAD 16


def _claims(offsets, status, bound=0):
    def strategy(problem):
        return make_solution(problem, offsets, strategy="claims", status=status, lower_bound=bound)
    return strategy


@pytest.mark.parametrize("claim", [Status.INFEASIBLE, Status.NO_FIT])
def test_a_plan_that_fits_is_never_infeasible_or_no_fit(claim):
    # before: the strategy's INFEASIBLE / NO_FIT passed through although its valid plan fits
    sol = dsa.solve(CAP, _claims([0, 8], claim))
    assert sol.status is Status.OPTIMAL and sol.success
    assert f"the strategy reported {claim.value}, but its plan fits the capacity 100" in sol.message
    sol = dsa.solve(CAP, _claims([0, 16], claim))  # valid, fits, above LOAD
    assert sol.status is Status.FEASIBLE and sol.success and sol.peak == 24
    sol = dsa.solve(CAP.replace(capacity=None), _claims([0, 16], claim))
    assert sol.status is Status.FEASIBLE and "there is no capacity" in sol.message


def test_infeasible_needs_a_proven_bound_above_the_capacity():
    small = CAP.replace(capacity=20)  # LOAD 16 <= 20: not proven infeasible
    sol = dsa.solve(small, _claims([0, 16], Status.INFEASIBLE))  # plan over the capacity
    assert sol.status is Status.NO_FIT and "infeasibility is not proven" in sol.message
    sol = dsa.solve(small, _claims(None, Status.INFEASIBLE))  # no plan at all
    assert sol.status is Status.NO_FIT and not sol.success
    assert "reported infeasible without proving a lower bound above it (lower bound 16)" in sol.message
    sol = dsa.solve(small, _claims(None, Status.INFEASIBLE, bound=21))  # proven: kept
    assert sol.status is Status.INFEASIBLE and sol.lower_bound == 21
    assert sol.message == "infeasible: the lower bound 21 exceeds the capacity 20"
    sol = dsa.solve(CAP.replace(capacity=None), _claims(None, Status.INFEASIBLE))  # nothing to exceed
    assert sol.status is Status.ERROR and "no capacity to exceed" in sol.message


# ---------------------------------------------------------------- every status has a message
def test_best_limit_reached_has_a_message():
    # before: LIMIT_REACHED came with an empty message (and the CLI printed a blank line). Run from an
    # empty numba cache, the portfolio can use the whole limit (its compile time is not counted) and
    # leave no time for the improvement phase: that is LIMIT_REACHED too, not FEASIBLE
    p = dsa.data.load("D.1048576").replace(capacity=None)
    sol = dsa.solve(p, "best", time_limit=0.05)
    assert sol.status is Status.LIMIT_REACHED, sol.status
    assert sol.message.startswith("the time limit (0.05 s) ended the "), sol.message
    p = dsa.data.load("A.1048576").replace(capacity=None)
    sol = dsa.solve(p, "best", restarts=10**6, time_limit=0.05, improve=False)
    assert sol.status is Status.LIMIT_REACHED and sol.stats["portfolio_cut"]
    assert sol.message.startswith("the time limit (0.05 s) ended the portfolio at peak "), sol.message


@pytest.mark.parametrize("status, offsets, match", [
    (Status.LIMIT_REACHED, [0, 16], r"a time or node limit stopped the strategy: the best plan found has "
                                    r"peak 24, 1.5000 x the lower bound 16"),
    (Status.LIMIT_REACHED, None, r"a time or node limit stopped the strategy before it found a plan"),
    (Status.NO_FIT, None, r"no plan within the capacity 100 was found"),
    (Status.ERROR, None, r"the strategy gave no plan and no message \(status error\)"),
    (Status.ERROR, [0, 8], r"error: peak 16, lower bound 16"),
])
def test_a_status_without_a_message_gets_one(status, offsets, match):
    sol = dsa.solve(CAP, _claims(offsets, status))
    assert sol.status is status and re.search(match, sol.message), sol.message


def test_best_says_limit_reached_when_the_portfolio_used_the_whole_limit(monkeypatch):
    """All members ran (nothing was cut), but no time was left for the improvement phase: the limit,
    not the search, ended the call, so the status is LIMIT_REACHED with a message, never FEASIBLE."""
    import time as _time

    from dsa.budget import Budget
    from dsa.strategies import best

    class SpentAfterStart(Budget):
        @property
        def exhausted(self):
            return self.time_limit is not None and _time.perf_counter() > self.started

    monkeypatch.setattr(best, "Budget", SpentAfterStart)
    p = dsa.data.load("D.1048576").replace(capacity=None)  # the greedy member stays above LOAD
    sol = dsa.solve(p, "best", members=["size/first"], time_limit=5.0)
    assert not sol.stats.get("portfolio_cut") and sol.peak > dsa.lower_bound(p)
    assert sol.status is Status.LIMIT_REACHED, (sol.status, sol.message)
    assert "the improvement phase did not run" in sol.message, sol.message
