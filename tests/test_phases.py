"""Where the time of best and exact went (stats["phases"], dsa.strategies._phases): the phases in the
order they ran, each within the call, none overlapping the next, with the CPU seconds they used."""
import time

import pytest

import dsa
from dsa.generate import rectangle_cut
from dsa.strategies._phases import NAMES, Phases, record


def test_phases_record_blocks_in_order_from_the_calls_start():
    t0 = time.perf_counter()
    phases = Phases(t0)
    with phases("portfolio"):
        time.sleep(0.01)
    with phases("canonical"):
        sum(range(200_000))                    # (CPU time of this thread)
    assert [row[0] for row in phases.rows] == ["portfolio", "canonical"]
    (_, s0, e0, c0), (_, s1, e1, c1) = phases.rows
    assert 0 <= s0 <= e0 <= s1 <= e1 <= time.perf_counter() - t0
    assert e0 - s0 >= 0.009 and c0 >= 0 and c1 > 0


def test_turns_of_one_kind_in_a_row_are_one_phase():
    phases = Phases(time.perf_counter())
    for name in ("skyline", "dives", "dives", "dives", "skyline"):
        with phases(name):
            pass
    assert [row[0] for row in phases.rows] == ["skyline", "dives", "skyline"]
    _, start, end, _ = phases.rows[1]
    assert start <= end


def test_a_phase_that_raises_is_recorded_and_the_error_passes():
    phases = Phases(time.perf_counter())
    with pytest.raises(KeyError):
        with phases("layers"):
            raise KeyError("x")
    assert [row[0] for row in phases.rows] == ["layers"]


def test_unknown_phase_names_are_refused():
    with pytest.raises(ValueError, match="unknown phase 'warmup'"):
        with Phases(time.perf_counter())("warmup"):
            pass


def test_record_without_phases_records_nothing():
    with record(None, "skyline"):
        pass
    phases = Phases(time.perf_counter())
    with record(phases, "skyline"):
        pass
    assert [row[0] for row in phases.rows] == ["skyline"]


def _check(stats, time_s):
    rows = stats["phases"]
    assert rows and rows[0][0] == "portfolio"
    assert all(name in NAMES for name, *_ in rows)
    assert all(len(row) == 4 for row in rows)
    for (_, _, end, _), (_, start, _, _) in zip(rows, rows[1:]):
        assert end <= start + 1e-9              # (one after the other)
    for name, start, end, cpu in rows:
        assert 0 <= start <= end <= time_s + 1e-6 and cpu >= 0
    return [row[0] for row in rows]


@pytest.mark.parametrize("strategy", ["best", "exact"])
def test_a_tiling_searched_to_its_limit_lists_its_phases(strategy):
    # a coarse cut that 2 s do not plan at LOAD: the layers, the canonical search and the
    # skyline search's turns all run
    p = rectangle_cut(350, seed=0, pinwheel=0.2, cells_per_buffer=16)
    began = time.perf_counter()
    s = dsa.solve(p, strategy, time_limit=2, seed=0)
    names = _check(s.stats, time.perf_counter() - began)
    assert s.success
    assert "canonical" in names
    if s.peak > dsa.lower_bound(p):             # (not planned at LOAD: the improvement phase ran)
        assert "skyline" in names
    if s.stats.get("layer_programs"):
        assert "layers" in names


def test_a_plan_at_the_bound_from_the_portfolio_has_one_phase():
    p = dsa.Problem([0, 1, 2], [1, 2, 3], [8, 8, 8])
    s = dsa.solve(p, "best", time_limit=1)
    assert [row[0] for row in s.stats["phases"]] == ["portfolio"]
