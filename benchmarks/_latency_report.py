"""The reporting side of ``benchmarks/latency_study.py``: summary, Markdown and plots from the JSON alone.

Nothing here imports torch (``latency_study.py --report IN.json`` and the unit test use it on a
machine without a timing run). Input: the study's JSON document, a dict with ``meta``, ``results``
(one row per configuration) and ``overhead`` (one row per allocator).

A *point* is a configuration without its allocator: ``(model, batch, size, serving, intra)``.

- **ratio**: the median over rounds of the paired ratio attached / eager (same process, same
  allocator, adjacent blocks);
- **vs fastest eager**: attached µs / the lowest eager µs of any allocator at that point (medians
  from different processes of the same study run);
- **allocation-heavy** point: eager on glibc is at least ``HEAVY_PENALTY`` (10 %) slower than the
  fastest eager allocator at that point, i.e. the choice of allocator matters there (this compares
  medians from different processes, which move by up to about 10 % on a shared machine);
- **named heavy** point: a model the issue names allocation-heavy (``NAMED_HEAVY``: the U-Net-like and
  the MobileNet-likes) at batch 8 or more, a definition that does not depend on a measurement;
- **on the fastest allocator**: the paired ratio attached / eager of the fastest eager allocator's
  own process (dsa on top of that allocator: same process, adjacent blocks, so robust to noise);
- **RSS growth**: ``VmHWM`` at the end of a one-side-only process minus its ``VmRSS`` at the
  start of the measurement (both sides start from the same prepared process, see the worker).
"""
from __future__ import annotations

import math
import statistics
from pathlib import Path

HEAVY_PENALTY = 1.10  # eager glibc / fastest eager at or above this: an allocation-heavy point
NAMED_HEAVY = ("unet", "mobilenet", "mobilenet_v2")  # the issue's allocation-heavy models, at batch >= 8
BASE_ALLOCATOR = "glibc"
ALLOCATOR_ORDER = ("glibc", "jemalloc", "jemalloc-thesis", "tcmalloc")
TARGETS = {"worst_ratio": 1.02, "heavy_glibc_ratio": 0.60, "heavy_vs_fastest": 0.95, "slab_over_load": 1.02,
           "overhead_us": 1.0}
POINT_KEYS = ("model", "batch", "size", "serving", "intra")


def point_of(row: dict) -> tuple:
    return tuple(row.get(k) for k in POINT_KEYS)


# fields of a configuration's repeated runs that are merged by their median
_MEDIAN_FIELDS = ("eager_us", "attached_us", "ratio", "ratio_q1", "ratio_q3", "first_call_ms",
                  "rss_eager_delta_kb", "rss_attached_delta_kb", "rss_eager_peak_kb", "rss_attached_peak_kb")


def merge_repeats(runs: list[dict]) -> list[dict]:
    """One row per configuration from its repeated runs (separate processes at different times).

    Medians of the timings, paired ratios and RSS figures; the worst slab/LOAD and share from the
    slab; fallbacks summed; outputs identical only if identical in every run. ``repeats`` counts the
    runs that succeeded (``failed_repeats`` the others) and ``*_runs`` keep each run's value. A
    configuration whose every run failed keeps its last failure.
    """
    groups: dict[tuple, list[dict]] = {}
    for row in runs:
        groups.setdefault((point_of(row), row["allocator"]), []).append(row)
    merged = []
    for rows in groups.values():
        ok = [r for r in rows if r.get("ok")]
        if not ok:
            merged.append(dict(rows[-1], repeats=0, failed_repeats=len(rows)))
            continue
        row = dict(ok[0])
        for field in _MEDIAN_FIELDS:
            values = [r[field] for r in ok if r.get(field) is not None]
            if values:
                row[field] = statistics.median(values)
        for field, pick in (("slab_over_load", max), ("from_slab", min)):
            values = [r[field] for r in ok if r.get(field) is not None]
            if values:
                row[field] = pick(values)
        row["fallbacks"] = sum(r.get("fallbacks") or 0 for r in ok)
        for field in ("identical", "eager_deterministic"):
            row[field] = all(bool(r.get(field)) for r in ok)
        row["repeats"], row["failed_repeats"] = len(ok), len(rows) - len(ok)
        for field in ("eager_us", "attached_us", "ratio"):
            row[f"{field}_runs"] = [r.get(field) for r in ok]
        merged.append(row)
    return merged


