"""benchmarks/layer_truth.py: the layers' leaves checked against the generator's plan."""
from __future__ import annotations

import numpy as np
import pytest

import dsa
from dsa.generate import rectangle_cut

from conftest import load_benchmark


@pytest.fixture(scope="module")
def lt():
    return load_benchmark("layer_truth")


def test_names_parse_and_bad_ones_are_refused(lt):
    assert lt.parse("long-tall-2000-s0") == ("long-tall", 2000, 0)
    with pytest.raises(ValueError, match="FAMILY-N-sSEED"):
        lt.parse("guillotine-700")


def test_full_lines_and_bands_on_a_hand_made_plan(lt):
    # a: [0, 2) at 0; b: [0, 1) and c: [1, 2) stacked on it at 1, d: [0, 2) at 2 (sizes 1, 1, 1, 2)
    p = dsa.Problem([0, 0, 1, 0], [2, 1, 2, 2], [1, 1, 1, 2])
    offsets = np.array([0, 1, 1, 2])
    assert lt.full_lines(p, offsets, np.arange(4)) == [1, 2]
    # another plan of the same buffers: b and c at 0, d over them, a on top; d straddles level 2
    other = np.array([3, 0, 0, 1])
    dsa.validate(p, other)
    assert lt.full_lines(p, other, np.arange(4)) == [1, 3]
    assert lt.is_band(p, offsets, np.array([0, 1]), 2) and not lt.is_band(p, other, np.array([0, 1]), 2)


def test_leaves_of_a_cut_are_checked_against_the_generators_plan(lt):
    p, offsets = rectangle_cut(120, seed=1, pinwheel=0.0, return_plan=True)
    found = lt.truth(p, offsets, 10.0)
    assert found["planned"]                       # (a small guillotine cut: the layers plan it)
    assert sum(period["rows"] for period in found["periods"]) == len(p)
    for period in found["periods"]:
        assert all(0 < y < dsa.load(p) for y in period["lines"])
    leaves = found["leaves"]
    assert leaves and [leaf["merged"] for leaf in leaves] == sorted((leaf["merged"] for leaf in leaves), reverse=True)
    # every row of the problem lies in exactly one leaf (no rectangle is cut on so small a problem)
    assert all(leaf["band"] is not None for leaf in leaves) and sum(leaf["rows"] for leaf in leaves) == len(p)
    # a leaf of one buffer is a band of its own size; merged bands never exceed the merged buffers
    assert all(leaf["band"] for leaf in leaves if leaf["rows"] == 1)
    assert all(0 <= leaf["merged_bands"] <= leaf["merged"] for leaf in leaves)
    assert not found["whole"]
    text = lt.report("guillotine-120-s1", p, found)
    assert "layers' plan at LOAD: yes" in text and text.count("\n| ") >= len(found["periods"]) + 2
    assert "stayed whole" not in text
    text = lt.report("guillotine-120-s1", p, {**found, "planned": False, "leaves": [], "whole": True})
    assert "layers' plan at LOAD: no" in text and "stayed whole" in text


def test_a_plan_above_load_is_refused(lt):
    p, offsets = rectangle_cut(50, seed=2, return_plan=True)
    with pytest.raises(ValueError, match="at LOAD"):
        lt.truth(p, offsets + 64, 1.0)


def _stack():
    """A block [0, 4) x 4 bytes: a band of 2 bytes cut at instant 2 (a, b), and two buffers of 1 byte
    spanning the block above it (c at 2, d at 3)."""
    p = dsa.Problem([0, 2, 0, 0], [2, 4, 4, 4], [2, 2, 1, 1])
    return p, np.array([0, 0, 2, 3])


def test_valid_layers_are_the_bands_of_the_plan_in_any_order(lt):
    p, offsets = _stack()
    dsa.validate(p, offsets)
    block = np.arange(4)
    for part in ([0, 1], [2], [3], [2, 3], [0, 1, 3]):
        assert lt.valid_layer(p, offsets, block, part), part
    # a set whose load changes over time is no layer; nor is a piece of an interlocking block
    assert not lt.valid_layer(p, offsets, block, [0])
    assert not lt.valid_layer(p, offsets, block, [1, 2])
    pinwheel, known = rectangle_cut(5, seed=0, pinwheel=1.0, return_plan=True)
    assert not lt.valid_layer(pinwheel, known, np.arange(5), [0])
    assert lt.valid_layer(pinwheel, known, np.arange(5), np.arange(5))


