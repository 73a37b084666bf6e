"""The front end: ``dsa.solve(problem, strategy=...)``.

Three phases, as in scipy's ``milp``: (1) check and coerce the input, resolve the strategy and its
options; (2) call the strategy; (3) translate its result into a final :class:`~dsa.Solution` (peak,
lower bound, status) and run the independent validator on it.
"""
from __future__ import annotations

import dataclasses
import inspect
import time
import warnings
from typing import Callable

import numpy as np

from dsa._kernels import jit_seconds
from dsa.bounds import lower_bound
from dsa.budget import check_seed, check_time_limit
from dsa.problem import Problem, as_problem
from dsa.solution import Solution, Status, finalize, make_solution
from dsa.strategies import get_strategy, resolve_name
from dsa.sweep import Sweep

__all__ = ["solve", "UnknownOptionWarning"]


class UnknownOptionWarning(UserWarning):
    """An option passed to :func:`dsa.solve` that the chosen strategy does not take (it is ignored)."""


def _accepted(fn: Callable) -> tuple[set, bool]:
    """Keyword names ``fn`` accepts after the problem, and whether it takes ``**kwargs``."""
    params = list(inspect.signature(fn).parameters.values())[1:]
    names = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    return names, any(p.kind == p.VAR_KEYWORD for p in params)


def solve(problem, strategy="greedy_by_size", *, capacity=None, time_limit=None, seed=None,
          validate: bool = True, **options) -> Solution:
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
        (``stats["jit_s"]``) is not counted: the deadline moves by it, so that the plan does not
        depend on the state of numba's cache, and a first call in a process with an empty cache can
        take its time limit plus that compile time (seconds). Run :func:`dsa.warmup` (``python -m
        dsa warmup``) once beforehand to fill the cache.
    seed : int, optional
        A non-negative integer, passed to randomised strategies; the same seed gives the same plan.
    validate : bool, default True
        Run :func:`dsa.validate` on the plan; a plan that fails is returned with status ERROR.
        With ``validate=False`` the plan is returned with status UNCHECKED and ``success=False``:
        only a validated plan counts as a success.
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
    Strategies whose ``solve`` takes a ``sweep`` argument receive the shared planning context, a
    :class:`dsa.sweep.Sweep` of the problem (time-overlap graph, sections, busy periods), built
    once per call.

    Raises
    ------
    ValueError
        For invalid input (naming the row and the rule), an invalid ``time_limit`` or ``seed``, or an
        unknown strategy (listing valid names).
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
    if callable(strategy):
        fn, name = strategy, getattr(strategy, "__name__", "custom")
    elif isinstance(strategy, str):
        name = resolve_name(strategy)
        fn = get_strategy(name)
    else:
        raise TypeError(f"strategy must be a name or a callable, got {type(strategy).__name__}")
    names, var_kw = _accepted(fn)
    sweep = Sweep(problem)  # the shared planning context; each fact is computed on first use
    call = {}
    for key, value in (("time_limit", time_limit), ("seed", seed), ("sweep", sweep)):
        if value is not None and (key in names or var_kw):
            call[key] = value
    if "sweep" in options:
        raise TypeError("sweep is computed by dsa.solve; do not pass it")
    unknown = sorted(k for k in options if k not in names and not var_kw)
    if unknown:
        warnings.warn(f"strategy {name!r} ignores unknown options {unknown}; it takes {sorted(names) or 'none'}",
                      UnknownOptionWarning, stacklevel=2)
    call.update({k: v for k, v in options.items() if k in names or var_kw})

    # phase 2: the strategy
    bound = lower_bound(problem, sweep=sweep)
    jit0 = jit_seconds()
    t0 = time.perf_counter()
    raw = fn(problem, **call)
    elapsed = time.perf_counter() - t0
    if raw is None:
        raw = make_solution(problem, None, strategy=name, status=Status.ERROR,
                            message="the strategy returned None instead of a Solution or offsets")
    elif not isinstance(raw, Solution):
        raw = _from_offsets(problem, raw, name)
    elif raw.offsets is not None and np.shape(raw.offsets) != (len(problem),):
        raw = _from_offsets(problem, raw.offsets, name)
    if not raw.strategy:
        raw = dataclasses.replace(raw, strategy=name)

    # phase 3: status translation and validation
    error = None
    if validate and raw.offsets is not None:
        from dsa.validator import validate as check

        try:
            check(problem, raw.offsets, check_capacity=False)
        except ValueError as exc:
            error = str(exc)
    return finalize(problem, raw, bound, error=error, checked=validate,
                    extra_stats={"time_s": elapsed, "jit_s": jit_seconds() - jit0})


def _from_offsets(problem, raw, name: str) -> Solution:
    """A strategy's bare offsets as a Solution; a wrong shape, non-integer values, negative offsets or
    an ``offset + size`` beyond int64 give ERROR without a plan (see :func:`dsa.solution.as_offsets`).

    These checks run whatever ``validate`` says: they decide whether there is a plan at all.
    """
    return make_solution(problem, raw, strategy=name)
