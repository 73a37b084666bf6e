"""benchmarks/phase_shares.py: the phases of best's calls summed per phase and tabulated."""
from __future__ import annotations

import json

import pytest

from conftest import load_benchmark


@pytest.fixture(scope="module")
def ps():
    return load_benchmark("phase_shares")


def test_shares_sum_each_phases_turns(ps):
    rows = [("portfolio", 0.0, 0.5, 0.5), ("skyline", 0.5, 2.5, 4.0), ("dives", 2.5, 3.0, 0.5),
            ("skyline", 3.0, 4.0, 2.0)]
    got = ps.shares(rows)
    assert got == {"portfolio": (0.5, 0.5), "skyline": (3.0, 6.0), "dives": (0.5, 0.5)}


def test_report_has_a_row_per_instance_and_the_means(ps):
    doc = {"date": "d", "machine": "m", "cores": 2, "command": "c", "set": "main", "strategy": "best",
           "time_limit": 20.0, "rows": [
               {"name": "a-1-s0", "ratio": 1.0, "time_s": 1.0, "phases": [("portfolio", 0.0, 1.0, 1.0)]},
               {"name": "b-1-s0", "ratio": 1.1, "time_s": 20.0,
                "phases": [("portfolio", 0.0, 1.0, 1.0), ("skyline", 1.0, 20.0, 38.0)]}]}
    text = ps.report(doc)
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    assert lines[0].split("|")[4:6] == [" portfolio ", " skyline "]
    assert "| a-1-s0 | 1.0000 | 1.0 | 1.00 (1.0) | - |" in text
    assert "| b-1-s0 | 1.1000 | 20.0 | 1.00 (1.0) | 19.00 (2.0) |" in text
    # means over the instances: seconds per instance, and the cores over all their seconds
    assert "| **mean** | 1.0500 | 10.5 | 1.00 (1.0) | 9.50 (2.0) |" in text


def test_main_writes_the_table_and_the_json(ps, tmp_path):
    out = tmp_path / "phases"
    assert ps.main(["--set", "main", "--instances", "fine-300-s0", "--time-limit", "2", "--out", str(out)]) == 0
    doc = json.loads(out.with_suffix(".json").read_text())
    (row,) = doc["rows"]
    assert row["name"] == "fine-300-s0" and row["ratio"] >= 1.0 and row["phases"][0][0] == "portfolio"
    assert "| fine-300-s0 |" in out.with_suffix(".md").read_text()
