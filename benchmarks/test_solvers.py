"""Solver quality and speed, the validator at a million buffers, and the cost of ``import dsa``.

Every test records what it measured in ``benchmark.extra_info`` (``kind`` says which sort of test it
is); ``benchmarks/summarize.py`` turns the JSON report into a table and
``benchmarks/report_strategies.py`` into the strategy comparison (Markdown, JSON and two plots).
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

# every strategy that takes a time limit gets this one (best, exact, mip): a fixed budget, so that the
# comparison measures the same thing on every machine
TIME_LIMIT_S = 1.0
# the 1M-buffer instance is planned only by strategies whose median at 100k buffers, earlier in the
# same session, took at most this long (above it, a near-linear strategy would need > 30 s at 1M)
SLOW_AT_100K_S = 3.0
MILLION = 1_000_000

# generated instances: name -> (n, seed), kind "dnn" (see dsa.generate.random_trace)
GENERATED = {"dnn_1k": (1_000, 1), "dnn_10k": (10_000, 10), "dnn_100k": (100_000, 100),
             "dnn_1m": (MILLION, 1000)}

# traces recorded with dsa.adapters.torch.profile from the example models: name -> (model, batch, size);
# size is the image side or the sequence length (None: the model's own fixed input). The list is static
# so that collecting the suite does not import torch; a model missing from examples.MODELS is skipped.
TORCH_SIZES = {"resnet": (32, 64), "mobilenet": (32, 64), "multi_output": (16, 32), "unet": (64, 128),
               "mobilenet_v2": (64, 128), "transformer": (16, 64), "gru": (12, 48), "inplace_views": (None,)}
SEQUENCE_MODELS = ("transformer", "gru")
TORCH_BATCHES = (1, 8)


def _torch_name(model: str, batch: int, size: int | None) -> str:
    """``resnet_b8_64`` (image side 64), ``gru_b1_s48`` (sequence length 48), ``inplace_views_b1``."""
    if size is None:
        return f"{model}_b{batch}"
    return f"{model}_b{batch}_{'s' if model in SEQUENCE_MODELS else ''}{size}"


TORCH_TRACES = {_torch_name(m, b, s): (m, b, s) for m, sizes in TORCH_SIZES.items() for s in sizes
                for b in TORCH_BATCHES}

# (collection, name): MiniMalloc's 11 challenging instances, the 6 real traces, the PyTorch example
# traces, the generated ones (smallest first: the 1M case reads the 100k times of the same session)
INSTANCES = ([("minimalloc", p.stem) for p in dsa.data.paths("minimalloc")]
             + [("traces", p.stem) for p in dsa.data.paths("traces")]
             + [("torch", name) for name in TORCH_TRACES]
             + [("generated", name) for name in GENERATED])
# strategies registered later join automatically; a missing optional backend is skipped, not crashed on
STRATEGIES = dsa.available_strategies()
SUCCESS = ("optimal", "feasible", "limit_reached")


def _rounds(n: int, info) -> int:
    """Fewer rounds for bigger instances and for strategies that search until a time limit."""
    if n >= MILLION:
        return 1
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
    if collection == "torch":
        problem, reason = instances.torch_trace(*TORCH_TRACES[instance])
        return problem if problem is not None else reason
    return instances.bundled(instance)


def _skip(comparison, collection, instance, strategy, n, reason):
    """Skip the test and note why in the comparison's record of skipped cases."""
    comparison["skipped"].append({"suite": collection, "instance": instance, "strategy": strategy, "n": n,
                                  "reason": reason})
    pytest.skip(reason)


