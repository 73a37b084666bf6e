"""Lower bounds on the peak of any plan."""
from __future__ import annotations

import numpy as np

from dsa.sweep import Sweep, step_function

__all__ = ["lower_bound", "load", "live_bytes", "aligned_load"]

# aligned_load checks the exact bound at this many of the busiest instants (then a looser one)
_ALIGNED_PROBES = 64


def live_bytes(problem) -> tuple[np.ndarray, np.ndarray]:
    """The live-bytes step function: ``(times, live)``, where ``live[k]`` bytes are alive on
    ``[times[k], times[k+1])``.

    At equal times frees are applied before allocations (lifetimes are half-open). Complexity
    O(n log n). It is :func:`dsa.sweep.step_function` of the problem, as :attr:`dsa.sweep.Sweep.times`
    and :attr:`dsa.sweep.Sweep.live` are.
    """
    return step_function(problem.starts, problem.ends, problem.sizes)


def load(problem) -> int:
    """LOAD: the most bytes alive at one instant, max over t of the sizes of buffers with start <= t < end.

    Every plan needs at least this much. Complexity O(n log n). The same as
    :attr:`dsa.sweep.Sweep.load`, which computes it.
    """
    return Sweep(problem).load


def aligned_load(problem) -> int:
    """LOAD strengthened by alignment: a lower bound on the peak of any plan, at least :func:`load`.

    Every offset is a multiple of its row's alignment, hence of the greatest common divisor ``g`` of
    the alignments. Take the buffers alive at one instant in the order of their offsets: each one
    starts at a multiple of ``g`` at or above the end of the one below it, so each but the topmost
    occupies its size rounded up to a multiple of ``g``. The peak is therefore at least
    ``R - max(r_i - s_i)`` over the live set, where ``R`` sums the rounded sizes ``r_i`` and the
    maximum is over the live buffers' padding (any of them may be on top). With ``g = 1`` this is
    LOAD. The exact value is taken at the busiest instants (by ``R``) and ``R - (g - 1)`` bounds the
    rest; the result is the maximum of those and LOAD.

    Complexity O(n log n) plus O(n) per instant checked (at most 64).

    Examples
    --------
    >>> import dsa
    >>> p = dsa.Problem([0, 0], [2, 2], [4, 8], alignments=64)   # two buffers alive together
    >>> dsa.bounds.load(p), dsa.bounds.aligned_load(p)            # the lower one pads to 64 bytes
    (12, 68)
    """
    return _aligned_load(problem, load(problem))


def _aligned_load(problem, plain: int) -> int:
    """:func:`aligned_load`, given the problem's LOAD ``plain`` (computed once by the caller)."""
    nonzero = problem.sizes > 0
    if not nonzero.any():
        return plain
    g = int(np.gcd.reduce(problem.alignments[nonzero]))
    if g <= 1:
        return plain
    starts, ends, sizes = problem.starts[nonzero], problem.ends[nonzero], problem.sizes[nonzero]
    rounded = -(-sizes // g) * g
    pad = rounded - sizes
    times, live = step_function(starts, ends, rounded)
    best = plain
    order = np.argsort(-live, kind="stable")
    for k, index in enumerate(order):
        if live[index] <= best:
            break
        if k == _ALIGNED_PROBES:  # the rest: each instant's padding is below g
            best = max(best, int(live[index]) - (g - 1))
            break
        t = times[index]
        alive = (starts <= t) & (ends > t)
        best = max(best, int(live[index]) - int(pad[alive].max()))
    return best


def lower_bound(problem, *, sweep=None) -> int:
    """A lower bound on the optimal peak: the largest of LOAD, LOAD strengthened by the rows'
    alignments (:func:`aligned_load`) and the end of the highest fixed buffer.

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
    if len(problem) and problem.alignments.max() > 1:
        bound = _aligned_load(problem, bound)  # bound is LOAD here
    fixed = problem.is_fixed
    if fixed.any():
        bound = max(bound, int((problem.fixed_offsets[fixed] + problem.sizes[fixed]).max()))
    return bound
