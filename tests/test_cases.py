"""Tiny named cases for dsa.solve and the Solution contract."""
from __future__ import annotations

import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

import dsa
from naive import brute_force_optimum, naive_load, naive_validate

STRATEGIES = dsa.available_strategies()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_empty_problem(strategy):
    for problem in ([], dsa.Problem([], [], [])):
        sol = dsa.solve(problem, strategy)
        assert sol.peak == 0 and sol.lower_bound == 0
        assert sol.status is dsa.Status.OPTIMAL and sol.success
        assert sol.offsets.shape == (0,) and sol.offsets.dtype == np.int64
        dsa.validate(problem, sol)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_one_buffer(strategy):
    sol = dsa.solve([(3, 7, 100)], strategy)
    assert sol.offsets.tolist() == [0]
    assert sol.peak == 100 and sol.status is dsa.Status.OPTIMAL


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_touching_lifetimes_share_memory(strategy):
    # [0, 3) and [3, 5) are never alive together: both can (and should) sit at offset 0
    sol = dsa.solve([(0, 3, 8), (3, 5, 8)], strategy)
    assert sol.offsets.tolist() == [0, 0]
    assert sol.peak == 8 and sol.status is dsa.Status.OPTIMAL


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_identical_lifetimes_stack(strategy):
    sizes = [5, 3, 8, 1]
    sol = dsa.solve([(2, 6, z) for z in sizes], strategy)
    assert sol.peak == sum(sizes) and sol.status is dsa.Status.OPTIMAL
    # each buffer owns its own range: the ranges tile [0, 17)
    spans = sorted((o, o + z) for o, z in zip(sol.offsets.tolist(), sizes))
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])) and spans[0][0] == 0


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_alignment_respected(strategy):
    problem = dsa.Problem([0, 0, 0, 1], [4, 4, 4, 3], [3, 5, 7, 2], alignments=[1, 8, 16, 4])
    sol = dsa.solve(problem, strategy)
    assert sol.success
    assert all(o % a == 0 for o, a in zip(sol.offsets.tolist(), [1, 8, 16, 4]))
    assert naive_validate(problem.starts, problem.ends, problem.sizes, sol.offsets, problem.alignments) == []


def test_alignment_scalar_and_from_intervals_default():
    p = dsa.Problem.from_intervals([(0, 2, 3), (0, 2, 3)], alignment=4)
    assert p.alignments.tolist() == [4, 4]
    sol = dsa.solve(p)
    assert sorted(sol.offsets.tolist()) == [0, 4] and sol.peak == 7
    assert dsa.Problem([0], [1], [1], alignments=8).alignments.tolist() == [8]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_fixed_offsets_respected(strategy):
    # row 1 is pinned high; the others must keep clear of it while it lives
    problem = dsa.Problem([0, 0, 2, 5], [4, 6, 8, 9], [4, 2, 3, 6], fixed_offsets=[None, 10, -1, 0])
    sol = dsa.solve(problem, strategy)
    assert sol.success, sol.message
    assert sol.offsets[1] == 10 and sol.offsets[3] == 0
    assert naive_validate(problem.starts, problem.ends, problem.sizes, sol.offsets,
                          fixed=problem.fixed_offsets) == []
    assert sol.lower_bound >= 12  # the pinned buffer ends at 12


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_zero_size_buffers(strategy):
    problem = [(0, 5, 0), (0, 5, 4), (1, 2, 0), (0, 5, 6)]
    sol = dsa.solve(problem, strategy)
    assert sol.success and sol.peak == 10 and sol.status is dsa.Status.OPTIMAL
    assert sol.offsets[0] == 0 and sol.offsets[2] == 0
    only_zero = dsa.solve([(0, 1, 0), (0, 1, 0)], strategy)
    assert only_zero.offsets.tolist() == [0, 0] and only_zero.peak == 0 and only_zero.success


