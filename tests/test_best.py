"""The portfolio strategy ``best``: never worse than any of its members, and it stops at LOAD."""
from __future__ import annotations

import pytest
from hypothesis import given

import dsa
from conftest import problems
from dsa.strategies.best import MEMBERS

# Shape of a real trace (a small CNN with two outputs): greedy by size stacks the two large
# buffers that never meet at offset 0 and then cannot fit the 64 KiB pair below them.
TRAP = dsa.Problem(starts=[0, 1, 2, 5, 7, 9, 10, 11, 18, 19],
                   ends=[4, 3, 6, 8, 16, 13, 12, 15, 21, 20],
                   sizes=[192, 1728, 131072, 65536, 65536, 192, 4608, 131072, 8, 4])


def test_portfolio_reaches_load_where_greedy_by_size_does_not():
    gbs = dsa.solve(TRAP, "greedy_by_size")
    best = dsa.solve(TRAP, "best")
    assert gbs.peak > dsa.load(TRAP)
    assert best.peak == dsa.load(TRAP) and best.status is dsa.Status.OPTIMAL
    assert best.stats["member"] != "size/first"
    assert best.stats["peaks"]["size/first"] == gbs.peak


@given(problems())
def test_never_worse_than_any_member(problem):
    best = dsa.solve(problem, "best", restarts=2, seed=1)
    for order, fit in MEMBERS:
        assert best.peak <= dsa.solve(problem, "greedy", order=order, fit=fit).peak


def test_stops_early_at_the_lower_bound():
    easy = dsa.Problem([0, 1], [1, 2], [8, 8])
    sol = dsa.solve(easy, "best", restarts=5)
    assert list(sol.stats["peaks"]) == ["size/first"] and sol.peak == 8


def test_restarts_are_seeded():
    p = dsa.data.load("A.1048576")  # greedy never reaches LOAD here, so the random members run
    a = dsa.solve(p, "best", restarts=3, seed=7)
    b = dsa.solve(p, "best", restarts=3, seed=7)
    assert (a.offsets == b.offsets).all() and len(a.stats["peaks"]) == len(MEMBERS) + 3


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_bad_restarts(bad):
    with pytest.raises(ValueError, match="restarts must be a non-negative int"):
        dsa.solve(TRAP, "best", restarts=bad)
