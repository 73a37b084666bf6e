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
