"""Memory pools: input checks, the validator over pools, one pool = the classic problem, exact's cost
against a brute-force optimum, conflicts irreducible by brute force, best no dearer than fastest first."""
from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsa
from dsa.pools import check_pools
from dsa.validator import InvalidPlanError
from conftest import fields
from naive import brute_force_optimum, naive_validate

POOL_STRATEGIES = ["fastest_first", "best", "exact", "mip"]
TRACES = Path(__file__).resolve().parents[2] / "shared" / "data" / "traces"


def _packs(problem, rows, cap) -> bool:
    """Brute force: rows ``rows`` alone have a plan within ``cap`` (None: always)."""
    if cap is None or not rows:
        return True
    f = fields(problem.take(list(rows)))
    return brute_force_optimum(f["starts"], f["ends"], f["sizes"], f["alignments"], f["fixed"]) <= cap


def _brute_force_cost(problem, pools, allowed):
    """The least cost over every assignment of rows to allowed pools whose pools all pack (None: none)."""
    n, k = len(problem), len(pools)
    best = None
    for assign in itertools.product(range(k), repeat=n):
        if any(not allowed[i][p] for i, p in enumerate(assign)):
            continue
        if all(_packs(problem, [i for i in range(n) if assign[i] == p], pools[p].capacity) for p in range(k)):
            cost = sum(Fraction(pools[p].cost) * int(problem.sizes[i]) for i, p in enumerate(assign))
            best = cost if best is None or cost < best else best
    return best


def _check_independently(problem, pools, allowed, sol):
    """Each pool's rows form a valid plan within its capacity (tests/naive.py), each row in an allowed pool."""
    assert sol.pool is not None and sol.offsets is not None
    for i, p in enumerate(sol.pool.tolist()):
        assert allowed[i][p], f"row {i} in pool {p}, which it may not use"
    for p, pool in enumerate(pools):
        rows = np.flatnonzero(sol.pool == p)
        errors = naive_validate(problem.starts[rows].tolist(), problem.ends[rows].tolist(), problem.sizes[rows].tolist(),
                                sol.offsets[rows].tolist(), capacity=pool.capacity)
        assert not errors, errors
        assert sol.pool_peaks[p] == (int((sol.offsets[rows] + problem.sizes[rows]).max()) if len(rows) else 0)


@st.composite
def pooled(draw, max_n=6):
    n = draw(st.integers(1, max_n))
    starts = [draw(st.integers(0, 6)) for _ in range(n)]
    ends = [s + draw(st.integers(1, 5)) for s in starts]
    sizes = [draw(st.integers(1, 8)) for _ in range(n)]
    problem = dsa.Problem(starts, ends, sizes)
    big = max(sizes)
    fast = dsa.Pool("fast", draw(st.integers(0, 2 * big)), cost=draw(st.sampled_from([1.0, 0.5, 2.0])))
    slow_cap = draw(st.one_of(st.none(), st.integers(big, 3 * big)))
    slow = dsa.Pool("slow", slow_cap, cost=draw(st.sampled_from([3.0, 10.0, 2.0])))
    pools = [fast, slow]
    allowed = []
    for i in range(n):
        options = [[True, True], [False, True], [True, False]]
        choice = draw(st.sampled_from(options))
        if not any(choice[p] and (pools[p].capacity is None or sizes[i] <= pools[p].capacity) for p in range(2)):
            choice = [True, True]
        allowed.append(choice)
    for i in range(n):  # a row must fit some pool it may use
        if not any(allowed[i][p] and (pools[p].capacity is None or sizes[i] <= pools[p].capacity) for p in range(2)):
            allowed[i] = [sizes[i] <= fast.capacity, True]
    return problem, pools, allowed


