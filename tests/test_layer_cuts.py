"""Plans at the bound cut into layers (dsa.strategies._layers): layers found and checked in
integers, blocks cut into leaves that stack within the capacity, plans validated, None wherever the
cut does not apply or a leaf cannot be planned, and best's look at the bound using it."""
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsa
from dsa.bounds import live_bytes
from dsa.generate import random_trace, rectangle_cut
from dsa.solution import plan_peak
from dsa.strategies import _layers as layers
from dsa.strategies import _skyline
from dsa.strategies import best as best_module

pytest.importorskip("scipy.optimize")


def _two_bands():
    """Block [0, 10) x 7 bytes: a band of 3 bytes (a then b) below one of 4 (c then d); no instant
    inside is free of crossings (a crosses 3, c crosses 5), so only a layer cuts it."""
    starts = np.array([0, 5, 0, 3])
    ends = np.array([5, 10, 3, 10])
    sizes = np.array([3, 3, 4, 4])
    return starts, ends, sizes


def _stacked_cuts(n_low, n_high, seed, **kw):
    """Two rectangle cuts stacked into one problem: times of each scaled to a common span, so the
    result is flat (its bytes alive are LOAD throughout) and has at least one layer."""
    low = rectangle_cut(n_low, seed=seed, **kw)
    high = rectangle_cut(n_high, seed=seed + 1000, **kw)
    w_low, w_high = int(low.ends.max()), int(high.ends.max())
    starts = np.concatenate([low.starts * w_high, high.starts * w_low])
    ends = np.concatenate([low.ends * w_high, high.ends * w_low])
    sizes = np.concatenate([low.sizes, high.sizes])
    order = np.random.default_rng(seed).permutation(len(sizes))
    return dsa.Problem(starts[order], ends[order], sizes[order])


def test_find_layer_returns_the_smallest_band_holding_the_seed():
    starts, ends, sizes = _two_bands()
    assert layers.find_layer(starts, ends, sizes, 0, 5.0).tolist() == [True, True, False, False]
    assert layers.find_layer(starts, ends, sizes, 3, 5.0).tolist() == [False, False, True, True]


def test_find_layer_is_none_where_no_band_exists():
    # a pinwheel: four rectangles wound around a centre one; no proper subset has a constant load
    blocks = np.array([(0, 2, 0, 1), (2, 3, 0, 2), (1, 3, 2, 3), (0, 1, 1, 3), (1, 2, 1, 2)])
    starts, ends, sizes = blocks[:, 0], blocks[:, 1], blocks[:, 3] - blocks[:, 2]
    for seed_row in range(5):
        assert layers.find_layer(starts, ends, sizes, seed_row, 5.0) is None


def test_find_layer_reports_whether_its_program_settled():
    # optimal (a smallest layer) and proven infeasible (none) are settled
    report = {}
    assert layers.find_layer(*_two_bands(), 0, 5.0, report=report) is not None and report == {"settled": True}
    blocks = np.array([(0, 2, 0, 1), (2, 3, 0, 2), (1, 3, 2, 3), (0, 1, 1, 3), (1, 2, 1, 2)])
    report = {}
    assert layers.find_layer(blocks[:, 0], blocks[:, 1], blocks[:, 3] - blocks[:, 2], 0, 5.0,
                             report=report) is None and report == {"settled": True}
    # a coarse cut of 2,500 buffers, one busy period with no instant free of crossings: its
    # program runs for seconds (0.5 s stopped it with a layer it had not proven the smallest), so
    # 10 ms stop it at its limit
    p = rectangle_cut(2500, seed=121, pinwheel=0.4, cells_per_buffer=16)
    report = {}
    layers.find_layer(p.starts, p.ends, p.sizes, 0, 0.01, report=report)
    assert report == {"settled": False}


def test_a_block_whose_program_stops_at_its_limit_stays_whole(monkeypatch):
    p = _stacked_cuts(60, 40, 0, cells_per_buffer=256)
    cap = dsa.load(p)
    calls = {"layer": 0, "rectangle": 0}

    def unsettled(starts, ends, sizes, seed_row, time_limit, report=None):
        calls["layer"] += 1
        report["settled"] = False
        return np.arange(len(sizes)) == seed_row      # (a "layer" the split must not use)

    def rectangle(*args):
        calls["rectangle"] += 1
        return None

    monkeypatch.setattr(layers, "find_layer", unsettled)
    monkeypatch.setattr(layers, "find_rectangle", rectangle)
    monkeypatch.setattr(layers, "RECTANGLE_MIN_ROWS", 0)
    monkeypatch.setattr(layers, "EDGE_SEEDS", 0)   # (the random seeds' rule; the edges' is tested apart)
    stats = {}
    leaves = layers.split(p, np.arange(len(p)), cap, time.perf_counter() + 30, np.random.default_rng(0), stats)
    # one program per block that reaches one (no second seed), no rectangle, no layer: every block
    # that the cuts and merges leave is a leaf, planned at the full height of its span
    assert calls["layer"] == stats["layer_unsettled"] >= 1 and calls["rectangle"] == 0
    assert "layers" not in stats and "rectangles" not in stats
    rows = np.sort(np.concatenate([leaf.rows for leaf in leaves]))
    assert rows.tolist() == list(range(len(p)))
    # with max_rows below the blocks that stay whole, the split ends there
    assert layers.split(p, np.arange(len(p)), cap, time.perf_counter() + 30, np.random.default_rng(0),
                        max_rows=5) is None
    # ... and with max_rows above them, where they are more than LEAF_MAX_ROWS (as partial plans ask)
    monkeypatch.setattr(layers, "LEAF_MAX_ROWS", 5)
    assert layers.split(p, np.arange(len(p)), cap, time.perf_counter() + 30, np.random.default_rng(0),
                        max_rows=10 ** 6) is None
    # a program that the split's deadline cuts shorter than LAYER_S says nothing of its block
    monkeypatch.setattr(layers, "LEAF_MAX_ROWS", 1200)
    stats = {}
    short = layers.split(p, np.arange(len(p)), cap, time.perf_counter() + layers.LAYER_S / 2,
                         np.random.default_rng(0), stats)
    assert "layer_unsettled" not in stats and all(leaf.settled for leaf in short)
    # switched off, the layer is taken and a second program runs on each part
    monkeypatch.setattr(layers, "UNSETTLED_LEAF", False)
    calls["layer"] = 0
    stats = {}
    layers.split(p, np.arange(len(p)), cap, time.perf_counter() + 30, np.random.default_rng(0), stats)
    assert stats.get("layers", 0) >= 1 and "layer_unsettled" not in stats


