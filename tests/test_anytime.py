"""best and exact keep improving until their time limit on instances too large for a complete search,
and report when the returned plan was found (no timed assertions: speed and quality are measured by
benchmarks/generalise.py)."""
import numpy as np
import pytest

import dsa
from dsa.budget import Budget
from dsa.generate import rectangle_cut
from dsa.solution import plan_peak
from dsa.strategies import best as best_module


@pytest.fixture(scope="module")
def large():
    # one busy period of more than 1,000 rows: a large problem (window repairs in the improvement phase)
    return rectangle_cut(2500, seed=4, pinwheel=0.3)


@pytest.mark.parametrize("strategy", ["best", "exact"])
def test_large_instance_search_reports_the_limit_and_its_last_improvement(large, strategy):
    # (2 s: on large problems the skyline search and the random dives each get a share of what the
    # canonical search leaves)
    sol = dsa.solve(large, strategy, time_limit=2.0)
    dsa.validate(large, sol)
    load = dsa.load(large)
    assert sol.peak <= sol.stats["portfolio_peak"]
    if sol.peak > load:  # no proof: the time limit ended the search (never a quiet early "feasible")
        assert sol.status is dsa.Status.LIMIT_REACHED
    assert sol.stats["dives"] >= sol.stats["dives_planned"] >= 0
    assert sol.stats["dives"] > 0  # large: random dives of the canonical search ran
    assert sol.stats["last_improvement_s"] >= 0
    assert 0 <= sol.stats["last_improvement_fraction"] <= 1


def test_best_improvements_log_is_decreasing(large, capsys):
    sol = dsa.solve(large, "best", time_limit=1.0, verbose=True)
    imp = sol.stats["improvements"]
    assert sol.stats["portfolio_peak"] in [p for _, p in imp] and imp[-1][1] == sol.peak
    assert all(b[1] < a[1] and b[0] >= a[0] for a, b in zip(imp, imp[1:]))
    assert sol.stats["last_improvement_s"] == imp[-1][0]
    err = capsys.readouterr().err
    assert err.count("best:") == len(imp)


def test_best_logs_the_portfolios_plans_as_its_members_find_them(capsys):
    # members by start, then by size: the plan by size is lower, and comes later. Both are logged,
    # the first before a member that sleeps 0.3 s, not once the last member has ended
    import time

    p = rectangle_cut(300, seed=1)

    def slow(problem):
        time.sleep(0.3)
        return dsa.solve(problem, "bump", validate=False).offsets

    members = ["start/first", "size/first", slow]
    sol = dsa.solve(p, "best", members=members, improve=False, verbose=True, time_limit=60)
    peaks = sol.stats["peaks"]
    assert peaks["size/first"] < peaks["start/first"] < peaks["slow"]  # (bump stacks every buffer)
    imp = sol.stats["improvements"]
    assert [q for _, q in imp] == [peaks["start/first"], peaks["size/first"]]
    assert imp[-1][0] < 0.3 <= sol.stats["portfolio_s"]
    assert sol.stats["last_improvement_s"] == imp[-1][0]
    assert capsys.readouterr().err.count("best:") == 2


def test_improve_plan_never_worse_and_stops_at_target(large):
    start = dsa.solve(large, "best", improve=False).offsets
    peak = plan_peak(large, start)
    out, stats = best_module.improve_plan(large, start, peak, Budget(5.0), 0)
    assert np.array_equal(out, start) and stats["local_iterations"] == 0   # already at target
    out, stats = best_module.improve_plan(large, start, dsa.load(large), Budget(0.3), 0)
    dsa.validate(large, out)
    assert plan_peak(large, out) <= peak


def test_restart_seeds_are_deterministic_and_distinct():
    seeds = [best_module._derived_seed(7, k) for k in range(1, 6)]
    assert seeds == [best_module._derived_seed(7, k) for k in range(1, 6)]
    assert len(set(seeds)) == 5 and best_module._derived_seed(8, 1) != seeds[0]


