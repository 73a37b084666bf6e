"""Where a forward's time goes, eager and attached: ``perf`` samples grouped by what the code does.

The latency study says how fast attached forwards are; this says why, for the allocation-heavy
models where attached is not 5 % faster than the fastest eager allocator. Each configuration (model,
batch, size, mode, allocator) runs in its own process: it builds the model, warms it up (and for
``attached`` profiles and plans it), then starts ``perf record -e cpu-clock`` on itself, runs forwards
for ``--seconds``, and stops perf. Samples are grouped by the shared object and symbol they hit:

- *page faults and zeroing (kernel)*: any kernel symbol (``[kernel.kallsyms]``), which on these runs
  is almost entirely first-touch page faults of freshly mapped memory and the zeroing of those pages;
- *allocator*: malloc/free and friends in libc, jemalloc or tcmalloc, and dsa's allocator library;
- *memset / memcpy*: libc's string routines (zero-fills and copies made by ATen);
- *ATen kernels*: everything else in ``libtorch_cpu`` (ATen's CPU kernels, oneDNN's compiled part)
  and OpenMP;
- *oneDNN JIT code*: code generated at run time (perf's ``[JIT]`` objects: oneDNN's convolution and
  matmul kernels);
- *Python and dispatch*: the interpreter, ``libtorch_python``;
- *other*.

Attached on glibc beside attached on tcmalloc shows what the base allocator still costs once the
slab serves the tensors: the allocations that are not tensor storage (oneDNN's own objects, which
it gets from ``posix_memalign``; TensorImpl and other small C++ objects) still go to malloc.

Needs ``perf`` with ``perf_event_paranoid`` <= 2 (software events only: no hardware counters needed).
Usage::

    .venv/bin/python benchmarks/latency_profile.py                 # writes docs/results/latency_profile.*
    .venv/bin/python benchmarks/latency_profile.py --models unet --sizes 128 --seconds 3
"""
from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CATEGORIES = ("page faults and zeroing (kernel)", "allocator", "memset / memcpy", "ATen kernels",
              "oneDNN JIT code", "Python and dispatch", "other")
# (mode, allocator) columns, in the order of the report
COLUMNS = (("eager", "glibc"), ("eager", "tcmalloc"), ("attached", "glibc"), ("attached", "tcmalloc"))
ALLOC_SYMBOLS = ("malloc", "free", "calloc", "realloc", "memalign", "posix_memalign", "aligned_alloc",
                 "_int_malloc", "_int_free", "sysmalloc", "systrim", "malloc_consolidate", "unlink_chunk",
                 "tcache", "arena", "mmap", "munmap", "madvise", "brk", "sbrk", "cfree")


def category(dso: str, symbol: str) -> str:
    """The group of one sample, from its shared object and symbol."""
    base = os.path.basename(dso)
    if dso.startswith("[kernel") or base.startswith("[kernel"):
        return CATEGORIES[0]
    if dso.startswith(("[JIT]", "//anon", "[anon", "[unknown]")):
        return CATEGORIES[4]
    if base.startswith(("libjemalloc", "libtcmalloc", "libdsa_alloc")):
        return CATEGORIES[1]
    if base.startswith("libc.so") or base.startswith("libc-"):
        low = symbol.lower()
        if "memset" in low or "memmove" in low or "memcpy" in low or "bzero" in low:
            return CATEGORIES[2]
        if any(name in low for name in ALLOC_SYMBOLS):
            return CATEGORIES[1]
        return CATEGORIES[6]
    if base.startswith(("libtorch_cpu", "libgomp", "libiomp", "libdnnl", "libmkl", "libopenblas",
                        "libsleef")):
        return CATEGORIES[3]
    if base.startswith(("libpython", "libtorch_python", "python")) or base.startswith("cpython"):
        return CATEGORIES[5]
    return CATEGORIES[6]


def measure(cfg: dict) -> dict:
    """In the worker process: warm up, then run forwards under perf for ``seconds``."""
    import torch

    from dsa.adapters.torch import attach
    from dsa.adapters.torch.examples import sized

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model, make_input = sized(cfg["model"], cfg.get("size"))
    x = make_input(cfg["batch"])
    fn = attach(model) if cfg["mode"] == "attached" else model
    with torch.inference_mode():
        for _ in range(3):
            fn(*x)
        perf = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(cfg["frequency"]),
                                 "-p", str(os.getpid()), "-o", cfg["data"]],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)  # perf attaches
        calls, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < cfg["seconds"]:
            fn(*x)
            calls += 1
        elapsed = time.perf_counter() - t0
        perf.send_signal(signal.SIGINT)
        _, err = perf.communicate(timeout=60)
    out = {"calls": calls, "ms_per_call": elapsed / calls * 1e3, "perf_rc": perf.returncode,
           "perf_stderr": err.decode(errors="replace")[-500:]}
    if cfg["mode"] == "attached":
        rep = fn.report()
        out["from_slab"] = rep["bytes_from_slab"] / max(1, rep["bytes_from_slab"] + rep["bytes_from_default"])
        out["fallbacks"] = rep["fallbacks"]
    return out


