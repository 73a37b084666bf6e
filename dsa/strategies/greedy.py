"""Greedy planning: an ordering of the buffers x a placement rule (best fit or first fit).

Buffers are taken one at a time in the chosen order. Each goes into a gap between the already-placed
buffers whose lifetimes intersect its own: the smallest gap that fits (best fit, ties to the lowest
offset) or the lowest one (first fit); when no gap fits, on top of the highest of them. Fixed buffers
are placed first, at their offsets. This engine is the offset-calculation scheme of

    Y. Pisarchyk and J. Lee, "Efficient Memory Management for Deep Neural Net Inference",
    MLSys 2020 workshop, arXiv:2001.03288,

generalised to any ordering, per-buffer alignment and fixed offsets (as XLA's heap simulator splits
"ordering x placement"). The named presets ``greedy_by_size`` and ``greedy_by_breadth`` are thin
wrappers.

Complexity: O(n log n + E + sum_i k_i log k_i) time, where E is the number of intersecting lifetime
pairs and k_i the placed neighbours of buffer i; O(n + E) memory.
"""
from __future__ import annotations

from dsa.placement import FITS, SMALL_N, greedy_offsets  # noqa: F401 (SMALL_N: importable here too)
from dsa.solution import make_solution
from dsa.strategies._orders import order_rows

# the placement rule itself (best fit / first fit, numba kernel or numpy loop) is dsa.placement's,
# shared with dsa.compact; these names stay importable from here
__all__ = ["solve", "greedy_offsets", "FITS"]


def solve(problem, *, order: str = "size", fit: str = "best", seed=None, sweep=None):
    """Plan with one ordering and one placement rule.

    Parameters
    ----------
    problem : Problem
    order : str
        ``"size"`` (size desc, then lifetime desc, then start), ``"duration"``, ``"area"``
        (size x lifetime), ``"start"``, ``"conflict"`` (bytes of intersecting buffers),
        ``"breadth"`` (Pisarchyk & Lee's greedy-by-breadth visiting order) or ``"random"`` (uses ``seed``).
    fit : {"best", "first"}
        Best fit takes the smallest gap that fits; first fit the lowest.
    seed : int, optional
        Only used by ``order="random"``.
    sweep : dsa.sweep.Sweep, optional
        The shared planning context (passed by :func:`dsa.solve`).

    Returns
    -------
    Solution
    """
    offsets = greedy_offsets(problem, order_rows(problem, order, seed), fit, sweep=sweep)
    return make_solution(problem, offsets, strategy="greedy", stats={"order": order, "fit": fit})