def _direct(find, limit, *args, **options):
    """``split``'s ``program`` without its deadline and counts."""
    return find(*args, limit, **options)


def test_edge_seeds_are_the_buffers_at_the_block_edges_smallest_first(monkeypatch):
    starts = np.array([0, 0, 0, 2, 1, 3, 5, 4])
    ends = np.array([2, 4, 9, 9, 3, 5, 9, 6])
    sizes = np.array([5, 3, 4, 9, 1, 2, 1, 7])
    tried = []

    def record(s, e, z, seed_row, time_limit, report=None):
        tried.append((seed_row, time_limit))
        return None

    monkeypatch.setattr(layers, "find_layer", record)
    assert layers._edge_layer(_direct, starts, ends, sizes, np.random.default_rng(0)) is None
    # alive at the first instant (0: rows 0-2) or the last (9: rows 2, 3, 6), each once, by size;
    # each search gets EDGE_S seconds
    assert [row for row, _ in tried] == [6, 1, 2, 0, 3] and {limit for _, limit in tried} == {layers.EDGE_S}
    tried.clear()
    monkeypatch.setattr(layers, "EDGE_SEEDS", 2)
    layers._edge_layer(_direct, starts, ends, sizes, np.random.default_rng(0))
    assert [row for row, _ in tried] == [6, 1]
    # the first layer found ends the search
    tried.clear()
    monkeypatch.setattr(layers, "EDGE_SEEDS", 16)
    monkeypatch.setattr(layers, "find_layer", lambda s, e, z, seed_row, limit, report=None:
                        tried.append(seed_row) or (np.arange(len(z)) == seed_row if seed_row == 2 else None))
    assert layers._edge_layer(_direct, starts, ends, sizes, np.random.default_rng(0)).tolist() == [
        False, False, True, False, False, False, False, False]
    assert tried == [6, 1, 2]


def test_edge_seeds_cut_a_thin_band_off_a_coarse_block(monkeypatch):
    # a coarse cut (16 cells per buffer: sizes coincide, and a layer holding a random buffer is
    # seldom proven the smallest) on a band of six buffers of 64 bytes end to end: a layer holding
    # one of the buffers at an edge, a thin one, comes back (in 0.03 s where this was written; the
    # limits are raised so that a slow machine finds it too)
    monkeypatch.setattr(layers, "EDGE_TOTAL_S", 60.0)
    p = rectangle_cut(800, seed=3, pinwheel=0.2, cells_per_buffer=16)
    w = int(p.ends.max())
    bounds = np.r_[0, np.sort(np.random.default_rng(3).choice(np.arange(1, w), 5, replace=False)), w]
    q = dsa.Problem(np.r_[p.starts, bounds[:-1]], np.r_[p.ends, bounds[1:]], np.r_[p.sizes, np.full(6, 64)])
    assert len(layers._spans(q.starts, q.ends)) == 1
    layer = layers._edge_layer(lambda find, limit, *args, **options: find(*args, 5.0, **options),
                               q.starts, q.ends, q.sizes, np.random.default_rng(0))
    assert layer is not None and layers._balanced(q.starts, q.ends, q.sizes, layer)
    edge = (q.starts == q.starts.min()) | (q.ends == q.ends.max())
    assert (layer & edge).any()
    assert dsa.load(q.take(np.flatnonzero(layer))) <= dsa.load(q) // 4


def test_a_leaf_whose_program_stopped_at_its_limit_gets_a_short_look(monkeypatch):
    p = _stacked_cuts(60, 40, 1, cells_per_buffer=256)
    # a buffer over the whole span, stacked apart: the rest is cut from it, so the looks run
    top = int(p.sizes.max())
    q = dsa.Problem(np.append(p.starts, p.starts.min()), np.append(p.ends, p.ends.max()), np.append(p.sizes, top))
    cap = dsa.load(q)

    def unsettled(starts, ends, sizes, seed_row, time_limit, report=None):
        report["settled"] = False
        return None

    shares = []

    def look(sub, offsets, height, until, **kw):
        now = time.perf_counter()
        shares.append((until - now) / (deadline - now))
        return None

    monkeypatch.setattr(layers, "find_layer", unsettled)
    monkeypatch.setattr(_skyline, "bound_look", look)
    deadline = time.perf_counter() + 100
    assert layers.plan(q, np.cumsum(q.sizes) - q.sizes, cap, deadline) is None
    assert len(shares) == 1 and 0 < shares[0] <= layers.UNSETTLED_LOOK_SHARE + 1e-3
    # with partial plans too, and no partial plan is made around it
    fallbacks = []
    monkeypatch.setattr(layers, "_fallback", lambda *a, **k: fallbacks.append(a) or None)
    shares.clear()
    assert layers.plan(q, np.cumsum(q.sizes) - q.sizes, cap, deadline, partial=True) is None
    assert len(shares) == 1 and shares[0] <= layers.UNSETTLED_LOOK_SHARE + 1e-3 and not fallbacks
    # a leaf that stayed whole for want of a layer (a settled program) gets the time to the deadline
    monkeypatch.setattr(layers, "UNSETTLED_LEAF", False)
    shares.clear()
    assert layers.plan(q, np.cumsum(q.sizes) - q.sizes, cap, deadline) is None
    assert len(shares) == 1 and shares[0] > 0.99


