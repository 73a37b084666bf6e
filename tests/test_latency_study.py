"""The latency study's report (benchmarks/_latency_report.py) on a hand-made JSON, and one tiny live run."""
from __future__ import annotations

import copy
import json
import math
import subprocess
import sys

import pytest

from conftest import BENCHMARKS as BENCH
from conftest import load_benchmark

report = load_benchmark("_latency_report")
MB = 1024  # kB


def _row(serving, allocator, eager, attached, ratio, *, rss_e, rss_a, sol=1.0, identical=True, **extra):
    return {"model": "toy", "batch": 1, "size": 64, "size_kind": "image", "serving": serving, "intra": 1,
            "allocator": allocator, "ok": True, "eager_us": eager, "attached_us": attached, "ratio": ratio,
            "ratio_q1": ratio - 0.01, "ratio_q3": ratio + 0.01, "identical": identical,
            "eager_deterministic": True, "slab_over_load": sol, "from_slab": 0.99, "fallbacks": 0,
            "first_call_ms": 12.0, "rss_eager_delta_kb": rss_e * MB, "rss_attached_delta_kb": rss_a * MB, **extra}


DOC = {
    "meta": {"date": "2026-01-01T00:00:00+00:00", "preset": "test", "command": "latency_study.py --preset test",
             "torch": "2.13.0", "git_commit": "0123456789abcdef", "duration_s": 1.0,
             "machine": {"platform": "Linux", "cpu_model": "toy CPU", "cpu_count": 2,
                         "load_average_start": [0.1, 0.1, 0.1], "load_average_end": [0.2, 0.1, 0.1]},
             "skipped_allocators": {"tcmalloc": "libtcmalloc.so.4 not found"}},
    "results": [
        # point A (serving 1): glibc eager is 2x the fastest eager (jemalloc): allocation-heavy
        _row(1, "glibc", 200.0, 100.0, 0.5, rss_e=80, rss_a=50),
        _row(1, "jemalloc", 100.0, 98.0, 0.98, rss_e=60, rss_a=70, sol=1.05),
        # point B (serving 2): glibc is the fastest eager; not allocation-heavy
        _row(2, "glibc", 100.0, 101.0, 1.03, rss_e=30, rss_a=40, sol=1.01, identical=False),
        _row(2, "jemalloc", 105.0, 100.0, 0.95, rss_e=35, rss_a=35),
        # a configuration that failed is counted, not measured
        {"model": "toy", "batch": 1, "size": 128, "serving": 1, "intra": 1, "allocator": "glibc", "ok": False,
         "error": "Traceback ...\nRuntimeError: boom"},
    ],
    "overhead": [
        {"allocator": "glibc", "ok": True, "pure_eager_us": 3.0, "eager_us": 3.0, "attached_us": 3.4,
         "overhead_us": 0.4, "overhead_us_q1": 0.3, "overhead_us_q3": 0.5, "passthrough_us": 0.0,
         "identical": True},
        {"allocator": "jemalloc", "ok": True, "pure_eager_us": 3.0, "eager_us": 3.0, "attached_us": 3.7,
         "overhead_us": 0.7, "overhead_us_q1": 0.6, "overhead_us_q3": 0.8, "passthrough_us": 0.0,
         "identical": True},
    ],
}


