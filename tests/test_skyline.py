"""The skyline search (dsa.strategies._skyline): valid plans, never worse, improves a bad plan, finds
perfect tilings, and best / improve_plan use it (no timed assertions)."""
import time

import numpy as np
import pytest

import dsa
from dsa.budget import Budget, thread_limit
from dsa.generate import rectangle_cut
from dsa.solution import plan_peak
from dsa.strategies import _canonical_search as canonical_search
from dsa.strategies import _skyline as sky
from dsa.strategies import best as best_module


def _stacked(problem):
    """A deliberately bad plan: every buffer on top of the previous one (peak = sum of sizes)."""
    return np.concatenate([[0], np.cumsum(problem.sizes)[:-1]]).astype(np.int64)


def test_luby_sequence():
    assert [sky.luby(i) for i in range(1, 16)] == [1, 1, 2, 1, 1, 2, 4, 1, 1, 2, 1, 1, 2, 4, 8]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("pinwheel", [0.0, 0.4])
def test_improves_a_bad_plan_and_is_always_valid(seed, pinwheel):
    p = rectangle_cut(120, seed=seed, pinwheel=pinwheel)
    bad = _stacked(p)
    dsa.validate(p, bad)
    seen = []
    out, stats = sky.skyline_search(p, bad, time_limit=0.5, seed=seed,
                                    progress=lambda s, pk: seen.append(pk))
    dsa.validate(p, out)
    assert plan_peak(p, out) < plan_peak(p, bad)
    assert seen == sorted(seen, reverse=True) and seen[-1] == plan_peak(p, out)
    assert stats["skyline_probes"] > 0 and stats["skyline_nodes"] > 0
    assert 0.0 <= stats["skyline_bottom_share"] <= 1.0


