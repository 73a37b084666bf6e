"""Exact planning with a mixed-integer program: the big-M model of Sekiyama et al.

Sekiyama, Imamichi, Imai and Raymond, "Profile-guided memory optimization for deep neural networks",
arXiv:1804.10001, 2018: one offset per buffer, one order binary per pair of buffers whose lifetimes
intersect (taken from the time-overlap graph of :class:`dsa.sweep.Sweep`), big-M disjunctions, and a
peak variable to minimise. The model and its strengthenings (offset and big-M bounds from a heuristic's
peak, the peak bounded below by LOAD, symmetry breaking, fixed rows as constants, zero-size rows left
out) are built once, as arrays, by :mod:`dsa.strategies._mip_model`; one module per backend hands them
to a solver and maps its statuses onto the strategy's outcomes:

* ``"highs"`` (default): HiGHS through :func:`scipy.optimize.milp` (``pip install 'dsa-planner[mip]'``);
* ``"cbc"``: CBC through python-mip, always with ``solver_name="CBC"`` (``[cbc]``);
* ``"gurobi"``: gurobipy (``[gurobi]``); its pip licence stops at 2000 variables and 2000 constraints.

The heuristic is :mod:`dsa.strategies.best` without its improvement phase, compacted. Its plan is the
incumbent: a warm start for Gurobi; for HiGHS, which scipy gives no warm start, and CBC, which can
prove false bounds from one (see :mod:`dsa.strategies._mip_cbc`), the model only admits strictly lower
peaks, so that an infeasible model proves the heuristic optimal.

Size and cost: ``m + 1 + p`` integer variables and about ``m + 2p`` constraints for ``m`` free
non-empty buffers and ``p`` time-overlapping pairs among them (up to ``m (m - 1) / 2``); see
:mod:`dsa.strategies._mip_model`. Branch and bound is exponential in ``p`` in the worst case, and the
big-M relaxation is weak (at the root its bound is only the LOAD it is given), so a proof comes from
a plan at the bound or an exhausted tree. Measured with HiGHS on 2 cores: random 40-buffer instances
that the heuristic leaves above LOAD are proven in 5 to 12 s; on MiniMalloc's challenging instances
(150 to 450 buffers, 3k to 29k binaries) it runs to its time limit without improving the heuristic.
The time limit covers the heuristic, the model building and the solver (HiGHS checks its clock between
phases and can overrun by a second or two on large models).

Numerics. The solvers work in floating point with tolerances (integrality 1e-6, feasibility 1e-9
relative), so a big-M model whose numbers reach ``2^28`` to ``2^30`` gets wrong verdicts: HiGHS called
feasible models infeasible and reported bounds above the optimum on 20 of 150 random instances with
sizes near ``2^28`` (0 of 150 near ``2^24``), and Gurobi does the same near ``2^45``. Every verdict taken
from a solver is therefore made on a model whose numbers stay within :data:`TRUSTED_UNITS` (``2^16``)
model units. The exact model is used when its unit (the gcd of the sizes, alignments and fixed offsets)
brings it there; otherwise the solver gets a relaxation in coarser units (sizes and fixed offsets
rounded down, alignments dropped; see :func:`_coarse`), whose proven bound times its unit is a proven
bound of the problem, and whose plan only gives an order that is re-placed (lowest fit, exact
arithmetic). Every plan is checked by the validator, and a bound above a checked plan's peak is
rejected as a numerical failure. Such instances rarely end OPTIMAL unless a plan reaches LOAD; they
end FEASIBLE or LIMIT_REACHED with a true lower bound.
"""
from __future__ import annotations

import importlib
import math
import time

import numpy as np

from dsa.bounds import lower_bound
from dsa.budget import Budget
from dsa.context import Context
from dsa.solution import make_solution, plan_peak
from dsa.strategies._call import call
from dsa.sweep import Sweep

__all__ = ["solve", "BACKENDS", "DEFAULT_TIME_LIMIT"]

BACKENDS = {"highs": "dsa.strategies._mip_highs", "cbc": "dsa.strategies._mip_cbc",
            "gurobi": "dsa.strategies._mip_gurobi"}
