"""Plan many problems in one call: ``dsa.solve_many(problems, strategy, n_jobs=...)``.

Serial in this process by default; with ``n_jobs`` > 1 (or -1 for every core) through joblib, with its
default backend (loky worker processes) or whichever backend ``joblib.parallel_config(backend=...)``
selects: Dask's (``"dask"``, with a ``distributed.Client``) or Ray's (``"ray"``, after
``ray.util.joblib.register_ray()``) run the same call on a cluster.

How one entry can fail without taking the batch down:

* every problem is converted in the calling process; one that is not a valid problem becomes that
  entry's failed :class:`~dsa.Solution` (status ERROR, ``offsets`` None, a message that says why);
* a strategy that raises in a worker is caught there and reported the same way;
* a worker process that dies (a crash, the kernel's OOM killer) or a task that runs past ``timeout``
  stops joblib's pass over the batch; the results that came back are kept, and the problems still
  out are planned again a few at a time, then one at a time, so that only the problem that kills its
  worker (or runs past ``timeout`` alone) is reported as failed;
* the calling process validates every plan that comes back from a worker with :func:`dsa.validate`:
  ``success`` is true only for a plan the validator accepted here.

Problems travel to workers as plain numpy arrays (starts, ends, sizes, alignments, fixed offsets; ids
only when they are not ``0..n-1``) and are rebuilt there; offsets, status, bound, message and stats
come back.
"""
from __future__ import annotations

import os
import sys
import time
import warnings
from typing import Any

__all__ = ["solve_many"]

# while a worker plans a problem of a parallel batch, strategies use one thread (see dsa.budget)
WORKER_THREADS = 1
# after a worker died or a task timed out, the problems still out are planned this many times the
# number of workers at a time; a group that fails again is planned one problem at a time
RETRY_GROUP = 1


