"""dsa.solve_many: serial against n_jobs=2 (loky) and a local Dask cluster, on one batch (issue 25).

The batch: 16 problems of 1,500 buffers (``dsa.generate.random_trace(1500, seed=s)``), planned by a
deterministic, single-threaded, CPU-bound strategy: ``buchsbaum`` with a fixed seed and many restarts
(about a second each on nine of the problems on this machine; the others reach LOAD and stop early).
Every run must give identical peaks. Each configuration runs ``--repeats`` times after one warm-up
batch (numba kernels loaded, worker processes started); the table reports the best and the median
wall time. The target of the issue: n_jobs=2 at most 0.7 x the serial wall time on 2 cores.

    python benchmarks/batch.py [--json out/batch.json] [--repeats 3] [--no-dask] [--ray]

Not part of ``make test`` (it takes about a minute); ``make bench-batch`` runs it.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

N_PROBLEMS, N_BUFFERS = 16, 1500
STRATEGY, OPTIONS = "buchsbaum", {"restarts": 512, "seed": 0}


def batch():
    from dsa.generate import random_trace

    return [random_trace(N_BUFFERS, seed=s) for s in range(N_PROBLEMS)]


def timed(run, repeats: int):
    """(peaks, [wall seconds per repeat]) after one warm-up run."""
    run()
    walls, peaks = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        sols = run()
        walls.append(time.perf_counter() - t0)
        assert all(s.success for s in sols), [s.message for s in sols if not s.success]
        got = [s.peak for s in sols]
        assert peaks is None or got == peaks
        peaks = got
    return peaks, walls


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--no-dask", action="store_true", help="skip the LocalCluster run")
    ap.add_argument("--ray", action="store_true", help="also run on a local Ray instance (Ray installed)")
    args = ap.parse_args(argv)

    import dsa

    problems = batch()
    load = os.getloadavg()
    rows = {}
    peaks, walls = timed(lambda: dsa.solve_many(problems, STRATEGY, **OPTIONS), args.repeats)
    rows["serial"] = walls
    serial_peaks = peaks
    peaks, walls = timed(lambda: dsa.solve_many(problems, STRATEGY, n_jobs=2, **OPTIONS), args.repeats)
    assert peaks == serial_peaks, "n_jobs=2 changed a peak"
    rows["n_jobs=2 (loky)"] = walls
    if not args.no_dask:
        import joblib
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster), joblib.parallel_config(backend="dask"):
            peaks, walls = timed(lambda: dsa.solve_many(problems, STRATEGY, **OPTIONS), args.repeats)
        assert peaks == serial_peaks, "the Dask cluster changed a peak"
        rows["dask LocalCluster (2 workers)"] = walls
    if args.ray:
        import joblib
        import ray
        from ray.util.joblib import register_ray

        register_ray()
        ray.init(num_cpus=2, include_dashboard=False)
        try:
            with joblib.parallel_config(backend="ray"):
                peaks, walls = timed(lambda: dsa.solve_many(problems, STRATEGY, n_jobs=2, **OPTIONS),
                                     args.repeats)
        finally:
            ray.shutdown()
        assert peaks == serial_peaks, "Ray changed a peak"
        rows["ray local (2 CPUs)"] = walls
    load_after = os.getloadavg()

    base = min(rows["serial"])
    print(f"{N_PROBLEMS} problems x {N_BUFFERS} buffers, {STRATEGY} {OPTIONS}; {os.cpu_count()} cores; "
          f"load average {load[0]:.2f} before, {load_after[0]:.2f} after")
    print(f"{'run':<32} {'best s':>8} {'median s':>9} {'vs serial':>10}")
    result = {"problems": N_PROBLEMS, "buffers": N_BUFFERS, "strategy": STRATEGY, "options": OPTIONS,
              "cores": os.cpu_count(), "loadavg_before": load, "loadavg_after": load_after,
              "identical_peaks": True, "peaks": serial_peaks, "runs": {}}
    for name, walls in rows.items():
        print(f"{name:<32} {min(walls):>8.2f} {statistics.median(walls):>9.2f} {min(walls) / base:>10.2f}")
        result["runs"][name] = {"walls_s": walls, "best_s": min(walls), "ratio_to_serial": min(walls) / base}
    ratio = min(rows["n_jobs=2 (loky)"]) / base
    print(f"identical peaks: yes; n_jobs=2 / serial = {ratio:.2f} (target <= 0.70)")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
