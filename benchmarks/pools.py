"""Memory pools on real DNN traces: fastest first (TVM's USMP, ExecuTorch's banked greedy) against dsa's
``best`` and ``exact`` (opt-in: ``make bench-pools``).

Usage::

    python benchmarks/pools.py [--time-limit 2] [--exact-time-limit 10] [--out docs/results/pools]
                               [--plot docs/img/pools_heap_map.png]

Every trace of ``../shared/data/traces`` (and the traces bundled with dsa) is planned with a fast pool
(``sram``, cost 1) of 1/4 and of 1/2 of its LOAD and an unbounded slow one (``dram``, cost 10); the
weight of a buffer is its size. Prints and writes (``<out>.json``, ``<out>.md``) the cost of each
planner relative to fastest first, the bytes each keeps in fast memory, and exact's proven bound.
Every plan is checked by ``dsa.validate`` over the pools. ``--plot`` draws the heap maps of both pools
of ``best``'s plan of the first trace at 1/4 of LOAD.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import dsa

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "traces"


def _traces() -> list[Path]:
    from dsa.data import paths

    found = {p.name: p for p in paths("traces")}
    if SHARED.is_dir():
        found.update({p.name: p for p in SHARED.glob("*.csv")})
    return [found[k] for k in sorted(found)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=2.0, help="best's time limit (s)")
    parser.add_argument("--exact-time-limit", type=float, default=10.0, help="exact's time limit (s)")
    parser.add_argument("--out", default="docs/results/pools")
    parser.add_argument("--plot", default="docs/img/pools_heap_map.png")
    args = parser.parse_args(argv)
    dsa.warmup()
    rows, drawn = [], False
    print(f"{'trace':<34} {'n':>5} {'sram':>5} {'ff cost':>12} {'best/ff':>8} {'exact/ff':>8} {'bound/ff':>8} "
          f"{'exact status':<14}", flush=True)
    for path in _traces():
        p = dsa.read_csv(path)
        load = dsa.load(p)
        for share in (4, 2):
            pools = [dsa.Pool("sram", load // share, 1.0), dsa.Pool("dram", None, 10.0)]
            sols = {"fastest_first": dsa.solve(p, "fastest_first", pools=pools),
                    "best": dsa.solve(p, "best", pools=pools, time_limit=args.time_limit, seed=0),
                    "exact": dsa.solve(p, "exact", pools=pools, time_limit=args.exact_time_limit, seed=0)}
            for sol in sols.values():
                dsa.validate(p, sol, pools=pools)
            ff = sols["fastest_first"].cost
            row = {"trace": path.stem, "n": len(p), "load": load, "sram": f"1/{share}",
                   "fastest_first": ff, "best": sols["best"].cost, "exact": sols["exact"].cost,
                   "exact_bound": sols["exact"].cost_bound, "exact_status": sols["exact"].status.value,
                   "sram_bytes": {k: s.stats["pool_weights"][0] for k, s in sols.items()}}
            rows.append(row)
            print(f"{path.stem[:34]:<34} {len(p):>5} {row['sram']:>5} {ff:>12.4g} {row['best'] / ff:>8.4f} "
                  f"{row['exact'] / ff:>8.4f} {row['exact_bound'] / ff:>8.4f} {row['exact_status']:<14}", flush=True)
            if not drawn and share == 4 and args.plot:
                from dsa.plot import heap_map

                heap_map(p, sols["best"], args.plot, title=f"{path.stem}: best, SRAM = LOAD/4 (cost 1), DRAM (cost 10)")
                drawn = True
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    cheaper = sum(r["best"] < r["fastest_first"] for r in rows)
    lines = ["| trace | buffers | SRAM | fastest first cost | best / ff | exact / ff | exact's bound / ff | exact |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ff = r["fastest_first"]
        lines.append(f"| {r['trace']} | {r['n']} | {r['sram']} of LOAD | {ff:.4g} | {r['best'] / ff:.4f} | "
                     f"{r['exact'] / ff:.4f} | {r['exact_bound'] / ff:.4f} | {r['exact_status']} |")
    lines.append("")
    lines.append(f"best is cheaper than fastest first on {cheaper} of {len(rows)} settings and never dearer; "
                 f"best at {args.time_limit:g} s, exact at {args.exact_time_limit:g} s.")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(lines[-1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