def test_balanced_is_checked_in_integers():
    starts, ends, sizes = _two_bands()
    assert layers._balanced(starts, ends, sizes, np.array([True, True, False, False]))
    assert not layers._balanced(starts, ends, sizes, np.array([True, False, False, False]))
    assert not layers._balanced(starts, ends, sizes, np.array([True, False, True, False]))
    assert not layers._balanced(starts, ends, sizes, np.zeros(4, dtype=bool))     # none
    assert not layers._balanced(starts, ends, sizes, np.ones(4, dtype=bool))      # all


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_split_leaves_partition_the_block_and_stack_within_the_cap(seed):
    p = _stacked_cuts(60, 40, seed, cells_per_buffer=256)
    cap = dsa.load(p)
    stats = {}
    leaves = layers.split(p, np.arange(len(p)), cap, time.perf_counter() + 30,
                          np.random.default_rng(seed), stats)
    rows = np.sort(np.concatenate([leaf.rows for leaf in leaves]))
    assert rows.tolist() == list(range(len(p)))                     # every row in one leaf
    assert stats["layers"] >= 1 and len(leaves) >= 2
    for leaf in leaves:
        assert 0 <= leaf.base and leaf.base + leaf.height <= cap and leaf.height > 0
        # each leaf is flat at its height over its own span (a plan within it tiles it)
        _, live = live_bytes(p.take(leaf.rows))
        assert np.all(live[:-1] == leaf.height)
        # its merged buffers are their members' union: same span, same bytes alive
        _, merged = live_bytes(dsa.Problem(leaf.starts, leaf.ends, leaf.sizes))
        assert np.all(merged[:-1] == leaf.height)
    # leaves alive at one instant take disjoint bands that fill the cap
    for t in np.unique(p.starts):
        bands = sorted((leaf.base, leaf.base + leaf.height) for leaf in leaves
                       if np.any((p.starts[leaf.rows] <= t) & (p.ends[leaf.rows] > t)))
        assert bands[0][0] == 0 and bands[-1][1] == cap
        assert all(a[1] == b[0] for a, b in zip(bands, bands[1:]))


@pytest.mark.parametrize("seed", [0, 1])
def test_plan_reaches_the_bound_on_stacked_cuts_and_is_valid(seed):
    p = _stacked_cuts(80, 50, seed, cells_per_buffer=256)
    cap = dsa.lower_bound(p)
    stats = {}
    out = layers.plan(p, np.cumsum(p.sizes) - p.sizes, cap, time.perf_counter() + 30, seed=seed,
                      stats=stats)
    assert out is not None
    dsa.validate(p, out)
    assert plan_peak(p, out) == cap
    assert stats["layers"] >= 1 and stats["layer_leaves"] >= 2 and stats["layer_programs"] >= 1


def test_plan_keeps_periods_already_within_the_cap():
    p = _stacked_cuts(40, 30, 3, cells_per_buffer=256)
    cap = dsa.lower_bound(p)
    # a second busy period, after the first, planned within the cap already
    q = dsa.Problem(np.concatenate([p.starts, [10 ** 9]]), np.concatenate([p.ends, [10 ** 9 + 1]]),
                    np.concatenate([p.sizes, [5]]))
    start = np.concatenate([np.cumsum(p.sizes) - p.sizes, [17]])
    out = layers.plan(q, start, cap, time.perf_counter() + 30, seed=0)
    assert out is not None and out[-1] == 17
    dsa.validate(q, out)


def test_plan_is_none_where_it_does_not_apply(monkeypatch):
    deadline = time.perf_counter() + 10
    # bytes alive not the same at every instant: not a tiling
    trace = random_trace(60, seed=1)
    assert layers.plan(trace, np.cumsum(trace.sizes) - trace.sizes, dsa.load(trace), deadline) is None
    p = _stacked_cuts(40, 30, 4, cells_per_buffer=256)
    start = np.cumsum(p.sizes) - p.sizes
    cap = dsa.load(p)
    # alignments above 1 (a stacked band's base need not be a multiple of them)
    aligned = p.replace(alignments=np.full(len(p), 128))
    assert layers.plan(aligned, start, cap, deadline) is None
    # a plan already within the cap: nothing to do
    assert layers.plan(p, start, int(plan_peak(p, start)), deadline) is None
    # a single pinwheel cannot be cut into layers; merged (dsa.strategies._contract), it is one buffer
    one = rectangle_cut(5, seed=0, pinwheel=1.0)
    merged = layers.plan(one, np.cumsum(one.sizes) - one.sizes, dsa.load(one), deadline)
    assert merged is not None and plan_peak(one, merged) == dsa.load(one)
    monkeypatch.setattr(layers, "CONTRACT", False)
    assert layers.plan(one, np.cumsum(one.sizes) - one.sizes, dsa.load(one), deadline) is None
    # without SciPy's milp
    monkeypatch.setattr(layers, "available", lambda: False)
    assert layers.plan(p, start, cap, deadline) is None