def solve_many(problems, strategy="greedy_by_size", *, n_jobs=None, progress: bool = False,
               timeout=None, **solve_options) -> list:
    """Plan every problem of ``problems`` with :func:`dsa.solve`, in parallel with ``n_jobs`` > 1.

    Parameters
    ----------
    problems : iterable
        Each entry is what :func:`dsa.solve` takes (a :class:`~dsa.Problem`, a list of
        ``(start, end, size)`` tuples or of dicts) or the path of a CSV or JSON file
        (:func:`dsa.read`). Entries are converted in the calling process.
    strategy : str or callable, default "greedy_by_size"
        As for :func:`dsa.solve`. With ``n_jobs`` > 1 a callable must be picklable by the backend
        (loky and Dask use cloudpickle, so a function defined in a script or a test works).
    n_jobs : int, optional
        ``None`` or 1: one problem after the other in this process. ``None`` inside
        ``joblib.parallel_config(...)`` follows it instead, as scikit-learn does: its ``n_jobs``, or
        with a backend other than loky (``"dask"``, ``"ray"``) and no ``n_jobs``, that backend's
        workers. An integer > 1: that many
        workers; -1: one per core (joblib's convention, ``-2`` one fewer, and so on). In workers,
        strategies run on one thread each: exact's raced searches, best's greedy pool, HiGHS,
        CBC and Gurobi (see :func:`dsa.budget.thread_limit`), and numba.
    progress : bool, default False
        Show a progress bar on stderr: problems done out of the total, failures and time to go.
        With tqdm installed (``pip install 'dsa-planner[progress]'``) a tqdm bar, else a line on
        stderr every few seconds.
    timeout : float, optional
        Wall-clock seconds one problem may take in a worker (joblib's ``timeout``; it needs
        ``n_jobs`` > 1: ``time_limit`` is what stops a strategy in this process). A problem that
        takes longer is planned once more alone and, if it times out again, reported as failed.
    **solve_options
        Passed to :func:`dsa.solve` for every problem: ``capacity``, ``time_limit``, ``seed``,
        ``validate`` and the strategy's own options.

    Returns
    -------
    list of Solution
        One per problem, in the order of ``problems``. An entry that could not be planned has
        ``success=False``, status ERROR, no offsets and a ``message`` that starts with
        ``"problem <index>: "`` and says why. Each entry's ``stats["time_s"]`` is the strategy's
        time where it ran.

    Raises
    ------
    ValueError
        For an invalid ``n_jobs`` (0, not an integer), ``problems`` that is not an iterable of
        problems, an unknown strategy name, an invalid ``time_limit``, ``seed`` or ``timeout``.
    ImportError
        When ``n_jobs`` asks for workers and joblib is missing, or the strategy needs an optional
        extra that is missing (naming the extra).

    See Also
    --------
    dsa.solve : plans one problem.

    Examples
    --------
    >>> import dsa
    >>> from dsa.generate import random_trace
    >>> problems = [random_trace(200, seed=s) for s in range(4)] + [[(0, 3, -1)]]
    >>> sols = dsa.solve_many(problems, "greedy_by_size")
    >>> [s.success for s in sols]
    [True, True, True, True, False]
    >>> sols[4].message
    'problem 4: row 0: size must be >= 0, got -1'
    """
    n_jobs = _check_n_jobs(n_jobs)
    items = _check_problems(problems)
    name = _check_strategy(strategy)
    timeout = _check_timeout(timeout)
    from dsa.budget import check_seed, check_time_limit

    check_time_limit(solve_options.get("time_limit"))
    check_seed(solve_options.get("seed"))
    capacity = solve_options.pop("capacity", None)

    results: list = [None] * len(items)
    todo: dict[int, Any] = {}
    for i, item in enumerate(items):
        try:
            todo[i] = _convert(item, capacity)
        except (ValueError, TypeError, OSError) as exc:
            results[i] = _failed(i, name, _reason(exc))

    bar = _Progress(len(items), progress)
    for sol in results:
        if sol is not None:
            bar.done(True)
    try:
        if _parallel(n_jobs):
            _run_parallel(todo, strategy, name, solve_options, n_jobs, timeout, results, bar)
        else:
            for i, problem in todo.items():
                results[i] = _solve_here(i, problem, strategy, name, solve_options)
                bar.done(not results[i].success)
    finally:
        bar.close()
    return results


# --- argument checks ----------------------------------------------------------------------------

def _check_n_jobs(n_jobs):
    if n_jobs is None:
        return None
    import numbers

    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral) or n_jobs == 0:
        raise ValueError(f"n_jobs must be None, a positive integer or a negative one (-1: every core), "
                         f"got {n_jobs!r}")
    return int(n_jobs)


def _check_problems(problems) -> list:
    from collections.abc import Iterable, Mapping

    from dsa.problem import Problem

    if isinstance(problems, (str, bytes, os.PathLike, Problem, Mapping)) or not isinstance(problems, Iterable):
        raise ValueError("problems must be an iterable of problems (a list of dsa.Problem, of lists of "
                         f"(start, end, size) tuples, or of file paths), got {type(problems).__name__}"
                         + ("; for one problem, use dsa.solve" if isinstance(problems, Problem) else ""))
    return list(problems)


def _check_strategy(strategy) -> str:
    if callable(strategy):
        return getattr(strategy, "__name__", "custom")
    if not isinstance(strategy, str):
        raise ValueError(f"strategy must be a name or a callable, got {type(strategy).__name__}")
    from dsa.strategies import resolve_name, strategy_info

    name = resolve_name(strategy)
    info = strategy_info(name)
    if not info.available:
        raise ImportError(f"strategy {name!r} needs {', '.join(info.requires)}: "
                          f"pip install 'dsa-planner[{info.extra}]'")
    return name


def _check_timeout(timeout):
    if timeout is None:
        return None
    from dsa.budget import check_time_limit

    try:
        return check_time_limit(timeout)
    except ValueError:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}") from None


