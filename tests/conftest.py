"""Shared fixtures and hypothesis strategies for the dsa tests.

Hypothesis profiles: ``ci`` (default; no deadline, 100 examples) and ``dev`` (20 examples). Pick one
with ``HYPOTHESIS_PROFILE=dev``. Every kernel is compiled once, before the first test
(``compiled_kernels``).
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from naive import lowest_fit_plan

settings.register_profile("ci", deadline=None, max_examples=100, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=20,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

ALIGNMENTS = (1, 2, 4, 8)
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels():
    """Compile (or load from numba's cache) every kernel once, before the first test.

    Many tests give a search a deadline and check what it found by then; a kernel's first compile
    inside that deadline (13 s for the skyline's kernels on this machine class, more on a loaded one)
    would make them measure the compiler. Cold, this takes about 40 s, which the suite would spend
    compiling anyway; warm, about 3 s. Tests of the cold path run in processes of their own.
    """
    from dsa.precompile import warmup
    warmup()


def load_benchmark(name: str):
    """Import ``benchmarks/<name>.py`` as module ``name``, with the benchmarks folder on ``sys.path``
    (as when the script runs) so that its imports of sibling modules work."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@st.composite
def raw_problems(draw, max_n: int = 8, max_time: int = 12, max_size: int = 20,
                 alignment: bool | None = None, fixed: bool | None = None):
    """A small random instance as a dict of plain lists.

    Keys: ``starts``, ``ends``, ``sizes``, ``alignments`` (None when every row has alignment 1 by
    default) and ``fixed`` (None, or one entry per row: a pinned offset or -1). Fixed offsets are
    consistent by construction: they are a subset of the offsets of a valid plan (lowest fit in a
    random order, computed by the reference code in tests/naive.py).

    ``alignment`` / ``fixed``: True forces them, False forbids them, None lets hypothesis choose.
    """
    n = draw(st.integers(0, max_n))
    starts = draw(st.lists(st.integers(0, max_time - 1), min_size=n, max_size=n))
    durations = draw(st.lists(st.integers(1, max_time // 2), min_size=n, max_size=n))
    ends = [s + d for s, d in zip(starts, durations)]
    # zero-size buffers are allowed and drawn often
    sizes = draw(st.lists(st.one_of(st.just(0), st.integers(1, max_size)), min_size=n, max_size=n))
    use_align = draw(st.booleans()) if alignment is None else alignment
    alignments = draw(st.lists(st.sampled_from(ALIGNMENTS), min_size=n, max_size=n)) if use_align else None
    use_fixed = (draw(st.booleans()) if fixed is None else fixed) and n > 0
    pinned = None
    if use_fixed:
        order = draw(st.permutations(range(n)))
        plan = lowest_fit_plan(starts, ends, sizes, order, alignments)
        chosen = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=min(n, 3), unique=True))
        pinned = [plan[i] if i in chosen else -1 for i in range(n)]
    return {"starts": starts, "ends": ends, "sizes": sizes, "alignments": alignments, "fixed": pinned}


def to_problem(raw: dict, capacity=None):
    import dsa

    return dsa.Problem(raw["starts"], raw["ends"], raw["sizes"], alignments=raw["alignments"],
                       fixed_offsets=raw["fixed"], capacity=capacity)


@st.composite
def problems(draw, **kwargs):
    """A random :class:`dsa.Problem` (see :func:`raw_problems` for the knobs)."""
    return to_problem(draw(raw_problems(**kwargs)))


def fields(problem) -> dict:
    """Keyword arguments of the naive reference functions for ``problem``."""
    return {"starts": problem.starts.tolist(), "ends": problem.ends.tolist(), "sizes": problem.sizes.tolist(),
            "alignments": problem.alignments.tolist(), "fixed": problem.fixed_offsets.tolist()}


def random_problem(n: int, seed: int, *, horizon: int = 1000, max_duration: int = 50, max_size: int = 1000):
    """A larger random problem for the validator and speed-related tests (numpy RNG, reproducible)."""
    import dsa

    rng = np.random.default_rng(seed)
    starts = rng.integers(0, horizon, n)
    ends = starts + rng.integers(1, max_duration, n)
    sizes = rng.integers(0, max_size, n)
    return dsa.Problem(starts, ends, sizes)