# ------------------------------------------------------------------------------ input checks
@pytest.mark.parametrize("kwargs, match", [
    ({"name": "a", "capacity": -1}, "negative"),
    ({"name": "a", "capacity": 1.5}, "integer"),
    ({"name": "a", "capacity": True}, "integer"),
    ({"name": "", "capacity": 1}, "non-empty"),
    ({"name": "a", "capacity": 1, "cost": float("nan")}, "finite"),
    ({"name": "a", "capacity": 1, "cost": -1}, "finite number >= 0"),
    ({"name": "a", "capacity": 2**63}, "2\\*\\*62"),
])
def test_bad_pool(kwargs, match):
    with pytest.raises(ValueError, match=match):
        dsa.Pool(**kwargs)


P = dsa.Problem([0, 0, 2], [4, 4, 6], [4, 8, 4])
TWO = [dsa.Pool("sram", 8), dsa.Pool("dram", None, 10)]


@pytest.mark.parametrize("kwargs, match", [
    ({"pools": []}, "empty"),
    ({"pools": [dsa.Pool("a", 8), dsa.Pool("a", 9)]}, "given twice"),
    ({"pools": TWO, "allowed": [None, "hbm", None]}, "row 1: unknown pool 'hbm'"),
    ({"pools": TWO, "allowed": [None, [], None]}, "row 1 is allowed in no pool"),
    ({"pools": TWO, "allowed": np.zeros((3, 2), dtype=bool)}, "row 0 is allowed in no pool"),
    ({"pools": TWO, "allowed": np.ones((3, 3), dtype=bool)}, "shape"),
    ({"pools": [dsa.Pool("sram", 4), dsa.Pool("tcm", 6)]}, "row 1 \\(size 8\\) is larger than every pool"),
    ({"pools": TWO, "allowed": [None, "sram", None], "weights": [1, 2, -3]}, "row 2: weight"),
    ({"pools": TWO, "weights": [1, float("nan"), 2]}, "row 1: weight"),
    ({"pools": TWO, "weights": [1, 2]}, "one value per row"),
    ({"pools": TWO, "capacity": 16}, "capacity and pools"),
    ({"pools": TWO, "allowed": 5}, "boolean matrix"),
    ({"pools": TWO, "allowed": [None, 7, None]}, "row 1: allowed pools must be"),
    ({"pools": TWO, "weights": ["a", "b", "c"]}, "weights must be numbers"),
    ({"pools": TWO, "weights": [True, False, True]}, "not booleans"),
    ({"pools": "sram"}, "list of dsa.Pool"),
    ({"pools": [("sram", 8, 1, "extra")]}, "pool 0: expected"),
    ({"pools": [{"name": "sram", "size": 8}]}, "unknown keys"),
    ({"allowed": [None, None, None]}, "give pools"),
    ({"weights": [1, 2, 3]}, "give pools"),
    ({"pools": TWO, "strategy": "greedy_by_size"}, "plans one slab only; strategies that plan over several pools: "
                                                    "best, exact, fastest_first, mip"),
    ({"pools": TWO, "strategy": "mip", "backend": "cbc"}, "'highs' backend only"),
])
def test_bad_pools_input(kwargs, match):
    kwargs = dict(kwargs)
    strategy = kwargs.pop("strategy", "best")
    with pytest.raises(ValueError, match=match):
        dsa.solve(P, strategy, **kwargs)


def test_fixed_row_needs_one_pool():
    p = dsa.Problem([0, 0], [2, 2], [4, 4], fixed_offsets=[0, None])
    with pytest.raises(ValueError, match="row 0 has a fixed offset but may use 2 pools"):
        dsa.solve(p, "best", pools=TWO)
    sol = dsa.solve(p, "exact", pools=TWO, allowed=[["dram"], None])
    assert sol.success and sol.pool.tolist() == [1, 0] and sol.offsets[0] == 0
    with pytest.raises(ValueError, match="beyond the capacity 2 of pool 'tiny'"):
        check_pools(dsa.Problem([0], [1], [2], fixed_offsets=[1]), [dsa.Pool("tiny", 2)])