def test_best_fit_takes_the_smallest_gap():
    # pinned [6, 8) and [10, 12) leave gaps [0, 6) and [8, 10) for a free 2-byte buffer alive with them:
    # best fit takes the tighter gap at 8, first fit the lowest at 0 (both keep the peak at 12)
    problem = dsa.Problem([0, 0, 0], [10, 10, 10], [2, 2, 2], fixed_offsets=[6, 10, None])
    assert dsa.solve(problem, "greedy_by_size", fit="best").offsets.tolist() == [6, 10, 8]
    assert dsa.solve(problem, "greedy_by_size").offsets.tolist() == [6, 10, 0]  # the preset: lowest fit
    assert dsa.solve(problem, "greedy", fit="best").offsets.tolist() == [6, 10, 8]
    assert dsa.solve(problem, "greedy", fit="first").offsets.tolist() == [6, 10, 0]
    # a buffer that fits no gap goes on top of the highest neighbour
    big = dsa.Problem([0, 0, 0], [10, 10, 10], [2, 2, 7], fixed_offsets=[6, 10, None])
    assert dsa.solve(big, "greedy_by_size").offsets.tolist() == [6, 10, 12]


def test_best_fit_with_alignment_measures_the_aligned_gap():
    # gaps [1, 6) (aligned to 4: [4, 6), 2 bytes) and [8, 13) (aligned: [8, 13), 5 bytes);
    # a 2-byte 4-aligned buffer fits both, best fit takes [4, 6)
    problem = dsa.Problem([0, 0, 0, 0], [9, 9, 9, 9], [1, 2, 3, 2], alignments=[1, 1, 1, 4],
                          fixed_offsets=[0, 6, 13, None])
    assert dsa.solve(problem, "greedy_by_size", fit="best").offsets.tolist() == [0, 6, 13, 4]


# ---------------------------------------------------------------- capacity and status
def test_capacity_below_largest_buffer_is_an_input_error():
    with pytest.raises(ValueError, match=r"capacity 5 is smaller than the buffer at row 1 \(size 6\)"):
        dsa.solve([(0, 1, 2), (0, 1, 6)], capacity=5)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_load_above_capacity_is_infeasible(strategy):
    # 4 + 4 + 4 alive together at [1, 2): LOAD 12 > 10, yet every buffer fits alone
    sol = dsa.solve([(0, 2, 4), (1, 3, 4), (1, 2, 4)], strategy, capacity=10)
    assert sol.lower_bound == 12
    assert sol.status is dsa.Status.INFEASIBLE and not sol.success
    assert "infeasible" in sol.message
    assert sol.offsets is not None  # the plan is still there, above the capacity


# Found by a random search (tests/naive.py, seed 0) over 3..5 buffers with times < 10 and sizes
# 1..6, keeping instances where greedy_by_size's peak exceeds brute_force_optimum == LOAD; this is
# the smallest one found. By hand: greedy by size takes A (size 3), then the size-2 buffers by
# lifetime: D [1,5), B [3,6), C [3,5). A -> 0; D -> 3 (on A); B -> 0 (best fit in [0,3), A ended);
# C meets B [0,2) and D [3,5): the gap [2,3) is too small, so C -> 5 and the peak is 7. The plan
# below (peak 6 = LOAD, at [3,5): B + C + D) shows 6 is feasible.
NO_FIT_CASE = [(1, 3, 3), (3, 6, 2), (3, 5, 2), (1, 5, 2)]   # A, B, C, D
NO_FIT_OPTIMAL_PLAN = [2, 2, 4, 0]


