"""A general constraint solver as a reference on the rectangle cuts: OR-Tools' CP-SAT beside dsa's best.

The peers of ``peers_generated.py`` are planners. This script asks whether a strong general-purpose
solver, given the same time, finds what they do not: the plans at LOAD that every instance has
(the instances are rectangle cuts, see :func:`dsa.generate.rectangle_cut`). For each instance of a
set of ``peers_generated.py`` (``--set``, default the main set) it runs, one after the other:

1. dsa's ``best`` at ``--time-limit``;
2. CP-SAT at the same limit, minimising the peak from nothing (*CP-SAT*);
3. CP-SAT at the same limit again, given dsa's plan of step 1 as its hint, with the peak bounded by
   that plan's (*CP-SAT from dsa*): can it improve the plan dsa returned?

The model (CP-SAT 9.x): one offset variable per buffer, in units of the greatest common divisor of the
sizes (and of the hint's offsets; a plan pushed down as far as it goes has every offset a sum of sizes,
so no optimum is lost), times replaced by their ranks among the distinct start and end times, one
``AddNoOverlap2D`` over the (fixed) lifetime intervals and the offset intervals, every buffer below a
peak variable bounded below by LOAD, and that peak minimised; ``num_workers`` = ``--threads``. Alignments
are not modelled (the rectangle cuts have none; a plan that broke one would fail ``dsa.validate``).
CP-SAT runs in its own virtual environment (``--cpsat-python``; never a dependency of dsa), and every
plan it returns is checked by ``dsa.validate``. Usage::

    .venv/bin/python benchmarks/cpsat_reference.py --cpsat-python .venv-cpsat/bin/python \\
        --time-limit 20 --out docs/results/cpsat_reference

writes ``OUT.json`` (every run: peak, CP-SAT's status and lower bound, time) and ``OUT.md`` after every
instance; ``--report OUT.json`` rewrites the Markdown from the JSON alone.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from _results import provenance, write_results  # this script's folder is on sys.path
from peers_exact import run_peer_script
from peers_generated import SETS, _commit, generator_args, instance_name, make_problem, ratio, select

# runs in CP-SAT's environment: argv = CSV (id,lower,upper,size), time limit, workers, hint JSON or "-",
# LOAD (from dsa.load: the peak's lower end)
CPSAT_SCRIPT = r"""
import csv, json, math, sys, time
import ortools
from ortools.sat.python import cp_model
with open(sys.argv[1]) as f:
    rows = list(csv.DictReader(f))
limit, workers = float(sys.argv[2]), int(sys.argv[3])
hint = None if sys.argv[4] == "-" else json.load(open(sys.argv[4]))
starts = [int(r["lower"]) for r in rows]
ends = [int(r["upper"]) for r in rows]
sizes = [int(r["size"]) for r in rows]
times = sorted(set(starts) | set(ends))
rank = {t: k for k, t in enumerate(times)}
load = int(sys.argv[5])
unit = 0
for v in sizes + (hint or []):
    unit = math.gcd(unit, v)