DEFAULT_TIME_LIMIT = 10.0
MIN_SOLVER_TIME = 0.05  # seconds the solver gets even when the heuristic used up the budget
# the largest number the model may hold (its peak bound, hence every big-M, in model units): above it,
# the solvers' tolerances (1e-6 on integrality, 1e-9 relative on feasibility) let HiGHS, CBC and
# Gurobi call feasible models infeasible and report bounds above the optimum; see _scale and _coarse
TRUSTED_UNITS = 1 << 16
# beyond this many time-overlapping pairs the model alone takes seconds to build and to presolve,
# far past any sensible time limit: the heuristic's plan is returned without calling the solver
MAX_PAIRS = 200_000


def _backend(name):
    if not isinstance(name, str) or name.lower() not in BACKENDS:
        raise ValueError(f"unknown mip backend {name!r}; valid backends: {', '.join(BACKENDS)}")
    module = importlib.import_module(BACKENDS[name.lower()])
    module.require()  # ImportError naming the extra, before any work is done
    return name.lower(), module


def _heuristic(problem, context, budget, seed, name):
    """The incumbent: strategy ``name``'s plan (``best`` without its improvement phase), compacted."""
    from dsa.compaction import compact
    from dsa.strategies import best, resolve_name

    sweep = context.sweep
    name = name if callable(name) else resolve_name(name)
    if name == "mip":
        raise ValueError("the mip strategy cannot be its own heuristic")
    if name == "best":
        limit = budget.remaining()
        sol = call(best.solve, problem, context, improve=False, seed=seed,
                   time_limit=limit if math.isfinite(limit) and limit > 0 else best.DEFAULT_TIME_LIMIT)
        member = sol.stats.get("member")
    else:  # as a member of best's portfolio: the context's sweep, the seed, no time limit
        sol = call(name, problem, context.derive(time_limit=None, node_limit=None, seed=seed))
        member = name if isinstance(name, str) else getattr(name, "__name__", "custom")
    offsets = sol.offsets if hasattr(sol, "offsets") else sol
    offsets = None if offsets is None else np.asarray(offsets, dtype=np.int64)
    if offsets is None or not _is_valid(problem, offsets):
        raise ValueError(f"the heuristic {name!r} gave no valid plan")
    offsets = compact(problem, offsets, sweep=sweep)
    offsets[(problem.sizes == 0) & ~problem.is_fixed] = 0  # empty rows anywhere: put them at 0
    return offsets, member


def _is_valid(problem, offsets) -> bool:
    from dsa.validator import validate

    try:
        validate(problem, offsets, check_capacity=False)
    except ValueError:
        return False
    return True


