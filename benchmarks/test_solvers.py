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

ROOT = Path(__file__).resolve().parent.parent
# generated instances: name -> (n, seed), kind "dnn" (see dsa.generate.random_trace)
GENERATED = {"dnn_10k": (10_000, 10), "dnn_100k": (100_000, 100)}
# (collection, name): MiniMalloc's 11 challenging instances, the 6 real traces, the generated ones
INSTANCES = ([("minimalloc", p.stem) for p in dsa.data.paths("minimalloc")]
             + [("traces", p.stem) for p in dsa.data.paths("traces")]
             + [("generated", name) for name in GENERATED])
STRATEGIES = dsa.available_strategies()  # strategies registered later join automatically


def _rounds(n: int) -> int:
    """Fewer rounds for bigger instances, to keep the whole suite within minutes."""
    if n >= 50_000:
        return 5
    if n >= 5_000:
        return 10
    return 25


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("collection,instance", INSTANCES, ids=[name for _, name in INSTANCES])
def test_solve(benchmark, instances, collection, instance, strategy):
    if collection == "generated":
        problem = instances.generated(*GENERATED[instance])
    else:
        problem = instances.bundled(instance)
    capacity = problem.capacity
    # plan without the capacity: we measure peak / LOAD, and a plan above MiniMalloc's capacity is still
    # a valid plan (whether it fits is recorded as fits_capacity)
    problem = problem.replace(capacity=None) if capacity is not None else problem
    benchmark.group = f"solve {instance}"
    sol = benchmark.pedantic(dsa.solve, args=(problem, strategy), kwargs={"validate": False},
                             rounds=_rounds(len(problem)), iterations=1, warmup_rounds=1)
    # checked outside the timed region
    dsa.validate(problem, sol)
    assert sol.success, sol.message
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
