"""Solver quality and speed, the validator at a million buffers, and the cost of ``import dsa``.

Every test records what it measured in ``benchmark.extra_info`` (``kind`` says which sort of test it
is); ``benchmarks/summarize.py`` turns the JSON report into a table.
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

import dsa
from dsa.strategies import strategy_info

ROOT = Path(__file__).resolve().parent.parent
# generated instances: name -> (n, seed), kind "dnn" (see dsa.generate.random_trace)
GENERATED = {"dnn_10k": (10_000, 10), "dnn_100k": (100_000, 100)}
# (collection, name): MiniMalloc's 11 challenging instances, the 6 real traces, the generated ones
INSTANCES = ([("minimalloc", p.stem) for p in dsa.data.paths("minimalloc")]
             + [("traces", p.stem) for p in dsa.data.paths("traces")]
             + [("generated", name) for name in GENERATED])
# strategies registered later join automatically; a missing optional backend is skipped, not crashed on
STRATEGIES = dsa.available_strategies()


def _rounds(n: int, info) -> int:
    """Fewer rounds for bigger instances and for strategies that search until a time limit."""
    if info.time_limit:
        return 1 if n >= 50_000 else 3
    if n >= 50_000:
        return 5
    if n >= 5_000:
        return 10
    return 25


def _problem(instances, collection, instance):
    if collection == "generated":
        return instances.generated(*GENERATED[instance])
    return instances.bundled(instance)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("collection,instance", INSTANCES, ids=[name for _, name in INSTANCES])
def test_solve(benchmark, instances, collection, instance, strategy):
    info = strategy_info(strategy)
    if not info.available:
        pytest.skip(f"{strategy} needs the optional extra {info.extra!r}")
    if info.kind == "exact":
        pytest.skip(f"{strategy} searches until a proof; exact strategies have their own benchmark "
                    "(make bench-exact)")
    problem = _problem(instances, collection, instance)
    if info.max_n is not None and len(problem) > info.max_n:
        pytest.skip(f"{strategy} is meant for at most {info.max_n} buffers")
    capacity = problem.capacity
    # plan without the capacity: we measure peak / LOAD, and a plan above MiniMalloc's capacity is still
    # a valid plan (whether it fits is recorded as fits_capacity)
    problem = problem.replace(capacity=None) if capacity is not None else problem
    benchmark.group = f"solve {instance}"
    sol = benchmark.pedantic(dsa.solve, args=(problem, strategy), kwargs={"validate": False, "seed": 0},
                             rounds=_rounds(len(problem), info), iterations=1,
                             warmup_rounds=0 if info.time_limit else 1)
    # checked outside the timed region (validate=False: the plan comes back UNCHECKED)
    assert sol.status is dsa.Status.UNCHECKED, sol.message
    dsa.validate(problem, sol)
    load = dsa.lower_bound(problem)
    benchmark.extra_info.update({
        "kind": "solve",
        "collection": collection,
        "instance": instance,
        "strategy": strategy,
        "n": len(problem),
        "peak": int(sol.peak),
        "lower_bound": int(load),
        "ratio": sol.peak / load if load else 1.0,
        "capacity": capacity,
        "fits_capacity": None if capacity is None else bool(sol.peak <= capacity),
        "strategy_time_s": sol.stats["time_s"],  # the strategy alone, from the last round
        "status": sol.stats.get("unchecked_status", sol.status.value),  # validated just above
        "proven_lower_bound": int(sol.lower_bound),
        # best: the portfolio's winner and peak before the improvement phase
        "member": sol.stats.get("member"),
        "portfolio_peak": sol.stats.get("portfolio_peak"),
    })


def test_best_portfolio_100k(benchmark, instances):
    """best's portfolio phase alone at 100k buffers, against greedy_by_size timed in the same process."""
    problem = instances.generated(*GENERATED["dnn_100k"])
    benchmark.group = "portfolio"
    sol = benchmark.pedantic(dsa.solve, args=(problem, "best"), kwargs={"validate": False, "improve": False},
                             rounds=5, iterations=1, warmup_rounds=1)
    greedy = []
    for _ in range(5):
        t0 = time.perf_counter()
        dsa.solve(problem, "greedy_by_size", validate=False)
        greedy.append(time.perf_counter() - t0)
    portfolio_s = benchmark.stats.stats.mean
    benchmark.extra_info.update({
        "kind": "portfolio", "n": len(problem), "portfolio_s": portfolio_s,
        "portfolio_phase_s": sol.stats["portfolio_s"], "greedy_by_size_s": statistics.median(greedy),
        "ratio_to_greedy_by_size": portfolio_s / statistics.median(greedy),
        "peak_ratio": sol.peak / dsa.lower_bound(problem), "member": sol.stats["member"],
    })


