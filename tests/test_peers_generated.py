"""benchmarks/peers_generated.py without the peers: trajectories, the summary, the report, the digest."""
from __future__ import annotations

import pytest

import dsa

from conftest import load_benchmark


@pytest.fixture(scope="module")
def pg():
    return load_benchmark("peers_generated")


def test_trajectory_from_stats_keeps_each_lower_incumbent_in_time_order(pg):
    stats = {"improvements": [(0.5, 120), (0.1, 130), (0.7, 120), (1.2, 110)], "last_improvement_s": 1.2}
    assert pg.trajectory(stats, "", 110, 20.0) == [[0.1, 130], [0.5, 120], [1.2, 110]]


def test_trajectory_from_the_verbose_lines_of_best_and_exact(pg):
    best_log = ("best:    0.810 s  peak 14016  (1.2235 x bound 11456)\n"
                "best:    1.109 s  peak 12992  (1.1341 x bound 11456)\n")
    assert pg.trajectory({}, best_log, 12992, 3.0) == [[0.81, 14016], [1.109, 12992]]
    exact_log = ("exact: 2000 buffers, LOAD 11456, portfolio peak 14016\n"
                 "    time        nodes    incumbent        bound      gap  event\n"
                 "    0.25         3706        14016        11456  18.265%  searching\n"
                 "    0.39       626225        12992        11456  11.823%  plan found at capacity 14015\n"
                 "    2.06     23854180        12992        11456  11.823%  searching\n")
    # the returned plan is lower than the log's last line: it is added at last_improvement_s
    got = pg.trajectory({"last_improvement_s": 2.5}, exact_log, 12800, 3.0)
    assert got == [[0.25, 14016], [0.39, 12992], [2.5, 12800]]
    assert pg.peak_at(got, 0.1) is None and pg.peak_at(got, 0.39) == 12992 and pg.peak_at(got, 9) == 12800


def _doc(pg):
    peers = list(pg.PEERS)

    def peer(peak, valid=True):
        run = ({"valid": True, "peak": peak, "time_s": 1.0} if valid
               else {"valid": False, "error": "invalid plan: x"})
        return {**run, "budgets": {"1": run, "20": run}}

    rows = [{"instance": "a-300-s0", "family": "a", "generator_args": {"n": 300, "seed": 0}, "n": 300, "load": 100,
             "methods": {"best": {"valid": True, "peak": 103, "time_s": 20, "trajectory": [[0.5, 110], [3, 103]]},
                         "exact": {"valid": True, "peak": 105, "time_s": 20, "trajectory": [[0.2, 105]]},
                         "tabu_search": peer(104), "telamalloc": peer(101, valid=False),
                         "supermalloc": peer(106), "simulated_annealing": peer(108)}},
            {"instance": "b-900-s1", "family": "b", "generator_args": {"n": 900, "seed": 1}, "n": 900, "load": 200,
             "methods": {"best": {"valid": True, "peak": 210, "time_s": 20, "trajectory": [[1, 210]]},
                         "exact": {"valid": True, "peak": 204, "time_s": 20, "trajectory": [[1, 204]]},
                         "tabu_search": peer(206), "telamalloc": peer(220),
                         "supermalloc": peer(204), "simulated_annealing": peer(230)}}]
    return {"date": "2026-01-01 00:00", "machine": "m", "command": "c", "time_limit": 20.0, "threads": 2,
            "peers": peers, "peer_version": "1.0.0", "rows": rows}


def test_an_invalid_peer_plan_counts_for_nothing(pg):
    doc = _doc(pg)
    assert pg.best_peer(doc["rows"][0], doc["peers"]) == ("tabu_search", 1.04)  # not TelaMalloc's invalid 1.01
    s = pg.summarize(doc)
    assert s["telamalloc"] == {"mean": 1.1, "valid": 1}
    assert s["best_peer"]["mean"] == pytest.approx((1.04 + 1.02) / 2)
    assert (s["best"]["at_or_below_best_peer"], s["best"]["compared"]) == (1, 2)
    assert s["exact"]["at_or_below_best_peer"] == 1  # 1.02 = supermalloc's 1.02 counts as at or below