def test_valid_layer_is_only_sufficient(lt):
    # two chains of 1 byte over [0, 4) (g, h at 0; i, j at 1) under a buffer k spanning the block: {g, j}
    # is a layer of another tiling (h and j swapped), which no reordering of the plan's bands gives
    p = dsa.Problem([0, 2, 0, 2, 0], [2, 4, 2, 4, 4], [1, 1, 1, 1, 1])
    offsets = np.array([0, 0, 1, 1, 2])
    swapped = np.array([0, 1, 1, 0, 2])
    dsa.validate(p, offsets)
    dsa.validate(p, swapped)
    assert (swapped[[0, 3]] == 0).all()           # ({g, j} at the bottom of a valid plan)
    assert not lt.valid_layer(p, offsets, np.arange(5), [0, 3])
    assert lt.valid_layer(p, swapped, np.arange(5), [0, 3])
    # without k the block is cut at instant 2 and the swap is a reordering of each side's bands
    q = dsa.Problem(p.starts[:4], p.ends[:4], p.sizes[:4])
    assert lt.valid_layer(q, offsets[:4], np.arange(4), [0, 3])


def test_valid_layer_needs_a_block_that_fills_a_rectangle(lt):
    p, offsets = _stack()
    assert lt.fills_rectangle(p, offsets, np.arange(4)) and lt.fills_rectangle(p, offsets, [0, 1])
    assert not lt.fills_rectangle(p, offsets, [0, 2])     # (a hole over [2, 4) x [0, 2))
    with pytest.raises(ValueError, match="rectangle"):
        lt.valid_layer(p, offsets, [0, 2], [2])


def test_cuts_are_traced_and_judged(lt):
    p, offsets = rectangle_cut(300, seed=5, pinwheel=0.0, return_plan=True)
    found = lt.truth(p, offsets, 10.0)
    cuts = found["cuts"]
    assert cuts and found["stats"].get("layers", 0) + found["stats"].get("rectangles", 0) == len(cuts)
    for cut in cuts:
        assert cut["kind"] in ("layer", "rectangle") and 0 < cut["part_rows"] < cut["rows"]
        assert 0 < cut["part_height"] < cut["height"] or cut["kind"] == "rectangle"
        assert cut["valid"] is None or (cut["block_band"] and cut["kind"] == "layer")
    # the first cut is a layer of a whole busy period, which the generator's plan fills: it is judged
    assert cuts[0]["kind"] == "layer" and cuts[0]["block_band"] and cuts[0]["valid"] is not None
    judged = [cut for cut in cuts if cut["valid"] is not None]
    text = lt.report("guillotine-300-s5", p, found)
    wrong = sum(not cut["valid"] for cut in judged)
    assert f"rectangle of the generator's plan: {len(judged)}; no reordering of the plan's bands puts {wrong} of" in text
    assert "reordered bands allow it" in text
    assert "reordered bands" not in lt.report("guillotine-300-s5", p, {**found, "cuts": []})


def test_missed_rectangles_are_the_nodes_of_the_cut_inside_a_block(lt):
    from dsa.strategies._layers import Leaf

    p, offsets, (nodes, parent) = rectangle_cut(200, seed=3, pinwheel=0.5, return_plan=True, return_tree=True)
    n = len(p)
    rows = np.arange(n)
    leaf = Leaf(rows, 0, dsa.load(p), p.starts, p.ends, p.sizes, rows, np.zeros(n, dtype=np.int64))
    found = lt.missed_rectangles(p, offsets, nodes, leaf, lambda j: np.array([j]))
    # every node but the root is filled by the buffers cut from it: those of two or more count
    below = np.zeros(len(nodes), dtype=np.int64)
    for r in range(n):
        k = parent[r]
        while k >= 0:
            below[k] += 1
            k = nodes[k, 4]
    expected = sorted(int(c) for c in below[1:] if c >= 2)
    assert found["buffers"] == found["consistent"] == n
    assert found["rectangles"] == len(expected) and found["sizes"] == expected
    t1 = int(p.ends.max())
    assert found["interior"] == sum(1 for k in range(1, len(nodes)) if below[k] >= 2 and 0 < nodes[k, 0]
                                    and nodes[k, 1] < t1)
    assert 0 <= found["reached"] <= found["rectangles"]
    # a buffer placed elsewhere than its rows (here: a wrong size) is not counted as placed
    other = leaf._replace(sizes=p.sizes + 64)
    assert lt.missed_rectangles(p, offsets, nodes, other, lambda j: np.array([j]))["consistent"] == 0


def test_blocks_with_no_rectangle_are_reported(lt):
    p, offsets, (nodes, _) = rectangle_cut(120, seed=1, pinwheel=0.0, return_plan=True, return_tree=True)
    found = lt.truth(p, offsets, 10.0, nodes=nodes)
    assert found["missed"] == []                 # (blocks this small are never searched for one)
    block = {"buffers": 400, "consistent": 398, "rectangles": 30, "reached": 2, "interior": 25,
             "sizes": list(range(2, 32))}
    text = lt.report("guillotine-120-s1", p, {**found, "missed": [block]})
    assert "| 400 | 398 | 30 | 2 | 25 | 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, ... |" in text
    assert "found none" not in lt.report("guillotine-120-s1", p, found)