# ------------------------------------------------------------------------------ one pool = the classic problem
@pytest.mark.parametrize("strategy", ["greedy_by_size", "best", "exact", "gergov"])
def test_one_pool_is_the_classic_problem(strategy):
    p = dsa.generate.random_trace(60, seed=3)
    cap = int(dsa.load(p) * 1.2)
    classic = dsa.solve(p, strategy, capacity=cap, seed=0)
    pooled = dsa.solve(p, strategy, pools=[dsa.Pool("only", cap, cost=2.0)], seed=0)
    assert pooled.status == classic.status and pooled.peak == classic.peak
    assert pooled.lower_bound == classic.lower_bound
    if strategy != "best":  # (best's search stops on the clock)
        np.testing.assert_array_equal(pooled.offsets, classic.offsets)
    assert pooled.pool.tolist() == [0] * len(p) and pooled.pool_peaks == (classic.peak,)
    assert pooled.cost == 2.0 * int(p.sizes.sum()) and pooled.pool_names == ("only",)
    dsa.validate(p, pooled)  # one pool: checked as the one slab it is
    dsa.validate(p, pooled, pools=[dsa.Pool("only", cap, cost=2.0)])


def test_one_pool_too_small_gives_the_classic_conflict():
    p = dsa.Problem([0, 0, 0, 5], [4, 4, 4, 9], [3, 3, 3, 8])
    sol = dsa.solve(p, "exact", pools=[dsa.Pool("sram", 8)])
    assert sol.status is dsa.Status.INFEASIBLE and sol.conflict == (0, 1, 2)


# ------------------------------------------------------------------------------ the validator over pools
def test_validate_pools_names_the_rule_and_the_row():
    p = dsa.Problem([0, 0, 2], [4, 4, 6], [4, 8, 4], ids=["a", "b", "c"])
    dsa.validate(p, ([1, 0, 1], [0, 0, 4]), pools=TWO)
    with pytest.raises(InvalidPlanError, match="pool 'dram': row 0 \\(id 'a'\\) and row 2 \\(id 'c'\\)") as e:
        dsa.validate(p, ([1, 0, 1], [0, 0, 2]), pools=TWO)
    assert e.value.rule == "overlap" and e.value.rows == (0, 2)
    with pytest.raises(InvalidPlanError, match="beyond the pool's capacity 8") as e:
        dsa.validate(p, ([1, 0, 0], [0, 0, 8]), pools=TWO)
    assert e.value.rule == "capacity"
    with pytest.raises(InvalidPlanError, match="which it may not use") as e:
        dsa.validate(p, ([1, 0, 1], [0, 0, 4]), pools=TWO, allowed=[None, "dram", None])
    assert e.value.rule == "allowed"
    with pytest.raises(InvalidPlanError, match="pool index 2") as e:
        dsa.validate(p, ([2, 0, 1], [0, 0, 4]), pools=TWO)
    sol = dsa.solve(p, "best", pools=TWO)
    dsa.validate(p, sol, pools=TWO)
    with pytest.raises(InvalidPlanError, match="pass pools="):
        dsa.validate(p, sol)


def test_a_strategy_whose_pool_plan_breaks_a_rule_is_an_error():
    from dsa.pools import make_pool_solution

    def liar(problem, *, context):
        return make_pool_solution(problem, context.pools, [0, 0, 0], [0, 0, 0], strategy="liar", cost_bound=0)

    sol = dsa.solve(P, liar, pools=TWO)
    assert sol.status is dsa.Status.ERROR and not sol.success and "plan failed validation" in sol.message

    def boaster(problem, *, context):  # a valid plan, and a "proven" bound above its cost
        return make_pool_solution(problem, context.pools, [1, 0, 1], [0, 0, 4], strategy="boaster", cost_bound=1e9)

    sol = dsa.solve(P, boaster, pools=TWO)
    assert sol.status is dsa.Status.ERROR and "above the cost" in sol.message


