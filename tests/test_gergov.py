"""Tests of the gergov strategy: phase 1 (skyline), phase 2 (conflict colouring), the variants."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsa
from conftest import fields, problems
from dsa.strategies import gergov
from dsa.strategies._orders import order_rows
from naive import brute_force_optimum, naive_validate


def _solve(problem, **options):
    return dsa.solve(problem, strategy=gergov.solve, **options)


def _check(problem, sol):
    assert sol.status is not dsa.Status.ERROR, sol.message
    assert sol.success
    assert sol.offsets.dtype == np.int64 and sol.offsets.shape == (len(problem),)
    dsa.validate(problem, sol)
    assert naive_validate(**fields(problem), offsets=sol.offsets.tolist()) == []
    zero = (problem.sizes == 0) & ~problem.is_fixed
    assert (sol.offsets[zero] == 0).all()


def naive_skyline(problem, order="size"):
    """Phase 1 straight from its description, with O(n^2) scans: (alpha per row or -1, selection)."""
    starts, ends, sizes = problem.starts.tolist(), problem.ends.tolist(), problem.sizes.tolist()
    aligns = problem.alignments.tolist()
    free = [j for j in order_rows(problem, order).tolist() if sizes[j] > 0 and not problem.is_fixed[j]]
    alpha, sel = [-1] * len(problem), []
    if not free:
        return alpha, sel
    triples = [(0, min(starts[j] for j in free), max(ends[j] for j in free))]
    while free and triples:
        triples.sort()  # lowest offset first, then the leftmost window (windows are disjoint)
        w, lo, hi = triples.pop(0)
        fits = [j for j in free if starts[j] < hi and lo < ends[j]
                and all(not (starts[j] < h and l < ends[j]) for _, l, h in triples)]
        if not fits:
            continue  # the triple is closed
        j = fits[0]
        free.remove(j)
        alpha[j] = -(-w // aligns[j]) * aligns[j]
        sel.append(j)
        triples.append((alpha[j] + sizes[j], max(lo, starts[j]), min(hi, ends[j])))
        if lo < starts[j]:
            triples.append((w, lo, starts[j]))
        if ends[j] < hi:
            triples.append((w, ends[j], hi))
    return alpha, sel


# -- phase 1 and phase 2 on a hand-made instance ---------------------------------------------------

# rows: 0 = [3, 4) x 4, 1 = [0, 2) x 4, 2 = [1, 3) x 2, 3 = [2, 4) x 3; J (size order) = 1, 0, 3, 2
HAND = dsa.Problem([3, 0, 1, 2], [4, 2, 3, 4], [4, 4, 2, 3])


def test_skyline_on_a_hand_made_instance():
    # (0, [0,4)) takes row 1 -> (4, [0,2)), (0, [2,4)); (0, [2,4)) takes row 0 (inside [2,4)) ->
    # (4, [3,4)), (0, [2,3)); nothing lies inside [2,3) widened, so it closes; (4, [0,2)) widened
    # over the closed [2,3) is [0,3) and takes row 2 -> (6, [1,2)), (4, [0,1)); (4, [0,1)) closes;
    # (4, [3,4)) widened is [2,4) and takes row 3 at 4. Rows 2 and 3 both reach into the closed
    # section [2,3) from two sides, so alpha' overlaps there: [1,3)x[4,6) and [2,4)x[4,7).
    alpha, sel = gergov.skyline_placement(HAND)
    assert alpha.tolist() == [0, 0, 4, 4]
    assert sel.tolist() == [1, 0, 2, 3]
    assert naive_validate(**fields(HAND), offsets=alpha.tolist()) != []
    col, edges = gergov.conflict_colouring(HAND, alpha, sel)
    assert edges == 1
    assert col.tolist() == [0, 0, 0, 1]  # row 3 comes after row 2 in the selection order


def test_stacking_on_the_hand_made_instance():
    # colour 1 moves up by the alpha' height 7: row 3 goes to 11, peak 14; compaction (ascending
    # offset, first fit) keeps rows 0, 1, 2 and drops row 3 onto row 2's top, 6: peak 9
    raw = _solve(HAND, order="size", variant="stack", compact=False)
    assert raw.offsets.tolist() == [0, 0, 4, 11]
    assert raw.stats["alpha_height"] == 7 and raw.stats["colours"] == 2 and raw.peak == 14
    sol = _solve(HAND, order="size", variant="stack")
    assert sol.stats["peak_raw"] == 14
    assert sol.offsets.tolist() == [0, 0, 4, 6] and sol.peak == 9
    _check(HAND, sol)


def test_rebump_on_the_hand_made_instance():
    # row 3 (colour 1) is lifted onto row 2's top, 6; then nothing conflicts
    sol = _solve(HAND, order="size", variant="rebump", compact=False)
    assert sol.offsets.tolist() == [0, 0, 4, 6]
    assert sol.stats["rounds"] == 1


@given(problem=problems(max_n=10, max_time=16))
@settings(max_examples=60)
def test_skyline_matches_the_naive_description(problem):
    for order in ("size", "start"):
        alpha, sel = gergov.skyline_placement(problem, order=order)
        want_alpha, want_sel = naive_skyline(problem, order)
        assert sel.tolist() == want_sel
        assert alpha.tolist() == want_alpha


@given(problem=problems())
@settings(max_examples=60)
def test_skyline_facts(problem):
    alpha, sel = gergov.skyline_placement(problem)
    jobs = np.flatnonzero(~problem.is_fixed & (problem.sizes > 0))
    assert sorted(sel.tolist()) == jobs.tolist()  # every job placed once
    assert (alpha[jobs] >= 0).all() and (alpha[jobs] % problem.alignments[jobs] == 0).all()
    col, edges = gergov.conflict_colouring(problem, alpha, sel)
    # a proper colouring of the conflict graph, each colour the smallest one free in selection order
    rank = np.empty(len(problem), dtype=np.int64)
    rank[sel] = np.arange(len(sel))
    n_edges = 0
    for x in sel:
        earlier = set()
        for y in sel:
            if (y != x and problem.starts[x] < problem.ends[y] and problem.starts[y] < problem.ends[x]
                    and alpha[x] < alpha[y] + problem.sizes[y] and alpha[y] < alpha[x] + problem.sizes[x]):
                assert col[x] != col[y]
                if rank[y] < rank[x]:
                    earlier.add(int(col[y]))
                    n_edges += 1
        assert col[x] == min(set(range(len(sel) + 1)) - earlier)
    assert edges == n_edges


# -- valid plans -----------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", gergov.VARIANTS)
@pytest.mark.parametrize("compact", [True, False])
@given(problem=problems())
@settings(max_examples=40)
def test_plans_are_valid(variant, compact, problem):
    sol = _solve(problem, variant=variant, compact=compact)
    _check(problem, sol)
    assert (sol.offsets[problem.is_fixed] == problem.fixed_offsets[problem.is_fixed]).all()


@given(problem=problems())
@settings(max_examples=60)
def test_default_is_valid_and_no_worse_than_its_members(problem):
    sol = _solve(problem)
    _check(problem, sol)
    assert sol.peak == min(sol.stats["peaks"].values())
    assert sol.stats["member"] in sol.stats["peaks"]


@pytest.mark.parametrize("variant", gergov.VARIANTS)
@given(problem=problems())
@settings(max_examples=40)
def test_compaction_never_raises_the_peak(variant, problem):
    raw = _solve(problem, order="size", variant=variant, compact=False)
    sol = _solve(problem, order="size", variant=variant)
    assert sol.stats["peak_raw"] == raw.peak
    assert sol.peak <= raw.peak


def test_huge_alignment_common_multiple_falls_back_to_first_fit():
    # five coprime alignments near 10**6: their common multiple is ~10**30, too big to stack on
    aligns = [1_000_039, 1_000_037, 1_000_003, 1_000_033, 1_000_081]
    p = dsa.Problem([0, 1, 1, 3, 2], [3, 4, 2, 6, 4], [1, 5, 5, 4, 4], alignments=aligns)
    p = p.replace(sizes=p.sizes * 1_000_000)
    sol = _solve(p, order="size", variant="stack", compact=False)
    assert sol.stats["colours"] == 2
    assert "fallback" in sol.stats
    _check(p, sol)


def test_rebump_without_a_fixpoint_falls_back(monkeypatch):
    monkeypatch.setattr(gergov, "_MAX_ROUNDS", 0)
    sol = _solve(HAND, order="size", variant="rebump", compact=False)
    _check(HAND, sol)
    assert "fallback" in sol.stats


# -- known answers ---------------------------------------------------------------------------------

def test_tiny_instance_reaches_load():
    # the front end's example: LOAD 12 is optimal
    sol = _solve([(0, 3, 4), (3, 9, 4), (0, 9, 4), (9, 21, 4), (0, 21, 4)])
    assert sol.peak == 12 and sol.status is dsa.Status.OPTIMAL


def test_hand_instance_optimum_known():
    f = fields(HAND)
    best = brute_force_optimum(f["starts"], f["ends"], f["sizes"])
    assert best == 7
    assert _solve(HAND).peak == best


@pytest.mark.parametrize("rows", [[], [(0, 1, 0), (0, 5, 0)]])
def test_empty_and_zero_size(rows):
    sol = _solve(rows)
    assert sol.peak == 0 and sol.success
    assert sol.offsets.tolist() == [0] * len(rows)


def test_bad_options():
    with pytest.raises(ValueError, match="unknown variant 'best'"):
        _solve(HAND, variant="best")
    with pytest.raises(ValueError, match="unknown order 'random'"):
        _solve(HAND, order="random")
    with pytest.raises(ValueError, match="at least one"):
        _solve(HAND, variant=())


# -- densely overlapping rows: no time-overlap graph --------------------------------------------------

def _no_overlap_graph(monkeypatch):
    """Make building the time-overlap graph (O(n^2) pairs on dense instances) an error."""
    from dsa.sweep import Sweep

    def boom(self):
        raise AssertionError("the time-overlap graph was built")

    monkeypatch.setattr(Sweep, "overlap", property(boom))


def _dense(n=2000, seed=0):
    """Rows that nearly all meet in time, with staggered lifetimes so that alpha' has conflicts."""
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, 100, n)
    return dsa.Problem(starts, starts + rng.integers(60, 200, n), rng.integers(1, 1 << 16, n))


