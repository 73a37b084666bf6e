"""The result of planning: offsets per row, the peak, and a status that never hides failure."""
from __future__ import annotations

import enum
import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Solution", "Status", "describe_row", "rows_text"]

_INT64_MAX = int(np.iinfo(np.int64).max)


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
    conflict : tuple of int or None
        Only with status INFEASIBLE, and only when the strategy found one (``exact`` does): the rows
        of an irreducible infeasible subset, sorted. They cannot all fit in the capacity together,
        and they can once any one of them is removed: the buffers to shrink, split or move. None
        otherwise.
    pool : numpy.ndarray of int64 or None
        Only for a plan over pools (``dsa.solve(..., pools=[...])``): the index of each row's pool;
        ``offsets`` are then inside each row's pool, ``peak`` is the largest of ``pool_peaks`` and
        ``lower_bound`` is 0 (the objective is the cost; see ``cost_bound``). None otherwise.
    pool_peaks : tuple of int or None
        With pools: the peak of each pool, in the order the pools were given.
    pool_names : tuple of str or None
        With pools: their names, in the same order.
    cost : float or None
        With pools: ``sum_i cost(pool[i]) * weight[i]``, the objective.
    cost_bound : float or None
        With pools: a proven lower bound on the cost (``inf`` when no assignment fits, status
        INFEASIBLE); OPTIMAL means ``cost == cost_bound``.
    """

    offsets: np.ndarray | None
    peak: int | None
    lower_bound: int
    status: Status
    success: bool
    message: str = ""
    strategy: str = ""
    stats: dict[str, Any] = field(default_factory=dict)
    conflict: tuple[int, ...] | None = None
    pool: np.ndarray | None = None
    pool_peaks: tuple[int, ...] | None = None
    pool_names: tuple[str, ...] | None = None
    cost: float | None = None
    cost_bound: float | None = None

    @property
    def ratio(self) -> float:
        """``peak / lower_bound`` (1.0 means provably optimal); NaN without a plan, 1.0 for peak 0.

        With pools, ``cost / cost_bound`` instead (1.0 for cost 0)."""
        if self.pool_names is not None:
            if self.cost is None:
                return float("nan")
            return 1.0 if self.cost == 0 else (self.cost / self.cost_bound if self.cost_bound else float("inf"))
        if self.peak is None:
            return float("nan")
        if self.lower_bound == 0:
            return 1.0 if self.peak == 0 else float("inf")
        return self.peak / self.lower_bound

    def __repr__(self) -> str:
        if self.pool_names is not None:
            return (f"Solution(status={self.status.value}, cost={self.cost}, cost_bound={self.cost_bound}, "
                    f"pool_peaks={self.pool_peaks}, strategy={self.strategy!r}, "
                    f"time_s={self.stats.get('time_s', float('nan')):.4g})")
        return (f"Solution(status={self.status.value}, peak={self.peak}, lower_bound={self.lower_bound}, "
                f"strategy={self.strategy!r}, time_s={self.stats.get('time_s', float('nan')):.4g})")


def make_solution(problem, offsets, *, strategy: str, status: Status = Status.FEASIBLE,
                  message: str = "", stats: dict | None = None, lower_bound: int = 0,
                  limit_reached: bool = False, error: str | None = None,
                  conflict=None) -> Solution:
    """Build a strategy's raw result: its offsets and the facts of its run; the front end decides the status.

    Strategies call this and report facts, not verdicts: the offsets, a lower bound on the optimal
    peak that they *proved* (a complete search, a solver's dual bound; the final lower bound is the
    larger of it and LOAD), whether a time or node limit stopped them before they were done, and why
    they failed if they did. :func:`dsa.solve` then gives the result its status with
    :func:`finalize`, alone: OPTIMAL when the peak meets the lower bound, INFEASIBLE when the bound
    exceeds the capacity, and so on. Offsets that are no plan (see :func:`as_offsets`) give a result
    without offsets, with status ERROR and the reason as its message.

    Parameters
    ----------
    problem : Problem
    offsets : array_like of int or None
        One offset per row; None when the strategy has no plan.
    strategy : str
        The strategy's name.
    status : Status, default FEASIBLE
        A claim of a custom strategy (built-in strategies leave it): :func:`finalize` checks it
        against the facts and keeps only what they support.
    message : str, optional
        A sentence about the run, kept by :func:`finalize` with the status it decides where it fits
        (a limit's message is dropped when the plan turns out optimal).
    stats : dict, optional
        Strategy-specific figures.
    lower_bound : int, default 0
        A bound on the optimal peak that the strategy proved.
    limit_reached : bool, default False
        A time or node limit stopped the strategy before it finished (status LIMIT_REACHED unless
        its plan proves optimal).
    error : str, optional
        The strategy failed: why (status ERROR).
    conflict : sequence of int, optional
        Rows that the strategy proved an irreducible infeasible subset (kept by :func:`finalize`
        only when the status it decides is INFEASIBLE).
    """
    if error is not None:
        status, message = Status.ERROR, error
    elif limit_reached:
        status = Status.LIMIT_REACHED
    if offsets is not None:
        offsets, reason = as_offsets(problem, offsets)
        if reason:
            status, message = Status.ERROR, reason
    peak = plan_peak(problem, offsets)
    return Solution(offsets=offsets, peak=peak, lower_bound=int(lower_bound), status=status,
                    success=status in (Status.OPTIMAL, Status.FEASIBLE, Status.LIMIT_REACHED),
                    message=message, strategy=strategy, stats=dict(stats or {}),
                    conflict=as_conflict(problem, conflict))


def as_conflict(problem, rows) -> tuple[int, ...] | None:
    """Conflict rows as a sorted tuple of distinct row indices; None for None, an empty set, or rows
    that are not row indices of ``problem`` (a conflict that names no rows is no conflict)."""
    if rows is None:
        return None
    try:
        values = sorted({int(i) for i in rows if isinstance(i, numbers.Integral) and not isinstance(i, bool)})
        count = len(set(rows))
    except TypeError:
        return None
    if not values or len(values) != count or values[0] < 0 or values[-1] >= len(problem):
        return None
    return tuple(values)


def describe_row(problem, i: int) -> str:
    """``"row i"``, with the row's id when the problem has labels: how messages name a row."""
    ids = problem.ids
    return f"row {i}" if isinstance(ids, range) else f"row {i} (id {ids[i]!r})"


def as_offsets(problem, raw) -> tuple[np.ndarray | None, str]:
    """A strategy's offsets as exact int64: ``(offsets, "")``, or ``(None, reason)`` if they are no plan.

    Offsets are a plan only if there is one integer per row (never rounded, never wrapped around
    int64), each ``>= 0`` and with ``offset + size`` within int64, so that the peak is exact. Whether
    the plan is valid (alignment, fixed offsets, overlaps, capacity) is :func:`dsa.validate`'s question.
    """
    n = len(problem)
    try:
        arr = np.asarray(raw)
    except (TypeError, ValueError):  # a ragged list, say
        return None, "the strategy returned offsets that are not one integer per row"
    if arr.shape != (n,):
        return None, f"the strategy returned offsets of shape {arr.shape} for {n} rows"
    if n == 0:
        return np.zeros(0, dtype=np.int64), ""
    kind = arr.dtype.kind
    if kind == "O":  # Python ints beyond int64 (or other objects): compare them as Python ints
        values = arr.tolist()
        if not all(isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)) for v in values):
            return None, f"the strategy returned non-integer offsets (dtype {arr.dtype})"
        sizes = problem.sizes.tolist()
        for i, v in enumerate(values):
            if v < 0 or v > _INT64_MAX - sizes[i]:
                return None, _range_reason(problem, i, int(v))
        return np.array(values, dtype=np.int64), ""
    if kind == "f":
        if not (np.all(np.isfinite(arr)) and np.all(arr == np.floor(arr))):
            return None, f"the strategy returned non-integer offsets (dtype {arr.dtype})"
        bad = np.flatnonzero(np.abs(arr) >= 2.0**63)
        if len(bad):
            return None, _range_reason(problem, int(bad[0]), int(arr[bad[0]]))
    elif kind == "u":
        bad = np.flatnonzero(arr > _INT64_MAX)
        if len(bad):
            return None, _range_reason(problem, int(bad[0]), int(arr[bad[0]]))
    elif kind != "i":
        return None, f"the strategy returned non-integer offsets (dtype {arr.dtype})"
    offsets = arr.astype(np.int64, copy=False)
    bad = np.flatnonzero((offsets < 0) | (offsets > _INT64_MAX - problem.sizes))
    if len(bad):
        return None, _range_reason(problem, int(bad[0]), int(offsets[bad[0]]))
    return offsets, ""