def _parallel(n_jobs) -> bool:
    """Whether to plan through joblib (else one problem after the other, here)."""
    if n_jobs is not None:
        return n_jobs != 1
    joblib = sys.modules.get("joblib")  # only a caller that imported joblib can have configured it
    if joblib is None:
        return False
    from joblib.parallel import get_active_backend

    backend, configured = get_active_backend()
    if configured is not None:
        return configured != 1
    # parallel_config(backend="dask") (or "ray", "threading"...) without n_jobs: that backend's workers
    return type(backend).__name__ not in ("LokyBackend", "SequentialBackend")


# --- conversion and results ---------------------------------------------------------------------

def _convert(item, capacity):
    from dsa.problem import as_problem

    if isinstance(item, (str, os.PathLike)):
        from dsa.io import read

        return read(item, capacity=capacity)
    return as_problem(item, capacity=capacity)


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _failed(i: int, strategy: str, reason: str, stats: dict | None = None):
    from dsa.solution import Solution, Status

    return Solution(offsets=None, peak=None, lower_bound=0, status=Status.ERROR, success=False,
                    message=f"problem {i}: {reason}", strategy=strategy, stats=dict(stats or {}))


def _solve_here(i, problem, strategy, name, options):
    """Plan one problem in this process; an exception becomes a failed entry."""
    import dsa

    try:
        return dsa.solve(problem, strategy, **options)
    except Exception as exc:  # a strategy's bug costs its own entry
        return _failed(i, name, f"the strategy raised {type(exc).__name__}: {_reason(exc)}")


def _payload(problem) -> dict:
    """A problem as plain arrays for a worker (ids only when they are not ``0..n-1``)."""
    ids = problem.ids
    return {"starts": problem.starts, "ends": problem.ends, "sizes": problem.sizes,
            "alignments": problem.alignments, "fixed_offsets": problem.fixed_offsets,
            "capacity": problem.capacity, "ids": None if isinstance(ids, range) else list(ids)}


def _work(i: int, payload: dict, strategy, options: dict) -> tuple:
    """Run in a worker: rebuild the problem, plan it on one thread, send back plain values."""
    caught: list = []
    try:
        from dsa.budget import thread_limit
        from dsa.problem import Problem
        from dsa.solver import solve

        problem = Problem(payload["starts"], payload["ends"], payload["sizes"], ids=payload["ids"],
                          alignments=payload["alignments"], fixed_offsets=payload["fixed_offsets"],
                          capacity=payload["capacity"])
        previous = _pin_numba(WORKER_THREADS)
        try:
            with thread_limit(WORKER_THREADS), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                sol = solve(problem, strategy, **options)
        finally:
            _pin_numba(previous)
    except Exception as exc:
        return i, None, f"the strategy raised {type(exc).__name__}: {_reason(exc)}", _warnings_of(caught)
    out = {"offsets": sol.offsets, "peak": sol.peak, "lower_bound": sol.lower_bound,
           "status": sol.status.value, "message": sol.message, "strategy": sol.strategy,
           "stats": sol.stats, "conflict": sol.conflict, "pool": sol.pool, "pool_peaks": sol.pool_peaks,
           "pool_names": sol.pool_names, "cost": sol.cost, "cost_bound": sol.cost_bound}
    return i, out, "", _warnings_of(caught)


def _warnings_of(caught) -> list:
    return [(w.category, str(w.message)) for w in caught or ()]


def _pin_numba(n):
    """Set numba's thread count for this thread to ``n`` (if given); return the previous one."""
    if n is None:
        return None
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency
        return None
    previous = numba.get_num_threads()
    if previous != n:
        numba.set_num_threads(n)
    return previous