def test_repair_windows_is_valid_and_never_worse(large):
    from dsa.strategies._local_search import repair_windows

    start = dsa.solve(large, "best", improve=False).offsets
    seen = []
    out, stats = repair_windows(large, start, time_limit=0.5, seed=3, progress=lambda t, p: seen.append(p))
    dsa.validate(large, out)
    assert plan_peak(large, out) <= plan_peak(large, start)
    assert stats["windows"] >= 1 and stats["repaired"] <= stats["windows"]
    assert [p for _, p in stats["improvements"][1:]] == seen
    assert stats["improvements"][-1][1] == plan_peak(large, out)


@pytest.mark.parametrize("search", ["repair_windows", "random_dives"])
def test_searches_from_a_plan_keep_fixed_rows(search):
    from dsa.strategies import _canonical_search, _local_search

    improve = getattr(_local_search if search == "repair_windows" else _canonical_search, search)
    p = rectangle_cut(1500, seed=2)
    start = dsa.solve(p, "best", improve=False).offsets
    fixed = np.full(len(p), -1, dtype=np.int64)
    fixed[::7] = start[::7]
    pf = dsa.Problem(p.starts, p.ends, p.sizes, fixed_offsets=fixed)
    out, _ = improve(pf, start, time_limit=0.5, seed=0)
    dsa.validate(pf, out)
    assert np.array_equal(out[::7], start[::7]) and plan_peak(pf, out) <= plan_peak(pf, start)


def test_lower_peak_probes_the_preorders_asked_and_window_repairs_ask_for_theirs(large, monkeypatch):
    from dsa.strategies import _canonical_search as canonical
    from dsa.strategies import _local_search as local

    seen = []
    race = canonical.CanonicalSearch.race

    def spy(self, cap, incumbent, share, heuristics=canonical.HEURISTICS, **kw):
        seen.extend(heuristics)
        return race(self, cap, incumbent, share, heuristics, **kw)

    monkeypatch.setattr(canonical.CanonicalSearch, "race", spy)
    p = rectangle_cut(120, seed=5, pinwheel=0.5)
    start = dsa.solve(p, "greedy_by_size").offsets
    for hs in [canonical.HEURISTICS, ("WAT",), ("TWA", "WAT")]:
        seen.clear()
        out, _ = canonical.lower_peak(p, start, time_limit=10.0, node_limit=20_000,
                                      **({} if hs is canonical.HEURISTICS else {"heuristics": hs}))
        dsa.validate(p, out)
        assert seen and set(seen) == set(hs)
    assert "WAT" in local.REPAIR_HEURISTICS and set(canonical.HEURISTICS) < set(local.REPAIR_HEURISTICS)
    seen.clear()
    start = dsa.solve(large, "best", improve=False).offsets
    out, stats = local.repair_windows(large, start, time_limit=0.5, seed=3)
    dsa.validate(large, out)
    assert stats["windows"] >= 1 and set(seen) == set(local.REPAIR_HEURISTICS)


def test_prepare_ranks_the_preorders_it_is_given_before_the_threads_start():
    # the threads read the ranks from a cache that is not locked: every preorder a race will use
    # (window repairs add WAT) is ranked before they start
    from dsa.strategies import _canonical_search as canonical

    search = canonical.CanonicalSearch(rectangle_cut(60, seed=1))
    with search.prepare(width=2, heuristics=(*canonical.HEURISTICS, "WAT")):
        assert all(set(per.ranks) == {*canonical.HEURISTICS, "WAT"} for per in search.periods)
    fresh = canonical.CanonicalSearch(rectangle_cut(60, seed=1))
    with fresh.prepare(width=2):  # (by default, the canonical search's own)
        assert all(set(per.ranks) == set(canonical.HEURISTICS) for per in fresh.periods)


