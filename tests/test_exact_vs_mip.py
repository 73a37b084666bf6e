"""benchmarks/exact_vs_mip.py: its windows of the challenging instances and its report."""
from __future__ import annotations

import numpy as np
import pytest

import dsa
from conftest import load_benchmark


@pytest.fixture(scope="module")
def evm():
    return load_benchmark("exact_vs_mip")


def test_a_window_holds_the_buffers_that_meet_it_clipped_to_it(evm):
    problem = dsa.data.load("F.1048576").replace(capacity=None)
    rng = np.random.default_rng(3)
    for _ in range(5):
        sub, start, width = evm.window(problem, rng, 20, 40)
        meet = (problem.starts < start + width) & (problem.ends > start)
        assert 20 <= sub.n <= 40 and sub.n == int(meet.sum())
        assert np.array_equal(sub.sizes, problem.sizes[meet])
        assert sub.starts.min() >= 0 and sub.ends.max() <= width
        assert np.array_equal(sub.starts, np.maximum(problem.starts[meet], start) - start)
        assert np.array_equal(sub.ends, np.minimum(problem.ends[meet], start + width) - start)


def test_no_window_when_more_buffers_than_allowed_meet_every_event(evm):
    problem = dsa.Problem([0] * 5, [3] * 5, [1] * 5)  # five buffers alive at every event
    assert evm.window(problem, np.random.default_rng(0), 2, 4, tries=20) is None


def test_the_report_counts_proofs_and_ratios(evm):
    def side(proven, t):
        return {"status": "optimal" if proven else "limit_reached", "peak": 10, "lower_bound": 10 if proven else 9,
                "proven": proven, "time_s": t}

    doc = {"date": "d", "machine": "m", "command": "c", "time_limit": 20.0,
           "rows": [{"window": "F [0, 5)", "n": 20, "load": 10, "start_peak": 12,
                     "exact": side(True, 0.01), "highs": side(True, 1.0)},
                    {"window": "G [3, 9)", "n": 25, "load": 10, "start_peak": 11,
                     "exact": side(True, 0.02), "highs": side(False, 20.0)}],
           "draws": {"F": {"drawn": 3, "at_load": 2, "none": 0}, "G": {"drawn": 1, "at_load": 0, "none": 0},
                     "D": {"drawn": 0, "at_load": 0, "none": 1}}}
    text = evm.report(doc)
    assert "2 windows. Proven optimal: exact 2, highs 1." in text
    assert "faster than highs (or highs did not prove it) on 2/2" in text
    assert "Where both proved (1): highs time / exact time, geometric mean 100" in text
    assert "F 1/3, G 1/1, D 0/0 (none of 20-40)" in text