def _accept(i: int, problem, out: dict | None, error: str, name: str, validate: bool, options=None):
    """The Solution of a worker's answer, checked here: the worker's success flag is not trusted."""
    from dsa.solution import Solution, Status, as_conflict, plan_peak

    if out is None:
        return _failed(i, name, error)
    if out.get("pool_names") is not None and len(out["pool_names"]) > 1:
        return _accept_pools(i, problem, out, name, validate, options or {})
    status = Status(out["status"])
    offsets = out["offsets"]
    if offsets is not None:
        import numpy as np

        offsets = np.asarray(offsets)
        if offsets.shape != (len(problem),) or offsets.dtype != np.int64:
            return _failed(i, name, "the worker sent back offsets that are not one int64 per row")
        if validate and status is not Status.ERROR:
            from dsa.validator import validate as check

            try:
                check(problem, offsets, check_capacity=False)
            except ValueError as exc:
                return _failed(i, name, f"the worker's plan is invalid: {_reason(exc)}")
        if plan_peak(problem, offsets) != out["peak"]:
            return _failed(i, name, "the worker's peak does not match its plan")
    cap = problem.capacity
    success = (offsets is not None and validate
               and status in (Status.OPTIMAL, Status.FEASIBLE, Status.LIMIT_REACHED)
               and (cap is None or out["peak"] <= cap))
    return Solution(offsets=offsets, peak=out["peak"], lower_bound=int(out["lower_bound"]), status=status,
                    success=success, message=out["message"], strategy=out["strategy"], stats=out["stats"],
                    conflict=as_conflict(problem, out.get("conflict")) if status is Status.INFEASIBLE else None,
                    pool=out.get("pool"), pool_peaks=out.get("pool_peaks"), pool_names=out.get("pool_names"),
                    cost=out.get("cost"), cost_bound=out.get("cost_bound"))


def _accept_pools(i: int, problem, out: dict, name: str, validate: bool, options: dict):
    """:func:`_accept` of a plan over several pools: checked against the pools of ``options``."""
    import numpy as np

    from dsa.pools import check_pools, pool_peaks
    from dsa.solution import Solution, Status, as_conflict

    spec = check_pools(problem, options["pools"], options.get("allowed"), options.get("weights"))
    status = Status(out["status"])
    pool, offsets = out["pool"], out["offsets"]
    if (pool is None) != (offsets is None):
        return _failed(i, name, "the worker sent back a pool assignment without offsets, or offsets without one")
    if offsets is not None:
        pool, offsets = np.asarray(pool), np.asarray(offsets)
        if offsets.shape != (len(problem),) or offsets.dtype != np.int64 or pool.shape != offsets.shape:
            return _failed(i, name, "the worker sent back offsets or pools that are not one int64 per row")
        if validate and status is not Status.ERROR:
            from dsa.validator import validate as check

            try:
                check(problem, (pool, offsets), pools=spec, check_capacity=True)
            except ValueError as exc:
                return _failed(i, name, f"the worker's plan is invalid: {_reason(exc)}")
        if tuple(pool_peaks(problem, spec, pool, offsets)) != tuple(out["pool_peaks"]) or \
                spec.cost(pool) != out["cost"]:
            return _failed(i, name, "the worker's pool peaks or cost do not match its plan")
    success = (offsets is not None and validate
               and status in (Status.OPTIMAL, Status.FEASIBLE, Status.LIMIT_REACHED))
    return Solution(offsets=offsets, peak=out["peak"], lower_bound=int(out["lower_bound"]), status=status,
                    success=success, message=out["message"], strategy=out["strategy"], stats=out["stats"],
                    conflict=as_conflict(problem, out.get("conflict")) if status is Status.INFEASIBLE else None,
                    pool=pool, pool_peaks=out["pool_peaks"], pool_names=tuple(out["pool_names"]),
                    cost=out["cost"], cost_bound=out["cost_bound"])


# --- the parallel run ---------------------------------------------------------------------------