def _range_reason(problem, i: int, offset: int) -> str:
    if offset < 0:
        return f"the strategy returned a negative offset: {describe_row(problem, i)}: offset {offset} is negative"
    return (f"the strategy returned an offset beyond int64: {describe_row(problem, i)}: offset {offset} plus size "
            f"{problem.sizes[i]} does not fit in a 64-bit integer")


def plan_peak(problem, offsets, rows=None) -> int | None:
    """``max(offsets + sizes)`` over the rows (0 for no rows); None when ``offsets`` is None.

    With ``rows`` (an array of row indices), the peak of those rows alone (0 for none): the peak of
    one busy period, say.

    Raises
    ------
    ValueError
        If an offset is not an int64 integer or ``offset + size`` does not fit in int64 (the peak
        would wrap around), naming the row.
    """
    if offsets is None:
        return None
    if len(offsets) == 0:
        return 0
    arr = np.asarray(offsets)
    if arr.dtype.kind == "i" or (arr.dtype.kind == "u" and arr.max() <= _INT64_MAX):
        arr = arr.astype(np.int64, copy=False)
    else:  # floats, objects, uint64 beyond int64: only exact integers that fit are a plan
        arr, reason = as_offsets(problem, arr)
        if reason:
            raise ValueError(reason)
    sizes = problem.sizes
    if rows is not None:
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) == 0:
            return 0
        arr, sizes = arr[rows], sizes[rows]
    over = arr > _INT64_MAX - sizes
    if over.any():
        i = int(np.argmax(over))
        i = i if rows is None else int(rows[i])
        raise ValueError(_range_reason(problem, i, int(np.asarray(offsets)[i])))
    return int((arr + sizes).max())