def test_summary_numbers():
    s = report.summarize(copy.deepcopy(DOC))
    assert (s["configurations"], s["measured"], s["failed"], s["points"]) == (5, 4, 1, 2)
    # (a) the worst paired ratio is the row's own median ratio, not attached_us / eager_us
    assert s["worst_ratio"] == pytest.approx(1.03)
    assert "serving=2" in s["worst_ratio_at"] and "glibc" in s["worst_ratio_at"]
    assert s["ratio_le_target"] == 3
    # (b) one allocation-heavy point (A); attached(glibc)/eager(glibc) = 0.5, attached(glibc)/fastest = 100/100
    assert s["heavy_points"] == 1
    assert s["heavy_glibc_ratio"] == pytest.approx(0.5)
    assert s["heavy_vs_fastest"] == pytest.approx(1.0)
    assert s["heavy_best_attached_vs_fastest"] == pytest.approx(0.98)
    assert s["heavy_on_fastest"] == pytest.approx(0.98)  # dsa on jemalloc / jemalloc eager, paired
    # no point is a named heavy model at batch >= 8
    assert s["named_points"] == 0 and s["named_glibc_ratio"] is None
    assert s["all_glibc_ratio"] == pytest.approx(math.sqrt(0.5 * 1.03))
    assert s["all_vs_fastest"] == pytest.approx(math.sqrt(1.0 * 1.01))
    # (c) A: attached glibc 50 MB <= fastest eager (jemalloc) 60 MB; B: 40 MB > glibc eager 30 MB
    assert (s["rss_met"], s["rss_points"]) == (1, 2)
    assert s["rss_worst_excess_mb"] == pytest.approx(10.0)
    assert (s["rss_same_allocator_met"], s["rss_same_allocator_rows"]) == (2, 4)
    # (d), (e), overhead
    assert s["worst_slab_over_load"] == pytest.approx(1.05) and "jemalloc" in s["worst_slab_over_load_at"]
    assert (s["slab_over_load_le_target"], s["slab_rows"]) == (3, 4)
    assert s["identical"] == 3
    assert s["overhead_us"] == pytest.approx(0.7) and s["overhead_at"] == "jemalloc"


def test_named_heavy_points_are_the_issues_models_at_batch_8():
    doc = copy.deepcopy(DOC)
    for row in doc["results"]:
        row.update(model="unet", batch=8)
    s = report.summarize(doc)
    assert s["named_points"] == 2
    assert s["named_glibc_ratio"] == pytest.approx(math.sqrt(0.5 * 1.03))
    # point A: fastest eager is jemalloc (paired 0.98); point B: glibc (paired 1.03)
    assert s["named_on_fastest"] == pytest.approx(math.sqrt(0.98 * 1.03))


def test_heavy_needs_another_allocator():
    only_glibc = {"results": [r for r in copy.deepcopy(DOC["results"]) if r["allocator"] == "glibc"]}
    s = report.summarize(only_glibc)
    assert s["heavy_points"] == 0 and s["heavy_glibc_ratio"] is None and s["heavy_vs_fastest"] is None
    assert "n/a" in report.render_markdown(only_glibc)


def test_markdown():
    md = report.render_markdown(copy.deepcopy(DOC), ["out/latency_glibc.png"])
    assert md.startswith("# Latency study")
    targets = md[md.index("## Targets"):md.index("## Per-call overhead")]
    lines = [line for line in targets.splitlines() if line.startswith("| (")]
    assert len(lines) == 9
    assert "| 1.030 | ≤ 1.02 | **missed** |" in lines[0]
    assert "| 0.500 | ≤ 0.6 | met |" in lines[1]
    assert "| 1.000 | ≤ 0.95 | **missed** |" in lines[2]
    assert "| 0.980 | ≤ 0.95 | **missed** |" in lines[3]   # dsa on the fastest allocator, paired
    assert "| n/a | ≤ 0.6 | n/a |" in lines[4]             # no named heavy point in this document
    assert "| 1/2 | all | **missed** |" in lines[6]
    assert "| 1.050 | ≤ 1.02 | **missed** |" in lines[7]
    assert "| 3/4 | all | **missed** |" in lines[8]
    assert "| 0.70 µs | ≤ 1.0 µs | met |" in targets
    assert "tcmalloc (libtcmalloc.so.4 not found)" in md
    assert "`latency_study.py --preset test`" in md
    # the results table: one line per configuration, the failed one says so
    table = md[md.index("### toy"):]
    assert table.count("| 1 | 64 |") == 4
    assert "failed: RuntimeError: boom" in table
    assert "1.030 [1.02, 1.04]" in table and " **no**" in table
    assert "![latency_glibc](latency_glibc.png)" in md


def test_geomean():
    assert report.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert report.geomean([]) is None and report.geomean([None]) is None


