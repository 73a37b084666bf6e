"""Where ``best``'s (or ``exact``'s) time goes on a set of rectangle cuts: its phases' shares of the
call and the cores each kept busy, from ``stats["phases"]``.

Issue 24 asks that a search use its whole budget and show it. ``stats["improvements"]`` shows the
incumbent over time; ``stats["phases"]`` (``dsa.strategies._phases``) shows what ran when and how
many cores it used, so that a phase that leaves a core idle, or takes much of the time for nothing,
can be seen. Usage (instance sets and names as in ``peers_generated.py``)::

    .venv/bin/python benchmarks/phase_shares.py --set main --time-limit 20 --out docs/results/phases

runs each instance once, alone, and writes ``OUT.json`` (every instance's phases) and ``OUT.md`` (per
instance: peak / LOAD, then for each phase its seconds in all and the cores it kept busy on
average; a last row with the means over the instances). ``--instances`` takes comma-separated names
(FAMILY-N-sSEED) or indices into the set.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def shares(phases) -> dict:
    """``{name: (seconds, cpu_seconds)}`` summed over the rows of ``stats["phases"]`` of one name."""
    out: dict = {}
    for name, start, end, cpu in phases:
        seconds, used = out.get(name, (0.0, 0.0))
        out[name] = (seconds + end - start, used + cpu)
    return out


def measure(problem, strategy: str, limit: float, seed: int) -> dict:
    """One call: its peak / LOAD, time, status and phases (every plan checked by ``dsa.validate``)."""
    import dsa

    began = time.perf_counter()
    sol = dsa.solve(problem, strategy, time_limit=limit, seed=seed)
    elapsed = time.perf_counter() - began
    dsa.validate(problem, sol)
    return {"ratio": sol.peak / dsa.load(problem), "time_s": elapsed, "status": sol.status.value,
            "phases": [list(row) for row in sol.stats.get("phases", [])]}


def report(doc: dict) -> str:
    """The Markdown table of a run's JSON."""
    rows = doc["rows"]
    per = [shares(r["phases"]) for r in rows]
    seen = list(dict.fromkeys(name for got in per for name in got))   # (phases in order of first appearance)
    lines = [f"# Where {doc['strategy']}'s time goes ({doc['set']} set, time_limit={doc['time_limit']:g})", "",
             f"Generated {doc['date']} on {doc['machine']}, {doc['cores']} cores, by `{doc['command']}`. "
             "Each cell: the phase's seconds in all (its turns summed), and in brackets the cores it kept busy "
             "on average (the process's CPU seconds over it, all threads, divided by its seconds). A call "
             "that planned at LOAD ends early. From `stats[\"phases\"]` (see `dsa.strategies._phases`).", "",
             "| instance | peak / LOAD | s | " + " | ".join(seen) + " |",
             "|---|---:|---:|" + "---:|" * len(seen)]
    total = {name: [0.0, 0.0] for name in seen}
    for r, got in zip(rows, per):
        cells = []
        for name in seen:
            if name in got:
                seconds, used = got[name]
                total[name][0] += seconds
                total[name][1] += used
                cells.append(f"{seconds:.2f} ({used / seconds:.1f})" if seconds > 0 else "0.00")
            else:
                cells.append("-")
        lines.append(f"| {r['name']} | {r['ratio']:.4f} | {r['time_s']:.1f} | " + " | ".join(cells) + " |")
    k = len(rows) or 1
    cells = [f"{s / k:.2f} ({u / s:.1f})" if s > 0 else "0.00" for s, u in total.values()]
    mean = sum(r["ratio"] for r in rows) / k
    lines.append(f"| **mean** | {mean:.4f} | {sum(r['time_s'] for r in rows) / k:.1f} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", default="main", help="an instance set of peers_generated.py")
    parser.add_argument("--instances", default="", help="comma-separated names or indices (default: all)")
    parser.add_argument("--strategy", default="best", choices=["best", "exact"])
    parser.add_argument("--time-limit", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="OUT.json and OUT.md (default: print only)")
    args = parser.parse_args(argv)
    import dsa
    from peers_generated import SETS, instance_name, make_problem, select

    dsa.warmup()  # (kernels compiled before the first clock starts)
    doc = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": platform.platform(), "cores": os.cpu_count(),
           "command": "python benchmarks/phase_shares.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "set": args.set, "strategy": args.strategy, "time_limit": args.time_limit, "seed": args.seed,
           "rows": []}
    for spec in select(SETS[args.set][1], args.instances):
        row = {"name": instance_name(*spec), "n": spec[1],
               **measure(make_problem(*spec), args.strategy, args.time_limit, args.seed)}
        doc["rows"].append(row)
        print(f"{row['name']:28s} {row['ratio']:.4f} {row['time_s']:5.1f} s", flush=True)
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
            args.out.with_suffix(".md").write_text(report(doc))
    print(report(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