def solve(problem, *, backend: str = "highs", time_limit: float | None = DEFAULT_TIME_LIMIT,
          mip_rel_gap: float = 0.0, verbose: bool = False, heuristic="best", seed=None,
          sweep=None, context=None):
    """Minimise the peak with a big-M MIP (Sekiyama et al. 2018), starting from a heuristic plan.

    Parameters
    ----------
    problem : Problem
    backend : {"highs", "cbc", "gurobi"}, default "highs"
        The MIP solver: HiGHS through scipy, CBC through python-mip, or Gurobi through gurobipy.
    time_limit : float or None, default 10.0
        Seconds for the whole call (heuristic, model, solver); None for no limit.
    mip_rel_gap : float, default 0.0
        Stop once ``(peak - bound) / peak`` is at most this. The default 0 asks for a proof of
        optimality (the solvers' own defaults, 1e-4, would stop short of one).
    verbose : bool, default False
        Print the solver's log.
    heuristic : str or callable, default "best"
        The registered strategy (or a callable ``f(problem) -> Solution or offsets``) whose plan,
        compacted, is the incumbent: its peak bounds the model and it is the warm start. ``"best"``
        runs without its improvement phase.
    seed : int, optional
        Seed of the heuristic's randomised members.
    sweep : dsa.sweep.Sweep, optional
        The shared time-axis facts (the context's sweep when ``context`` is given).
    context : dsa.context.Context, optional
        The planning context (passed by :func:`dsa.solve` through :func:`dsa.strategies.call`): its
        sweep and lower bound are used, the heuristic runs in it, and its plan is offered as the
        incumbent.

    Returns
    -------
    Solution
        The best plan found: the solver's, or the heuristic's when the solver found nothing lower.
        ``lower_bound`` is what was proven: the solver's dual bound rounded up (at least LOAD); it
        equals the peak, and the status is OPTIMAL, when optimality was proven. LIMIT_REACHED when
        the time limit stopped the solver first; FEASIBLE when the solver stopped for another reason
        (``message`` says which); ERROR, with no plan, when the solver could not run (such as a model
        above Gurobi's size-limited licence). ``stats``: ``backend``, ``solver_status`` (the solver's
        own), ``nodes`` (None where the backend does not report them), ``gap``,
        ``upper_bound_start`` (the heuristic's peak), ``heuristic`` (its winning member),
        ``improved`` (bytes below it), ``model`` (variable and constraint counts, ``unit`` in bytes,
        ``scale`` and ``relaxed``: whether a coarser relaxation was solved, see the module's
        "Numerics"; whether the backend got a ``warm_start``), ``rejected_bound`` (a solver bound
        above a valid plan's peak, discarded) and ``solver_s``.

    Raises
    ------
    ImportError
        When the backend's package is not installed, naming the ``pip install`` extra.
    ValueError
        For an unknown backend or a negative ``mip_rel_gap``.

    Examples
    --------
    >>> import dsa
    >>> sol = dsa.solve([(0, 2, 3), (2, 4, 3), (1, 3, 4)], "mip")  # doctest: +SKIP
    >>> sol.peak, sol.status.value  # doctest: +SKIP
    (7, 'optimal')
    """
    from dsa.strategies._mip_model import build_model, proven_units

    name, module = _backend(backend)
    if not (isinstance(mip_rel_gap, (int, float)) and mip_rel_gap >= 0):
        raise ValueError(f"mip_rel_gap must be a non-negative number, got {mip_rel_gap!r}")
    budget = Budget(time_limit)
    context = context if context is not None else Context(problem, sweep=sweep)
    sweep = context.sweep
    bound = context.lower_bound
    offsets, member = _heuristic(problem, context, budget, seed, heuristic)
    context.offer(offsets)
    start_peak = plan_peak(problem, offsets)
    stats = {"backend": name, "upper_bound_start": start_peak, "heuristic": member, "nodes": 0,
             "improved": 0, "solver_status": None, "solver_s": 0.0}
    if start_peak <= bound:
        stats.update(solver_status="not run: the heuristic plan reaches the lower bound")
        return make_solution(problem, offsets, strategy="mip", stats=stats,
                             message="optimal: the heuristic plan reaches the lower bound")

    pairs = sweep.n_overlaps  # counted in O(n log n): the graph itself is built only for a model
    if pairs > MAX_PAIRS:
        stats.update(solver_status=f"not run: {pairs} overlapping pairs, above MAX_PAIRS={MAX_PAIRS}")
        return make_solution(problem, offsets, strategy="mip", stats=stats,
                             message=f"the model would have {pairs} order binaries (more than {MAX_PAIRS}); "
                                     f"the plan is the heuristic's ({stats['heuristic']})")

    # HiGHS and CBC (no warm start) are asked for a strictly lower peak; Gurobi gets the plan as a start.
    # The model is solved in units where its numbers stay within TRUSTED_UNITS: exactly (the gcd
    # unit) when that is enough, otherwise as the rounded-down relaxation of _coarse().
    warm = module.WARM_START
    upper = start_peak if warm else start_peak - 1
    scale = _scale(problem, upper)
    if scale == 1:
        target, target_sweep, target_bound = problem, sweep, bound
        target_start = offsets
    else:
        target = _coarse(problem, scale)
        target_sweep = Sweep(target)
        target_bound = lower_bound(target, sweep=target_sweep)
        target_start = offsets // scale  # the incumbent's image: a plan of the relaxation
    model = build_model(target, target_sweep, upper=upper // scale, lower=target_bound,
                        incumbent=target_start if warm else None)
    stats["model"] = {**model.counts, "unit": model.unit * scale, "scale": scale,
                      "relaxed": scale > 1, "warm_start": model.start is not None}
    if model.empty is not None:
        result = None
        outcome, dual = "infeasible", None
        stats["solver_status"] = f"not run: no plan under the admitted peak ({model.empty})"
    else:
        t0 = time.perf_counter()
        limit = None if time_limit is None else max(budget.remaining(), MIN_SOLVER_TIME)
        result = module.solve_model(model, time_limit=limit, mip_rel_gap=mip_rel_gap, verbose=verbose)
        stats["solver_s"] = time.perf_counter() - t0
        stats.update(solver_status=result.solver_status, nodes=result.nodes)
        outcome, dual = result.outcome, result.dual_bound
    if outcome == "error":
        return make_solution(problem, None, strategy="mip", stats=stats, error=result.message)

    # the solver's plan, checked in exact arithmetic; a relaxation's plan gives an order, re-placed
    best, peak = offsets, start_peak
    if result is not None and result.x is not None:
        candidate = model.offsets(target, result.x) * scale
        if scale > 1 or not _is_valid(problem, candidate):  # tolerances can leave a byte of overlap
            from dsa.compaction import compact

            candidate = compact(problem, candidate, sweep=sweep)  # lowest fit in the solver's order
            stats["repaired"] = scale == 1
        if _is_valid(problem, candidate) and plan_peak(problem, candidate) < peak:
            best, peak = candidate, plan_peak(problem, candidate)
    stats["improved"] = start_peak - peak

    # what was proven: the model admits peaks up to model.upper units; an optimum above that is a
    # multiple of the unit, so at least (model.upper + 1) units. A plan of peak P of the problem maps
    # to one of peak at most P // scale of the relaxation, so a bound B there gives scale * B here.
    # An "infeasible" verdict on a model that holds the warm start is a numerical accident and
    # proves nothing.
    if outcome == "infeasible" and model.start is not None:
        outcome, dual = "other", None
    units = model.upper + 1 if outcome == "infeasible" else proven_units(dual)
    proven = 0
    if units is not None:
        proven = min(units, model.upper + 1) * model.unit * scale
        if proven > peak:  # above a plan checked in exact arithmetic: the solver's numerics failed
            stats["rejected_bound"] = proven
            outcome, proven = "other", 0
            stats["solver_status"] = (f"{stats['solver_status']}; its bound {stats['rejected_bound']} is "
                                      f"above the valid plan's peak {peak}, so it proves nothing")
    final_bound = max(bound, proven)
    relaxed = (f" (solved as a relaxation in units of {scale} bytes: the exact model's numbers would pass "
               f"{TRUSTED_UNITS}, beyond what the solvers' tolerances decide soundly)") if scale > 1 else ""
    # facts for finalize, which decides the status: the plan, the proven bound, whether the time
    # limit stopped the solver; the message says what the solver did
    limited = False
    if peak <= final_bound:
        message = f"optimal: {name} proved the peak {peak} minimal{relaxed}"
    elif outcome == "limit":
        limited = True
        message = (f"time limit: peak {peak}, proven lower bound {final_bound} "
                   f"({name}: {stats['solver_status']}){relaxed}")
    elif outcome in ("optimal", "infeasible"):
        message = f"solved to mip_rel_gap={mip_rel_gap}: peak {peak}, lower bound {final_bound}{relaxed}"
    else:
        message = (f"{name} stopped with status {stats['solver_status']!r}, which proves nothing; "
                   f"peak {peak}" + ("" if stats["improved"] else " (the heuristic's plan)") + relaxed)
    return make_solution(problem, best, strategy="mip", stats=stats, lower_bound=final_bound,
                         limit_reached=limited, message=message)