def _solve_or_exception(problem, strategy, kwargs):
    """dsa.solve, or the exception it raised (so that a failing strategy is recorded, then fails the test)."""
    try:
        return dsa.solve(problem, strategy, **kwargs)
    except Exception as exc:  # noqa: BLE001 - recorded and re-raised as a test failure below
        return exc


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("collection,instance", INSTANCES, ids=[name for _, name in INSTANCES])
def test_solve(benchmark, instances, comparison, collection, instance, strategy):
    info = strategy_info(strategy)
    comparison["settings"].update(time_limit_s=TIME_LIMIT_S, slow_at_100k_s=SLOW_AT_100K_S)
    if not info.available:
        _skip(comparison, collection, instance, strategy, None,
              f"{strategy} needs the optional extra {info.extra!r}")
    problem = _problem(instances, collection, instance)
    if isinstance(problem, str):  # a PyTorch trace that cannot be recorded here: the reason
        _skip(comparison, collection, instance, strategy, None, problem)
    n = len(problem)
    if info.max_n is not None and n > info.max_n:
        _skip(comparison, collection, instance, strategy, n, f"{strategy} is meant for at most {info.max_n} buffers")
    at_100k = comparison["seconds_at_100k"].get(strategy)
    if n >= MILLION and at_100k is not None and at_100k > SLOW_AT_100K_S:
        _skip(comparison, collection, instance, strategy, n,
              f"{strategy} took {at_100k:.2f} s at 100k buffers (> {SLOW_AT_100K_S:g} s): not run at 1M")
    capacity = problem.capacity
    # plan without the capacity: we measure peak / LOAD, and a plan above MiniMalloc's capacity is still
    # a valid plan (whether it fits is recorded as fits_capacity)
    problem = problem.replace(capacity=None) if capacity is not None else problem
    benchmark.group = f"solve {instance}"
    kwargs = {"validate": False, "seed": 0}
    if info.time_limit:
        kwargs["time_limit"] = TIME_LIMIT_S
    sol = benchmark.pedantic(_solve_or_exception, args=(problem, strategy, kwargs),
                             rounds=_rounds(n, info), iterations=1,
                             warmup_rounds=0 if info.time_limit or n >= MILLION else 1)
    median_s = benchmark.stats.stats.median if benchmark.stats else None  # None: --benchmark-disable
    if median_s is not None and 100_000 <= n < MILLION:
        comparison["seconds_at_100k"][strategy] = median_s
    # LOAD itself (the column says peak / LOAD): dsa.lower_bound is stronger on aligned rows (torch traces)
    load = dsa.bounds.load(problem)
    record = {
        "kind": "solve",
        "collection": collection,
        "suite": collection,
        "instance": instance,
        "strategy": strategy,
        "strategy_kind": info.kind,
        "n": n,
        "lower_bound": int(load),
        "capacity": capacity,
        "time_limit_s": kwargs.get("time_limit"),
    }
    if isinstance(sol, Exception):
        record.update(status="exception", valid=False, success=False,
                      error=f"{type(sol).__name__}: {sol}"[:500])
        benchmark.extra_info.update(record)
        pytest.fail(f"{strategy} raised on {instance}: {record['error']}")
    # checked outside the timed region (validate=False: the plan comes back UNCHECKED)
    status = sol.stats.get("unchecked_status", sol.status.value)
    error = None
    if sol.status is not dsa.Status.UNCHECKED:  # no plan, or an error the front end caught
        error = sol.message or f"status {sol.status.value}"
        status = sol.status.value
    else:
        try:
            dsa.validate(problem, sol)
        except ValueError as exc:
            error = f"{type(exc).__name__}: {exc}"[:500]
    valid = error is None
    peak = None if sol.peak is None else int(sol.peak)
    record.update({
        "peak": peak,
        "ratio": (peak / load if load else 1.0) if peak is not None else None,
        "fits_capacity": None if capacity is None or peak is None else bool(peak <= capacity),
        "strategy_time_s": sol.stats.get("time_s"),  # the strategy alone, from the last round
        "status": status,
        "valid": valid,                                   # dsa.validate accepted the plan
        "success": valid and status in SUCCESS,           # what Solution.success would have said
        "error": error,
        "proven_lower_bound": int(sol.lower_bound),
        # best: the portfolio's winner and peak before the improvement phase
        "member": sol.stats.get("member"),
        "portfolio_peak": sol.stats.get("portfolio_peak"),
    })
    benchmark.extra_info.update(record)
    assert valid, f"{strategy} on {instance}: {error}"
    assert status in SUCCESS, f"{strategy} on {instance}: status {status}"


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
    # --benchmark-disable runs once untimed (no stats): fall back on the solve's own figure
    portfolio_s = benchmark.stats.stats.mean if benchmark.stats else sol.stats["portfolio_s"]
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
