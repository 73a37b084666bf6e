"""Greedy by size (Pisarchyk & Lee, MLSys 2020 workshop, arXiv:2001.03288).

Buffers in decreasing size (ties: longer lifetime first, then earlier start, then row index), each
placed among the placed buffers whose lifetimes intersect its own.

Placement. The paper's offset calculation, and TFLite's GPU delegate that implements it, take the
*smallest* gap that fits (``fit="best"``). This preset takes the *lowest* gap that fits
(``fit="first"``, as omnimalloc's greedy by size does) because it measured better: on MiniMalloc's 11
challenging instances, the 6 bundled DNN traces and 10 generated traces of 1k-100k buffers, first fit
gave the lower peak on 7, best fit on 2, and they tied on 18 (on a 100k-buffer generated DNN trace:
1.0437 vs 1.0755 x LOAD). ``fit="best"`` reproduces the paper.

Complexity: O(n log n + E + sum_i k_i log k_i); see :mod:`dsa.strategies.greedy`.
"""
from dsa.strategies.greedy import greedy_offsets
from dsa.strategies._orders import by_size
from dsa.solution import make_solution

__all__ = ["solve"]


def solve(problem, *, fit: str = "first", sweep=None):
    """Plan by decreasing size with ``fit`` placement: ``"first"`` (lowest gap, the default) or
    ``"best"`` (smallest gap, as in the paper)."""
    offsets = greedy_offsets(problem, by_size(problem), fit, sweep=sweep)
    return make_solution(problem, offsets, strategy="greedy_by_size", stats={"fit": fit})
