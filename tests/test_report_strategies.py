"""benchmarks/report_strategies.py on a tiny hand-made pytest-benchmark report."""
from __future__ import annotations

import json

import pytest

from conftest import load_benchmark


@pytest.fixture(scope="module")
def rs():
    return load_benchmark("report_strategies")


def _bench(suite, instance, strategy, n, load, peak, median, *, status="feasible", valid=True, kind="heuristic"):
    return {
        "name": f"test_solve[{instance}-{strategy}]",
        "extra_info": {"kind": "solve", "collection": suite, "suite": suite, "instance": instance,
                       "strategy": strategy, "strategy_kind": kind, "n": n, "lower_bound": load, "peak": peak,
                       "ratio": peak / load, "status": status, "valid": valid,
                       "success": valid and status in ("optimal", "feasible", "limit_reached"),
                       "error": None if valid else "InvalidPlanError: rows 1 and 2 overlap",
                       "capacity": 1000 if suite == "minimalloc" else None,
                       "fits_capacity": peak <= 1000 if suite == "minimalloc" else None},
        "stats": {"median": median, "mean": median, "min": median, "max": median, "stddev": 0.0, "rounds": 3,
                  "data": [median] * 3},
    }


REPORT = {
    "datetime": "2026-01-01T00:00:00+00:00",
    "version": "5.0.0",
    "machine_info": {"cpu": {"brand_raw": "Test CPU", "count": 2}, "python_version": "3.11.0"},
    "commit_info": {"id": "abc123", "dirty": False, "branch": "main"},
    "benchmarks": [
        _bench("minimalloc", "A.1048576", "alpha", 100, 1000, 1000, 0.002, status="optimal"),
        _bench("minimalloc", "B.1048576", "alpha", 120, 1000, 1200, 0.004),
        _bench("minimalloc", "A.1048576", "beta", 100, 1000, 1500, 0.001),
        _bench("minimalloc", "B.1048576", "beta", 120, 1000, 1100, 0.003, valid=False, status="error"),
        # time doubles tenfold per tenfold n: slope log10(20)/1 ~ 1.30 for alpha, exactly 1 for beta
        _bench("generated", "dnn_10k", "alpha", 10_000, 500, 500, 0.01, status="optimal"),
        _bench("generated", "dnn_100k", "alpha", 100_000, 500, 510, 0.2),
        _bench("generated", "dnn_10k", "beta", 10_000, 500, 600, 0.001),
        _bench("generated", "dnn_100k", "beta", 100_000, 500, 600, 0.01),
        {"name": "test_import_dsa", "extra_info": {"kind": "import"}, "stats": {"median": 0.1}},
    ],
    "dsa_comparison": {
        "command": "python -m pytest benchmarks", "platform": "Linux-test", "cpu_count": 2,
        "load_average_start": [0.5, 0.4, 0.3], "load_average_end": [1.0, 0.5, 0.3], "git_commit": "abc123",
        "git_dirty": False, "settings": {"time_limit_s": 1.0, "slow_at_100k_s": 3.0},
        "skipped": [{"suite": "generated", "instance": "dnn_1m", "strategy": "beta", "n": 1_000_000,
                     "reason": "beta is meant for at most 500000 buffers"}],
    },
}


def test_report_writes_markdown_json_and_plots(rs, tmp_path):
    pytest.importorskip("matplotlib")
    src = tmp_path / "bench.json"
    src.write_text(json.dumps(REPORT))
    out = tmp_path / "results"
    assert rs.main([str(src), str(out)]) == 0

    md = (out / "strategies.md").read_text()
    # overview: mean peak / LOAD per suite (beta's invalid plan is left out of its mean)
    assert "| strategy | kind | challenging (2) | generated (2) |" in md
    assert "| `alpha` | heuristic | 1.1000 | 1.0100 |" in md
    assert "| `beta` | heuristic | 1.5000 | 1.2000 |" in md
    # slowest planning time per suite, with its instance
    assert "4.0 ms (B.1048576)" in md and "200.0 ms (dnn_100k)" in md
    # per challenging instance: LOAD, ratios, the failed plan marked
    assert "| A.1048576 | 100 | 1000 | 1.0000 | 1.5000 |" in md
    assert "| B.1048576 | 120 | 1000 | 1.2000 | 1.1000 ! |" in md
    # scaling slopes and the failure and the skip are reported
    assert "| `alpha` | 10.0 ms | 200.0 ms | 1.30 |" in md
    assert "| `beta` | 1.0 ms | 10.0 ms | 1.00 |" in md
    assert "InvalidPlanError: rows 1 and 2 overlap" in md
    assert "beta is meant for at most 500000 buffers" in md
    assert "abc123" in md and "0.50, 0.40, 0.30" in md

    for png in ("strategy_quality.png", "strategy_time.png"):
        data = (out / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000

    # the compact JSON: solve records only, no per-round arrays, and it regenerates the same Markdown
    compact = json.loads((out / "strategies.json").read_text())
    assert compact["format"] == rs.FORMAT
    assert len(compact["records"]) == 8 and "data" not in json.dumps(compact["records"])
    assert compact["meta"]["git_commit"] == "abc123"
    again = tmp_path / "again"
    rs.report(compact, again, plots=False)
    assert (again / "strategies.md").read_text() == md


def test_slope_fit(rs):
    assert rs.fit_slope([(10, 1.0), (100, 10.0), (1000, 100.0)]) == pytest.approx(1.0)
    assert rs.fit_slope([(10, 1.0)]) is None


def test_missing_input(rs, tmp_path, capsys):
    assert rs.main([str(tmp_path / "nope.json"), str(tmp_path)]) == 2
