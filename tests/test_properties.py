"""Property tests over every registered strategy, against the reference code in tests/naive.py."""
from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsa
from conftest import fields, problems, raw_problems, to_problem
from naive import brute_force_optimum, lowest_fit_plan, naive_aligned_load, naive_load, naive_validate

STRATEGIES = dsa.available_strategies()


def _solve(problem, strategy, **kw):
    return dsa.solve(problem, strategy, seed=kw.pop("seed", 0), **kw)


@pytest.mark.parametrize("strategy", STRATEGIES)
@given(problem=problems())
def test_plan_is_valid(strategy, problem):
    sol = _solve(problem, strategy)
    assert sol.status is not dsa.Status.ERROR, sol.message
    assert sol.success
    assert sol.offsets.dtype == np.int64 and sol.offsets.shape == (len(problem),)
    dsa.validate(problem, sol)  # raises if invalid
    assert naive_validate(**fields(problem), offsets=sol.offsets.tolist()) == []
    assert sol.peak == max((o + z for o, z in zip(sol.offsets.tolist(), problem.sizes.tolist())), default=0)


@pytest.mark.parametrize("strategy", STRATEGIES)
@given(problem=problems())
def test_bounds_and_status(strategy, problem):
    sol = _solve(problem, strategy)
    bound = dsa.lower_bound(problem)
    assert bound <= sol.lower_bound <= sol.peak
    if sol.lower_bound > bound:
        # a strategy proved a bound stronger than LOAD: it must not exceed the true optimum
        f = fields(problem)
        assert sol.lower_bound <= brute_force_optimum(f["starts"], f["ends"], f["sizes"], f["alignments"],
                                                      f["fixed"])
    if sol.peak == sol.lower_bound:
        assert sol.status is dsa.Status.OPTIMAL
    else:
        assert sol.status in (dsa.Status.FEASIBLE, dsa.Status.LIMIT_REACHED)
    assert sol.stats["gap"] == pytest.approx((sol.peak - sol.lower_bound) / sol.peak if sol.peak else 0.0)


@pytest.mark.parametrize("strategy", STRATEGIES)
@given(problem=problems(alignment=False))
def test_no_worse_than_bump_without_alignment(strategy, problem):
    # bump's peak is (base above the fixed buffers) + the bytes of its busiest period, which bounds
    # every gap-filling placement from above when there is no alignment padding
    assert _solve(problem, strategy).peak <= _solve(problem, "bump").peak


@pytest.mark.parametrize("strategy", STRATEGIES)
@given(problem=problems(), seed=st.integers(0, 2**31 - 1))
def test_same_seed_same_plan(strategy, problem, seed):
    a = _solve(problem, strategy, seed=seed)
    b = _solve(problem, strategy, seed=seed)
    assert np.array_equal(a.offsets, b.offsets)
    assert a.peak == b.peak


@pytest.mark.parametrize("strategy", STRATEGIES)
@given(problem=problems(), data=st.data())
def test_shuffled_rows(strategy, problem, data):
    perm = data.draw(st.permutations(range(len(problem))))
    shuffled = problem.take(np.asarray(perm, dtype=np.int64))
    assert dsa.lower_bound(shuffled) == dsa.lower_bound(problem)
    sol = _solve(shuffled, strategy)
    assert sol.success, sol.message
    assert naive_validate(**fields(shuffled), offsets=sol.offsets.tolist()) == []
    # the shuffled plan, put back in the original row order, is a valid plan of the original problem
    back = np.empty(len(problem), dtype=np.int64)
    back[np.asarray(perm, dtype=np.int64)] = sol.offsets
    dsa.validate(problem, back)