def test_plan_trusts_no_leaf(monkeypatch):
    p = _stacked_cuts(40, 30, 5, cells_per_buffer=256)
    start = np.cumsum(p.sizes) - p.sizes
    cap = dsa.load(p)
    # a leaf whose look finds nothing ends the attempt
    monkeypatch.setattr(_skyline, "bound_look", lambda sub, offsets, *a, **k: None)
    assert layers.plan(p, start, cap, time.perf_counter() + 10) is None
    # a leaf "plan" that overlaps is caught by the validator
    monkeypatch.setattr(_skyline, "bound_look", lambda sub, offsets, *a, **k: np.zeros(len(sub), np.int64))
    assert layers.plan(p, start, cap, time.perf_counter() + 10) is None


def test_plan_stops_at_its_deadline():
    p = _stacked_cuts(60, 40, 6, cells_per_buffer=256)
    start = np.cumsum(p.sizes) - p.sizes
    stats = {}
    # a deadline already past: no integer program runs, no cut, no plan
    assert layers.plan(p, start, dsa.load(p), time.perf_counter() - 1, stats=stats) is None
    assert stats.get("layer_programs", 0) == 0


def test_best_plans_layers_apart_on_large_tilings(monkeypatch):
    # (the layers are tried on problems above BOUND_LOOK_MAX_ROWS rows: lowered here so that a small
    # problem takes that path)
    monkeypatch.setattr(best_module, "BOUND_LOOK_MAX_ROWS", 50)
    p = _stacked_cuts(80, 50, 7, cells_per_buffer=256)
    s = dsa.solve(p, strategy="best", time_limit=20, seed=0)
    assert s.success and s.peak == dsa.lower_bound(p)
    assert s.stats["bound_look"] and s.stats["layer_plan"] and s.stats["layers"] >= 1


def test_tiles_says_where_plan_has_periods_to_cut():
    p = rectangle_cut(60, seed=3, cells_per_buffer=256)
    stacked = np.cumsum(p.sizes) - p.sizes
    assert layers.tiles(p, stacked, dsa.load(p))           # (above LOAD, LOAD bytes alive throughout)
    _, known = rectangle_cut(60, seed=3, cells_per_buffer=256, return_plan=True)
    assert not layers.tiles(p, known, dsa.load(p))         # (nothing above the cap: nothing to cut)
    assert not layers.tiles(p, stacked, dsa.load(p) + 64)  # (a cap above the bytes alive: no tiling)
    aligned = dsa.Problem(p.starts, p.ends, p.sizes, alignments=np.full(len(p), 64))
    assert not layers.tiles(aligned, stacked, dsa.load(p))  # (alignments: the layers do not apply)


def test_best_cuts_layers_with_less_time_left_than_the_look_at_the_whole_needs(monkeypatch):
    # below BOUND_LOOK_MIN_S seconds left (the default time limit is 1 s) the look at the whole does
    # not run, but the layers do, on the look's share: the tiling is planned at the bound
    monkeypatch.setattr(best_module, "BOUND_LOOK_MAX_ROWS", 50)
    p = _stacked_cuts(80, 50, 7, cells_per_buffer=256)
    real, looked = _skyline.bound_look, []

    def look(problem, *args, **kw):
        looked.append(len(problem))
        return real(problem, *args, **kw)

    monkeypatch.setattr(_skyline, "bound_look", look)
    s = dsa.solve(p, strategy="best", time_limit=0.9 * best_module.BOUND_LOOK_MIN_S, seed=0)
    assert s.success and s.peak == dsa.lower_bound(p)
    assert s.stats["layer_plan"] and s.stats["layers"] >= 1
    assert looked and len(p) not in looked   # (only the leaves were looked at, not the whole)


@pytest.mark.parametrize("long", [False, True])
def test_best_gives_large_tilings_the_layers_share_by_the_time_left(monkeypatch, long):
    # on problems above BOUND_LOOK_MAX_ROWS rows the layers get LAYERS_SHARE of the time left, but
    # LAYERS_BRIEF_SHARE where less than BOUND_LOOK_MIN_S is left (the look at the whole does not run)
    monkeypatch.setattr(best_module, "BOUND_LOOK_MAX_ROWS", 50)
    monkeypatch.setattr(best_module, "LAYERS_SHARE", 0.6)
    monkeypatch.setattr(best_module, "LAYERS_BRIEF_SHARE", 0.2)
    p = _stacked_cuts(80, 50, 7, cells_per_buffer=256)
    given = []

    def plan(problem, offsets, cap, deadline, **kw):
        given.append(deadline - time.perf_counter())
        return None

    monkeypatch.setattr(layers, "plan", plan)
    limit = 2.5 * best_module.BOUND_LOOK_MIN_S if long else 0.9 * best_module.BOUND_LOOK_MIN_S
    s = dsa.solve(p, strategy="best", time_limit=limit, seed=0)
    assert s.success and len(given) == 1
    share = 0.6 if long else 0.2
    # (the time left when the layers start is at most the limit, and most of it: the portfolio before
    # them takes a share of it)
    assert 0.5 * share * limit < given[0] <= share * limit


