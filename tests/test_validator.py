"""dsa.validate: one test per rule, the boundary cases, and a large plan."""
from __future__ import annotations

import numpy as np
import pytest

import dsa
from dsa import InvalidPlanError, Problem, Solution, Status
from conftest import random_problem
from naive import naive_validate


def check(problem, plan, rule, rows=None, match=None, **kw):
    with pytest.raises(InvalidPlanError, match=match) as exc:
        dsa.validate(problem, plan, **kw)
    assert exc.value.rule == rule
    if rows is not None:
        assert exc.value.rows == rows
    assert isinstance(exc.value, ValueError)
    return exc.value


P = Problem([0, 1, 4], [3, 5, 6], [4, 4, 2], alignments=[1, 2, 1])


def test_valid_plan_returns_none():
    assert dsa.validate(P, [0, 4, 0]) is None
    assert dsa.validate(P, np.array([0, 4, 0], dtype=np.uint32)) is None
    assert dsa.validate(P, np.array([0.0, 4.0, 0.0])) is None   # integral floats are accepted


@pytest.mark.parametrize("plan", [[0, 4], [0, 4, 0, 0], [[0, 4, 0]], 5])
def test_shape(plan):
    check(P, plan, "shape", (), match="expected 3 offsets")


def test_shape_solution_without_offsets():
    sol = Solution(offsets=None, peak=None, lower_bound=0, status=Status.ERROR, success=False)
    check(P, sol, "shape", match="holds no plan")


@pytest.mark.parametrize("plan", [[0, 4.5, 0], [0, np.nan, 0], ["0", "4", "0"], [0, np.inf, 0],
                                  np.array([True, False, True])])
def test_integer(plan):
    check(P, plan, "integer", match="must be integers")


def test_negative():
    check(P, [0, 4, -1], "negative", (2,), match=r"row 2: offset -1 is negative")


def test_alignment():
    check(P, [0, 5, 0], "alignment", (1,), match=r"row 1: offset 5 is not a multiple of its alignment 2")


def test_fixed():
    p = Problem([0, 0], [1, 1], [2, 2], fixed_offsets=[None, 2], ids=["a", "b"])
    dsa.validate(p, [0, 2])
    check(p, [4, 0], "fixed", (1,), match=r"row 1 \(id 'b'\): offset 0 differs from its fixed offset 2")


def test_overlap():
    err = check(P, [0, 2, 0], "overlap", (0, 1),
                match=r"row 0 and row 1 are alive at the same time and overlap in address: \[0, 4\) and \[2, 6\)")
    assert "overlap" in str(err)


def test_overlap_by_one_byte_either_way():
    p = Problem([0, 1], [5, 5], [4, 4])
    check(p, [0, 3], "overlap", (0, 1))    # the later buffer starts inside the earlier one
    check(p, [3, 0], "overlap", (0, 1))    # the later buffer ends inside the earlier one
    dsa.validate(p, [0, 4])
    dsa.validate(p, [4, 0])


def test_overlap_same_offset_and_containment():
    p = Problem([0, 2], [5, 3], [10, 2])
    check(p, [0, 0], "overlap", (0, 1))
    check(p, [0, 4], "overlap", (0, 1))    # [4, 6) inside [0, 10)
    check(p, [4, 12], "overlap", (0, 1))   # [12, 14) inside [4, 14), flush with its top
    check(p, [4, 3], "overlap", (0, 1))    # [3, 5) reaches one byte into [4, 14)
    dsa.validate(p, [4, 2])                # [2, 4) touches [4, 14) from below
    dsa.validate(p, [4, 14])               # [14, 16) touches it from above


def test_capacity():
    p = P.replace(capacity=9)
    dsa.validate(p, [0, 4, 0])
    check(p, [0, 4, 8], "capacity", (2,), match=r"row 2: ends at 10, beyond the capacity 9")
    dsa.validate(p, [0, 4, 8], check_capacity=False)