def test_a_deadline_that_passes_while_the_problem_is_cut_leaves_its_periods_unsearched(monkeypatch):
    # a caller out of time gets the busy periods not prepared by its deadline as unsearchable (no
    # search, no proof), not an overrun
    import time

    from dsa.strategies import _canonical_search as canonical

    p = rectangle_cut(60, seed=1)
    plan = dsa.solve(p, "greedy_by_size").offsets
    for search in (canonical.CanonicalSearch(p), canonical.CanonicalSearch(p, deadline=time.perf_counter() + 60)):
        assert not search.cut_short and all(per.searchable for per in search.periods)
    late = canonical.CanonicalSearch(p, deadline=time.perf_counter() - 1)
    assert late.cut_short and not any(per.searchable for per in late.periods)
    assert late.stuck(plan) == plan_peak(p, plan)  # (the peak is set by a period it cannot search)
    out, info = late.lower_peak(plan, time_limit=1.0)
    assert (out == plan).all() and info["proven_lower_bound"] <= dsa.load(p)
    # the deadline passes between the first period's start and its time-overlap lists
    seen = []

    def past(deadline):
        seen.append(len(seen) > 0)  # (not passed at the first check, passed at every later one)
        return seen[-1]

    monkeypatch.setattr(canonical, "_past", past)
    midway = canonical.CanonicalSearch(p, deadline=0.0)
    assert midway.cut_short and all(per.late and not per.searchable for per in midway.periods)
    # the first period's start, its time-overlap lists, then each other period's start
    assert seen == [False, True] + [True] * (len(midway.periods) - 1)


def test_a_dive_ranks_the_buffers_by_its_key_as_the_named_preorder_does():
    from dsa.strategies import _canonical_search as canonical

    p = rectangle_cut(200, seed=3, pinwheel=0.4)
    per = canonical.CanonicalSearch(p).periods[0]
    load = dsa.load(p)
    width = per.feats["W"].astype(float)
    for cap in (int(load * 1.3), int(load * 1.1), load):
        named = per.search(cap, 5000, "W")
        keyed = per.dive(cap, 5000, width)
        assert named[:2] == keyed[:2] and np.array_equal(named[2], keyed[2])
    # the key decides the order: the shortest first plans otherwise
    status, _, shortest = per.dive(int(load * 1.3), 5000, -width)
    assert status == 0 and not np.array_equal(shortest, per.dive(int(load * 1.3), 5000, width)[2])


def test_random_dives_are_valid_never_worse_and_log_each_lower_peak(large):
    from dsa.strategies._canonical_search import random_dives

    start = dsa.solve(large, "best", improve=False).offsets
    seen = []
    out, stats = random_dives(large, start, time_limit=1.0, seed=2, progress=lambda t, p: seen.append(p))
    dsa.validate(large, out)
    assert plan_peak(large, out) < plan_peak(large, start)  # (the portfolio's plan is far above LOAD)
    assert stats["dives"] >= stats["planned"] >= 1
    assert [p for _, p in stats["improvements"][1:]] == seen
    assert stats["improvements"][0][1] == plan_peak(large, start)
    assert stats["improvements"][-1][1] == plan_peak(large, out)


def test_random_dives_do_nothing_at_the_bound():
    from dsa.strategies._canonical_search import random_dives

    p, plan = rectangle_cut(1500, seed=2, return_plan=True)  # (the generator's plan is at LOAD)
    out, stats = random_dives(p, plan, time_limit=60.0, seed=0)
    assert np.array_equal(out, plan) and stats["dives"] == 0 and len(stats["improvements"]) == 1


def test_random_dives_stop_when_a_dive_completes_without_a_plan(large, monkeypatch):
    # a complete search at one byte below the peak proves that no dive can plan there
    from dsa.strategies import _canonical_search as canonical

    calls = []

    def exhausted(self, cap, node_limit, key, stop=None):
        calls.append(cap)
        return 1, 10, np.zeros(len(self.rows), np.int64)

    monkeypatch.setattr(canonical._Period, "dive", exhausted)
    start = dsa.solve(large, "best", improve=False).offsets
    out, stats = canonical.random_dives(large, start, time_limit=60.0, seed=0)
    assert np.array_equal(out, start) and 1 <= stats["dives"] <= canonical.threads()
    assert set(calls) == {plan_peak(large, start) - 1} and stats["blocked"]


