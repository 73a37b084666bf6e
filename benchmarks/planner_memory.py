"""Peak memory of a process that serves an attached model, planning in dsa's planner process or inline.

``attach(model, planner="process")`` (the default) plans in place with numpy when one of ``best``'s
greedy members reaches the lower bound (``dsa.strategies.best.portfolio_head``), and otherwise in a
helper process, so that numba, llvmlite and the planner's compiled kernels never load in the process
that serves the model; ``planner="inline"`` plans in the calling thread with ``dsa.solve``. This
measures what that is worth: each configuration runs in a fresh interpreter, which imports torch
and dsa's adapter, builds the model and its input, reads its RSS (the baseline), then runs
``1 + --calls`` calls in one of the modes below and reads its peak RSS (``VmHWM``); the growth
includes torch's own first-call set-up, the same in every mode:

- ``eager``: the plain model, on glibc's malloc;
- ``eager-tcmalloc``: the plain model with tcmalloc preloaded (when the library is found; on this
  machine class it is the fastest eager allocator of the allocation-heavy models);
- ``process``: attached with the default planner (where the plan was made, and the planner
  process's own peak RSS when it was used, are reported beside);
- ``inline``: attached, planned in this process.

Usage::

    .venv/bin/python benchmarks/planner_memory.py                      # writes docs/results/planner_memory.*
    .venv/bin/python benchmarks/planner_memory.py --models unet,gru --batches 1 --sizes 64
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODELS = ("resnet", "mobilenet", "transformer", "gru", "inplace_views", "multi_output", "unet", "mobilenet_v2")
MODES = ("eager", "eager-tcmalloc", "process", "inline")


def measure(cfg: dict) -> dict:
    """One configuration, in this (fresh) process."""
    import torch
    from _latency_worker import proc_status_kb  # this script's folder is on sys.path

    from dsa.adapters.torch import attach
    from dsa.adapters.torch.examples import flatten_outputs, sized

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model, make_input = sized(cfg["model"], cfg.get("size"))
    x = make_input(cfg["batch"])
    base = proc_status_kb("VmRSS")["VmRSS"]
    attached = cfg["mode"] in ("process", "inline")
    fn = attach(model, planner=cfg["mode"]) if attached else model
    with torch.inference_mode():
        t0 = time.perf_counter()
        out = fn(*x)
        first_s = time.perf_counter() - t0
        for _ in range(cfg["calls"]):
            out = fn(*x)
    peak = proc_status_kb("VmHWM")["VmHWM"]
    row = {"baseline_mb": base / 1024, "peak_mb": peak / 1024, "growth_mb": (peak - base) / 1024,
           "first_call_s": first_s, "numba_loaded": "numba" in sys.modules}
    if attached:
        rep = fn.report()
        with torch.inference_mode():  # the signature of the calls above (grad mode is part of it)
            solution = fn.plan(*x)[1]
        hwm = solution.stats.get("planner_process_hwm_kb")
        with torch.inference_mode():
            expected = model(*x)
        same = [torch.equal(a, b) for a, b in zip(flatten_outputs(out), flatten_outputs(expected))]
        row.update(identical=bool(same) and all(same), slab_mb=rep["slab_bytes"] / 2**20,
                   planned_in=rep["plans"][0]["planned_in"], planner_process_peak_mb=hwm / 1024 if hwm else None)
    return row


def _tcmalloc() -> str | None:
    sys.path.insert(0, str(HERE))
    from latency_study import find_library

    return find_library("libtcmalloc.so.4")


def run_one(cfg: dict, tcmalloc: str | None, timeout: float) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    mode = cfg["mode"]
    if mode == "eager-tcmalloc":
        env["LD_PRELOAD"] = tcmalloc
    proc = subprocess.run([sys.executable, __file__, "--one", json.dumps(cfg)], capture_output=True, text=True,
                          env=env, timeout=timeout)
    if proc.returncode != 0:
        return {**cfg, "ok": False, "error": proc.stderr[-2000:]}
    return {**cfg, "ok": True, **json.loads(proc.stdout.strip().splitlines()[-1])}


def report(doc: dict) -> str:
    rows = [r for r in doc["rows"] if r.get("ok")]
    points = sorted({(r["model"], r["batch"], r.get("size")) for r in rows}, key=lambda p: (p[0], p[1], p[2] or 0))
    by = {(r["model"], r["batch"], r.get("size"), r["mode"]): r for r in rows}
    lines = ["# Peak memory of a serving process: planning in a helper process or inline", "",
             f"Generated {doc['date']} on {doc['machine']} by `{doc['command']}`.", "",
             "Each cell is a fresh interpreter: torch and the adapter imported, the model and its input "
             f"built (its RSS then is the baseline), then 1 + {doc['calls']} calls in the mode of the "
             "column (torch's own first-call set-up is in every mode's growth). *growth*: peak RSS (VmHWM) "
             "minus the baseline, MB. `process`: `attach(model)`, the default (plans in place with numpy "
             "when a greedy member of `best` reaches the lower bound, *planned in* `inline`; otherwise in "
             "dsa's planner process, *planned in* `process`, whose own peak RSS is in the last column and "
             "which exits after 30 idle seconds); `inline`: `attach(model, planner=\"inline\")` "
             "(`dsa.solve` in the calling thread). *first call*: the call that profiles and plans, seconds.", "",
             "| model | batch | size | eager growth | eager tcmalloc growth | attached growth (process) | "
             "attached growth (inline) | slab MB | first call s (process / inline) | numba in the served "
             "process (process / inline) | planned in (process) | planner process peak MB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]

    def cell(point, mode, key, fmt="{:.1f}"):
        r = by.get((*point, mode))
        return "–" if r is None or r.get(key) is None else fmt.format(r[key])

    summary = {m: [] for m in MODES}
    for p in points:
        for m in MODES:
            if (*p, m) in by:
                summary[m].append(by[(*p, m)]["growth_mb"])
        lines.append(f"| {p[0]} | {p[1]} | {p[2] if p[2] is not None else 'native'} | {cell(p, 'eager', 'growth_mb')} | "
                     f"{cell(p, 'eager-tcmalloc', 'growth_mb')} | {cell(p, 'process', 'growth_mb')} | "
                     f"{cell(p, 'inline', 'growth_mb')} | {cell(p, 'process', 'slab_mb', '{:.2f}')} | "
                     f"{cell(p, 'process', 'first_call_s', '{:.2f}')} / {cell(p, 'inline', 'first_call_s', '{:.2f}')} | "
                     f"{cell(p, 'process', 'numba_loaded', '{}')} / {cell(p, 'inline', 'numba_loaded', '{}')} | "
                     f"{cell(p, 'process', 'planned_in', '{}')} | "
                     f"{cell(p, 'process', 'planner_process_peak_mb', '{:.0f}')} |")
    process_vs_eager = []
    for p in points:
        eagers = [by[(*p, m)]["growth_mb"] for m in ("eager", "eager-tcmalloc") if (*p, m) in by]
        if (*p, "process") in by and eagers:
            process_vs_eager.append(by[(*p, "process")]["growth_mb"] <= min(eagers))
    med = {m: statistics.median(v) if v else None for m, v in summary.items()}
    lines += ["", "Median growth over the points, MB: " + ", ".join(
        f"{m} {v:.1f}" for m, v in med.items() if v is not None) + ".",
        f"Attached (process) grows no more than the leaner eager allocator at {sum(process_vs_eager)} of "
        f"{len(process_vs_eager)} points.", ""]
    failed = [r for r in doc["rows"] if not r.get("ok")]
    if failed:
        lines += [f"Failed: {len(failed)} configurations, e.g. {failed[0]['model']} {failed[0]['mode']}: "
                  f"{failed[0]['error'].strip().splitlines()[-1]}", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    sys.path.insert(0, str(HERE))
    from _results import grid_parser, provenance, write_results

    argv = sys.argv[1:] if argv is None else argv
    ap = grid_parser(__doc__.splitlines()[0], models=MODELS, batches=(1, 8), sizes=(64, 224))
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(measure(json.loads(args.one))))
        return 0
    tcmalloc = _tcmalloc()
    modes = [m for m in MODES if m != "eager-tcmalloc" or tcmalloc]
    rows = []
    for model in args.models:
        for batch in args.batches:
            for size in ((None,) if model == "inplace_views" else args.sizes):
                for mode in modes:
                    cfg = {"model": model, "batch": batch, "size": size, "mode": mode, "calls": args.calls}
                    row = run_one(cfg, tcmalloc, args.timeout)
                    rows.append(row)
                    print(f"{model} b{batch} {size} {mode}: " + (f"+{row['growth_mb']:.1f} MB, first "
                          f"{row['first_call_s']:.2f} s" if row["ok"] else "FAILED"), file=sys.stderr, flush=True)
    doc = {**provenance("planner_memory.py", argv), "calls": args.calls, "rows": rows}
    write_results(args.out_dir / "planner_memory", doc, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
