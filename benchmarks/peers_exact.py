"""``exact`` side by side with omnimalloc's ``supermalloc`` on MiniMalloc's 11 challenging instances.

The peer runs in its own virtual environment (it is never a dependency of dsa): make one with
``python -m venv /tmp/omni && /tmp/omni/bin/pip install omnimalloc`` and pass its interpreter. Both
solvers get the same time limit per instance and run one after the other in the same run of this
script, on the same machine; dsa's plans are checked by ``dsa.validate``, the peer's by
``dsa.validate`` too (its offsets come back over a pipe). Usage::

    .venv/bin/python benchmarks/peers_exact.py --peer-python /tmp/omni/bin/python --time-limit 20 \\
        --threads 2 --out docs/results/peers_exact

writes ``peers_exact.json`` and ``peers_exact.md`` (per instance: LOAD, each solver's peak, status and
time; the totals); ``--report OUT.json`` rewrites the Markdown from the JSON alone.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import dsa
from _results import provenance, warm_exact, write_results  # this script's folder is on sys.path

# runs inside the peer's environment: reads a MiniMalloc CSV (path in argv[1]) into `rows` and `allocs`;
# a peer script is this prelude plus its own lines, which print one JSON line (see run_peer_script)
PEER_PRELUDE = r"""
import csv, json, sys, time
import omnimalloc
path = sys.argv[1]
with open(path) as f:
    rows = list(csv.DictReader(f))
allocs = tuple(omnimalloc.Allocation(id=int(r["id"]), size=int(r["size"]), start=int(r["lower"]),
                                     end=int(r["upper"])) for r in rows)
"""

PEER_SCRIPT = PEER_PRELUDE + r"""
from omnimalloc.allocators.supermalloc import SupermallocAllocator
limit, threads = float(sys.argv[2]), int(sys.argv[3])
t0 = time.perf_counter()
res = SupermallocAllocator(timeout=limit, num_threads=threads).solve(allocs)
elapsed = time.perf_counter() - t0
offsets = {a.id: a.offset for a in res.allocations}
print(json.dumps({"version": omnimalloc.__version__, "peak": res.peak, "lower_bound": res.lower_bound,
                  "proved_optimal": res.proved_optimal, "time_s": elapsed,
                  "offsets": [offsets[int(r["id"])] for r in rows]}))
"""


def run_peer_script(python: str, script: str, args, timeout: float) -> dict:
    """Run ``script`` with the peer's interpreter (``python -c script *args``) and return its last
    stdout line, a JSON object, with ``ok: True``; ``ok: False`` and ``error`` (the last line of its
    stderr, or the timeout) when it fails."""
    try:
        proc = subprocess.run([python, "-c", script, *map(str, args)], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"no answer within {timeout:g} s"}
    if proc.returncode != 0:
        return {"ok": False, "error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"}
    return {"ok": True, **json.loads(proc.stdout.strip().splitlines()[-1])}


def run_peer(python: str, path: Path, limit: float, threads: int) -> dict:
    return run_peer_script(python, PEER_SCRIPT, [path, limit, threads], timeout=limit * 3 + 120)


def report(doc: dict) -> str:
    rows = doc["rows"]
    lines = [f"# `exact` against omnimalloc's supermalloc on {doc['threads']} threads (MiniMalloc's challenging "
             "instances)", "",
             f"Generated {doc['date']} on {doc['machine']} by `{doc['command']}`; omnimalloc "
             f"{doc.get('peer_version') or '?'} with {doc['threads']} threads, {doc['time_limit']:g} s per instance "
             "for both. Every plan of both solvers passed `dsa.validate`. *proven*: the solver proved its "
             "peak optimal (for dsa, status OPTIMAL).", "",
             "| instance | n | LOAD | dsa exact peak | / LOAD | proven | time s | supermalloc peak | / LOAD | "
             "proven | time s |", "|---|---:|---:|---:|---:|---|---:|---:|---:|---|---:|"]
    for r in rows:
        p = r["peer"]
        peer = (f"{p['peak']} | {p['peak'] / r['load']:.4f} | {'yes' if p['proved_optimal'] else 'no'} | "
                f"{p['time_s']:.2f}") if p.get("ok") else f"failed: {p.get('error')} | | |"
        lines.append(f"| {r['instance']} | {r['n']} | {r['load']} | {r['peak']} | {r['peak'] / r['load']:.4f} | "
                     f"{'yes' if r['status'] == 'optimal' else 'no'} | {r['time_s']:.2f} | {peer} |")
    ok = [r for r in rows if r["peer"].get("ok")]
    lines += ["", f"Totals: dsa exact {sum(r['time_s'] for r in rows):.1f} s, "
              f"{sum(r['status'] == 'optimal' for r in rows)}/{len(rows)} proven; supermalloc "
              f"{sum(r['peer']['time_s'] for r in ok):.1f} s, {sum(r['peer']['proved_optimal'] for r in ok)}/"
              f"{len(rows)} proven. Lower peak: dsa {sum(r['peak'] < r['peer']['peak'] for r in ok)}, "
              f"supermalloc {sum(r['peak'] > r['peer']['peak'] for r in ok)}, equal "
              f"{sum(r['peak'] == r['peer']['peak'] for r in ok)}.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer-python", help="the interpreter of a venv with omnimalloc installed")
    ap.add_argument("--report", type=Path, metavar="IN.json", help="rewrite the Markdown beside this JSON; run nothing")
    ap.add_argument("--time-limit", type=float, default=20.0, help="seconds per instance, for each solver")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="supermalloc's threads")
    ap.add_argument("--instances", help="comma-separated letters (default: all 11)")
    ap.add_argument("--out", type=Path, default=Path("out/peers_exact"), help="output path without suffix")
    args = ap.parse_args(argv)
    if args.report is not None:
        args.report.with_suffix(".md").write_text(report(json.loads(args.report.read_text())))
        return 0
    if not args.peer_python:
        ap.error("--peer-python is needed to run the comparison")
    warm_exact()  # no instance's time includes loading a kernel
    wanted = set(args.instances.split(",")) if args.instances else None
    rows, version = [], None
    for path in dsa.data.paths("minimalloc"):
        name = path.stem.split(".")[0]
        if wanted and name not in wanted:
            continue
        problem = dsa.data.load(path.stem).replace(capacity=None)
        t0 = time.perf_counter()
        sol = dsa.solve(problem, "exact", time_limit=args.time_limit)
        elapsed = time.perf_counter() - t0
        dsa.validate(problem, sol)
        peer = run_peer(args.peer_python, path, args.time_limit, args.threads)
        if peer.get("ok"):
            dsa.validate(problem, peer.pop("offsets"))  # the peer's plan is checked like ours
            version = peer.get("version")
        row = {"instance": name, "n": len(problem), "load": dsa.load(problem), "peak": sol.peak,
               "status": sol.status.value, "lower_bound": sol.lower_bound, "time_s": elapsed, "peer": peer}
        rows.append(row)
        print(f"{name}: dsa {sol.peak} {sol.status.value} {elapsed:.2f}s | supermalloc "
              + (f"{peer['peak']} proved={peer['proved_optimal']} {peer['time_s']:.2f}s" if peer.get("ok")
                 else peer.get("error")), file=sys.stderr, flush=True)
    doc = {**provenance("peers_exact.py", argv), "time_limit": args.time_limit, "threads": args.threads,
           "peer_version": version, "rows": rows}
    write_results(args.out, doc, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