def test_random_dives_leave_the_rest_of_the_time_once_they_stall(large, monkeypatch):
    from dsa.strategies import _canonical_search as canonical

    monkeypatch.setattr(canonical._Period, "dive", lambda self, cap, node_limit, key, stop=None: (
        2, node_limit, np.zeros(len(self.rows), np.int64)))  # every dive hits its node limit
    monkeypatch.setattr(canonical, "DIVE_STALL_MIN_S", 0.05)
    monkeypatch.setattr(canonical, "DIVE_STALL_SHARE", 0.0)
    start = dsa.solve(large, "best", improve=False).offsets
    out, stats = canonical.random_dives(large, start, time_limit=60.0, seed=0)
    assert stats["stalled"] and stats["dives"] >= 1 and stats["planned"] == 0 and not stats["blocked"]
    assert np.array_equal(out, start)


def test_random_dives_start_no_dive_that_the_time_left_cannot_hold(large, monkeypatch):
    # a dive takes about DIVE_ROW2_S x rows^2 seconds at first, then what the whole dives took
    import time

    from dsa.strategies import _canonical_search as canonical

    start = dsa.solve(large, "best", improve=False).offsets
    monkeypatch.setattr(canonical, "DIVE_ROW2_S", 1e3)  # (more than any limit here)
    out, stats = canonical.random_dives(large, start, time_limit=1.0, seed=0)
    assert stats["dives"] == 0 and np.array_equal(out, start) and not stats["stalled"]
    assert stats["short"] and not stats["blocked"]
    # a first dive that takes 0.3 s of 0.4 (on one thread): the 0.1 s left cannot hold a second
    # (with the figure not learned, a second would start and end 0.2 s past the limit)
    monkeypatch.setattr(canonical, "DIVE_ROW2_S", 1e-15)
    monkeypatch.setattr(canonical, "THREADS", 1)

    def slow(self, cap, node_limit, key, stop=None):
        time.sleep(0.3)
        return 2, node_limit, np.zeros(len(self.rows), np.int64)

    monkeypatch.setattr(canonical._Period, "dive", slow)
    out, stats = canonical.random_dives(large, start, time_limit=0.4, seed=0)
    assert stats["dives"] == 1 and np.array_equal(out, start) and stats["short"]
    # a dive that the node rate would cut below one node per buffer is neither started nor counted
    monkeypatch.setattr(canonical, "_fit", lambda limit, deadline, rate: 0)
    out, stats = canonical.random_dives(large, start, time_limit=1.0, seed=0)
    assert stats["dives"] == 0 and stats["short"] and np.array_equal(out, start)
    monkeypatch.undo()
    # dives ended by their caller (stop) are not short of time
    monkeypatch.setattr(canonical, "DIVE_STALL_MIN_S", 60.0)
    out, stats = canonical.random_dives(large, start, time_limit=0.5, seed=0, stop=lambda: True)
    assert stats["dives"] == 0 and not stats["short"]


def _turns(monkeypatch, large, blocked, search=None, cuts=None, short=False, limits=None):
    """The searches improve_plan runs on a problem (``large``, or a smaller one), in order, each
    replaced by a stand-in that takes 0.02 s and lowers nothing (the random dives' stand-in reports
    ``blocked`` as given, and with ``short`` that the time could not hold a dive, having run none).
    ``search`` is passed on to improve_plan; ``cuts``, a list, gets the busy periods each run of the
    dives was given; ``limits``, a list, gets each skyline search's time limit and the time the
    budget had left then."""
    import time

    from dsa.strategies import _canonical_search, _local_search, _skyline

    calls = []

    def stand_in(name, info):
        def run(problem, offsets, **kw):
            calls.append(name)
            if cuts is not None and name == "dives":
                cuts.append(kw["search"])
            if limits is not None and name == "skyline":
                limits.append((kw["time_limit"], budget.remaining()))
            time.sleep(0.02)
            return np.array(offsets), dict(info)
        return run

    monkeypatch.setattr(best_module, "skyline_runs", lambda problem, seconds: True)
    monkeypatch.setattr(best_module, "SKYLINE_THREADS", 1)
    monkeypatch.setattr(best_module, "SKYLINE_AGAIN_MIN_S", 0.01)  # (restarts until the end of 0.6 s)
    sky_info = {"skyline_nodes": 0, "skyline_probes": 0, "skyline_bottom_share": 0.0}
    monkeypatch.setattr(_skyline, "skyline_search", stand_in("skyline", sky_info))
    monkeypatch.setattr(_canonical_search, "random_dives", stand_in("dives", {
        "dives": 0 if short else 1, "planned": 0, "blocked": blocked, "short": short}))
    monkeypatch.setattr(_local_search, "repair_windows", stand_in("repair", {"windows": 1, "repaired": 0}))
    monkeypatch.setattr(_local_search, "search_orders", stand_in("local", {"iterations": 1}))
    start = dsa.solve(large, "best", improve=False).offsets
    budget = Budget(0.6)
    out, stats = best_module.improve_plan(large, start, dsa.load(large), budget, 0, search=search)
    assert np.array_equal(out, start)
    return calls, stats