def test_report_and_digest(pg):
    doc = _doc(pg)
    md = pg.report(doc)
    assert ("| a-300-s0 | 300 | 100 | **1.0300** | 1.0500 | 1.0400 | invalid | 1.0600 | 1.0800 | 1.0400 (tabu) |"
            in md)
    assert "| **mean** |" in md and "a-300-s0 TelaMalloc: invalid plan: x" in md
    assert "| dsa best | 1.0750 | 1.0400 |" in md  # the incumbent at 1 s (110, 210) and at 20 s (103, 210)
    digest = pg.compact(doc)["instances"]
    assert digest[0]["peak"]["telamalloc"] is None and digest[0]["peak"]["best"] == 103
    assert digest[1]["best_peer"] == {"method": "supermalloc", "peak": 204, "ratio": 1.02}
    assert digest[0]["generator_args"] == {"n": 300, "seed": 0}


@pytest.mark.parametrize("name", ["main", "other", "random", "large", "huge", "tall", "balanced"])
def test_every_instance_of_each_set_is_generated_as_named(pg, name):
    # the sets' families do not share names (an instance's name says which generator arguments
    # made it), and each instance's arguments make a problem of its size whose optimum is LOAD
    from dsa.generate import rectangle_cut

    names = [set(pg.FAMILIES), set(pg.OTHER_FAMILIES), set(pg.OMNI_FAMILIES), set(pg.RANDOM_FAMILIES),
             set(pg.TALL_FAMILIES), set(pg.BALANCED_FAMILIES)]
    assert sum(map(len, names)) == len(set().union(*names))
    families, specs = pg.SETS[name]
    assert len({pg.instance_name(*s) for s in specs}) == len(specs)
    for family, n, seed in specs:
        assert family in families
        args = pg.generator_args(family, n, seed)
        assert args == {"n": n, "seed": seed, **families[family]}
        p, plan = rectangle_cut(**args, return_plan=True)
        assert len(p) == n
        assert int((plan + p.sizes).max()) == dsa.load(p)


def test_report_of_the_other_set_says_so_and_shows_its_own_plot(pg):
    doc = {**_doc(pg), "set": "other", "plot": "peers_other.png", "peers": ["supermalloc"]}
    md = pg.report(doc)
    assert md.startswith("# dsa against omnimalloc's searches on rectangle-cut instances of other generator")
    assert "](peers_other.png)" in md and "](peers_generated.png)" not in md
    assert "virtual environment: supermalloc on 2 threads. Every plan" in md


def test_the_omnimalloc_set_names_each_source_and_its_arguments(pg):
    # its instances are drawn by omnimalloc in the peer's environment (not here: see the fake below);
    # each is named once, and its arguments name the source's class and its constructor's arguments
    families, specs = pg.SETS["omnimalloc"]
    assert len({pg.instance_name(*s) for s in specs}) == len(specs)
    for family, n, seed in specs:
        args = pg.generator_args(family, n, seed)
        assert args == {**families[family], "num_allocations": n, "seed": seed}
        assert args["source"] in ("TilingSource", "PinwheelSource")
        if args["source"] == "PinwheelSource":
            assert n % 4 == 1  # (each split makes five buffers of one)


_FAKE_SOURCES = """
class _A:
    def __init__(self, start, end, size):
        self.start, self.end, self.size = start, end, size


class TilingSource:
    def __init__(self, num_allocations, seed, optimum=None):
        self.n, self.optimum = num_allocations, optimum

    def get_allocations(self):
        # a 2 x 8 rectangle: n - 1 buffers over [0, 1) of 8 // (n - 1) bytes each (n = 5: 2 each), one of 8
        # bytes over [1, 2); n = 1 fails (a division by zero), as a source that cannot generate would
        return tuple([_A(0, 1, 8 // (self.n - 1))] * (self.n - 1) + [_A(1, 2, 8)])

    def get_known_optimum(self):
        return 8 if self.optimum is None else self.optimum
"""


@pytest.fixture
def fake_omnimalloc(tmp_path, monkeypatch):
    # a stand-in for omnimalloc's generators on the peer's PYTHONPATH, run by this interpreter
    import sys

    pkg = tmp_path / "omnimalloc"
    (pkg / "benchmark").mkdir(parents=True)
    (pkg / "__init__.py").write_text("__version__ = 'fake'\n")
    (pkg / "benchmark" / "__init__.py").write_text("")
    (pkg / "benchmark" / "sources.py").write_text(_FAKE_SOURCES)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return sys.executable


