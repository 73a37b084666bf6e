"""The strategy comparison: Markdown tables, a compact JSON and two plots from a benchmark JSON report.

Usage::

    python benchmarks/report_strategies.py [IN.json] [OUTDIR]

``IN.json`` is the pytest-benchmark report of ``make bench`` (default ``out/bench.json``) or a compact
``strategies.json`` this script wrote before; ``OUTDIR`` (default ``docs/results``) receives

- ``strategies.json``: the ``test_solve`` records (one per strategy and instance: suite, n, peak, LOAD,
  peak / LOAD, status, validity, planning times) with the run's metadata (date, command, platform,
  cpu count, load average, git commit) and the skipped cases with their reasons; the per-round timing
  arrays are left out;
- ``strategies.md``: per suite the mean peak / LOAD and the slowest planning time of every strategy,
  the challenging instances one by one, the scaling on the generated traces with fitted log-log
  slopes, every plan that failed, and what was not run;
- ``strategy_quality.png``: mean peak / LOAD per strategy and suite (grouped bars);
- ``strategy_time.png``: planning time against the number of buffers, log-log, one line per strategy
  through the generated traces, with the fitted slope in the legend.

Everything is derived from the JSON alone, so ``report_strategies.py docs/results/strategies.json
docs/results`` regenerates the Markdown and the plots without running a benchmark.

Planning time is the median over rounds of ``dsa.solve(problem, strategy, validate=False)`` (front end
and strategy, no validation); a case with one round has that round's time.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

FORMAT = "dsa-strategy-comparison/1"
# suites in display order: key -> (title, short label)
SUITES = {
    "minimalloc": ("MiniMalloc challenging instances", "challenging"),
    "traces": ("real DNN traces (bundled)", "real traces"),
    "torch": ("PyTorch example traces (dsa.adapters.torch.profile)", "torch traces"),
    "generated": ("generated DNN-like traces (dsa.generate, 1k-1M buffers)", "generated"),
}
SUCCESS = ("optimal", "feasible", "limit_reached")
FIT_MIN_N = 10_000          # slopes are fitted on the generated traces of at least this many buffers
QUALITY_CLIP = 2.0          # the quality plot's y axis fits the means up to this; taller bars are cut and labelled
_RECORD_KEYS = ("suite", "instance", "strategy", "strategy_kind", "n", "lower_bound", "peak", "ratio", "status",
                "valid", "success", "error", "time_s", "mean_s", "min_s", "max_s", "stddev_s", "rounds",
                "strategy_time_s", "time_limit_s", "capacity", "fits_capacity", "proven_lower_bound", "member",
                "portfolio_peak")


# ---------------------------------------------------------------------------------------------- input

def _round(x, digits: int = 6):
    if isinstance(x, float) and math.isfinite(x):
        return float(f"{x:.{digits}g}")
    return x


def compact(report: dict) -> dict:
    """The comparison part of a pytest-benchmark report (or a compact one, returned as is)."""
    if report.get("format") == FORMAT:
        return report
    records = []
    for b in report.get("benchmarks", []):
        info = b.get("extra_info", {})
        if info.get("kind") != "solve":
            continue
        st = b.get("stats", {})
        rec = dict(info)
        rec.setdefault("suite", info.get("collection"))
        rec.update(time_s=st.get("median"), mean_s=st.get("mean"), min_s=st.get("min"), max_s=st.get("max"),
                   stddev_s=st.get("stddev"), rounds=st.get("rounds"))
        if "valid" not in rec:  # reports from before the comparison: every plan there was validated
            rec["valid"] = True
            rec["success"] = rec.get("status") in SUCCESS
        records.append({k: _round(rec.get(k)) for k in _RECORD_KEYS})
    extra = report.get("dsa_comparison", {})
    machine = report.get("machine_info", {})
    commit = report.get("commit_info", {})
    meta = {
        "date": report.get("datetime") or extra.get("finished"),
        "started": extra.get("started"),
        "finished": extra.get("finished"),
        "command": extra.get("command"),
        "platform": extra.get("platform") or " ".join(filter(None, (machine.get("system"), machine.get("release"),
                                                                     machine.get("machine")))),
        "cpu": machine.get("cpu", {}).get("brand_raw"),
        "cpu_count": extra.get("cpu_count") or machine.get("cpu", {}).get("count"),
        "python": extra.get("python") or machine.get("python_version"),
        "load_average_start": extra.get("load_average_start"),
        "load_average_end": extra.get("load_average_end"),
        "git_commit": extra.get("git_commit") or commit.get("id"),
        "git_dirty": extra.get("git_dirty") if extra.get("git_dirty") is not None else commit.get("dirty"),
        "git_branch": commit.get("branch"),
        "dsa_version": extra.get("dsa_version"),
        "pytest_benchmark": report.get("version"),
        "settings": extra.get("settings", {}),
    }
    return {"format": FORMAT, "meta": meta, "skipped": extra.get("skipped", []), "records": records}


def dumps(data: dict) -> str:
    """``data`` as JSON with one record (and one skipped case) per line: small and diff-friendly."""
    lines = ["{", f'  "format": {json.dumps(data["format"])},',
             f'  "meta": {json.dumps(data["meta"], sort_keys=True)},']
    for key in ("skipped", "records"):
        rows = data.get(key, [])
        lines.append(f'  "{key}": [')
        lines += [f"    {json.dumps(r)}{',' if i < len(rows) - 1 else ''}" for i, r in enumerate(rows)]
        lines.append("  ]" + ("," if key == "skipped" else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------- figures

def _suites(records) -> list[str]:
    present = {r["suite"] for r in records}
    return [s for s in SUITES if s in present] + sorted(present - set(SUITES))


def _strategies(records) -> list[str]:
    return sorted({r["strategy"] for r in records})


def _label(suite: str) -> str:
    return SUITES.get(suite, (suite, suite))[1]


def _title(suite: str) -> str:
    return SUITES.get(suite, (suite, suite))[0]


def _ok(r) -> bool:
    return r.get("ratio") is not None and r.get("valid", True)


def mean_ratios(records) -> dict:
    """(strategy, suite) -> mean peak / LOAD over the instances with a valid plan."""
    acc = defaultdict(list)
    for r in records:
        if _ok(r):
            acc[(r["strategy"], r["suite"])].append(r["ratio"])
    return {k: statistics.fmean(v) for k, v in acc.items()}


def slowest(records) -> dict:
    """(strategy, suite) -> (max planning time, its instance)."""
    out = {}
    for r in records:
        if r.get("time_s") is None:
            continue
        k = (r["strategy"], r["suite"])
        if k not in out or r["time_s"] > out[k][0]:
            out[k] = (r["time_s"], r["instance"])
    return out


def fit_slope(points) -> float | None:
    """Least-squares slope of log(time) against log(n) over ``(n, seconds)`` points (None below 2 sizes)."""
    pts = [(math.log(n), math.log(t)) for n, t in points if n and t and t > 0]
    if len({x for x, _ in pts}) < 2:
        return None
    mx = statistics.fmean(x for x, _ in pts)
    my = statistics.fmean(y for _, y in pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx


def slopes(records) -> dict:
    """strategy -> fitted slope of time against n on the generated traces with n >= FIT_MIN_N."""
    pts = defaultdict(list)
    for r in records:
        if r["suite"] == "generated" and r["n"] >= FIT_MIN_N and r.get("time_s"):
            pts[r["strategy"]].append((r["n"], r["time_s"]))
    return {s: fit_slope(p) for s, p in pts.items()}


# -------------------------------------------------------------------------------------------- markdown

def _fmt_s(x) -> str:
    if x is None:
        return "–"
    if x < 1e-3:
        return f"{x * 1e6:.0f} µs"
    if x < 1:
        return f"{x * 1e3:.1f} ms"
    return f"{x:.2f} s"


def _fmt_r(x) -> str:
    return "–" if x is None else f"{x:.4f}"


def _fmt_n(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1_000 and n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


def _numeric(cell) -> bool:
    text = str(cell).strip()
    return text == "–" or (bool(text) and (text[0].isdigit() or text[0] == "-"))


def _table(header, rows) -> list[str]:
    """A Markdown table; columns whose cells all read as numbers are right-aligned."""
    align = ["---:" if rows and all(_numeric(r[i]) for r in rows) else "---" for i in range(len(header))]
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out


def _load(x) -> str:
    return "?" if not x else ", ".join(f"{v:.2f}" for v in x)


def markdown(data: dict, *, quality_png: str = "strategy_quality.png", time_png: str = "strategy_time.png") -> str:
    """The Markdown report of a compact comparison (see :func:`compact`)."""
    meta, records, skipped = data.get("meta", {}), data.get("records", []), data.get("skipped", [])
    suites, strategies = _suites(records), _strategies(records)
    kinds = {r["strategy"]: r.get("strategy_kind") or "" for r in records}
    means, slow, fitted = mean_ratios(records), slowest(records), slopes(records)
    by = {(r["strategy"], r["instance"]): r for r in records}
    settings = meta.get("settings", {})
    L = ["# Strategy comparison", ""]
    L.append("Every registered strategy on four suites: peak / LOAD (LOAD, the most bytes alive at once, is a "
             "lower bound of the optimal peak: 1.0 is provably optimal) and planning time (median wall time of "
             "`dsa.solve(problem, strategy, validate=False)` over the rounds). Every plan is then checked by "
             "`dsa.validate`, outside the timing.")
    L.append("")
    commit = meta.get("git_commit") or "?"
    dirty = " (with uncommitted changes)" if meta.get("git_dirty") else ""
    load = meta.get("load_average_start"), meta.get("load_average_end")
    L += [f"- date: {meta.get('date') or '?'} (run {meta.get('started') or '?'} to {meta.get('finished') or '?'})",
          f"- git commit: `{commit}`{dirty}",
          f"- machine: {meta.get('platform') or '?'}, {meta.get('cpu') or '?'}, {meta.get('cpu_count') or '?'} CPUs, "
          f"Python {meta.get('python') or '?'}",
          f"- load average (1, 5, 15 min) at the start: {_load(load[0])}; at the end: {_load(load[1])} "
          "(on a shared machine the timings include other users' load)",
          f"- command: `{meta.get('command') or '?'}`",
          f"- time limit of the strategies that take one: {settings.get('time_limit_s', '?')} s; the 1M-buffer "
          f"trace only for strategies that took at most {settings.get('slow_at_100k_s', '?')} s at 100k; "
          "`max_n` of each strategy respected (see *Not run*)",
          "- regenerate this page and the plots from the JSON alone: "
          "`python benchmarks/report_strategies.py docs/results/strategies.json docs/results`", ""]

    # overview tables
    counts = {s: len({r["instance"] for r in records if r["suite"] == s}) for s in suites}
    head = ["strategy", "kind"] + [f"{_label(s)} ({counts[s]})" for s in suites]
    L += ["## Mean peak / LOAD per suite", "",
          "Mean over the suite's instances that the strategy planned (a strategy may skip instances above its "
          "`max_n`: the count is in the per-suite tables). Lower is better, 1.0 is optimal.", ""]
    L += _table(head, [[f"`{st}`", kinds.get(st, "")] + [_fmt_r(means.get((st, s))) for s in suites]
                       for st in strategies])
    L += ["", f"![mean peak / LOAD per strategy and suite]({quality_png})", ""]
    L += ["## Slowest planning time per suite", "",
          "The largest per-instance planning time of the strategy in the suite (the instance in parentheses).", ""]
    L += _table(head, [[f"`{st}`", kinds.get(st, "")]
                       + [f"{_fmt_s(slow[(st, s)][0])} ({slow[(st, s)][1]})" if (st, s) in slow else "–"
                          for s in suites] for st in strategies])
    L += ["", f"![planning time against the number of buffers]({time_png})", ""]

    # per suite
    L += ["## Per suite", ""]
    for s in suites:
        rs = [r for r in records if r["suite"] == s]
        ns = [r["n"] for r in rs]
        L += [f"### {_title(s)}", "", f"{counts[s]} instances, {min(ns)} to {max(ns)} buffers.", ""]
        header = ["strategy", "planned", "mean peak/LOAD", "max peak/LOAD", "at LOAD", "valid", "statuses",
                  "slowest"]
        if s == "minimalloc":
            header.insert(5, "fit 1 MiB")
        rows = []
        for st in strategies:
            mine = [r for r in rs if r["strategy"] == st]
            if not mine:
                continue
            ok = [r for r in mine if _ok(r)]
            stat = defaultdict(int)
            for r in mine:
                stat[r.get("status") or "?"] += 1
            row = [f"`{st}`", len(mine), _fmt_r(statistics.fmean(r["ratio"] for r in ok) if ok else None),
                   _fmt_r(max(r["ratio"] for r in ok) if ok else None),
                   sum(r["ratio"] is not None and r["ratio"] <= 1.0 for r in ok),
                   f"{sum(bool(r.get('valid')) for r in mine)}/{len(mine)}",
                   ", ".join(f"{k} {v}" for k, v in sorted(stat.items())),
                   f"{_fmt_s(slow[(st, s)][0])} ({slow[(st, s)][1]})" if (st, s) in slow else "–"]
            if s == "minimalloc":
                row.insert(5, f"{sum(bool(r.get('fits_capacity')) for r in mine)}/{len(mine)}")
            rows.append(row)
        L += _table(header, rows) + [""]

    # challenging, per instance
    chall = sorted({r["instance"] for r in records if r["suite"] == "minimalloc"})
    if chall:
        here = [st for st in strategies if any((st, c) in by for c in chall)]
        L += ["## MiniMalloc challenging instances, one by one", "",
              "peak / LOAD; `L` marks a plan stopped by the time limit, `!` a plan that failed validation or "
              "whose status is not a success, `–` not run.", ""]
        rows = []
        for c in chall:
            first = next(by[(st, c)] for st in here if (st, c) in by)
            cells = []
            for st in here:
                r = by.get((st, c))
                if r is None:
                    cells.append("–")
                    continue
                mark = "" if r.get("success", True) else " !"
                mark += " L" if r.get("status") == "limit_reached" else ""
                cells.append(_fmt_r(r.get("ratio")) + mark)
            rows.append([c, first["n"], first["lower_bound"]] + cells)
        L += _table(["instance", "n", "LOAD"] + [f"`{st}`" for st in here], rows) + [""]
        L += ["Planning time per instance:", ""]
        L += _table(["instance"] + [f"`{st}`" for st in here],
                    [[c] + [_fmt_s(by[(st, c)].get("time_s")) if (st, c) in by else "–" for st in here]
                     for c in chall]) + [""]

    # scaling
    gen = sorted({(r["n"], r["instance"]) for r in records if r["suite"] == "generated"})
    if gen:
        L += ["## Scaling on the generated traces", "",
              f"Planning time per size; the slope is the least-squares fit of log(time) on log(n) over the "
              f"generated traces of at least {_fmt_n(FIT_MIN_N)} buffers (1 is linear). The slope is that of each "
              "strategy's default settings, not of one pass: a strategy that takes a time limit stops at it or "
              "earlier (`best` stops its improvement phase at LOAD), and one whose default effort shrinks with n "
              "(`buchsbaum`'s restarts, `mincost_flow`'s exact flow on small inputs) flattens its line.", ""]
        rows = []
        for st in strategies:
            cells = [_fmt_s(by[(st, name)].get("time_s")) if (st, name) in by else "–" for _, name in gen]
            if all(c == "–" for c in cells):
                continue
            sl = fitted.get(st)
            rows.append([f"`{st}`"] + cells + ["–" if sl is None else f"{sl:.2f}"])
        L += _table(["strategy"] + [_fmt_n(n) for n, _ in gen] + ["slope"], rows) + [""]

    # failures
    bad = [r for r in records if not r.get("valid", True) or not r.get("success", True)]
    L += ["## Failures", ""]
    if bad:
        L += [f"{len(bad)} plans failed validation or ended with a status that is not a success:", ""]
        L += _table(["strategy", "suite", "instance", "n", "status", "valid", "error"],
                    [[f"`{r['strategy']}`", r["suite"], r["instance"], r["n"], r.get("status"), r.get("valid"),
                      (r.get("error") or "").replace("|", "/").replace("\n", " ")[:200]] for r in bad]) + [""]
    else:
        L += [f"None: all {len(records)} plans were accepted by `dsa.validate` and ended with a success status "
              f"({', '.join(SUCCESS)}).", ""]

    # not run
    L += ["## Not run", ""]
    if skipped:
        groups = defaultdict(list)
        for sk in skipped:
            groups[(sk["strategy"], sk["reason"])].append(sk)
        rows = []
        for (st, reason), sks in sorted(groups.items()):
            per = defaultdict(int)
            for sk in sks:
                per[sk["suite"]] += 1
            rows.append([f"`{st}`", ", ".join(f"{_label(k)} {v}" for k, v in per.items()), reason])
        L += _table(["strategy", "instances skipped", "reason"], rows) + [""]
    else:
        L += ["Nothing was skipped.", ""]
    return "\n".join(L)


# ---------------------------------------------------------------------------------------------- plots

def plot_quality(data: dict, path) -> None:
    """Grouped bars: mean peak / LOAD per strategy, one bar per suite; bars above QUALITY_CLIP are cut."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = data["records"]
    suites, strategies = _suites(records), _strategies(records)
    means = mean_ratios(records)
    top = max((v for v in means.values() if v <= QUALITY_CLIP), default=1.01)
    top = 1 + (top - 1) * 1.12 + 0.005
    fig, ax = plt.subplots(figsize=(12, 5.2), dpi=100)
    width = 0.8 / max(len(suites), 1)
    colors = plt.get_cmap("tab10").colors
    for j, s in enumerate(suites):
        xs, hs = [], []
        for i, st in enumerate(strategies):
            v = means.get((st, s))
            if v is None:
                continue
            xs.append(i - 0.4 + width * (j + 0.5))
            hs.append(v)
        count = len({r["instance"] for r in records if r["suite"] == s})
        ax.bar(xs, [min(h, top) - 1 for h in hs], width * 0.92, bottom=1, color=colors[j % 10],
               label=f"{_label(s)} ({count})", zorder=3)
        # a dot on each value, so that a mean of exactly 1.0 (no bar) still shows the strategy ran
        inside = [(x, h) for x, h in zip(xs, hs) if h <= top]
        if inside:
            ax.scatter(*zip(*inside), s=14, color=colors[j % 10], edgecolors="black", linewidths=0.5, zorder=5,
                       clip_on=False)
        for x, h in zip(xs, hs):
            if h > top:  # cut: write the value at the top of the axis
                ax.text(x, top - 0.01 * (top - 1), f"{h:.0f}" if h >= 100 else f"{h:.3g}", rotation=90,
                        ha="center", va="top", fontsize=8, color="white", fontweight="bold", zorder=4)
    ax.set_xticks(range(len(strategies)), strategies, rotation=30, ha="right")
    ax.set_xlim(-0.5, len(strategies) - 0.5)
    ax.set_ylim(1.0, top)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.grid(axis="y", alpha=0.4, zorder=0)
    ax.set_ylabel("mean peak / LOAD (1.0 = optimal)")
    ax.set_xlabel("strategy (a dot on the 1.0 line: optimal on average; no dot: not run on that suite;\n"
                  "bars cut at the top of the axis carry their value)")
    ax.set_title("Plan quality: mean peak / LOAD per strategy and suite (lower is better)")
    ax.legend(title="suite (instances)", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    # bbox: the legend sits outside the axes
    fig.savefig(path, bbox_inches="tight", pil_kwargs={"optimize": True})
    plt.close(fig)


def plot_time(data: dict, path) -> None:
    """Planning time against n, log-log: a line per strategy through the generated traces, dots elsewhere."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    records = data["records"]
    suites, strategies = _suites(records), _strategies(records)
    fitted = slopes(records)
    markers = dict(zip(suites, "osD^v<>p"))
    colors = plt.get_cmap("tab10").colors
    fig, ax = plt.subplots(figsize=(12, 6.2), dpi=100)
    handles = []
    for i, st in enumerate(strategies):
        c = colors[i % 10]
        mine = [r for r in records if r["strategy"] == st and r.get("time_s")]
        for s in suites:
            pts = sorted((r["n"], r["time_s"]) for r in mine if r["suite"] == s)
            if not pts:
                continue
            if s == "generated":
                ax.plot(*zip(*pts), color=c, marker=markers[s], ms=5, lw=1.6, zorder=3)
            else:
                ax.scatter(*zip(*pts), color=c, marker=markers[s], s=14, alpha=0.55, lw=0, zorder=2)
        sl = fitted.get(st)
        handles.append(Line2D([], [], color=c, lw=1.6, label=f"{st}  (slope {sl:.2f})" if sl is not None
                              else f"{st}  (no fit)"))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ns = [r["n"] for r in records if r.get("time_s")]
    ts = [r["time_s"] for r in records if r.get("time_s")]
    if ns and ts:  # a guide of slope 1 through the middle of the data
        import numpy as np
        x0, x1 = min(ns), max(ns)
        xm, ym = math.sqrt(x0 * x1), math.exp(statistics.fmean(math.log(t) for t in ts))
        xs = np.array([x0, x1], float)
        ax.plot(xs, ym * xs / xm, color="black", ls=":", lw=1, zorder=1)
        handles.append(Line2D([], [], color="black", ls=":", lw=1, label="slope 1 (linear), for reference"))
    ax.grid(True, which="major", alpha=0.4)
    ax.grid(True, which="minor", alpha=0.12)
    ax.set_xlabel("number of buffers n (log)")
    ax.set_ylabel("planning time, s (log; median of rounds)")
    ax.set_title("Planning time against the number of buffers\n"
                 f"(lines: generated traces; slope fitted on those with n >= {_fmt_n(FIT_MIN_N)})")
    first = ax.legend(handles=handles, title="strategy (fitted slope)", loc="upper left",
                      bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9)
    ax.add_artist(first)
    suite_handles = [Line2D([], [], color="dimgrey", marker=markers[s], ls="-" if s == "generated" else "",
                            label=_label(s)) for s in suites]
    second = ax.legend(handles=suite_handles, title="suite", loc="lower left", bbox_to_anchor=(1.01, 0.0),
                       frameon=False, fontsize=9)
    fig.tight_layout()
    # the legends sit outside the axes: make the picture wide enough for them
    fig.savefig(path, bbox_inches="tight", bbox_extra_artists=[first, second],
                pil_kwargs={"optimize": True})
    plt.close(fig)


# ------------------------------------------------------------------------------------------------ main

def report(report_json: dict, outdir, *, plots: bool = True) -> dict:
    """Write strategies.json, strategies.md and (with ``plots``) the two PNGs into ``outdir``."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    data = compact(report_json)
    if not data["records"]:
        raise ValueError("no strategy comparison records (test_solve) in the report")
    (outdir / "strategies.json").write_text(dumps(data))
    (outdir / "strategies.md").write_text(markdown(data))
    if plots:
        plot_quality(data, outdir / "strategy_quality.png")
        plot_time(data, outdir / "strategy_time.png")
    return data


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", nargs="?", default="out/bench.json",
                        help="pytest-benchmark JSON of make bench, or a strategies.json (default out/bench.json)")
    parser.add_argument("outdir", nargs="?", default="docs/results", help="output folder (default docs/results)")
    parser.add_argument("--no-plots", action="store_true", help="write only the JSON and the Markdown")
    args = parser.parse_args(argv)
    path = Path(args.report)
    if not path.exists():
        print(f"{path}: no such file; run `make bench` first", file=sys.stderr)
        return 2
    data = report(json.loads(path.read_text()), args.outdir, plots=not args.no_plots)
    bad = [r for r in data["records"] if not r.get("valid", True) or not r.get("success", True)]
    print(f"{len(data['records'])} records, {len(data['skipped'])} skipped, {len(bad)} failed -> {args.outdir}/"
          "{strategies.md, strategies.json, strategy_quality.png, strategy_time.png}")
    for r in bad:
        print(f"  FAILED: {r['strategy']} on {r['instance']} ({r['suite']}, n={r['n']}): status {r.get('status')}, "
              f"valid {r.get('valid')}: {r.get('error')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