def test_large_problems_take_turns_between_the_skyline_search_and_random_dives(large, monkeypatch):
    calls, stats = _turns(monkeypatch, large, blocked=False)
    # the first skyline search, the first dives, then turns: dives, the skyline search again, ...
    assert calls[:5] == ["skyline", "dives", "dives", "skyline", "dives"] and "repair" not in calls
    assert stats["dives"] == calls.count("dives") and stats["skyline_restarts"] == calls.count("skyline") - 1


def test_window_repairs_take_the_dives_turns_once_the_dives_cannot_lower_the_peak(large, monkeypatch):
    calls, stats = _turns(monkeypatch, large, blocked=True)
    assert calls[:5] == ["skyline", "dives", "repair", "skyline", "repair"] and calls.count("dives") == 1
    assert stats["repair_windows"] == calls.count("repair")


def test_the_skyline_search_takes_the_dives_turns_once_a_turn_could_not_hold_a_dive(large, monkeypatch):
    calls, stats = _turns(monkeypatch, large, blocked=False, short=True)
    # the first dives' turn was short: no turn of theirs after it (the skyline search's stalled
    # threads may still take dives, which these stand-ins never do); the skyline search takes every
    # turn while it has SKYLINE_AGAIN_MIN_S, the window repairs what is left after that
    assert calls[:4] == ["skyline", "dives", "skyline", "skyline"] and calls.count("dives") == 1
    tail = calls.index("repair") if "repair" in calls else len(calls)
    assert set(calls[2:tail]) == {"skyline"} and set(calls[tail:]) <= {"repair"}
    assert stats["dives_short"] and stats["dives"] == 0
    assert stats["skyline_restarts"] == calls.count("skyline") - 1
    calls, stats = _turns(monkeypatch, large, blocked=False)
    assert "dives_short" not in stats and calls.count("dives") >= 2


@pytest.mark.parametrize("blocked", [False, True])
def test_on_small_problems_random_dives_take_the_local_searchs_turns_only(monkeypatch, blocked):
    small = rectangle_cut(400, seed=5, pinwheel=0.3)
    assert len(small) <= best_module.DIVE_MIN_ROWS  # (a small problem: at most that many movable rows)
    calls, stats = _turns(monkeypatch, small, blocked=blocked)
    # no turn of dives before the first restart of the skyline search: its turns alternate with the
    # dives', or with the local search's once the dives cannot lower the peak
    assert calls[:4] == ["skyline", "dives", "skyline", "local" if blocked else "dives"]
    assert "repair" not in calls and stats["dives"] == calls.count("dives")
    assert calls.count("dives") == 1 if blocked else "local" not in calls
    monkeypatch.setattr(best_module, "SMALL_DIVE_TURNS", False)
    calls, stats = _turns(monkeypatch, small, blocked=blocked)
    assert calls[:4] == ["skyline", "local", "skyline", "local"] and "dives" not in stats
    assert set(calls) == {"skyline", "local"} and stats["local_iterations"] == calls.count("local")


@pytest.mark.parametrize("case", ["small", "small without dives' turns", "large"])
def test_the_first_skyline_turn_is_shorter_on_small_problems_where_random_dives_take_the_turns(
        case, large, monkeypatch):
    # each skyline turn's searches get a share of the time left: the first SMALL_SKYLINE_SHARE on a
    # small problem whose turns the random dives take, else (and in every later turn) SKYLINE_SHARE
    problem = large if case == "large" else rectangle_cut(400, seed=5, pinwheel=0.3)
    monkeypatch.setattr(best_module, "SMALL_DIVE_TURNS", case != "small without dives' turns")
    monkeypatch.setattr(best_module, "SKYLINE_SHARE", 0.7)
    monkeypatch.setattr(best_module, "SMALL_SKYLINE_SHARE", 0.25)
    turns = []
    _turns(monkeypatch, problem, blocked=False, limits=turns)
    (limit, left), later = turns[0], [t for t in turns[1:] if t[1] > 0.1]
    assert limit / left == pytest.approx(0.25 if case == "small" else 0.7, abs=0.05)
    # (the restarts: those with a tenth of a second left, where a millisecond moves the share little)
    assert later and all(limit / left == pytest.approx(0.7, abs=0.05) for limit, left in later)


