"""dsa: ahead-of-time memory planning (offline Dynamic Storage Allocation) for deep-learning inference.

Given buffers with half-open lifetimes ``[start, end)`` and sizes, give each an offset in one slab so
that buffers alive at the same time never overlap, with the smallest peak.

>>> import dsa
>>> sol = dsa.solve([(0, 3, 4), (3, 9, 4), (0, 9, 4)], strategy="greedy_by_size")
>>> sol.peak, sol.success
(8, True)

Public names are loaded on first use, so ``import dsa`` imports neither numba, scipy, matplotlib nor
torch (nor numpy).
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "Problem": "dsa.problem",
    "Solution": "dsa.solution",
    "Status": "dsa.solution",
    "Pool": "dsa.pools",
    "solve": "dsa.solver",
    "solve_many": "dsa.batch",
    "UnknownOptionWarning": "dsa.solver",
    "validate": "dsa.validator",
    "InvalidPlanError": "dsa.validator",
    "lower_bound": "dsa.bounds",
    "load": "dsa.bounds",
    "read_csv": "dsa.io",
    "write_csv": "dsa.io",
    "read_plan": "dsa.io",
    "read_json": "dsa.io",
    "write_json": "dsa.io",
    "read": "dsa.io",
    "available_strategies": "dsa.strategies",
    "compact": "dsa.compaction",
    "warmup": "dsa.precompile",
}

# submodules reachable as attributes (dsa.data, dsa.plot, ...) without an explicit import
# (the front end and the validator live in dsa.solver and dsa.validator, so that the functions
# dsa.solve and dsa.validate are never shadowed by a submodule of the same name)
_SUBMODULES = {"batch", "bounds", "budget", "cli", "compaction", "data", "generate", "io", "overlap", "plot", "pools",
               "problem", "solution", "solver", "strategies", "sweep", "validator"}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"dsa.{name}")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dsa' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