def test_an_omnimalloc_instance_is_drawn_in_the_peer_environment_and_its_optimum_checked(pg, fake_omnimalloc,
                                                                                         monkeypatch):
    monkeypatch.setitem(pg.OMNI_FAMILIES, "fake", {"source": "TilingSource"})
    p = pg.make_problem("fake", 5, 0, fake_omnimalloc)
    assert len(p) == 5 and sorted(zip(p.sizes, p.starts, p.ends)) == [(2, 0, 1)] * 4 + [(8, 1, 2)]
    assert dsa.load(p) == 8
    # the rows come in an order drawn from the seed, not the source's (where the 8-byte buffer is last):
    # the same seed gives the same order, and some seed moves the last buffer
    assert list(pg.make_problem("fake", 5, 0, fake_omnimalloc).sizes) == list(p.sizes)
    assert any(pg.make_problem("fake", 5, seed, fake_omnimalloc).sizes[-1] != 8 for seed in range(4))
    # a source whose known optimum is not LOAD is refused: the ratios would not be distances from it
    monkeypatch.setitem(pg.OMNI_FAMILIES, "fake", {"source": "TilingSource", "optimum": 9})
    with pytest.raises(RuntimeError, match="known optimum 9 is not LOAD 8"):
        pg.make_problem("fake", 5, 0, fake_omnimalloc)
    # and one that fails says which instance
    with pytest.raises(RuntimeError, match="could not generate fake-1-s0"):
        pg.make_problem("fake", 1, 0, fake_omnimalloc)


def test_report_of_the_omnimalloc_set_names_its_generators(pg):
    doc = {**_doc(pg), "set": "omnimalloc", "plot": "peers_omnimalloc.png"}
    md = pg.report(doc)
    assert md.startswith("# dsa against omnimalloc's searches on instances of omnimalloc's own generators")
    assert "`omnimalloc.benchmark.sources` (TilingSource, PinwheelSource" in md
    assert "dsa.generate.rectangle_cut" not in md and "](peers_omnimalloc.png)" in md
    assert pg.compact(doc)["instances"][0]["generator"] == "omnimalloc.benchmark.sources"


def test_the_random_sets_settings_are_drawn_from_each_seed_over_the_generators_range(pg):
    from dsa.generate import DRAWS, LIFETIMES

    families, specs = pg.SETS["random"]
    assert [seed for _, _, seed in specs] == list(pg.RANDOM_SEEDS) and len(specs) >= 10
    for family, n, seed in specs:
        assert (n, families[family]) == pg.random_settings(seed)  # the same draw every time
        s = families[family]
        assert 200 <= n <= 5000 and 0.05 <= s["aspect"] <= 20 and 0 <= s["pinwheel"] <= 1
        assert s["lifetimes"] in LIFETIMES and s["draw"] in DRAWS
        assert s["alignment"] in (1, 8, 64, 256, 4096) and s["cells_per_buffer"] in (2, 4, 16, 64, 256, 1024, 4096)
    assert len({tuple(sorted(families[f].items())) for f, _, _ in specs}) == len(specs)  # no two alike
    with pytest.raises(KeyError, match="no family 'nope'"):
        pg.generator_args("nope", 10, 0)


def test_random_seeds_draw_the_random_set_from_other_seeds(pg, monkeypatch):
    families, specs = pg.random_set(range(613, 616))
    assert [(f, seed) for f, _, seed in specs] == [("random613", 613), ("random614", 614), ("random615", 615)]
    for family, n, seed in specs:
        assert (n, families[family]) == pg.random_settings(seed)
        # a family of no set of the module: its arguments come from its name
        assert pg.generator_args(family, n, seed) == {"n": n, "seed": seed, **pg.random_settings(seed)[1]}
    measured = []
    monkeypatch.setattr(pg, "measure", lambda spec, args, version: measured.append(spec) or {})
    monkeypatch.setattr(pg, "write_all", lambda *a, **k: None)
    import dsa

    monkeypatch.setattr(dsa, "warmup", lambda: None)
    monkeypatch.setattr(pg, "warm_exact", lambda: None)
    assert pg.main(["--peer-python", "python", "--set", "random", "--random-seeds", "613-614",
                    "--out", "unused"]) == 0
    assert measured == specs[:2]
    # --random-sizes: the same seeds and settings, the sizes drawn from another range
    measured.clear()
    assert pg.main(["--peer-python", "python", "--set", "random", "--random-seeds", "613-614",
                    "--random-sizes", "5000-20000", "--out", "unused"]) == 0
    assert [(f, seed) for f, _, seed in measured] == [(f, seed) for f, _, seed in specs[:2]]
    for (family, n, seed), (_, small, _) in zip(measured, specs):
        assert 5000 <= n <= 20000 and n > small
        assert pg.random_settings(seed, (5000, 20000)) == (n, pg.random_settings(seed)[1])
        assert pg.generator_args(family, n, seed) == {"n": n, "seed": seed, **pg.random_settings(seed)[1]}
    for bad in (["--random-seeds", "614-613", "--set", "random"], ["--random-seeds", "613-614"],
                ["--random-seeds", "613", "--set", "random"], ["--random-sizes", "5000-20000"],
                ["--random-sizes", "20000-5000", "--set", "random"], ["--random-sizes", "0-10", "--set", "random"]):
        with pytest.raises(SystemExit):
            pg.main(["--peer-python", "python", *bad])


