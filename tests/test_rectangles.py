"""Rectangles cut out of tilings (dsa.strategies._layers.find_rectangle): pieces of a pinwheel
block found and checked in integers, none where there is none, blocks cut into leaves anchored at
the rectangles' offsets, plans at the bound through them, and partial plans that give a failed
leaf inside a rectangle room."""
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsa
from dsa.generate import rectangle_cut
from dsa.solution import plan_peak
from dsa.strategies import _layers as layers
from dsa.strategies import _skyline

pytest.importorskip("scipy.optimize")

# a pinwheel in [0, 3) x [0, 3): (start, end, low, high) of four rectangles wound around a centre one
PINWHEEL = np.array([(0, 2, 0, 1), (2, 3, 0, 2), (1, 3, 2, 3), (0, 1, 1, 3), (1, 2, 1, 2)])


def _guillotine(rect, pieces, rng):
    """``rect`` (start, end, low, high) cut into ``pieces`` rectangles by straight cuts."""
    out = [tuple(rect)]
    while len(out) < pieces:
        out.sort(key=lambda r: (r[1] - r[0]) * (r[3] - r[2]))
        x0, x1, y0, y1 = out.pop()
        if (x1 - x0 >= y1 - y0) and x1 - x0 >= 2:
            cut = int(rng.integers(x0 + 1, x1))
            out += [(x0, cut, y0, y1), (cut, x1, y0, y1)]
        else:
            cut = int(rng.integers(y0 + 1, y1))
            out += [(x0, x1, y0, cut), (x0, x1, cut, y1)]
    return out


def pinwheel_of_pieces(seed, pieces=6, scale=1000):
    """A pinwheel block whose five rectangles are each cut into ``pieces`` buffers (on a fine grid,
    so that sizes and instants hardly coincide): no layer, no instant free of crossings. Returns
    the problem, the known plan (peak = LOAD) and the pinwheel's rectangles (start, end, low, high)."""
    rng = np.random.default_rng(seed)
    # the pinwheel's cut points jittered, so no two of its edges share a coordinate by chance
    xs = np.array([0, scale + int(rng.integers(-200, 200)), 2 * scale + int(rng.integers(-200, 200)), 3 * scale])
    ys = np.array([0, scale + int(rng.integers(-200, 200)), 2 * scale + int(rng.integers(-200, 200)), 3 * scale])
    big = np.array([(xs[a], xs[b], ys[c], ys[d]) for a, b, c, d in PINWHEEL])
    cut = [r for rect in big for r in _guillotine(rect, pieces, rng)]
    cut = np.array(cut)[rng.permutation(len(cut))]
    problem = dsa.Problem(cut[:, 0], cut[:, 1], cut[:, 3] - cut[:, 2])
    return problem, cut[:, 2].astype(np.int64), big


def _is_piece(problem, known, chosen, big):
    """Whether the chosen rows fill one of the pinwheel's rectangles, or lie inside one and fill
    a rectangle of their own in the known plan."""
    s, e = problem.starts[chosen], problem.ends[chosen]
    lo, hi = known[chosen], known[chosen] + problem.sizes[chosen]
    box = (s.min(), e.max(), lo.min(), hi.max())
    area = int(((e - s) * (hi - lo)).sum())
    inside = any(b[0] <= box[0] and box[1] <= b[1] and b[2] <= box[2] and box[3] <= b[3] for b in big)
    return inside and area == (box[1] - box[0]) * (box[3] - box[2])


