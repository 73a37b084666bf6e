"""Tests of the boxing strategy (Buchsbaum et al.): valid plans, determinism, the box structure, and
never worse than its greedy-by-size fallback."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsa
from conftest import fields, problems, random_problem
from dsa.strategies import buchsbaum
from dsa.strategies._orders import by_size
from dsa.strategies.greedy import greedy_offsets
from naive import naive_validate, space_overlap, time_overlap

FEW = settings(max_examples=60)


def _solve(problem, **kw):
    kw.setdefault("restarts", 3)
    return dsa.solve(problem, strategy=buchsbaum.solve, seed=kw.pop("seed", 0), **kw)


@FEW
@given(problem=problems(max_n=14))
def test_plan_is_valid(problem):
    sol = _solve(problem)
    assert sol.success, sol.message
    assert sol.strategy == "buchsbaum"
    dsa.validate(problem, sol)
    assert naive_validate(**fields(problem), offsets=sol.offsets.tolist()) == []
    # fixed rows keep their offsets, zero-size free rows sit at 0
    fixed = problem.is_fixed
    assert np.array_equal(sol.offsets[fixed], problem.fixed_offsets[fixed])
    assert (sol.offsets[(problem.sizes == 0) & ~fixed] == 0).all()


@FEW
@given(problem=problems(max_n=14), seed=st.integers(0, 2**31 - 1))
def test_same_seed_same_plan(problem, seed):
    a = _solve(problem, seed=seed)
    b = _solve(problem, seed=seed)
    assert np.array_equal(a.offsets, b.offsets)
    assert a.stats["best_start"] == b.stats["best_start"]


def _greedy_peak(problem):
    if len(problem) == 0:
        return 0
    return min(int((greedy_offsets(problem, by_size(problem), fit) + problem.sizes).max())
               for fit in ("best", "first"))


@FEW
@given(problem=problems(max_n=14))
def test_never_worse_than_greedy_fallback(problem):
    sol = _solve(problem)
    assert sol.peak <= _greedy_peak(problem)
    assert sol.stats["greedy_peak"] == _greedy_peak(problem)
    assert sol.peak == min(sol.stats["boxing_peak"], sol.stats["greedy_peak"])
    assert sol.stats["fallback"] == (sol.stats["greedy_peak"] < sol.stats["boxing_peak"])


def _mixed_problem(n, seed):
    """Random lifetimes and log-uniform sizes over three decades (so several levels of boxes form)."""
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, 400, n)
    ends = starts + rng.integers(1, 120, n)
    sizes = np.exp(rng.uniform(np.log(16), np.log(16_000), n)).astype(np.int64)
    sizes[rng.random(n) < 0.05] = 0
    return dsa.Problem(starts, ends, sizes)


def _check_boxes(problem, bxs):
    """Every box holds its members inside it, without overlap; every row is in at most one box."""
    rows_seen = np.zeros(len(problem), dtype=np.int64)
    parent_seen = np.zeros(len(bxs), dtype=np.int64)
    for k, box in enumerate(bxs):
        members = []   # (start, end, offset, height)
        for r, off in zip(box.rows.tolist(), box.row_offsets.tolist()):
            rows_seen[r] += 1
            members.append((int(problem.starts[r]), int(problem.ends[r]), off, int(problem.sizes[r])))
        for c, off in zip(box.children.tolist(), box.child_offsets.tolist()):
            child = bxs[c]
            assert c < k and child.parent == k and child.level < box.level
            parent_seen[c] += 1
            members.append((child.start, child.end, off, child.height))
        assert members and box.height > 0 and box.kind in ("strip", "rows")
        assert box.start == min(m[0] for m in members) and box.end == max(m[1] for m in members)
        for s, e, off, h in members:
            assert box.start <= s < e <= box.end
            assert 0 <= off and off + h <= box.height
        # members never overlap inside the box
        for i in range(len(members)):
            for j in range(i + 1, len(members)):
                a, b = members[i], members[j]
                assert not (time_overlap(a[0], a[1], b[0], b[1]) and space_overlap(a[2], a[3], b[2], b[3]))
        # box load: the bytes of members alive at any instant never exceed the box height
        for t in {m[0] for m in members}:
            assert sum(h for s, e, _, h in members if s <= t < e) <= box.height
    assert rows_seen.max(initial=0) <= 1
    for k, box in enumerate(bxs):
        assert parent_seen[k] == (1 if box.parent >= 0 else 0)
    free = ~problem.is_fixed & (problem.sizes > 0)
    assert not rows_seen[~free].any(), "fixed and zero-size rows are never boxed"
    # load consistency: the top level (top boxes + rows in no box) carries at least every free row's
    # bytes at each instant, and a box's bytes are never more than its members' rounded-up slots
    top = [(b.start, b.end, b.height) for b in bxs if b.parent < 0]
    top += [(int(problem.starts[r]), int(problem.ends[r]), int(problem.sizes[r]))
            for r in np.flatnonzero(free & (rows_seen == 0))]
    for t in np.unique(problem.starts[free]):
        live_rows = int(problem.sizes[free & (problem.starts <= t) & (problem.ends > t)].sum())
        assert sum(h for s, e, h in top if s <= t < e) >= live_rows
    return rows_seen


@pytest.mark.parametrize("epsilon", [0.25, 1.0, 2.0, 6.0])
def test_boxes_structure(epsilon):
    p = _mixed_problem(500, seed=3)
    bxs = buchsbaum.boxes(p, epsilon=epsilon, seed=7)
    assert bxs, "a problem with a wide size range makes boxes"
    rows_seen = _check_boxes(p, bxs)
    assert rows_seen.sum() > 0
    # the boxes of one start are those of the first start of solve with the same seed and epsilon
    sol = dsa.solve(p, strategy=buchsbaum.solve, seed=7, epsilon=epsilon, restarts=1)
    assert sol.stats["boxes"] == len(bxs)
    assert sol.stats["levels"] == len({b.level for b in bxs})


def test_boxes_are_real():
    """Both kinds of box (Lemma 1 strips and bundles of colouring rows) and nested levels occur."""
    p = _mixed_problem(1500, seed=5)
    bxs = buchsbaum.boxes(p, epsilon=2.0, seed=1)
    _check_boxes(p, bxs)
    kinds = {b.kind for b in bxs}
    assert kinds == {"strip", "rows"}
    assert max(b.level for b in bxs) >= 1 and any(len(b.children) for b in bxs)
    assert max(len(b.rows) for b in bxs) >= 2


@settings(max_examples=25)
@given(problem=problems(max_n=20), seed=st.integers(0, 1000))
def test_boxes_hypothesis(problem, seed):
    _check_boxes(problem, buchsbaum.boxes(problem, epsilon=1.0, seed=seed))


def test_boxes_same_seed():
    p = _mixed_problem(300, seed=1)
    a, b = buchsbaum.boxes(p, seed=4), buchsbaum.boxes(p, seed=4)
    assert len(a) == len(b)
    assert all(np.array_equal(x.rows, y.rows) and np.array_equal(x.row_offsets, y.row_offsets)
               for x, y in zip(a, b))


def test_larger_problem_with_alignment_and_fixed():
    p = random_problem(2000, seed=11)
    rng = np.random.default_rng(0)
    p = p.replace(alignments=rng.choice([1, 8, 64], len(p)))
    sol = dsa.solve(p, strategy=buchsbaum.solve, seed=3, restarts=4)
    assert sol.success, sol.message
    # pin a few rows at the offsets of that plan and plan again
    fixed = np.full(len(p), -1, dtype=np.int64)
    pick = rng.choice(len(p), 50, replace=False)
    fixed[pick] = sol.offsets[pick]
    q = p.replace(fixed_offsets=fixed)
    sol2 = dsa.solve(q, strategy=buchsbaum.solve, seed=3, restarts=4)
    assert sol2.success, sol2.message
    assert np.array_equal(sol2.offsets[pick], fixed[pick])
    assert sol2.stats["boxes"] > 0


def test_boxing_wins_on_a_challenging_instance():
    """On MiniMalloc's instance G the boxing plan itself beats greedy by size (no fallback)."""
    from importlib.resources import files

    p = dsa.read_csv(str(files("dsa.data") / "minimalloc" / "G.1048576.csv"))
    sol = dsa.solve(p, strategy=buchsbaum.solve, seed=0, restarts=16)
    assert not sol.stats["fallback"] and sol.stats["winner"] == "boxing"
    assert sol.peak < dsa.solve(p, "greedy_by_size").peak
    assert sol.stats["loose_peak"] >= sol.peak   # the squeeze never raises the peak


def test_empty_and_trivial():
    assert _solve(dsa.Problem([], [], [])).peak == 0
    sol = _solve(dsa.Problem([0, 0], [2, 2], [0, 0]))
    assert sol.offsets.tolist() == [0, 0]
    assert buchsbaum.boxes(dsa.Problem([], [], [])) == []


@pytest.mark.parametrize("bad", [{"epsilon": 0}, {"epsilon": -1.0}, {"epsilon": float("nan")},
                                 {"restarts": 0}, {"restarts": 1.5}, {"spread": 0.5}])
def test_bad_options(bad):
    with pytest.raises(ValueError):
        buchsbaum.solve(dsa.Problem([0], [1], [1]), **bad)


def test_import_is_cheap():
    code = "import sys, dsa.strategies.buchsbaum; assert 'numba' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