def test_select_takes_instances_by_name_or_index_in_the_sets_order(pg):
    specs = [("a", 300, 0), ("b", 900, 1), ("c", 500, 2)]
    assert pg.select(specs, None) == specs and pg.select(specs, "") == specs
    assert pg.select(specs, "c-500-s2,0") == [("a", 300, 0), ("c", 500, 2)]  # the set's order, not the option's
    assert pg.select(specs, "d-1-s9,7") == []  # a name or index not in the set selects nothing


def test_reuse_peers_runs_dsa_alone_and_takes_the_peers_from_the_earlier_run(pg, monkeypatch, tmp_path):
    import json

    spec = ("guillotine", 300, 1)
    name = pg.instance_name(*spec)
    problem = pg.make_problem(*spec)
    gen = pg.generator_args(*spec)
    peer = {"valid": True, "peak": int(dsa.load(problem)) + 64, "time_s": 20.0, "version": "1.0.0",
            "budgets": {"20": {"valid": True, "peak": int(dsa.load(problem)) + 64, "time_s": 20.0, "error": None}}}
    earlier = {"date": "2026-01-02 03:04", "time_limit": 20.0, "peers": list(pg.PEERS), "peer_version": "1.0.0",
               "rows": [{"instance": name, "family": spec[0], "generator_args": gen, "n": len(problem),
                         "load": int(dsa.load(problem)), "methods": {m: peer for m in pg.PEERS}}]}
    path = tmp_path / "earlier.json"
    path.write_text(json.dumps(earlier))
    ran = []
    monkeypatch.setattr(pg, "run_dsa", lambda p, strategy, limit: ran.append(strategy) or
                        {"valid": True, "peak": int(dsa.load(p)), "time_s": 0.1, "trajectory": []})
    monkeypatch.setattr(pg, "run_peer", lambda *a, **k: pytest.fail("a peer ran"))
    monkeypatch.setattr(dsa, "warmup", lambda: None)
    monkeypatch.setattr(pg, "warm_exact", lambda: None)
    out = tmp_path / "again"
    assert pg.main(["--peer-python", "python", "--instances", name, "--reuse-peers", str(path),
                    "--out", str(out)]) == 0
    doc = json.loads(out.with_suffix(".json").read_text())
    assert ran == list(pg.DSA_METHODS)
    assert doc["peers_reused"] == {"file": "earlier.json", "date": "2026-01-02 03:04", "peer_version": "1.0.0"}
    row = doc["rows"][0]
    assert all(row["methods"][m] == peer for m in pg.PEERS)
    assert "reused from the run of 2026-01-02 03:04 (earlier.json" in out.with_suffix(".md").read_text()
    # reused again from that run: the figures still come from the first one, and the report says so
    again = tmp_path / "again2"
    assert pg.main(["--peer-python", "python", "--instances", name, "--reuse-peers", str(out.with_suffix(".json")),
                    "--out", str(again)]) == 0
    assert json.loads(again.with_suffix(".json").read_text())["peers_reused"] == doc["peers_reused"]
    # another instance, another time limit, or a changed instance: refused
    for bad in (["--instances", "pinwheel-350-s0"], ["--instances", name, "--time-limit", "5"]):
        with pytest.raises(SystemExit):
            pg.main(["--peer-python", "python", "--reuse-peers", str(path), "--out", str(out), *bad])
    earlier["rows"][0]["load"] += 1
    path.write_text(json.dumps(earlier))
    with pytest.raises(RuntimeError, match="not the instance"):
        pg.main(["--peer-python", "python", "--instances", name, "--reuse-peers", str(path), "--out", str(out)])