def test_heuristic_above_capacity_is_no_fit():
    s, e, z = zip(*NO_FIT_CASE)
    assert naive_load(s, e, z) == 6 and brute_force_optimum(s, e, z) == 6
    dsa.validate(dsa.Problem(s, e, z, capacity=6), NO_FIT_OPTIMAL_PLAN)  # a plan within capacity exists
    assert naive_validate(s, e, z, NO_FIT_OPTIMAL_PLAN, capacity=6) == []
    free = dsa.solve(NO_FIT_CASE, "greedy_by_size")
    assert free.peak == 7 and free.status is dsa.Status.FEASIBLE and free.success
    sol = dsa.solve(NO_FIT_CASE, "greedy_by_size", capacity=6)
    assert sol.peak == 7 and sol.lower_bound == 6
    assert sol.status is dsa.Status.NO_FIT and not sol.success
    assert "not proven" in sol.message
    dsa.validate(dsa.Problem(s, e, z, capacity=6), sol)  # NO_FIT plans are checked without capacity
    with pytest.raises(dsa.InvalidPlanError):
        dsa.validate(dsa.Problem(s, e, z, capacity=6), sol.offsets)


def test_capacity_equal_to_peak_fits():
    sol = dsa.solve(NO_FIT_CASE, "greedy_by_size", capacity=7)
    assert sol.success and sol.status is dsa.Status.FEASIBLE and sol.peak == 7


def test_optimal_iff_peak_equals_load():
    sol = dsa.solve([(0, 3, 4), (3, 9, 4), (0, 9, 4)])
    assert (sol.peak, sol.lower_bound, sol.status) == (8, 8, dsa.Status.OPTIMAL)
    assert sol.ratio == 1.0
    sol = dsa.solve(NO_FIT_CASE, "greedy_by_size")
    assert sol.status is dsa.Status.FEASIBLE and sol.ratio == pytest.approx(7 / 6)


def test_solution_fields():
    sol = dsa.solve([(0, 3, 4), (1, 9, 4)], "greedy_by_size")
    assert isinstance(sol, dsa.Solution)
    assert sol.offsets.dtype == np.int64
    assert isinstance(sol.peak, int) and isinstance(sol.lower_bound, int)
    assert isinstance(sol.stats["time_s"], float) and sol.stats["time_s"] >= 0
    assert sol.strategy == "greedy_by_size"
    assert isinstance(sol.message, str) and sol.message
    assert sol.success is True
    assert str(sol.status) == "optimal"
    assert "optimal" in repr(sol)


def test_problem_not_modified_and_immutable():
    p = dsa.Problem([0, 1], [2, 3], [4, 5])
    with pytest.raises(AttributeError):
        p.sizes = np.array([1, 1])
    with pytest.raises(ValueError):
        p.sizes[0] = 3
    dsa.solve(p)
    assert p.sizes.tolist() == [4, 5]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_negative_times(strategy):
    # times are labels on a line; only their order matters
    sol = dsa.solve([(-5, -2, 3), (-3, 1, 4), (-2, 0, 1)], strategy)
    shifted = dsa.solve([(5, 8, 3), (7, 11, 4), (8, 10, 1)], strategy)
    assert sol.success and sol.lower_bound == 7 == shifted.lower_bound
    assert sol.offsets.tolist() == shifted.offsets.tolist()


# ---------------------------------------------------------------- the Problem object
def test_problem_basics():
    p = dsa.Problem([0, 1, 4], [3, 5, 6], [4, 4, 2], ids=["a", "b", "c"], alignments=[1, 2, 1],
                    fixed_offsets=[None, 4, None], capacity=20)
    assert len(p) == p.n == 3
    assert p.durations.tolist() == [3, 4, 2]
    assert p.is_fixed.tolist() == [False, True, False]
    assert p.is_movable.tolist() == [True, False, True]
    assert dsa.Problem([0, 0, 1], [2, 2, 3], [0, 8, 8], fixed_offsets=[None, None, 0]).is_movable.tolist() \
        == [False, True, False]  # (a row of size 0 is not placed either)
    assert all(getattr(p, f).dtype == np.int64 for f in ("starts", "ends", "sizes", "alignments", "fixed_offsets"))
    assert repr(p) == "Problem(n=3, capacity=20, fixed=1)"
    assert p == dsa.Problem.from_intervals(p.to_records(), capacity=20)
    assert p != p.replace(capacity=21)
    assert p.to_records()[1] == {"id": "b", "start": 1, "end": 5, "size": 4, "alignment": 2, "offset": 4}
    with pytest.raises(TypeError):
        hash(p)


