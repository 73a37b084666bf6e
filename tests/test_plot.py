"""Heap maps are drawn, written and checked."""
import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import dsa  # noqa: E402
from dsa.plot import heap_map  # noqa: E402


def test_heap_map_draws_one_rectangle_per_buffer_and_marks_load_and_peak(tmp_path):
    problem = dsa.Problem([0, 0, 3], [3, 5, 5], [4, 2, 4], capacity=10)
    sol = dsa.solve(problem)
    fig = heap_map(problem, sol)
    ax = fig.axes[0]
    rects = ax.collections[0].get_paths()
    assert len(rects) == 3
    tops = sorted(p.vertices[:, 1].max() for p in rects)
    assert tops[-1] == sol.peak
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(l.startswith("LOAD = 6") for l in labels)
    assert any(l.startswith(f"peak = {sol.peak}") for l in labels)
    assert any(l.startswith("capacity = 10") for l in labels)
    path = tmp_path / "h.png"
    heap_map(problem, sol.offsets, path=path)
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_heap_map_rejects_wrong_offsets():
    problem = dsa.Problem([0], [1], [4])
    with pytest.raises(ValueError, match="expected 1 offsets"):
        heap_map(problem, np.array([0, 1]))
    sol = dsa.Solution(offsets=None, peak=None, lower_bound=4, status=dsa.Status.INFEASIBLE, success=False)
    with pytest.raises(ValueError, match="no plan"):
        heap_map(problem, sol)
