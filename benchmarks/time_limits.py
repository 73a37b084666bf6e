"""How far past its ``time_limit`` each searching strategy returns (opt-in: ``make bench-time-limits``).

Usage::

    python benchmarks/time_limits.py [--limits 0.1 0.3 1 3] [--sizes 1000 2000 5000 10000 20000]
                                     [--strategies best exact] [--families cut short-wide]
                                     [--src PATH] [--compare OLD.json] [--out docs/results/time_limits]

Every call is ``dsa.solve(problem, strategy, time_limit=L)`` on an instance of
:func:`dsa.generate.rectangle_cut` (seed 7): ``cut`` with the generator's defaults, ``short-wide`` with
``aspect=10, lifetimes="short"``. The *overrun* is the wall time of the call minus ``L`` (after a
warm-up, so no kernel is compiled or loaded while timed). A searching strategy gives up its search at
the limit, but some steps cannot be stopped once started: the portfolio's first greedy pass (there
must be a plan), a strategy member of ``best``'s portfolio, the preparation of the canonical search;
this shows what they cost. Every plan passes ``dsa.validate``. ``--src`` times the strategies of another
checkout (e.g. a git worktree of a baseline); ``--compare`` puts the overruns of an earlier run (its
JSON) beside this one's in the report. Writes ``OUT.json`` and ``OUT.md``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

FAMILIES = {"cut": {}, "short-wide": {"aspect": 10.0, "lifetimes": "short"}}
SEED = 7
_HERE = Path(__file__).resolve().parent


def measure(args) -> list:
    """One row per (family, size, strategy, limit): overrun, peak / LOAD, status."""
    import dsa

    from _results import this_checkouts_generator

    gen = this_checkouts_generator()
    dsa.warmup()
    for strategy in args.strategies:  # (every kernel the calls below use, loaded before any is timed)
        dsa.solve(gen.rectangle_cut(1500, seed=1), strategy, time_limit=2.0)
    rows = []
    for family in args.families:
        for n in args.sizes:
            problem = gen.rectangle_cut(n, seed=SEED, **FAMILIES[family])
            load = dsa.load(problem)
            for strategy in args.strategies:
                for limit in args.limits:
                    t0 = time.perf_counter()
                    sol = dsa.solve(problem, strategy, time_limit=limit)
                    wall = time.perf_counter() - t0
                    dsa.validate(problem, sol)
                    row = {"family": family, "n": n, "strategy": strategy, "limit": limit, "wall_s": wall,
                           "overrun_s": wall - limit, "ratio": sol.peak / load, "status": sol.status.value}
                    rows.append(row)
                    print(f"{family:<10} {n:>6} {strategy:<6} {limit:>5g} s  overrun {row['overrun_s']:+.3f} s  "
                          f"{row['ratio']:.4f} x LOAD  {row['status']}", flush=True)
    return rows


def _key(row) -> tuple:
    return row["family"], row["n"], row["strategy"], row["limit"]


def report(doc: dict) -> str:
    """The Markdown table: overrun per instance and limit, with the earlier run's where given."""
    old = {_key(r): r for r in doc.get("compare_rows", [])}
    limits = doc["limits"]
    lines = ["# How far past `time_limit` `best` and `exact` return",
             "",
             f"Generated {doc['date']} on {doc['machine']} by `{doc['command']}`"
             + (f"; the earlier run: `{doc['compare_command']}`" if old else "") + ". "
             "Overrun: wall time of the call minus the limit, in seconds, after a warm-up (no kernel "
             "compiled or loaded while timed); instances of `dsa.generate.rectangle_cut` (seed 7), `cut` "
             "with the generator's defaults, `short-wide` with `aspect=10, lifetimes=\"short\"`."
             + (" Cells read *earlier -> now*." if old else ""),
             ""]
    for strategy in doc["strategies"]:
        lines += [f"## {strategy}", "",
                  "| family | n | " + " | ".join(f"{lim:g} s" for lim in limits) + " |",
                  "|---|---:|" + "---:|" * len(limits)]
        for family in doc["families"]:
            for n in doc["sizes"]:
                cells = []
                for lim in limits:
                    now = next((r for r in doc["rows"] if _key(r) == (family, n, strategy, lim)), None)
                    was = old.get((family, n, strategy, lim))
                    text = "-" if now is None else f"{now['overrun_s']:+.2f}"
                    cells.append(text if was is None else f"{was['overrun_s']:+.2f} -> {text}")
                lines.append(f"| {family} | {n} | " + " | ".join(cells) + " |")
        sel = [r for r in doc["rows"] if r["strategy"] == strategy]
        worst = max(sel, key=lambda r: r["overrun_s"])
        lines += ["", f"Largest overrun: {worst['overrun_s']:+.2f} s ({worst['family']}, {worst['n']} "
                      f"buffers, {worst['limit']:g} s)."]
        pairs = [(old[_key(r)]["ratio"], r["ratio"]) for r in sel if _key(r) in old]
        if pairs:
            lower = sum(now < was for was, now in pairs)
            higher = sum(now > was for was, now in pairs)
            lines.append(f"Peak / LOAD against the earlier run: lower in {lower} calls, higher in {higher}, "
                         f"level in {len(pairs) - lower - higher}.")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limits", type=float, nargs="+", default=[0.1, 0.3, 1.0, 3.0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 5000, 10000, 20000])
    parser.add_argument("--strategies", nargs="+", default=["best", "exact"])
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument("--src", help="import dsa from this checkout instead")
    parser.add_argument("--compare", help="the JSON of an earlier run, shown beside this one")
    parser.add_argument("--out", default="out/time_limits", help="writes OUT.json and OUT.md")
    args = parser.parse_args(argv)
    if args.src:
        sys.path.insert(0, str(Path(args.src).resolve()))
    sys.path.insert(0, str(_HERE))
    from _results import provenance, write_results

    doc = {**provenance("time_limits.py", sys.argv[1:] if argv is None else argv), "limits": args.limits,
           "sizes": args.sizes, "strategies": args.strategies, "families": args.families,
           "rows": measure(args)}
    if args.compare:
        earlier = json.loads(Path(args.compare).read_text())
        doc["compare_rows"], doc["compare_command"] = earlier["rows"], earlier["command"]
    write_results(Path(args.out), doc, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
