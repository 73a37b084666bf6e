"""The front end: ``dsa.solve(problem, strategy=...)``.

Three phases, as in scipy's ``milp``: (1) check and coerce the input, resolve the strategy and its
options; (2) call the strategy; (3) translate its result into a final :class:`~dsa.Solution` (peak,
lower bound, status) and run the independent validator on it.
"""
from __future__ import annotations

import dataclasses
import time
import warnings

import numpy as np

from dsa._kernels import jit_seconds
from dsa.budget import check_seed, check_time_limit
from dsa.context import Context
from dsa.problem import Problem, as_problem
from dsa.solution import Solution, Status, finalize, make_solution
from dsa.strategies import call, get_pool_strategy, get_strategy, resolve_name, strategy_options

__all__ = ["solve", "conclude", "conclude_pools", "UnknownOptionWarning"]


class UnknownOptionWarning(UserWarning):
    """An option passed to :func:`dsa.solve` that the chosen strategy does not take (it is ignored)."""


def solve(problem, strategy="greedy_by_size", *, capacity=None, time_limit=None, seed=None,
          validate: bool = True, pools=None, allowed=None, weights=None, **options) -> Solution:
    """Plan offsets for every buffer of ``problem`` so that buffers alive together never overlap.

    Parameters
    ----------
    problem : Problem, list of (start, end, size) tuples, or list of dicts
        The buffers; see :class:`dsa.Problem` and :meth:`dsa.Problem.from_intervals`.
    strategy : str or callable, default "greedy_by_size"
        A name from :func:`dsa.available_strategies` (or an alias), or a callable
        ``f(problem, **options)`` returning a :class:`~dsa.Solution` or an array of offsets.
    capacity : int, optional
        Slab size; overrides ``problem.capacity``. A plan above it is reported with ``success=False``.
    time_limit : float, optional
        Seconds (a positive number; not a bool); passed to strategies that take it, ignored by the
        fast heuristics. Time spent importing numba and compiling or loading kernels during the call
        (``stats["jit_s"]``) is not counted: the deadline moves by it, and a first call in a process
        with an empty cache can take its time limit plus that compile time (seconds). ``jit_s`` also
        holds the time that kernels not compiled yet spent running as Python on small calls instead
        (``dsa._kernels.python_path``: the same results, without compiling). With an empty
        cache, ``best`` skips its skyline search in calls of less than 5 s (its kernel takes about
        3 s to compile; ``stats["skyline"]`` says so). Run :func:`dsa.warmup` (``python -m dsa
        warmup``) once beforehand to fill the cache: calls then keep their limits within a few
        hundredths of a second.
    seed : int, optional
        A non-negative integer, passed to randomised strategies; the same seed gives the same plan.
    validate : bool, default True
        Run :func:`dsa.validate` on the plan; a plan that fails is returned with status ERROR.
        With ``validate=False`` the plan is returned with status UNCHECKED and ``success=False``:
        only a validated plan counts as a success.
    pools : sequence of dsa.Pool, optional
        Plan over several memories (see :mod:`dsa.pools` and the guide's page on pools): every row
        gets a pool it may use (``Solution.pool``) and an offset inside it, and the cost
        ``sum_i cost(pool of i) * weight_i`` is minimised. With one pool this is the classic problem
        with the pool's capacity (any strategy; the Solution also gets the pool fields). With more,
        the strategy must plan pools: ``fastest_first`` (the baseline), ``best``, ``exact``. Not
        together with ``capacity``.
    allowed : optional
        With ``pools``: the pools each row may use, as a boolean matrix (rows x pools) or one entry
        per row (a pool name, a list of names, or None for all). Default: every pool.
    weights : array_like, optional
        With ``pools``: the weight of each row in the cost (default: its size).
    **options
        Strategy options (such as ``order=`` and ``fit=`` for ``"greedy"``). Options the strategy does
        not take raise an :class:`UnknownOptionWarning` naming them and are ignored.

    Returns
    -------
    Solution
        ``offsets`` in row order, ``peak``, ``lower_bound`` (the larger of LOAD and any bound the
        strategy proved), ``status``, ``success``, ``message``, ``strategy`` and ``stats`` (with
        ``time_s``, the strategy's wall time; ``jit_s``, the part of the call spent importing numba
        and compiling or cache-loading its kernels, which only the first calls in a process pay;
        and ``gap``, ``(peak - lower_bound) / peak``).

    Notes
    -----
    ``solve`` builds one planning context per call, a :class:`dsa.context.Context` (the sweep of
    the problem with its time-overlap graph, sections, busy periods and LOAD; the lower bound; the
    time and node limits; the incumbent), and runs the strategy through
    :func:`dsa.strategies.call`: a strategy whose ``solve`` takes ``context`` receives it, one that
    takes ``sweep`` its :class:`dsa.sweep.Sweep`. The strategy returns offsets and the facts of its
    run (any bound it proved, whether a limit stopped it); :func:`conclude` validates the plan and
    :func:`dsa.solution.finalize` alone decides the status and the gap.

    Raises
    ------
    ValueError
        For invalid input (naming the row and the rule), an invalid ``time_limit`` or ``seed``, an
        unknown strategy (listing valid names), invalid pools (see :func:`dsa.pools.check_pools`), or
        a strategy that does not plan several pools.
    TypeError
        If ``problem`` is not a Problem or a list of intervals.

    Examples
    --------
    >>> import dsa
    >>> sol = dsa.solve([(0, 3, 4), (3, 9, 4), (0, 9, 4), (9, 21, 4), (0, 21, 4)])
    >>> sol.peak, sol.lower_bound, sol.status.value
    (12, 12, 'optimal')
    """
    # phase 1: input
    problem = as_problem(problem, capacity=capacity)
    time_limit = check_time_limit(time_limit)
    seed = check_seed(seed)
    spec = None
    if pools is not None:
        from dsa.pools import check_pools

        spec = check_pools(problem, pools, allowed, weights)
    elif allowed is not None or weights is not None:
        raise ValueError("allowed and weights describe memory pools: give pools=[...] too")
    several = spec is not None and len(spec) > 1
    if spec is not None and not several:
        problem = problem.replace(capacity=spec.capacity(0))  # one pool: the classic problem, in its capacity
    if callable(strategy):
        fn, name = strategy, getattr(strategy, "__name__", "custom")
    elif isinstance(strategy, str):
        name = resolve_name(strategy)
        fn = get_pool_strategy(name) if several else get_strategy(name)
    else:
        raise TypeError(f"strategy must be a name or a callable, got {type(strategy).__name__}")
    names, var_kw = strategy_options(fn)
    for key in ("sweep", "context"):
        if key in options:
            raise TypeError(f"{key} is computed by dsa.solve; do not pass it")
    unknown = sorted(k for k in options if k not in names and not var_kw)
    if unknown:
        warnings.warn(f"strategy {name!r} ignores unknown options {unknown}; it takes {sorted(names) or 'none'}",
                      UnknownOptionWarning, stacklevel=2)
    # the planning context: sweep (each fact computed on first use), bound, budget, incumbent
    node_limit = options.pop("node_limit", None) if "node_limit" in names else None
    context = Context(problem, time_limit=time_limit, node_limit=node_limit, seed=seed,
                      pools=spec if several else None)
    options = {k: v for k, v in options.items() if k in names or var_kw}

    # phase 2: the strategy
    bound = context.lower_bound
    jit0 = jit_seconds()
    t0 = time.perf_counter()
    raw = call(fn, problem, context, **options)
    elapsed = time.perf_counter() - t0

    # phase 3: status translation and validation
    extra = {"time_s": elapsed, "jit_s": jit_seconds() - jit0}
    if several:
        return conclude_pools(problem, spec, raw, strategy=name, validate=validate, extra_stats=extra)
    sol = conclude(problem, raw, strategy=name, validate=validate, lower_bound=bound, extra_stats=extra)
    if spec is not None:  # one pool: today's plan, with the pool fields
        sol = _one_pool(problem, spec, sol)
    return sol