@pytest.mark.parametrize("strategy", STRATEGIES)
@given(raw=raw_problems(fixed=False), capacity_extra=st.integers(-30, 30))
def test_capacity_status(strategy, raw, capacity_extra):
    """With a capacity: success iff the plan fits; otherwise INFEASIBLE iff LOAD exceeds it, else NO_FIT."""
    load = naive_load(raw["starts"], raw["ends"], raw["sizes"])
    capacity = max(max(raw["sizes"], default=0), load + capacity_extra)
    problem = to_problem(raw, capacity=capacity)
    sol = _solve(problem, strategy)
    assert sol.offsets is not None
    assert naive_validate(**fields(problem), offsets=sol.offsets.tolist()) == []
    if sol.peak <= capacity:
        assert sol.success and sol.status in (dsa.Status.OPTIMAL, dsa.Status.FEASIBLE, dsa.Status.LIMIT_REACHED)
        dsa.validate(problem, sol)
    elif sol.lower_bound > capacity:  # LOAD, or a bound the strategy proved
        assert load > capacity or sol.lower_bound > load
        assert not sol.success and sol.status is dsa.Status.INFEASIBLE
    else:
        assert not sol.success and sol.status is dsa.Status.NO_FIT
    if not sol.success:
        assert sol.message
        with pytest.raises(dsa.InvalidPlanError) as exc:
            dsa.validate(problem, sol.offsets)
        assert exc.value.rule == "capacity"


@given(problem=problems())
def test_lower_bound_is_naive_load_strengthened_by_alignment(problem):
    f = fields(problem)
    load = naive_load(f["starts"], f["ends"], f["sizes"])
    assert dsa.bounds.load(problem) == load
    fixed_tops = [o + z for o, z in zip(f["fixed"], f["sizes"]) if o >= 0]
    aligned = naive_aligned_load(f["starts"], f["ends"], f["sizes"], f["alignments"])
    assert dsa.bounds.aligned_load(problem) == aligned
    assert dsa.lower_bound(problem) == max([load, aligned] + fixed_tops)


# ---------------------------------------------------------------- the validator against naive_validate
@st.composite
def problems_with_offsets(draw):
    """A problem and an offset vector that is often valid, often invalid, often nearly valid."""
    raw = draw(raw_problems())
    problem = to_problem(raw)
    n = len(problem)
    kind = draw(st.sampled_from(["random", "valid", "perturbed", "touching", "touching"]))
    if kind == "random":
        return problem, draw(st.lists(st.integers(0, 40), min_size=n, max_size=n))
    order = draw(st.permutations(range(n)))
    offsets = lowest_fit_plan(raw["starts"], raw["ends"], raw["sizes"], order, raw["alignments"], raw["fixed"])
    if kind == "perturbed" and n:
        for _ in range(draw(st.integers(1, 2))):
            i = draw(st.integers(0, n - 1))
            offsets[i] = max(0, offsets[i] + draw(st.integers(-12, 12)))
    elif kind == "touching":
        # move row i right next to a time-neighbour j, above or below it, touching (valid) or one or
        # two bytes into it (invalid): the boundary cases of the sweep's address queries
        s, e, z = raw["starts"], raw["ends"], raw["sizes"]
        pairs = [(i, j) for i in range(n) for j in range(n)
                 if i != j and z[i] > 0 and z[j] > 0 and s[i] < e[j] and s[j] < e[i]]
        if pairs:
            i, j = draw(st.sampled_from(pairs))
            into = draw(st.integers(0, 2))
            if draw(st.booleans()):
                offsets[i] = offsets[j] + z[j] - into
            else:
                offsets[i] = offsets[j] - z[i] + into
            offsets[i] = max(0, offsets[i])
    return problem, offsets


def _every_overlap_path():
    """Run the body twice: the plain-Python sweep and the numba kernel."""
    import dsa._kernels

    for path in ("sweep", "kernel"):
        with mock.patch.object(dsa._kernels, "FORCE", path):
            yield


@given(case=problems_with_offsets())
@settings(max_examples=400)
def test_validate_agrees_with_naive(case):
    for _ in _every_overlap_path():
        _check_validate_agrees_with_naive(case)


