"""Best of a portfolio of greedy plans: every ordering x every placement rule, keep the lowest peak.

XLA's heap simulator plans each buffer set with several orderings and keeps the smallest heap; the
same idea here runs the greedy engine of :mod:`dsa.strategies.greedy` (Pisarchyk & Lee, "Efficient
Memory Management for Deep Neural Net Inference", MLSys 2020 workshop, arXiv:2001.03288) with the
orderings size, duration, area, start, conflict and breadth, each with best fit and first fit, plus
``restarts`` random orderings. It stops early when a plan reaches the lower bound (LOAD), which
proves it optimal.

Greedy by size alone misses LOAD on traces where two large buffers that never meet are stacked at
the same offset and block a later pair (see the tests); another ordering often avoids that.

Complexity: (12 + restarts) greedy runs, each O(n log n + E + sum_i k_i log k_i).
"""
from __future__ import annotations

import numpy as np

from dsa.bounds import lower_bound
from dsa.solution import make_solution
from dsa.strategies._orders import ORDERINGS, order_rows
from dsa.strategies.greedy import FITS, greedy_offsets
from dsa.sweep import Sweep

__all__ = ["solve", "MEMBERS"]

# greedy_by_size first: on ties the portfolio returns the classic plan
MEMBERS = tuple((order, fit) for order in ("size", *sorted(set(ORDERINGS) - {"size"})) for fit in FITS)


def solve(problem, *, restarts: int = 0, seed=None, sweep=None):
    """Plan with every greedy member (and ``restarts`` random orders) and keep the lowest peak.

    Parameters
    ----------
    problem : Problem
    restarts : int
        Random orderings tried after the fixed members (best fit), seeded from ``seed``.
    seed : int, optional
        Seed of the random orderings.

    Returns
    -------
    Solution
        ``stats["member"]`` names the winning ``order/fit``; ``stats["peaks"]`` maps every member
        that ran to its peak.
    """
    if not isinstance(restarts, (int, np.integer)) or isinstance(restarts, bool) or restarts < 0:
        raise ValueError(f"restarts must be a non-negative int, got {restarts!r}")
    sweep = sweep or Sweep(problem)
    bound = lower_bound(problem, sweep=sweep)
    rng = np.random.default_rng(seed)
    members = list(MEMBERS) + [("random", "best")] * int(restarts)
    best, best_peak, peaks = None, None, {}
    for k, (order, fit) in enumerate(members):
        rows = order_rows(problem, order, rng.integers(2**63) if order == "random" else None)
        offsets = greedy_offsets(problem, rows, fit, sweep=sweep)
        peak = int((offsets + problem.sizes).max()) if len(problem) else 0
        name = f"{order}/{fit}" if order != "random" else f"random{k - len(MEMBERS)}/{fit}"
        peaks[name] = peak
        if best_peak is None or peak < best_peak:
            best, best_peak, winner = offsets, peak, name
        if best_peak <= bound:
            break
    return make_solution(problem, best, strategy="best", stats={"member": winner, "peaks": peaks})
