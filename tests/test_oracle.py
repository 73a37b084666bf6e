"""Oracle tests: every strategy against the exact optimum of tiny instances (tests/naive.py)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings

import dsa
from conftest import fields, problems, raw_problems
from naive import brute_force_optimum, exhaustive_optimum, naive_load, naive_validate

STRATEGIES = dsa.available_strategies()


def optimum(problem) -> int:
    f = fields(problem)
    return brute_force_optimum(f["starts"], f["ends"], f["sizes"], f["alignments"], f["fixed"])


# ---------------------------------------------------------------- the oracle itself
@given(raw=raw_problems(max_n=3, max_time=6, max_size=4, fixed=False))
@settings(max_examples=60)
def test_brute_force_matches_exhaustive_search(raw):
    """brute_force_optimum (orders x lowest fit) equals a search over every offset vector."""
    args = (raw["starts"], raw["ends"], raw["sizes"], raw["alignments"])
    assert brute_force_optimum(*args) == exhaustive_optimum(*args)


@pytest.mark.parametrize("case, expected", [
    ([], 0),
    ([(0, 1, 5)], 5),
    ([(0, 4, 3), (0, 4, 4), (0, 4, 5)], 12),            # all alive together: stacked
    ([(0, 1, 3), (1, 2, 7), (2, 3, 5)], 7),             # one after another: the largest
    # the 4 lives through [1,3) and meets both 3s: 4 at 0, both 3s (never alive together) at 4
    ([(0, 2, 3), (2, 4, 3), (1, 3, 4)], 7),
])
def test_brute_force_named(case, expected):
    s, e, z = zip(*case) if case else ((), (), ())
    assert brute_force_optimum(s, e, z) == expected


def test_brute_force_alignment_and_fixed():
    # two 3-byte buffers alive together, both 4-aligned: offsets 0 and 4, so the peak is 7 > LOAD 6
    assert brute_force_optimum([0, 0], [1, 1], [3, 3], [4, 4]) == 7
    assert brute_force_optimum([0, 0], [1, 1], [3, 3], [1, 4]) == 6     # 4-aligned at 0, other at 3
    # a pinned buffer at [10, 12) leaves room below it: the free 3-byte buffer goes to 0
    assert brute_force_optimum([0, 0], [1, 1], [2, 3], fixed=[10, -1]) == 12
    # pinned at [1, 3): a free 2-byte buffer cannot fit below (only 1 byte), so it goes to 3
    assert brute_force_optimum([0, 0], [1, 1], [2, 2], fixed=[1, -1]) == 5
    assert brute_force_optimum([0, 0], [1, 1], [2, 1], fixed=[1, -1]) == 3


# ---------------------------------------------------------------- lower bounds against the oracle
@given(problem=problems(max_n=7))
@settings(max_examples=150)
def test_lower_bound_never_exceeds_the_optimum(problem):
    """LOAD strengthened by alignment (and the fixed buffers) is a true lower bound."""
    bound = dsa.lower_bound(problem)
    assert dsa.bounds.load(problem) <= dsa.bounds.aligned_load(problem) <= bound <= optimum(problem)


@pytest.mark.parametrize("case, alignments, expected", [
    ([(0, 2, 4), (0, 2, 8)], 64, 68),                        # the smaller buffer on top: 64 + 4
    ([(0, 2, 64), (0, 2, 64)], 64, 128),                     # no padding: LOAD
    ([(0, 2, 5), (0, 2, 5), (0, 2, 5)], 4, 8 + 8 + 5),       # two padded to 8, one on top
    ([(0, 2, 5), (2, 4, 5)], 4, 5),                          # never alive together: LOAD
    ([(0, 2, 3), (0, 2, 3)], [4, 6], 4 + 3),                 # gcd 2: one padded to 4, one on top
])
def test_aligned_load_named(case, alignments, expected):
    s, e, z = zip(*case)
    problem = dsa.Problem(s, e, z, alignments=alignments)
    assert dsa.bounds.aligned_load(problem) == expected
    f = fields(problem)
    assert expected <= brute_force_optimum(f["starts"], f["ends"], f["sizes"], f["alignments"])


# ---------------------------------------------------------------- strategies against the oracle
@pytest.mark.parametrize("strategy", STRATEGIES)
@given(problem=problems(max_n=7))
@settings(max_examples=40)
def test_peak_at_least_optimum(strategy, problem):
    sol = dsa.solve(problem, strategy, seed=0)
    assert sol.success, sol.message
    f = fields(problem)
    assert naive_validate(**f, offsets=sol.offsets.tolist()) == []
    opt = optimum(problem)
    assert naive_load(f["starts"], f["ends"], f["sizes"]) <= opt <= sol.peak
    if sol.status is dsa.Status.OPTIMAL:
        assert sol.peak == opt


NAMED = {
    # identical lifetimes: every plan stacks them, the best peak is the sum of sizes
    "identical": ([(0, 5, 7), (0, 5, 3), (0, 5, 9), (0, 5, 1)], 20),
    # disjoint lifetimes (touching ends included): all can sit at offset 0
    "disjoint": ([(0, 2, 4), (2, 3, 9), (3, 7, 2), (8, 9, 6)], 9),
    # nested lifetimes: a long buffer under short ones that follow each other
    "nested": ([(0, 10, 5), (0, 3, 4), (3, 6, 6), (6, 10, 2)], 11),
    # a staircase of equal sizes, each overlapping the next only: two columns suffice
    "chain": ([(0, 2, 4), (1, 3, 4), (2, 4, 4), (3, 5, 4), (4, 6, 4)], 8),
}


@pytest.mark.parametrize("name", sorted(NAMED))
def test_named_optimum(name):
    case, expected = NAMED[name]
    s, e, z = zip(*case)
    assert brute_force_optimum(s, e, z) == expected
    for strategy in STRATEGIES:
        sol = dsa.solve(case, strategy)
        assert sol.success and expected <= sol.peak, strategy


@pytest.mark.parametrize("name", sorted(NAMED))
@pytest.mark.parametrize("strategy", ["greedy_by_size", "greedy_by_breadth", "greedy"])
def test_greedy_reaches_optimum_on_easy_cases(name, strategy):
    """In each named case the optimum equals LOAD and a best-fit greedy finds it."""
    case, expected = NAMED[name]
    sol = dsa.solve(case, strategy)
    assert sol.peak == expected
    assert sol.lower_bound == expected and sol.status is dsa.Status.OPTIMAL


def test_greedy_by_size_on_identical_lifetimes_stacks_by_size():
    # size descending from offset 0: 9 at 0, 7 at 9, 3 at 16, 1 at 19
    sol = dsa.solve(NAMED["identical"][0], "greedy_by_size")
    assert sol.offsets.tolist() == [9, 16, 0, 19]


def test_bump_on_named_cases():
    # bump stacks every busy period: identical lifetimes -> sum; disjoint lifetimes -> largest size
    assert dsa.solve(NAMED["identical"][0], "bump").peak == 20
    assert dsa.solve(NAMED["disjoint"][0], "bump").peak == 9
    assert dsa.solve(NAMED["disjoint"][0], "bump").offsets.tolist() == [0, 0, 0, 0]
    # one busy period [0, 10): the bump pointer never comes down, 5 + 4 + 6 + 2
    assert dsa.solve(NAMED["nested"][0], "bump").peak == 17
