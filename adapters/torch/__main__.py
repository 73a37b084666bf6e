"""``python -m dsa.adapters.torch``: attach every example model, replay it, and report.

For each model of :data:`dsa.adapters.torch.examples.ZOO` at the given batch size: profile and plan
one forward, replay it a few times, check the outputs are bit-identical to eager, and print the slab
size against LOAD and the share of bytes served from the slab (``benchmarks/torch_latency.py``
measures latency). ``--plot`` draws the heap map of one model's plan.
"""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dsa.adapters.torch", description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--replays", type=int, default=5)
    parser.add_argument("--plot", metavar="PATH", help="heap map of the first model's plan (.html: an "
                        "interactive page whose tooltips show each block's op stack; else PNG, SVG or PDF)")
    args = parser.parse_args(argv)

    import torch

    from dsa.adapters.torch import attach, build_info
    from dsa.adapters.torch.examples import MODELS, ZOO, flatten_outputs

    info = build_info()
    how = f"built in {info.build_seconds:.1f} s" if info.built else "from the build cache"
    print(f"native allocator: {info.path} ({how})")
    print(f"{'model':14s} {'allocs':>6s} {'planned':>7s} {'slab KiB':>9s} {'slab/LOAD':>9s} "
          f"{'from slab':>9s}  identical")
    ok = True
    first_plan = None
    for name in ZOO:
        torch.manual_seed(0)
        model, make_input = MODELS[name]()
        x = make_input(args.batch)
        with torch.inference_mode():
            expected = flatten_outputs(model(*x))
            m = attach(model, op_stacks=first_plan is None and bool(args.plot))  # stacks label the map
            outs = [flatten_outputs(m(*x)) for _ in range(1 + args.replays)]
            same = all(len(o) == len(expected) and all(torch.equal(a, b) for a, b in zip(o, expected))
                       for o in outs)
            if first_plan is None:
                problem, solution = m.plan(*x)
                trace = next(iter(m._handles.entries.values())).trace  # the op stacks, for an HTML map
                first_plan = (name, problem, solution, trace)
        r = m.report()
        moved = r["bytes_from_slab"] + r["bytes_from_default"]
        print(f"{name:14s} {r['allocations'] // max(r['replays'], 1):6d} {r['planned_allocations']:7d} "
              f"{r['slab_bytes'] / 1024:9.1f} {r['slab_bytes'] / max(r['lower_bound_bytes'], 1):9.4f} "
              f"{r['bytes_from_slab'] / max(moved, 1):9.1%}  {'yes' if same else 'NO'}")
        ok &= same
    if args.plot and first_plan is not None:
        from dsa.plot import heap_map

        name, problem, solution, trace = first_plan
        heap_map(problem, solution, path=args.plot, title=f"{name}, batch {args.batch}: planned CPU allocations",
                 op_stacks=trace)
        print(f"heap map of {name}: {args.plot}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
