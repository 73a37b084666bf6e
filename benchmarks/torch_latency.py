"""Opt-in latency benchmark of the PyTorch adapter (``dsa.adapters.torch``): eager vs attached forwards.

For every model of ``dsa.adapters.torch.examples.ZOO`` and every batch size it measures, under
``torch.inference_mode()`` and in one process:

- eager µs: one forward of the plain model (torch's default CPU allocator);
- attached µs: one forward of ``attach(model)`` after warm-up (the first call profiles and plans,
  a second one replays), so every timed call is a replay served from the planned slab;
- ratio = attached / eager. The two are timed in interleaved blocks to cancel drift: in each round
  K eager calls, then K attached calls (the order swaps every other round), K chosen so that a block
  lasts about 30 ms; each side's figure is the median over rounds of (block time / K);
- profile ratio: one ``profile(model, *x)`` call (median of 10) / the eager median;
- slab/LOAD: ``slab_bytes / lower_bound_bytes`` of the report (1.0 is optimal), and from slab %:
  ``bytes_from_slab / (bytes_from_slab + bytes_from_default)`` over the replays.

It prints a markdown table and a summary line, and writes JSON with ``--json``. It is a plain
script, not a pytest file (the pytest suites never collect it; torch is imported only in ``main``)::

    .venv/bin/python benchmarks/torch_latency.py [--models resnet,gru] [--batches 1,8] [--repeats 20]
        [--threads N] [--json out/torch_latency.json]

``--threads N`` (or the environment variable ``DSA_BENCH_THREADS``) calls ``torch.set_num_threads(N)``;
by default torch's own thread count is kept. ``--repeats`` is the number of interleaved rounds.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

BLOCK_NS = 30_000_000  # target duration of one timed block (30 ms)
PROFILE_CALLS = 10


def _per_call_ns(fn, args, k: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(k):
        fn(*args)
    return (time.perf_counter_ns() - t0) / k


def _calibrate(fn, args) -> int:
    """Calls per block so that a block lasts about BLOCK_NS."""
    one = statistics.median(_per_call_ns(fn, args, 1) for _ in range(5))
    k = max(1, round(BLOCK_NS / max(one, 1.0)))  # first guess, then refine on a block of k calls
    return min(max(1, round(BLOCK_NS / max(_per_call_ns(fn, args, k), 1.0))), 100_000)


def bench_one(name: str, batch: int, rounds: int) -> dict:
    import torch
    from dsa.adapters.torch import attach, profile
    from dsa.adapters.torch.examples import MODELS

    torch.manual_seed(0)
    model, make_input = MODELS[name]()
    x = make_input(batch)
    m = attach(model)
    for _ in range(3):
        model(*x)
    m(*x)  # profile + plan
    for _ in range(2):
        m(*x)  # replays
    warm = m.report()
    k = _calibrate(model, x)
    eager, attached = [], []
    gc.collect()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(rounds):
            order = ((eager, model), (attached, m)) if r % 2 == 0 else ((attached, m), (eager, model))
            for sink, fn in order:
                sink.append(_per_call_ns(fn, x, k))
    finally:
        if gc_was_enabled:
            gc.enable()
    eager_ns, attached_ns = statistics.median(eager), statistics.median(attached)
    prof = []
    for _ in range(PROFILE_CALLS):
        t0 = time.perf_counter_ns()
        profile(model, *x)
        prof.append(time.perf_counter_ns() - t0)
    rep = m.report()
    served = rep["bytes_from_slab"] + rep["bytes_from_default"]
    m.detach()
    return {"model": name, "batch": batch, "calls_per_block": k, "rounds": rounds,
            "eager_us": eager_ns / 1e3, "attached_us": attached_ns / 1e3, "ratio": attached_ns / eager_ns,
            "eager_us_all": [v / 1e3 for v in eager], "attached_us_all": [v / 1e3 for v in attached],
            "profile_us": statistics.median(prof) / 1e3, "profile_ratio": statistics.median(prof) / eager_ns,
            "slab_bytes": rep["slab_bytes"], "lower_bound_bytes": rep["lower_bound_bytes"],
            "slab_over_load": rep["slab_bytes"] / rep["lower_bound_bytes"] if rep["lower_bound_bytes"] else None,
            "bytes_from_slab": rep["bytes_from_slab"], "bytes_from_default": rep["bytes_from_default"],
            "from_slab": rep["bytes_from_slab"] / served if served else None,
            "fallbacks_after_warmup": warm["fallbacks"], "fallbacks": rep["fallbacks"],
            "replays": rep["replays"], "profiles": rep["profiles"], "eager_calls": rep["eager_calls"]}


def _fmt(v, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def render(rows: list[dict]) -> str:
    lines = ["| model | batch | eager µs | attached µs | ratio | profile ratio | slab/LOAD | from slab % |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        flag = f" (fallbacks {r['fallbacks']})" if r["fallbacks"] else ""
        pct = None if r["from_slab"] is None else 100 * r["from_slab"]
        lines.append(f"| {r['model']}{flag} | {r['batch']} | {r['eager_us']:.1f} | {r['attached_us']:.1f} | "
                     f"{r['ratio']:.3f} | {r['profile_ratio']:.2f} | {_fmt(r['slab_over_load'], '.3f')} | "
                     f"{_fmt(pct, '.1f')} |")
    return "\n".join(lines)


def summarize(rows: list[dict]) -> dict:
    sol = [r["slab_over_load"] for r in rows if r["slab_over_load"] is not None]
    return {"pairs": len(rows), "pairs_ratio_le_0.95": sum(r["ratio"] <= 0.95 for r in rows),
            "max_ratio": max(r["ratio"] for r in rows), "max_profile_ratio": max(r["profile_ratio"] for r in rows),
            "max_slab_over_load": max(sol) if sol else None,
            "total_fallbacks": sum(r["fallbacks"] for r in rows)}


def _ints(text: str) -> list[int]:
    return [int(t) for t in text.split(",") if t.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=None, help="comma-separated names (default: every model of ZOO)")
    ap.add_argument("--batches", default="1,8", type=_ints, help="comma-separated batch sizes")
    ap.add_argument("--repeats", default=20, type=int, help="interleaved rounds per (model, batch)")
    ap.add_argument("--threads", default=os.environ.get("DSA_BENCH_THREADS"), type=int,
                    help="torch.set_num_threads(N) (env DSA_BENCH_THREADS); default: torch's own")
    ap.add_argument("--json", default=None, type=Path, help="write the results here")
    args = ap.parse_args(argv)

    import torch
    from dsa.adapters.torch import build_info
    from dsa.adapters.torch.examples import MODELS, ZOO

    models = [s.strip() for s in args.models.split(",") if s.strip()] if args.models else list(ZOO)
    unknown = [s for s in models if s not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; choose from {sorted(MODELS)}")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.repeats} rounds", file=sys.stderr)
    build_info()  # build/load the native allocator before any timing
    rows = []
    with torch.inference_mode():
        for name in models:
            for batch in args.batches:
                rows.append(bench_one(name, batch, args.repeats))
                r = rows[-1]
                print(f"  {name} b={batch}: K={r['calls_per_block']} ratio {r['ratio']:.3f}", file=sys.stderr)
    summary = summarize(rows)
    print(render(rows))
    print(f"\n{summary['pairs_ratio_le_0.95']}/{summary['pairs']} pairs with ratio <= 0.95; "
          f"max ratio {summary['max_ratio']:.3f}; max profile ratio {summary['max_profile_ratio']:.2f}; "
          f"max slab/LOAD {_fmt(summary['max_slab_over_load'], '.3f')}; fallbacks {summary['total_fallbacks']}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        meta = {"torch": torch.__version__, "threads": torch.get_num_threads(), "rounds": args.repeats,
                "block_ms": BLOCK_NS / 1e6, "profile_calls": PROFILE_CALLS}
        args.json.write_text(json.dumps({"meta": meta, "summary": summary, "results": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
