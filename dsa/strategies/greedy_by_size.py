"""Greedy by size (Pisarchyk & Lee, MLSys 2020 workshop, arXiv:2001.03288).

Buffers in decreasing size (ties: longer lifetime first, then earlier start, then row index), each
placed at the best-fit gap among the placed buffers whose lifetimes intersect its own. This is the
offset-calculation variant of the paper's "Greedy by Size" that TFLite's GPU delegate uses.

Complexity: O(n log n + E + sum_i k_i log k_i); see :mod:`dsa.strategies.greedy`.
"""
from dsa.strategies.greedy import greedy_offsets
from dsa.strategies._orders import by_size
from dsa.solution import make_solution

__all__ = ["solve"]


def solve(problem, *, fit: str = "best", sweep=None):
    """Plan by decreasing size with ``fit`` placement (``"best"`` or ``"first"``)."""
    return make_solution(problem, greedy_offsets(problem, by_size(problem), fit, sweep=sweep), strategy="greedy_by_size")