def test_problem_take():
    p = dsa.Problem([0, 1, 4], [3, 5, 6], [4, 4, 2], ids=["a", "b", "c"], fixed_offsets=[None, 4, None],
                    capacity=20)
    sub = p.take([2, 1])
    assert list(sub.ids) == ["c", "b"] and sub.sizes.tolist() == [2, 4]
    assert sub.fixed_offsets.tolist() == [-1, 4] and sub.capacity == 20
    assert list(p.take([True, False, True]).ids) == ["a", "c"]
    for empty in ([], np.array([], dtype=np.int64), [False, False, False]):
        assert len(p.take(empty)) == 0
    assert len(dsa.Problem([], [], []).take([])) == 0


# ---------------------------------------------------------------- strategy selection and options
def test_unknown_strategy_lists_valid_ones():
    with pytest.raises(ValueError, match="unknown strategy 'nope'") as exc:
        dsa.solve([(0, 1, 1)], "nope")
    for name in STRATEGIES:
        assert name in str(exc.value)


def test_strategy_of_wrong_type():
    with pytest.raises(TypeError):
        dsa.solve([(0, 1, 1)], 42)


def test_unknown_option_warns_naming_it():
    with pytest.warns(dsa.UnknownOptionWarning, match="bogus_option"):
        sol = dsa.solve([(0, 1, 1)], "greedy_by_size", bogus_option=3)
    assert sol.success


def test_known_option_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = dsa.solve([(0, 2, 1), (1, 3, 2), (0, 3, 3)], "greedy", order="start", fit="first")
    assert a.success


def test_bad_option_value_raises():
    with pytest.raises(ValueError, match="unknown order"):
        dsa.solve([(0, 1, 1)], "greedy", order="sideways")
    with pytest.raises(ValueError, match="unknown fit"):
        dsa.solve([(0, 1, 1)], "greedy", fit="worst")


def test_bad_time_limit():
    with pytest.raises(ValueError, match="time_limit"):
        dsa.solve([(0, 1, 1)], time_limit=-1)


@pytest.mark.parametrize("alias, name", [("gbs", "greedy_by_size"), ("size", "greedy_by_size"),
                                         ("GBS", "greedy_by_size"), ("greedy-by-size", "greedy_by_size"),
                                         ("gbb", "greedy_by_breadth"), ("naive", "bump")])
def test_aliases(alias, name):
    problem = [(0, 3, 4), (1, 9, 4), (2, 4, 7), (4, 8, 2)]
    sol = dsa.solve(problem, alias)
    ref = dsa.solve(problem, name)
    assert sol.strategy == name
    assert sol.offsets.tolist() == ref.offsets.tolist()


def test_available_strategies():
    names = dsa.available_strategies()
    assert names == sorted(names)
    assert {"bump", "greedy_by_size", "greedy_by_breadth"} <= set(names)
    assert "gbs" not in names


def test_callable_strategy_returning_offsets():
    def stack(problem):
        return np.cumsum(np.r_[0, problem.sizes[:-1]])

    sol = dsa.solve([(0, 2, 3), (1, 3, 4), (0, 3, 5)], stack)
    assert sol.offsets.tolist() == [0, 3, 7]
    assert sol.peak == 12 and sol.strategy == "stack" and sol.success
    assert sol.status is dsa.Status.OPTIMAL  # LOAD is 12 at [1, 2)


def test_callable_strategy_returning_solution_and_options():
    seen = {}

    def mine(problem, *, seed=None, width=1):
        seen.update(seed=seed, width=width)
        from dsa.solution import make_solution

        return make_solution(problem, np.zeros(len(problem), dtype=np.int64), strategy="mine-v1")

    sol = dsa.solve([(0, 1, 3), (1, 2, 3)], mine, seed=7, width=2)
    assert seen == {"seed": 7, "width": 2}
    assert sol.strategy == "mine-v1" and sol.success and sol.peak == 3


