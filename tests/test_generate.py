"""Tests of dsa.generate.random_trace."""
import subprocess
import sys

import numpy as np
import pytest

import dsa
from dsa.generate import KINDS, random_trace


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [0, 1, 2, 17, 1000])
def test_valid_problem_with_n_rows(kind, n):
    p = random_trace(n, seed=0, kind=kind)
    assert isinstance(p, dsa.Problem)
    assert len(p) == n
    assert list(p.ids) == list(range(n))
    assert p.starts.dtype == p.ends.dtype == p.sizes.dtype == np.int64
    assert np.all(p.ends > p.starts)
    assert np.all(p.starts >= 0)
    assert p.capacity is None
    assert not p.is_fixed.any()


@pytest.mark.parametrize("kind", KINDS)
def test_sizes_log_uniform_range_rounded_to_64(kind):
    p = random_trace(5000, seed=1, kind=kind)
    assert p.sizes.min() >= 4096 and p.sizes.max() <= 4 << 20
    assert np.all(p.sizes % 64 == 0)
    # log-uniform: the median is near the geometric mean, 128 KiB, far below the arithmetic mean
    assert 64 << 10 < np.median(p.sizes) < 256 << 10


@pytest.mark.parametrize("kind", KINDS)
def test_same_seed_same_problem(kind):
    assert random_trace(3000, seed=7, kind=kind) == random_trace(3000, seed=7, kind=kind)
    assert random_trace(3000, seed=7, kind=kind) != random_trace(3000, seed=8, kind=kind)


def test_seed_accepts_generator():
    a = random_trace(100, seed=np.random.default_rng(3))
    b = random_trace(100, seed=np.random.default_rng(3))
    assert a == b


def test_dnn_times_are_event_indices():
    """One allocation or free per time index, as in the real traces; unfreed buffers end at the horizon."""
    p = random_trace(10_000, seed=2)
    horizon = int(p.ends.max())
    freed = p.ends < horizon
    events = np.concatenate([p.starts, p.ends[freed]])
    assert len(np.unique(events)) == len(events)
    assert np.array_equal(np.sort(events), np.arange(horizon))
    assert np.all(np.diff(p.starts) > 0)            # rows in allocation order
    assert (~freed).sum() < 0.01 * len(p)             # only the tail of the network is never freed


def test_dnn_live_set_stays_moderate():
    p = random_trace(10_000, seed=3)
    total = int(p.sizes.sum())
    load = dsa.lower_bound(p)
    assert load < total / 100
    # LOAD does not grow with n: the live set is local
    assert dsa.lower_bound(random_trace(100_000, seed=3)) < 3 * load


def test_dnn_mostly_short_lifetimes_with_some_long_ones():
    p = random_trace(20_000, seed=4)
    d = p.durations
    assert np.median(d) < 12
    assert 0.03 < np.mean(d > 40) < 0.15              # the skip connections


def test_uniform_starts_in_range():
    n = 5000
    p = random_trace(n, seed=5, kind="uniform")
    assert p.starts.min() >= 0 and p.starts.max() < n
    assert 10 < p.durations.mean() < 25


def test_alignment():
    p = random_trace(200, seed=0, alignment=256)
    assert np.all(p.alignments == 256)
    assert np.all(random_trace(200, seed=0).alignments == 1)
    sol = dsa.solve(p, "greedy_by_size")
    assert sol.success and np.all(sol.offsets % 256 == 0)


@pytest.mark.parametrize("kind", KINDS)
def test_greedy_plans_are_valid(kind):
    p = random_trace(2000, seed=6, kind=kind)
    sol = dsa.solve(p, "greedy_by_size")
    assert sol.success
    dsa.validate(p, sol)


@pytest.mark.parametrize("n", [-1, 1.5, 10.0, "10", None, True, [3]])
def test_bad_n(n):
    with pytest.raises(ValueError, match="non-negative integer"):
        random_trace(n)


def test_numpy_integer_n():
    assert len(random_trace(np.int64(12), seed=0)) == 12


@pytest.mark.parametrize("kind", ["DNN", "gauss", "", None, 3])
def test_unknown_kind_lists_kinds(kind):
    with pytest.raises(ValueError, match="dnn, uniform"):
        random_trace(10, kind=kind)


@pytest.mark.parametrize("alignment", [0, -64, 1.5, True])
def test_bad_alignment(alignment):
    with pytest.raises(ValueError, match="alignment"):
        random_trace(10, alignment=alignment)


def test_million_buffers_is_valid():
    """Scale: a million rows build a valid Problem (speed is measured by the benchmarks, not here)."""
    p = random_trace(1_000_000, seed=0)
    assert len(p) == 1_000_000
    assert (p.ends > p.starts).all()


def test_import_is_light():
    code = ("import sys, dsa.generate; "
            "bad = [m for m in ('numba', 'scipy', 'matplotlib', 'torch') if m in sys.modules]; "
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