def test_every_plan_a_dive_finds_is_valid_and_within_the_capacity():
    p = rectangle_cut(80, seed=5, pinwheel=0.4)
    s = sky.Skyline(p, seed=3)
    load = dsa.load(p)
    found = 0
    for cap in (load, load + load // 20, load + load // 5, 2 * load):
        for noise in (0.0, 0.5, 2.0):
            status = s.dive(cap, 20_000, noise)
            assert status in (-1, 0, 1)
            if status == 1:
                plan = s.plan()
                dsa.validate(p, plan)
                assert plan_peak(p, plan) <= cap
                found += 1
    assert found > 0


def test_a_dive_above_a_floor_keeps_the_floor():
    p = rectangle_cut(150, seed=2, pinwheel=0.2)
    plan = dsa.solve(p, "best", improve=False).offsets
    peak = plan_peak(p, plan)
    s = sky.Skyline(p, seed=1)
    kept = s.set_floor(plan, peak // 2)
    assert kept > 0
    keep_rows = np.flatnonzero(plan + p.sizes <= peak // 2)
    for i in range(1, 200):
        if s.dive(peak, 10_000 * sky.luby(i), 0.5) == 1:
            out = s.plan()
            dsa.validate(p, out)
            assert np.array_equal(out[keep_rows], plan[keep_rows])
            break
    else:
        pytest.fail("no plan within the incumbent's peak above the floor")


def test_finds_small_perfect_tilings_at_the_bound():
    # the capacity equals the bytes alive at every instant: any wasted byte ends a branch
    for seed in range(3):
        p = rectangle_cut(40, seed=seed, pinwheel=0.4)
        s = sky.Skyline(p, seed=seed)
        out = s.probe(dsa.load(p), float("inf"), 200, max_dives=500)
        assert isinstance(out, np.ndarray)
        dsa.validate(p, out)
        assert plan_peak(p, out) == dsa.load(p)


def test_infeasible_capacity_is_reported_by_the_deterministic_dive():
    p = dsa.Problem([0, 0], [2, 2], [4, 4])
    s = sky.Skyline(p)
    assert s.probe(7, float("inf"), 100) == "infeasible"
    out = s.probe(8, float("inf"), 100)
    dsa.validate(p, out)


def test_zero_size_rows_alignment_and_fixed_rows():
    p = dsa.Problem([0, 0, 1, 2], [3, 2, 4, 3], [0, 96, 64, 32], alignments=[1, 32, 64, 1])
    start = dsa.solve(p, "bump").offsets
    out, _ = sky.skyline_search(p, start, time_limit=0.2)
    dsa.validate(p, out)
    assert plan_peak(p, out) <= plan_peak(p, start)
    fixed = dsa.Problem([0, 0], [2, 2], [4, 4], fixed_offsets=[4, -1])
    assert not sky.supported(fixed)
    start = np.array([4, 0])
    out, stats = sky.skyline_search(fixed, start, time_limit=0.1)
    assert np.array_equal(out, start) and stats["skyline_probes"] == 0


def test_improve_plan_runs_the_skyline_search_first_under_a_deadline():
    sky.warm()  # (with a cold cache and 0.5 s, improve_plan would skip the skyline search)
    p = rectangle_cut(300, seed=7, pinwheel=0.4)
    bad = _stacked(p)
    out, stats = best_module.improve_plan(p, bad, dsa.load(p), Budget(0.5), 0)
    dsa.validate(p, out)
    assert plan_peak(p, out) < plan_peak(p, bad)
    assert stats["skyline_probes"] > 0
    imp = stats["improvements"]
    assert all(b[1] < a[1] for a, b in zip(imp, imp[1:]))


@pytest.mark.parametrize("n", [200, 1100])
def test_improve_plan_runs_the_skyline_search_again_once_it_stalls(n, monkeypatch):
    # a skyline search that gives up after 0.05 s without a lower plan, and a target no plan reaches:
    # the turns after it alternate the local search (random dives on more than 1,000 rows) and the
    # skyline search from the incumbent, until the budget ends
    sky.warm()  # (with a cold cache and 2 s, improve_plan would skip the skyline search)
    monkeypatch.setattr(sky, "STALL_MIN_S", 0.05)
    monkeypatch.setattr(sky, "STALL_SHARE", 0.0)
    monkeypatch.setattr(best_module, "SKYLINE_SHARE", 0.3)
    monkeypatch.setattr(best_module, "SKYLINE_AGAIN_MIN_S", 0.1)
    monkeypatch.setattr(best_module, "SKYLINE_THREADS", 1)  # (one search per turn: see the next test)
    monkeypatch.setattr(best_module, "DIVE_SHARE", 0.3)  # (on 1,100 rows: dives that keep finding plans
    # from so bad a start would keep the whole time, as they should)
    reverses = []
    search = sky.skyline_search

    def spy(*args, reverse=False, **kwargs):
        reverses.append(reverse)
        return search(*args, reverse=reverse, **kwargs)

    monkeypatch.setattr(sky, "skyline_search", spy)
    p = rectangle_cut(n, seed=3, pinwheel=0.4)
    bad = _stacked(p)
    budget = Budget(2.0)
    out, stats = best_module.improve_plan(p, bad, 0, budget, 0)
    dsa.validate(p, out)
    assert plan_peak(p, out) < plan_peak(p, bad)
    assert stats["skyline_restarts"] >= 1
    # the turns between: the random dives (on small problems too, with SMALL_DIVE_TURNS), else the
    # local search. (The local search may still run on a small problem in the last 0.1 s, too short
    # for a skyline search: whether it does depends on the machine's timing, so it is not asserted.)
    if n > 1000 or best_module.SMALL_DIVE_TURNS:
        assert stats["dives"] > 0
    else:
        assert stats["local_iterations"] > 0
    # the first search as given, then restarts with time reversed and as given in turn
    assert reverses[:3] == [False, True, False][:len(reverses)] and len(reverses) >= 2
    imp = stats["improvements"]
    assert all(b[1] < a[1] for a, b in zip(imp, imp[1:]))


def test_improve_plan_runs_skyline_searches_side_by_side(monkeypatch):
    # two threads: each turn of the skyline search runs two searches at once, one in each direction of
    # time, with seeds of their own; the lower plan is kept and the log still only falls
    sky.warm()
    monkeypatch.setattr(canonical_search, "THREADS", 2)
    monkeypatch.setattr(best_module, "SKYLINE_THREADS", None)
    assert best_module.skyline_width() == 2
    monkeypatch.setattr(best_module, "SKYLINE_THREADS", 2)
    assert best_module.skyline_width() == 2
    with thread_limit(1):
        assert best_module.skyline_width() == 1  # (a parallel batch's workers run one thread each)
    monkeypatch.setattr(sky, "STALL_MIN_S", 0.05)
    monkeypatch.setattr(sky, "STALL_SHARE", 0.0)
    monkeypatch.setattr(best_module, "SKYLINE_SHARE", 0.3)
    calls = []
    search = sky.skyline_search

    def spy(*args, reverse=False, seed=None, **kwargs):
        began = time.perf_counter()
        out, info = search(*args, reverse=reverse, seed=seed, **kwargs)
        calls.append((reverse, seed, (began, time.perf_counter()), plan_peak(args[0], out)))
        return out, info

    monkeypatch.setattr(sky, "skyline_search", spy)
    p = rectangle_cut(300, seed=5, pinwheel=0.4)
    bad = _stacked(p)
    out, stats = best_module.improve_plan(p, bad, 0, Budget(1.5), 0)
    dsa.validate(p, out)
    # (the first two to start: a search that stalls searches again on its thread, and that second
    # search can end before the other thread's first one)
    first = sorted(calls, key=lambda c: c[2][0])[:2]
    assert len(calls) >= 2 and sorted(c[0] for c in first) == [False, True]
    assert first[0][1] != first[1][1]
    (a0, a1), (b0, b1) = first[0][2], first[1][2]
    assert a0 < b1 and b0 < a1  # (at the same time)
    assert plan_peak(p, out) <= min(c[3] for c in first)
    assert stats["skyline_probes"] >= 2
    imp = stats["improvements"]
    assert imp and all(b[1] < a[1] for a, b in zip(imp, imp[1:]))


def test_improve_plan_reports_where_the_skyline_turns_time_went(monkeypatch):
    # two searches side by side, one stopping (stalling) after 0.02 s and the other after 0.4 s: each
    # turn lasts as long as the slower, the faster one's thread waits the rest (skyline_idle_s), the
    # largest bottom share of any search is reported, and the flatter plans of all of them
    monkeypatch.setattr(canonical_search, "THREADS", 2)
    monkeypatch.setattr(best_module, "SKYLINE_THREADS", 2)
    monkeypatch.setattr(best_module, "skyline_runs", lambda problem, seconds: True)
    monkeypatch.setattr(best_module, "LOCAL_SHARE", 0.01)
    monkeypatch.setattr(best_module, "SMALL_DIVE_TURNS", False)  # (the local search takes the turns between)
    turns = []

    def stand_in(problem, offsets, *, reverse=False, **kwargs):
        time.sleep(0.4 if reverse else 0.02)
        turns.append(reverse)
        info = {"skyline_nodes": 1, "skyline_probes": 1, "skyline_bottom_share": 0.4 if reverse else 0.1,
                "skyline_flat": 3 if reverse else 1}
        return np.array(offsets), info

    monkeypatch.setattr(sky, "skyline_search", stand_in)
    p = rectangle_cut(300, seed=5, pinwheel=0.4)
    start = _stacked(p)
    out, stats = best_module.improve_plan(p, start, 0, Budget(1.0), 0)
    dsa.validate(p, out)  # (the local search's turns between lower it)
    n = len(turns) // 2
    assert n >= 1 and len(turns) == 2 * n and stats["skyline_probes"] == 2 * n
    assert 0.4 * n <= stats["skyline_s"] < 1.0 + 0.4  # (the last turn may start just before the end)
    assert 0.25 * n <= stats["skyline_idle_s"] <= stats["skyline_s"]
    assert stats["skyline_bottom_share"] == 0.4
    assert stats["skyline_flat"] == 4 * n  # (summed over the searches)
    assert "dives" not in stats  # (300 rows: no random dives on the waiting thread, nor in the turns)


def test_a_stalled_skyline_search_leaves_its_core_to_random_dives(monkeypatch):
    # on a large problem, a skyline search that stalls while another of its turn still runs gives its
    # thread to random dives (one thread) from the turn's incumbent until the last search ends; the
    # lower of their plans is kept
    monkeypatch.setattr(canonical_search, "THREADS", 2)
    monkeypatch.setattr(best_module, "SKYLINE_THREADS", 2)
    monkeypatch.setattr(best_module, "skyline_runs", lambda problem, seconds: True)
    ends, calls = {}, []

    def stand_in(problem, offsets, *, reverse=False, **kwargs):
        time.sleep(0.4 if reverse else 0.05)
        ends.setdefault(reverse, time.perf_counter())
        info = {"skyline_nodes": 1, "skyline_probes": 1, "skyline_bottom_share": 0.0}
        return np.array(offsets), dict(info, skyline_stalled=True)

    dives = canonical_search.random_dives

    def spy(problem, offsets, *, stop=None, **kwargs):
        width = canonical_search.threads()
        out, info = dives(problem, offsets, stop=stop, **kwargs)
        calls.append((width, stop is not None and stop(), time.perf_counter(), info["dives"]))
        return out, info

    monkeypatch.setattr(sky, "skyline_search", stand_in)
    monkeypatch.setattr(canonical_search, "random_dives", spy)
    p = rectangle_cut(1100, seed=3, pinwheel=0.4)
    start = dsa.solve(p, "best", improve=False).offsets
    out, stats = best_module.improve_plan(p, start, 0, Budget(2.0), 0)
    dsa.validate(p, out)
    width, stopped, ended, count = calls[0]
    assert width == 1 and stopped and ended >= ends[True] and count > 0  # (until the slower one ended)
    assert stats["dives"] == sum(c[3] for c in calls) and plan_peak(p, out) <= plan_peak(p, start)


def test_exact_leaves_half_its_time_to_the_skyline_search_on_small_problems():
    # 400 buffers, no fixed offsets, no proof within 2 s: the canonical search gets half of the time,
    # best's improvement phase (the skyline search first) the rest
    sky.warm()
    p = rectangle_cut(400, seed=22, pinwheel=0.2)
    sol = dsa.solve(p, "exact", time_limit=2.0)
    dsa.validate(p, sol)
    assert sol.status is dsa.Status.LIMIT_REACHED
    assert sol.stats["skyline_probes"] > 0


@pytest.mark.parametrize("n, large", [(400, False), (1100, True)])
def test_exact_gives_the_canonical_search_its_share_by_size(n, large, monkeypatch):
    # the rounds of the canonical search get half of the time left on a small problem where the
    # skyline search runs, best's smaller share on one of more than best.LARGE_ROWS rows; the
    # improvement phase gets the rest
    from dsa.strategies import exact as exact_module

    sky.warm()
    share = best_module.CANONICAL_SHARE if large else exact_module.CANONICAL_SHARE
    assert best_module.CANONICAL_SHARE < exact_module.CANONICAL_SHARE
    limits = []
    lower = canonical_search.CanonicalSearch.lower_peak

    def spy(self, offsets, *, time_limit, **kwargs):
        if len(offsets) == len(p):        # (not the searches of a part: the layers' leaves)
            limits.append((time_limit, time.perf_counter()))
        return lower(self, offsets, time_limit=time_limit, **kwargs)

    monkeypatch.setattr(canonical_search.CanonicalSearch, "lower_peak", spy)
    p = rectangle_cut(n, seed=22, pinwheel=0.2)
    assert (n > best_module.LARGE_ROWS) == large
    limit = 4.0
    began = time.perf_counter()
    sol = dsa.solve(p, "exact", time_limit=limit)
    dsa.validate(p, sol)
    assert sol.status is dsa.Status.LIMIT_REACHED and limits
    # (the first call is exact's rounds, later ones window repairs on the large problem; what is left
    # when the rounds start is less than the limit: the portfolio, the first look and the look at the
    # bound came first, for about a third of it here, for more on a loaded machine, so the share is
    # checked against what was left when the rounds were called)
    granted, called = limits[0]
    assert 0.9 * share * (began + limit - called) < granted <= share * limit
    assert sol.stats["skyline_probes"] > 0


def test_best_reports_the_skyline_search_and_stays_valid():
    # (the canonical search gets its first CANONICAL_MIN_S seconds, the skyline search comes after)
    p = rectangle_cut(400, seed=11, pinwheel=0.4, aspect=3.0, lifetimes="short")
    sol = dsa.solve(p, "best", time_limit=best_module.CANONICAL_MIN_S + 1.0)
    dsa.validate(p, sol)
    assert sol.peak <= sol.stats["portfolio_peak"]
    if sol.peak > dsa.load(p):
        assert sol.status is dsa.Status.LIMIT_REACHED
        assert sol.stats["skyline_probes"] > 0
        assert 0.0 <= sol.stats["skyline_bottom_share"] <= 1.0
        assert 0.0 <= sol.stats["skyline_idle_s"] <= best_module.skyline_width() * sol.stats["skyline_s"]


def test_a_dive_that_outgrows_its_frame_stack_grows_it_and_finds_its_plan():
    # many time columns and room to waste: wasted-space steps (one column each) outnumber the buffers
    p = rectangle_cut(100, seed=2, cells_per_buffer=4096)
    s = sky.Skyline(p, seed=0)
    depth = len(s.fr[0])
    assert s.dive(3 * dsa.load(p) // 2, 10**7, 0.0) == 1
    assert len(s.fr[0]) > depth
    dsa.validate(p, s.plan())
    assert plan_peak(p, s.plan()) <= 3 * dsa.load(p) // 2


@pytest.mark.parametrize("seed", range(6))
def test_pruning_and_branching_variants_agree_on_every_capacity(seed, monkeypatch):
    # the chain check of closed wells, the skipping of twin candidates and the branching on right
    # corners only prune or reorder: a complete deterministic dive finds a plan under one setting
    # exactly when it does under the others
    p = rectangle_cut(14, seed=seed, pinwheel=0.4, cells_per_buffer=4)
    load = dsa.load(p)
    for cap in range(load, load + 4 * 64 + 1, 64):
        verdicts = set()
        for mrv, path, twins in ((0, False, False), (2, False, False), (3, False, False),
                                 (3, True, False), (3, True, True), (0, False, True)):
            monkeypatch.setattr(sky, "MRV", mrv)
            monkeypatch.setattr(sky, "PATH", path)
            monkeypatch.setattr(sky, "TWINS", twins)
            s = sky.Skyline(p)
            status = s.dive(cap, 10**7, 0.0)
            assert status in (0, 1)
            if status == 1:
                dsa.validate(p, s.plan())
                assert plan_peak(p, s.plan()) <= cap
            verdicts.add(status)
        assert len(verdicts) == 1, cap


@pytest.mark.parametrize("seed", range(8))
def test_skipping_twins_never_changes_a_verdict_and_never_adds_nodes(seed, monkeypatch):
    # 12 buffers drawn from 5 kinds (lifetime, size, alignment): many twins, and capacities from LOAD
    # up, where alignments make some infeasible: the deterministic dive with the skipping searches a
    # part of the same tree in the same order, so it never takes more nodes and never contradicts
    rng = np.random.default_rng(seed)
    kinds = [(int(s), int(s + rng.integers(1, 5)), int(rng.choice([2, 3, 4, 6])), int(rng.choice([1, 2, 4])))
             for s in rng.integers(0, 6, 5)]
    rows = [kinds[i] for i in rng.integers(0, 5, 12)]
    starts, ends, sizes, alignments = map(list, zip(*rows))
    p = dsa.Problem(starts, ends, sizes, alignments=alignments)
    verdicts = []
    for cap in range(dsa.load(p), dsa.load(p) + 6):
        seen = {}
        for twins in (False, True):
            monkeypatch.setattr(sky, "TWINS", twins)
            s = sky.Skyline(p)
            seen[twins] = (s.dive(cap, 10**6, 0.0), s.nodes)
            if seen[twins][0] == 1:
                dsa.validate(p, s.plan())
                assert plan_peak(p, s.plan()) <= cap
        assert {seen[False][0], seen[True][0]} != {0, 1}, cap
        if seen[False][0] != -1:
            assert seen[True] == (seen[False][0], seen[True][1]) and seen[True][1] <= seen[False][1]
        verdicts.append(seen[True][0])
    assert verdicts[-1] == 1  # (LOAD + 5 is wide enough for every one of these)


def test_twin_candidates_are_tried_once(monkeypatch):
    # three identical buffers over [0, 2): the deterministic dive at LOAD takes 11 nodes without the
    # skipping of twins and 10 with it, and finds a plan at LOAD either way
    p = dsa.Problem([0, 0, 0, 1, 2, 3, 0, 0], [2, 2, 2, 3, 5, 6, 1, 3], [1, 1, 1, 1, 2, 3, 1, 1])
    nodes = {}
    for twins in (False, True):
        monkeypatch.setattr(sky, "TWINS", twins)
        s = sky.Skyline(p)
        assert s.dive(dsa.load(p), 10**6, 0.0) == 1
        dsa.validate(p, s.plan())
        assert plan_peak(p, s.plan()) == dsa.load(p)
        nodes[twins] = s.nodes
    assert nodes[True] < nodes[False]


def test_busy_periods_are_searched_apart_and_moved_down_to_zero():
    a = rectangle_cut(60, seed=1, pinwheel=0.4)
    b = rectangle_cut(60, seed=2, pinwheel=0.4)
    shift = int(a.ends.max())
    p = dsa.Problem(np.r_[a.starts, b.starts + shift], np.r_[a.ends, b.ends + shift], np.r_[a.sizes, b.sizes])
    bad = _stacked(p)  # (the second period starts high above 0)
    seen = []
    out, stats = sky.skyline_search(p, bad, time_limit=1.0, seed=0, progress=lambda s, pk: seen.append(pk))
    dsa.validate(p, out)
    from dsa.sweep import Sweep

    assert stats["skyline_periods"] == Sweep(p).n_periods >= 2
    assert plan_peak(p, out) < plan_peak(p, bad)
    assert out[len(a):].min() == 0  # the second period was planned from 0
    assert seen and seen == sorted(seen, reverse=True) and seen[-1] == plan_peak(p, out)


def test_time_reversed_problem_has_the_same_conflicts_and_plans():
    p = dsa.generate.random_trace(60, seed=4, kind="uniform", alignment=64)
    r = sky._reversed(p)
    assert np.array_equal(r.sizes, p.sizes) and np.array_equal(r.alignments, p.alignments)

    def meets(q):
        return (q.starts[:, None] < q.ends[None, :]) & (q.starts[None, :] < q.ends[:, None])

    assert np.array_equal(meets(r), meets(p))
    plan = dsa.solve(p, "greedy_by_size").offsets
    dsa.validate(r, plan)


def test_a_search_with_time_reversed_lowers_the_plan_of_the_problem_as_given(monkeypatch):
    p = rectangle_cut(150, seed=5, pinwheel=0.4)
    bad = _stacked(p)
    directions = []
    run = sky._Search.round

    def spy(self, deadline):
        directions.append(np.array_equal(self.problem.starts, p.starts))
        return run(self, deadline)

    monkeypatch.setattr(sky._Search, "round", spy)
    for reverse in (False, True):
        directions.clear()
        out, _ = sky.skyline_search(p, bad, time_limit=0.5, seed=0, reverse=reverse)
        dsa.validate(p, out)  # (offsets of the rows as given)
        assert plan_peak(p, out) < plan_peak(p, bad)
        assert directions and set(directions) == {not reverse}


def test_mirrored_re_packs_and_perfect_bottoms_give_valid_lower_plans(monkeypatch):
    p = rectangle_cut(200, seed=4, pinwheel=0.4)
    bad = _stacked(p)
    monkeypatch.setattr(sky, "MIRROR_SHARE", 1.0)  # every re-pack keeps the top and re-packs the bottom
    monkeypatch.setattr(sky, "BAND_SHARE", 0.0)
    search = sky._Search(p, bad, 0, None)
    lowered = 0
    for _ in range(40):
        before = search.peak
        if search.round(float("inf")):
            lowered += 1
            assert search.peak < before
        dsa.validate(p, search.best)
        assert plan_peak(p, search.best) == search.peak
    assert lowered > 0
    # a bottom with no waste (a dive at the bound), then dives above it below the incumbent's peak
    search = sky._Search(p, bad, 1, None)
    assert search._perfect_bottom(float("inf"))
    dsa.validate(p, search.best)
    assert search.peak < plan_peak(p, bad)


def test_a_bottom_with_no_waste_is_the_largest_of_its_dives(monkeypatch):
    # PERFECT_TRIES dives at the bound, none of which plans (on a cut this large they rarely do):
    # the re-packs above start from the state of the one that covered the most bytes x time
    p = rectangle_cut(800, seed=3, pinwheel=0.5)
    search = sky._Search(p, _stacked(p), 3, None)
    monkeypatch.setattr(sky, "PERFECT_TRIES", 5)
    monkeypatch.setattr(sky, "EXTEND_SHARE", 0.0)  # (from nothing, not from the incumbent's bottom)
    monkeypatch.setattr(sky, "CLIMB", False)  # (each dive from nothing: see the climb's tests below)
    at_bound, kept = [], []
    dive, set_keep = search.sky.dive, search.sky.set_keep

    def spy_dive(cap, node_limit, noise):
        status = dive(cap, node_limit, noise)
        if cap == search.bound:
            at_bound.append((status, float(search.area[search.sky.placed].sum())))
        return status

    def spy_keep(offsets, keep, above=None):
        if keep is not None:  # (None: the floor cleared before the dives at the bound)
            kept.append(np.asarray(keep).copy())
        return set_keep(offsets, keep, above)

    monkeypatch.setattr(search.sky, "dive", spy_dive)
    monkeypatch.setattr(search.sky, "set_keep", spy_keep)
    before = search.peak
    search._perfect_bottom(float("inf"))
    statuses, areas = zip(*at_bound)
    assert len(at_bound) == 5 and 1 not in statuses and len(set(areas)) > 1
    assert kept and float(search.area[kept[0]].sum()) == max(areas)
    dsa.validate(p, search.best)
    assert search.peak <= before and plan_peak(p, search.best) == search.peak


def _wastes_nothing(search, keep):
    """Whether the rows ``keep`` (a mask of ``search.sky.rows``, at their offsets in the dive's state)
    fill every time column up to their highest top there."""
    s = search.sky
    k = np.flatnonzero(keep)
    top = np.zeros(s.T, dtype=np.int64)
    for r in k:
        top[s.cs[r]:s.ce[r]] = np.maximum(top[s.cs[r]:s.ce[r]], s.offsets[r] + s.sz[r])
    return np.array_equal(s.column_sums(k, s.sz[k]), top)


@pytest.mark.parametrize("local", [0.0, 1.0])
@pytest.mark.parametrize("seed", range(3))
def test_the_climb_cuts_and_keeps_bottoms_with_no_waste(seed, local, monkeypatch):
    # each dive of the climb starts from its bottom cut at a level: the rows kept fill their columns up
    # to their skyline (a cut of a bottom with no waste has none: at a level, or a window around where
    # the dives stopped with all that lies over it), and what the dive leaves placed at the bound has
    # no waste either; the climb's bottom never shrinks until it starts again
    monkeypatch.setattr(sky, "CLIMB_LOCAL_SHARE", local)
    monkeypatch.setattr(sky, "CLIMB_STUCK", 1000)  # (no new start within the 25 dives below)
    p = rectangle_cut(300, seed=seed, pinwheel=0.5)
    search = sky._Search(p, _stacked(p), seed, None)
    s = search.sky
    areas, cuts = [], 0
    for _ in range(25):
        search._climb_start()
        assert _wastes_nothing(search, s.keep)
        cuts += search.climb is not None and 0 < s.keep.sum() < search.climb[1].sum()
        if s.dive(search.bound, sky.PERFECT_NODES * len(s.rows) + 16, sky.NOISE) == 1:
            dsa.validate(p, s.plan())  # (a plan at the bound: the climb is done)
            assert plan_peak(p, s.plan()) <= search.bound
            return
        assert _wastes_nothing(search, s.placed)
        area = float(search.area[s.placed].sum())
        bottom, kept, most = search._climb_step(area)
        assert most == float(search.area[kept].sum()) >= area
        areas.append(most)
    assert areas == sorted(areas) and cuts > 0


def test_the_climb_takes_ties_and_starts_again_when_stuck(monkeypatch):
    p = rectangle_cut(60, seed=1, pinwheel=0.5)
    search = sky._Search(p, _stacked(p), 1, None)
    monkeypatch.setattr(sky, "CLIMB_STUCK", 3)
    monkeypatch.setattr(sky, "CLIMB_SLICE_FROM", 6.0 / search.area.sum())
    got, grew = [], []
    for a in (5.0, 7.0, 4.0, 7.0, 6.0):
        search.grew = False
        got.append(search._climb_step(a)[2])
        grew.append(search.grew)
    assert got == [5.0, 7.0, 7.0, 7.0, 7.0]  # (a tie is taken: a sideways step)
    # progress for the stall rule: a bottom larger than any before, of at least CLIMB_SLICE_FROM
    assert grew == [False, True, False, False, False]
    assert search.climb is None and search.climb_fails == 0  # (3 steps without a larger bottom)
    assert search.largest == 7.0 and search._climb_step(2.0)[2] == 2.0  # (a new climb from nothing)
    search.climb = None
    search._climb_start()  # (no bottom: nothing kept)
    assert not search.sky.keep.any()


def test_a_round_of_the_climb_re_packs_above_its_bottom(monkeypatch):
    # with no time slice, a round of the climb runs PERFECT_TRIES dives at the bound, and the re-packs
    # above start from the climb's bottom (the largest of those dives: no new start in so few)
    p = rectangle_cut(800, seed=3, pinwheel=0.5)
    search = sky._Search(p, _stacked(p), 3, None)
    monkeypatch.setattr(sky, "PERFECT_TRIES", 4)
    monkeypatch.setattr(sky, "CLIMB_SLICE_S", 0.0)
    monkeypatch.setattr(sky, "EXTEND_SHARE", 0.0)
    areas, kept = [], []
    dive, set_keep = search.sky.dive, search.sky.set_keep

    def spy_dive(cap, node_limit, noise):
        status = dive(cap, node_limit, noise)
        if cap == search.bound:
            areas.append(float(search.area[search.sky.placed].sum()))
        return status

    def spy_keep(offsets, keep, above=None):
        kept.append(None if keep is None else np.asarray(keep).copy())
        return set_keep(offsets, keep, above)

    monkeypatch.setattr(search.sky, "dive", spy_dive)
    monkeypatch.setattr(search.sky, "set_keep", spy_keep)
    search._perfect_bottom(float("inf"))
    assert len(areas) == 4 and search.climb is not None and search.climb[2] == max(areas)
    assert search.largest == max(areas)
    assert search.grew == (max(areas) >= sky.CLIMB_SLICE_FROM * search.area.sum())
    after = kept[kept.index(None) + 4:]  # (the floor cleared for the first dive, then 3 cuts)
    assert after and float(search.area[after[0]].sum()) == max(areas)
    dsa.validate(p, search.best)


def test_mirrored_re_packs_are_off_with_alignments():
    p = dsa.Problem([0, 0, 1], [2, 2, 3], [64, 32, 64], alignments=[64, 32, 1])
    assert not sky._Search(p, dsa.solve(p, "bump").offsets, 0, None).mirrorable
    assert sky._Search(rectangle_cut(20, seed=0), rectangle_cut(20, seed=0, return_plan=True)[1], 0,
                       None).mirrorable


@pytest.mark.parametrize("seed", range(6))
def test_a_dive_under_a_ceiling_stays_below_it(seed):
    # the known optimal plan of a cut, its middle taken out: the rows below a level stay as a floor,
    # those above another as a ceiling. The middle rows tile the room between the two, so the complete
    # deterministic dive re-packs them there (a perfect tiling is canonical), and every plan is valid
    # with the ceiling rows where they were; with the ceiling one quantum lower there is no room
    p, plan = rectangle_cut(40, seed=seed, pinwheel=0.4, cells_per_buffer=4, return_plan=True)
    peak = plan_peak(p, plan)
    a, b = peak // 4, 3 * peak // 4
    low, high = plan + p.sizes <= a, plan >= b
    assert low.any() and high.any() and (~low & ~high).any()
    s = sky.Skyline(p)
    assert s.set_keep(plan, low, high) == np.count_nonzero(low | high)
    assert s.dive(peak, 10**7, 0.0) == 1
    out = s.plan()
    dsa.validate(p, out)
    assert np.array_equal(out[low | high], plan[low | high]) and plan_peak(p, out) == peak
    lower = np.where(high, plan - 64, plan)
    s.set_keep(lower, low, high)
    assert s.dive(peak, 10**7, 0.0) == 0
    s.set_keep(None, None)  # (and no ceiling is left behind)
    assert s.dive(peak, 10**7, 0.0) == 1
    dsa.validate(p, s.plan())


def _gappy_plan(problem, rng):
    """A valid plan whose offsets are not multiples of the sizes' common divisor: first fit in a
    random order, each buffer lifted by a random gap."""
    off = np.zeros(len(problem), dtype=np.int64)
    done = []
    for r in rng.permutation(len(problem)):
        o = int(rng.integers(0, 64))
        while True:
            hit = [q for q in done if problem.starts[q] < problem.ends[r] and problem.starts[r] < problem.ends[q]
                   and off[q] < o + problem.sizes[r] and o < off[q] + problem.sizes[q]]
            if not hit:
                break
            o = max(int(off[q] + problem.sizes[q]) for q in hit) + int(rng.integers(0, 2)) * int(rng.integers(0, 64))
        off[r] = o
        done.append(r)
    return off


@pytest.mark.parametrize("seed", range(8))
def test_band_re_packs_give_valid_lower_plans(seed):
    # incumbents from greedy by size and plans with random gaps (offsets off the quantum, where
    # buffers less than a quantum under a moving one must move too): every band re-pack that the
    # search takes is a valid plan with a lower peak, and some are taken
    rng = np.random.default_rng(seed)
    p = rectangle_cut(int(rng.integers(20, 80)), seed=seed, pinwheel=0.4)
    start = _gappy_plan(p, rng) if seed % 2 else dsa.solve(p, "greedy_by_size").offsets
    dsa.validate(p, start)
    search = sky._Search(p, start, seed, None)
    assert search.bandable and search.quantum == np.gcd.reduce(p.sizes)
    lowered = 0
    for _ in range(100):
        before = search.peak
        if search._band(float("inf")):
            lowered += 1
            dsa.validate(p, search.best)
            assert plan_peak(p, search.best) == search.peak < before
        else:
            assert search.peak == before
    assert lowered > 0


def test_band_re_packs_are_off_where_moving_by_the_quantum_breaks_an_alignment():
    p = dsa.Problem([0, 0, 1], [2, 2, 3], [64, 128, 64], alignments=[128, 1, 1])
    assert not sky._Search(p, dsa.solve(p, "bump").offsets, 0, None).bandable
    p = dsa.Problem([0, 0, 1], [2, 2, 3], [64, 128, 64], alignments=[32, 1, 64])
    assert sky._Search(p, dsa.solve(p, "bump").offsets, 0, None).bandable


@pytest.mark.parametrize("seed", range(4))
def test_cover_max_matches_filling_each_range(seed):
    from dsa._kernels import skyline as kernels

    rng = np.random.default_rng(seed)
    for _ in range(200):
        T, n = int(rng.integers(1, 40)), int(rng.integers(0, 30))
        cs = rng.integers(0, T, n)
        ce = np.minimum(T, cs + rng.integers(1, T + 1, n))
        vals, out = rng.integers(-50, 50, n), rng.integers(-20, 20, T)
        expect = out.copy()
        for i in range(n):
            expect[cs[i]:ce[i]] = np.maximum(expect[cs[i]:ce[i]], vals[i])
        kernels.cover_max(cs, ce, vals, out)
        assert np.array_equal(out, expect)


@pytest.mark.parametrize("seed", range(4))
def test_peak_holes_are_the_gaps_of_the_columns_at_the_peak(seed):
    rng = np.random.default_rng(seed)
    p = rectangle_cut(int(rng.integers(20, 80)), seed=seed, pinwheel=0.4)
    search = sky._Search(p, _gappy_plan(p, rng), seed, None)
    s = search.sky
    off = search.best[s.rows]
    top = off + s.sz
    expect = set()
    for t in range(s.T):
        alive = np.flatnonzero((s.cs <= t) & (t < s.ce))
        if top[alive].max() != search.peak:
            continue
        below = 0
        for r in alive[np.argsort(off[alive])]:
            if off[r] > below:
                expect.add((t, below, int(off[r])))
            below = int(top[r])
    got = set(zip(*(a.tolist() for a in search._peak_holes(off, top))))
    assert got == expect and expect


def test_band_re_packs_give_up_where_the_columns_at_the_peak_hold_too_many_buffers(monkeypatch):
    p = rectangle_cut(60, seed=1, pinwheel=0.4)
    search = sky._Search(p, dsa.solve(p, "greedy_by_size").offsets, 0, None)
    before = search.best.copy()
    monkeypatch.setattr(sky, "HOLES_MAX_CELLS", 0)
    assert not search._band(float("inf"))
    assert np.array_equal(search.best, before)


def test_a_dive_past_its_deadline_ends_at_its_first_node():
    # with its deadline passed, a dive stops at its first node (status -1: no plan and no proof),
    # though the node limit allows the complete search, which finds the known optimal plan
    p, plan = rectangle_cut(60, seed=2, pinwheel=0.4, return_plan=True)
    s = sky.Skyline(p)
    s.deadline = time.perf_counter() - 1.0
    assert s.dive(plan_peak(p, plan), 10**7, 0.0) == -1
    assert s.nodes == 1
    s.deadline = time.perf_counter() + 3600.0
    assert s.dive(plan_peak(p, plan), 10**7, 0.0) == 1
    dsa.validate(p, s.plan())


def test_the_first_round_calibrates_the_dives_unit_on_a_nearly_continuous_cut():
    # sizes and lifetimes nearly all distinct: a dive takes a few times more nodes than the default
    # unit to reach a plan, so the first round (one long deterministic dive) sets the unit to what it
    # took and lowers the peak of a greedy plan
    p = rectangle_cut(400, seed=3, pinwheel=0.2, cells_per_buffer=1024)
    search = sky._Search(p, dsa.solve(p, "greedy_by_size").offsets, 0, None)
    unit, peak = search.unit, search.peak
    assert search.round(float("inf"))
    dsa.validate(p, search.best)
    assert search.calibrated and plan_peak(p, search.best) == search.peak < peak
    assert search.unit == search.sky.nodes > unit
    assert search.rounds == 0  # (the schedule of the other rounds is unchanged)


def test_a_calibration_dive_that_proves_its_capacity_infeasible_marks_it_seen():
    p, plan = rectangle_cut(60, seed=4, pinwheel=0.4, return_plan=True)
    search = sky._Search(p, plan, 0, None)  # at LOAD: one byte less is infeasible
    assert not search.round(float("inf"))
    assert search.calibrated and search.seen == {search.peak - 1}
    assert np.array_equal(search.best, plan)


@pytest.mark.parametrize("seed", range(6))
def test_the_table_of_dead_states_never_changes_a_verdict_and_never_adds_nodes(seed, monkeypatch):
    # a complete deterministic dive searches the same tree in the same order with the table of dead
    # states, less the subtrees of states met before: the same verdict, never more nodes
    p = rectangle_cut(16, seed=seed, pinwheel=0.4, cells_per_buffer=4)
    load = dsa.load(p)
    for cap in range(load, load + 4 * 64 + 1, 64):
        seen = {}
        for memo in (False, True):
            monkeypatch.setattr(sky, "MEMO", memo)
            s = sky.Skyline(p)
            seen[memo] = (s.dive(cap, 10**7, 0.0), s.nodes)
            assert seen[memo][0] in (0, 1)
            if seen[memo][0] == 1:
                dsa.validate(p, s.plan())
                assert plan_peak(p, s.plan()) <= cap
        assert seen[True][0] == seen[False][0] and seen[True][1] <= seen[False][1], cap


def test_dead_states_are_kept_per_capacity_and_per_floor():
    # a capacity searched to the end is dead at once the next time; a larger capacity, or the same one
    # above another floor, is searched afresh
    rng = np.random.default_rng(0)
    for _ in range(200):  # a small problem that does not fit in LOAD, found after a search
        starts = rng.integers(0, 8, 12)
        p = dsa.Problem(starts, starts + rng.integers(1, 5, 12), rng.integers(1, 9, 12))
        s = sky.Skyline(p)
        if s.dive(dsa.load(p), 10**6, 0.0) == 0 and s.nodes > 2:
            break
    else:
        pytest.fail("no small problem infeasible at LOAD")
    assert len(s.memo) > 0
    before = s.nodes
    assert s.dive(dsa.load(p), 10**6, 0.5) == 0
    assert s.nodes - before == 1  # its root is in the table
    assert s.dive(2 * dsa.load(p), 10**6, 0.0) == 1
    plan = s.plan()
    dsa.validate(p, plan)
    s.set_floor(plan, plan_peak(p, plan) // 2)
    assert s.salt != 0
    assert s.dive(plan_peak(p, plan), 10**6, 0.0) == 1  # (the floor's own plan is there to find)
    s.set_floor(None)
    before = s.nodes
    assert s.salt == 0 and s.dive(dsa.load(p), 10**6, 0.0) == 0 and s.nodes - before == 1


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_bound_look_tiles_every_busy_period_at_the_bound(threads, monkeypatch):
    # short lifetimes: the rectangle falls apart into busy periods, each tiled at LOAD on its own
    # (each skyline on one thread, whatever their number)
    from dsa.strategies import _canonical_search

    monkeypatch.setattr(_canonical_search, "THREADS", threads)
    for seed in range(3):
        p = rectangle_cut(120, seed=seed, pinwheel=0.3, lifetimes="short")
        start = _stacked(p)
        out = sky.bound_look(p, start, dsa.load(p), time.perf_counter() + 60, seed=seed)
        assert out is not None
        dsa.validate(p, out)
        assert plan_peak(p, out) == dsa.load(p)


def test_bound_look_gives_up_on_a_capacity_it_proves_out_of_reach_and_at_its_deadline():
    p = dsa.Problem([0, 0], [2, 2], [4, 4])
    assert sky.bound_look(p, np.array([0, 4]), 7, time.perf_counter() + 60) is None
    out = sky.bound_look(p, np.array([0, 4]), 8, time.perf_counter() + 60)
    assert np.array_equal(np.sort(out), [0, 4])
    big = rectangle_cut(2000, seed=1)
    assert sky.bound_look(big, _stacked(big), dsa.load(big), time.perf_counter()) is None
    # a period of more rows than max_rows: nothing tried without large_deadline (however far the
    # deadline), else the look ends by it (here at once)
    assert sky.bound_look(big, _stacked(big), dsa.load(big), time.perf_counter() + 60, max_rows=100) is None
    began = time.perf_counter()
    assert sky.bound_look(big, _stacked(big), dsa.load(big), began + 60, max_rows=100, large_deadline=began) is None
    assert time.perf_counter() - began < 30.0  # (not the 60 s of its deadline)
    # a plan already within the capacity is returned as it is
    plan = rectangle_cut(50, seed=1, return_plan=True)[1]
    small = rectangle_cut(50, seed=1)
    assert np.array_equal(sky.bound_look(small, plan, dsa.load(small), time.perf_counter()), plan)


def test_the_look_at_the_bound_plans_there_and_keeps_to_its_conditions(monkeypatch):
    sky.warm()
    p = rectangle_cut(120, seed=1, pinwheel=0.3, lifetimes="short")
    bad = _stacked(p)
    stats = {}
    out = best_module.bound_look(p, bad, dsa.load(p), Budget(30.0), 0, stats)
    dsa.validate(p, out)
    assert plan_peak(p, out) == dsa.load(p) and stats["bound_look"] is True
    # a plan already at the target, too little time left, a busy period above the target with more
    # rows than BOUND_LOOK_MAX_ROWS and no share of the time for such: nothing found (and in the first
    # two cases, nothing tried)
    monkeypatch.setattr(best_module, "BOUND_LOOK_LARGE_SHARE", 0.0)
    monkeypatch.setattr(best_module, "LAYERS_SHARE", 0.0)  # (tests/test_layer_cuts.py tries the layers)
    for plan, limit, rows, tried in ((out, 30.0, 1000, False), (bad, best_module.BOUND_LOOK_MIN_S / 2, 1000, False),
                                     (bad, 30.0, 10, True)):
        monkeypatch.setattr(best_module, "BOUND_LOOK_MAX_ROWS", rows)
        stats = {}
        assert best_module.bound_look(p, plan, dsa.load(p), Budget(limit), 0, stats) is None
        assert stats == ({"bound_look": False, "bound_look_s": stats.get("bound_look_s")} if tried else {})
    # with its share (here 1 s of 10), the short look at a large period plans this one at once
    monkeypatch.setattr(best_module, "BOUND_LOOK_LARGE_SHARE", 0.1)
    stats = {}
    out = best_module.bound_look(p, bad, dsa.load(p), Budget(10.0), 0, stats)
    dsa.validate(p, out)
    assert plan_peak(p, out) == dsa.load(p) and stats["bound_look"] is True


def test_the_look_at_the_bound_takes_its_share_of_the_time_left(monkeypatch):
    p = rectangle_cut(120, seed=1, pinwheel=0.3, lifetimes="short")
    given = []

    def look(problem, offsets, cap, deadline, seed=None, max_rows=None, large_deadline=None):
        now = time.perf_counter()
        given.append((deadline - now, None if large_deadline is None else large_deadline - now, max_rows))
        return None

    monkeypatch.setattr(sky, "bound_look", look)
    monkeypatch.setattr(best_module, "skyline_runs", lambda problem, seconds: True)
    # (the layers, tried first on such tilings, would call the look for their leaves: off here)
    monkeypatch.setattr(best_module, "LAYERS_SHARE", 0.0)
    for limit in (10.0, 600.0):
        best_module.bound_look(p, _stacked(p), dsa.load(p), Budget(limit), 0)
    for limit, (seconds, large, rows) in zip((10.0, 600.0), given):
        assert 0.9 * best_module.BOUND_LOOK_SHARE * limit < seconds <= best_module.BOUND_LOOK_SHARE * limit
        # (and where a busy period has more than BOUND_LOOK_MAX_ROWS rows, its own, smaller share)
        assert 0.9 * best_module.BOUND_LOOK_LARGE_SHARE * limit < large <= best_module.BOUND_LOOK_LARGE_SHARE * limit
        assert rows == best_module.BOUND_LOOK_MAX_ROWS
    # on a problem of more than BOUND_LOOK_LARGE_MAX_ROWS movable rows, no share for large periods
    monkeypatch.setattr(best_module, "BOUND_LOOK_LARGE_MAX_ROWS", len(p) - 1)
    best_module.bound_look(p, _stacked(p), dsa.load(p), Budget(10.0), 0)
    assert given[-1][1] is None and given[-1][0] > 0.9 * best_module.BOUND_LOOK_SHARE * 10.0


@pytest.mark.parametrize("strategy", ["best", "exact"])
def test_best_and_exact_plan_a_perfect_tiling_by_their_look_at_the_bound(strategy):
    # (neither the portfolio nor the canonical first look plans at the bound here; the skyline dives
    # at the bound do, at once)
    sky.warm()
    p = rectangle_cut(120, seed=2, pinwheel=0.3, lifetimes="short")
    sol = dsa.solve(p, strategy, time_limit=30.0)
    dsa.validate(p, sol)
    assert sol.status is dsa.Status.OPTIMAL and sol.peak == dsa.load(p)
    assert sol.stats["bound_look"] is True


@pytest.mark.parametrize("strategy", ["best", "exact"])
def test_a_large_edge_to_edge_tiling_is_planned_at_the_bound_by_a_short_look(strategy):
    # 1,100 buffers, one busy period: more rows than BOUND_LOOK_MAX_ROWS, so the look at the bound
    # gets BOUND_LOOK_LARGE_SHARE of the time; its first dives plan such tilings there
    # a guillotine cut on a fine grid (104,881 time steps by 1,049 quanta), pieces drawn by area, as
    # omnimalloc's TilingSource cuts them: with boundaries this fine the dives plan it at once (on a coarse
    # grid, 4,096 cells per buffer of a square, they do not: such cuts stay hard)
    sky.warm()
    p = rectangle_cut(1100, seed=0, pinwheel=0, draw="area", aspect=100, cells_per_buffer=100_000)
    assert len(p) == 1100 and int(p.ends.max()) > 100_000
    sol = dsa.solve(p, strategy, time_limit=20.0)
    dsa.validate(p, sol)
    assert sol.status is dsa.Status.OPTIMAL and sol.peak == dsa.load(p)
    assert sol.stats["bound_look"] is True


def test_a_beam_plans_at_the_bound_where_a_long_dive_does_not():
    # 120 buffers with pinwheels: a beam of 64 states plans at LOAD (a valid plan, every row placed),
    # a deterministic dive of a million nodes finds nothing
    sky.warm()
    p = rectangle_cut(120, seed=2, pinwheel=0.4)
    load = dsa.lower_bound(p)
    s = sky.Skyline(p, 0)
    assert s.dive(load, 10**6, 0.0) == -1
    s = sky.Skyline(p, 0)
    assert s.beam(load, 64) == 1
    plan = s.plan()
    dsa.validate(p, plan)
    assert plan_peak(p, plan) == load


@pytest.mark.parametrize("seed", range(6))
def test_beam_plans_are_valid_and_within_the_capacity(seed):
    # random small problems (alignments, gaps in time, slack), capacities from the bound up: a beam
    # that reports a plan has a valid one within the capacity; one below the bytes alive at some
    # instant reports none at once
    sky.warm()
    rng = np.random.default_rng(seed)
    for _ in range(30):
        n = int(rng.integers(1, 25))
        starts = rng.integers(0, 12, n)
        p = dsa.Problem(starts, starts + rng.integers(1, 6, n), rng.integers(1, 9, n) * 4,
                        alignments=rng.choice([1, 1, 4, 8], n))
        load = dsa.load(p)
        for cap in (load, load + 4, load + 16, int(p.sizes.sum()) + 32):
            s = sky.Skyline(p, int(rng.integers(1 << 30)))
            status = s.beam(cap, int(rng.integers(1, 20)), per_parent=int(rng.integers(1, 4)))
            assert status in (0, 1)
            if status == 1:
                plan = s.plan()
                dsa.validate(p, plan)
                assert plan_peak(p, plan) <= cap
        assert sky.Skyline(p, 0).beam(load - 1, 8) == 0


@pytest.mark.parametrize("seed", range(30))
def test_dives_round_the_capacity_to_the_grain_without_changing_what_they_find(seed):
    # sizes and alignments of a common grain: every level a dive reaches is a multiple of it, so a
    # capacity rounded down to one allows the same plans (and its exact slack lets the corners be
    # checked). A complete dive (no node limit) at a capacity off the grain finds a plan exactly
    # where the same dive with the rounding turned off does, and the plan is within the capacity
    sky.warm()
    rng = np.random.default_rng(seed)
    grain = int(rng.choice([2, 8, 64]))
    n = int(rng.integers(6, 18))
    starts = rng.integers(0, 6, n)
    p = dsa.Problem(starts, starts + rng.integers(1, 5, n), rng.integers(1, 6, n) * grain,
                    alignments=rng.choice([1, 1, grain, 2 * grain], n))
    load = dsa.lower_bound(p)
    for cap in (load + int(rng.integers(1, grain + 1)) - 1, load + grain + grain // 2, load + 3 * grain - 1):
        s = sky.Skyline(p, 0)
        assert s.grain % grain == 0 and s._cap(cap) == cap - cap % s.grain
        found = s.dive(cap, 10**9, 0.0)
        off = sky.Skyline(p, 0)
        off.grain = 1  # (no rounding)
        assert found == off.dive(cap, 10**9, 0.0)
        if found == 1:
            dsa.validate(p, s.plan())
            assert plan_peak(p, s.plan()) <= cap


def test_dives_keep_the_capacity_where_kept_rows_are_off_the_grain():
    # a kept row whose top is not a multiple of the grain makes levels off it: no rounding
    p = rectangle_cut(60, seed=2)
    s = sky.Skyline(p, 0)
    assert s.grain == 64 and s._cap(10_000 * 64 + 5) == 10_000 * 64
    offsets = dsa.solve(p, "greedy_by_size").offsets.copy()
    s.set_floor(offsets, int(plan_peak(p, offsets)))
    assert s._cap(10_000 * 64 + 5) == 10_000 * 64
    offsets[0] += 3  # (a row 3 bytes off: kept, its top off the grain)
    s.set_keep(offsets, np.arange(len(s.rows)) == np.flatnonzero(s.rows == 0)[0])
    assert not s.on_grain and s._cap(10_000 * 64 + 5) == 10_000 * 64 + 5
    s.set_keep(None, None)
    assert s.on_grain


@pytest.mark.parametrize("seed", range(20))
def test_beam_counts_the_runs_a_move_changes_as_a_full_count_does(seed):
    # the beam scores a child by its parent's runs plus the change on the columns it moved
    # (_starts), instead of counting the whole skyline again (_runs): the two must agree
    from dsa._kernels.skyline_beam import _runs, _starts

    rng = np.random.default_rng(seed)
    T = int(rng.integers(1, 30))
    for _ in range(50):
        h = rng.integers(0, 4, T)
        rem = rng.integers(0, 3, T) * rng.integers(0, 2, T)
        a = int(rng.integers(0, T))
        b = int(rng.integers(a + 1, T + 1))
        h2, rem2 = h.copy(), rem.copy()
        h2[a:b] = int(rng.integers(0, 5))  # (a buffer placed on [a, b), or a column raised)
        rem2[a:b] = np.maximum(0, rem2[a:b] - int(rng.integers(0, 3)))
        assert (_runs(T, h2, rem2) - _runs(T, h, rem)
                == _starts(T, h2, rem2, a, b) - _starts(T, h, rem, a, b))


def test_beam_stops_at_its_deadline_and_covers_only_the_whole_problem():
    sky.warm()
    p = rectangle_cut(400, seed=3, pinwheel=0.4)
    s = sky.Skyline(p, 0)
    s.deadline = time.perf_counter()  # (passed: no work allowed)
    assert s.beam(dsa.lower_bound(p), 1024) == -1
    assert 1 <= s.beam_max_width() and s.beam_max_width() * len(p) * 18 <= sky.BEAM_MAX_BYTES
    s.set_floor(dsa.solve(p, "greedy_by_size").offsets, dsa.lower_bound(p) // 2)
    with pytest.raises(ValueError, match="whole problem"):
        s.beam(dsa.lower_bound(p), 8)


def test_bound_look_runs_beams_between_dives_and_a_dead_beam_proves_nothing(monkeypatch):
    # beams as long as the dives, each twice as wide as the one before with time forwards, by the Luby
    # sequence with time backwards; a beam that dies out (status 0) does not end the look (the dives
    # still plan the problem at the bound)
    sky.warm()
    sky.warm_beam()
    assert sky.beam_ready()
    widths = []
    widest = {}

    def dead_beam(self, cap, width, per_parent=None, noise=sky.NOISE):
        widths.append((id(self), width))
        widest[id(self)] = self.beam_max_width()
        time.sleep(0.001)  # (lets the other thread run: these stand-ins hold the GIL, the kernels do not)
        return 0

    monkeypatch.setattr(sky.Skyline, "beam", dead_beam)
    monkeypatch.setattr(sky, "BEAM_AFTER_S", 0.0)
    p = rectangle_cut(60, seed=1, pinwheel=0.4)
    dives = []
    dive = sky.Skyline.dive

    def slow_dive(self, cap, node_limit, noise):
        dives.append(node_limit)
        time.sleep(0.001)
        return dive(self, cap, node_limit, noise) if len(dives) > 24 else -1

    monkeypatch.setattr(sky.Skyline, "dive", slow_dive)
    start = dsa.solve(p, "greedy_by_size").offsets
    out = sky.bound_look(p, start, dsa.lower_bound(p), time.perf_counter() + 10.0, seed=0)
    assert out is not None
    dsa.validate(p, out)
    assert plan_peak(p, out) == dsa.lower_bound(p)
    assert widths
    kinds = []
    for one in {k for k, _ in widths}:  # (each skyline's own beams: time forwards and backwards)
        mine = [w for k, w in widths if k == one]
        doubling = [min(sky.BEAM_WIDTH << i, widest[one]) for i in range(len(mine))]
        by_luby = [min(sky.BEAM_WIDTH * sky.luby(i), widest[one]) for i in range(1, len(mine) + 1)]
        assert mine in (doubling, by_luby)
        if len(mine) >= 3:  # (where the two schedules differ)
            kinds.append(mine == doubling)
    assert set(kinds) == {False, True}


def test_next_beam_width_doubles_or_follows_luby_and_restarts_where_a_beam_would_not_end_in_time():
    w0 = sky.BEAM_WIDTH
    assert sky.next_beam_width(w0, 1, False, 0.1, 10.0, 10 ** 6) == 2 * w0
    assert sky.next_beam_width(4 * w0, 3, False, 0.1, 10.0, 10 ** 6) == 8 * w0
    assert sky.next_beam_width(4 * w0, 3, False, 0.1, 10.0, 5 * w0) == 5 * w0  # (the widest that fits)
    # by the Luby sequence: the width after the k-th beam is BEAM_WIDTH x luby(k + 1)
    got = [sky.next_beam_width(w0, k, True, 0.1, 10.0, 10 ** 6) for k in range(1, 15)]
    assert got == [w0 * sky.luby(k + 1) for k in range(1, 15)] and max(got) == 8 * w0
    # the next beam would take (its width / the last one's) x the last one's seconds: over the time
    # left, the next is BEAM_WIDTH wide instead; at the limit it still runs
    assert sky.next_beam_width(4 * w0, 3, False, 1.0, 1.9, 10 ** 6) == w0
    assert sky.next_beam_width(4 * w0, 3, False, 1.0, 2.0, 10 ** 6) == 8 * w0
    assert sky.next_beam_width(w0, 6, True, 1.0, 3.9, 10 ** 6) == w0  # (luby(7) = 4: 4 s)
    assert sky.next_beam_width(w0, 6, True, 1.0, 4.0, 10 ** 6) == 4 * w0


@pytest.mark.parametrize("ready, look_s, after, runs", [(True, 0.5, 0.0, True), (False, 0.5, 0.0, False),
                                                       (False, 2.0, 0.0, True), (True, 0.5, 5.0, False)])
def test_bound_look_runs_beams_where_their_kernel_is_compiled_or_the_look_is_long(ready, look_s, after, runs,
                                                                                     monkeypatch):
    # with a cold numba cache a short look does not spend its time compiling the beam's kernel; beams
    # start once the dives have run BEAM_AFTER_S
    sky.warm()
    sky.warm_beam()
    monkeypatch.setattr(sky, "beam_ready", lambda: ready)
    monkeypatch.setattr(sky, "BEAM_COLD_MIN_S", 1.0)
    monkeypatch.setattr(sky, "BEAM_AFTER_S", after)
    calls = []
    monkeypatch.setattr(sky.Skyline, "beam", lambda self, cap, width, **kw: calls.append(width) or 0)
    p = rectangle_cut(400, seed=3, pinwheel=0.4)  # (no plan at LOAD from the dives in 2 s)
    start = dsa.solve(p, "greedy_by_size").offsets
    out = sky.bound_look(p, start, dsa.lower_bound(p), time.perf_counter() + look_s, seed=0)
    assert out is None
    assert bool(calls) == runs


def test_a_dives_work_counts_the_buffers_its_dead_end_check_looks_at():
    # at the bound the skyline's runs are closed wells whose bottom rows the dead-end check covers
    # with the buffers starting in them: it can look at thousands of buffers at each node. Each
    # counts as a step of the work limit: uncounted, on 50,000 buffers over 700 columns a node took
    # 30-56 us where it was counted as 1,400 column steps, and a dive under a 1.4 s limit ran 4.3 s.
    # Here, 2,000 buffers over 179 columns and a limit of twenty nodes' passes over the columns: the
    # dive stops after 8 nodes (17 when those steps did not count)
    p = rectangle_cut(2000, seed=0)
    s = sky.Skyline(p, seed=0)
    assert len(s.rows) > 8 * s.T  # (many buffers per column)
    status = s._dive(dsa.lower_bound(p), 10**9, 40 * s.T, 0.0)
    assert status == -1 and s.nodes <= 10


def test_the_search_asks_stop_between_rounds():
    # improve_plan runs skyline searches side by side: once one reaches the bound, the others stop at
    # their next round (before, they ran on until their own stall or time limit: on a cut of 663
    # buffers `best` returned 6 s after its plan at LOAD)
    p = rectangle_cut(120, seed=1, pinwheel=0.4)
    bad = _stacked(p)
    asked = []
    out, stats = sky.skyline_search(p, bad, time_limit=30.0, seed=0, stop=lambda: asked.append(1) or True)
    dsa.validate(p, out)
    assert asked and stats["skyline_probes"] == 0 and plan_peak(p, out) <= plan_peak(p, bad)
    rounds = []
    out, stats = sky.skyline_search(p, bad, time_limit=30.0, seed=0,
                                    stop=lambda: rounds.append(1) or len(rounds) > 3)
    assert stats["skyline_probes"] <= 3 and len(rounds) <= 4  # (fewer where it reached the bound)


@pytest.mark.parametrize("seed", range(8))
def test_flattening_re_packs_give_valid_plans_never_higher_and_flatter_when_taken(seed):
    # from greedy plans of small cuts: every plan a flattening re-pack takes is valid, and either
    # lowers the peak or keeps it with strictly fewer bytes x time in its top quantum; the rounds
    # that take nothing leave the incumbent as it was; some rounds take a plan
    rng = np.random.default_rng(seed)
    p = rectangle_cut(int(rng.integers(30, 120)), seed=seed, pinwheel=0.4, cells_per_buffer=8)
    search = sky._Search(p, dsa.solve(p, "greedy_by_size").offsets, seed, None)
    taken = 0
    for _ in range(150):
        if search.peak <= search.bound:
            break
        before, peak, hot = search.best.copy(), search.peak, search._hot(search.best)[1]
        lowered = search._flatten(float("inf"))
        dsa.validate(p, search.best)
        assert plan_peak(p, search.best) == search.peak
        if lowered:
            assert search.peak < peak
        elif not np.array_equal(search.best, before):
            assert search.peak == peak and search._hot(search.best)[1] < hot
        taken += lowered or not np.array_equal(search.best, before)
    assert taken > 0


def test_the_top_quantum_is_measured_in_bytes_x_time():
    # two buffers side by side in time at 0 (sizes 64 and 128 over [0, 3) and [3, 4)) and one on top
    # of the first: the peak is 192 over [0, 3); its top quantum (64 bytes) is 3 x 64 there
    p = dsa.Problem([0, 3, 0], [3, 4, 3], [64, 128, 128])
    search = sky._Search(p, np.array([0, 0, 64]), 0, None)
    assert search.peak == 192 and search.quantum == 64
    tops, hot = search._hot(search.best)
    assert list(tops) == [192, 128] and hot == 3 * 64


def test_a_lowered_ceiling_is_a_setting_of_its_own_for_the_dead_states():
    # a ceiling one quantum under the peak over the columns of a cut's known plan: no plan (the
    # tiling has no room), and the table of dead states does not carry that verdict back to the
    # setting without it
    p, plan = rectangle_cut(30, seed=3, cells_per_buffer=4, return_plan=True)
    peak = plan_peak(p, plan)
    s = sky.Skyline(p)
    s.set_floor(plan, peak // 2)
    salt = s.salt
    assert s.dive(peak, 10**7, 0.0) == 1
    s.lower_ceiling(0, s.T, peak - 64)
    assert s.salt != salt and s.on_grain
    assert s.dive(peak, 10**7, 0.0) == 0
    s.set_floor(plan, peak // 2)
    assert s.dive(peak, 10**7, 0.0) == 1
    dsa.validate(p, s.plan())
    s.lower_ceiling(0, s.T, peak - 1)  # (off the grain: the capacity is no longer rounded to it)
    assert not s.on_grain

