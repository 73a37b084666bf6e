"""Tests of dsa.generate.rectangle_cut (instances with a known optimum) and guillotine_separable."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsa
from dsa.generate import DRAWS, LIFETIMES, guillotine_separable, rectangle_cut


def _live_bytes(p):
    """Bytes alive at each time step 0..T-1 (half-open lifetimes)."""
    t = int(p.ends.max())
    delta = np.zeros(t + 1, dtype=np.int64)
    np.add.at(delta, p.starts, p.sizes)
    np.add.at(delta, p.ends, -p.sizes)
    return np.cumsum(delta)[:t]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 3000), seed=st.integers(0, 2**32 - 1), aspect=st.floats(0.05, 20),
       pinwheel=st.floats(0, 1), alignment=st.sampled_from([1, 8, 64, 256]),
       lifetimes=st.sampled_from(LIFETIMES), cells=st.sampled_from([1, 2, 16, 1024]),
       draw=st.sampled_from(DRAWS))
def test_known_plan_is_valid_and_optimal(n, seed, aspect, pinwheel, alignment, lifetimes, cells, draw):
    p, offsets = rectangle_cut(n, seed=seed, aspect=aspect, pinwheel=pinwheel, alignment=alignment,
                               lifetimes=lifetimes, cells_per_buffer=cells, draw=draw, return_plan=True)
    assert isinstance(p, dsa.Problem) and len(p) == n
    assert list(p.ids) == list(range(n)) and p.capacity is None
    assert np.all(p.ends > p.starts) and np.all(p.sizes > 0)
    dsa.validate(p, offsets)
    peak = int((offsets + p.sizes).max())
    assert peak == dsa.load(p) == dsa.lower_bound(p)
    live = _live_bytes(p)
    assert np.all(live == peak)  # every time column is fully covered
    assert np.all(p.sizes % alignment == 0) and np.all(offsets % alignment == 0)


@pytest.mark.parametrize("n", [100, 5000, 100_000])
def test_sizes_plan_and_load_at_scale(n):
    p, offsets = rectangle_cut(n, seed=n, return_plan=True)
    assert len(p) == n
    assert np.all(p.sizes % 64 == 0)
    assert int((offsets + p.sizes).max()) == dsa.lower_bound(p)
    assert np.all(_live_bytes(p) == dsa.lower_bound(p))
    if n <= 5000:
        dsa.validate(p, offsets)


def test_same_seed_same_problem():
    a = rectangle_cut(2000, seed=5, return_plan=True)
    b = rectangle_cut(2000, seed=5, return_plan=True)
    c = rectangle_cut(2000, seed=6)
    assert a[0] == b[0] and np.array_equal(a[1], b[1])
    assert a[0] != c
    g = rectangle_cut(500, seed=np.random.default_rng(1))
    assert g == rectangle_cut(500, seed=np.random.default_rng(1))


def test_pinwheel_blocks_are_not_guillotine():
    p, offsets, blocks = rectangle_cut(1000, seed=2, pinwheel=0.5, return_plan=True, return_blocks=True)
    assert len(blocks) > 10
    for b in blocks:
        assert b.shape == (5, 4)
        assert not guillotine_separable(b[:, 0], b[:, 1], b[:, 2], b[:, 3])
        # the five tile their bounding box
        area = int(((b[:, 1] - b[:, 0]) * (b[:, 3] - b[:, 2])).sum())
        box = (b[:, 1].max() - b[:, 0].min()) * (b[:, 3].max() - b[:, 2].min())
        assert area == box
    # the whole cut is not guillotine either; with pinwheel=0 it is
    assert not guillotine_separable(p.starts, p.ends, offsets, offsets + p.sizes)
    p0, o0, b0 = rectangle_cut(1000, seed=2, pinwheel=0, return_plan=True, return_blocks=True)
    assert b0 == [] and guillotine_separable(p0.starts, p0.ends, o0, o0 + p0.sizes)


@pytest.mark.parametrize("draw", DRAWS)
@pytest.mark.parametrize("pinwheel", [0.0, 0.5])
def test_tree_nodes_are_tiled_by_the_pieces_cut_from_them(draw, pinwheel):
    n = 400
    p, offsets, blocks, (nodes, parent) = rectangle_cut(n, seed=9, pinwheel=pinwheel, draw=draw,
                                                        return_plan=True, return_blocks=True,
                                                        return_tree=True)
    # asking for the tree draws the same instance
    plain = rectangle_cut(n, seed=9, pinwheel=pinwheel, draw=draw)
    assert np.array_equal(plain.starts, p.starts) and np.array_equal(plain.sizes, p.sizes)
    assert nodes.dtype == np.int64 and nodes.shape == (n - 1 - 3 * len(blocks), 5)
    assert parent.shape == (n,) and parent.min() >= 0 and parent.max() < len(nodes)
    # the whole rectangle first; every other node was cut from an earlier one
    assert tuple(nodes[0]) == (0, p.ends.max(), 0, dsa.lower_bound(p), -1)
    assert np.all(nodes[1:, 4] >= 0) and np.all(nodes[1:, 4] < np.arange(1, len(nodes)))
    # each node is tiled exactly by the buffers below it in the tree
    below = [set() for _ in nodes]
    for r in range(n):
        k = parent[r]
        while k >= 0:
            below[k].add(r)
            k = nodes[k, 4]
    for k, (x0, x1, y0, y1, _) in enumerate(nodes):
        rows = np.fromiter(below[k], dtype=np.int64)
        assert np.all((p.starts[rows] >= x0) & (p.ends[rows] <= x1))
        assert np.all((offsets[rows] >= y0) & (offsets[rows] + p.sizes[rows] <= y1))
        assert int(((p.ends[rows] - p.starts[rows]) * p.sizes[rows]).sum()) == (x1 - x0) * (y1 - y0)
    # a split makes two pieces, a pinwheel five (pieces still to be split count as nodes)
    children = np.bincount(np.concatenate([nodes[1:, 4], parent]), minlength=len(nodes))
    assert set(children.tolist()) <= {2, 5} and int((children == 5).sum()) == len(blocks)


def test_tree_of_one_buffer_is_empty():
    p, (nodes, parent) = rectangle_cut(1, seed=0, return_tree=True)
    assert nodes.shape == (0, 5) and parent.tolist() == [-1]


def test_guillotine_separable_small_cases():
    assert guillotine_separable([0], [1], [0], [1])
    assert guillotine_separable([0, 0], [2, 2], [0, 1], [1, 2])
    assert not guillotine_separable([0, 2, 1, 0, 1], [2, 3, 3, 1, 2], [0, 0, 2, 1, 1], [1, 2, 3, 3, 2])


def test_lifetime_mixes_differ():
    short = rectangle_cut(3000, seed=1, lifetimes="short")
    long_ = rectangle_cut(3000, seed=1, lifetimes="long")
    def rel(p):
        return np.median((p.ends - p.starts) / p.ends.max())
    assert rel(short) < rel(long_)


def test_cells_per_buffer_sets_the_granularity():
    coarse = rectangle_cut(1000, seed=3, cells_per_buffer=4)
    fine = rectangle_cut(1000, seed=3, cells_per_buffer=4096)
    assert rectangle_cut(1000, seed=3) == rectangle_cut(1000, seed=3, cells_per_buffer=16)
    # more cells: a longer, higher rectangle, pieces of more distinct sizes
    assert fine.ends.max() > 10 * coarse.ends.max()
    assert dsa.load(fine) > 10 * dsa.load(coarse)
    assert len(np.unique(fine.sizes)) > 5 * len(np.unique(coarse.sizes))


def test_drawing_pieces_by_area_spreads_their_areas():
    # "largest" splits one of the largest pieces each time, so areas stay within a narrow range; "area"
    # splits any piece with probability proportional to its area, small ones too
    def spread(draw):
        p = rectangle_cut(2000, seed=1, pinwheel=0, cells_per_buffer=4096, draw=draw)
        area = (p.ends - p.starts) * p.sizes
        return area.max() / area.min(), np.percentile(area, 99) / np.percentile(area, 1)
    (by_largest, p_largest), (by_area, p_area) = spread("largest"), spread("area")
    assert by_area > 5 * by_largest and p_area > 1.5 * p_largest
    # the default is "largest", and the same seed gives the same problem
    assert rectangle_cut(500, seed=4) == rectangle_cut(500, seed=4, draw="largest")
    assert rectangle_cut(500, seed=4, draw="area") == rectangle_cut(500, seed=4, draw="area")
    assert rectangle_cut(500, seed=4, draw="area") != rectangle_cut(500, seed=4)


def test_drawing_by_area_picks_pieces_in_proportion_to_area():
    # the Fenwick-tree draw against the frequencies it should give: pieces of areas 1 (not splittable),
    # 2, 6 and 12, drawn 20,000 times
    from dsa.generate import _area_draw
    pieces = [(0, 1, 0, 1), (0, 2, 0, 1), (0, 2, 0, 3), (0, 3, 0, 4)]
    push, pick = _area_draw(pieces, 4, np.random.default_rng(0))
    for i in range(4):
        push(i)
    counts = np.bincount([pick() for _ in range(20_000)], minlength=4)
    assert counts[0] == 0
    assert np.allclose(counts[1:] / 20_000, [2 / 20, 6 / 20, 12 / 20], atol=0.015)
    # a piece pushed again with its new area is drawn by that area
    pieces[3] = (0, 1, 0, 1)
    push(3)
    assert 3 not in {pick() for _ in range(2_000)}


def test_aspect_shapes_the_rectangle():
    wide = rectangle_cut(2000, seed=1, aspect=20)
    tall = rectangle_cut(2000, seed=1, aspect=0.05)
    assert wide.ends.max() / (dsa.load(wide) / 64) > 10 * tall.ends.max() / (dsa.load(tall) / 64)


@pytest.mark.parametrize("kw, name", [
    ({"n": 0}, "n"), ({"n": 2.5}, "n"), ({"n": True}, "n"),
    ({"aspect": 0}, "aspect"), ({"aspect": float("nan")}, "aspect"), ({"aspect": 1000}, "aspect"),
    ({"pinwheel": -0.1}, "pinwheel"), ({"pinwheel": 1.5}, "pinwheel"),
    ({"alignment": 0}, "alignment"), ({"alignment": 1.5}, "alignment"),
    ({"lifetimes": "forever"}, "lifetimes"), ({"draw": "smallest"}, "draw"), ({"draw": None}, "draw"),
    ({"cells_per_buffer": 0}, "cells_per_buffer"), ({"cells_per_buffer": 2.0}, "cells_per_buffer"),
])
def test_bad_arguments_name_the_parameter(kw, name):
    args = {"n": 100, **kw}
    with pytest.raises(ValueError, match=name):
        rectangle_cut(args.pop("n"), **args)
