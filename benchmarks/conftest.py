"""Shared fixtures of the benchmark suite: numba warm-up and a per-session cache of instances.

Run the suite on its own (``make bench``); ``pytest -n`` (xdist) disables pytest-benchmark.
"""
from __future__ import annotations

import numpy as np
import pytest

import dsa

VALIDATOR_N = 1_000_000  # buffers of the validator benchmark's trace


@pytest.fixture(scope="session", autouse=True)
def warm_numba():
    """Compile (or load from numba's cache) every kernel once, so no timing includes compilation.

    The warm-up instances are large enough for the kernels rather than the numpy stand-ins of a
    process's first small calls, and hard enough for best's two searches to run.
    """
    hard = dsa.data.load("A.1048576").replace(capacity=None)    # the canonical search runs
    wide = dsa.generate.random_trace(3000, seed=0)               # beyond it: the local search runs
    for name in dsa.available_strategies(installed=True):
        for problem in (hard, wide):
            sol = dsa.solve(problem, name, time_limit=0.3)  # validate=True also loads the validator
            assert sol.success, (name, sol)


class _Instances:
    """Loads or generates each instance once per session."""

    def __init__(self):
        self._cache: dict = {}

    def bundled(self, name: str) -> dsa.Problem:
        """A bundled instance by file stem (see dsa.data.load)."""
        if name not in self._cache:
            self._cache[name] = dsa.data.load(name)
        return self._cache[name]

    def generated(self, n: int, seed: int, kind: str = "dnn") -> dsa.Problem:
        """dsa.generate.random_trace(n, seed=seed, kind=kind)."""
        key = (n, seed, kind)
        if key not in self._cache:
            self._cache[key] = dsa.generate.random_trace(n, seed=seed, kind=kind)
        return self._cache[key]


@pytest.fixture(scope="session")
def instances() -> _Instances:
    return _Instances()


@pytest.fixture(scope="session")
def validator_case():
    """A 1M-buffer generated dnn trace and a greedy_by_size plan of it (made once, outside any timing)."""
    problem = dsa.generate.random_trace(VALIDATOR_N, seed=1, kind="dnn")
    sol = dsa.solve(problem, "greedy_by_size", validate=False)
    return problem, np.asarray(sol.offsets), sol.peak