@pytest.mark.parametrize("seed", range(6))
def test_find_rectangle_finds_a_piece_of_a_pinwheel_block(seed):
    p, known, big = pinwheel_of_pieces(seed)
    t0, t1 = int(p.starts.min()), int(p.ends.max())
    # (the block has no layer: find_layer finds none for any seed)
    assert all(layers.find_layer(p.starts, p.ends, p.sizes, k, 5.0) is None for k in range(len(p)))
    found = layers.find_rectangle(p.starts, p.ends, p.sizes, np.random.default_rng(seed), 5.0)
    assert found is not None
    chosen, start, end, height = found
    assert 2 <= chosen.sum() < len(p) and (start, end) != (t0, t1)
    # checked in integers: the chosen buffers' bytes alive are `height` over [start, end), 0 elsewhere
    for t in np.unique(np.concatenate([p.starts, p.ends])):
        alive = chosen & (p.starts <= t) & (p.ends > t)
        assert p.sizes[alive].sum() == (height if start <= t < end else 0)
    assert _is_piece(p, known, chosen, big)


def test_rectangle_is_checked_in_integers():
    starts, ends, sizes = np.array([0, 2, 0, 3]), np.array([2, 4, 3, 4]), np.array([2, 2, 3, 3])
    assert layers._rectangle(starts, ends, sizes, np.array([True, True, False, False])) == (0, 4, 2)
    assert layers._rectangle(starts, ends, sizes, np.array([True, False, False, False])) is None  # one
    assert layers._rectangle(starts, ends, sizes, np.ones(4, dtype=bool)) is None                 # all
    assert layers._rectangle(starts, ends, sizes, np.array([True, False, True, False])) is None   # no window


def test_find_rectangle_is_none_where_there_is_none():
    # a pinwheel of five single buffers: its only rectangles are the buffers themselves
    starts, ends = PINWHEEL[:, 0], PINWHEEL[:, 1]
    sizes = PINWHEEL[:, 3] - PINWHEEL[:, 2]
    assert layers.find_rectangle(starts, ends, sizes, np.random.default_rng(0), 5.0) is None


def _leaves(monkeypatch, p, cap, seed, contract=True):
    monkeypatch.setattr(layers, "RECTANGLE_MIN_ROWS", 0)
    monkeypatch.setattr(layers, "CONTRACT", contract)
    stats = {}
    leaves = layers.split(p, np.arange(len(p)), cap, time.perf_counter() + 30, np.random.default_rng(seed), stats)
    return leaves, stats


@pytest.mark.parametrize("seed", range(4))
def test_split_cuts_rectangles_out_and_anchors_their_leaves(monkeypatch, seed):
    p, known, _ = pinwheel_of_pieces(seed)
    cap = dsa.load(p)
    leaves, stats = _leaves(monkeypatch, p, cap, seed, contract=False)
    assert stats["rectangles"] >= 4            # (the pinwheel's pieces, but the last)
    ids = np.concatenate([leaf.rows for leaf in leaves])
    real = np.sort(ids[ids < len(p)])
    assert real.tolist() == list(range(len(p)))              # every row in one leaf
    virtual = np.sort(ids[ids >= len(p)])
    assert virtual.tolist() == list(range(len(p), len(p) + stats["rectangles"]))  # and every rectangle
    anchors = sorted(leaf.anchor for leaf in leaves if leaf.anchor >= 0)
    assert set(anchors) == set(virtual.tolist())
    height = {}
    for leaf in leaves:
        for k in np.flatnonzero(leaf.rows >= len(p)):
            height[int(leaf.rows[k])] = int(leaf.sizes[leaf.node[k]])   # (unmerged without contraction)
    for leaf in leaves:
        top = cap if leaf.anchor < 0 else height[leaf.anchor]
        assert 0 <= leaf.base and leaf.base + leaf.height <= top and leaf.height > 0