def _one_pool(problem, spec, sol: Solution) -> Solution:
    """A plan of the classic problem as a plan over its single pool (status and bound unchanged)."""
    n = len(problem)
    if sol.offsets is None:
        return dataclasses.replace(sol, pool_names=spec.names)
    pool = np.zeros(n, dtype=np.int64)
    cost = spec.cost(pool)
    return dataclasses.replace(sol, pool=pool, pool_peaks=(sol.peak,), pool_names=spec.names, cost=cost,
                               cost_bound=cost if sol.status is not Status.INFEASIBLE else float("inf"),
                               stats={**sol.stats, "pool_weights": spec.pool_weights(pool)})


def conclude_pools(problem, spec, raw, *, strategy: str | None = None, validate: bool = True,
                   extra_stats: dict | None = None) -> Solution:
    """The final :class:`~dsa.Solution` of a plan over several pools: :func:`conclude`'s counterpart.

    The raw result (a Solution with ``pool`` and ``offsets``, from
    :func:`dsa.pools.make_pool_solution`) is checked by :func:`dsa.validate` against ``spec`` (a
    :class:`dsa.pools.PoolSpec`), and :func:`dsa.pools.finalize_pools` decides its status.
    """
    from dsa.pools import finalize_pools, make_pool_solution

    name = strategy or ""
    if not isinstance(raw, Solution):
        raw = make_pool_solution(problem, spec, None, None, strategy=name, error=(
            "a strategy over pools must return a Solution with pool and offsets "
            f"(dsa.pools.make_pool_solution), got {type(raw).__name__}"))
    if not raw.strategy and name:
        raw = dataclasses.replace(raw, strategy=name)
    error = None
    if validate and raw.pool is not None and raw.offsets is not None:
        from dsa.validator import validate as check

        try:
            check(problem, (raw.pool, raw.offsets), pools=spec, check_capacity=True)
        except ValueError as exc:
            error = str(exc)
    return finalize_pools(problem, spec, raw, error=error, checked=validate, extra_stats=extra_stats)