def test_the_dives_cut_the_problem_into_busy_periods_once_or_take_the_callers_cut(large, monkeypatch):
    from dsa.strategies._canonical_search import CanonicalSearch

    cuts = []
    calls, _ = _turns(monkeypatch, large, blocked=False, cuts=cuts)
    assert len(cuts) == calls.count("dives") >= 2 and all(c is cuts[0] for c in cuts)
    assert isinstance(cuts[0], CanonicalSearch) and cuts[0].problem is large
    given, cuts = CanonicalSearch(large), []
    _turns(monkeypatch, large, blocked=False, search=given, cuts=cuts)
    assert cuts and all(c is given for c in cuts)


@pytest.mark.parametrize("strategy", ["best", "exact"])
def test_best_and_exact_hand_their_canonical_search_to_the_improvement_phase(large, monkeypatch, strategy):
    from dsa.strategies._canonical_search import CanonicalSearch

    given = []
    real = best_module.improve_plan

    def spy(*args, search=None, **kwargs):
        given.append(search)
        return real(*args, search=search, **kwargs)

    monkeypatch.setattr(best_module, "improve_plan", spy)
    sol = dsa.solve(large, strategy, time_limit=1.0)
    dsa.validate(large, sol)
    assert len(given) == 1 and isinstance(given[0], CanonicalSearch) and given[0].problem is large


def test_random_dives_report_a_period_they_cannot_search(large, monkeypatch):
    from dsa.strategies import _canonical_search as canonical

    start = dsa.solve(large, "best", improve=False).offsets
    out, stats = canonical.random_dives(large, start, time_limit=0.5, seed=0)
    assert not stats["blocked"]
    monkeypatch.setattr(canonical, "MAX_BUFFERS", 100)  # (every busy period is now too large to search)
    out, stats = canonical.random_dives(large, start, time_limit=60.0, seed=0)
    assert stats["blocked"] and stats["dives"] == 0 and np.array_equal(out, start)


def test_twins_link_each_free_buffer_to_the_identical_free_one_ranked_just_before_it():
    # (a plain definition; the search places twins in rank order, random dives rank every dive)
    from dsa.strategies import _canonical_search as canonical

    starts = np.repeat([0, 2, 5], 40)
    fixed = np.full(120, -1, dtype=np.int64)
    fixed[[0, 7]] = [0, 8]
    p = dsa.Problem(starts, starts + np.repeat([3, 4, 2], 40), np.tile([8, 8, 16, 8], 30),
                    fixed_offsets=fixed)
    rng = np.random.default_rng(0)
    for per in canonical.CanonicalSearch(p).periods:
        m = len(per.rows)
        kind = list(zip(per.slo, per.shi, per.sz, per.al))
        free = per.fx < 0
        for _ in range(5):
            rank = rng.permutation(m).astype(np.int64)
            twins = canonical._twins(per.ident, rank, free, per.slo, per.shi, per.sz, per.al)
            for b in range(m):
                before = [a for a in range(m) if free[a] and free[b] and kind[a] == kind[b]
                          and rank[a] < rank[b]]
                assert twins[b] == (max(before, key=lambda a: rank[a]) if before else -1)
            assert (twins >= 0).sum() > 0


