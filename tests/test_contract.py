"""Contraction of tilings (dsa.strategies._contract): forced chains and stacks, pinwheels, merged
buffers that are their members' union, forced merges true to every plan at the bound, and the
layers' planner using them."""
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsa
from dsa.generate import rectangle_cut
from dsa.strategies import _layers as layers
from dsa.strategies._contract import contract

# a pinwheel in [0, 3) x [0, 3): (start, end, low, high) of four rectangles wound around a centre one
PINWHEEL = np.array([(0, 2, 0, 1), (2, 3, 0, 2), (1, 3, 2, 3), (0, 1, 1, 3), (1, 2, 1, 2)])


def _arrays(rects):
    rects = np.asarray(rects)
    return rects[:, 0], rects[:, 1], rects[:, 3] - rects[:, 2]


def test_a_chain_is_merged_where_one_buffer_ends_and_one_starts():
    # a then b over [0, 10) x [0, 3), c above them over the whole span
    starts, ends, sizes = np.array([0, 5, 0]), np.array([5, 10, 10]), np.array([3, 3, 2])
    c = contract(starts, ends, sizes)
    assert len(c) == 2 and c.merges == {"chain": 1}
    assert sorted(zip(c.starts.tolist(), c.ends.tolist(), c.sizes.tolist())) == [(0, 10, 2), (0, 10, 3)]
    assert c.node[0] == c.node[1] != c.node[2] and c.rel.tolist() == [0, 0, 0]


def test_a_stack_is_merged_where_one_buffer_ends_and_those_starting_end_together():
    # w over [0, 4) frees 5 bytes that x and y, both over [4, 8), take: x and y stack, then chain
    starts, ends, sizes = np.array([0, 4, 4]), np.array([4, 8, 8]), np.array([5, 2, 3])
    c = contract(starts, ends, sizes)
    assert len(c) == 1 and c.merges == {"stack": 1, "chain": 1}
    assert (c.starts[0], c.ends[0], c.sizes[0]) == (0, 8, 5)
    assert sorted(c.rel[1:].tolist()) == [0, 2] and c.rel[0] == 0
    # the same with time reversed
    c = contract(8 - ends, 8 - starts, sizes)
    assert len(c) == 1 and c.merges == {"stack": 1, "chain": 1}


def test_no_merge_where_the_bytes_freed_could_go_either_way():
    # at 5, two buffers end (2 and 3 bytes) and two start (2 and 3): a chain of the 2-byte ones is
    # one tiling, the 3-byte one below the 2-byte one on the right another
    starts, ends, sizes = np.array([0, 0, 5, 5]), np.array([5, 5, 9, 9]), np.array([2, 3, 2, 3])
    c = contract(starts, ends, sizes, pinwheels=False)
    assert len(c) == 4 and c.merges == {}


@pytest.mark.parametrize("mirror", [False, True])
def test_a_pinwheel_is_merged_into_its_rectangle(mirror):
    rects = PINWHEEL.copy()
    if mirror:                          # wound the other way: bytes upside down
        rects[:, 2], rects[:, 3] = 3 - PINWHEEL[:, 3], 3 - PINWHEEL[:, 2]
    starts, ends, sizes = _arrays(rects)
    c = contract(starts, ends, sizes)
    assert len(c) == 1 and c.merges == {"pinwheel": 1}
    assert (c.starts[0], c.ends[0], c.sizes[0]) == (0, 3, 3)
    p = dsa.Problem(starts, ends, sizes)
    offsets = c.expand([0])
    dsa.validate(p, offsets)
    assert int((offsets + sizes).max()) == 3
    assert len(contract(starts, ends, sizes, pinwheels=False)) == 5


def test_no_round_starts_after_the_deadline():
    starts, ends, sizes = np.array([0, 5, 0]), np.array([5, 10, 10]), np.array([3, 3, 2])
    c = contract(starts, ends, sizes, deadline=time.perf_counter() - 1)
    assert len(c) == 3 and c.merges == {}


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 120), seed=st.integers(0, 10_000), pinwheel=st.sampled_from([0.0, 0.5, 1.0]),
       cells=st.sampled_from([2, 16, 1024]), pinwheels=st.booleans())
def test_merged_buffers_are_the_union_of_their_members(n, seed, pinwheel, cells, pinwheels):
    p, known = rectangle_cut(n, seed=seed, pinwheel=pinwheel, cells_per_buffer=cells, alignment=1,
                             return_plan=True)
    c = contract(p.starts, p.ends, p.sizes, pinwheels=pinwheels)
    assert 1 <= len(c) <= len(p) and sorted(set(c.node.tolist())) == list(range(len(c)))
    # any plan of the merged buffers expands to a valid plan of the rows, as high: here, stacked
    stacked = np.cumsum(c.sizes) - c.sizes
    offsets = c.expand(stacked)
    dsa.validate(p, offsets)
    assert int((offsets + p.sizes).max()) == int(c.sizes.sum())
    for j in range(len(c)):
        rows = c.node == j
        assert p.starts[rows].min() == c.starts[j] and p.ends[rows].max() == c.ends[j]
        assert np.all((c.rel[rows] >= 0) & (c.rel[rows] + p.sizes[rows] <= c.sizes[j]))
    # the bytes alive at every instant are kept
    for t in np.unique(np.concatenate([p.starts, p.ends])):
        assert p.sizes[(p.starts <= t) & (p.ends > t)].sum() == c.sizes[(c.starts <= t) & (c.ends > t)].sum()
    if not pinwheels:
        # chains and stacks are forced: in the generator's plan at the bound (as in any), the members
        # of each merged buffer fill a band of its size
        for j in range(len(c)):
            rows = c.node == j
            assert int((known[rows] + p.sizes[rows]).max() - known[rows].min()) == c.sizes[j]


def test_layers_plan_a_tiling_at_the_bound_through_its_pinwheels():
    # a cut into pinwheels on a nearly continuous grid: pinwheels inside pinwheels, no layer at the top
    p = rectangle_cut(400, seed=3, pinwheel=0.8, cells_per_buffer=4096, alignment=1)
    cap = dsa.load(p)
    stats = {}
    out = layers.plan(p, np.cumsum(p.sizes) - p.sizes, cap, time.perf_counter() + 30, seed=0, stats=stats)
    assert out is not None
    dsa.validate(p, out)
    assert int((out + p.sizes).max()) == cap
    assert stats["merged_pinwheel"] >= 1 and stats["layer_rows"] < len(p)


def test_layers_do_without_merges_when_disabled(monkeypatch):
    monkeypatch.setattr(layers, "CONTRACT", False)
    p = rectangle_cut(400, seed=3, pinwheel=0.8, cells_per_buffer=4096, alignment=1)
    stats = {}
    layers.plan(p, np.cumsum(p.sizes) - p.sizes, dsa.load(p), time.perf_counter() + 2, seed=0, stats=stats)
    assert not any(key.startswith("merged_") for key in stats)