def _check_validate_agrees_with_naive(case):
    problem, offsets = case
    issues = naive_validate(**fields(problem), offsets=offsets)
    try:
        dsa.validate(problem, offsets)
    except dsa.InvalidPlanError as exc:
        assert issues, f"dsa rejects a valid plan: {exc}"
        assert exc.rule in {issue.rule for issue in issues}, (exc.rule, issues)
        if exc.rule == "overlap":
            assert tuple(sorted(exc.rows)) in {issue.rows for issue in issues if issue.rule == "overlap"}
        else:
            assert any(issue.rows == exc.rows for issue in issues if issue.rule == exc.rule)
    else:
        assert not issues, f"dsa accepts an invalid plan: {issues}"


@given(case=problems_with_offsets())
@settings(max_examples=300)
def test_find_overlap_agrees_with_naive(case):
    """The sweep kernel alone: finds a pair iff one exists, and the pair it reports is a real one."""
    from dsa.validator import find_overlap

    problem, offsets = case
    issues = [i for i in naive_validate(problem.starts, problem.ends, problem.sizes, offsets) if i.rule == "overlap"]
    for _ in _every_overlap_path():
        pair = find_overlap(problem.starts, problem.ends, problem.sizes, offsets)
        if pair is None:
            assert not issues
        else:
            assert tuple(sorted(pair)) in {i.rows for i in issues}


@given(problem=problems(fixed=False), data=st.data())
def test_validate_stacked_columns_agree(problem, data):
    """Dense overlap patterns: offsets from a tiny range so that most rows collide or touch."""
    n = len(problem)
    offsets = data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    sizes = data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    p = dsa.Problem(problem.starts, problem.ends, sizes)
    issues = naive_validate(p.starts, p.ends, sizes, offsets)
    for _ in _every_overlap_path():
        try:
            dsa.validate(p, offsets)
            ok = True
        except dsa.InvalidPlanError:
            ok = False
        assert ok == (not issues)


# ---------------------------------------------------------------- the greedy engine's option grid
GREEDY_ORDERS = ["size", "duration", "area", "start", "conflict", "breadth", "random"]


@pytest.mark.parametrize("fit", ["best", "first"])
@pytest.mark.parametrize("order", GREEDY_ORDERS)
@given(problem=problems(), seed=st.integers(0, 1000))
@settings(max_examples=25)
def test_greedy_options_give_valid_plans(order, fit, problem, seed):
    sol = dsa.solve(problem, "greedy", order=order, fit=fit, seed=seed)
    assert sol.success, sol.message
    assert naive_validate(**fields(problem), offsets=sol.offsets.tolist()) == []
    again = dsa.solve(problem, "greedy", order=order, fit=fit, seed=seed)
    assert np.array_equal(sol.offsets, again.offsets)
    if (problem.alignments == 1).all():
        assert sol.peak <= dsa.solve(problem, "bump").peak


@given(problem=problems(), seed=st.integers(0, 1000))
@settings(max_examples=60)
def test_numpy_and_numba_engines_agree(problem, seed):
    """Small problems take a numpy loop, larger ones the numba kernel: the plans are identical."""
    import dsa._kernels
    from dsa.strategies import greedy
    from dsa.strategies._orders import order_rows

    for order in GREEDY_ORDERS:
        rows = order_rows(problem, order, seed)
        for fit in greedy.FITS:
            with mock.patch.object(dsa._kernels, "FORCE", "numpy"):
                small = greedy.greedy_offsets(problem, rows, fit)
            with mock.patch.object(dsa._kernels, "FORCE", "kernel"):
                kernel = greedy.greedy_offsets(problem, rows, fit)
                asked = greedy.greedy_offsets(problem, rows, fit, engine="numpy")  # whatever FORCE says
            assert np.array_equal(small, kernel) and np.array_equal(asked, kernel), (order, fit)