def test_a_round_of_lower_peak_that_lowers_the_peak_keeps_its_node_budget(monkeypatch):
    # each round opens with the probe of the bound (every preorder, resumed), whose share per
    # preorder is the round's budget: the next round gets the same budget after a round that found a
    # lower plan, GROWTH times it after one that did not (under a node limit the search does not
    # depend on timing; its batches of preorders depend on the threads, so they are fixed)
    from dsa.strategies import _canonical_search as canonical

    monkeypatch.setattr(canonical, "THREADS", 2)
    events = []
    race = canonical.CanonicalSearch.race

    def spy(self, cap, incumbent, share, heuristics=canonical.HEURISTICS, **kw):
        if kw.get("resume") and tuple(heuristics) == canonical.HEURISTICS:
            events.append(share)  # (only the bound is resumed)
        return race(self, cap, incumbent, share, heuristics, **kw)

    monkeypatch.setattr(canonical.CanonicalSearch, "race", spy)
    p = rectangle_cut(100, seed=3, pinwheel=0.5)
    start = dsa.solve(p, "bump").offsets
    out, stats = canonical.lower_peak(
        p, start, time_limit=120.0, node_limit=3_000_000,
        progress=lambda event, *_: events.append(None) if event == "plan" else None)
    dsa.validate(p, out)
    assert plan_peak(p, out) == stats["peak"] < plan_peak(p, start)
    rounds = []  # [budget, lowered the peak]
    for e in events:
        if e is None:
            rounds[-1][1] = True
        else:
            rounds.append([e, False])
    assert len(rounds) == stats["rounds"] or len(rounds) == stats["rounds"] + 1  # (a last, cut one)
    kinds = set()
    for (budget, lowered), (following, _) in zip(rounds, rounds[1:-1]):
        assert following == (budget if lowered else canonical.GROWTH * budget)
        kinds.add(lowered)
    assert kinds == {True, False}  # both rules were exercised


@pytest.mark.parametrize("idle", [True, False])
def test_a_stalled_skyline_search_searches_again_while_another_of_its_turn_runs(monkeypatch, idle):
    import threading
    import time

    from dsa.strategies import _canonical_search, _local_search, _skyline

    if _canonical_search.threads() < 2:
        pytest.skip("needs two threads")
    small = rectangle_cut(400, seed=5, pinwheel=0.3)
    calls = []  # (start, end) of each search, in the order they start
    lock = threading.Lock()

    def search(problem, offsets, *, time_limit, seed, progress, reverse, stop):
        with lock:
            i = len(calls)
            calls.append([time.perf_counter(), None])
        if i == 0:  # the first search runs 0.3 s; every other one stalls after 0.02 s
            while time.perf_counter() - calls[0][0] < 0.3 and not stop():
                time.sleep(0.005)
        else:
            time.sleep(0.02)
        calls[i][1] = time.perf_counter()
        return np.array(offsets), {"skyline_nodes": 1, "skyline_probes": 0, "skyline_bottom_share": 0.0,
                                   "skyline_stalled": i > 0}

    monkeypatch.setattr(best_module, "skyline_runs", lambda problem, seconds: True)
    monkeypatch.setattr(best_module, "SKYLINE_THREADS", 2)
    monkeypatch.setattr(best_module, "SKYLINE_AGAIN_MIN_S", 0.01)
    monkeypatch.setattr(best_module, "SMALL_DIVE_TURNS", False)
    monkeypatch.setattr(best_module, "IDLE_SKYLINE", idle)
    monkeypatch.setattr(_skyline, "skyline_search", search)
    monkeypatch.setattr(_skyline, "warm", lambda: None)
    monkeypatch.setattr(_local_search, "search_orders", lambda problem, offsets, **kw: (np.array(offsets),
                                                                                       {"iterations": 0}))
    start = dsa.solve(small, "best", improve=False).offsets
    out, stats = best_module.improve_plan(small, start, dsa.load(small), Budget(1.0), 0)
    assert np.array_equal(out, start) and stats["skyline_nodes"] == len(calls)
    slow_end = calls[0][1]
    during = [c for c in calls[1:] if c[0] < slow_end]  # searches started while the first one ran
    if idle:
        # its partner stalled at once and searched again, one search after another, until it ended
        assert len(during) >= 3 and all(b[0] >= a[1] for a, b in zip(during, during[1:]))
    else:
        assert len(during) == 1  # the partner waited
        assert stats["skyline_idle_s"] >= 0.15  # (0.28 s of the first turn alone, unless delayed)
