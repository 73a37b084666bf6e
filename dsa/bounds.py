"""Lower bounds on the peak of any plan."""
from __future__ import annotations

import numpy as np

__all__ = ["lower_bound", "load", "live_bytes"]


def live_bytes(problem) -> tuple[np.ndarray, np.ndarray]:
    """The live-bytes step function: ``(times, live)``, where ``live[k]`` bytes are alive on
    ``[times[k], times[k+1])``.

    At equal times frees are applied before allocations (lifetimes are half-open). Complexity
    O(n log n).
    """
    starts, ends, sizes = problem.starts, problem.ends, problem.sizes
    if len(starts) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    times = np.concatenate([starts, ends])
    deltas = np.concatenate([sizes, -sizes])
    order = np.argsort(times, kind="stable")
    times, deltas = times[order], deltas[order]
    live = np.cumsum(deltas)
    # keep the last value of each time: all events at one time are applied together
    last = np.r_[times[1:] != times[:-1], True]
    return times[last], live[last]


def load(problem) -> int:
    """LOAD: the most bytes alive at one instant, max over t of the sizes of buffers with start <= t < end.

    Every plan needs at least this much. Complexity O(n log n).
    """
    _, live = live_bytes(problem)
    return int(live.max()) if len(live) else 0


def lower_bound(problem, *, sweep=None) -> int:
    """A lower bound on the optimal peak: the larger of LOAD and the end of the highest fixed buffer.

    ``sweep``, a :class:`dsa.sweep.Sweep` of the problem, supplies LOAD when it has it.

    Examples
    --------
    >>> import dsa
    >>> dsa.lower_bound([(0, 3, 4), (3, 9, 4), (0, 9, 4)])
    8
    """
    from dsa.problem import as_problem

    problem = as_problem(problem)
    bound = sweep.load if sweep is not None else load(problem)
    fixed = problem.is_fixed
    if fixed.any():
        bound = max(bound, int((problem.fixed_offsets[fixed] + problem.sizes[fixed]).max()))
    return bound
