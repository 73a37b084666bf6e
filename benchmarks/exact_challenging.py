"""``exact`` on MiniMalloc's 11 challenging instances, a time limit each (opt-in: ``make bench-exact``).

Usage::

    python benchmarks/exact_challenging.py [--time-limit 60] [--json out/exact.json]

Prints per instance: buffers, LOAD, peak, peak/LOAD, status, proven lower bound, nodes and time, then
the total time; writes the same rows as JSON. Every plan is checked by ``dsa.validate``.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import dsa
from _results import warm_exact  # this script's folder is on sys.path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per instance (default 60)")
    parser.add_argument("--json", default="out/exact.json", help="where to write the rows")
    args = parser.parse_args(argv)
    warm_exact()  # no instance's time includes loading a kernel
    rows = []
    print(f"{'instance':<10} {'n':>4} {'LOAD':>9} {'peak':>9} {'peak/LOAD':>9} {'status':<14} "
          f"{'bound':>9} {'nodes':>10} {'time s':>7}")
    t_all = time.perf_counter()
    for path in dsa.data.paths("minimalloc"):
        problem = dsa.data.load(path.stem).replace(capacity=None)  # minimise the peak
        t0 = time.perf_counter()
        sol = dsa.solve(problem, "exact", time_limit=args.time_limit)
        elapsed = time.perf_counter() - t0
        dsa.validate(problem, sol)
        row = {"instance": path.stem.split(".")[0], "n": len(problem), "load": dsa.load(problem),
               "peak": sol.peak, "ratio": sol.peak / dsa.load(problem), "status": sol.status.value,
               "lower_bound": sol.lower_bound, "nodes": sol.stats.get("nodes"), "time_s": elapsed}
        rows.append(row)
        print(f"{row['instance']:<10} {row['n']:>4} {row['load']:>9} {row['peak']:>9} {row['ratio']:>9.4f} "
              f"{row['status']:<14} {row['lower_bound']:>9} {row['nodes']!s:>10} {elapsed:>7.2f}", flush=True)
    total = time.perf_counter() - t_all
    print(f"total {total:.1f} s; optimal {sum(r['status'] == 'optimal' for r in rows)}/{len(rows)}")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"time_limit": args.time_limit, "machine": platform.platform(),
                               "python": sys.version.split()[0], "total_s": total, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
