"""dsa.warmup / ``python -m dsa warmup``: kernels compiled once into numba's cache serve later processes."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(args, cache_dir, timeout=300):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir), PYTHONWARNINGS="ignore")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


def test_warmup_cli_fills_the_cache_that_a_later_process_loads(tmp_path):
    cache = tmp_path / "numba-cache"
    first = _run(["-m", "dsa", "warmup"], cache)
    assert first.returncode == 0, first.stderr
    assert "kernel signatures" in first.stdout and "Traceback" not in first.stderr
    index = {p.name.split("-")[0] for p in cache.rglob("*.nbi")}
    for name in ("greedy.place", "time_overlap._overlap_fill", "canonical.canonical_search", "gergov.skyline",
                 "buchsbaum.box_class", "mincost_flow.assign", "localsearch.decode", "greedy.place_dense",
                 "greedy.place_by_start"):
        assert name in index, sorted(index)
    # a second process with the same cache loads instead of compiling
    code = ("import json, dsa; first = dsa.warmup(); "
            "sol = dsa.solve(dsa.data.load('resnet18_b1_224'), 'best', time_limit=1); "
            "print(json.dumps([first['jit_s'], sol.stats['jit_s'], first['kernels']]))")
    again = _run(["-c", code], cache)
    assert again.returncode == 0, again.stderr
    warm_jit, solve_jit, kernels = json.loads(again.stdout.strip().splitlines()[-1])
    cold_jit = float(first.stdout.split("numba: ")[1].split(" s")[0])
    assert kernels > 10
    assert warm_jit < cold_jit / 3 and solve_jit < cold_jit / 3


def test_warmup_name_does_not_import_numba():
    code = "import sys, dsa; dsa.warmup; assert 'numba' not in sys.modules, 'numba imported'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


def test_importing_the_module_does_not_shadow_the_function():
    # (it lived in dsa/warmup.py: importing that module bound it as dsa.warmup, and dsa.warmup() then
    # raised "'module' object is not callable")
    code = ("import dsa; from dsa.precompile import warmup; import dsa.precompile; "
            "assert dsa.warmup is warmup, dsa.warmup")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


def test_no_public_function_of_dsa_shares_its_name_with_a_submodule():
    import importlib.util

    import dsa

    clash = [name for name in dsa.__all__ if name != "__version__" and importlib.util.find_spec(f"dsa.{name}")]
    assert clash == []


def test_warmup_help_and_bad_option():
    from dsa.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["warmup", "--no-such-option"])
    assert exc.value.code == 2


def test_declared_kernels_match_numpy_and_accept_other_types():
    from dsa._kernels.sorting import argsort_stable, search_left, search_right, sort_pairs

    rng = np.random.default_rng(0)
    for n in (0, 1, 5, 17, 100, 1000):
        keys = rng.integers(0, 7, n)
        assert np.array_equal(argsort_stable(keys), np.argsort(keys, kind="stable"))
        keys.flags.writeable = False  # read-only and writable arrays share one compiled signature
        assert np.array_equal(argsort_stable(keys), np.argsort(keys, kind="stable"))
        a = np.sort(keys)
        for v in (-1, 0, 3, 6, 7):
            assert search_left(a, np.int32(v)) == np.searchsorted(a, v, side="left")
            assert search_right(a, v) == np.searchsorted(a, v, side="right")
        lo, hi = rng.integers(0, 50, n), rng.integers(0, 50, n)
        k = n // 2
        lo2, hi2 = lo.copy(), hi.copy()
        sort_pairs(lo2, hi2, k)
        assert np.array_equal(lo2[:k], np.sort(lo[:k])) and np.array_equal(lo2[k:], lo[k:])
        assert sorted(zip(lo2[:k], hi2[:k])) == sorted(zip(lo[:k], hi[:k]))
    assert len(argsort_stable.signatures) == 1 and len(search_left.signatures) == 1
    # a type the declaration does not cover still works (a signature of its own)
    assert np.array_equal(argsort_stable(np.array([3.0, 1.0, 2.0])), [1, 2, 0])


def test_declared_kernels_fall_back_to_njit_when_numba_internals_move(monkeypatch):
    """If numba's dispatcher internals that ``kernel`` builds on are gone, a declared kernel is a plain
    ``njit`` one: it compiles per call type, and still gives the right answer."""
    import numpy as np

    import dsa._kernels as kernels

    monkeypatch.setattr(kernels, "_kernel_class", False)

    @kernels.kernel("i8[]r", cache=False)
    def total(xs):
        s = 0
        for x in xs:
            s += x
        return s

    assert "Kernel" not in type(total).__name__
    assert total(np.arange(5, dtype=np.int64)) == 10 and total(np.arange(4, dtype=np.int32)) == 6
