"""Summarise a pytest-benchmark JSON report of the dsa benchmark suite.

Usage::

    python benchmarks/summarize.py [out/bench.json]

Prints, per strategy, the mean peak/LOAD on MiniMalloc's 11 challenging instances and on the 6 real
traces (and on the PyTorch example and generated traces), then the speed figures checked against their
targets: greedy_by_size at 10k and 100k buffers, the validator at 1M buffers, and ``import dsa``.
``benchmarks/report_strategies.py`` writes the strategy comparison (Markdown, JSON, plots) from the same
report.
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
TARGET_BEST_RATIO = 1.10      # best, mean peak/LOAD on the 11 challenging instances ...
TARGET_BEST_EACH_S = 2.0      # ... each planned within this many seconds
TARGET_BEST_REAL = 1.01       # best on every real trace
TARGET_PORTFOLIO_100K_S = 0.5  # best's portfolio phase at 100k buffers
TARGET_ANY_100K_S = 10.0      # every strategy at 100k buffers
TARGET_FIRST_PLAN_S = 0.4     # import dsa + the first plan of a 30-buffer trace, in a fresh process
TARGET_DENSE_S = 2.0          # greedy_by_size on 20k buffers all alive at once ...
TARGET_DENSE_BYTES = 300 << 20  # ... within this peak RSS


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
    portfolio = None
    first_plan = None
    dense = None
    for b in report.get("benchmarks", []):
        info = b.get("extra_info", {})
        kind = info.get("kind")
        if kind == "solve" and info.get("ratio") is not None:  # a strategy that raised has no plan
            solves.append((info, b["stats"]))
        elif kind == "validate":
            validate = (info, b["stats"])
        elif kind == "import":
            imports = (info, b["stats"])
        elif kind == "portfolio":
            portfolio = info
        elif kind == "first_plan":
            first_plan = info
        elif kind == "dense":
            dense = info

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

    collections = ("minimalloc", "traces", "torch", "generated")
    counts = {c: max((len(v[c]) for v in ratios.values()), default=0) for c in collections}
    print(f"python {report.get('machine_info', {}).get('python_version', '?')} on "
          f"{report.get('machine_info', {}).get('cpu', {}).get('brand_raw', '?')}, "
          f"{report.get('datetime', '')}", file=out)
    print(file=out)
    print("peak / LOAD per strategy (mean, max in parentheses)", file=out)
    head = (f"{'strategy':<20} {'challenging (' + str(counts['minimalloc']) + ')':>20} "
            f"{'real traces (' + str(counts['traces']) + ')':>20} {'torch traces (' + str(counts['torch']) + ')':>20}"
            f" {'generated (' + str(counts['generated']) + ')':>20} {'fit 1 MiB':>9}")
    print(head, file=out)
    print("-" * len(head), file=out)
    figures: dict = {"ratios": {}}
    for s in sorted(ratios):
        cells = []
        for c in collections:
            m = mean(ratios[s][c])
            cells.append(f"{m:.4f} ({maxima[s][c]:.3f})" if ratios[s][c] else "-")
        print(f"{s:<20} {cells[0]:>20} {cells[1]:>20} {cells[2]:>20} {cells[3]:>20} "
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
            if 100_000 <= sizes[g] < 1_000_000:
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
    _strategy_targets(solves, portfolio, first_plan, figures, out)
    if dense:
        t, rss = dense["solve_s"], dense["max_rss_bytes"]
        print(f"  greedy_by_size on {dense['n']} buffers all alive at once: {_fmt_s(t)}, peak RSS "
              f"{rss / 2**20:.0f} MiB (target < {TARGET_DENSE_S:g} s and < {TARGET_DENSE_BYTES >> 20} MiB: "
              f"{_verdict(t < TARGET_DENSE_S and rss < TARGET_DENSE_BYTES)})", file=out)
    return figures


def _strategy_targets(solves, portfolio, first_plan, figures, out) -> None:
    """The targets of the approximation strategies and of best (per-instance table for best)."""
    by = {(i["strategy"], i["instance"]): (i, st) for i, st in solves}
    challenging = sorted({i["instance"] for i, _ in solves if i["collection"] == "minimalloc"})
    if any(("best", c) in by for c in challenging):
        print(file=out)
        print("best per challenging instance (default budget)", file=out)
        print(f"  {'instance':<12} {'n':>5} {'LOAD':>9} {'portfolio':>10} {'best':>9} {'peak/LOAD':>9} "
              f"{'time':>9}  status", file=out)
        rows = [by[("best", c)] for c in challenging if ("best", c) in by]
        for info, st in rows:
            pf = info.get("portfolio_peak")
            print(f"  {info['instance']:<12} {info['n']:>5} {info['lower_bound']:>9} {pf if pf else '-':>10} "
                  f"{info['peak']:>9} {info['ratio']:>9.4f} {_fmt_s(st['max']):>9}  {info.get('status', '?')}",
                  file=out)
        mean_ratio = statistics.fmean(i["ratio"] for i, _ in rows)
        slowest = max(st["max"] for _, st in rows)
        print(f"  best on the challenging instances: mean {mean_ratio:.4f} (target <= {TARGET_BEST_RATIO}: "
              f"{_verdict(mean_ratio <= TARGET_BEST_RATIO)}), slowest {_fmt_s(slowest)} "
              f"(target <= {TARGET_BEST_EACH_S:g} s: {_verdict(slowest <= TARGET_BEST_EACH_S)})", file=out)
        figures["best_challenging_ratio"] = mean_ratio
    real = [i for i, _ in solves if i["strategy"] == "best" and i["collection"] == "traces"]
    if real:
        worst = max(i["ratio"] for i in real)
        print(f"  best on the real traces: worst {worst:.4f} (target <= {TARGET_BEST_REAL} each: "
              f"{_verdict(worst <= TARGET_BEST_REAL)})", file=out)
    for name in ("gergov", "buchsbaum"):
        pairs = [(by[(name, c)][0]["peak"], by[("greedy_by_size", c)][0]["peak"]) for c in challenging
                 if (name, c) in by and ("greedy_by_size", c) in by]
        if pairs:
            wins = sum(a <= b for a, b in pairs)
            print(f"  {name} at or below greedy_by_size on {wins}/{len(pairs)} challenging instances "
                  f"(target: at least half: {_verdict(2 * wins >= len(pairs))})", file=out)
    big = [(i["strategy"], st["max"]) for i, st in solves if 100_000 <= i["n"] < 1_000_000]
    if big:
        slow = max(big, key=lambda x: x[1])
        print(f"  slowest strategy at 100k buffers: {slow[0]} {_fmt_s(slow[1])} "
              f"(target < {TARGET_ANY_100K_S:g} s for every strategy: {_verdict(slow[1] < TARGET_ANY_100K_S)})",
              file=out)
    if portfolio:
        t = portfolio["portfolio_s"]
        print(f"  best's portfolio at {portfolio['n']} buffers: {_fmt_s(t)}, "
              f"x{portfolio['ratio_to_greedy_by_size']:.2f} greedy_by_size in the same process "
              f"(target <= {TARGET_PORTFOLIO_100K_S:g} s: {_verdict(t <= TARGET_PORTFOLIO_100K_S)})", file=out)
    if first_plan:
        t = first_plan["import_and_first_solve_s"]
        print(f"  first plan of a 30-buffer trace in a fresh process: import + solve {_fmt_s(t)} "
              f"(numba: {_fmt_s(first_plan['jit_s'])}; target <= {TARGET_FIRST_PLAN_S:g} s: "
              f"{_verdict(t <= TARGET_FIRST_PLAN_S)}); python -m dsa solve {_fmt_s(first_plan['cli_s'])} "
              f"vs python -c pass {_fmt_s(first_plan['python_pass_s'])}", file=out)


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