def test_callable_returning_overlapping_plan_is_an_error():
    def overlap(problem):
        return [0] * len(problem)

    problem = [(0, 2, 3), (1, 3, 3)]
    sol = dsa.solve(problem, overlap)
    assert sol.status is dsa.Status.ERROR and not sol.success
    assert "overlap" in sol.message
    unchecked = dsa.solve(problem, overlap, validate=False)
    assert unchecked.status is dsa.Status.UNCHECKED and not unchecked.success
    assert unchecked.offsets.tolist() == [0, 0] and "not validated" in unchecked.message


@pytest.mark.parametrize("strategy", dsa.available_strategies())
def test_no_unvalidated_plan_is_a_success(strategy):
    """validate=False: even a good plan comes back UNCHECKED, never success=True."""
    sol = dsa.solve([(0, 2, 3), (1, 3, 3)], strategy, validate=False)
    assert sol.status is dsa.Status.UNCHECKED and not sol.success
    assert sol.stats["unchecked_status"] == dsa.solve([(0, 2, 3), (1, 3, 3)], strategy).status.value
    dsa.validate([(0, 2, 3), (1, 3, 3)], sol)  # and the user can check it


@pytest.mark.parametrize("validate", [True, False])
@pytest.mark.parametrize("bad, match", [
    ([0], r"shape \(1,\) for 2 rows"),
    ([0, 1, 2], r"shape \(3,\) for 2 rows"),
    ([0.0, float("nan")], "non-integer"),
    ([0.5, 3], "non-integer"),
    ([True, False], "non-integer"),
    (["0", "3"], "non-integer"),
    ([[0, 3]], "shape"),
])
def test_malformed_offsets_from_a_strategy_are_an_error(validate, bad, match):
    sol = dsa.solve([(0, 2, 3), (1, 3, 3)], lambda p: bad, validate=validate)
    assert sol.status is dsa.Status.ERROR and not sol.success and sol.offsets is None
    assert re.search(match, sol.message), sol.message


def test_callable_returning_misaligned_plan_is_an_error():
    problem = dsa.Problem([0], [1], [3], alignments=[4])
    sol = dsa.solve(problem, lambda p: [2])
    assert sol.status is dsa.Status.ERROR and "alignment" in sol.message


def test_solve_accepts_dicts_and_problem_capacity_override():
    p = dsa.Problem([0, 0], [2, 2], [3, 3], capacity=100)
    assert dsa.solve(p).success
    sol = dsa.solve(p, capacity=5)
    assert sol.status is dsa.Status.INFEASIBLE  # LOAD 6 > 5
    sol = dsa.solve([{"start": 0, "end": 2, "size": 3}, {"lower": 1, "upper": 4, "size": 2}])
    assert sol.peak == 5


def test_solve_rejects_non_problem():
    with pytest.raises(TypeError):
        dsa.solve("0,1,2")
    with pytest.raises(TypeError):
        dsa.solve(5)


# ---------------------------------------------------------------- imports
def test_import_dsa_is_light():
    code = ("import sys, dsa; heavy = [m for m in ('numba', 'scipy', 'matplotlib', 'torch', 'numpy') "
            "if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_solving_does_not_import_plotting_or_torch():
    # (scipy is not checked here: numba itself imports it when it is installed)
    code = ("import sys, dsa; dsa.solve([(0, 2, 3), (1, 3, 4)]); "
            "print(','.join(m for m in ('matplotlib', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_lazy_attributes():
    assert dsa.Problem is dsa.problem.Problem
    with pytest.raises(AttributeError):
        dsa.no_such_name


def test_callable_returning_none_is_an_error_solution():
    sol = dsa.solve([(0, 2, 4)], lambda problem: None)
    assert sol.status is dsa.Status.ERROR and not sol.success and sol.offsets is None
    assert "returned None" in sol.message