def _run_parallel(todo: dict, strategy, name: str, options: dict, n_jobs, timeout, results: list, bar):
    try:
        import joblib
    except ImportError as exc:
        raise ImportError("dsa.solve_many with n_jobs > 1 needs joblib: pip install joblib "
                          "(it comes with dsa-planner)") from exc

    validate = bool(options.get("validate", True))
    payloads = {i: _payload(p) for i, p in todo.items()}
    seen: dict = {}

    def take(answer):
        i, out, error, caught = answer
        for category, text in caught:
            if (category, text) not in seen:  # each warning once for the batch, in this process
                seen[category, text] = True
                warnings.warn(text, category, stacklevel=4)
        results[i] = _accept(i, todo[i], out, error, name, validate, options)
        bar.done(not results[i].success)

    # answers as they complete where the backend can (loky, dask); else all at the end (Ray's backend
    # supports neither generator mode): then a failure loses the pass, and the retries below redo it
    modes = ["generator_unordered", "list"]

    def run(indices, **kw) -> BaseException | None:
        """Plan ``indices``; keep every answer that comes back; the exception that stopped the pass."""
        while True:
            tasks = (joblib.delayed(_work)(i, payloads[i], strategy, options) for i in indices)
            try:
                for answer in joblib.Parallel(n_jobs=n_jobs, return_as=modes[0], timeout=timeout, **kw)(tasks):
                    take(answer)
            except ValueError as exc:
                if "return_as" in str(exc) and len(modes) > 1:  # joblib: this backend cannot
                    modes.pop(0)
                    continue
                return exc
            except Exception as exc:  # a worker died, a task timed out, the cluster went away
                return exc
            return None

    error = run(list(todo))
    if error is None:
        return
    # isolate: the rest a few at a time, a group that fails again one problem at a time
    width = max(1, joblib.effective_n_jobs(n_jobs) * RETRY_GROUP)
    pending = [i for i in todo if results[i] is None]
    for start in range(0, len(pending), width):
        group = [i for i in pending[start:start + width] if results[i] is None]
        if not group or (len(group) > 1 and run(group, batch_size=1) is None):
            continue
        for i in group:
            if results[i] is not None:
                continue
            error = run([i], batch_size=1)
            if results[i] is None:
                results[i] = _failed(i, name, _what_failed(error, timeout))
                bar.done(True)


def _what_failed(error, timeout) -> str:
    if error is None:  # pragma: no cover - a pass without error returns every answer
        return "no answer came back from the worker"
    kind = type(error).__name__
    if ("Timeout" in kind or "TimeOut" in kind) and timeout is not None:
        return f"timed out: the problem took more than timeout={timeout:g} s in a worker"
    if "Terminated" in kind or "BrokenProcessPool" in kind or "KilledWorker" in kind:
        return f"the worker process planning it died ({kind}: {_reason(error).split('. ')[0]})"
    return f"the batch backend failed on it ({kind}: {_reason(error)})"


# --- progress -----------------------------------------------------------------------------------

class _Progress:
    """done / total, failures and the time to go on stderr: tqdm when installed, else a plain line."""

    EVERY = 2.0  # seconds between the plain lines

    def __init__(self, total: int, enabled: bool):
        self.total, self.count, self.failures = total, 0, 0
        self.bar = None
        self.enabled = bool(enabled) and total > 0
        self.t0 = self.last = time.perf_counter()
        if not self.enabled:
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:
            self.bar = None
        else:
            self.bar = tqdm(total=total, unit="problem", desc="dsa.solve_many", file=sys.stderr,
                            dynamic_ncols=True)
            self.bar.set_postfix(failed=0, refresh=False)

    def done(self, failed: bool) -> None:
        self.count += 1
        self.failures += bool(failed)
        if not self.enabled:
            return
        if self.bar is not None:
            if failed:
                self.bar.set_postfix(failed=self.failures, refresh=False)
            self.bar.update(1)
            return
        now = time.perf_counter()
        if now - self.last >= self.EVERY or self.count == self.total:
            self.last = now
            elapsed = now - self.t0
            left = elapsed / self.count * (self.total - self.count)
            try:
                print(f"dsa.solve_many: {self.count}/{self.total} done, {self.failures} failed, "
                      f"{elapsed:.0f} s elapsed, about {left:.0f} s to go", file=sys.stderr, flush=True)
            except (OSError, ValueError):  # stderr closed: the progress is a nicety
                self.enabled = False

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
