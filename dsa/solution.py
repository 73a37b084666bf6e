"""The result of planning: offsets per row, the peak, and a status that never hides failure."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Solution", "Status"]


class Status(str, enum.Enum):
    """Outcome of a strategy run.

    OPTIMAL
        A valid plan whose peak equals ``lower_bound``: LOAD, or a bound the strategy proved (an
        exact search proves optimality by returning its peak as the bound).
    FEASIBLE
        A valid plan that fits the capacity; optimality not proven.
    LIMIT_REACHED
        A time or node limit stopped the search; ``offsets`` hold the best plan found, if any.
    NO_FIT
        The strategy's plan needs more than the capacity, but infeasibility is not proven.
    INFEASIBLE
        Proven: no plan fits the capacity (for instance LOAD exceeds it). ``offsets`` may still hold the
        strategy's plan, which then exceeds the capacity.
    UNCHECKED
        A plan returned with ``validate=False``: it was not checked, so it is not a success
        (``success`` is False) until :func:`dsa.validate` accepts it.
    ERROR
        The strategy failed or its plan did not pass validation; see ``message``.
    """

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    LIMIT_REACHED = "limit_reached"
    NO_FIT = "no_fit"
    INFEASIBLE = "infeasible"
    UNCHECKED = "unchecked"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, eq=False)
class Solution:
    """A plan: ``offsets[i]`` is where row ``i`` of the problem lives in the slab.

    Attributes
    ----------
    offsets : numpy.ndarray of int64 or None
        One offset per row, in row order; ``None`` when no plan exists.
    peak : int or None
        ``max(offsets + sizes)`` (0 for an empty problem); ``None`` without a plan.
    lower_bound : int
        A proven lower bound on the optimal peak (at least LOAD).
    status : Status
        See :class:`Status`.
    success : bool
        True when ``offsets`` hold a plan that the validator accepted and that fits the capacity.
    message : str
        A sentence a person can read about the outcome.
    strategy : str
        The strategy that produced the plan.
    stats : dict
        ``time_s`` (wall time of the strategy) and strategy-specific figures, such as the winner of a
        portfolio or the nodes of a search.
    """

    offsets: np.ndarray | None
    peak: int | None
    lower_bound: int
    status: Status
    success: bool
    message: str = ""
    strategy: str = ""
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        """``peak / lower_bound`` (1.0 means provably optimal); NaN without a plan, 1.0 for peak 0."""
        if self.peak is None:
            return float("nan")
        if self.lower_bound == 0:
            return 1.0 if self.peak == 0 else float("inf")
        return self.peak / self.lower_bound

    def __repr__(self) -> str:
        return (f"Solution(status={self.status.value}, peak={self.peak}, lower_bound={self.lower_bound}, "
                f"strategy={self.strategy!r}, time_s={self.stats.get('time_s', float('nan')):.4g})")


def make_solution(problem, offsets, *, strategy: str, status: Status = Status.FEASIBLE,
                  message: str = "", stats: dict | None = None, lower_bound: int = 0) -> Solution:
    """Build a :class:`Solution` from a strategy's offsets; the front end fills in bound and status.

    Strategies call this; :func:`dsa.solve` then recomputes the peak and the status with
    :func:`finalize`, so a strategy only has to produce offsets. ``lower_bound`` is a bound on the
    optimal peak that the strategy *proved* (a complete search, a solver's dual bound); the final
    lower bound is the larger of it and LOAD.
    """
    if offsets is not None:
        offsets = np.asarray(offsets, dtype=np.int64)
    peak = plan_peak(problem, offsets)
    return Solution(offsets=offsets, peak=peak, lower_bound=int(lower_bound), status=status,
                    success=status in (Status.OPTIMAL, Status.FEASIBLE, Status.LIMIT_REACHED),
                    message=message, strategy=strategy, stats=dict(stats or {}))


def plan_peak(problem, offsets) -> int | None:
    """``max(offsets + sizes)`` over the rows (0 for no rows); None when ``offsets`` is None."""
    if offsets is None:
        return None
    if len(offsets) == 0:
        return 0
    return int((np.asarray(offsets, dtype=np.int64) + problem.sizes).max())


def finalize(problem, solution: Solution, lower_bound: int, *, error: str | None = None,
             checked: bool = True, extra_stats: dict | None = None) -> Solution:
    """Translate a strategy's raw result into the final status, in one place.

    ``lower_bound`` is the front end's bound (LOAD and the fixed buffers); the final bound is the
    larger of it and the bound the strategy proved (``solution.lower_bound``). ``error`` is a
    validation failure message (the plan is then reported as ERROR). ``checked=False`` (the plan was
    not validated) turns what would be a success into ``UNCHECKED`` (the status it would have had is
    kept in ``stats["unchecked_status"]``). ``stats["gap"]`` is
    ``(peak - lower_bound) / peak``, the relative distance to optimal that remains unproven.
    """
    offsets = solution.offsets
    peak = plan_peak(problem, offsets)
    lower_bound = max(int(lower_bound), int(solution.lower_bound))
    stats = {**solution.stats, **(extra_stats or {})}
    cap = problem.capacity
    status, message = solution.status, solution.message
    if error is None and peak is not None and lower_bound > peak and solution.lower_bound > 0:
        # a valid plan of peak P shows the optimum is at most P: a larger "proven" bound is a bug
        error = (f"the strategy claims a lower bound {solution.lower_bound} above the peak {peak} "
                 "of its own plan")
    if error is not None:
        status, message = Status.ERROR, f"plan failed validation: {error}"
    elif offsets is None:
        if status in (Status.OPTIMAL, Status.FEASIBLE):
            status, message = Status.ERROR, message or "the strategy returned no plan"
    elif cap is not None and peak > cap:
        if lower_bound > cap:
            status = Status.INFEASIBLE
            message = f"infeasible: the lower bound {lower_bound} exceeds the capacity {cap}"
        elif status != Status.INFEASIBLE:
            status = Status.NO_FIT
            message = (f"the plan needs {peak} bytes, more than the capacity {cap}; "
                       f"infeasibility is not proven (lower bound {lower_bound})")
    elif peak == lower_bound and status in (Status.FEASIBLE, Status.LIMIT_REACHED, Status.OPTIMAL):
        status, message = Status.OPTIMAL, message or "optimal: the peak equals the lower bound"
    elif status == Status.OPTIMAL:
        # OPTIMAL means peak == lower_bound: a strategy proves optimality by returning its bound
        status, message = Status.FEASIBLE, (f"the strategy called its plan optimal without a bound: "
                                            f"peak {peak}, lower bound {lower_bound}")
    elif status == Status.FEASIBLE and not message:
        message = f"feasible: peak {peak} is {peak / lower_bound:.4f} x the lower bound {lower_bound}" \
            if lower_bound else f"feasible: peak {peak}"
    success = offsets is not None and status in (Status.OPTIMAL, Status.FEASIBLE, Status.LIMIT_REACHED)
    if success and not checked:
        stats["unchecked_status"] = status.value  # what a validated plan would have been reported as
        status, success = Status.UNCHECKED, False
        message = "not validated (validate=False): check the plan with dsa.validate before using it"
    if peak is not None and status is not Status.ERROR:
        stats["gap"] = (peak - lower_bound) / peak if peak else 0.0
    return Solution(offsets=offsets, peak=peak, lower_bound=int(lower_bound), status=status,
                    success=success, message=message, strategy=solution.strategy, stats=stats)
