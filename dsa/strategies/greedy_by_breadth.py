"""Greedy by breadth (Pisarchyk & Lee, MLSys 2020 workshop, arXiv:2001.03288), offsets variant.

Time sections are visited by decreasing breadth (bytes alive in the section); inside a section its
buffers that are not placed yet are taken by decreasing size and put at the best-fit gap among the
placed buffers whose lifetimes intersect theirs. The paper assigns shared objects; like its offset
calculation, we place each buffer with the gap search instead.

Complexity: O(n log n + E + sum_i k_i log k_i); see :mod:`dsa.strategies.greedy`.
"""
from dsa.strategies.greedy import greedy_offsets
from dsa.strategies._orders import by_breadth
from dsa.solution import make_solution

__all__ = ["solve"]


def solve(problem, *, fit: str = "best", sweep=None):
    """Plan in greedy-by-breadth order with ``fit`` placement (``"best"`` or ``"first"``)."""
    return make_solution(problem, greedy_offsets(problem, by_breadth(problem), fit, sweep=sweep),
                         strategy="greedy_by_breadth")