unit = max(unit, 1)
q = [z // unit for z in sizes]
top = (max((o + z for o, z in zip(hint, sizes)), default=0) // unit) if hint else sum(q)
bottom = -(-load // unit)
m = cp_model.CpModel()
peak = m.NewIntVar(min(bottom, top), top, "peak")
ys, xs, yspans = [], [], []
for i in range(len(rows)):
    y = m.NewIntVar(0, top - q[i], f"y{i}")
    ys.append(y)
    xs.append(m.NewFixedSizeIntervalVar(rank[starts[i]], rank[ends[i]] - rank[starts[i]], f"x{i}"))
    yspans.append(m.NewFixedSizeIntervalVar(y, q[i], f"h{i}"))
    m.Add(y + q[i] <= peak)
    if hint:
        m.AddHint(y, hint[i] // unit)
if hint:
    m.AddHint(peak, top)
m.AddNoOverlap2D(xs, yspans)
m.Minimize(peak)
solver = cp_model.CpSolver()
solver.parameters.max_time_in_seconds = limit
solver.parameters.num_workers = workers
t0 = time.perf_counter()
status = solver.Solve(m)
elapsed = time.perf_counter() - t0
found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
print(json.dumps({"version": ortools.__version__, "status": solver.StatusName(status), "time_s": elapsed,
                  "bound": int(solver.BestObjectiveBound()) * unit if found else None,
                  "offsets": [int(solver.Value(y)) * unit for y in ys] if found else None}))
"""


def run_cpsat(python: str, csv_path: Path, problem, limit: float, threads: int, hint=None) -> dict:
    """CP-SAT on one instance (from ``hint``'s offsets when given), its plan checked by ``dsa.validate``."""
    import numpy as np

    import dsa

    hint_arg = "-"
    if hint is not None:
        hint_arg = csv_path.with_name("hint.json")
        hint_arg.write_text(json.dumps([int(o) for o in hint]))
    got = run_peer_script(python, CPSAT_SCRIPT, [csv_path, limit, threads, hint_arg, int(dsa.load(problem))],
                          timeout=limit * 3 + 120)
    if not got.pop("ok"):
        return {"valid": False, "error": got.get("error", "failed")}
    if got["offsets"] is None:
        return {"valid": False, "error": f"no plan (status {got['status']})", **got}
    offsets = np.asarray(got.pop("offsets"), dtype=np.int64)
    try:
        dsa.validate(problem, offsets)
    except ValueError as exc:
        return {"valid": False, "error": f"invalid plan: {exc}", **got}
    return {"valid": True, "peak": int((offsets + problem.sizes).max()), **got}


def measure(spec, args, version: list) -> dict:
    import dsa
    import dsa.io

    problem = make_problem(*spec)
    row = {"instance": instance_name(*spec), "generator_args": generator_args(*spec), "n": len(problem),
           "load": int(dsa.load(problem)), "methods": {}}
    t0 = time.perf_counter()
    sol = dsa.solve(problem, "best", time_limit=args.time_limit)
    elapsed = time.perf_counter() - t0
    dsa.validate(problem, sol)  # ours must be valid: an exception here is a bug in dsa
    row["methods"]["best"] = {"valid": True, "peak": int(sol.peak), "status": sol.status.value,
                              "time_s": elapsed}
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "instance.csv"
        dsa.io.write_csv(csv_path, problem)
        for method, hint in (("cpsat", None), ("cpsat_from_best", sol.offsets)):
            row["methods"][method] = run_cpsat(args.cpsat_python, csv_path, problem, args.time_limit,
                                               args.threads, hint)
            version[0] = row["methods"][method].get("version") or version[0]
    for method, r in row["methods"].items():
        text = f"{r['peak'] / row['load']:.4f} in {r['time_s']:.1f} s" if r.get("valid") else r.get("error")
        print(f"{row['instance']} (n={row['n']}): {LABELS[method]}: {text}", file=sys.stderr, flush=True)
    return row


LABELS = {"best": "dsa best", "cpsat": "CP-SAT", "cpsat_from_best": "CP-SAT from dsa"}


def report(doc: dict) -> str:
    rows = doc["rows"]
    lines = [f"# A general constraint solver on the rectangle cuts: CP-SAT beside dsa's best ({doc['set']} set)",
             "",
             f"Generated {doc['date']} on {doc['machine']} by `{doc['command']}`; OR-Tools "
             f"{doc.get('cpsat_version') or '?'}, dsa at commit {doc.get('dsa_commit') or '?'}. Each instance's "
             f"optimal peak is LOAD. Every method had {doc['time_limit']:g} s per instance and ran alone, one after "
             f"the other; CP-SAT ran with {doc['threads']} workers in its own virtual environment. *CP-SAT*: "
             "minimising the peak from nothing; *CP-SAT from dsa*: the same, given dsa's plan of the column "
             "before as its hint and that plan's peak as its upper bound (it can only keep or lower it). "
             "*bound*: CP-SAT's own lower bound on the peak at its limit, over LOAD (1.0000: no better than "
             "LOAD). Every plan shown passed `dsa.validate` (an invalid one would read *invalid*; *no plan*: "
             "CP-SAT found none in its time). A mean is left blank where a column has no valid plan on some "
             "instance. The model is in `benchmarks/cpsat_reference.py`.", "",
             "| instance | n | LOAD | dsa best | CP-SAT | CP-SAT from dsa | bound | status from dsa |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]

    def cell(row, method):
        value = ratio(row, method)
        if value is not None:
            return f"{value:.4f}"
        return "no plan" if row["methods"][method].get("error", "").startswith("no plan") else "invalid"

    for row in rows:
        hinted = row["methods"]["cpsat_from_best"]
        bound = "" if hinted.get("bound") is None else f"{hinted['bound'] / row['load']:.4f}"
        lines.append(f"| {row['instance']} | {row['n']} | {row['load']} | {cell(row, 'best')} | {cell(row, 'cpsat')} "
                     f"| {cell(row, 'cpsat_from_best')} | {bound} | {hinted.get('status', '')} |")
    means = {}
    for method in LABELS:
        values = [ratio(r, method) for r in rows]
        means[method] = sum(values) / len(values) if values and None not in values else None
    lines.append("| **mean** | | | " + " | ".join("" if means[m] is None else f"{means[m]:.4f}" for m in LABELS)
                 + " | | |")
    improved = sum(1 for r in rows if (ratio(r, "cpsat_from_best") or 2) < ratio(r, "best"))
    below = sum(1 for r in rows if (ratio(r, "cpsat") or 2) < ratio(r, "best"))
    lines += ["", f"CP-SAT from nothing is below dsa's best on {below} of {len(rows)} instances; given dsa's plan, "
              f"it lowered it on {improved} of {len(rows)}.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpsat-python", help="the interpreter of a venv with ortools installed")
    ap.add_argument("--report", type=Path, metavar="IN.json", help="rewrite the Markdown beside this JSON; "
                    "run nothing")
    ap.add_argument("--time-limit", type=float, default=20.0, help="seconds per instance for each run")
    ap.add_argument("--threads", type=int, default=2, help="CP-SAT's workers (default 2)")
    ap.add_argument("--set", choices=[s for s in SETS if s != "omnimalloc"], default="main",
                    help="the instances: a set of peers_generated.py (default: the main set)")
    ap.add_argument("--instances", help="comma-separated names (family-n-sSEED) or indices in the set")
    ap.add_argument("--out", type=Path, default=Path("out/cpsat_reference"), help="output path without suffix")
    ap.add_argument("--dsa-commit", help="the commit of the dsa measured, for the report")
    args = ap.parse_args(argv)
    if args.report is not None:
        write_results(args.report.with_suffix(""), json.loads(args.report.read_text()), report)
        return 0
    if not args.cpsat_python:
        ap.error("--cpsat-python is needed to run the comparison")
    specs = select(SETS[args.set][1], args.instances)
    import dsa

    dsa.warmup()
    doc = {**provenance("cpsat_reference.py", argv), "time_limit": args.time_limit, "threads": args.threads,
           "set": args.set, "dsa_commit": args.dsa_commit or _commit(Path(dsa.__file__).parent),
           "cpsat_version": None, "rows": []}
    version = [None]
    for spec in specs:
        doc["rows"].append(measure(spec, args, version))
        doc["cpsat_version"] = version[0]
        write_results(args.out, doc, report)  # after every instance: nothing is lost
    return 0


if __name__ == "__main__":
    sys.exit(main())