@given(problem=problems(), seed=st.integers(0, 1000))
@settings(max_examples=60)
def test_dense_and_graph_kernels_agree(problem, seed):
    """Densely overlapping problems are placed without the overlap graph: the plans are identical."""
    import dsa._kernels
    from dsa.strategies import greedy
    from dsa.strategies._orders import order_rows
    from dsa.sweep import Sweep

    for order in GREEDY_ORDERS:
        rows = order_rows(problem, order, seed)
        for fit in greedy.FITS:
            with mock.patch.object(dsa._kernels, "FORCE", "kernel"):
                graph = greedy.greedy_offsets(problem, rows, fit)
                with mock.patch.object(Sweep, "dense", property(lambda self: True)):
                    dense = greedy.greedy_offsets(problem, rows, fit)
            assert np.array_equal(graph, dense), (order, fit)


@given(problem=problems(max_n=12), perm=st.randoms(use_true_random=False))
@settings(max_examples=120)
def test_the_sweep_by_start_places_as_the_graph_kernel_does(problem, perm):
    """An order whose starts never decrease (ties in any order) is placed by a sweep over time,
    without the overlap graph: the same plans as the graph kernel, fixed rows or not (they are
    obstacles in both), and first fit is the reference lowest fit."""
    from dsa._kernels.greedy import place, place_by_start
    from dsa.sweep import Sweep

    keys = [perm.random() for _ in range(len(problem))]
    free = [r for r in range(len(problem)) if not problem.is_fixed[r]]
    rows = np.array(sorted(free, key=lambda r: (int(problem.starts[r]), keys[r])), dtype=np.int64)
    indptr, indices = Sweep(problem).overlap
    before = np.where(problem.is_fixed, problem.fixed_offsets, -1).astype(np.int64)
    for best_fit in (True, False):
        graph = before.copy()
        place(rows, problem.sizes, problem.alignments, graph, indptr, indices, best_fit, np.zeros(1, dtype=np.int64))
        swept = before.copy()
        place_by_start(rows, problem.starts, problem.ends, problem.sizes, problem.alignments, swept, best_fit,
                       np.zeros(1, dtype=np.int64))
        assert np.array_equal(graph, swept), best_fit
        if not best_fit:
            lowest = lowest_fit_plan(problem.starts.tolist(), problem.ends.tolist(), problem.sizes.tolist(),
                                     rows.tolist(), problem.alignments.tolist(), problem.fixed_offsets.tolist())
            assert [swept[r] for r in rows] == [lowest[r] for r in rows]


def test_the_sweep_by_start_meets_fixed_rows_that_start_later():
    """A fixed row that starts during a row's lifetime is an obstacle although the sweep has not
    reached it, and one that ended before the row's start is none."""
    from dsa._kernels.greedy import place_by_start

    # rows 0 and 1 are fixed at [0, 4): 0 over time [0, 2), 1 over [5, 9). The free row 2 (time
    # [3, 7), size 4) meets only row 1 and goes over it; row 3 (time [4, 6), size 2) meets rows 1
    # and 2 and goes over both
    p = dsa.Problem([0, 5, 3, 4], [2, 9, 7, 6], [4, 4, 4, 2], fixed_offsets=[0, 0, -1, -1])
    for best_fit in (True, False):
        out = np.array([0, 0, -1, -1], dtype=np.int64)
        place_by_start(np.array([2, 3], dtype=np.int64), p.starts, p.ends, p.sizes, p.alignments, out, best_fit,
                       np.zeros(1, dtype=np.int64))
        assert out.tolist() == [0, 0, 4, 8], best_fit
        dsa.validate(p, out)
    # a fixed row (1, time [2, 5), at [0, 4)) that starts where a placed row at its offset (0, time
    # [0, 2), size 2) ends: the first leaves the sweep's list before the second joins it, so that
    # row 2 (time [2, 4)) meets the fixed row and goes over it
    p = dsa.Problem([0, 2, 2], [2, 5, 4], [2, 4, 2], fixed_offsets=[-1, 0, -1])
    for best_fit in (True, False):
        out = np.array([-1, 0, -1], dtype=np.int64)
        place_by_start(np.array([0, 2], dtype=np.int64), p.starts, p.ends, p.sizes, p.alignments, out, best_fit,
                       np.zeros(1, dtype=np.int64))
        assert out.tolist() == [0, 0, 4], best_fit