def _scale(problem, upper: int) -> int:
    """Bytes per unit of the relaxation to solve: 1 (the exact model) when the exact model's numbers
    (its peak bound ``upper`` in its own units) stay within :data:`TRUSTED_UNITS`, otherwise the
    smallest multiple of its unit that brings them there."""
    from dsa.strategies._mip_model import model_unit

    unit = model_unit(problem)
    horizon = upper // unit
    if horizon <= TRUSTED_UNITS:
        return 1
    return unit * -(-horizon // TRUSTED_UNITS)


def _coarse(problem, scale: int):
    """The relaxation of ``problem`` in units of ``scale`` bytes: sizes and fixed offsets rounded
    down, alignments dropped.

    A valid plan ``o`` of the problem gives the valid plan ``o // scale`` of the relaxation, because
    ``a // k + b // k <= (a + b) // k``: a row below another stays below it. Its peak is at most
    ``peak // scale``, so the relaxation's optimum ``R`` bounds the problem's: ``OPT >= scale * R``,
    and a relaxation without a plan under ``U // scale`` proves that the problem has none under ``U``.
    Rows smaller than ``scale`` become empty.
    """
    from dsa.problem import Problem

    fixed = problem.is_fixed
    return Problem(problem.starts, problem.ends, problem.sizes // scale,
                   fixed_offsets=np.where(fixed, problem.fixed_offsets // scale, -1))
