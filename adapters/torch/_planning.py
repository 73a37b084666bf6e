"""Where and how an attached module's plans are made.

:class:`Planner` turns the trace of a profiled pass into a validated :class:`dsa.Solution`. With
``planner="process"`` it tries ``best``'s portfolio head in the calling thread first, then asks the
helper process (:mod:`dsa._planner_process`) and validates the answer here. If no helper answers,
it plans inline. A capacity in the solve options is applied before planning. A signature that cannot
be planned gets a :class:`PlanningWarning` and runs eagerly.
"""
from __future__ import annotations

import warnings

import numpy as np

from .trace import Trace

# seconds of planning per input signature for strategies that search until a time limit
DEFAULT_PLAN_TIME_LIMIT = 0.2
# where plans are made: "process", a helper process (dsa._planner_process: numba and the kernels,
# ~120 MB, never load in the served process), or "inline", in the calling thread
PLANNERS = ("process", "inline")
# seconds a planning helper may take beyond the strategy's time limit (its start, numba's kernels)
# before it is killed and the plan is made inline instead
PLANNER_GRACE_S = 300.0


class PlanningWarning(UserWarning):
    """A signature could not be planned or kept missing its plan; it runs eagerly."""


def takes_time_limit(strategy: str) -> bool:
    """Whether the registered strategy ``strategy`` searches until a time limit."""
    from dsa.strategies import strategy_info

    return strategy_info(strategy).time_limit


def trace_with_escapes(trace: Trace, escaped) -> Trace:
    """``trace`` with the blocks ``escaped`` marked as alive at the end of the pass."""
    index = np.fromiter((i for i in escaped if 0 <= i < len(trace)), np.int64)
    if not len(index):
        return trace
    ends = trace.ends.copy()
    ends[index] = -1
    return Trace(trace.sizes, trace.starts, ends, trace.threads, trace.stacks, trace.clock)


def _checked_here(problem, raw, planned_in: str):
    """A strategy's raw solution, validated and given its final status in this process (by the front
    end's own last phase, :func:`dsa.solver.conclude`; the validator without numba)."""
    from dsa.solver import conclude

    return conclude(problem, raw, extra_stats={"planned_in": planned_in}, engine="numpy")


class Planner:
    """Makes the plan of a trace with one strategy, in the helper process or in the calling thread.

    Parameters
    ----------
    strategy : str or callable
        A :func:`dsa.solve` strategy (already checked by name).
    planner : {"process", "inline"}
        Where plans are made; a callable strategy always plans inline.
    solve_options : dict
        Options for :func:`dsa.solve`. A strategy that takes a time limit gets
        ``DEFAULT_PLAN_TIME_LIMIT`` unless they set one, and ``validate`` is always True.
    count : callable
        ``count(name)`` adds one to a shared counter (``"planner_fallbacks"`` here).
    """

    def __init__(self, strategy, planner: str, solve_options: dict, count):
        self.strategy = strategy
        if isinstance(strategy, str) and takes_time_limit(strategy):
            solve_options.setdefault("time_limit", DEFAULT_PLAN_TIME_LIMIT)
        self.solve_options = {**solve_options, "validate": True}
        # a callable strategy cannot be sent to another process: it plans here
        self.where = planner if isinstance(strategy, str) else "inline"
        self._count = count

    def plan(self, trace: Trace, escaped=frozenset()):
        """The plan of ``trace`` with the blocks ``escaped`` left to the default allocator.

        Returns
        -------
        tuple
            ``(trace, problem, solution)``: the trace with those blocks marked as escaping, its
            problem, and the solution; ``solution`` is None, or not successful, when the signature
            cannot be planned (a :class:`PlanningWarning` says why).
        """
        trace = trace_with_escapes(trace, escaped)
        problem = trace.to_problem()
        try:
            solution = self.solve(problem)
        except ValueError as exc:  # e.g. a capacity below the largest buffer (a TypeError propagates)
            warnings.warn(f"dsa could not plan this signature ({exc}); it runs eagerly", PlanningWarning,
                          stacklevel=4)
            return trace, problem, None
        if not solution.success:
            warnings.warn(f"dsa could not plan this signature ({solution.status.name}: {solution.message}); "
                          "it runs eagerly", PlanningWarning, stacklevel=4)
        return trace, problem, solution

    def solve(self, problem):
        """``dsa.solve`` of ``problem``, in the helper process when the planner is "process".

        The helper's plan is validated here, by the same validator ``dsa.solve`` uses (without
        numba: see :mod:`dsa.address_overlap`); if no helper answers, the plan is made inline. Before the
        helper, ``best``'s plan is tried here when one of its greedy members reaches the lower
        bound (:func:`dsa.strategies.best.portfolio_head`, numpy only): on most models one does, in
        milliseconds, and no helper has to start.
        """
        if self.where == "process":
            from dsa._planner_process import PlannerUnavailable, shared

            if self.solve_options.get("capacity") is not None:
                # the helper plans against this capacity: its answer is checked against it here too
                # (finalize turns an INFEASIBLE whose plan fits the problem's capacity into a plan)
                from dsa.problem import as_problem

                problem = as_problem(problem, capacity=self.solve_options["capacity"])

            head = self.head(problem)
            if head is not None:
                return head

            limit = self.solve_options.get("time_limit")
            timeout = PLANNER_GRACE_S + (float(limit) if isinstance(limit, (int, float)) else 0.0)
            try:
                raw = shared().solve(problem, self.strategy, self.solve_options, timeout=timeout)
            except PlannerUnavailable as exc:
                warnings.warn(f"dsa plans in this process instead ({exc})", PlanningWarning, stacklevel=5)
                self._count("planner_fallbacks")
            else:
                return _checked_here(problem, raw, "process")
        from dsa.solver import solve

        return solve(problem, strategy=self.strategy, **self.solve_options)

    def head(self, problem):
        """``best``'s plan made in this thread when a greedy member reaches the lower bound, else
        None (another strategy, options other than ``time_limit``, or no member within the head's
        work reaches it)."""
        if self.strategy != "best" or set(self.solve_options) - {"time_limit", "validate"}:
            return None
        from dsa.budget import Budget
        from dsa.strategies import best

        Budget(self.solve_options.get("time_limit"))  # a bad limit fails as it would in best.solve
        raw = best.portfolio_head(problem)
        return None if raw is None else _checked_here(problem, raw, "inline")