@pytest.mark.parametrize("order, says", [
    ([0, 1, 5], r"order\[2\] = 5 is not a row index: the problem has rows 0\.\.3"),
    ([0, -1], r"order\[1\] = -1 is not a row index"),
    ([2, 0, 2, 1], r"order\[2\] = 2 repeats a row"),
    ([[0, 1], [2, 3]], "1-D array of row indices"),
    ([0.0, 1.0], "1-D array of row indices"),
])
def test_greedy_offsets_and_by_start_name_the_entry_of_an_order_that_is_not_a_row(order, says):
    # before, an index past the end raised numpy's IndexError, a negative one silently meant a row
    # from the end, and a repeated row left another unplaced (offset -1)
    from dsa.placement import by_start, greedy_offsets

    p = dsa.Problem([0, 0, 1, 2], [2, 3, 4, 5], [8, 8, 8, 8])
    for call in (lambda: greedy_offsets(p, order), lambda: by_start(p, order),
                 lambda: greedy_offsets(p, order, engine="numpy")):
        with pytest.raises(ValueError, match=says):
            call()
    # a partial order is not an error: the missing rows come last, by index
    assert greedy_offsets(p, [3, 1], "first").tolist() == greedy_offsets(p, [3, 1, 0, 2], "first").tolist()
    assert greedy_offsets(p, np.array([], dtype=np.int64), "first").tolist() == greedy_offsets(p, [0, 1, 2, 3],
                                                                                              "first").tolist()


def test_greedy_offsets_takes_the_sweep_only_for_orders_by_start(monkeypatch):
    import dsa._kernels
    import dsa._kernels.greedy as kernels
    import dsa.placement
    from dsa.strategies import greedy
    from dsa.strategies._orders import order_rows

    monkeypatch.setattr(dsa._kernels, "FORCE", "kernel")
    calls = []
    real = kernels.place_by_start
    monkeypatch.setattr(kernels, "place_by_start", lambda *a: calls.append(1) or real(*a))
    p = dsa.generate.rectangle_cut(60, seed=2)
    by_start = greedy.greedy_offsets(p, order_rows(p, "start"), "best")
    assert len(calls) == 1
    greedy.greedy_offsets(p, order_rows(p, "size"), "best")
    assert len(calls) == 1  # (not by start)
    # fixed rows: the sweep all the same, and the plan of the graph kernel
    pinned = p.replace(fixed_offsets=np.where(np.arange(len(p)) % 7 == 0, by_start, -1))
    swept = greedy.greedy_offsets(pinned, order_rows(pinned, "start"), "best")
    assert len(calls) == 2
    dsa.validate(pinned, swept)
    monkeypatch.setattr(dsa.placement, "by_start", lambda problem, order: False)
    assert np.array_equal(greedy.greedy_offsets(pinned, order_rows(pinned, "start"), "best"), swept)
    assert len(calls) == 2


def test_by_start_says_which_orders_the_sweep_takes():
    from dsa.placement import by_start
    from dsa.strategies._orders import order_rows

    p = dsa.Problem([0, 0, 2, 5], [3, 4, 6, 7], [4, 2, 1, 3])
    assert by_start(p, order_rows(p, "start")) and by_start(p, [1, 0, 2, 3])  # (ties in any order)
    assert not by_start(p, [2, 0, 1, 3]) and not by_start(p, [0])
    # fixed rows are not placed: where the order has them does not matter
    pinned = p.replace(fixed_offsets=[-1, -1, 0, -1])
    assert by_start(pinned, [0, 1, 2, 3]) and by_start(pinned, [2, 0, 1, 3]) and by_start(pinned, [0, 1, 3, 2])
    assert not by_start(pinned, [3, 0, 1, 2]) and not by_start(pinned, [2, 0])