@pytest.mark.parametrize("variant", gergov.VARIANTS)
def test_dense_instances_plan_without_the_overlap_graph(variant, monkeypatch):
    """Phase 2 finds the conflicts by a sweep over time, and compaction scans the placed rows: on
    rows that mostly meet in time nothing builds the O(n^2) overlap graph, and the plan is valid."""
    from dsa.sweep import Sweep

    p = _dense()
    with_graph = Sweep(p)
    assert with_graph.dense
    with_graph.overlap  # the greedy passes (squeeze, compaction) then use it, as on sparse rows
    want = gergov.solve(p, variant=variant, order=("area", "size"), sweep=with_graph)
    _no_overlap_graph(monkeypatch)
    sol = _solve(p, variant=variant, order=("area", "size"))
    _check(p, sol)
    assert sol.offsets.tolist() == want.offsets.tolist()
    if variant == "stack":
        assert sol.stats["conflicts"] > 0 and sol.stats["colours"] > 1  # phase 2 had work to do


@given(problem=problems(max_n=30), seed=st.integers(0, 2**32 - 1))
@settings(max_examples=100)
def test_conflicts_match_brute_force(problem, seed):
    """The sweep's conflict graph is the set of pairs of ``sel`` whose lifetimes and ranges
    ``[offsets, offsets + size)`` both intersect, for any offsets (rebump's lifted ones too)."""
    from dsa._kernels.gergov import conflicts

    rng = np.random.default_rng(seed)
    rows = np.flatnonzero(problem.sizes > 0)
    sel = rng.permutation(rows).astype(np.int64)
    offsets = np.full(len(problem), -1, dtype=np.int64)
    offsets[sel] = rng.integers(0, 2 * int(problem.sizes.max(initial=1)) + 1, len(sel))
    indptr, indices = conflicts(sel, offsets, problem.sizes, problem.starts, problem.ends)
    got = {(i, int(j)) for i in range(len(problem)) for j in indices[indptr[i]:indptr[i + 1]]}
    s, e, z, o = problem.starts, problem.ends, problem.sizes, offsets
    want = {(int(x), int(y)) for x in sel for y in sel if x != y and s[x] < e[y] and s[y] < e[x]
            and o[x] < o[y] + z[y] and o[y] < o[x] + z[x]}
    assert got == want
    assert len(indices) == len(want)  # each pair once per side
