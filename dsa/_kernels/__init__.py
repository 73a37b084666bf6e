"""Private numba kernels: functions on arrays and scalars only, compiled on first use (``cache=True``).

Nothing here is imported by ``import dsa``; modules import a kernel module when they first need it.
Kernel modules take ``njit`` from this package (``from dsa._kernels import njit``) rather than from
numba: the first access imports numba, timing it, and registers a listener on numba's compiler lock,
so that :func:`jit_seconds` can tell how much of a call went to importing numba, compiling kernels or
loading them from numba's cache. :func:`dsa.solve` reports it as ``stats["jit_s"]``.
"""
from __future__ import annotations

import time

import sys

__all__ = ["jit_seconds", "numba_loaded", "use_numpy"]

_state = {"seconds": 0.0, "numba": None}
_numpy_calls: dict[str, int] = {}

# numpy stand-ins are used for the first calls of a process only: after this many, loading the
# kernel (a one-off ~0.1-0.5 s) is cheaper than the stand-in's O(n^2) work on every call
NUMPY_CALLS = 16
# tests set this to "numpy" or "kernel" (or "sweep", for dsa.overlap) to exercise one path whatever
# the state of the process
FORCE: str | None = None


def _load_numba():
    numba = _state["numba"]
    if numba is None:
        t0 = time.perf_counter()
        import numba
        from numba.core import event

        class _CompileTimer(event.Listener):
            """Adds the time spent holding numba's compiler lock (compiling or loading from cache)."""

            depth = 0
            t0 = 0.0

            def on_start(self, ev):
                if self.depth == 0:
                    self.t0 = time.perf_counter()
                self.depth += 1

            def on_end(self, ev):
                self.depth -= 1
                if self.depth == 0:
                    _state["seconds"] += time.perf_counter() - self.t0

        event.register("numba:compiler_lock", _CompileTimer())
        _ensure_cache_dir(numba)
        _state["numba"] = numba
        _state["seconds"] += time.perf_counter() - t0
    return numba


def numba_loaded() -> bool:
    """Whether this process has imported numba through :mod:`dsa._kernels` (a kernel was needed)."""
    return _state["numba"] is not None


def use_numpy(kernel: str, n: int, limit: int) -> bool:
    """Whether a caller should run its numpy stand-in instead of the kernel module ``kernel``.

    True while the kernel module is not loaded in this process, the input is small (``n < limit``)
    and fewer than ``NUMPY_CALLS`` calls have taken the stand-in; every True is counted. Both paths
    must give the same answer: this only decides what a first plan in a fresh process costs.
    """
    if FORCE is not None:
        return FORCE == "numpy"
    if n >= limit or f"dsa._kernels.{kernel}" in sys.modules:
        return False
    calls = _numpy_calls.get(kernel, 0)
    if calls >= NUMPY_CALLS:
        return False
    _numpy_calls[kernel] = calls + 1
    return True


def _cache_probe():
    """A function in the kernels' folder: numba finds a cache place for it as for the kernels."""


def _ensure_cache_dir(numba) -> None:
    """Give numba a writable cache directory when it would find none (read-only install, no home).

    numba caches compiled kernels beside their source or in the user's cache directory; when
    neither is writable, ``cache=True`` fails at the first kernel. Then the kernels are cached in a
    fresh temporary directory for this process, with a warning.
    """
    from numba.core.caching import FunctionCache

    try:
        FunctionCache(_cache_probe)
    except RuntimeError:
        import atexit
        import shutil
        import tempfile
        import warnings

        numba.config.CACHE_DIR = tempfile.mkdtemp(prefix="dsa-numba-cache-")
        atexit.register(shutil.rmtree, numba.config.CACHE_DIR, ignore_errors=True)
        warnings.warn("numba cannot write its cache beside dsa or in the user cache directory; compiled "
                      f"kernels are cached in {numba.config.CACHE_DIR} for this process only (set "
                      "NUMBA_CACHE_DIR to a writable directory to keep them)", RuntimeWarning, stacklevel=3)


def jit_seconds() -> float:
    """Seconds this process has spent importing numba and compiling or cache-loading kernels."""
    return _state["seconds"]


def __getattr__(name: str):
    if name == "njit":
        return _load_numba().njit
    raise AttributeError(f"module 'dsa._kernels' has no attribute {name!r}")