# ------------------------------------------------------------------------------ exactness and validity
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pooled())
def test_exact_cost_equals_brute_force(case):
    problem, pools, allowed = case
    sol = dsa.solve(problem, "exact", pools=pools, allowed=np.array(allowed), time_limit=20)
    truth = _brute_force_cost(problem, pools, allowed)
    if truth is None:
        assert sol.status is dsa.Status.INFEASIBLE and sol.pool is None
        conflict = list(sol.conflict)
        rows_allowed = [allowed[i] for i in conflict]
        assert _brute_force_cost(problem.take(conflict), pools, rows_allowed) is None
        for r in range(len(conflict)):  # irreducible: feasible once any one row is removed
            keep = conflict[:r] + conflict[r + 1:]
            assert _brute_force_cost(problem.take(keep), pools, [allowed[i] for i in keep]) is not None
    else:
        assert sol.status is dsa.Status.OPTIMAL, sol.message
        assert Fraction(sol.cost) == truth and sol.cost_bound == sol.cost
        _check_independently(problem, pools, allowed, sol)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pooled())
def test_mip_proves_only_what_brute_force_confirms(case):
    pytest.importorskip("scipy")
    problem, pools, allowed = case
    sol = dsa.solve(problem, "mip", pools=pools, allowed=np.array(allowed), time_limit=20)
    truth = _brute_force_cost(problem, pools, allowed)
    if sol.status is dsa.Status.INFEASIBLE:
        assert truth is None
    elif truth is None:
        assert sol.pool is None and sol.status is not dsa.Status.OPTIMAL
    else:
        assert sol.success, sol.message
        _check_independently(problem, pools, allowed, sol)
        assert Fraction(sol.cost_bound) <= truth <= Fraction(sol.cost)
        if sol.status is dsa.Status.OPTIMAL:
            assert Fraction(sol.cost) == truth


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pooled(max_n=8), st.sampled_from(POOL_STRATEGIES))
def test_every_pool_plan_is_valid(case, strategy):
    problem, pools, allowed = case
    sol = dsa.solve(problem, strategy, pools=pools, allowed=np.array(allowed), time_limit=0.2)
    if sol.pool is not None:
        assert sol.success, sol.message
        _check_independently(problem, pools, allowed, sol)
        assert sol.cost >= sol.cost_bound
        assert sum(sol.stats["pool_weights"]) == int(problem.sizes.sum())
    else:
        assert sol.status in (dsa.Status.NO_FIT, dsa.Status.INFEASIBLE)


def test_weights_decide_what_goes_to_fast_memory():
    p = dsa.Problem([0, 0], [4, 4], [8, 8])
    pools = [dsa.Pool("sram", 8, 1), dsa.Pool("dram", None, 10)]
    heavy_second = dsa.solve(p, "exact", pools=pools, weights=[1, 100])
    assert heavy_second.status is dsa.Status.OPTIMAL and heavy_second.pool.tolist() == [1, 0]
    assert heavy_second.cost == 10 * 1 + 1 * 100 and heavy_second.stats["pool_weights"] == [100, 1]
    heavy_first = dsa.solve(p, "exact", pools=pools, weights=[100, 1])
    assert heavy_first.pool.tolist() == [0, 1]


def test_infeasible_pools_come_with_a_conflict():
    # four rows alive together; two fit in each of two pools of 8, the fifth fits nowhere
    p = dsa.Problem([0] * 5, [4] * 5, [4] * 5)
    pools = [dsa.Pool("a", 8), dsa.Pool("b", 8)]
    sol = dsa.solve(p, "exact", pools=pools)
    assert sol.status is dsa.Status.INFEASIBLE and sol.conflict == (0, 1, 2, 3, 4)
    assert "conflict: rows 0, 1, 2, 3, 4" in sol.message
    for strategy in ("fastest_first", "best"):
        other = dsa.solve(p, strategy, pools=pools)
        assert other.status is dsa.Status.NO_FIT and "fits in no pool" in other.message