def test_best_gives_the_canonical_search_no_floor_of_time_on_tilings(monkeypatch):
    # at the default second, the canonical search gets CANONICAL_MIN_S (all of the time left) on a
    # problem that is not a tiling, and only its share (CANONICAL_SHARE_SMALL) on a tiling, where the
    # skyline search and the dives plan what it does not
    from dsa.strategies import _canonical_search

    given = []
    real = _canonical_search.CanonicalSearch.lower_peak

    def lower_peak(self, offsets, *args, time_limit=None, **kw):
        given.append(time_limit)
        return real(self, offsets, *args, time_limit=time_limit, **kw)

    monkeypatch.setattr(_canonical_search.CanonicalSearch, "lower_peak", lower_peak)
    monkeypatch.setattr(best_module, "bound_look", lambda *a, **k: None)   # (no plan at the bound)
    tiling = rectangle_cut(300, seed=5, pinwheel=0.5, cells_per_buffer=16)
    other = dsa.data.load("A.1048576")
    assert layers.tiles(tiling, np.cumsum(tiling.sizes) - tiling.sizes, dsa.load(tiling))
    assert not layers.tiles(other, np.cumsum(other.sizes) - other.sizes, dsa.lower_bound(other))
    for p in (tiling, other):
        given.clear()
        s = dsa.solve(p, strategy="best", time_limit=1.0, seed=0)
        assert s.success and len(given) == 1
        if p is tiling:
            assert given[0] <= best_module.CANONICAL_SHARE_SMALL * 1.0
        else:
            assert given[0] > best_module.CANONICAL_SHARE_SMALL * 1.0


def test_best_skips_layers_when_disabled(monkeypatch):
    monkeypatch.setattr(best_module, "BOUND_LOOK_MAX_ROWS", 50)
    monkeypatch.setattr(best_module, "LAYERS_SHARE", 0.0)
    p = _stacked_cuts(80, 50, 7, cells_per_buffer=256)
    s = dsa.solve(p, strategy="best", time_limit=3, seed=0)
    assert s.success and "layer_plan" not in s.stats and "layer_programs" not in s.stats


@settings(max_examples=25, deadline=None)
@given(n=st.integers(3, 30), seed=st.integers(0, 10_000), pinwheel=st.sampled_from([0.0, 0.5, 1.0]),
       stacked=st.booleans(), pick=st.integers(0, 10_000))