def samples(data: str, pid: int | None = None) -> dict[str, int]:
    """Samples per category in a perf data file (``perf report`` by dso and symbol)."""
    proc = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "-F", "sample,dso,sym",
                           "--sort", "dso,sym", "-t", "\t"], capture_output=True, text=True, timeout=600)
    counts = collections.Counter()
    top = collections.Counter()
    for line in proc.stdout.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split("\t")]
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        n, dso, sym = int(parts[0]), parts[1], parts[2]
        cat = category(dso, sym)
        counts[cat] += n
        if cat == CATEGORIES[4]:
            dso, sym = "[JIT]", "(generated code)"  # one entry, not one per address
        top[(cat, os.path.basename(dso), sym.replace("[.] ", "").replace("[k] ", ""))] += n
    return {"by_category": dict(counts),
            "top": [[c, d, s, n] for (c, d, s), n in top.most_common(12)]}


def run_one(cfg: dict, tcmalloc: str | None, timeout: float) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MALLOC_CONF")}
    if cfg["allocator"] == "tcmalloc":
        env["LD_PRELOAD"] = tcmalloc
    with tempfile.TemporaryDirectory(prefix="dsa-perf-") as tmp:
        cfg = {**cfg, "data": os.path.join(tmp, "perf.data")}
        proc = subprocess.run([sys.executable, __file__, "--one", json.dumps(cfg)], capture_output=True,
                              text=True, env=env, timeout=timeout)
        if proc.returncode != 0:
            return {**cfg, "ok": False, "error": proc.stderr[-1500:]}
        row = {**cfg, "ok": True, **json.loads(proc.stdout.strip().splitlines()[-1])}
        row.update(samples(cfg["data"]))
    row.pop("data", None)
    return row


def report(doc: dict) -> str:
    rows = [r for r in doc["rows"] if r.get("ok")]
    lines = ["# Where the time goes: perf profiles of eager and attached forwards", "",
             f"Generated {doc['date']} on {doc['machine']} by `{doc['command']}`: one process per column, "
             f"one intra-op thread, {doc['seconds']:g} s of forwards sampled by `perf record -e cpu-clock` "
             f"at {doc['frequency']} Hz after warm-up (attached: after its profile and plan). Each cell is "
             "milliseconds per forward spent in that group (share of the samples x the measured time per "
             "forward); groups are defined in `benchmarks/latency_profile.py`.", ""]
    points = sorted({(r["model"], r["batch"], r["size"]) for r in rows})
    by = {(r["model"], r["batch"], r["size"], r["mode"], r["allocator"]): r for r in rows}
    for p in points:
        cols = [c for c in COLUMNS if (*p, *c) in by]
        lines += [f"## {p[0]}, batch {p[1]}, size {p[2]}", "",
                  "| ms per forward | " + " | ".join(f"{m} ({a})" for m, a in cols) + " |",
                  "|---|" + "---:|" * len(cols)]
        for cat in CATEGORIES:
            cells = []
            for c in cols:
                r = by[(*p, *c)]
                total = sum(r["by_category"].values()) or 1
                cells.append(f"{r['ms_per_call'] * r['by_category'].get(cat, 0) / total:.1f}")
            lines.append(f"| {cat} | " + " | ".join(cells) + " |")
        lines.append("| **total (measured)** | " + " | ".join(f"**{by[(*p, *c)]['ms_per_call']:.1f}**"
                                                       for c in cols) + " |")
        lines.append("| samples | " + " | ".join(str(sum(by[(*p, *c)]["by_category"].values())) for c in cols)
                     + " |")
        lines.append("")
        att = by.get((*p, "attached", "glibc"))
        if att:
            lines.append("Top symbols, attached (glibc): " + "; ".join(
                f"{s[:60]} ({d}) {n * 100 / max(1, sum(att['by_category'].values())):.0f} %"
                for _, d, s, n in att["top"][:5]) + ".")
            lines.append("")
    failed = [r for r in doc["rows"] if not r.get("ok")]
    if failed:
        lines += [f"Failed: {len(failed)}; e.g. {failed[0]['model']} {failed[0]['mode']} {failed[0]['allocator']}: "
                  + failed[0]["error"].strip().splitlines()[-1], ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    sys.path.insert(0, str(HERE))
    from _results import grid_parser, provenance, write_results

    argv = sys.argv[1:] if argv is None else argv
    ap = grid_parser(__doc__.splitlines()[0], models=("unet", "mobilenet", "mobilenet_v2"), batches=(8,),
                     sizes=(64, 224))
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--frequency", type=int, default=999)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(measure(json.loads(args.one))))
        return 0
    if shutil.which("perf") is None:
        print("latency_profile: perf is not installed (Debian: linux-perf)", file=sys.stderr)
        return 1
    sys.path.insert(0, str(HERE))
    from latency_study import find_library

    tcmalloc = find_library("libtcmalloc.so.4")
    rows = []
    for model in args.models:
        for batch in args.batches:
            for size in args.sizes:
                for mode, allocator in COLUMNS:
                    if allocator == "tcmalloc" and not tcmalloc:
                        continue
                    cfg = {"model": model, "batch": batch, "size": size, "mode": mode, "allocator": allocator,
                           "seconds": args.seconds, "frequency": args.frequency}
                    row = run_one(cfg, tcmalloc, timeout=600)
                    rows.append(row)
                    print(f"{model} b{batch} {size} {mode} {allocator}: "
                          + (f"{row['ms_per_call']:.1f} ms, {row['by_category']}" if row["ok"] else "FAILED"),
                          file=sys.stderr, flush=True)
    doc = {**provenance("latency_profile.py", argv), "seconds": args.seconds, "frequency": args.frequency,
           "rows": rows}
    write_results(args.out_dir / "latency_profile", doc, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