DENSE_N = 20_000
_DENSE_PROBE = f"""
import resource, time, numpy as np, dsa
n = {DENSE_N}
p = dsa.Problem(np.zeros(n, np.int64), np.full(n, 10, np.int64), np.random.default_rng(0).integers(1, 1000, n))
dsa.solve(dsa.Problem(np.zeros(300, np.int64), np.ones(300, np.int64), np.ones(300, np.int64)))  # load kernels
t = time.perf_counter()
sol = dsa.solve(p, "greedy_by_size")
elapsed = time.perf_counter() - t
try:  # VmHWM: this program's own peak; ru_maxrss on Linux keeps the parent's from before exec
    with open("/proc/self/status") as f:
        peak = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
except OSError:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(elapsed, peak, sol.ratio)
"""


def test_greedy_with_every_buffer_alive_at_once(benchmark):
    """greedy_by_size on 20k buffers that all meet: time and peak RSS of a fresh process."""
    benchmark.group = "dense"
    runs = []

    def probe():
        out = subprocess.run([sys.executable, "-c", _DENSE_PROBE], cwd=ROOT, check=True, capture_output=True,
                             text=True).stdout.split()
        runs.append(out)

    benchmark.pedantic(probe, rounds=3, iterations=1)
    benchmark.extra_info.update({
        "kind": "dense", "n": DENSE_N,
        "solve_s": statistics.median(float(r[0]) for r in runs),
        "max_rss_bytes": max(int(r[1]) for r in runs), "ratio": float(runs[-1][2]),
    })


def test_first_plan_in_a_fresh_process(benchmark, tmp_path):
    """``python -m dsa solve`` on a 30-buffer trace in a new interpreter, against ``python -c pass``.

    The figures in ``extra_info`` come from the two commands run interleaved; the probe also reports
    the first solve alone, timed inside the interpreter, and how much of it went to numba.
    """
    trace = tmp_path / "t30.csv"
    dsa.write_csv(trace, dsa.generate.random_trace(30, seed=0))
    rounds = 7
    benchmark.group = "first plan"
    cli = f"import sys; sys.argv = ['dsa', 'solve', {str(trace)!r}]; import dsa.cli; dsa.cli.main()"
    benchmark.pedantic(_run, args=(cli,), rounds=rounds, iterations=1, warmup_rounds=1)
    with_dsa, baseline, inside, jit = [], [], [], []
    probe = ("import time; t = time.perf_counter(); import dsa; "
             f"s = dsa.solve(dsa.read_csv({str(trace)!r})); "
             "print(time.perf_counter() - t, s.stats['jit_s'])")
    for _ in range(rounds):
        with_dsa.append(_run(cli))
        baseline.append(_run("pass"))
        out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, check=True, capture_output=True,
                             text=True).stdout.split()
        inside.append(float(out[0]))
        jit.append(float(out[1]))
    benchmark.extra_info.update({
        "kind": "first_plan", "n": 30,
        "cli_s": statistics.median(with_dsa), "python_pass_s": statistics.median(baseline),
        "difference_s": statistics.median(with_dsa) - statistics.median(baseline),
        "import_and_first_solve_s": statistics.median(inside), "jit_s": max(jit),
    })


def test_validate_1m(benchmark, validator_case):
    problem, offsets, peak = validator_case
    benchmark.group = "validate"
    result = benchmark.pedantic(dsa.validate, args=(problem, offsets), rounds=5, iterations=1,
                                warmup_rounds=1)
    assert result is None
    benchmark.extra_info.update({"kind": "validate", "n": len(problem), "peak": int(peak),
                                 "lower_bound": int(dsa.lower_bound(problem)), "plan": "greedy_by_size"})


def _run(code: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    return time.perf_counter() - t0


def test_import_dsa(benchmark):
    """Wall time of ``python -c "import dsa"`` against ``python -c pass`` measured alongside.

    The benchmark times the ``import dsa`` subprocess; the figures in ``extra_info`` come from the two
    commands run interleaved (so that drift of the machine hits both alike), plus the import alone
    timed inside the interpreter, and the heavy modules it pulled in (there should be none).
    """
    rounds = 9
    benchmark.group = "import"
    benchmark.pedantic(_run, args=("import dsa",), rounds=rounds, iterations=1, warmup_rounds=1)
    with_dsa, baseline = [], []
    for _ in range(rounds):
        with_dsa.append(_run("import dsa"))
        baseline.append(_run("pass"))
    probe = ("import sys, time; t = time.perf_counter(); import dsa; dt = time.perf_counter() - t; "
             "heavy = [m for m in ('numpy', 'numba', 'scipy', 'matplotlib', 'torch') if m in sys.modules]; "
             "print(dt, ','.join(heavy))")
    inside = []
    heavy = ""
    for _ in range(rounds):
        out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, check=True, capture_output=True,
                             text=True).stdout.split()
        inside.append(float(out[0]))
        heavy = out[1] if len(out) > 1 else ""
    import_s = statistics.median(with_dsa)
    base_s = statistics.median(baseline)
    benchmark.extra_info.update({
        "kind": "import",
        "import_dsa_s": import_s,                   # median wall time of python -c "import dsa"
        "python_pass_s": base_s,                    # median wall time of python -c pass
        "difference_s": import_s - base_s,
        "ratio": import_s / base_s,
        "in_process_import_s": statistics.median(inside),
        "heavy_modules_imported": heavy,
    })
    assert "numba" not in heavy.split(",")
