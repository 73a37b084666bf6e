"""Does the placement of a plan change a replayed forward's speed? (issue 10, part 4)

Once the slab removes the allocator's work and page faults, what is left is the kernels' own memory
traffic, and the plan decides which addresses they touch. This script attaches the same model with
plans that differ only in placement and times them against each other and against eager, in one
process, in interleaved blocks (order rotated every round; medians over rounds):

- ``best``: dsa's default (the lowest peak it finds: dense reuse of addresses);
- ``greedy_by_size``: another low-peak plan with a different placement;
- ``hot``: a recency-first placement (below): each block goes where the most recently freed block
  was, if it fits there, so that a kernel writes into cache lines that were just read — the
  locality idea of the issue — at the price of a possibly higher peak;
- ``bump``: no reuse within a pass at all (every block at fresh addresses; the largest footprint).

If ``bump`` and ``hot`` time like ``best``, placement does not matter on this machine and a locality
option would not pay. Run (about 2 minutes per model)::

    .venv/bin/python benchmarks/placement_locality.py [--models unet,mobilenet_v2,resnet] [--batch 8]
        [--size 128] [--rounds 15] [--threads 1] [--json out/placement.json]
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

BLOCK_NS = 40_000_000


def hot(problem):
    """Recency-first placement: a block goes at the offset of the most recently freed block where it
    fits (and is aligned); otherwise at the lowest offset that fits (first fit over canonical
    offsets). Valid by construction; the solver's validator checks it like any plan."""
    n = len(problem)
    starts, ends, sizes = (np.asarray(a, np.int64) for a in (problem.starts, problem.ends, problem.sizes))
    align = np.asarray(problem.alignments, np.int64)
    order = np.lexsort((np.arange(n), starts))
    offsets = np.zeros(n, np.int64)
    live: list[int] = []
    freed: list[int] = []  # rows in order of their end time (latest last)

    def fits(off, size, t):
        return all(offsets[j] + sizes[j] <= off or off + size <= offsets[j] for j in live if ends[j] > t)

    for i in order:
        t = starts[i]
        newly = [j for j in live if ends[j] <= t]
        live = [j for j in live if ends[j] > t]
        freed.extend(sorted(newly, key=lambda j: ends[j]))
        a = max(int(align[i]), 1)
        choice = None
        for j in reversed(freed[-64:]):  # the most recently freed first
            off = int(offsets[j])
            if off % a == 0 and fits(off, sizes[i], t):
                choice = off
                break
        if choice is None:
            for off in sorted({0, *(int(-(-(offsets[j] + sizes[j]) // a) * a) for j in live)}):
                if fits(off, sizes[i], t):
                    choice = off
                    break
        offsets[i] = choice
        live.append(i)
    return offsets


def _block(fn, x, k):
    t0 = time.perf_counter_ns()
    for _ in range(k):
        fn(*x)
    return (time.perf_counter_ns() - t0) / k


def run(name: str, batch: int, size: int | None, rounds: int) -> dict:
    import torch

    from dsa.adapters.torch import attach
    from dsa.adapters.torch.examples import sized

    torch.manual_seed(0)
    model, make_input = sized(name, size)
    x = make_input(batch)
    want = model(*x)
    plans = {"eager": model}
    for label, strategy in (("best", "best"), ("greedy_by_size", "greedy_by_size"), ("hot", hot),
                            ("bump", "bump")):
        m = attach(model, strategy)
        for _ in range(3):
            out = m(*x)
        assert torch.equal(out, want), label
        plans[label] = m
    one = statistics.median(_block(model, x, 1) for _ in range(5))
    k = max(1, round(BLOCK_NS / one))
    times = {label: [] for label in plans}
    labels = list(plans)
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            rot = labels[r % len(labels):] + labels[:r % len(labels)]
            for label in rot:
                times[label].append(_block(plans[label], x, k))
    finally:
        gc.enable()
    med = {label: statistics.median(v) for label, v in times.items()}
    row = {"model": name, "batch": batch, "size": size, "calls_per_block": k, "rounds": rounds,
           "us": {label: v / 1e3 for label, v in med.items()},
           "ratio_to_best": {label: med[label] / med["best"] for label in labels},
           "slab_bytes": {}, "fallbacks": {}}
    for label, m in plans.items():
        if label != "eager":
            rep = m.report()
            row["slab_bytes"][label] = rep["slab_bytes"]
            row["fallbacks"][label] = rep["fallbacks"]
            m.detach()
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="unet,mobilenet_v2,resnet")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    rows = []
    with torch.inference_mode():
        for name in [s.strip() for s in args.models.split(",") if s.strip()]:
            rows.append(run(name, args.batch, args.size, args.rounds))
            r = rows[-1]
            print(f"{name} b={args.batch} s={args.size}: " + ", ".join(
                f"{k} {v:.3f}" for k, v in r["ratio_to_best"].items()) + " (time / best's); slab MiB " +
                ", ".join(f"{k} {v / 2**20:.1f}" for k, v in r["slab_bytes"].items()), file=sys.stderr)
    print("| model | " + " | ".join(rows[0]["ratio_to_best"]) + " |")
    print("|---|" + "---:|" * len(rows[0]["ratio_to_best"]))
    for r in rows:
        print(f"| {r['model']} b{r['batch']} s{r['size']} | " +
              " | ".join(f"{v:.3f}" for v in r["ratio_to_best"].values()) + " |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"command": " ".join(sys.argv), "threads": args.threads, "rows": rows},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