def test_capacity_skipped_for_no_fit_solutions():
    p = P.replace(capacity=9)
    common = dict(offsets=np.array([0, 4, 8]), peak=10, lower_bound=8, success=False)
    dsa.validate(p, Solution(status=Status.NO_FIT, **common))
    dsa.validate(p, Solution(status=Status.INFEASIBLE, **common))
    check(p, Solution(status=Status.FEASIBLE, **common), "capacity")
    check(p, Solution(status=Status.NO_FIT, **common), "capacity", check_capacity=True)


def test_peak():
    sol = Solution(offsets=np.array([0, 4, 0]), peak=9, lower_bound=8, status=Status.FEASIBLE, success=True)
    check(P, sol, "peak", match=r"reported peak 9 differs from max\(offset \+ size\) = 8")
    ok = Solution(offsets=np.array([0, 4, 0]), peak=8, lower_bound=8, status=Status.OPTIMAL, success=True)
    dsa.validate(P, ok)


def test_peak_of_empty_problem():
    empty = Problem([], [], [])
    dsa.validate(empty, [])
    dsa.validate(empty, np.zeros(0, dtype=np.int64))
    sol = Solution(offsets=np.zeros(0, dtype=np.int64), peak=3, lower_bound=0, status=Status.FEASIBLE, success=True)
    check(empty, sol, "peak")
    check(empty, [0], "shape")


def test_touching_lifetimes_share_memory():
    dsa.validate([(0, 3, 4), (3, 5, 4)], [0, 0])
    dsa.validate([(3, 5, 4), (0, 3, 4)], [0, 0])
    check([(0, 3, 4), (2, 5, 4)], [0, 0], "overlap", (0, 1))


def test_touching_addresses_are_fine():
    dsa.validate([(0, 5, 4), (0, 5, 4), (0, 5, 4)], [8, 0, 4])


def test_zero_size_overlaps_nothing():
    dsa.validate([(0, 5, 0), (0, 5, 4), (1, 2, 0)], [2, 0, 2])
    dsa.validate([(0, 5, 0), (0, 5, 0)], [0, 0])
    # a zero-size buffer still has to obey the other rules
    check(Problem([0], [1], [0], alignments=[4]), [2], "alignment")
    check([(0, 1, 0)], [-1], "negative")


def test_rule_order_is_documented_order():
    # negative beats alignment beats fixed beats capacity beats overlap
    p = Problem([0, 0, 0], [1, 1, 1], [2, 2, 2], alignments=[1, 2, 1], fixed_offsets=[None, None, 4], capacity=6)
    check(p, [-1, 1, 0], "negative")
    check(p, [0, 1, 0], "alignment")
    check(p, [0, 0, 0], "fixed")
    check(p, [6, 0, 4], "capacity")
    check(p, [0, 0, 4], "overlap", (0, 1))


def test_accepts_interval_lists_and_solutions():
    sol = dsa.solve([(0, 3, 4), (1, 5, 4)])
    dsa.validate([(0, 3, 4), (1, 5, 4)], sol)
    dsa.validate([(0, 3, 4), (1, 5, 4)], sol.offsets.tolist())


# ---------------------------------------------------------------- large plans
@pytest.fixture(scope="module")
def large():
    problem = random_problem(5000, seed=7)
    sol = dsa.solve(problem, "greedy_by_size")
    assert sol.success
    return problem, sol


def test_large_plan_validates(large):
    problem, sol = large
    dsa.validate(problem, sol)
    dsa.validate(problem, sol.offsets)


def _overlapping(problem, offsets, i, j) -> bool:
    s, e, z = problem.starts, problem.ends, problem.sizes
    return bool(s[i] < e[j] and s[j] < e[i] and z[i] > 0 and z[j] > 0
                and offsets[i] < offsets[j] + z[j] and offsets[j] < offsets[i] + z[i])


