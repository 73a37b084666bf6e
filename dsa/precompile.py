"""Compile every numba kernel ahead of the first real call, into numba's on-disk cache.

A process whose numba cache is empty compiles each kernel the first time a call needs it (seconds
per kernel: ``dsa.solve(..., "best")`` needs most of them). :func:`warmup` (``python -m dsa warmup``
on the command line) pays that once, for example while building a container image, so that later
processes load the compiled kernels from the cache in milliseconds.
"""
from __future__ import annotations

import sys
import time

__all__ = ["warmup"]


def _problems():
    """Tiny problems that, together, take the kernel paths of every strategy: alignments, fixed
    offsets, and rows that all meet in time (the dense paths, without an overlap graph)."""
    import numpy as np

    from dsa.generate import random_trace
    from dsa.problem import Problem
    from dsa.sweep import DENSE_PAIRS

    sparse = random_trace(40, seed=0, kind="dnn", alignment=64)
    fixed = Problem([0, 1, 2, 3, 0, 4], [4, 5, 6, 7, 9, 8], [10, 20, 30, 40, 50, 8],
                    alignments=[1, 4, 8, 1, 2, 4], fixed_offsets=[-1, -1, 0, -1, -1, -1])
    n = int((2 * DENSE_PAIRS) ** 0.5) + 64  # every pair meets: more than DENSE_PAIRS pairs
    rng = np.random.default_rng(0)
    dense = Problem(rng.integers(0, 3, n), rng.integers(10, 14, n), rng.integers(1, 100, n) * 64)
    return [sparse, fixed], dense


def _kernel_signatures() -> int:
    """Compiled signatures of the kernels loaded in this process."""
    count = 0
    for name, module in list(sys.modules.items()):
        if name.startswith("dsa._kernels.") and module is not None:
            for value in list(vars(module).values()):
                py_func = getattr(value, "py_func", None)
                if py_func is not None and getattr(py_func, "__module__", None) == name:
                    count += len(getattr(value, "signatures", ()))
    return count


def warmup(*, verbose: bool = False) -> dict:
    """Compile (or load from numba's cache) every kernel that the strategies use.

    Solves a few tiny problems with every installed strategy except ``mip`` (whose solvers are not
    numba code), always on the kernels (never on the numpy stand-ins that small problems get by
    default, see :func:`dsa._kernels.use_numpy`, nor as Python, see :func:`dsa._kernels.python_path`),
    plus the improvement searches of ``best`` (and its whole improvement phase, on a MiniMalloc
    instance for 2 s). With a writable cache (see Notes), later processes load the kernels instead of
    compiling them.

    Parameters
    ----------
    verbose : bool, default False
        Print one line per step on stderr.

    Returns
    -------
    dict
        ``seconds`` (wall time of the call), ``jit_s`` (of which importing numba, compiling and
        loading kernels), ``kernels`` (compiled kernel signatures now loaded in this process) and
        ``cache_dir`` (numba's cache directory: ``NUMBA_CACHE_DIR``, or None when numba caches
        beside the package's sources or in the user's cache directory).

    Raises
    ------
    ImportError
        If numba is not installed.

    Notes
    -----
    numba keys its cache by the path of each kernel's source file and writes it to
    ``NUMBA_CACHE_DIR`` when set, else to ``__pycache__`` beside ``dsa/_kernels`` (or the user's
    cache directory when that is not writable). A warmed cache serves only processes that run the
    same installed files with the same ``NUMBA_CACHE_DIR`` (and numba, Python and CPU type). In a
    container image, run ``python -m dsa warmup`` in the build after installing dsa, with
    ``NUMBA_CACHE_DIR`` set to the same path the containers will use (writable there too).

    Examples
    --------
    >>> import dsa
    >>> info = dsa.warmup()  # doctest: +SKIP
    >>> sorted(info)  # doctest: +SKIP
    ['cache_dir', 'jit_s', 'kernels', 'seconds']
    """
    from dsa import _kernels
    from dsa.solver import solve
    from dsa.strategies import available_strategies

    t0 = time.perf_counter()
    jit0 = _kernels.jit_seconds()
    numba = _kernels.load_numba()

    def say(text):
        if verbose:
            print(f"warmup: {text} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)

    previous = _kernels.FORCE
    _kernels.FORCE = "kernel"  # the kernels, not the numpy stand-ins of small problems
    try:
        problems, dense = _problems()
        names = [n for n in available_strategies(installed=True) if n != "mip"]
        for name in names:
            for problem in problems:
                options = {"time_limit": 0.5} if name in ("best", "exact") else {}
                solve(problem, name, **options)
            say(name)
        for order, fit in (("size", "first"), ("breadth", "best"), ("start", "first")):
            solve(problems[0], "greedy", order=order, fit=fit)
        solve(problems[0], "gergov", variant=("stack", "rebump", "squeeze"))
        solve(problems[0], "mincost_flow", layout="stack")
        for name in ("greedy_by_size", "gergov", "mincost_flow"):
            solve(dense, name)
        say("dense problems")
        # best's improvement phase: the canonical search and the local search, from a poor plan
        from dsa.strategies._canonical_search import lower_peak
        from dsa.strategies._local_search import search_orders

        for problem in problems:
            start = solve(problem, "bump").offsets
            lower_peak(problem, start, time_limit=1.0, node_limit=50)
            search_orders(problem, start, time_limit=float("inf"), iterations=50, seed=0)
        from dsa.strategies._skyline import warm as warm_skyline
        from dsa.strategies._skyline import warm_beam

        warm_skyline()  # (best runs the skyline search only once its kernel is compiled, or on long calls)
        warm_beam()  # (and its look at the bound the beam searches, or on long looks)
        from dsa.strategies._layers import warm as warm_layers

        warm_layers()  # (the layers' programs run the search first only once its kernel is compiled)
        # best's whole improvement phase, whatever searches it runs, on an instance that it cannot
        # finish early (MiniMalloc's D: the portfolio and the canonical search stay above LOAD)
        from dsa import data

        solve(data.load("D.1048576"), "best", time_limit=2.0)
        say("improvement searches")
    finally:
        _kernels.FORCE = previous
    cache_dir = numba.config.CACHE_DIR or None
    return {"seconds": time.perf_counter() - t0, "jit_s": _kernels.jit_seconds() - jit0,
            "kernels": _kernel_signatures(), "cache_dir": cache_dir}
