"""The planning context shared by strategies: Sweep, Budget, compact, proven bounds, registry capabilities."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsa
from conftest import fields, problems, raw_problems, to_problem
from dsa.budget import Budget
from dsa.solution import make_solution
from dsa.strategies import StrategyInfo, strategy_info
from dsa.sweep import Sweep, period_labels, rows_by_label
from naive import brute_force_optimum, lowest_fit_plan, naive_load, naive_validate


# ---------------------------------------------------------------- Sweep against brute force
@given(problem=problems())
def test_sweep_overlap_graph_is_the_time_overlap_graph(problem):
    indptr, indices = Sweep(problem).overlap
    s, e = problem.starts.tolist(), problem.ends.tolist()
    n = len(problem)
    for i in range(n):
        got = sorted(indices[indptr[i]:indptr[i + 1]].tolist())
        assert got == [j for j in range(n) if j != i and s[i] < e[j] and s[j] < e[i]]


@given(problem=problems())
def test_sweep_sections_and_load(problem):
    sw = Sweep(problem)
    f = fields(problem)
    assert sw.load == naive_load(f["starts"], f["ends"], f["sizes"])
    for k, t in enumerate(sw.times.tolist()):
        alive = sum(z for a, b, z in zip(f["starts"], f["ends"], f["sizes"]) if a <= t < b)
        assert sw.live[k] == alive
    for i in range(len(problem)):
        assert sw.times[sw.first_section[i]] == f["starts"][i]
        assert sw.times[sw.last_section[i] + 1] == f["ends"][i]


@given(problem=problems())
def test_sweep_busy_periods(problem):
    sw = Sweep(problem)
    labels = sw.periods.tolist()
    s, e = problem.starts.tolist(), problem.ends.tolist()
    n = len(problem)
    # rows that meet share a period; rows of one period are chained by meetings; periods in time order
    for i in range(n):
        for j in range(n):
            if s[i] < e[j] and s[j] < e[i]:
                assert labels[i] == labels[j]
            if labels[i] < labels[j]:
                assert e[i] <= s[j]
    rows = sw.period_rows()
    assert len(rows) == sw.n_periods
    assert sorted(np.concatenate(rows).tolist() if rows else []) == list(range(n))
    # the module's functions on bare arrays (dsa.strategies._layers cuts blocks with them)
    assert period_labels(problem.starts, problem.ends).tolist() == labels
    assert [r.tolist() for r in rows_by_label(sw.periods)] == [r.tolist() for r in rows]
    assert all(labels[i] == k for k, r in enumerate(rows) for i in r)


def test_sweep_is_lazy_and_cached():
    sw = Sweep(dsa.Problem([0, 2], [3, 4], [1, 1]))
    assert "overlap" not in repr(sw)
    first = sw.overlap
    assert sw.overlap is first and "overlap" in repr(sw)


def test_solve_hands_one_sweep_to_strategies_that_take_it():
    seen = []

    def takes_sweep(problem, *, sweep):
        seen.append(sweep)
        assert sweep.problem is problem
        return dsa.compact(problem, np.zeros(len(problem), dtype=np.int64) + 100, sweep=sweep)

    sol = dsa.solve([(0, 2, 3), (1, 3, 4)], takes_sweep)
    assert sol.success and sol.peak == 7 and isinstance(seen[0], Sweep)
    with pytest.raises(TypeError, match="sweep is computed by dsa.solve"):
        dsa.solve([(0, 2, 3)], takes_sweep, sweep=None)


# ---------------------------------------------------------------- Budget
def test_budget_nodes():
    b = Budget(node_limit=10)
    assert b.grant(4) == 4
    b.spend(4)
    assert b.grant(100) == 6 and not b.exhausted
    b.spend(6)
    assert b.exhausted and b.grant(1) == 0 and b.nodes == 10
    assert Budget().remaining() == float("inf") and not Budget().exhausted


def test_budget_time():
    b = Budget(time_limit=1e-9)
    while not b.exhausted:
        pass
    assert b.grant(5) == 0 and b.remaining() == 0.0 and b.elapsed() > 0


def test_budget_lasting_takes_limits_of_zero_or_less_as_spent():
    # (for limits callers work out: what is left of a deadline, a share of a time limit)
    for seconds in (0, 0.0, -1.0):
        assert Budget.lasting(seconds).exhausted and Budget.lasting(seconds).remaining() == 0.0
    b = Budget.lasting(60)
    assert not b.exhausted and 59.0 < b.remaining() <= 60.0
    assert Budget.lasting(float("inf")).remaining() == float("inf")
    with pytest.raises(ValueError, match="time_limit must be a positive number"):
        Budget.lasting(float("nan"))  # (no limit at all is not a limit of 0)


def test_budget_alarm_sets_its_flag_at_the_deadline_and_only_then():
    import time as clock

    flag = np.zeros(1, dtype=np.int64)
    b = Budget(time_limit=0.05)
    with b.alarm(flag):
        t0 = clock.perf_counter()
        while not flag[0] and clock.perf_counter() - t0 < 5:
            clock.sleep(0.001)
    assert flag[0] == 1 and b.exhausted
    early = np.zeros(1, dtype=np.int64)
    with Budget(time_limit=0.2).alarm(early):
        pass  # left before the deadline: the timer is cancelled
    clock.sleep(0.3)
    assert early[0] == 0
    never = np.zeros(1, dtype=np.int64)
    with Budget(node_limit=5).alarm(never):  # no time limit: no timer
        clock.sleep(0.05)
    assert never[0] == 0


@pytest.mark.parametrize("flag", [None, [0], (0,), np.zeros(0, dtype=np.int64), np.zeros((1, 1), dtype=np.int64)])
def test_budget_alarm_refuses_a_flag_it_could_not_set(flag):
    with pytest.raises(ValueError, match="flag must be a 1-d numpy array of at least one element"):
        with Budget(time_limit=1.0).alarm(flag):
            pass


def test_budget_alarm_waits_for_a_deadline_moved_by_compile_time(monkeypatch):
    # kernel loading while the budget runs moves its deadline: the alarm rings at the moved one
    import time as clock

    import dsa.budget

    jit = [0.0]
    monkeypatch.setattr(dsa.budget, "jit_seconds", lambda: jit[0])
    flag = np.zeros(1, dtype=np.int64)
    b = Budget(time_limit=0.05)
    jit[0] = 1.0  # (as if 1 s of compiling happened at once: the deadline is 1.05 s after the start)
    with b.alarm(flag):
        clock.sleep(0.15)
        assert flag[0] == 0 and not b.exhausted
        t0 = clock.perf_counter()
        while not flag[0] and clock.perf_counter() - t0 < 5:
            clock.sleep(0.001)
    assert flag[0] == 1 and b.exhausted


@pytest.mark.parametrize("kw, match", [({"time_limit": 0}, "time_limit"), ({"time_limit": -1.0}, "time_limit"),
                                       ({"node_limit": 0}, "node_limit"), ({"node_limit": 2.5}, "node_limit"),
                                       ({"node_limit": True}, "node_limit")])
def test_budget_rejects_bad_limits(kw, match):
    with pytest.raises(ValueError, match=match):
        Budget(**kw)


@pytest.mark.parametrize("kw, match", [
    # before: OverflowError and numpy's or Python's "cannot convert float NaN to integer"
    ({"node_limit": float("inf")}, r"node_limit must be a positive integer \(None for no limit\), got inf"),
    ({"node_limit": float("nan")}, r"node_limit must be a positive integer .*got nan"),
    ({"node_limit": "10"}, r"node_limit must be a positive integer .*got '10'"),
    ({"node_limit": np.True_}, r"node_limit must be a positive integer .*got (np\.)?True"),
    ({"time_limit": True}, r"time_limit must be a positive number of seconds, got True"),
    ({"time_limit": np.True_}, r"time_limit must be a positive number of seconds"),
    ({"time_limit": float("nan")}, r"time_limit must be a positive number of seconds, got nan"),
    ({"time_limit": "1"}, r"time_limit must be a positive number of seconds, got '1'"),
])
def test_budget_names_the_limit_for_every_bad_value(kw, match):
    with pytest.raises(ValueError, match=match):
        Budget(**kw)


def test_budget_accepts_numpy_scalars_and_integral_floats():
    b = Budget(time_limit=np.int64(2), node_limit=np.int64(7))
    assert (b.time_limit, b.node_limit) == (2.0, 7) and type(b.node_limit) is int
    assert Budget(time_limit=np.float32(0.5), node_limit=1e6).node_limit == 1_000_000
    assert Budget(node_limit=np.uint8(3)).node_limit == 3


def test_check_seconds_takes_zero_and_the_numbers_time_limit_takes():
    from fractions import Fraction

    from dsa.budget import check_seconds, check_time_limit

    for ok in (0, 0.0, 2, 0.5, np.int64(3), np.float32(0.25), Fraction(1, 4), float("inf")):
        assert check_seconds(ok, "x") == float(ok) and type(check_seconds(ok, "x")) is float
        if ok:
            assert check_seconds(ok, "x") == check_time_limit(ok)
    assert check_seconds(None, "x") is None
    for bad in (-1, -0.5, float("nan"), True, np.bool_(False), "1", [1], complex(1, 0)):
        with pytest.raises(ValueError, match=r"^portfolio_time must be None or a number of seconds >= 0, got "):
            check_seconds(bad, "portfolio_time")


# ---------------------------------------------------------------- compact
@st.composite
def valid_plans(draw):
    raw = draw(raw_problems())
    n = len(raw["starts"])
    order = draw(st.permutations(range(n)))
    offsets = lowest_fit_plan(raw["starts"], raw["ends"], raw["sizes"], order, raw["alignments"], raw["fixed"])
    # lift free rows by random aligned amounts (keeping validity is not needed for them all: lifting
    # everything free by one common multiple keeps the plan valid only without fixed rows)
    lift = draw(st.integers(0, 5)) * 8
    problem = to_problem(raw)
    if not problem.is_fixed.any():
        offsets = [o + lift for o in offsets]
    return problem, offsets


@given(case=valid_plans())
@settings(max_examples=200)
def test_compact_keeps_plans_valid_and_never_raises_the_peak(case):
    problem, offsets = case
    assert naive_validate(**fields(problem), offsets=offsets) == []
    out = dsa.compact(problem, offsets)
    assert naive_validate(**fields(problem), offsets=out.tolist()) == []
    before = max((o + z for o, z in zip(offsets, problem.sizes.tolist())), default=0)
    assert dsa.solution.plan_peak(problem, out) <= before
    free = ~problem.is_fixed & (problem.sizes > 0)
    assert (out[free] <= np.asarray(offsets, dtype=np.int64)[free]).all()  # no buffer moves up


def test_compact_slides_down_a_loose_plan():
    p = dsa.Problem([0, 0, 5], [4, 9, 9], [2, 3, 2])
    # ascending offsets: row 1 to the floor, row 0 on top of it, row 2 (meets only row 1) also on top
    assert dsa.compact(p, [10, 0, 20]).tolist() == [3, 0, 3]
    assert dsa.compact(p, [0, 2, 0]).tolist() == [0, 2, 0]  # already tight: unchanged
    with pytest.raises(ValueError, match="expected 3 offsets"):
        dsa.compact(p, [0, 0])


# ---------------------------------------------------------------- proven bounds through finalize
def _strategy_with_bound(offsets, bound, status=dsa.Status.FEASIBLE):
    def strategy(problem):
        return make_solution(problem, offsets, strategy="proof", status=status, lower_bound=bound)
    return strategy


# a 1-byte 4-aligned and a 2-byte 2-aligned buffer alive together: LOAD (and LOAD strengthened by
# alignment) 3, optimum 4 (offsets 0 and 2)
ALIGNED = dsa.Problem([0, 0], [1, 1], [1, 2], alignments=[4, 2])


def test_a_proven_bound_above_load_is_kept():
    sol = dsa.solve(ALIGNED, _strategy_with_bound([0, 2], 4))
    assert dsa.lower_bound(ALIGNED) == 3 and brute_force_optimum([0, 0], [1, 1], [1, 2], [4, 2]) == 4
    assert (sol.lower_bound, sol.status, sol.stats["gap"]) == (4, dsa.Status.OPTIMAL, 0.0)


def test_a_bound_below_load_does_not_lower_it():
    sol = dsa.solve(ALIGNED, _strategy_with_bound([0, 2], 2))
    assert sol.lower_bound == 3 and sol.status is dsa.Status.FEASIBLE
    assert sol.stats["gap"] == pytest.approx(1 / 4)


def test_a_bound_above_the_strategys_own_peak_is_an_error():
    sol = dsa.solve(ALIGNED, _strategy_with_bound([0, 2], 5))
    assert sol.status is dsa.Status.ERROR and not sol.success and "claims a lower bound 5" in sol.message


def test_optimal_without_a_bound_is_not_believed():
    sol = dsa.solve(ALIGNED, _strategy_with_bound([0, 2], 0, status=dsa.Status.OPTIMAL))
    assert sol.status is dsa.Status.FEASIBLE and sol.success and "without a bound" in sol.message


def test_a_proven_bound_above_capacity_is_infeasible():
    p = ALIGNED.replace(capacity=3)
    sol = dsa.solve(p, _strategy_with_bound([0, 2], 4))
    assert sol.status is dsa.Status.INFEASIBLE and not sol.success


# ---------------------------------------------------------------- registry capabilities
def test_every_entry_has_capabilities():
    for name in dsa.available_strategies():
        info = strategy_info(name)
        assert info.name == name and info.kind in dsa.strategies.KINDS and info.summary
        assert info.available == (name in dsa.available_strategies(installed=True))
    assert strategy_info("portfolio").name == "best"
    assert "bump" in dsa.available_strategies(kind="baseline")
    assert set(dsa.available_strategies(kind="heuristic")) >= {"greedy_by_size", "greedy_by_breadth"}
    with pytest.raises(ValueError, match="unknown kind"):
        dsa.available_strategies(kind="fast")


def test_missing_optional_dependency_names_the_extra(monkeypatch):
    from dsa import strategies

    fake = StrategyInfo(name="needs_it", module="dsa.strategies.bump", kind="exact",
                        requires=("no_such_module_xyz",), extra="nothere", summary="test")
    monkeypatch.setitem(strategies._REGISTRY, "needs_it", fake)
    assert not fake.available
    assert "needs_it" in dsa.available_strategies() and "needs_it" not in dsa.available_strategies(installed=True)
    with pytest.raises(ImportError, match=r"no_such_module_xyz.*dsa-planner\[nothere\]"):
        dsa.solve([(0, 1, 1)], "needs_it")


def test_overlap_search_sits_below_problem_and_validator():
    """Problem's input check (colliding fixed buffers) runs without importing the validator."""
    import subprocess
    import sys

    code = ("import sys, dsa.problem\n"
            "try:\n"
            "    dsa.problem.Problem([0, 0], [2, 2], [4, 4], fixed_offsets=[0, 2])\n"
            "except ValueError as e:\n"
            "    print('rejected', 'dsa.validator' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["rejected", "False"]


# ---------------------------------------------------------------- the cost of a first plan
def _fresh(code: str) -> str:
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_a_small_first_plan_loads_no_numba():
    out = _fresh("import sys, dsa, dsa.generate\n"
                 "p = dsa.generate.random_trace(30, seed=0)\n"
                 "s = dsa.solve(p)\n"
                 "print(s.success, s.stats['jit_s'], 'numba' in sys.modules)\n")
    assert out.split() == ["True", "0.0", "False"]


def test_jit_seconds_count_the_first_kernel_calls_only():
    out = _fresh("import dsa, dsa.generate\n"
                 "p = dsa.generate.random_trace(2000, seed=0)\n"
                 "a, b = dsa.solve(p), dsa.solve(p)\n"
                 "print(a.stats['jit_s'] > 0, b.stats['jit_s'] == 0.0)\n")
    assert out.split() == ["True", "True"]


def test_the_engine_follows_the_size_of_the_problem_not_the_process():
    """Small problems are planned and checked by the numpy stand-ins however many came before;
    one at SMALL_N rows loads the greedy kernel; DSA_ENGINE=kernel overrides the rule."""
    import os
    import subprocess
    import sys

    code = ("import sys, dsa, dsa.placement as pl, dsa.generate\n"
            "small = dsa.generate.random_trace(pl.SMALL_N - 1, seed=0)\n"
            "for _ in range(40): dsa.solve(small)\n"
            "print('numba' in sys.modules)\n"
            "dsa.solve(dsa.generate.random_trace(pl.SMALL_N, seed=0), validate=False)\n"
            "print('dsa._kernels.greedy' in sys.modules)\n")
    assert _fresh(code).split() == ["False", "True"]
    env = {**os.environ, "DSA_ENGINE": "kernel"}
    out = subprocess.run([sys.executable, "-c", "import sys, dsa, dsa.generate\n"
                          "dsa.solve(dsa.generate.random_trace(5, seed=0))\n"
                          "print('dsa._kernels.greedy' in sys.modules)\n"],
                         capture_output=True, text=True, check=True, env=env).stdout
    assert out.split() == ["True"]


def test_densely_overlapping_problems_never_build_the_overlap_graph():
    from dsa.strategies.greedy import greedy_offsets
    from dsa.strategies._orders import by_size

    n = 3000  # all alive at once: 4.5 million pairs, which the graph would store twice
    p = dsa.Problem(np.zeros(n, dtype=np.int64), np.full(n, 5, dtype=np.int64), np.arange(1, n + 1))
    sw = Sweep(p)
    assert sw.dense and sw.n_overlaps == n * (n - 1) // 2
    offsets = greedy_offsets(p, by_size(p), "first", sweep=sw)
    assert "overlap" not in sw.__dict__
    assert dsa.solution.plan_peak(p, offsets) == dsa.lower_bound(p)
    assert not Sweep(dsa.generate.random_trace(3000, seed=0)).dense


def test_numba_without_a_writable_cache_falls_back_to_a_temporary_one():
    code = """
import warnings
from numba.core import caching
for locator in (caching.InTreeCacheLocator, caching.UserWideCacheLocator):  # as on a read-only install
    locator.from_function = classmethod(lambda cls, py_func, py_file: None)
import numpy as np, numba
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from dsa._kernels.time_overlap import overlap_csr  # the first kernel module: numba is set up here
    indptr, indices = overlap_csr(np.array([0, 1]), np.array([2, 3]))
print(indices.tolist() == [1, 0], numba.config.CACHE_DIR.split("/")[-1].startswith("dsa-numba-cache-"),
      any("cached in" in str(w.message) for w in caught), numba.config.CACHE_DIR)
"""
    out = _fresh(code).split()
    assert out[:3] == ["True", "True", "True"]
    assert not os.path.exists(out[3])  # the temporary cache goes with the process


def test_kernel_loading_does_not_count_against_a_time_limit(monkeypatch):
    import dsa.budget

    jit = {"s": 5.0}
    monkeypatch.setattr(dsa.budget, "jit_seconds", lambda: jit["s"])
    b = Budget(time_limit=0.05)
    first = b.deadline
    jit["s"] += 10.0  # numba compiled for 10 s while the budget ran
    assert b.deadline == pytest.approx(first + 10.0)
    assert not b.exhausted and b.remaining() > 9.0
    unlimited = Budget()
    assert unlimited.deadline is None and unlimited.remaining() == float("inf")