def geomean(values) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _ok(row: dict) -> bool:
    return bool(row.get("ok")) and row.get("eager_us") is not None and row.get("attached_us") is not None


def _alloc_rank(name: str) -> int:
    return ALLOCATOR_ORDER.index(name) if name in ALLOCATOR_ORDER else len(ALLOCATOR_ORDER)


def _size_rank(size) -> float:
    return -1 if size is None else float(size)


def derive(rows: list[dict]) -> dict[tuple, dict]:
    """Per point: the fastest eager allocator, glibc's penalty, whether it is allocation-heavy.

    Adds ``vs_fastest`` (attached µs / fastest eager µs) and ``fastest_eager`` to every good row.
    """
    points: dict[tuple, dict] = {}
    for row in rows:
        if _ok(row):
            points.setdefault(point_of(row), {})[row["allocator"]] = row
    info = {}
    for point, by_alloc in points.items():
        fastest = min(by_alloc, key=lambda a: (by_alloc[a]["eager_us"], _alloc_rank(a)))
        fastest_us = by_alloc[fastest]["eager_us"]
        base = by_alloc.get(BASE_ALLOCATOR)
        penalty = base["eager_us"] / fastest_us if base is not None else None
        heavy = penalty is not None and len(by_alloc) > 1 and penalty >= HEAVY_PENALTY
        for row in by_alloc.values():
            row["vs_fastest"] = row["attached_us"] / fastest_us
            row["fastest_eager"] = fastest
        info[point] = {"fastest_eager": fastest, "fastest_eager_us": fastest_us, "glibc_penalty": penalty,
                       "heavy": heavy, "allocators": sorted(by_alloc, key=_alloc_rank), "rows": by_alloc}
    return info


def _where(row: dict) -> str:
    size = "native" if row.get("size") is None else row["size"]
    return (f"{row['model']} b={row['batch']} size={size} serving={row['serving']} intra={row['intra']} "
            f"{row['allocator']}")