def finalize(problem, solution: Solution, lower_bound: int, *, error: str | None = None,
             checked: bool = True, extra_stats: dict | None = None) -> Solution:
    """Translate a strategy's raw result into the final status, in one place.

    ``lower_bound`` is the front end's bound (LOAD and the fixed buffers); the final bound is the
    larger of it and the bound the strategy proved (``solution.lower_bound``). ``error`` is a
    validation failure message (the plan is then reported as ERROR). ``checked=False`` (the plan was
    not validated) turns what would be a success into ``UNCHECKED`` (the status it would have had is
    kept in ``stats["unchecked_status"]``). ``stats["gap"]`` is
    ``(peak - lower_bound) / peak``, the relative distance to optimal that remains unproven.

    The status follows from facts, not from the strategy's word: offsets that are no plan (negative,
    beyond int64, see :func:`as_offsets`) give ERROR; INFEASIBLE needs a lower bound above the
    capacity; a plan that fits the capacity is never reported INFEASIBLE or NO_FIT. A status left
    without a message gets one.
    """
    offsets, status, message = solution.offsets, solution.status, solution.message
    if offsets is not None:
        offsets, reason = as_offsets(problem, offsets)
        if reason:
            status, message = Status.ERROR, reason
    peak = plan_peak(problem, offsets)
    lower_bound = max(int(lower_bound), int(solution.lower_bound))
    stats = {**solution.stats, **(extra_stats or {})}
    cap = problem.capacity
    if error is None and peak is not None and lower_bound > peak and solution.lower_bound > 0:
        # a valid plan of peak P shows the optimum is at most P: a larger "proven" bound is a bug
        error = (f"the strategy claims a lower bound {solution.lower_bound} above the peak {peak} "
                 "of its own plan")
    if error is not None:
        status, message = Status.ERROR, f"plan failed validation: {error}"
    elif offsets is None:
        if status in (Status.OPTIMAL, Status.FEASIBLE):
            status, message = Status.ERROR, message or "the strategy returned no plan"
        elif status in (Status.INFEASIBLE, Status.NO_FIT) and cap is None:
            status, message = Status.ERROR, (f"the strategy reported {solution.status.value} without a "
                                             "plan, but there is no capacity to exceed")
        elif status == Status.INFEASIBLE and lower_bound <= cap:
            status, message = Status.NO_FIT, (f"no plan within the capacity {cap}; the strategy reported "
                                              f"infeasible without proving a lower bound above it "
                                              f"(lower bound {lower_bound})")
        elif status == Status.INFEASIBLE and not message:
            message = f"infeasible: the lower bound {lower_bound} exceeds the capacity {cap}"
        elif status == Status.NO_FIT and not message:
            message = (f"no plan within the capacity {cap} was found; infeasibility is not proven "
                       f"(lower bound {lower_bound})")
        elif status == Status.LIMIT_REACHED and not message:
            message = "a time or node limit stopped the strategy before it found a plan"
        elif not message:
            message = f"the strategy gave no plan and no message (status {status.value})"
    elif cap is not None and peak > cap:
        if lower_bound > cap:
            status = Status.INFEASIBLE
            message = f"infeasible: the lower bound {lower_bound} exceeds the capacity {cap}"
        else:  # (a strategy's INFEASIBLE without a bound above the capacity is not proven either)
            status = Status.NO_FIT
            message = (f"the plan needs {peak} bytes, more than the capacity {cap}; "
                       f"infeasibility is not proven (lower bound {lower_bound})")
    elif status in (Status.INFEASIBLE, Status.NO_FIT):
        # the strategy's own plan fits: it is a plan like any other, whatever the strategy said
        claim = solution.status.value
        status = Status.OPTIMAL if peak == lower_bound else Status.FEASIBLE
        message = (f"{status.value}: peak {peak}, lower bound {lower_bound}; the strategy reported "
                   f"{claim}, but its plan fits " + (f"the capacity {cap}" if cap is not None else
                                                      "(there is no capacity)"))
    elif peak == lower_bound and status in (Status.FEASIBLE, Status.LIMIT_REACHED, Status.OPTIMAL):
        # (a limit's message would describe a search that did not matter: the plan is optimal)
        keep = message if status != Status.LIMIT_REACHED else ""
        status, message = Status.OPTIMAL, keep or "optimal: the peak equals the lower bound"
    elif status == Status.OPTIMAL:
        # OPTIMAL means peak == lower_bound: a strategy proves optimality by returning its bound
        status, message = Status.FEASIBLE, (f"the strategy called its plan optimal without a bound: "
                                            f"peak {peak}, lower bound {lower_bound}")
    elif status == Status.FEASIBLE and not message:
        message = f"feasible: peak {peak} is {peak / lower_bound:.4f} x the lower bound {lower_bound}" \
            if lower_bound else f"feasible: peak {peak}"
    elif status == Status.LIMIT_REACHED and not message:
        message = (f"a time or node limit stopped the strategy: the best plan found has peak {peak}, "
                   f"{peak / lower_bound:.4f} x the lower bound {lower_bound}" if lower_bound else
                   f"a time or node limit stopped the strategy: the best plan found has peak {peak}")
    elif not message:
        message = f"{status.value}: peak {peak}, lower bound {lower_bound}"
    success = offsets is not None and status in (Status.OPTIMAL, Status.FEASIBLE, Status.LIMIT_REACHED)
    if success and not checked:
        stats["unchecked_status"] = status.value  # what a validated plan would have been reported as
        status, success = Status.UNCHECKED, False
        message = "not validated (validate=False): check the plan with dsa.validate before using it"
    if peak is not None and status is not Status.ERROR:
        stats["gap"] = (peak - lower_bound) / peak if peak else 0.0
    # a conflict is a fact about a proven-infeasible capacity: kept with status INFEASIBLE only
    conflict = as_conflict(problem, solution.conflict) if status == Status.INFEASIBLE else None
    if conflict is not None and "(conflict: rows" not in message:  # (not twice, if finalized again)
        message += (f"; {len(conflict)} rows cannot fit together, and can once any one of them is "
                    f"removed (conflict: rows {rows_text(conflict)})")
    elif status == Status.INFEASIBLE and stats.get("conflict_cut") and "could not be minimised" not in message:
        message += ("; the conflict set could not be minimised in time (the time or node limit ran out, "
                    "or a busy period is too large to search): stats['infeasible_core'] holds rows proven "
                    "infeasible together, not proven irreducible")
    return Solution(offsets=offsets, peak=peak, lower_bound=int(lower_bound), status=status,
                    success=success, message=message, strategy=solution.strategy, stats=stats,
                    conflict=conflict)


def rows_text(rows, most: int = 12) -> str:
    """Row indices as ``"1, 4, 9"`` for a message, the first ``most`` of them and how many in all."""
    text = ", ".join(str(i) for i in rows[:most])
    return text + (f", ... ({len(rows)} in all)" if len(rows) > most else "")