def test_exact_reports_a_limit_with_a_proven_bound():
    p = dsa.generate.random_trace(200, seed=1)
    load = dsa.load(p)
    pools = [dsa.Pool("sram", load // 4), dsa.Pool("dram", None, 10)]
    sol = dsa.solve(p, "exact", pools=pools, time_limit=0.5)
    assert sol.success and sol.cost >= sol.cost_bound >= dsa.solve(p, "fastest_first", pools=pools).cost_bound
    assert sol.status in (dsa.Status.OPTIMAL, dsa.Status.LIMIT_REACHED)


# ------------------------------------------------------------------------------ quality against the baseline
@pytest.mark.skipif(not TRACES.is_dir(), reason="shared DNN traces not present")
def test_best_is_never_dearer_than_fastest_first_on_dnn_traces():
    cheaper = ties = 0
    for path in sorted(TRACES.glob("*.csv")):
        p = dsa.read_csv(path)
        for share in (4, 2):
            pools = [dsa.Pool("sram", dsa.load(p) // share, 1.0), dsa.Pool("dram", None, 10.0)]
            base = dsa.solve(p, "fastest_first", pools=pools)
            ours = dsa.solve(p, "best", pools=pools, time_limit=0.3, seed=0)
            assert ours.success and ours.cost <= base.cost, (path.name, share)
            cheaper += ours.cost < base.cost
            ties += ours.cost == base.cost
    assert cheaper > ties


# ------------------------------------------------------------------------------ where users meet it
def test_cli_pools(tmp_path, capsys):
    from dsa.cli import main

    src = tmp_path / "t.csv"
    dsa.write_csv(src, dsa.Problem([0, 0, 2, 3], [4, 4, 6, 8], [4, 8, 4, 2], ids=["a", "b", "c", "d"]))
    out = tmp_path / "plan.json"
    assert main(["solve", str(src), "-s", "exact", "--pool", "sram:8:1", "--pool", "dram:none:10",
                 "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "status=optimal cost=108" in text and "pool sram: 1 buffers, peak=8 capacity=8" in text
    doc = __import__("json").loads(out.read_text())["solution"]
    assert doc["pool"] == ["dram", "sram", "dram", "dram"] and doc["cost"] == 108.0
    assert [p["name"] for p in doc["pools"]] == ["sram", "dram"] and doc["pools"][0]["capacity"] == 8
    csv_out = tmp_path / "plan.csv"
    assert main(["solve", str(src), "-s", "best", "--pool", "sram:8", "--pool", "dram:none:10", "-o",
                 str(csv_out)]) == 0
    assert csv_out.read_text().splitlines()[0] == "id,lower,upper,size,offset,pool"
    # the plans read back and check, with their pools
    for plan in (out, csv_out):
        problem, offsets, names = dsa.read_plan(plan, with_pools=True)
        assert names == ["dram", "sram", "dram", "dram"] and len(offsets) == 4
        capsys.readouterr()
        assert main(["validate", str(src), str(plan), "--pool", "sram:8", "--pool", "dram:none:10"]) == 0
        assert "valid over pools: cost 108; sram: peak 8 of 8, dram: peak 10" in capsys.readouterr().out
        assert main(["validate", str(src), str(plan), "--pool", "sram:7", "--pool", "dram:none:10"]) == 1
        assert "beyond the pool's capacity 7" in capsys.readouterr().out
    assert main(["validate", str(src), str(csv_out)]) == 2
    assert "is a plan over pools (dram, sram): give them with --pool" in capsys.readouterr().err
    # an impossible pool set: the conflict rows, with their labels
    assert main(["solve", str(src), "-s", "exact", "--pool", "a:4", "--pool", "b:8"]) == 1
    text = capsys.readouterr().out
    assert "status=infeasible" in text and "cannot fit in the pools they may use (a: 4, b: 8)" in text
    assert "id='a'" in text


@pytest.mark.parametrize("arg, match", [("sram", "NAME:CAPACITY"), ("sram:-1", "negative"),
                                        ("sram:10:x", "could not convert"), (":10", "NAME:CAPACITY")])
def test_cli_bad_pool(tmp_path, capsys, arg, match):
    from dsa.cli import main

    src = tmp_path / "t.csv"
    dsa.write_csv(src, dsa.Problem([0], [4], [4]))
    with pytest.raises(SystemExit) as exit_:
        main(["solve", str(src), "--pool", arg])
    assert exit_.value.code == 2 and match in capsys.readouterr().err


def test_heap_map_of_pools(tmp_path):
    pytest.importorskip("matplotlib")
    from dsa.plot import heap_map

    p = dsa.generate.random_trace(40, seed=2)
    pools = [dsa.Pool("sram", dsa.load(p) // 3), dsa.Pool("dram", None, 10)]
    sol = dsa.solve(p, "best", pools=pools, time_limit=0.2)
    fig = heap_map(p, sol, tmp_path / "pools.png")
    assert (tmp_path / "pools.png").stat().st_size > 1000 and len(fig.axes) == 2
    with pytest.raises(ValueError, match="one slab"):
        heap_map(p, sol, tmp_path / "pools.html")


def test_the_pools_page_examples_run(tmp_path, monkeypatch):
    import re

    page = (Path(__file__).resolve().parents[1] / "docs" / "pools.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python[^\n]*\n(.*?)^```", page, re.S | re.M)
    assert len(blocks) == 2
    monkeypatch.chdir(tmp_path)
    dsa.write_csv("trace.csv", dsa.generate.random_trace(120, seed=5))
    first = {}
    exec(compile(blocks[0], "docs/pools.md (block 1)", "exec"), first)
    assert first["sol"].success and len(first["sol"].pool_peaks) == 2
    second = {}
    exec(compile("import dsa\n" + blocks[1], "docs/pools.md (block 2)", "exec"), second)
    assert second["sol"].status is dsa.Status.INFEASIBLE and second["sol"].conflict == (0, 1, 2, 3, 4)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_solve_many_plans_pools(n_jobs):
    problems = [dsa.generate.random_trace(40, seed=s) for s in range(3)]
    pools = [dsa.Pool("sram", 200_000), dsa.Pool("dram", None, 10)]
    sols = dsa.solve_many(problems, "fastest_first", n_jobs=n_jobs, pools=pools)
    for problem, sol in zip(problems, sols):
        alone = dsa.solve(problem, "fastest_first", pools=pools)
        assert sol.success and sol.cost == alone.cost and sol.pool_peaks == alone.pool_peaks
        assert sol.pool_names == ("sram", "dram")
        dsa.validate(problem, sol, pools=pools)
    one = dsa.solve_many(problems, "greedy_by_size", n_jobs=n_jobs, pools=[dsa.Pool("only", None)])
    assert all(s.success and s.pool_names == ("only",) for s in one)


def test_gap_offset_is_the_placement_rule():
    from dsa.placement import gap_offset

    lo, hi = np.array([10, 0, 30]), np.array([20, 4, 34])  # gaps [4, 10) and [20, 30), then top 34
    assert gap_offset(lo[:0], hi[:0], 5, 1) == 0
    assert gap_offset(lo, hi, 5, 1) == 4                    # smallest gap that fits: [4, 10)
    assert gap_offset(lo, hi, 5, 1, best_fit=False) == 4    # lowest gap that fits
    assert gap_offset(lo, hi, 7, 1) == 20                   # only [20, 30) fits
    assert gap_offset(lo, hi, 5, 8) == 24                   # aligned: 8 leaves 2 bytes in [4, 10)
    assert gap_offset(lo, hi, 11, 1) == 34                  # no gap: on top


def test_messages_name_rows_one_way():
    from dsa.solution import describe_row, rows_text

    assert describe_row(dsa.Problem([0], [1], [1]), 0) == "row 0"
    assert describe_row(dsa.Problem([0], [1], [1], ids=["x"]), 0) == "row 0 (id 'x')"
    assert rows_text((1, 2)) == "1, 2"
    assert rows_text(tuple(range(20)), most=3) == "0, 1, 2, ... (20 in all)"
