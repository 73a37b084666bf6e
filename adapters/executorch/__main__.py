"""``python -m dsa.adapters.executorch``: plan a saved ExecuTorch-exportable program with dsa.

Commands (each takes a ``.pt2`` file saved with ``torch.export.save``):

* ``compare MODEL.pt2``: the arena of ExecuTorch's greedy and naive planners and of dsa's strategies
  on the same tensors, against LOAD, with planning times (:func:`dsa.adapters.executorch.compare`);
* ``trace MODEL.pt2 -o OUT.csv``: the tensors of the default arena as a dsa problem (CSV or JSON), to
  plan with ``python -m dsa`` or draw (:func:`dsa.adapters.executorch.trace`);
* ``lower MODEL.pt2 -o OUT.pte``: the ExecuTorch program with dsa's plan
  (:func:`dsa.adapters.executorch.lower`).

Errors are one line starting with ``error:`` on stderr, exit code 2.
"""
from __future__ import annotations

import argparse
import json
import sys

EXIT_OK, EXIT_USAGE = 0, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        self.exit(EXIT_USAGE, f"error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m dsa.adapters.executorch", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    c = sub.add_parser("compare", help="arena per planning algorithm against LOAD")
    c.add_argument("model", help="a .pt2 file (torch.export.save)")
    c.add_argument("--strategies", default="best,exact", help="dsa strategies, comma-separated (default best,exact)")
    c.add_argument("--time-limit", type=float, default=10.0, help="seconds per dsa strategy (default 10)")
    c.add_argument("--method", default="forward")
    c.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    t = sub.add_parser("trace", help="the default arena's tensors as a dsa problem")
    t.add_argument("model")
    t.add_argument("-o", "--output", required=True, help=".csv (minimalloc format) or .json")
    t.add_argument("--method", default="forward")
    lo = sub.add_parser("lower", help="write the .pte program with dsa's memory plan")
    lo.add_argument("model")
    lo.add_argument("-o", "--output", required=True, help="the .pte file to write")
    lo.add_argument("--strategy", default="best")
    lo.add_argument("--time-limit", type=float, default=None)
    return parser


def _compare(args) -> int:
    from dsa.adapters.executorch import compare

    strategies = tuple(s.strip() for s in args.strategies.split(",") if s.strip())
    if args.time_limit <= 0:
        raise ValueError("--time-limit must be positive")
    rows = compare(args.model, strategies, method=args.method, time_limit=args.time_limit)
    print(f"{args.model}: {rows[0]['specs']} tensors planned")
    print(f"{'algorithm':20s} {'arena bytes':>14s} {'/ LOAD':>8s} {'seconds':>9s}  arenas per mem_id")
    for r in rows:
        if r["error"]:
            print(f"{r['algorithm']:20s} {'-':>14s} {'-':>8s} {r['seconds']:9.4f}  failed: {r['error']}")
            continue
        secs = "" if r["seconds"] is None else f"{r['seconds']:.4f}"
        print(f"{r['algorithm']:20s} {r['total']:14d} {r['ratio']:8.4f} {secs:>9s}  {r['arenas']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return EXIT_OK


def _trace(args) -> int:
    import dsa
    from dsa.adapters.executorch import trace

    problem = trace(args.model, method=args.method)
    if args.output.endswith(".json"):
        dsa.write_json(args.output, problem)
    else:
        dsa.write_csv(args.output, problem)
    print(f"{args.output}: {problem.n} tensors, LOAD {dsa.load(problem)} bytes")
    return EXIT_OK


def _lower(args) -> int:
    from dsa.adapters.executorch import lower

    options = {} if args.time_limit is None else {"time_limit": args.time_limit}
    prog = lower(args.model, args.strategy, **options)
    with open(args.output, "wb") as f:
        prog.write_to_file(f)
    sizes = list(prog.executorch_program.execution_plan[0].non_const_buffer_sizes)
    print(f"{args.output}: arenas {sizes[1:]} bytes")
    return EXIT_OK


def main(argv=None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2, already printed)
        return int(exc.code or 0)
    try:
        import os

        if not os.path.isfile(args.model):  # before importing executorch (seconds, and noise on stderr)
            raise FileNotFoundError(f"{args.model}: no such file")
        return {"compare": _compare, "trace": _trace, "lower": _lower}[args.command](args)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # one line, never a traceback
        message = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, ImportError):
            message = f"{message} (pip install 'dsa-planner[executorch]')"
        print(f"error: {message}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