def test_any_layer_found_has_a_constant_load_and_holds_its_seed(n, seed, pinwheel, stacked, pick):
    if stacked:
        p = _stacked_cuts(n, max(1, n // 2), seed, pinwheel=pinwheel, cells_per_buffer=8)
    else:
        p = rectangle_cut(n, seed=seed, pinwheel=pinwheel, cells_per_buffer=8)
    seed_row = pick % len(p)
    layer = layers.find_layer(p.starts, p.ends, p.sizes, seed_row, 5.0)
    if stacked:
        # each of the two cuts is a layer: one holding any row exists
        assert layer is not None
    if layer is None:
        return
    assert layer[seed_row] and 0 < layer.sum() < len(p)
    # checked apart from the module: the layer's bytes alive, and the rest's, are the same at every
    # instant of the whole span (live_bytes over the layer alone, padded with the span's ends)
    for part in (layer, ~layer):
        sub = p.take(np.flatnonzero(part))
        times, live = live_bytes(sub)
        assert sub.starts.min() == p.starts.min() and sub.ends.max() == p.ends.max()
        assert np.all(live[:-1] == live[0])


def test_find_layer_where_every_buffer_spans_the_block():
    starts, ends, sizes = np.array([0, 0, 0]), np.array([4, 4, 4]), np.array([1, 2, 3])
    assert layers.find_layer(starts, ends, sizes, 1, 1.0).tolist() == [False, True, False]
    assert layers.find_layer(starts[:1], ends[:1], sizes[:1], 0, 1.0) is None


def test_partial_plans_put_failed_leaves_above_their_bands(monkeypatch):
    p = _stacked_cuts(40, 30, 8, cells_per_buffer=256)
    cap = dsa.load(p)
    start = np.cumsum(p.sizes) - p.sizes
    real, calls = _skyline.bound_look, []

    def look(sub, offsets, high, deadline, seed=None, **kw):
        calls.append(len(sub))            # the first (the largest leaf) fails
        return None if len(calls) == 1 else real(sub, offsets, high, deadline, seed=seed, **kw)

    monkeypatch.setattr(_skyline, "bound_look", look)
    # the failed leaf's plan: its buffers stacked, far above its band
    monkeypatch.setattr(layers, "_fallback", lambda leaf, seconds, seed=None: np.cumsum(leaf.sizes) - leaf.sizes)
    assert layers.plan(p, start, cap, time.perf_counter() + 10) is None          # (all or nothing)
    calls.clear()
    stats = {}
    out = layers.plan(p, start, cap, time.perf_counter() + 10, stats=stats, partial=True)
    assert out is not None and stats["layer_failed"] == 1 and len(calls) >= 2
    dsa.validate(p, out)
    assert cap < plan_peak(p, out) < plan_peak(p, start)
    # a partial plan no lower than the one given is no use
    calls.clear()
    assert layers.plan(p, out, cap, time.perf_counter() + 10, partial=True) is None


def test_best_goes_on_from_a_partial_plan(monkeypatch):
    p, known = rectangle_cut(300, seed=5, pinwheel=0.5, return_plan=True)
    load = dsa.load(p)
    lower = known.copy()
    lower[np.argmin(p.sizes)] = load                # a plan just above the bound: one buffer on top
    monkeypatch.setattr(best_module, "LAYERS_PARTIAL", True)
    monkeypatch.setattr(layers, "plan", lambda *a, **k: lower.copy())
    monkeypatch.setattr(_skyline, "bound_look", lambda *a, **k: None)
    s = dsa.solve(p, strategy="best", time_limit=4, seed=0)
    assert s.stats["portfolio_peak"] > plan_peak(p, lower)      # (else the test shows nothing)
    assert s.success and not s.stats["layer_plan"] and not s.stats["bound_look"]
    assert s.stats["layer_partial_peak"] == plan_peak(p, lower) >= s.peak
    assert any(peak == plan_peak(p, lower) for _, peak in s.stats["improvements"])


def test_exact_goes_on_from_a_partial_plan(monkeypatch):
    p, known = rectangle_cut(300, seed=5, pinwheel=0.5, return_plan=True)
    lower = known.copy()
    lower[np.argmin(p.sizes)] = dsa.load(p)
    monkeypatch.setattr(best_module, "LAYERS_PARTIAL", True)
    monkeypatch.setattr(layers, "plan", lambda *a, **k: lower.copy())
    monkeypatch.setattr(_skyline, "bound_look", lambda *a, **k: None)
    s = dsa.solve(p, strategy="exact", time_limit=4, seed=0)
    assert s.success and s.stats["layer_partial_peak"] == plan_peak(p, lower) >= s.peak


def _failing_first_leaf(monkeypatch):
    """The largest leaf's look fails and its fallback stacks its buffers (far above its band)."""
    real, calls = _skyline.bound_look, []

    def look(sub, offsets, high, deadline, seed=None, **kw):
        calls.append(len(sub))
        return None if len(calls) == 1 else real(sub, offsets, high, deadline, seed=seed, **kw)

    monkeypatch.setattr(_skyline, "bound_look", look)
    monkeypatch.setattr(layers, "_fallback", lambda leaf, seconds, seed=None: np.cumsum(leaf.sizes) - leaf.sizes)
    return calls


def test_failed_leaves_are_searched_apart_until_the_callers_deadline(monkeypatch):
    p = _stacked_cuts(40, 30, 8, cells_per_buffer=256)
    cap = dsa.load(p)
    start = np.cumsum(p.sizes) - p.sizes
    calls = _failing_first_leaf(monkeypatch)
    monkeypatch.setattr(layers, "REPAIR_MAX_SHARE", 1.0)
    stats = {}
    unrepaired = layers.plan(p, start, cap, time.perf_counter() + 10, stats=stats, partial=True)
    assert "layer_repaired" not in stats          # (no deadline of the caller: no search)
    calls.clear()
    stats = {}
    out = layers.plan(p, start, cap, time.perf_counter() + 10, stats=stats, partial=True,
                      repair_until=time.perf_counter() + 20)
    assert stats["layer_failed"] == 1 and stats["layer_repaired"] == 1 and stats["layer_repair_s"] > 0
    dsa.validate(p, out)
    assert plan_peak(p, out) < plan_peak(p, unrepaired)


def test_no_leaf_is_searched_apart_where_the_failed_ones_are_most_of_the_cut(monkeypatch):
    p = _stacked_cuts(40, 30, 8, cells_per_buffer=256)
    start = np.cumsum(p.sizes) - p.sizes
    _failing_first_leaf(monkeypatch)
    monkeypatch.setattr(layers, "REPAIR_MAX_SHARE", 0.0)
    stats = {}
    out = layers.plan(p, start, dsa.load(p), time.perf_counter() + 10, stats=stats, partial=True,
                      repair_until=time.perf_counter() + 20)
    assert stats["layer_failed"] == 1 and "layer_repaired" not in stats
    dsa.validate(p, out)


def test_repair_keeps_a_plan_its_search_does_not_lower(monkeypatch):
    p = _stacked_cuts(40, 30, 8, cells_per_buffer=256)
    leaves = layers.split(p, np.arange(len(p)), dsa.load(p), time.perf_counter() + 10,
                          np.random.default_rng(0))
    leaf = max(leaves, key=lambda lf: len(lf.sizes))
    plan0 = np.cumsum(leaf.sizes) - leaf.sizes
    extra0 = int((plan0 + leaf.sizes).max()) - leaf.height
    monkeypatch.setattr(best_module, "improve_plan", lambda sub, offsets, *a, **k: (offsets + 1000, {}))
    monkeypatch.setattr(layers, "REPAIR_EXACT_ROWS", 0)         # (improve_plan for every leaf)
    plans, excess, stats = [plan0], [extra0], {}
    layers._repair([leaf], plans, excess, time.perf_counter() + 5, 0, stats)
    assert plans[0] is plan0 and excess == [extra0] and stats["layer_repaired"] == 0


def test_fallback_plans_a_leaf_only_with_time_for_it():
    p = _stacked_cuts(20, 15, 3, cells_per_buffer=64)
    leaves = layers.split(p, np.arange(len(p)), dsa.load(p), time.perf_counter() + 10,
                          np.random.default_rng(0))
    leaf = max(leaves, key=lambda lf: len(lf.sizes))
    assert layers._fallback(leaf, 0.001, seed=0) is None
    out = layers._fallback(leaf, 0.5, seed=0)
    dsa.validate(dsa.Problem(leaf.starts, leaf.ends, leaf.sizes), out)


def test_partial_plans_keep_blocks_too_large_for_the_look(monkeypatch):
    p = _stacked_cuts(60, 40, 2, cells_per_buffer=256)
    cap = dsa.load(p)
    start = np.cumsum(p.sizes) - p.sizes
    monkeypatch.setattr(layers, "LEAF_MAX_ROWS", 3)
    monkeypatch.setattr(layers, "REPAIR_MAX_SHARE", 1.0)      # (any block may stay a leaf)
    sizes = []
    real = _skyline.bound_look

    def look(sub, *a, **k):
        sizes.append(len(sub))
        return real(sub, *a, **k)

    monkeypatch.setattr(_skyline, "bound_look", look)
    assert layers.plan(p, start, cap, time.perf_counter() + 10) is None          # (all or nothing)
    stats = {}
    out = layers.plan(p, start, cap, time.perf_counter() + 10, stats=stats, partial=True)
    assert stats["layer_rows"] > 3 and all(n <= 3 for n in sizes)   # (the large leaves had no look)
    dsa.validate(p, out)
    assert plan_peak(p, out) < plan_peak(p, start)


def test_a_leaf_is_its_merged_buffers_as_a_problem():
    # the leaves of a cut with layers and merges: each is its buffers as a problem with no capacity,
    # and a plan of it within the leaf's height expands to offsets of the leaf's rows in its band
    p = _stacked_cuts(40, 30, 3, pinwheel=0.4, cells_per_buffer=64)
    leaves = layers.split(p, np.arange(len(p)), dsa.load(p), time.perf_counter() + 30, np.random.default_rng(0))
    assert len(leaves) > 1 and any(len(leaf.sizes) < len(leaf.rows) for leaf in leaves)   # (cut, merged)
    planned = 0
    for leaf in leaves:
        q = leaf.problem()
        assert isinstance(q, dsa.Problem) and q.capacity is None and len(q) == len(leaf.sizes)
        assert all(np.array_equal(a, b) for a, b in ((q.starts, leaf.starts), (q.ends, leaf.ends),
                                                        (q.sizes, leaf.sizes)))
        sol = dsa.solve(q, "exact", time_limit=10)
        if sol.peak <= leaf.height:
            rows = leaf.rows < len(p)             # (rows past the problem's: rectangles' stand-ins)
            out = leaf.expand(sol.offsets)[rows]
            assert np.all(out >= leaf.base) and np.all(out + p.sizes[leaf.rows[rows]] <= leaf.base + leaf.height)
            planned += 1
    assert planned >= 1   # (exact plans these leaves within their heights: each is a layer of a tiling)


def test_small_failed_leaves_are_searched_by_exact(monkeypatch):
    from dsa.strategies import exact as exact_module

    # a leaf whose band cannot hold its buffers (4 bytes alive at instant 1, a band of 3): exact
    # proves its plan optimal, so the search ends there
    leaf = layers.Leaf(np.array([0, 1]), 0, 3, np.array([0, 1]), np.array([2, 3]), np.array([2, 2]),
                       np.array([0, 1]), np.zeros(2, dtype=np.int64))
    calls = []
    real = exact_module.solve

    def spy(sub, **kw):
        calls.append(real(sub, **kw))
        return calls[-1]

    monkeypatch.setattr(exact_module, "solve", spy)
    monkeypatch.setattr(best_module, "improve_plan", lambda *a, **k: pytest.fail("improve_plan ran"))
    plans, excess, stats = [np.array([0, 4])], [3], {}         # (peak 6: 3 above the band)
    layers._repair([leaf], plans, excess, time.perf_counter() + 30, 0, stats)
    assert len(calls) == 1 and calls[0].lower_bound == calls[0].peak == 4
    assert excess == [1] and stats["layer_repaired"] == 1
    dsa.validate(leaf.problem(), plans[0])


def test_partial_plans_end_where_a_block_too_large_for_the_look_is_most_of_the_period(monkeypatch):
    p = _stacked_cuts(60, 40, 2, cells_per_buffer=256)
    start = np.cumsum(p.sizes) - p.sizes
    monkeypatch.setattr(layers, "LEAF_MAX_ROWS", 3)
    monkeypatch.setattr(layers, "REPAIR_MAX_SHARE", 0.0)
    assert layers.plan(p, start, dsa.load(p), time.perf_counter() + 10, partial=True) is None


def test_atoms_of_an_instant():
    # two buffers end and two of the same sizes start: two atoms, and every union of them balances
    classes, exact = layers._atoms(np.array([3, 2, -3, -2]))
    assert sorted(classes) == [0b0101, 0b1010] and exact
    # three groups: no proper subset balances, so all three go together
    assert layers._atoms(np.array([5, -2, -3])) == ([0b111], True)
    # sizes that coincide: the sets that balance overlap, so each group is a class of its own
    classes, exact = layers._atoms(np.array([2, 2, -2, -2]))
    assert sorted(classes) == [1, 2, 4, 8] and not exact
    # ... but a pair that every balanced set holds both or neither of is still one class
    classes, exact = layers._atoms(np.array([3, -3, 2, 2, -2, -2]))
    assert sorted(classes) == [0b000011, 0b000100, 0b001000, 0b010000, 0b100000] and not exact
    # not an instant of a tiling (its bytes do not balance): nothing to say
    assert layers._atoms(np.array([3, -2])) is None


def _balanced_sets(starts, ends, sizes):
    """Every proper, non-empty subset (as a bool matrix, one row per subset) whose bytes alive are
    the same at every instant inside the block: by brute force, apart from the module."""
    n = len(sizes)
    t0, t1 = starts.min(), ends.max()
    times = np.unique(np.concatenate([starts, ends]))
    times = times[(times > t0) & (times < t1)]
    net = (sizes[None, :] * ((starts[None, :] == times[:, None]).astype(np.int64)
                             - (ends[None, :] == times[:, None]).astype(np.int64)))
    masks = np.arange(1, (1 << n) - 1)
    bits = ((masks[:, None] >> np.arange(n)) & 1).astype(np.int64)
    return bits[~np.any(bits @ net.T, axis=1)].astype(bool)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(3, 11), seed=st.integers(0, 10_000), pinwheel=st.sampled_from([0.0, 0.5, 1.0]),
       cells=st.sampled_from([2, 8, 64, 1024]), stacked=st.booleans(), pick=st.integers(0, 10_000))
def test_merged_groups_lose_no_layer(n, seed, pinwheel, cells, stacked, pick):
    # every set with a constant load (brute force) is a union of the groups that _groups merges, and
    # find_layer still returns a smallest one holding its seed (the oracle's size)
    if stacked:
        p = _stacked_cuts(max(2, n // 2), max(1, n - n // 2), seed, pinwheel=pinwheel, cells_per_buffer=cells)
    else:
        p = rectangle_cut(n, seed=seed, pinwheel=pinwheel, cells_per_buffer=cells)
    # (find_layer's block is one busy period: the one holding the seed)
    spans = layers._spans(np.asarray(p.starts), np.asarray(p.ends))
    block = next(span for span in spans if pick % len(p) in span)
    starts, ends, sizes = (np.asarray(a)[block] for a in (p.starts, p.ends, p.sizes))
    seed_row = int(np.flatnonzero(block == pick % len(p))[0])
    rows, cols, vals, instants = layers._equations(starts, ends, sizes)
    group, balance = layers._groups(rows, cols, vals, instants, len(sizes))
    assert balance.shape[1] == group.max() + 1
    oracle = _balanced_sets(starts, ends, sizes)
    whole = np.bincount(group)
    for chosen in oracle:
        taken = np.bincount(group, weights=chosen, minlength=len(whole))
        assert np.all((taken == 0) | (taken == whole))      # (each group wholly in or wholly out)
    holding = oracle[oracle[:, seed_row]]
    layer = layers.find_layer(starts, ends, sizes, seed_row, 5.0)
    if len(holding) == 0:
        assert layer is None
    else:
        assert layer is not None and layer[seed_row] and layer.sum() == holding.sum(axis=1).min()


def test_merged_groups_shrink_a_fine_cuts_program():
    # two fine cuts stacked (a layer exists): most buffers merge, few equations are left (measured:
    # 1,000 buffers in 6 groups, 428 equations all dropped), and the smallest layer is still found
    p = _stacked_cuts(600, 400, 7, cells_per_buffer=1024)
    starts, ends, sizes = np.asarray(p.starts), np.asarray(p.ends), np.asarray(p.sizes)
    rows, cols, vals, instants = layers._equations(starts, ends, sizes)
    group, balance = layers._groups(rows, cols, vals, instants, len(sizes))
    assert 2 <= group.max() + 1 <= len(sizes) // 10 and balance.shape[0] <= instants // 10
    layer = layers.find_layer(starts, ends, sizes, 0, 5.0)
    assert layer is not None and layer.sum() <= 600


def test_split_traces_each_layer_it_takes(monkeypatch):
    monkeypatch.setattr(layers, "CONTRACT", False)   # (merged, the two bands need no layer)
    starts, ends, sizes = _two_bands()
    p = dsa.Problem(starts, ends, sizes)
    rows = np.array([0, 1, 2, 3])
    seen = []
    leaves = layers.split(p, rows, 7, time.perf_counter() + 30, np.random.default_rng(0),
                          trace=lambda *cut: seen.append(cut))
    assert leaves is not None and seen
    kind, block, part, height, low = seen[0]
    assert kind == "layer" and sorted(block.tolist()) == [0, 1, 2, 3] and height == 7
    assert set(part.tolist()) in ({0, 1}, {2, 3}) and low == int(sizes[part[starts[part] == 0]].sum())
    # the same leaves with and without a trace
    again = layers.split(p, rows, 7, time.perf_counter() + 30, np.random.default_rng(0))
    assert [leaf.rows.tolist() for leaf in again] == [leaf.rows.tolist() for leaf in leaves]


def test_rectangles_count_as_the_rows_they_hold():
    p = rectangle_cut(12, seed=4, pinwheel=0.0)
    buffers = layers._Buffers(p, np.arange(len(p)))
    k, virtual = buffers.rectangle(0, 1, 64, np.array([2, 5]))
    assert virtual == len(p) and buffers.real_rows([k]).tolist() == [2, 5]
    # a rectangle that holds another, and a merged buffer that holds a rectangle's stand-in, expand
    # all the way down to the problem's rows
    k2, _ = buffers.rectangle(0, 1, 64, np.array([k, 7]))
    assert sorted(buffers.real_rows([k2, 1]).tolist()) == [1, 2, 5, 7]
    merged = buffers.add(0, 1, 128, np.array([virtual, 3]), np.array([0, 64]))
    assert sorted(buffers.real_rows([merged]).tolist()) == [2, 3, 5]
