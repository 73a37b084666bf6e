"""Kernels that are not compiled yet run as Python on small calls (dsa._kernels.python_path): same
results as the compiled kernels, the time counted as cold-start time, and a bounded detour."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dsa
import dsa._kernels as kernels
from dsa.generate import random_trace

ROOT = Path(__file__).resolve().parents[1]


def _problems():
    fixed = dsa.Problem([0, 1, 2, 3, 0, 4, 2], [4, 5, 6, 7, 9, 8, 9], [10, 20, 30, 40, 50, 8, 0],
                        alignments=[1, 4, 8, 1, 2, 4, 1], fixed_offsets=[-1, -1, 0, -1, -1, -1, -1])
    out = [fixed, dsa.data.load("A.1048576")]
    out += [random_trace(120, seed=s, kind=k, alignment=a) for s, (k, a) in
            enumerate([("dnn", 1), ("dnn", 64), ("uniform", 1), ("uniform", 16)])]
    return out


RUNS = (("gergov", {}), ("gergov", {"variant": ("stack", "rebump", "squeeze"), "order": ("size", "area")}),
        ("buchsbaum", {"restarts": 4, "seed": 0}), ("mincost_flow", {}))


@pytest.fixture
def python_kernels(monkeypatch):
    """Every declared kernel counts as not compiled: the strategies run their Python versions."""
    monkeypatch.setattr(kernels, "FORCE", None)
    monkeypatch.setattr(kernels, "compiled", lambda kern: False)
    monkeypatch.setattr(kernels, "PURE_BUDGET_S", float("inf"))


def test_python_versions_give_the_plans_of_the_kernels(monkeypatch):
    problems = _problems()
    compiled = [[dsa.solve(p, name, **kw).offsets for name, kw in RUNS] for p in problems]
    monkeypatch.setattr(kernels, "FORCE", None)
    monkeypatch.setattr(kernels, "compiled", lambda kern: False)
    monkeypatch.setattr(kernels, "PURE_BUDGET_S", float("inf"))
    before = kernels.python_seconds()
    for p, expected in zip(problems, compiled):
        for (name, kw), offsets in zip(RUNS, expected):
            assert np.array_equal(dsa.solve(p, name, **kw).offsets, offsets), (name, kw, len(p))
    assert kernels.python_seconds() > before  # (the Python versions did run)


def test_python_versions_of_the_sorting_kernels_are_numpy(python_kernels):
    from dsa._kernels.sorting import argsort_stable, search_left, search_right

    keys = np.array([3, 1, 3, 2, 1])
    assert np.array_equal(kernels.python_version(argsort_stable)(keys), np.argsort(keys, kind="stable"))
    a = np.sort(keys)
    assert kernels.python_version(search_left)(a, 3) == 3 and kernels.python_version(search_right)(a, 1) == 2


def test_python_path_rules(monkeypatch):
    from dsa._kernels.gergov import colour

    monkeypatch.setattr(kernels, "FORCE", None)
    monkeypatch.setattr(kernels, "compiled", lambda kern: False)
    monkeypatch.setattr(kernels, "_PURE_SPENT", {})
    run = kernels.python_path(colour, 10)
    assert run is not colour  # not compiled, small: the Python version
    sel = np.array([0, 1, 2])
    offsets = np.array([0, 0, 4])
    sizes = np.array([4, 4, 4])
    indptr, indices = np.array([0, 2, 4, 6]), np.array([1, 2, 0, 2, 0, 1], dtype=np.int32)
    jit0, py0 = kernels.jit_seconds(), kernels.python_seconds()
    col, edges = run(sel, offsets, sizes, indptr, indices)
    assert col.tolist() == [0, 1, 0] and edges == 1
    spent = kernels.python_seconds() - py0
    assert spent > 0 and kernels.jit_seconds() - jit0 >= spent  # counted as cold-start time
    assert kernels.python_path(colour, kernels.PURE_MAX_ROWS + 1) is colour  # too large
    monkeypatch.setattr(kernels, "FORCE", "kernel")
    assert kernels.python_path(colour, 10) is colour  # dsa.warmup compiles
    monkeypatch.setattr(kernels, "FORCE", None)
    kernels._PURE_SPENT[colour] = kernels.PURE_BUDGET_S
    assert kernels.python_path(colour, 10) is colour  # its budget is spent: compile it
    monkeypatch.setattr(kernels, "compiled", lambda kern: True)
    kernels._PURE_SPENT.clear()
    assert kernels.python_path(colour, 10) is colour


def test_compiled_loads_a_cached_kernel_and_compiles_nothing():
    from dsa._kernels.sorting import search_right

    search_right(np.arange(3), 1)  # compiled (or loaded from the cache) here
    assert kernels.compiled(search_right)


def test_a_cold_process_plans_small_problems_without_compiling_the_python_path_kernels(tmp_path):
    """With an empty numba cache, gergov, buchsbaum and mincost_flow on a small problem run their
    skyline, boxing, colouring and object kernels as Python, with the plans of a warm process; the
    validator checks the plans by its Python sweep, without compiling its kernel."""
    code = """
import json, sys, dsa
from dsa.generate import random_trace
p = random_trace(80, seed=3, kind="dnn", alignment=16)
plans = {n: dsa.solve(p, n, seed=0).offsets.tolist() for n in ("gergov", "buchsbaum", "mincost_flow")}
import dsa._kernels as k
from dsa._kernels import gergov, buchsbaum, mincost_flow, overlap_check
compiled = {f.py_func.__name__: len(f.signatures) for f in (gergov.skyline, gergov.colour, buchsbaum.box_class,
            buchsbaum.unbox, mincost_flow.objects_from_pred, mincost_flow.place_objects,
            overlap_check.first_overlap)}  # (the validator sweeps in Python while its kernel is cold)
print(json.dumps({"plans": plans, "compiled": compiled, "python_s": k.python_seconds()}))
"""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONWARNINGS="ignore")
    env.pop("DSA_ENGINE", None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["compiled"] == dict.fromkeys(out["compiled"], 0)
    assert out["python_s"] > 0
    p = random_trace(80, seed=3, kind="dnn", alignment=16)
    for name, offsets in out["plans"].items():
        assert dsa.solve(p, name, seed=0).offsets.tolist() == offsets, name


def test_numpy_candidate_edges_match_the_kernel():
    """mincost_flow's candidate predecessors in numpy: same edges, in the same order, for every K and
    window, with alignments that do and do not divide one another."""
    from dsa._kernels import mincost_flow as kern

    rng = np.random.default_rng(0)
    for seed in range(4):
        p = random_trace(90, seed=seed, kind="dnn")
        order = np.lexsort((np.arange(len(p)), p.ends, p.starts))
        starts, ends, sizes = p.starts[order], p.ends[order], p.sizes[order]
        aligns = rng.choice([1, 2, 3, 4, 6, 8, 16], len(p)).astype(np.int64)
        by_end = np.argsort(ends, kind="stable")
        avail = np.searchsorted(ends[by_end], starts, side="right")
        for k, window in ((len(p), len(p)), (1, 1), (3, 3), (3, 12), (7, 20)):
            got = kernels.python_version(kern.candidate_edges)(by_end, avail, sizes, aligns, k, window)
            want = kern.candidate_edges(by_end, avail, sizes, aligns, k, window)
            for a, b in zip(got, want):
                assert a.dtype == np.int64 and np.array_equal(a, b), (seed, k, window)
