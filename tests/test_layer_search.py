"""The layer search (dsa._kernels.layer_search) against brute force, and its use in find_layer."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix

from dsa.generate import rectangle_cut
from dsa.strategies import _layers as layers


def _lightest(matrix, weight, seed):
    """The lightest 0/1 solution of ``matrix @ x == 0`` with ``x[seed] == 1`` and a weight below
    the total, by brute force over every choice: ``(weight, x)``, or None."""
    m = matrix.shape[1]
    best = None
    for bits in itertools.product((0, 1), repeat=m):
        x = np.array(bits)
        if x[seed] and not np.any(matrix @ x) and x @ weight < weight.sum():
            if best is None or x @ weight < best[0]:
                best = (int(x @ weight), x)
    return best


@settings(max_examples=150, deadline=None)
@given(m=st.integers(1, 11), rows=st.integers(1, 6), seed=st.integers(0, 10_000),
       spread=st.sampled_from([2, 3, 5, 40]), density=st.sampled_from([0.3, 0.6, 1.0]))
def test_search_finds_the_lightest_solution_and_proves_it(m, rows, seed, spread, density):
    # random integer equations (coefficients of both signs, few distinct values so that many
    # subsets balance), random weights: exhausted, the search's answer is brute force's
    rng = np.random.default_rng(seed)
    matrix = rng.integers(1, spread, size=(rows, m)) * rng.choice([-1, 1], size=(rows, m))
    matrix[rng.random((rows, m)) > density] = 0
    matrix = matrix[np.any(matrix, axis=1)]
    weight = rng.integers(1, 5, size=m)
    pick = int(rng.integers(m))
    if matrix.shape[0] == 0:
        return
    found, chosen = layers._search(csr_matrix(matrix), weight.astype(np.int64), pick, 60.0)
    oracle = _lightest(matrix, weight, pick)
    assert found is (oracle is not None)
    if oracle is not None:
        assert chosen[pick] and not np.any(matrix @ chosen.astype(np.int64))
        assert int(weight[chosen].sum()) == oracle[0]


@settings(max_examples=40, deadline=None)
@given(m=st.integers(13, 16), rows=st.integers(1, 4), seed=st.integers(0, 10_000),
       spread=st.sampled_from([3, 6, 40]))
def test_search_on_equations_too_long_to_enumerate(m, rows, seed, spread):
    # dense equations of 13-16 terms: propagated by bounds until few terms are free, then by
    # enumeration; exhausted, the answer is still brute force's (every choice at once, vectorised)
    rng = np.random.default_rng(seed)
    matrix = rng.integers(1, spread, size=(rows, m)) * rng.choice([-1, 1], size=(rows, m))
    for row in matrix:
        # (one large term balancing a random subset of the others, as a buffer that ends where
        # several start: bounds then force terms while many are free)
        subset = rng.random(m) < 0.6
        big = int(rng.integers(m))
        subset[big] = False
        row[big] = -int(row[subset].sum()) or 1
    weight = rng.integers(1, 5, size=m)
    pick = int(rng.integers(m))
    bits = ((np.arange(1 << m)[:, None] >> np.arange(m)) & 1).astype(np.int64)
    ok = bits[:, pick].astype(bool) & ~np.any(bits @ matrix.T, axis=1) & (bits @ weight < weight.sum())
    found, chosen = layers._search(csr_matrix(matrix), weight.astype(np.int64), pick, 60.0)
    assert found is bool(ok.any())
    if ok.any():
        assert chosen[pick] and not np.any(matrix @ chosen.astype(np.int64))
        assert int(weight[chosen].sum()) == int((bits[ok] @ weight).min())


def test_bounds_force_every_term_of_a_long_tight_equation():
    # one buffer ends where 16 of size 1 start (too many to enumerate): with it chosen, bounds force
    # all 16 in; an 18th group, in no equation, stays out, so the layer is proper
    matrix = np.zeros((1, 18), dtype=np.int64)
    matrix[0, 0] = 16
    matrix[0, 1:17] = -1
    weight = np.ones(18, dtype=np.int64)
    found, chosen = layers._search(csr_matrix(matrix), weight, 0, 60.0)
    assert found is True and chosen.tolist() == [True] * 17 + [False]
    # (the same with the seed among the small ones: the big one and all 16 again)
    found, chosen = layers._search(csr_matrix(matrix), weight, 5, 60.0)
    assert found is True and chosen.tolist() == [True] * 17 + [False]


def _coarse_block():
    """A busy period of a coarse cut whose program keeps equations after the merge of groups."""
    p = rectangle_cut(120, seed=3, pinwheel=0.0, cells_per_buffer=16)
    starts, ends, sizes = np.asarray(p.starts), np.asarray(p.ends), np.asarray(p.sizes)
    block = next(span for span in layers._spans(starts, ends) if 0 in span)
    return starts[block], ends[block], sizes[block]


def test_search_stops_at_its_work_limit_unproven():
    # a tiny budget proves nothing (found is None), a large one does
    starts, ends, sizes = _coarse_block()
    rows, cols, vals, instants = layers._equations(starts, ends, sizes)
    group, balance = layers._groups(rows, cols, vals, instants, len(sizes))
    weight = np.bincount(group).astype(np.int64)
    assert balance.shape[0] > 0
    found, _ = layers._search(balance, weight, int(group[0]), 1e-9)
    assert found is None
    found, chosen = layers._search(balance, weight, int(group[0]), 60.0)
    assert found is True and chosen[group[0]]
    assert layers._balanced(starts, ends, sizes, chosen[group])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_find_layer_takes_the_searchs_proven_answer_without_a_program(monkeypatch, seed):
    # with the program unavailable, the search alone answers where it proves its answer: the same
    # smallest layer as the program's
    p = rectangle_cut(300, seed=seed, pinwheel=0.3, cells_per_buffer=256)
    starts, ends, sizes = np.asarray(p.starts), np.asarray(p.ends), np.asarray(p.sizes)
    block = next(span for span in layers._spans(starts, ends) if 0 in span)
    starts, ends, sizes = starts[block], ends[block], sizes[block]
    seed_row = int(np.flatnonzero(block == 0)[0])
    monkeypatch.setattr(layers, "SEARCH", False)
    report = {}
    expected = layers.find_layer(starts, ends, sizes, seed_row, 30.0, report=report)
    assert report == {"settled": True}

    import scipy.optimize

    def no_program(*args, **kwargs):
        raise AssertionError("the program ran")

    monkeypatch.setattr(layers, "SEARCH", True)
    monkeypatch.setattr(layers, "_search_ready", lambda: True)
    monkeypatch.setattr(layers, "SEARCH_WORK_PER_S", 10 ** 12)
    monkeypatch.setattr(scipy.optimize, "milp", no_program)
    report = {}
    got = layers.find_layer(starts, ends, sizes, seed_row, 30.0, report=report)
    assert report == {"settled": True}
    if expected is None:
        assert got is None
    else:
        assert got is not None and got[seed_row] and got.sum() == expected.sum()
        assert layers._balanced(starts, ends, sizes, got)


def test_find_layer_runs_the_program_where_the_search_proves_nothing(monkeypatch):
    # the search stopped at its limit leaves the answer to the program
    calls = []
    real = layers._search

    def stopped(*args):
        calls.append(1)
        found, chosen = real(*args[:3], 1e-12)
        return None, chosen

    monkeypatch.setattr(layers, "_search_ready", lambda: True)
    monkeypatch.setattr(layers, "_search", stopped)
    starts, ends, sizes = _coarse_block()
    report = {}
    layer = layers.find_layer(starts, ends, sizes, 0, 30.0, report=report)
    assert calls and report == {"settled": True}
    assert layer is not None and layer[0] and layers._balanced(starts, ends, sizes, layer)


def test_warm_compiles_the_search():
    from dsa._kernels import compiled
    from dsa._kernels.layer_search import smallest_layer

    layers.warm()
    assert compiled(smallest_layer) and layers._search_ready()
