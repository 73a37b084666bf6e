"""Conflicts on MiniMalloc's 11 challenging instances: ``exact`` at one alignment step below the
best-known peak (opt-in).

Usage::

    python benchmarks/conflicts.py [--time-limit 5] [--best-time 5] [--json out/conflicts.json]

The best-known peak is ``best``'s peak within ``--best-time`` seconds. ``exact`` then decides the
capacity one step (the largest alignment) below it within ``--time-limit`` seconds. Prints per
instance: buffers, capacity, status, the size of the conflict (an irreducible infeasible subset;
"cut" when the limit stopped the deletion filter, with the size of the proven core), decisions and
seconds; writes the same rows as JSON.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import dsa
import dsa.data
from _results import warm_exact  # this script's folder is on sys.path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=5.0, help="seconds for exact (default 5)")
    parser.add_argument("--best-time", type=float, default=5.0, help="seconds for best (default 5)")
    parser.add_argument("--json", default="out/conflicts.json", help="where to write the rows")
    args = parser.parse_args(argv)
    warm_exact()
    rows = []
    print(f"{'instance':<10} {'n':>5} {'best peak':>10} {'capacity':>10} {'status':<14} "
          f"{'conflict':>9} {'decisions':>9} {'time s':>7}")
    for path in dsa.data.paths("minimalloc"):
        problem = dsa.data.load(path.stem).replace(capacity=None)
        best = dsa.solve(problem, "best", time_limit=args.best_time, seed=0)
        cap = best.peak - int(problem.alignments.max(initial=1))
        t0 = time.perf_counter()
        sol = dsa.solve(problem, "exact", capacity=cap, time_limit=args.time_limit)
        elapsed = time.perf_counter() - t0
        if sol.conflict is not None:
            size = str(len(sol.conflict))
        elif sol.stats.get("conflict_cut"):
            size = f"cut ({len(sol.stats['infeasible_core'])})"
        else:
            size = "-"
        row = {"instance": path.stem, "n": len(problem), "best_peak": best.peak, "capacity": cap,
               "status": sol.status.value, "conflict": None if sol.conflict is None else list(sol.conflict),
               "conflict_size": None if sol.conflict is None else len(sol.conflict),
               "conflict_cut": bool(sol.stats.get("conflict_cut")),
               "decisions": sol.stats.get("conflict_decisions", 0), "time_s": elapsed}
        rows.append(row)
        print(f"{path.stem:<10} {len(problem):>5} {best.peak:>10} {cap:>10} {sol.status.value:<14} "
              f"{size:>9} {row['decisions']:>9} {elapsed:>7.2f}", flush=True)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"time_limit": args.time_limit, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