def test_report_mode_regenerates_markdown_and_plots(tmp_path):
    pytest.importorskip("matplotlib")
    study = load_benchmark("latency_study")
    src = tmp_path / "in.json"
    src.write_text(json.dumps(DOC))
    assert study.main(["--report", str(src), "--out-dir", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "latency.md").read_text()
    assert "## Targets" in md and "## Plots" in md
    pngs = sorted(p.name for p in (tmp_path / "out").glob("latency_*.png"))
    assert pngs == ["latency_glibc.png", "latency_jemalloc.png", "latency_vs_fastest.png"]


def test_grid_and_presets():
    study = load_benchmark("latency_study")
    quick = study.grid({**study.PRESETS["quick"], "allocators": ("glibc",)})
    assert len(quick) == 2 * 2 * 2  # models x sizes x serving
    default = study.grid(study.PRESETS["default"])
    assert {p["model"] for p in default} == set(study.ALL_MODELS)
    assert {p["intra"] for p in default if p["model"] == "unet"} == {1, 2}
    assert {p["intra"] for p in default if p["model"] == "gru"} == {1}
    assert {p["size"] for p in default if p["model"] == "inplace_views"} == {None}


@pytest.mark.slow
def test_one_tiny_configuration_runs(tmp_path):
    """A live run: one configuration on glibc, forked from a prepared worker, a few rounds (about 10 s)."""
    pytest.importorskip("torch")
    cmd = [sys.executable, str(BENCH / "latency_study.py"), "--preset", "quick", "--models", "multi_output",
           "--batches", "1", "--sizes", "64", "--serving", "2", "--allocators", "glibc", "--budget", "0.05",
           "--min-rounds", "3", "--max-rounds", "3", "--block-ms", "2", "--rss-calls", "2", "--no-overhead",
           "--out-dir", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads((tmp_path / "latency.json").read_text())
    (row,) = doc["results"]
    assert row["ok"], row.get("error")
    assert row["identical"] and row["rounds"] == 3 and row["slab_threads"] == 2
    assert row["eager_us"] > 0 and row["attached_us"] > 0 and row["slab_over_load"] >= 1.0
    assert row["rss_eager_peak_kb"] > 0 and row["rss_attached_peak_kb"] > 0
    assert doc["meta"]["allocators"]["glibc"]["preload"] is None and doc["meta"]["torch"]
    assert (tmp_path / "latency.md").read_text().startswith("# Latency study")


def test_repeated_runs_merge_by_median():
    runs = [dict(_row(1, "glibc", 200.0, 100.0, 0.5, rss_e=80, rss_a=50), rep=0),
            dict(_row(1, "glibc", 300.0, 120.0, 0.4, rss_e=90, rss_a=40, sol=1.01, identical=False), rep=1),
            dict(_row(1, "glibc", 250.0, 110.0, 0.45, rss_e=70, rss_a=60), rep=2),
            dict(_row(1, "jemalloc", 100.0, 98.0, 0.98, rss_e=60, rss_a=70), rep=0),
            {"model": "toy", "batch": 1, "size": 64, "serving": 1, "intra": 1, "allocator": "jemalloc",
             "ok": False, "error": "boom", "rep": 1}]
    merged = {r["allocator"]: r for r in report.merge_repeats(runs)}
    g = merged["glibc"]
    assert (g["eager_us"], g["attached_us"], g["ratio"]) == (250.0, 110.0, 0.45)
    assert g["rss_eager_delta_kb"] == 80 * MB and g["rss_attached_delta_kb"] == 50 * MB
    assert g["slab_over_load"] == 1.01 and g["identical"] is False  # worst of the runs
    assert (g["repeats"], g["failed_repeats"]) == (3, 0) and g["ratio_runs"] == [0.5, 0.4, 0.45]
    j = merged["jemalloc"]
    assert j["ok"] and (j["repeats"], j["failed_repeats"]) == (1, 1) and j["eager_us"] == 100.0
    only_failed = report.merge_repeats([runs[-1]])
    assert len(only_failed) == 1 and not only_failed[0]["ok"] and only_failed[0]["repeats"] == 0