@pytest.mark.parametrize("trial", range(5))
def test_large_plan_perturbed(large, trial):
    problem, sol = large
    rng = np.random.default_rng(trial)
    s, e, z = problem.starts, problem.ends, problem.sizes
    while True:
        i = int(rng.integers(len(problem)))
        nbrs = np.flatnonzero((s < e[i]) & (s[i] < e) & (z > 0))
        nbrs = nbrs[nbrs != i]
        if z[i] > 0 and len(nbrs):
            break
    j = int(rng.choice(nbrs))
    offsets = sol.offsets.copy()
    # put row i one byte into row j, from above or from below, or right on top of it
    offsets[i] = [offsets[j] + z[j] - 1, max(0, offsets[j] - z[i] + 1), offsets[j]][trial % 3]
    assert _overlapping(problem, offsets, i, j)
    with pytest.raises(InvalidPlanError) as exc:
        dsa.validate(problem, offsets)
    assert exc.value.rule == "overlap"
    a, b = exc.value.rows
    assert a < b and _overlapping(problem, offsets, a, b)
    assert i in (a, b)  # the rest of the plan is valid, so every collision involves row i


def _numpy_pairwise_valid(problem, offsets) -> bool:
    """O(n^2) vectorised check (independent of the sweep)."""
    s, e, z = problem.starts, problem.ends, problem.sizes
    o = np.asarray(offsets, dtype=np.int64)
    t = (s[:, None] < e[None, :]) & (s[None, :] < e[:, None])
    a = (o[:, None] < (o + z)[None, :]) & (o[None, :] < (o + z)[:, None]) & (z[:, None] > 0) & (z[None, :] > 0)
    np.fill_diagonal(t, False)
    return not (t & a).any()


@pytest.mark.parametrize("seed", range(6))
def test_medium_random_plans_agree_with_pairwise_check(seed):
    rng = np.random.default_rng(100 + seed)
    problem = random_problem(800, seed=seed, horizon=200, max_duration=30, max_size=50)
    offsets = dsa.solve(problem, "greedy_by_breadth").offsets.copy()
    for _ in range(int(rng.integers(0, 3))):   # zero, one or two nudges of +-1..3 bytes
        k = int(rng.integers(len(problem)))
        offsets[k] = max(0, offsets[k] + int(rng.choice([-3, -2, -1, 1, 2, 3])))
    expected = _numpy_pairwise_valid(problem, offsets)
    try:
        dsa.validate(problem, offsets)
        got = True
    except InvalidPlanError as exc:
        assert exc.rule == "overlap"
        assert _overlapping(problem, offsets, *exc.rows)
        got = False
    assert got == expected


def test_naive_validate_agrees_on_a_small_handmade_plan():
    starts, ends, sizes = [0, 1, 4], [3, 5, 6], [4, 4, 2]
    assert naive_validate(starts, ends, sizes, [0, 4, 0]) == []
    assert [i.rule for i in naive_validate(starts, ends, sizes, [0, 2, 0])] == ["overlap"]


# ---------------------------------------------------------------- offsets beyond int64
@pytest.mark.parametrize("plan", [
    [2**63 - 5, 0],                                   # offset + size wraps around int64
    np.array([2**63 + 3, 0], dtype=np.uint64),        # would wrap to a negative int64
    np.array([1e19, 0.0]),                            # float beyond int64
])
def test_offsets_beyond_int64_are_rejected(plan):
    # before the check, a wrapped top made the first plan pass even with capacity 100
    p = Problem([0, 0], [1, 1], [10, 10], capacity=100)
    check(p, plan, "integer", (0,), match="64-bit integer")
    check(p, plan, "integer", (0,), check_capacity=False)


@pytest.mark.parametrize("plan, shown", [([2**64, 0], "18446744073709551616"),
                                         ([-(2**63) - 1, 0], "-9223372036854775809")])
def test_python_ints_beyond_int64_are_named_as_such(plan, shown):
    # numpy keeps these as objects: before, the message was "offsets must be integers, got dtype object"
    p = Problem([0, 0], [1, 1], [10, 10], ids=["a", "b"])
    check(p, plan, "integer", (0,), match=rf"row 0 \(id 'a'\): offset {shown} does not fit in a 64-bit integer")
    check(p, np.array([0, "1"], dtype=object), "integer", match="must be integers")  # not all ints
    dsa.validate(p, np.array([0, 10], dtype=object))  # Python ints in an object array are fine


def test_largest_representable_offset_is_fine():
    p = Problem([0, 0], [1, 1], [10, 10])
    dsa.validate(p, [2**63 - 11, 0])
    check(p.replace(capacity=100), [2**63 - 11, 0], "capacity", (0,))


