"""Fastest first: the baseline planner over memory pools (TVM's USMP, ExecuTorch's banked greedy).

Over pools (``dsa.solve(problem, "fastest_first", pools=[...])``): rows are taken largest first
(ties: longer lifetime, earlier start, row index) and each goes into the cheapest pool it may use
where it fits next to the rows already there, in the smallest gap that fits (best fit); when it fits
in none, the plan fails (status NO_FIT), as "increase the size hints" does in TVM. This is the
greedy of the Unified Static Memory Planner (TVM RFC 0009, "Unified Static Memory Planning", 2021:
candidate pools per buffer, each with a size hint, first pool where the buffer fits) and of
ExecuTorch's banked greedy; dsa keeps it as the baseline that ``best`` and ``exact`` are measured
against. See :func:`dsa.strategies._pools.fastest_first`.

On one slab it is greedy by size with best fit (Pisarchyk & Lee, MLSys 2020 workshop,
arXiv:2001.03288), the same rule on a single pool.

Complexity: O(n log n + E + sum_i k_i log k_i) on one slab; over pools, O(n) per placement (the
rows of the pool that meet the buffer in time are found by a scan).
"""
from dsa.placement import greedy_offsets
from dsa.solution import make_solution
from dsa.strategies._orders import by_size

__all__ = ["solve"]


def solve(problem, *, sweep=None):
    """Plan one slab by decreasing size, best fit (what fastest first does on a single pool)."""
    offsets = greedy_offsets(problem, by_size(problem), "best", sweep=sweep)
    return make_solution(problem, offsets, strategy="fastest_first")
