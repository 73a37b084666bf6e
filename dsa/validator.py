"""The one independent validator of plans.

It shares no code with any strategy. :func:`validate` checks, in O(n log n):

* one integer offset per row, each ``>= 0`` and a multiple of the row's alignment;
* fixed rows sit at their fixed offset;
* no two buffers alive at the same time overlap in address (zero-size buffers overlap nothing);
* the plan fits ``problem.capacity`` when one is set (a :class:`~dsa.Solution` whose status admits
  that it does not fit, such as ``NO_FIT``, is checked without this rule);
* a :class:`~dsa.Solution`'s ``peak`` equals ``max(offset + size)``;
* with pools (:mod:`dsa.pools`): every row is in a pool it may use, and the rows of each pool form a
  plan of their own that passes every rule above within the pool's capacity.
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


def validate(problem, solution, *, pools=None, allowed=None, check_capacity: bool | None = None,
             engine: str = "auto") -> None:
    """Check that ``solution`` is a valid plan for ``problem``; raise :class:`InvalidPlanError` if not.

    Parameters
    ----------
    problem : Problem or list of intervals
    solution : Solution or array_like of int
        A :class:`~dsa.Solution` or just the offsets, one per row in row order. With ``pools``: a
        Solution with ``pool`` set, or a pair ``(pool, offsets)`` of arrays.
    pools : sequence of dsa.Pool or dsa.pools.PoolSpec, optional
        Check a plan over these pools (see :mod:`dsa.pools`): each row in a pool it may use, each
        pool's rows a valid plan within its capacity, offsets inside the pool.
    allowed : optional
        The pools each row may use, as for :func:`dsa.solve` (with a list of pools only).
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
        ``"negative"``, ``"alignment"``, ``"fixed"``, ``"overlap"``, ``"capacity"``, ``"peak"``; with
        pools also ``"pool"`` and ``"allowed"``) and the rows involved.

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
    if pools is not None or (isinstance(solution, Solution) and solution.pool_names is not None
                             and len(solution.pool_names) > 1):
        _validate_pools(problem, solution, pools, allowed, check_capacity, engine)
        return
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


def _validate_pools(problem, solution, pools, allowed, check_capacity, engine) -> None:
    """:func:`validate` of a plan over pools: the assignment, then each pool's rows as a plan of their own."""
    from dsa.pools import PoolSpec, check_pools
    from dsa.solution import Solution, Status

    if pools is None:
        raise InvalidPlanError("a plan over pools is checked against its pools: pass pools=", "pool")
    spec = pools if isinstance(pools, PoolSpec) else check_pools(problem, pools, allowed)
    if isinstance(pools, PoolSpec) and allowed is not None:
        raise ValueError("allowed is part of a PoolSpec already: pass it to check_pools")
    reported = None
    if isinstance(solution, Solution):
        if solution.pool is None or solution.offsets is None:
            raise InvalidPlanError("the solution holds no plan over pools (pool or offsets is None)", "shape")
        if check_capacity is None:
            check_capacity = solution.status not in (Status.NO_FIT, Status.INFEASIBLE, Status.ERROR)
        pool, offsets, reported = solution.pool, solution.offsets, solution.pool_peaks
    else:
        try:
            pool, offsets = solution
        except (TypeError, ValueError):
            raise InvalidPlanError("a plan over pools is a Solution or a pair (pool, offsets)", "shape") from None
    if check_capacity is None:
        check_capacity = True
    n = len(problem)
    pool = np.asarray(pool)
    if pool.shape != (n,):
        raise InvalidPlanError(f"expected {n} pool indices, one per row, got shape {pool.shape}", "shape")
    if n and pool.dtype.kind not in "iu":
        raise InvalidPlanError(f"pool indices must be integers, got dtype {pool.dtype}", "integer")
    pool = pool.astype(np.int64)
    bad = np.flatnonzero((pool < 0) | (pool >= len(spec)))
    if len(bad):
        i = int(bad[0])
        raise InvalidPlanError(f"{_describe(problem, i)}: pool index {pool[i]} is not one of 0..{len(spec) - 1}",
                               "pool", (i,))
    bad = np.flatnonzero(~spec.allowed[np.arange(n), pool]) if n else ()
    if len(bad):
        i = int(bad[0])
        raise InvalidPlanError(f"{_describe(problem, i)} is in pool {spec.names[pool[i]]!r}, which it may not use",
                               "allowed", (i,))
    offsets = np.asarray(offsets)
    if offsets.shape != (n,):
        raise InvalidPlanError(f"expected {n} offsets, one per row, got shape {offsets.shape}", "shape")
    peaks = []
    for p in range(len(spec)):
        rows = np.flatnonzero(pool == p)
        sub = problem.take(rows)  # (without a capacity: a row too large for it is a broken plan, not bad input)
        try:
            validate(sub, offsets[rows], check_capacity=False, engine=engine)
        except InvalidPlanError as exc:
            message = str(exc)
            for j in sorted(set(exc.rows), reverse=True):  # (row 12 before row 1, so that no prefix is replaced)
                message = message.replace(_describe(sub, j), _describe(problem, int(rows[j])))
            raise InvalidPlanError(f"pool {spec.names[p]!r}: {message}", exc.rule,
                                   tuple(int(rows[j]) for j in exc.rows)) from None
        tops = offsets[rows].astype(np.int64) + problem.sizes[rows]
        peaks.append(int(tops.max()) if len(rows) else 0)
        cap = spec.capacity(p)
        if check_capacity and cap is not None and peaks[-1] > cap:
            i = int(rows[np.argmax(tops)])
            raise InvalidPlanError(f"pool {spec.names[p]!r}: {_describe(problem, i)} ends at {peaks[-1]}, beyond "
                                   f"the pool's capacity {cap}", "capacity", (i,))
    if reported is not None and tuple(reported) != tuple(peaks):
        raise InvalidPlanError(f"reported pool peaks {tuple(reported)} differ from the plan's {tuple(peaks)}", "peak")
