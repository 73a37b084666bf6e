"""Shared fixtures of the benchmark suite: numba warm-up and a per-session cache of instances.

Run the suite on its own (``make bench``); ``pytest -n`` (xdist) disables pytest-benchmark.
"""
from __future__ import annotations

import datetime
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dsa

VALIDATOR_N = 1_000_000  # buffers of the validator benchmark's trace
ROOT = Path(__file__).resolve().parent.parent
_COMPARISON = pytest.StashKey[dict]()


def _load_average():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # not available on this platform
        return None


def _git(*args: str):
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def pytest_configure(config):
    """Start the record of the strategy comparison: machine, load and command at the start of the run."""
    config.stash[_COMPARISON] = {
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": shlex.join([sys.executable, "-m", "pytest", *config.invocation_params.args]),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "load_average_start": _load_average(),
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": None,
        "settings": {},
        "skipped": [],           # test_solve's skipped (strategy, instance) pairs, with the reason
        "seconds_at_100k": {},   # strategy -> median seconds at 100k buffers (the 1M cap reads it)
    }
    status = _git("status", "--porcelain", "--untracked-files=no")
    config.stash[_COMPARISON]["git_dirty"] = None if status is None else bool(status)


@pytest.fixture(scope="session")
def comparison(request) -> dict:
    """The session's record of the strategy comparison (written into the JSON report as ``dsa_comparison``)."""
    return request.config.stash[_COMPARISON]


def pytest_benchmark_update_json(config, benchmarks, output_json):
    """Add the comparison's metadata to the JSON report: command, platform, load, git commit, skips."""
    record = dict(config.stash.get(_COMPARISON, {}))
    record["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    record["load_average_end"] = _load_average()
    record["dsa_version"] = getattr(dsa, "__version__", None)
    output_json["dsa_comparison"] = record


@pytest.fixture(scope="session", autouse=True)
def warm_numba():
    """Compile (or load from numba's cache) every kernel once, so no timing includes compilation.

    The warm-up instances are large enough for the kernels rather than the numpy stand-ins of
    small problems, and hard enough for best's two searches to run.
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

    def torch_trace(self, model: str, batch: int, size: int | None):
        """The trace of one forward of example ``model`` recorded by dsa.adapters.torch.profile.

        ``size`` is the image side or the sequence length (None: the model's own input). Returns
        ``(problem, None)``, or ``(None, reason)`` when it cannot be recorded here (no torch, no
        native allocator, a model this version of the examples lacks).
        """
        key = ("torch", model, batch, size)
        if key not in self._cache:
            try:
                self._cache[key] = (_record_torch_trace(model, batch, size), None)
            except (ImportError, RuntimeError, KeyError) as exc:  # BuildError is a RuntimeError
                self._cache[key] = (None, f"cannot record the {model} trace: {type(exc).__name__}: {exc}")
        return self._cache[key]

    def generated(self, n: int, seed: int, kind: str = "dnn") -> dsa.Problem:
        """dsa.generate.random_trace(n, seed=seed, kind=kind)."""
        key = (n, seed, kind)
        if key not in self._cache:
            self._cache[key] = dsa.generate.random_trace(n, seed=seed, kind=kind)
        return self._cache[key]


SEQUENCE_MODELS = ("transformer", "gru")
_TORCH_INPUT_SEED = 1234


def _record_torch_trace(model: str, batch: int, size: int | None) -> dsa.Problem:
    """Build example ``model`` (weights from torch.manual_seed(0)), run it once eagerly, then profile one
    forward under inference_mode on one intra-op thread; the problem of the non-escaping allocations.

    Image models get ``(batch, 3, size, size)`` inputs, the transformer ``(batch, size)`` token ids (its
    positional table built ``size`` long) and the GRU ``(batch, size, 16)`` sequences.
    """
    import torch

    from dsa.adapters.torch import profile
    from dsa.adapters.torch import examples

    torch.manual_seed(0)
    net, make_input = examples.MODELS[model]()
    if size is not None:
        g = torch.Generator().manual_seed(_TORCH_INPUT_SEED)
        if model == "transformer":
            net = examples.TransformerLike(seq_len=size).eval()
            x = (torch.randint(0, 100, (batch, size), generator=g),)
        elif model == "gru":
            x = (torch.randn(batch, size, 16, generator=g),)
        else:
            x = (torch.randn(batch, 3, size, size, generator=g),)
    else:
        x = make_input(batch)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # every allocation on the profiled thread: the same trace on any machine
    try:
        with torch.inference_mode():
            net(*x)                    # first call: lazy initialisation outside the trace
            trace = profile(net, *x)
    finally:
        torch.set_num_threads(threads)
    return trace.to_problem()


@pytest.fixture(scope="session")
def instances() -> _Instances:
    return _Instances()


@pytest.fixture(scope="session")
def validator_case():
    """A 1M-buffer generated dnn trace and a greedy_by_size plan of it (made once, outside any timing)."""
    problem = dsa.generate.random_trace(VALIDATOR_N, seed=1, kind="dnn")
    sol = dsa.solve(problem, "greedy_by_size", validate=False)
    return problem, np.asarray(sol.offsets), sol.peak
