"""The one independent validator of plans.

It shares no code with any strategy. :func:`validate` checks, in O(n log n):

* one integer offset per row, each ``>= 0`` and a multiple of the row's alignment;
* fixed rows sit at their fixed offset;
* no two buffers alive at the same time overlap in address (zero-size buffers overlap nothing);
* the plan fits ``problem.capacity`` when one is set (a :class:`~dsa.Solution` whose status admits
  that it does not fit, such as ``NO_FIT``, is checked without this rule);
* a :class:`~dsa.Solution`'s ``peak`` equals ``max(offset + size)``.
"""
from __future__ import annotations

import numbers

import numpy as np

from dsa.address_overlap import find_overlap

__all__ = ["validate", "InvalidPlanError", "find_overlap"]


_INT64_MAX = np.iinfo(np.int64).max


class InvalidPlanError(ValueError):
    """A plan breaks a rule. ``rule`` names it; ``rows`` lists the rows involved."""

    def __init__(self, message: str, rule: str, rows: tuple = ()):
        super().__init__(message)
        self.rule = rule
        self.rows = tuple(int(r) for r in rows)


def _describe(problem, i: int) -> str:
    ids = problem.ids
    return f"row {i}" if isinstance(ids, range) else f"row {i} (id {ids[i]!r})"


def validate(problem, solution, *, check_capacity: bool | None = None, engine: str = "auto") -> None:
    """Check that ``solution`` is a valid plan for ``problem``; raise :class:`InvalidPlanError` if not.

    Parameters
    ----------
    problem : Problem or list of intervals
    solution : Solution or array_like of int
        A :class:`~dsa.Solution` or just the offsets, one per row in row order.
    check_capacity : bool, optional
        Whether the plan must fit ``problem.capacity``. Default: yes, unless ``solution`` is a Solution
        whose status says it does not fit (``NO_FIT`` or ``INFEASIBLE``).
    engine : {"auto", "numpy", "kernel"}, default "auto"
        How the address-overlap check runs (:func:`dsa.address_overlap.find_overlap`): ``"auto"`` by
        a plain-Python sweep below ``SMALL_M`` rows and a numba kernel from there on; ``"numpy"``
        without numba (a process that must not load it, such as the torch adapter's served process,
        asks for it). The verdict is the same.

    Raises
    ------
    InvalidPlanError
        A ``ValueError`` naming the rule broken (``rule`` attribute: ``"shape"``, ``"integer"``,
        ``"negative"``, ``"alignment"``, ``"fixed"``, ``"overlap"``, ``"capacity"``, ``"peak"``) and the
        rows involved.

    Examples
    --------
    >>> import dsa
    >>> dsa.validate([(0, 3, 4), (3, 5, 4)], [0, 0])   # touching lifetimes may share memory
    >>> dsa.validate([(0, 3, 4), (2, 5, 4)], [0, 2])
    Traceback (most recent call last):
    ...
    dsa.validator.InvalidPlanError: row 0 and row 1 are alive at the same time and overlap in address: [0, 4) and [2, 6)
    """
    from dsa.problem import as_problem
    from dsa.solution import Solution, Status

    problem = as_problem(problem)
    reported_peak = None
    if isinstance(solution, Solution):
        if solution.offsets is None:
            raise InvalidPlanError("the solution holds no plan (offsets is None)", "shape")
        if check_capacity is None:
            check_capacity = solution.status not in (Status.NO_FIT, Status.INFEASIBLE, Status.ERROR)
        reported_peak = solution.peak
        raw = solution.offsets
    else:
        raw = solution
    if check_capacity is None:
        check_capacity = True

    offsets = np.asarray(raw)
    n = len(problem)
    if offsets.shape != (n,):
        raise InvalidPlanError(f"expected {n} offsets, one per row, got shape {offsets.shape}", "shape")
    if n == 0:
        if reported_peak not in (None, 0):
            raise InvalidPlanError(f"reported peak {reported_peak} but the problem is empty", "peak")
        return
    values = offsets.tolist() if offsets.dtype.kind == "O" else ()
    if values and all(isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)) for v in values):
        # Python ints beyond int64 (numpy keeps them as objects): name the first that does not fit
        for i, v in enumerate(values):
            if not -_INT64_MAX - 1 <= v <= _INT64_MAX:
                raise InvalidPlanError(f"{_describe(problem, i)}: offset {v} does not fit in a 64-bit "
                                       "integer", "integer", (i,))
        offsets = offsets.astype(np.int64)
    if offsets.dtype.kind not in "iu":
        if not (offsets.dtype.kind == "f" and np.all(np.isfinite(offsets))
                and np.all(offsets == np.floor(offsets))):
            raise InvalidPlanError(f"offsets must be integers, got dtype {offsets.dtype}", "integer")
    # values beyond int64 must not wrap around (to negative offsets, or tops below the capacity)
    bad = ()
    if offsets.dtype.kind == "u":
        bad = np.flatnonzero(offsets > _INT64_MAX)
    elif offsets.dtype.kind == "f":
        bad = np.flatnonzero(np.abs(offsets) >= 2.0**63)
    if len(bad):
        i = int(bad[0])
        raise InvalidPlanError(f"{_describe(problem, i)}: offset {offsets[i]} does not fit in a 64-bit integer",
                               "integer", (i,))
    offsets = offsets.astype(np.int64, copy=False)

    bad = np.flatnonzero(offsets < 0)
    if len(bad):
        i = int(bad[0])
        raise InvalidPlanError(f"{_describe(problem, i)}: offset {offsets[i]} is negative", "negative", (i,))
    # offset + size must not wrap around int64 (a wrapped top would hide a capacity or overlap breach)
    bad = np.flatnonzero(offsets > _INT64_MAX - problem.sizes)
    if len(bad):
        i = int(bad[0])
        raise InvalidPlanError(f"{_describe(problem, i)}: offset {offsets[i]} plus size {problem.sizes[i]} "
                               "does not fit in a 64-bit integer", "integer", (i,))
    bad = np.flatnonzero(offsets % problem.alignments != 0)
    if len(bad):
        i = int(bad[0])
        raise InvalidPlanError(f"{_describe(problem, i)}: offset {offsets[i]} is not a multiple of its "
                               f"alignment {problem.alignments[i]}", "alignment", (i,))
    fixed = problem.is_fixed
    bad = np.flatnonzero(fixed & (offsets != problem.fixed_offsets))
    if len(bad):
        i = int(bad[0])
        raise InvalidPlanError(f"{_describe(problem, i)}: offset {offsets[i]} differs from its fixed offset "
                               f"{problem.fixed_offsets[i]}", "fixed", (i,))
    tops = offsets + problem.sizes
    peak = int(tops.max())
    if check_capacity and problem.capacity is not None and peak > problem.capacity:
        i = int(np.argmax(tops))
        raise InvalidPlanError(f"{_describe(problem, i)}: ends at {peak}, beyond the capacity "
                               f"{problem.capacity}", "capacity", (i,))
    pair = find_overlap(problem.starts, problem.ends, problem.sizes, offsets, engine=engine)
    if pair is not None:
        i, j = sorted(pair)
        raise InvalidPlanError(
            f"{_describe(problem, i)} and {_describe(problem, j)} are alive at the same time and overlap in "
            f"address: [{offsets[i]}, {tops[i]}) and [{offsets[j]}, {tops[j]})", "overlap", (i, j))
    if reported_peak is not None and reported_peak != peak:
        raise InvalidPlanError(f"reported peak {reported_peak} differs from max(offset + size) = {peak}", "peak")