def summarize(doc: dict) -> dict:
    """The issue's targets, computed from the rows."""
    rows = doc.get("results", [])
    good = [r for r in rows if _ok(r)]
    info = derive(rows)
    out: dict = {"configurations": len(rows), "measured": len(good), "failed": len(rows) - len(good),
                 "points": len(info)}
    # (a) worst paired ratio on the same allocator
    if good:
        worst = max(good, key=lambda r: r["ratio"])
        out["worst_ratio"] = worst["ratio"]
        out["worst_ratio_at"] = _where(worst)
        out["ratio_le_target"] = sum(r["ratio"] <= TARGETS["worst_ratio"] for r in good)
        out["median_ratio"] = sorted(r["ratio"] for r in good)[len(good) // 2]
        out["geomean_ratio_all"] = geomean(r["ratio"] for r in good)
    # (b) allocation-heavy points
    heavy = [p for p, i in info.items() if i["heavy"] and BASE_ALLOCATOR in i["rows"]]
    out["heavy_points"] = len(heavy)
    out["heavy_definition"] = (f"eager {BASE_ALLOCATOR} >= {HEAVY_PENALTY:.2f} x the fastest eager allocator "
                               "at the same (model, batch, size, serving, intra)")
    out["heavy_glibc_ratio"] = geomean(info[p]["rows"][BASE_ALLOCATOR]["ratio"] for p in heavy)
    out["heavy_vs_fastest"] = geomean(info[p]["rows"][BASE_ALLOCATOR]["vs_fastest"] for p in heavy)
    out["heavy_best_attached_vs_fastest"] = geomean(
        min(r["vs_fastest"] for r in info[p]["rows"].values()) for p in heavy)
    out["heavy_on_fastest"] = geomean(info[p]["rows"][info[p]["fastest_eager"]]["ratio"] for p in heavy)
    named = [p for p, i in info.items() if p[0] in NAMED_HEAVY and p[1] >= 8 and BASE_ALLOCATOR in i["rows"]]
    out["named_points"] = len(named)
    out["named_glibc_ratio"] = geomean(info[p]["rows"][BASE_ALLOCATOR]["ratio"] for p in named)
    out["named_vs_fastest"] = geomean(info[p]["rows"][BASE_ALLOCATOR]["vs_fastest"] for p in named)
    out["named_on_fastest"] = geomean(info[p]["rows"][info[p]["fastest_eager"]]["ratio"] for p in named)
    with_base = [i for i in info.values() if BASE_ALLOCATOR in i["rows"]]
    out["all_glibc_ratio"] = geomean(i["rows"][BASE_ALLOCATOR]["ratio"] for i in with_base)
    out["all_vs_fastest"] = geomean(i["rows"][BASE_ALLOCATOR]["vs_fastest"] for i in with_base)
    # (c) peak RSS: attached on glibc vs eager on the fastest eager allocator (growth over the start)
    rss = []
    for point, i in info.items():
        att = i["rows"].get(BASE_ALLOCATOR, {}).get("rss_attached_delta_kb")
        eag = i["rows"][i["fastest_eager"]].get("rss_eager_delta_kb")
        if att is not None and eag is not None:
            rss.append((att - eag, att, eag, point))
    out["rss_points"] = len(rss)
    out["rss_met"] = sum(d <= 0 for d, *_ in rss)
    if rss:
        d, att, eag, point = max(rss, key=lambda t: t[0])
        out["rss_worst_excess_mb"] = d / 1024
        out["rss_worst_at"] = " ".join(f"{k}={v}" for k, v in zip(POINT_KEYS, point))
        out["rss_worst_attached_mb"], out["rss_worst_eager_mb"] = att / 1024, eag / 1024
    same_alloc = [(r["rss_attached_delta_kb"], r["rss_eager_delta_kb"]) for r in good
                  if r.get("rss_attached_delta_kb") is not None and r.get("rss_eager_delta_kb") is not None]
    out["rss_same_allocator_met"] = sum(a <= e for a, e in same_alloc)
    out["rss_same_allocator_rows"] = len(same_alloc)
    # (d) slab / LOAD
    sol = [r for r in good if r.get("slab_over_load") is not None]
    if sol:
        worst = max(sol, key=lambda r: r["slab_over_load"])
        out["worst_slab_over_load"] = worst["slab_over_load"]
        out["worst_slab_over_load_at"] = _where(worst)
        out["slab_over_load_le_target"] = sum(r["slab_over_load"] <= TARGETS["slab_over_load"] for r in sol)
        out["slab_rows"] = len(sol)
    fs = [r["from_slab"] for r in good if r.get("from_slab") is not None]
    out["min_from_slab"] = min(fs) if fs else None
    # (e) bit-identical outputs
    out["identical"] = sum(bool(r.get("identical")) for r in good)
    out["eager_deterministic"] = sum(bool(r.get("eager_deterministic")) for r in good)
    out["fallbacks"] = sum(int(r.get("fallbacks") or 0) for r in good)
    # per-call overhead
    ov = [o for o in doc.get("overhead", []) if o.get("ok") and o.get("overhead_us") is not None]
    if ov:
        worst = max(ov, key=lambda o: o["overhead_us"])
        out["overhead_us"] = worst["overhead_us"]
        out["overhead_at"] = worst["allocator"]
    return out


# ------------------------------------------------------------------ Markdown
def _f(v, spec: str, none: str = "n/a") -> str:
    return none if v is None else format(v, spec)


def _verdict(value, goal, *, le: bool = True) -> str:
    if value is None:
        return "n/a"
    return "met" if (value <= goal if le else value >= goal) else "**missed**"


def _count_verdict(met: int, total: int) -> str:
    return "n/a" if not total else ("met" if met == total else "**missed**")


def _mb(kb) -> str:
    return "n/a" if kb is None else f"{kb / 1024:.1f}"


def render_markdown(doc: dict, plots: list[str] | None = None) -> str:
    meta = doc.get("meta", {})
    s = summarize(doc)
    info = derive(doc.get("results", []))
    mach = meta.get("machine", {})
    lines = ["# Latency study: eager vs `attach` on four allocators", ""]
    load0, load1 = mach.get("load_average_start"), mach.get("load_average_end")
    lines.append(
        f"Run {meta.get('date', '?')} ({_f(meta.get('duration_s'), '.0f')} s), preset `{meta.get('preset', '?')}`, "
        f"on {mach.get('cpu_model', '?')} ({mach.get('cpu_count', '?')} CPUs), {mach.get('platform', '?')}; "
        f"load average {load0} at the start, {load1} at the end; torch {meta.get('torch', '?')}, commit "
        f"`{str(meta.get('git_commit', '?'))[:12]}`{' (dirty tree)' if meta.get('git_dirty') else ''}.")
    lines.append("")
    lines.append(f"Command: `{meta.get('command', '?')}`")
    if (meta.get("repeats") or 1) > 1:
        lines += ["", f"Every configuration ran {meta['repeats']} times, in separate processes a whole pass over "
                  "the grid apart; the figures are the medians over those runs."]
    skipped = meta.get("skipped_allocators") or {}
    if skipped:
        lines.append("")
        lines.append("Skipped allocators: " + "; ".join(f"{k} ({v})" for k, v in skipped.items()) + ".")
    if meta.get("note"):
        lines += ["", meta["note"]]
    lines += ["", "## Targets", "",
              "| target | measured | goal | |", "|---|---|---|---|"]
    if "worst_ratio" in s:
        lines.append(f"| (a) worst median paired ratio attached/eager on the same allocator, over "
                     f"{s['measured']} configurations ({s['ratio_le_target']} at or below the goal; worst at "
                     f"{s['worst_ratio_at']}) | {s['worst_ratio']:.3f} | ≤ {TARGETS['worst_ratio']} | "
                     f"{_verdict(s['worst_ratio'], TARGETS['worst_ratio'])} |")
    hp = s["heavy_points"]
    lines.append(f"| (b) geometric mean of attached(glibc)/eager(glibc) over the {hp} allocation-heavy points "
                 f"| {_f(s['heavy_glibc_ratio'], '.3f')} | ≤ {TARGETS['heavy_glibc_ratio']} | "
                 f"{_verdict(s['heavy_glibc_ratio'], TARGETS['heavy_glibc_ratio'])} |")
    lines.append(f"| (b) geometric mean of attached(glibc)/fastest eager over the {hp} allocation-heavy points "
                 f"(best attached allocator instead of glibc: {_f(s['heavy_best_attached_vs_fastest'], '.3f')}) "
                 f"| {_f(s['heavy_vs_fastest'], '.3f')} | ≤ {TARGETS['heavy_vs_fastest']} | "
                 f"{_verdict(s['heavy_vs_fastest'], TARGETS['heavy_vs_fastest'])} |")
    lines.append(f"| (b) the same points, dsa on the fastest eager allocator / that allocator's eager (paired, "
                 f"same process) | {_f(s.get('heavy_on_fastest'), '.3f')} | ≤ {TARGETS['heavy_vs_fastest']} | "
                 f"{_verdict(s.get('heavy_on_fastest'), TARGETS['heavy_vs_fastest'])} |")
    np_ = s.get("named_points", 0)
    lines.append(f"| (b) named heavy points ({np_}: {', '.join(NAMED_HEAVY)} at batch ≥ 8): attached(glibc)/"
                 f"eager(glibc) | {_f(s.get('named_glibc_ratio'), '.3f')} | ≤ {TARGETS['heavy_glibc_ratio']} | "
                 f"{_verdict(s.get('named_glibc_ratio'), TARGETS['heavy_glibc_ratio'])} |")
    lines.append(f"| (b) named heavy points: attached(glibc)/fastest eager (dsa on the fastest allocator, paired: "
                 f"{_f(s.get('named_on_fastest'), '.3f')}) | {_f(s.get('named_vs_fastest'), '.3f')} | "
                 f"≤ {TARGETS['heavy_vs_fastest']} | {_verdict(s.get('named_vs_fastest'), TARGETS['heavy_vs_fastest'])} |")
    if s["rss_points"]:
        lines.append(f"| (c) peak RSS growth of attached(glibc) ≤ that of the fastest eager allocator: points "
                     f"that meet it (worst: {s['rss_worst_attached_mb']:.1f} MB vs {s['rss_worst_eager_mb']:.1f} MB "
                     f"at {s['rss_worst_at']}) | {s['rss_met']}/{s['rss_points']} | all | "
                     f"{_count_verdict(s['rss_met'], s['rss_points'])} |")
    else:
        lines.append("| (c) peak RSS attached ≤ fastest eager | not measured | all | n/a |")
    if "worst_slab_over_load" in s:
        lines.append(f"| (d) worst slab/LOAD ({s['slab_over_load_le_target']}/{s['slab_rows']} at or below the "
                     f"goal; worst at {s['worst_slab_over_load_at']}) | {s['worst_slab_over_load']:.3f} | "
                     f"≤ {TARGETS['slab_over_load']} | "
                     f"{_verdict(s['worst_slab_over_load'], TARGETS['slab_over_load'])} |")
    lines.append(f"| (e) outputs bit-identical to eager (torch.equal, every serving thread) | "
                 f"{s['identical']}/{s['measured']} | all | {_count_verdict(s['identical'], s['measured'])} |")
    if "overhead_us" in s:
        lines.append(f"| per-call overhead of attach on a one-op model, worst allocator ({s['overhead_at']}) | "
                     f"{s['overhead_us']:.2f} µs | ≤ {TARGETS['overhead_us']} µs | "
                     f"{_verdict(s['overhead_us'], TARGETS['overhead_us'])} |")
    lines += ["",
              f"Context: geometric mean of the paired ratio over all {s['measured']} configurations "
              f"{_f(s.get('geomean_ratio_all'), '.3f')} (median {_f(s.get('median_ratio'), '.3f')}); over all "
              f"{s['points']} points attached(glibc)/eager(glibc) {_f(s['all_glibc_ratio'], '.3f')} and "
              f"attached(glibc)/fastest eager {_f(s['all_vs_fastest'], '.3f')}. Peak RSS growth attached ≤ eager on "
              f"the same allocator: {s['rss_same_allocator_met']}/{s['rss_same_allocator_rows']} configurations. "
              f"Eager outputs equal across serving threads and calls: {s['eager_deterministic']}/{s['measured']}. "
              f"Smallest share of bytes served from the slab: "
              f"{_f(None if s['min_from_slab'] is None else 100 * s['min_from_slab'], '.1f')} %. Replay fallbacks: "
              f"{s['fallbacks']}." + (f" Failed configurations: {s['failed']}." if s["failed"] else ""),
              "",
              "Definitions. A configuration is (model, batch, size, serving threads, intra-op threads, "
              "allocator) and runs in its own process; a *point* is a configuration without its allocator. "
              "*ratio*: median over interleaved rounds of attached block time / the adjacent eager block's "
              "(IQR in brackets). *vs fastest*: attached µs / the lowest eager µs of any allocator at the point. "
              f"*Allocation-heavy* point: {s['heavy_definition']}. *attached(glibc)*: dsa on the default "
              "allocator, no preload. *RSS growth*: peak RSS (VmHWM) of a process that ran only that side "
              "minus its RSS at the start of the measurement (interpreter, torch and dsa are loaded before, "
              "identically for both sides; attach plans in the measured process when a greedy ordering "
              "reaches the lower bound, which counts here, and otherwise in dsa's planner process, whose own "
              "peak RSS is not part of this figure: see `planner_memory.md`). Latencies are per call and per "
              "serving thread (each serving thread runs its own forward loop on the same model).", ""]
    ov = [o for o in doc.get("overhead", [])]
    if ov:
        lines += ["## Per-call overhead (one-op model `x + 1`, 16 floats, one thread)", "",
                  "| allocator | eager before dsa µs | eager µs | attached µs | attached − eager µs [IQR] | "
                  "passthrough µs (eager − before dsa; sequential, noisy) | identical |",
                  "|---|---:|---:|---:|---:|---:|---|"]
        for o in sorted(ov, key=lambda o: _alloc_rank(o.get("allocator", ""))):
            if not o.get("ok"):
                lines.append(f"| {o.get('allocator')} | failed: {str(o.get('error', '')).strip().splitlines()[-1:]} "
                             "| | | | | |")
                continue
            lines.append(f"| {o['allocator']} | {o['pure_eager_us']:.2f} | {o['eager_us']:.2f} | "
                         f"{o['attached_us']:.2f} | {o['overhead_us']:.2f} [{o['overhead_us_q1']:.2f}, "
                         f"{o['overhead_us_q3']:.2f}] | {o['passthrough_us']:.2f} | {o['identical']} |")
        lines.append("")
    heavy_rows = [(p, i) for p, i in info.items() if i["heavy"]]
    lines += ["## Allocation-heavy points", ""]
    if heavy_rows:
        lines += ["| model | batch | size | serving | intra | fastest eager | glibc eager / fastest | "
                  "attached(glibc)/eager(glibc) | attached(glibc)/fastest |",
                  "|---|---:|---:|---:|---:|---|---:|---:|---:|"]
        for p, i in sorted(heavy_rows, key=lambda t: (t[0][0], t[0][1], _size_rank(t[0][2]), t[0][3], t[0][4])):
            g = i["rows"][BASE_ALLOCATOR]
            lines.append(f"| {p[0]} | {p[1]} | {'native' if p[2] is None else p[2]} | {p[3]} | {p[4]} | "
                         f"{i['fastest_eager']} | {i['glibc_penalty']:.3f} | {g['ratio']:.3f} | "
                         f"{g['vs_fastest']:.3f} |")
    else:
        lines.append("None in this run.")
    lines += ["", "## Results", "",
              "Per model; ms per call and per serving thread. *size*: image side, or sequence length for "
              "sequence models (`native`: the model's fixed input).", ""]
    rows = doc.get("results", [])
    models = sorted({r["model"] for r in rows}, key=lambda m: [r["model"] for r in rows].index(m))
    for model in models:
        mine = [r for r in rows if r["model"] == model]
        kind = mine[0].get("size_kind", "")
        lines += [f"### {model}" + (f" ({kind} size)" if kind else ""), "",
                  "| batch | size | serving | intra | allocator | eager ms | attached ms | ratio [IQR] | "
                  "vs fastest | RSS growth eager / attached MB | slab/LOAD | from slab % | first call ms | "
                  "identical |", "|---:|---:|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---|"]
        mine.sort(key=lambda r: (r["batch"], _size_rank(r.get("size")), r["serving"], r["intra"],
                                 _alloc_rank(r["allocator"])))
        for r in mine:
            size = "native" if r.get("size") is None else r["size"]
            head = f"| {r['batch']} | {size} | {r['serving']} | {r['intra']} | {r['allocator']} |"
            if not _ok(r):
                err = str(r.get("error", "failed")).strip().splitlines()
                lines.append(head + f" failed: {err[-1] if err else ''} | | | | | | | | |")
                continue
            fs = None if r.get("from_slab") is None else 100 * r["from_slab"]
            flag = "" if r.get("identical") else " **no**"
            if r.get("fallbacks"):
                flag += f" (fallbacks {r['fallbacks']})"
            fastest = r.get("vs_fastest")
            lines.append(
                head + f" {r['eager_us'] / 1e3:.3f} | {r['attached_us'] / 1e3:.3f} | {r['ratio']:.3f} "
                f"[{r['ratio_q1']:.2f}, {r['ratio_q3']:.2f}] | {_f(fastest, '.3f')} | "
                f"{_mb(r.get('rss_eager_delta_kb'))} / {_mb(r.get('rss_attached_delta_kb'))} | "
                f"{_f(r.get('slab_over_load'), '.3f')} | {_f(fs, '.1f')} | {_f(r.get('first_call_ms'), '.0f')} | "
                f"{'yes' if r.get('identical') else ''}{flag} |")
        lines.append("")
    if plots:
        lines += ["## Plots", "",
                  "Relative runtime (median paired ratio attached/eager on the same allocator) against input "
                  "size, one line per serving-thread count; one figure per allocator, one panel per model "
                  "and (batch, intra-op threads). The last figure shows attached(glibc) against the fastest "
                  "eager allocator of each point.", ""]
        for p in plots:
            lines.append(f"![{Path(p).stem}]({Path(p).name})")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# ------------------------------------------------------------------ plots
def plot(doc: dict, out_dir: Path, prefix: str = "latency") -> list[Path]:
    """The relative-runtime figures; returns the files written (none without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    rows = [r for r in doc.get("results", []) if _ok(r)]
    if not rows:
        return []
    derive(rows)
    out_dir.mkdir(parents=True, exist_ok=True)
    order = []
    for r in rows:
        if r["model"] not in order:
            order.append(r["model"])
    columns = sorted({(r["batch"], r["intra"]) for r in rows})
    allocators = sorted({r["allocator"] for r in rows}, key=_alloc_rank)
    figures = [(a, "ratio", f"attached/eager, {a}") for a in allocators]
    if BASE_ALLOCATOR in allocators and len(allocators) > 1:
        figures.append((BASE_ALLOCATOR, "vs_fastest", "attached(glibc) / fastest eager allocator"))
    written = []
    servings = sorted({r["serving"] for r in rows})
    colors = {s: c for s, c in zip(servings, ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"))}
    for alloc, key, title in figures:
        mine = [r for r in rows if r["allocator"] == alloc]
        if not mine:
            continue
        nrow, ncol = len(order), len(columns)
        fig, axes = plt.subplots(nrow, ncol, figsize=(max(2.9 * ncol + 0.6, 5.0), 2.1 * nrow + 1.0),
                                 squeeze=False, sharey=True, layout="constrained")
        for i, model in enumerate(order):
            for j, (batch, intra) in enumerate(columns):
                ax = axes[i][j]
                sel = [r for r in mine if r["model"] == model and r["batch"] == batch and r["intra"] == intra]
                sizes = sorted({r.get("size") for r in sel}, key=_size_rank)
                pos = {s: k for k, s in enumerate(sizes)}
                for serving in servings:
                    pts = sorted((r for r in sel if r["serving"] == serving), key=lambda r: _size_rank(r.get("size")))
                    if pts:
                        ax.plot([pos[r.get("size")] for r in pts], [r[key] for r in pts], marker="o", ms=3,
                                color=colors[serving], label=f"{serving} serving")
                ax.axhline(1.0, color="grey", lw=0.8, ls="--")
                ax.set_xticks(range(len(sizes)))
                ax.set_xticklabels(["native" if s is None else str(s) for s in sizes], fontsize=7)
                ax.tick_params(axis="y", labelsize=7)
                if not sel:
                    ax.text(0.5, 0.5, "not run", ha="center", va="center", transform=ax.transAxes, fontsize=7)
                if i == 0:
                    ax.set_title(f"batch {batch}, intra {intra}", fontsize=8)
                if j == 0:
                    kind = next((r.get("size_kind") for r in mine if r["model"] == model), "")
                    ax.set_ylabel(f"{model}\n({kind})" if kind else model, fontsize=8)
        handles, labels = [], []
        for ax in axes.flat:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                if lab not in labels:
                    handles.append(h)
                    labels.append(lab)
        fig.suptitle(f"relative runtime: {title}\n(x: input size; lines: serving threads; dashed: 1.0)", fontsize=9)
        fig.legend(handles, labels, loc="outside lower center", fontsize=8, ncol=max(1, len(labels)), frameon=False)
        name = f"{prefix}_{alloc}.png" if key == "ratio" else f"{prefix}_vs_fastest.png"
        path = out_dir / name
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written