def conclude(problem, raw, *, strategy: str | None = None, validate: bool = True, lower_bound=None,
             extra_stats: dict | None = None, engine: str = "auto") -> Solution:
    """The final :class:`~dsa.Solution` of a strategy's raw result: phase 3 of :func:`dsa.solve`.

    The raw result is coerced to a Solution (bare offsets and None are accepted, as from any
    strategy), its plan is checked by :func:`dsa.validate` (unless ``validate`` is False), and
    :func:`dsa.solution.finalize` decides its status, lower bound and gap. Code that runs a strategy
    elsewhere (the torch adapter's planner process, its in-thread portfolio head) ends with this, so
    that its plans are checked and reported exactly as :func:`dsa.solve`'s.

    Parameters
    ----------
    problem : Problem
        The problem the strategy planned.
    raw : Solution, array_like of int, or None
        What the strategy returned.
    strategy : str, optional
        The strategy's name, for a raw result that does not carry one.
    validate : bool, default True
        Run the validator; with False a plan is reported UNCHECKED (see :func:`dsa.solve`).
    lower_bound : int, optional
        The front end's bound (:func:`dsa.lower_bound` of ``problem`` when None).
    extra_stats : dict, optional
        Added to the Solution's ``stats``.
    engine : {"auto", "numpy", "kernel"}, default "auto"
        The validator's engine (see :func:`dsa.validate`): ``"numpy"`` checks without numba, as a
        process that must not load it (the torch adapter's served process) needs.

    Returns
    -------
    Solution

    Examples
    --------
    >>> import dsa
    >>> from dsa.solver import conclude
    >>> p = dsa.Problem([0, 1], [2, 3], [4, 4])
    >>> conclude(p, [0, 4], strategy="by hand").status.value
    'optimal'
    >>> conclude(p, [0, 2], strategy="by hand").status.value
    'error'
    """
    name = strategy or ""
    if raw is None:
        raw = make_solution(problem, None, strategy=name, status=Status.ERROR,
                            message="the strategy returned None instead of a Solution or offsets")
    elif not isinstance(raw, Solution):
        raw = _from_offsets(problem, raw, name)
    elif raw.offsets is not None and np.shape(raw.offsets) != (len(problem),):
        raw = _from_offsets(problem, raw.offsets, name)
    if not raw.strategy and name:
        raw = dataclasses.replace(raw, strategy=name)
    if lower_bound is None:
        from dsa.bounds import lower_bound as bound_of

        lower_bound = bound_of(problem)
    error = None
    if validate and raw.offsets is not None:
        from dsa.validator import validate as check

        try:
            check(problem, raw.offsets, check_capacity=False, engine=engine)
        except ValueError as exc:
            error = str(exc)
    return finalize(problem, raw, lower_bound, error=error, checked=validate, extra_stats=extra_stats)


def _from_offsets(problem, raw, name: str) -> Solution:
    """A strategy's bare offsets as a Solution; a wrong shape, non-integer values, negative offsets or
    an ``offset + size`` beyond int64 give ERROR without a plan (see :func:`dsa.solution.as_offsets`).

    These checks run whatever ``validate`` says: they decide whether there is a plan at all.
    """
    return make_solution(problem, raw, strategy=name)