@pytest.mark.parametrize("contract", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_plan_reaches_the_bound_through_rectangles(monkeypatch, seed, contract):
    p, _, _ = pinwheel_of_pieces(seed, pieces=10)
    cap = dsa.load(p)
    monkeypatch.setattr(layers, "RECTANGLE_MIN_ROWS", 0)
    monkeypatch.setattr(layers, "CONTRACT", contract)
    stats = {}
    out = layers.plan(p, np.cumsum(p.sizes) - p.sizes, cap, time.perf_counter() + 30, seed=seed, stats=stats)
    assert out is not None
    dsa.validate(p, out)
    assert plan_peak(p, out) == cap
    assert stats.get("rectangles", 0) >= 1 or stats.get("merged_pinwheel", 0) >= 1


@pytest.mark.parametrize("seed", range(3))
def test_a_block_too_large_to_stay_whole_gets_a_rectangle_when_its_program_stops(monkeypatch, seed):
    # a block whose layer's program stops at its limit stays whole (UNSETTLED_LEAF); where it has more
    # buffers than a leaf may, a rectangle is looked for instead of ending the cut (LARGE_RECTANGLE)
    p, _, _ = pinwheel_of_pieces(seed)
    cap = dsa.load(p)
    real = layers.find_layer
    programs = []

    def unsettled(starts, ends, sizes, seed_row, time_limit, report=None):
        if report is None:                 # (find_rectangle's own searches: the real one)
            return real(starts, ends, sizes, seed_row, time_limit)
        programs.append(len(sizes))
        report["settled"] = False
        return None

    monkeypatch.setattr(layers, "find_layer", unsettled)
    monkeypatch.setattr(layers, "RECTANGLE_MIN_ROWS", 0)
    monkeypatch.setattr(layers, "CONTRACT", False)
    monkeypatch.setattr(layers, "EDGE_SEEDS", 0)
    monkeypatch.setattr(layers, "LEAF_MAX_ROWS", 10)   # (the whole block, 30 buffers, may not stay whole)

    def cut():
        stats = {}
        leaves = layers.split(p, np.arange(len(p)), cap, time.perf_counter() + 30, np.random.default_rng(seed),
                              stats, max_rows=len(p))
        return leaves, stats

    leaves, stats = cut()
    assert programs[0] == len(p) and stats["layer_unsettled"] >= 1 and stats["rectangles"] >= 1
    ids = np.concatenate([leaf.rows for leaf in leaves])
    assert np.sort(ids[ids < len(p)]).tolist() == list(range(len(p)))
    assert all(len(leaf.sizes) <= 10 for leaf in leaves if not leaf.settled)
    # the leaves' plans make a plan at the bound
    out = layers.plan(p, np.cumsum(p.sizes) - p.sizes, cap, time.perf_counter() + 30, seed=seed)
    assert out is not None
    dsa.validate(p, out)
    assert plan_peak(p, out) == cap
    # switched off, the cut ends at the first block
    monkeypatch.setattr(layers, "LARGE_RECTANGLE", False)
    assert cut()[0] is None


@pytest.mark.parametrize("fail", ["inner", "outer", "both"])
def test_partial_plans_give_failed_leaves_room_inside_rectangles(monkeypatch, fail):
    p, _, _ = pinwheel_of_pieces(1, pieces=10)
    cap = dsa.load(p)
    start = np.cumsum(p.sizes) - p.sizes
    monkeypatch.setattr(layers, "RECTANGLE_MIN_ROWS", 0)
    monkeypatch.setattr(layers, "CONTRACT", False)
    leaves = layers.split(p, np.arange(len(p)), cap, time.perf_counter() + 30, np.random.default_rng(1))
    inner = {len(leaf.sizes) for leaf in leaves if leaf.anchor >= 0 and len(leaf.sizes) > 1}
    outer = {len(leaf.sizes) for leaf in leaves if leaf.anchor < 0 and len(leaf.sizes) > 1}
    failing = {"inner": inner, "outer": outer, "both": inner | outer}[fail]
    assert failing
    real = _skyline.bound_look

    def look(sub, offsets, high, deadline, seed=None, **kw):
        # (leaves told apart by their buffers: the look fails on those chosen)
        return None if len(sub) in failing else real(sub, offsets, high, deadline, seed=seed, **kw)

    monkeypatch.setattr(_skyline, "bound_look", look)
    monkeypatch.setattr(layers, "split", lambda *a, **k: leaves)      # (these leaves, once more)
    # the failed leaves' plans: their buffers stacked above their bands
    monkeypatch.setattr(layers, "_fallback",
                        lambda leaf, seconds, seed=None: np.cumsum(leaf.sizes) - leaf.sizes + leaf.height)
    stats = {}
    out = layers.plan(p, start, cap, time.perf_counter() + 30, seed=1, stats=stats, partial=True)
    assert out is not None and stats["layer_failed"] >= 1
    dsa.validate(p, out)
    assert cap < plan_peak(p, out) < plan_peak(p, start)


def test_rectangles_of_two_periods_keep_ids_of_their_own(monkeypatch):
    # two pinwheel blocks one after the other: two busy periods, each cut into rectangles
    a, _, _ = pinwheel_of_pieces(2, pieces=8)
    b, _, _ = pinwheel_of_pieces(3, pieces=8)
    shift = int(a.ends.max()) + 5
    p = dsa.Problem(np.concatenate([a.starts, b.starts + shift]), np.concatenate([a.ends, b.ends + shift]),
                    np.concatenate([a.sizes, b.sizes]))
    cap = dsa.load(p)
    monkeypatch.setattr(layers, "RECTANGLE_MIN_ROWS", 0)
    monkeypatch.setattr(layers, "CONTRACT", False)
    stats = {}
    out = layers.plan(p, np.cumsum(p.sizes) - p.sizes, cap, time.perf_counter() + 30, seed=0, stats=stats)
    assert out is not None and stats["rectangles"] >= 8
    dsa.validate(p, out)
    assert plan_peak(p, out) == cap


@pytest.mark.parametrize("seed", range(3))
def test_the_rest_of_a_block_with_no_layer_has_none(seed):
    # (why split does not look for layers in what a rectangle leaves of a block without one)
    p, _, _ = pinwheel_of_pieces(seed)
    chosen, start, end, height = layers.find_rectangle(p.starts, p.ends, p.sizes, np.random.default_rng(seed), 5.0)
    starts = np.append(p.starts[~chosen], start)
    ends = np.append(p.ends[~chosen], end)
    sizes = np.append(p.sizes[~chosen], height)
    assert all(layers.find_layer(starts, ends, sizes, k, 5.0) is None for k in range(len(sizes)))


@settings(max_examples=15, deadline=None)
@given(n=st.integers(40, 160), seed=st.integers(0, 10_000), pinwheel=st.sampled_from([0.3, 0.7, 1.0]),
       cells=st.sampled_from([16, 256, 1024]), partial=st.booleans())
def test_any_cut_with_rectangles_partitions_the_rows_and_any_plan_is_valid(n, seed, pinwheel, cells, partial):
    p = rectangle_cut(n, seed=seed, pinwheel=pinwheel, cells_per_buffer=cells)
    cap = dsa.load(p)
    old = (layers.RECTANGLE_MIN_ROWS, layers.CONTRACT)
    layers.RECTANGLE_MIN_ROWS = 0                 # (rectangles in every block with no layer)
    try:
        leaves = layers.split(p, np.arange(len(p)), cap, time.perf_counter() + 30, np.random.default_rng(seed))
        ids = np.concatenate([leaf.rows for leaf in leaves])
        assert np.sort(ids[ids < len(p)]).tolist() == list(range(len(p)))
        virtual = ids[ids >= len(p)]
        assert len(set(virtual.tolist())) == len(virtual)          # each rectangle in one leaf
        assert {leaf.anchor for leaf in leaves if leaf.anchor >= 0} == set(virtual.tolist())  # each holds a leaf
        start = np.cumsum(p.sizes) - p.sizes
        out = layers.plan(p, start, cap, time.perf_counter() + 30, seed=seed, partial=partial)
        if out is not None:
            dsa.validate(p, out)
            assert plan_peak(p, out) == cap or (partial and plan_peak(p, out) < plan_peak(p, start))
    finally:
        layers.RECTANGLE_MIN_ROWS, layers.CONTRACT = old
