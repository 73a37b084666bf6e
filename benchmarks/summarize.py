"""Summarise a pytest-benchmark JSON report of the dsa benchmark suite.

Usage::

    python benchmarks/summarize.py [out/bench.json]

Prints, per strategy, the mean peak/LOAD on MiniMalloc's 11 challenging instances and on the 6 real
traces (and on the generated traces), then the speed figures checked against their targets:
greedy_by_size at 10k and 100k buffers, the validator at 1M buffers, and ``import dsa``.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

# targets the project reports against
TARGET_REAL_RATIO = 1.02      # greedy_by_size peak / LOAD on the real traces
TARGET_GREEDY_100K_S = 1.0    # greedy_by_size on 100k buffers, after compilation
TARGET_VALIDATE_1M_S = 1.0    # dsa.validate on 1M buffers, after compilation
TARGET_IMPORT_S = 0.2         # import dsa


def _fmt_s(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if x < 1e-3:
        return f"{x * 1e6:.0f} us"
    if x < 1:
        return f"{x * 1e3:.1f} ms"
    return f"{x:.2f} s"


def _verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def summarize(report: dict, out=sys.stdout) -> dict:
    """Print the summary of ``report`` (a loaded pytest-benchmark JSON) to ``out``; return the figures."""
    solves = []
    validate = None
    imports = None
    for b in report.get("benchmarks", []):
        info = b.get("extra_info", {})
        kind = info.get("kind")
        if kind == "solve":
            solves.append((info, b["stats"]))
        elif kind == "validate":
            validate = (info, b["stats"])
        elif kind == "import":
            imports = (info, b["stats"])

    ratios: dict = defaultdict(lambda: defaultdict(list))   # strategy -> collection -> [ratio]
    maxima: dict = defaultdict(lambda: defaultdict(float))
    fits: dict = defaultdict(int)
    times: dict = {}                                          # (strategy, instance) -> (mean, strategy-only)
    sizes: dict = {}
    for info, stats in solves:
        s, c = info["strategy"], info["collection"]
        ratios[s][c].append(info["ratio"])
        maxima[s][c] = max(maxima[s][c], info["ratio"])
        if info.get("fits_capacity"):
            fits[s] += 1
        times[(s, info["instance"])] = (stats["mean"], info.get("strategy_time_s"))
        sizes[info["instance"]] = info["n"]

    def mean(xs):
        return statistics.fmean(xs) if xs else float("nan")

    counts = {c: max((len(v[c]) for v in ratios.values()), default=0)
              for c in ("minimalloc", "traces", "generated")}
    print(f"python {report.get('machine_info', {}).get('python_version', '?')} on "
          f"{report.get('machine_info', {}).get('cpu', {}).get('brand_raw', '?')}, "
          f"{report.get('datetime', '')}", file=out)
    print(file=out)
    print("peak / LOAD per strategy (mean, max in parentheses)", file=out)
    head = (f"{'strategy':<20} {'challenging (' + str(counts['minimalloc']) + ')':>20} "
            f"{'real traces (' + str(counts['traces']) + ')':>20} {'generated (' + str(counts['generated']) + ')':>20}"
            f" {'fit 1 MiB':>9}")
    print(head, file=out)
    print("-" * len(head), file=out)
    figures: dict = {"ratios": {}}
    for s in sorted(ratios):
        cells = []
        for c in ("minimalloc", "traces", "generated"):
            m = mean(ratios[s][c])
            cells.append(f"{m:.4f} ({maxima[s][c]:.3f})" if ratios[s][c] else "-")
        print(f"{s:<20} {cells[0]:>20} {cells[1]:>20} {cells[2]:>20} "
              f"{str(fits[s]) + '/' + str(counts['minimalloc']):>9}", file=out)
        figures["ratios"][s] = {c: mean(v) for c, v in ratios[s].items()}

    print(file=out)
    print("per real trace, peak / LOAD", file=out)
    trace_names = sorted({i["instance"] for i, _ in solves if i["collection"] == "traces"})
    by = {(i["strategy"], i["instance"]): i["ratio"] for i, _ in solves}
    strategies = sorted(ratios)
    print(f"{'trace':<34}" + "".join(f"{s:>19}" for s in strategies), file=out)
    for t in trace_names:
        print(f"{t:<34}" + "".join(f"{by.get((s, t), float('nan')):>19.4f}" for s in strategies), file=out)

    print(file=out)
    print("solve time on generated dnn traces (mean of dsa.solve, validate=False; in parentheses the strategy alone, last round)", file=out)
    gen = sorted({i["instance"] for i, _ in solves if i["collection"] == "generated"}, key=lambda k: sizes[k])
    for g in gen:
        row = ", ".join(f"{s} {_fmt_s(times[(s, g)][0])} ({_fmt_s(times[(s, g)][1])})"
                        for s in strategies if (s, g) in times)
        print(f"  {g} (n={sizes[g]}): {row}", file=out)

    print(file=out)
    print("targets", file=out)
    real = figures["ratios"].get("greedy_by_size", {}).get("traces")
    if real is not None:
        worst = maxima["greedy_by_size"]["traces"]
        within = sum(r <= TARGET_REAL_RATIO for r in ratios["greedy_by_size"]["traces"])
        print(f"  greedy_by_size peak/LOAD on real traces: mean {real:.4f}, max {worst:.4f} "
              f"(target <= {TARGET_REAL_RATIO}: mean {_verdict(real <= TARGET_REAL_RATIO)}; "
              f"{within}/{len(ratios['greedy_by_size']['traces'])} traces within)", file=out)
    for g in gen:
        if ("greedy_by_size", g) in times:
            t, inner = times[("greedy_by_size", g)]
            line = f"  greedy_by_size on {g} (n={sizes[g]}): {_fmt_s(t)} (strategy alone {_fmt_s(inner)})"
            if sizes[g] >= 100_000:
                line += f" (target < {TARGET_GREEDY_100K_S:g} s: {_verdict(t < TARGET_GREEDY_100K_S)})"
            print(line, file=out)
            figures[f"greedy_by_size_{g}_s"] = t
    if validate:
        info, stats = validate
        t = stats["mean"]
        print(f"  validate on {info['n']} buffers: {_fmt_s(t)} "
              f"(target < {TARGET_VALIDATE_1M_S:g} s: {_verdict(t < TARGET_VALIDATE_1M_S)})", file=out)
        figures["validate_s"] = t
    if imports:
        info, _ = imports
        t = info["in_process_import_s"]
        print(f"  import dsa: {_fmt_s(t)} in process; python -c 'import dsa' {_fmt_s(info['import_dsa_s'])} vs "
              f"python -c pass {_fmt_s(info['python_pass_s'])}: +{_fmt_s(info['difference_s'])}, "
              f"x{info['ratio']:.2f} (target < {TARGET_IMPORT_S:g} s: {_verdict(t < TARGET_IMPORT_S)}); "
              f"heavy modules imported: {info.get('heavy_modules_imported') or 'none'}", file=out)
        figures["import_s"] = t
    return figures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", nargs="?", default="out/bench.json", help="pytest-benchmark JSON file")
    args = parser.parse_args(argv)
    path = Path(args.report)
    if not path.exists():
        print(f"{path}: no such file; run `make bench` first", file=sys.stderr)
        return 2
    summarize(json.loads(path.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