@pytest.mark.parametrize("stop", [True, 1, [0], np.zeros(1, dtype=np.int32), np.zeros(2, dtype=np.int64),
                                  np.zeros((1, 1), dtype=np.int64)])
def test_greedy_offsets_refuses_a_stop_that_is_not_one_int64(stop):
    from dsa.placement import greedy_offsets

    p = dsa.generate.rectangle_cut(40, seed=0)
    with pytest.raises(ValueError, match="stop must be an int64 numpy array of one element"):
        greedy_offsets(p, np.arange(len(p)), "best", stop=stop)


@pytest.mark.parametrize("path", ["start", "graph", "dense"])
def test_a_placement_kernel_returns_at_once_when_told_to_stop(monkeypatch, path):
    # the portfolio sets the flag at the deadline: the rows not placed are left at -1
    import dsa._kernels
    from dsa.strategies import greedy
    from dsa.strategies._orders import order_rows
    from dsa.sweep import Sweep

    monkeypatch.setattr(dsa._kernels, "FORCE", "kernel")
    p = dsa.generate.rectangle_cut(400, seed=1)
    rows = order_rows(p, "start" if path == "start" else "size")
    sweep = Sweep(p)
    if path == "dense":
        monkeypatch.setattr(Sweep, "dense", property(lambda self: True))
    go, halt = np.zeros(1, dtype=np.int64), np.ones(1, dtype=np.int64)
    assert (greedy.greedy_offsets(p, rows, "best", sweep=sweep, stop=go) >= 0).all()
    assert (greedy.greedy_offsets(p, rows, "best", sweep=sweep, stop=halt) == -1).all()


@given(problem=problems())
def test_sweep_counts_the_overlapping_pairs(problem):
    from dsa.sweep import Sweep

    s, e = problem.starts.tolist(), problem.ends.tolist()
    n = len(problem)
    assert Sweep(problem).n_overlaps == sum(s[i] < e[j] and s[j] < e[i] for i in range(n) for j in range(i))


@given(problem=problems())
@settings(max_examples=50)
def test_named_greedies_are_presets_of_the_engine(problem):
    for name, order in (("greedy_by_size", "size"), ("greedy_by_breadth", "breadth")):
        for fit in ("best", "first"):
            preset = dsa.solve(problem, name, fit=fit)
            engine = dsa.solve(problem, "greedy", order=order, fit=fit)
            assert np.array_equal(preset.offsets, engine.offsets), (name, fit)


@given(raw=raw_problems(), data=st.data(), validate=st.booleans(), as_solution=st.booleans())
@settings(max_examples=300)
def test_no_invalid_plan_is_ever_a_success(raw, data, validate, as_solution):
    """A strategy that returns anything at all: success is reported only for a valid plan."""
    from dsa.solution import Status, make_solution

    problem = to_problem(raw)
    n = len(problem)
    offsets = data.draw(st.lists(st.integers(-3, 40), min_size=n, max_size=n))
    claimed = data.draw(st.sampled_from([Status.OPTIMAL, Status.FEASIBLE, Status.LIMIT_REACHED]))
    bound = data.draw(st.integers(0, 60))

    def hostile(p):
        if as_solution:
            return make_solution(p, offsets, strategy="hostile", status=claimed, lower_bound=bound)
        return offsets

    sol = dsa.solve(problem, hostile, validate=validate)
    if sol.success:
        assert validate
        assert naive_validate(**fields(problem), offsets=sol.offsets.tolist()) == []
        assert sol.lower_bound <= sol.peak