def test_the_numpy_engine_checks_a_dense_plan_by_the_sweep_and_a_huge_one_by_the_kernel(monkeypatch):
    """engine="numpy" sweeps in plain Python while rows x (rows alive at once) is small enough."""
    from dsa import address_overlap

    n = 2000
    starts, ends, sizes = np.zeros(n, np.int64), np.full(n, 5), np.full(n, 8)
    offsets = (np.arange(n) * 8)[::-1].copy()
    calls = []
    real = address_overlap._sweep_overlap
    monkeypatch.setattr(address_overlap, "_sweep_overlap", lambda *a: calls.append(1) or real(*a))
    find = address_overlap.find_overlap
    assert find(starts, ends, sizes, offsets, engine="numpy") is None and calls == [1]
    offsets[7] = offsets[8] + 4
    assert find(starts, ends, sizes, offsets, engine="numpy") is not None and calls == [1, 1]
    monkeypatch.setattr(address_overlap, "SWEEP_WORK", n * n - 1)  # too much work: the kernel checks it
    assert find(starts, ends, sizes, offsets, engine="numpy") is not None and calls == [1, 1]


def test_the_engine_of_a_check_follows_the_size_alone(monkeypatch):
    """engine="auto" sweeps plans of fewer than SMALL_M rows and gives larger ones to the kernel, every
    time (whatever the process did before); an explicit engine overrides it."""
    from dsa import _kernels, address_overlap

    monkeypatch.setattr(_kernels, "FORCE", None)
    starts, ends, sizes = np.array([0, 1, 2]), np.array([2, 3, 4]), np.array([8, 8, 8])
    calls = []
    real = address_overlap._sweep_overlap
    monkeypatch.setattr(address_overlap, "_sweep_overlap", lambda *a: calls.append(1) or real(*a))
    find = address_overlap.find_overlap
    for _ in range(3):
        assert find(starts, ends, sizes, np.array([0, 8, 0])) is None
    assert find(starts, ends, sizes, np.array([0, 4, 0])) == (0, 1)
    assert calls == [1] * 4
    assert set(find(starts, ends, sizes, np.array([0, 4, 0]), engine="kernel")) == {0, 1} and calls == [1] * 4
    monkeypatch.setattr(address_overlap, "SMALL_M", 2)  # 3 rows: above the limit
    assert set(find(starts, ends, sizes, np.array([0, 4, 0]))) == {0, 1} and calls == [1] * 4
    with pytest.raises(ValueError, match="unknown engine 'gpu'"):
        find(starts, ends, sizes, np.array([0, 4, 0]), engine="gpu")


def test_a_cold_overlap_kernel_is_spared_with_the_same_verdict(monkeypatch):
    """While the overlap kernel is not compiled (a cold start), plans of up to PURE_MAX_ROWS rows are
    checked by the Python sweep: the same verdict as the kernel, on valid and broken plans."""
    import numpy as np

    from dsa import _kernels
    from dsa.address_overlap import find_overlap
    from dsa.generate import random_trace

    monkeypatch.setattr(_kernels, "FORCE", None)
    for seed in range(3):
        p = random_trace(300, seed=seed)
        good = dsa.solve(p, "greedy_by_size").offsets
        bad = good.copy()
        hit = find_overlap(p.starts, p.ends, p.sizes, np.zeros(len(p), dtype=np.int64), engine="kernel")
        bad[hit[0]] = bad[hit[1]]  # two rows that meet in time, at one offset
        for offsets in (good, bad):
            monkeypatch.setattr(_kernels, "compiled", lambda kern: False)
            cold = find_overlap(p.starts, p.ends, p.sizes, offsets)
            monkeypatch.setattr(_kernels, "compiled", lambda kern: True)
            warm = find_overlap(p.starts, p.ends, p.sizes, offsets)
            assert (cold is None) == (warm is None)
            if cold is not None:
                i, j = cold
                assert p.starts[i] < p.ends[j] and p.starts[j] < p.ends[i]
                assert offsets[i] < offsets[j] + p.sizes[j] and offsets[j] < offsets[i] + p.sizes[i]
