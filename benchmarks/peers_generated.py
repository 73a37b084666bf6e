"""dsa's ``best`` and ``exact`` side by side with omnimalloc's searches on rectangle-cut instances.

The instances come from :func:`dsa.generate.rectangle_cut`, so their optimum is LOAD: five families
(guillotine cuts only; pinwheel blocks; long-lived buffers in a tall rectangle; short-lived
buffers in a long, low one; nearly continuous cuts, with sizes and lifetimes almost all distinct)
at 250 to 5,000 buffers. Every method gets the same time limit per
instance and runs alone, one after the other: dsa's ``best`` and ``exact``, then omnimalloc's tabu
search, TelaMalloc, supermalloc and simulated annealing, each in a subprocess of the peer's own
virtual environment (omnimalloc is never a dependency of dsa; see ``peers_exact.py``). Every plan,
the peers' too, is checked by ``dsa.validate``; an invalid plan is reported as such and counts for
nothing.

The peak over time: dsa's searches log each lower incumbent (``stats["improvements"]`` for ``best``,
the progress lines of ``verbose=True`` for ``exact``); the peers report only their final plan, so
they also run at shorter budgets (``--peer-budgets``, default 1 and 5 s). Usage::

    .venv/bin/python benchmarks/peers_generated.py --peer-python .venv-peers/bin/python \\
        --time-limit 20 --out docs/results/peers_generated --summary out/peers_generated.json

writes ``OUT.json`` (every run: peak, validity, time, trajectory; the generator's arguments of each
instance), ``OUT.md`` (the table) and ``OUT.png`` (peak / LOAD against time), after every instance;
``--summary`` writes a compact JSON (instances' generator arguments, n, LOAD and each method's peak).
``--report OUT.json`` rewrites the Markdown, the plot and the summary from the JSON alone.
``--set other`` measures a second set instead: eleven other generator settings (``OTHER_FAMILIES``), a
check that what holds on the main set holds off it; ``--set omnimalloc`` a third: instances drawn by
omnimalloc's own generators of known optimum (``OMNI_FAMILIES``), in the peer's environment; ``--set
random`` a fourth: twelve instances whose generator settings are drawn at random from their seeds
(``random_settings``), none chosen by anyone; ``--random-seeds FIRST-LAST`` draws it from other seeds
(settings that no run has seen before), and ``--random-sizes LO-HI`` their sizes from another range;
``--set large`` a fifth: the main set's families at 10,000 and 20,000 buffers (``LARGE_INSTANCES``);
``--set huge`` a sixth: the same families at 50,000 and 100,000 buffers (``HUGE_INSTANCES``);
``--set tall`` a seventh: tall cuts (aspect 0.06-0.1) of 64-256 cells per buffer (``TALL_FAMILIES``),
where the mean target is furthest; ``--set balanced`` an eighth: cuts with balanced lifetimes (pieces of
similar shape) on grids of 64-1,024 cells per buffer (``BALANCED_FAMILIES``), where dsa is furthest from
LOAD.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from _results import provenance, warm_exact, write_results  # this script's folder is on sys.path
from generalise import FAMILIES as _BASE_FAMILIES
from peers_exact import PEER_PRELUDE, run_peer_script

# the generator's arguments of each family, every one spelled out so that others can regenerate:
# generalise.py's guillotine and pinwheel, and two other shapes (named as there, fixed here so that
# these results can be regenerated whatever generalise.py's defaults become)
_DEFAULTS = {"aspect": 1.0, "pinwheel": 0.0, "alignment": 64, "lifetimes": "mixed", "cells_per_buffer": 16}
FAMILIES = {name: {**_DEFAULTS, **params} for name, params in {
    "guillotine": _BASE_FAMILIES["guillotine"], "pinwheel": _BASE_FAMILIES["pinwheel"],
    "long-tall": {"pinwheel": 0.2, "aspect": 0.25, "alignment": 256, "lifetimes": "long"},
    "short-wide": {"pinwheel": 0.2, "aspect": 4.0, "lifetimes": "short"},
    # nearly continuous cuts: sizes and lifetimes almost all distinct
    "fine": {"pinwheel": 0.2, "cells_per_buffer": 1024},
}.items()}
# (family, buffers, seed): 5 instances of 200-400 buffers, 4 of 500-800, 7 of 1,500-5,000 (fine-5000-s3
# added after a check off this set found dsa behind supermalloc there: 1.3805 against 1.2607 x LOAD)
INSTANCES = [
    ("guillotine", 300, 1), ("pinwheel", 350, 0), ("long-tall", 250, 2), ("short-wide", 400, 0),
    ("guillotine", 700, 0), ("pinwheel", 550, 1), ("short-wide", 800, 1),
    ("guillotine", 3000, 0), ("pinwheel", 1500, 0), ("pinwheel", 5000, 1), ("long-tall", 2000, 0),
    ("short-wide", 4000, 2), ("fine", 300, 0), ("fine", 800, 1), ("fine", 2000, 2),
    ("fine", 5000, 3),
]
# a second set (``--set other``), a check of generality: other generator settings, none used in tuning
# dsa (extremes of aspect, lifetimes, alignment and granularity, and pinwheel-heavy cuts of 32-256
# cells per buffer, where dsa was found nearest to supermalloc, and pieces drawn by area)
OTHER_FAMILIES = {name: {**_DEFAULTS, **params} for name, params in {
    "balanced-tall": {"lifetimes": "balanced", "aspect": 0.1},
    "long-flat": {"aspect": 10.0, "lifetimes": "long"},
    "short-tall": {"lifetimes": "short", "aspect": 0.05},
    "continuous": {"alignment": 1, "cells_per_buffer": 4096},
    "coarse": {"pinwheel": 0.0, "cells_per_buffer": 2},
    "all-pinwheel": {"pinwheel": 1.0, "cells_per_buffer": 64},
    "pinwheel-64": {"pinwheel": 0.8, "cells_per_buffer": 64},
    "pinwheel-128": {"pinwheel": 0.8, "cells_per_buffer": 128},
    "pinwheel-256": {"pinwheel": 0.6, "cells_per_buffer": 256},
    "pinwheel-32-a1": {"pinwheel": 0.8, "cells_per_buffer": 32, "alignment": 1},
    "pinwheel-long": {"pinwheel": 0.9, "cells_per_buffer": 64, "lifetimes": "long"},
    # pieces to split drawn by area (omnimalloc's rule): a few large buffers among many small ones
    "by-area": {"pinwheel": 0.2, "draw": "area"},
    "by-area-pinwheel-256": {"pinwheel": 0.6, "cells_per_buffer": 256, "draw": "area"},
}.items()}
OTHER_INSTANCES = [
    ("balanced-tall", 1000, 11), ("long-flat", 2000, 12), ("short-tall", 3000, 15), ("continuous", 1500, 14),
    ("coarse", 400, 16), ("all-pinwheel", 1000, 21), ("pinwheel-64", 700, 13), ("pinwheel-64", 700, 24),
    ("pinwheel-128", 2000, 22), ("pinwheel-256", 500, 23), ("pinwheel-32-a1", 3000, 25),
    ("pinwheel-long", 1500, 26), ("by-area", 1500, 27), ("by-area-pinwheel-256", 4000, 28),
]
# a third set (``--set omnimalloc``): instances drawn by omnimalloc's own generators of known optimum
# (``omnimalloc.benchmark.sources``; TilingSource: guillotine cuts, PinwheelSource: every block a
# pinwheel), in the peer's environment, with their defaults but for the arguments named here (a 1 MiB by
# 2**20-tick rectangle; sizes and lifetimes to the byte and the tick, at least 1 KiB and 1 tick): the
# peers' own ground, drawn by code dsa was never tuned on
OMNI_FAMILIES = {
    "omni-tiling": {"source": "TilingSource"},
    "omni-tiling-mem": {"source": "TilingSource", "mem_cut_prob": 0.9},     # mostly cuts of memory
    "omni-tiling-time": {"source": "TilingSource", "mem_cut_prob": 0.1},    # mostly cuts of time
    "omni-pinwheel": {"source": "PinwheelSource"},                          # (4k + 1 buffers)
}
OMNI_INSTANCES = [
    ("omni-tiling", 300, 1), ("omni-tiling", 2000, 6), ("omni-tiling", 5000, 5), ("omni-tiling-mem", 1000, 7),
    ("omni-tiling-time", 1000, 8), ("omni-pinwheel", 301, 1), ("omni-pinwheel", 1001, 2),
    ("omni-pinwheel", 2001, 3), ("omni-pinwheel", 3001, 5), ("omni-pinwheel", 4001, 4), ("omni-pinwheel", 4001, 6),
    ("omni-pinwheel", 5001, 7),
]
# a fourth set (``--set random``): each instance's generator settings drawn at random, from its seed,
# over the generator's whole range (random_settings): settings no one chose, so none of dsa's
# constants can have been tuned on them
RANDOM_SEEDS = tuple(range(601, 613))


def random_settings(seed: int, sizes: tuple = (200, 5000)) -> tuple:
    """``(n, settings)`` of the random set's instance ``seed``: :func:`dsa.generate.rectangle_cut`'s
    arguments but ``n`` and ``seed``, drawn from ``numpy.random.default_rng(20_000 + seed)``: ``n``
    log-uniform on ``sizes`` (default [200, 5000]; the other settings do not depend on it),
    ``aspect`` log-uniform on [0.05, 20], ``pinwheel`` uniform on [0, 1]
    (both to 3 decimals), ``alignment`` one of 1, 8, 64, 256, 4096, ``lifetimes`` any of
    ``dsa.generate.LIFETIMES``, ``cells_per_buffer`` one of 2, 4, 16, 64, 256, 1024, 4096, ``draw``
    any of ``dsa.generate.DRAWS``."""
    import numpy as np

    from dsa.generate import DRAWS, LIFETIMES

    rng = np.random.default_rng(20_000 + int(seed))
    n = int(round(math.exp(rng.uniform(math.log(sizes[0]), math.log(sizes[1])))))
    return n, {"aspect": round(math.exp(rng.uniform(math.log(0.05), math.log(20))), 3),
               "pinwheel": round(float(rng.uniform(0, 1)), 3),
               "alignment": int(rng.choice([1, 8, 64, 256, 4096])), "lifetimes": str(rng.choice(LIFETIMES)),
               "cells_per_buffer": int(rng.choice([2, 4, 16, 64, 256, 1024, 4096])),
               "draw": str(rng.choice(DRAWS))}


def random_set(seeds, sizes: tuple = (200, 5000)) -> tuple:
    """``(families, instances)`` of a random set: one instance per seed, its settings drawn from it
    (:func:`random_settings`, ``n`` on ``sizes``); the family is named ``random<seed>``."""
    return ({f"random{seed}": random_settings(seed)[1] for seed in seeds},
            [(f"random{seed}", random_settings(seed, sizes)[0], seed) for seed in seeds])


RANDOM_FAMILIES, RANDOM_INSTANCES = random_set(RANDOM_SEEDS)
# a fifth set (``--set large``): the main set's families at 10,000-20,000 buffers, beyond the sizes of
# the other sets, where the searches must scale
LARGE_INSTANCES = [
    ("guillotine", 10000, 31), ("pinwheel", 10000, 32), ("long-tall", 10000, 33), ("short-wide", 20000, 34),
    ("fine", 10000, 35), ("pinwheel", 20000, 36), ("fine", 20000, 37),
]
# a sixth (``--set huge``): the same families at 50,000-100,000 buffers, the top of the generator's
# intended range, where busy periods exceed the canonical search's size limits (such a period is
# neither searched nor dived; fine-50000-s41 has a second one, of 12,909 buffers, that is)
HUGE_INSTANCES = [
    ("fine", 50000, 41), ("pinwheel", 50000, 42), ("long-tall", 50000, 44), ("short-wide", 100000, 45),
    ("fine", 100000, 43),
]
# a seventh (``--set tall``): tall rectangles (few time steps, many address quanta: aspect 0.06-0.1)
# on grids of 64-256 cells per buffer, where the random draws above LOAD gathered and the mean target
# is furthest (six such cuts chosen for it, outside this set: best 1.06-1.13 x LOAD at 20 s, supermalloc
# 1.08-1.18); their tilings have few layers or none, and merged they stay above what the look plans
TALL_FAMILIES = {name: {**_DEFAULTS, **params} for name, params in {
    "tall-64": {"aspect": 0.08, "cells_per_buffer": 64, "lifetimes": "balanced", "pinwheel": 0.3},
    "tall-256": {"aspect": 0.07, "cells_per_buffer": 256, "lifetimes": "balanced", "pinwheel": 0.3},
    "tall-long-256": {"aspect": 0.06, "cells_per_buffer": 256, "lifetimes": "long", "pinwheel": 0.3},
    "tall-mixed-128": {"aspect": 0.1, "cells_per_buffer": 128, "lifetimes": "mixed", "pinwheel": 0.5},
}.items()}
TALL_INSTANCES = [
    ("tall-64", 400, 51), ("tall-64", 1500, 52), ("tall-256", 700, 53), ("tall-256", 2500, 54),
    ("tall-long-256", 800, 55), ("tall-mixed-128", 1200, 56),
]
# an eighth (``--set balanced``): square-ish rectangles cut with balanced lifetimes (each guillotine
# split along the longer side, so pieces have similar shapes) on grids of 64-1,024 cells per buffer,
# where a check off the other sets found dsa far from LOAD, with thin leads over supermalloc: a draw of
# the random set with these lifetimes (random605: 1.1719 against supermalloc's 1.1918) and siblings of
# 2,000-4,000 buffers at 1.18 x LOAD at 20 s, where a sibling of 3,000 with mixed lifetimes instead is
# planned at LOAD in 3 s. Their top split is a layer of about half the height, which the layers' search
# and program neither find nor rule out in time; at 1,000-1,200 buffers the layers plan them at the bound
BALANCED_FAMILIES = {name: {**_DEFAULTS, **params} for name, params in {
    "balanced-64": {"cells_per_buffer": 64, "lifetimes": "balanced", "pinwheel": 0.2},
    "balanced-256": {"cells_per_buffer": 256, "lifetimes": "balanced", "pinwheel": 0.2},
    # (random605's settings, at another size and seed)
    "balanced-1024-a8": {"aspect": 0.343, "cells_per_buffer": 1024, "lifetimes": "balanced", "pinwheel": 0.033,
                         "alignment": 8},
}.items()}
BALANCED_INSTANCES = [
    ("balanced-64", 2500, 61), ("balanced-256", 1200, 62), ("balanced-256", 2500, 63),
    ("balanced-256", 4000, 64), ("balanced-1024-a8", 3000, 65),
]
SETS = {"main": (FAMILIES, INSTANCES), "other": (OTHER_FAMILIES, OTHER_INSTANCES),
        "omnimalloc": (OMNI_FAMILIES, OMNI_INSTANCES), "random": (RANDOM_FAMILIES, RANDOM_INSTANCES),
        "large": (FAMILIES, LARGE_INSTANCES), "huge": (FAMILIES, HUGE_INSTANCES),
        "tall": (TALL_FAMILIES, TALL_INSTANCES), "balanced": (BALANCED_FAMILIES, BALANCED_INSTANCES)}
# each set's generator, as the report and the digest name it, and the report's words for its instances
# and where they come from
GENERATORS = {"main": "dsa.generate.rectangle_cut", "other": "dsa.generate.rectangle_cut",
              "omnimalloc": "omnimalloc.benchmark.sources", "random": "dsa.generate.rectangle_cut",
              "large": "dsa.generate.rectangle_cut", "huge": "dsa.generate.rectangle_cut",
              "tall": "dsa.generate.rectangle_cut", "balanced": "dsa.generate.rectangle_cut"}
TITLES = {"main": "rectangle-cut instances", "other": "rectangle-cut instances of other generator settings",
          "omnimalloc": "instances of omnimalloc's own generators",
          "random": "rectangle-cut instances of generator settings drawn at random",
          "large": "rectangle-cut instances of 10,000-20,000 buffers",
          "huge": "rectangle-cut instances of 50,000-100,000 buffers",
          "tall": "tall rectangle-cut instances of 64-256 cells per buffer",
          "balanced": "rectangle-cut instances with balanced lifetimes"}
_RECTANGLE_CUT = ("`dsa.generate.rectangle_cut` (families and generator arguments in the JSON beside this "
                  "file), ")
ORIGINS = {"main": _RECTANGLE_CUT, "other": _RECTANGLE_CUT, "random": _RECTANGLE_CUT, "large": _RECTANGLE_CUT,
           "huge": _RECTANGLE_CUT, "tall": _RECTANGLE_CUT, "balanced": _RECTANGLE_CUT,
           "omnimalloc": "omnimalloc's own generators of known optimum, `omnimalloc.benchmark.sources` "
                         "(TilingSource, PinwheelSource; run in the peers' environment, each instance's optimum "
                         "checked equal to LOAD; sources and their arguments in the JSON beside this file): "
                         "tilings of a rectangle, "}
DSA_METHODS = ("best", "exact")
# omnimalloc's searches: the allocator class and its arguments besides the timeout. Tabu search and
# simulated annealing stop after 500 / 3,000 iterations by default, well before a 20 s budget on a few
# hundred buffers; with the cap lifted they search until the timeout (they keep their best plan, so the
# longer run is never worse). TelaMalloc keeps its defaults (10,000 backtracks: more was no better in
# a trial); supermalloc gets --threads.
PEERS = {
    "tabu_search": ("TabuSearchAllocator", {"max_iterations": 10**9}),
    "telamalloc": ("TelamallocAllocator", {}),
    "supermalloc": ("SupermallocAllocator", {}),
    "simulated_annealing": ("SimulatedAnnealingAllocator", {"max_iterations": 10**9}),
}
LABELS = {"best": "dsa best", "exact": "dsa exact", "tabu_search": "tabu", "telamalloc": "TelaMalloc",
          "supermalloc": "supermalloc", "simulated_annealing": "sim. annealing"}

# runs in the peer's environment: argv = csv, class name, time limit, JSON of the other arguments
PEER_SEARCH = PEER_PRELUDE + r"""
from omnimalloc import allocators
cls, limit, kwargs = getattr(allocators, sys.argv[2]), float(sys.argv[3]), json.loads(sys.argv[4])
search = cls(timeout=limit, **kwargs)
t0 = time.perf_counter()
res = search.solve(allocs) if hasattr(search, "solve") else None
placed = res.allocations if res is not None else search.allocate(allocs)
elapsed = time.perf_counter() - t0
offsets = {a.id: a.offset for a in placed}
extra = {"proved_optimal": res.proved_optimal, "lower_bound": res.lower_bound} if res is not None else {}
print(json.dumps({"version": omnimalloc.__version__, "time_s": elapsed, "search": repr(search),
                  "offsets": [offsets[int(r["id"])] for r in rows], **extra}))
"""


def instance_name(family: str, n: int, seed: int) -> str:
    return f"{family}-{n}-s{seed}"


def select(specs, instances: str | None) -> list:
    """The ``(family, n, seed)`` specs named in ``instances`` (comma-separated names, family-n-sSEED, or
    indices in ``specs``), in their order in ``specs``; all of them when ``instances`` is None or empty."""
    if not instances:
        return list(specs)
    wanted = instances.split(",")
    return [s for k, s in enumerate(specs) if str(k) in wanted or instance_name(*s) in wanted]


def generator_args(family: str, n: int, seed: int) -> dict:
    """The keyword arguments that make this instance: of :func:`dsa.generate.rectangle_cut`, or for
    the omnimalloc set the source's class (``source``) and its constructor's arguments."""
    if family in OMNI_FAMILIES:
        return {**OMNI_FAMILIES[family], "num_allocations": n, "seed": seed}
    for families, _ in SETS.values():  # (every set's families: a new set needs no entry here)
        if family in families:
            return {"n": n, "seed": seed, **families[family]}
    drawn = re.fullmatch(r"random(\d+)", family)  # (a random set of other seeds: --random-seeds)
    if drawn:
        return {"n": n, "seed": seed, **random_settings(int(drawn.group(1)))[1]}
    raise KeyError(f"no family {family!r} in any set")


# runs in the peer's environment: argv = JSON of generator_args; prints the buffers and the optimum
PEER_GENERATE = r"""
import json, sys
import omnimalloc
from omnimalloc.benchmark import sources
args = json.loads(sys.argv[1])
source = getattr(sources, args.pop("source"))(**args)
allocs = source.get_allocations()
print(json.dumps({"version": omnimalloc.__version__, "optimum": source.get_known_optimum(),
                  "starts": [int(a.start) for a in allocs], "ends": [int(a.end) for a in allocs],
                  "sizes": [int(a.size) for a in allocs]}))
"""


def make_problem(family: str, n: int, seed: int, peer_python: str | None = None):
    """The instance's :class:`dsa.Problem`: drawn by :func:`dsa.generate.rectangle_cut`, or for the
    omnimalloc set by omnimalloc's source in the peer's environment (``peer_python``), whose known
    optimum must be LOAD (a ``RuntimeError`` otherwise: the ratios would not be distances from it), with
    its rows in a random order drawn from ``seed`` (never the order the source cut them in)."""
    import numpy as np

    import dsa
    from dsa.generate import rectangle_cut

    gen = generator_args(family, n, seed)
    if family not in OMNI_FAMILIES:
        return rectangle_cut(**gen)
    got = run_peer_script(peer_python, PEER_GENERATE, [json.dumps(gen)], timeout=600)
    if not got.pop("ok"):
        raise RuntimeError(f"omnimalloc could not generate {instance_name(family, n, seed)}: {got.get('error')}")
    # the sources list the buffers in the order they cut them, and first fit in that order plans every
    # tiling at LOAD (measured: TilingSource at 300-5,000 buffers, where first fit by any of supermalloc's
    # nine sort keys is 1.33-3.66 x LOAD; supermalloc's greedy portfolio includes the input order, so it
    # "solved" them at once), so the rows are shuffled, as `rectangle_cut` shuffles its pieces: no method
    # sees the construction
    order = np.random.default_rng(seed).permutation(len(got["sizes"]))
    problem = dsa.Problem(np.asarray(got["starts"], dtype=np.int64)[order],
                          np.asarray(got["ends"], dtype=np.int64)[order],
                          np.asarray(got["sizes"], dtype=np.int64)[order])
    if got["optimum"] != dsa.load(problem):
        raise RuntimeError(f"{instance_name(family, n, seed)}: omnimalloc's known optimum {got['optimum']} is "
                           f"not LOAD {dsa.load(problem)}")
    return problem


# --- trajectories ------------------------------------------------------------------------------------

_BEST_LINE = re.compile(r"^best:\s+([\d.]+) s\s+peak (\d+)")                       # best, verbose
_EXACT_LINE = re.compile(r"^\s*([\d.]+)\s+\d+\s+(\d+)\s+\d+\s+-?[\d.]+%")            # exact, verbose


def trajectory(stats: dict, log: str, peak: int, elapsed: float) -> list:
    """``[[seconds, peak], ...]``: each lower incumbent of a dsa search, in time order, ending with the
    returned plan. From ``stats["improvements"]`` where the strategy keeps it, else from its verbose
    progress lines (``log``); if neither has the returned ``peak``, it is added at ``last_improvement_s``."""
    points = [(float(t), int(p)) for t, p in stats.get("improvements") or []]
    if not points:
        for line in log.splitlines():
            m = _BEST_LINE.match(line) or _EXACT_LINE.match(line)
            if m:
                points.append((float(m.group(1)), int(m.group(2))))
    if not points or peak < min(p for _, p in points):  # (the log missed the returned plan)
        found = stats.get("last_improvement_s")
        points.append((float(found) if found is not None else elapsed, int(peak)))
    out = []
    for t, p in sorted(points):
        if not out or p < out[-1][1]:
            out.append([t, p])
    return out


def peak_at(points, t: float):
    """The incumbent's peak at time ``t`` of a trajectory (None before its first plan)."""
    last = None
    for s, p in points:
        if s > t + 1e-9:
            break
        last = p
    return last


# --- running -----------------------------------------------------------------------------------------

def run_dsa(problem, strategy: str, limit: float) -> dict:
    import dsa

    log = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stderr(log):
        sol = dsa.solve(problem, strategy, time_limit=limit, verbose=True)
    elapsed = time.perf_counter() - t0
    dsa.validate(problem, sol)  # ours must be valid: an exception here is a bug in dsa
    return {"valid": True, "peak": int(sol.peak), "status": sol.status.value, "time_s": elapsed,
            "last_improvement_s": sol.stats.get("last_improvement_s"),
            "trajectory": trajectory(sol.stats, log.getvalue(), int(sol.peak), elapsed)}


def run_peer(python: str, csv_path: Path, problem, method: str, limit: float, threads: int) -> dict:
    """One peer search on one instance at one budget, its plan checked by ``dsa.validate``."""
    import dsa
    import numpy as np

    cls, kwargs = PEERS[method]
    kwargs = {**kwargs, "num_threads": threads} if method == "supermalloc" else kwargs
    got = run_peer_script(python, PEER_SEARCH, [csv_path, cls, limit, json.dumps(kwargs)],
                          timeout=limit * 3 + 120)
    if not got.pop("ok"):
        return {"valid": False, "error": got.get("error", "failed")}
    offsets = np.asarray(got.pop("offsets"), dtype=np.int64)
    try:
        dsa.validate(problem, offsets)
    except ValueError as exc:
        return {"valid": False, "error": f"invalid plan: {exc}", "time_s": got.get("time_s")}
    return {"valid": True, "peak": int((offsets + problem.sizes).max()), **got}


def measure(spec, args, version: list) -> dict:
    import dsa
    import dsa.io

    family, n, seed = spec
    gen = generator_args(family, n, seed)
    problem = make_problem(family, n, seed, args.peer_python)
    row = {"instance": instance_name(family, n, seed), "family": family, "generator_args": gen,
           "n": len(problem), "load": int(dsa.load(problem)), "methods": {}}
    for strategy in DSA_METHODS:
        row["methods"][strategy] = run_dsa(problem, strategy, args.time_limit)
        _say(row, strategy, row["methods"][strategy])
    earlier = getattr(args, "earlier_rows", {}).get(row["instance"])
    if earlier is not None:
        if earlier["generator_args"] != gen or earlier["load"] != row["load"] or earlier["n"] != row["n"]:
            raise RuntimeError(f"{row['instance']}: not the instance of the run whose peers are reused")
        for method in args.peers:
            row["methods"][method] = earlier["methods"][method]
            _say(row, method, row["methods"][method])
        return row
    budgets = sorted({b for b in args.peer_budgets if b < args.time_limit} | {args.time_limit})
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "instance.csv"
        dsa.io.write_csv(csv_path, problem)
        for method in args.peers:
            runs = {}
            for b in budgets:
                runs[f"{b:g}"] = run_peer(args.peer_python, csv_path, problem, method, b, args.threads)
                version[0] = runs[f"{b:g}"].get("version") or version[0]
            final = runs[f"{args.time_limit:g}"]
            row["methods"][method] = {**final, "budgets": {k: {key: r.get(key) for key in
                                                                ("valid", "peak", "time_s", "error")}
                                                           for k, r in runs.items()}}
            _say(row, method, final)
    return row


def _say(row, method, r) -> None:
    text = (f"{r['peak'] / row['load']:.4f} in {r['time_s']:.1f} s" if r.get("valid")
            else r.get("error", "failed"))
    print(f"{row['instance']} (n={row['n']}): {LABELS[method]}: {text}", file=sys.stderr, flush=True)


# --- summary, report and plot --------------------------------------------------------------------------

def ratio(row: dict, method: str):
    """peak / LOAD of ``method`` on ``row``, or None when it has no valid plan."""
    r = row["methods"].get(method)
    return r["peak"] / row["load"] if r and r.get("valid") else None


def best_peer(row: dict, peers) -> tuple:
    """``(method, peak / LOAD)`` of the best valid peer plan on ``row`` (``(None, None)`` if none)."""
    got = [(ratio(row, m), m) for m in peers if ratio(row, m) is not None]
    if not got:
        return None, None
    value, method = min(got)
    return method, value


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def summarize(doc: dict) -> dict:
    """Per method: mean peak / LOAD over the instances where it has a valid plan and how many those
    are; the same for the best peer per instance; how often dsa's ``best`` is at or below it."""
    rows, peers = doc["rows"], doc["peers"]
    methods = [*DSA_METHODS, *peers]
    out = {m: {"mean": _mean([ratio(r, m) for r in rows]), "valid": sum(ratio(r, m) is not None for r in rows)}
           for m in methods}
    per_row = [best_peer(r, peers)[1] for r in rows]
    out["best_peer"] = {"mean": _mean(per_row), "valid": sum(v is not None for v in per_row)}
    for m in DSA_METHODS:
        pairs = [(ratio(r, m), v) for r, v in zip(rows, per_row) if v is not None and ratio(r, m) is not None]
        out[m]["at_or_below_best_peer"] = sum(a <= b + 1e-12 for a, b in pairs)
        out[m]["compared"] = len(pairs)
    return out


def _cell(value, bold=False) -> str:
    if value is None:
        return "invalid"
    text = f"{value:.4f}"
    return f"**{text}**" if bold else text


def _load_text(doc: dict) -> str:
    load = doc.get("load_average") or []
    return f"load average {load[0]:g} at the start, {load[-1]:g} at the end; " if len(load) == 2 else ""


_SETTING = {"supermalloc": "supermalloc on {threads} threads",
            "tabu_search": "tabu search with its iteration cap lifted so that the time limit binds",
            "simulated_annealing": "simulated annealing with its iteration cap lifted",
            "telamalloc": "TelaMalloc with its defaults"}


def _reused_text(doc: dict) -> str:
    reused = doc.get("peers_reused")
    if not reused:
        return ""
    return (f" The peers' figures are reused from the run of {reused['date']} ({reused['file']}, same "
            "instances, same settings, same machine class); only dsa ran again (`--reuse-peers`).")


def report(doc: dict) -> str:
    rows, peers, limit = doc["rows"], doc["peers"], doc["time_limit"]
    methods = [*DSA_METHODS, *peers]
    summary = summarize(doc)
    head = ["instance", "n", "LOAD", *(LABELS[m] for m in methods), "best peer"]
    which = doc.get("set", "main")
    lines = [f"# dsa against omnimalloc's searches on {TITLES[which]} (optimum = LOAD)", "",
             f"Generated {doc['date']} on {doc['machine']} by `{doc['command']}`; omnimalloc "
             f"{doc.get('peer_version') or '?'}, dsa at commit {doc.get('dsa_commit') or '?'}. The instances "
             f"come from {ORIGINS[which]}so the optimal peak is LOAD and peak / LOAD - 1 is the distance from the "
             "optimum. Every "
             f"method had {limit:g} s per instance and ran alone, one after the other, on a 2-core machine "
             f"shared with other work ({_load_text(doc)}times are indicative); the run took "
             f"{doc.get('wall_s', 0) / 60:.0f} min. omnimalloc's searches ran in their own virtual environment: "
             + ", ".join(_SETTING[m].format(threads=doc["threads"]) for m in peers) + ". Every plan "
             "shown passed `dsa.validate` (an invalid one would read *invalid*). Bold: dsa at or below the "
             "best peer." + _reused_text(doc), "",
             "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for r in rows:
        bp_method, bp = best_peer(r, peers)
        cells = [_cell(ratio(r, m), bold=m in DSA_METHODS and bp is not None and ratio(r, m) is not None
                       and ratio(r, m) <= bp + 1e-12) for m in methods]
        lines.append(f"| {r['instance']} | {r['n']} | {r['load']} | " + " | ".join(cells)
                     + f" | {_cell(bp)} ({LABELS.get(bp_method, '-')}) |")
    lines.append("| **mean** | | | " + " | ".join(_cell(summary[m]["mean"]) for m in methods)
                 + f" | {_cell(summary['best_peer']['mean'])} |")
    b = summary["best"]
    e = summary["exact"]
    lines += ["", f"dsa `best` is at or below the best peer on {b['at_or_below_best_peer']} of {b['compared']} "
              f"instances, `exact` on {e['at_or_below_best_peer']} of {e['compared']}."]
    invalid = [(r["instance"], LABELS[m], r["methods"][m].get("error")) for r in rows for m in peers
               if m in r["methods"] and not r["methods"][m].get("valid")]
    if invalid:
        lines += ["", "Peer runs without a valid plan (not counted): "
                  + "; ".join(f"{i} {m}: {e}" for i, m, e in invalid) + "."]
    # the incumbent over time: dsa's from its log of improvements, the peers' from runs at shorter budgets
    budgets = sorted({float(k) for r in rows for m in peers for k in r["methods"].get(m, {}).get("budgets", {})})
    if budgets:
        lines += ["", "Mean peak / LOAD by time: for dsa, the incumbent of the run above at that time (-: its "
                  "log shows no plan yet on some instance); for the peers, separate runs with that time limit. "
                  "*last impr.*: mean seconds into the run of the last improvement (dsa).", "",
                  "| method | " + " | ".join(f"{t:g} s" for t in budgets) + " | last impr. s |",
                  "|---|" + "---:|" * (len(budgets) + 1)]
        for m in methods:
            at = [[_at(r, m, t) for r in rows] for t in budgets]
            means = [None if None in got else _mean(got) for got in at]
            last = _mean([r["methods"][m].get("last_improvement_s") for r in rows if m in r["methods"]])
            lines.append(f"| {LABELS[m]} | " + " | ".join("-" if v is None else f"{v:.4f}" for v in means)
                         + f" | {'-' if last is None else f'{last:.1f}'} |")
    lines += ["", f"![peak / LOAD against time]({doc.get('plot', 'peers_generated.png')})", ""]
    return "\n".join(lines)


def _at(row: dict, method: str, t: float):
    """peak / LOAD of ``method`` at time ``t``: dsa's incumbent, or the peer's run with budget ``t``."""
    r = row["methods"].get(method)
    if r is None:
        return None
    if "trajectory" in r:
        p = peak_at(r["trajectory"], t)
        return None if p is None else p / row["load"]
    run = r.get("budgets", {}).get(f"{t:g}")
    return run["peak"] / row["load"] if run and run.get("valid") else None


def compact(doc: dict) -> dict:
    """The machine-readable digest: per instance its generator arguments, n, LOAD, each method's peak
    (None: no valid plan) and the best peer."""
    peers = doc["peers"]
    out = []
    for r in doc["rows"]:
        method, value = best_peer(r, peers)
        out.append({"instance": r["instance"], "family": r["family"],
                    "generator": GENERATORS[doc.get("set", "main")], "generator_args": r["generator_args"],
                    "n": r["n"], "load": r["load"],
                    "peak": {m: (x["peak"] if x.get("valid") else None) for m, x in r["methods"].items()},
                    "best_peer": None if method is None else {
                        "method": method, "peak": r["methods"][method]["peak"], "ratio": value}})
    return {"date": doc["date"], "time_limit": doc["time_limit"], "peer_version": doc.get("peer_version"),
            "threads": doc["threads"], "instances": out}


def plot(doc: dict, path: Path) -> None:
    """peak / LOAD against time: the mean over the instances, then one panel per instance."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, NullFormatter

    rows, peers, limit = doc["rows"], doc["peers"], doc["time_limit"]
    methods = [*DSA_METHODS, *peers]
    colors = dict(zip(methods, plt.get_cmap("tab10").colors))
    cols = 4
    nrows = math.ceil((len(rows) + 1) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 3.2 * nrows), squeeze=False)
    # 1/1000 of the limit up to the end of the longest dsa run (a run may overrun its limit), log-spaced
    end = max([limit] + [r["methods"][m]["time_s"] for r in rows for m in DSA_METHODS if m in r["methods"]])
    grid = [end * 10 ** (k / 20) for k in range(-60, 1)]
    budgets = sorted({float(k) for r in rows for m in peers for k in r["methods"].get(m, {}).get("budgets", {})})
    panels = [("mean over the instances", rows)] + [(r["instance"], [r]) for r in rows]
    for ax, (title, sel) in zip(axes.flat, panels):
        for m in methods:
            if m in DSA_METHODS:
                ts = [t for t in grid if all(_at(r, m, t) is not None for r in sel)]
                ax.step(ts, [_mean([_at(r, m, t) for r in sel]) for t in ts], where="post", color=colors[m],
                        label=LABELS[m], lw=1.8)
            else:
                ts = [t for t in budgets if all(_at(r, m, t) is not None for r in sel)]
                ax.plot(ts, [_mean([_at(r, m, t) for r in sel]) for t in ts], "o--", color=colors[m],
                        label=LABELS[m], ms=4, lw=1)
        ax.axhline(1.0, color="grey", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    axes[0][0].set_ylabel("peak / LOAD")
    axes[0][0].set_xlabel("seconds")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"peak / LOAD against time on {TITLES[doc.get('set', 'main')]} (optimum = LOAD), limit {limit:g} s; "
                 "dsa: incumbent of one run; peers: one run per time limit", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_all(doc: dict, out: Path, summary: Path | None, with_plot: bool = True) -> None:
    write_results(out, doc, report)
    if with_plot and doc["rows"]:
        plot(doc, Path(out).with_suffix(".png"))
    if summary is not None:
        summary.parent.mkdir(parents=True, exist_ok=True)
        summary.write_text(json.dumps(compact(doc), indent=1))


def _commit(folder: Path) -> str | None:
    import subprocess

    def git(*a):
        return subprocess.run(["git", "-C", str(folder), *a], capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD")
    return (head + ("+dirty" if git("status", "--porcelain", ".") else "")) if head else None


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer-python", help="the interpreter of a venv with omnimalloc installed")
    ap.add_argument("--report", type=Path, metavar="IN.json", help="rewrite the Markdown, plot and summary "
                    "beside this JSON; run nothing")
    ap.add_argument("--time-limit", type=float, default=20.0, help="seconds per instance for each method")
    ap.add_argument("--peer-budgets", type=float, nargs="*", default=[1.0, 5.0],
                    help="shorter time limits the peers also run at, for the plot (default 1 5)")
    ap.add_argument("--peers", nargs="+", default=list(PEERS), choices=list(PEERS))
    ap.add_argument("--reuse-peers", type=Path, metavar="EARLIER.json",
                    help="take the peers' results from this earlier run of the same set (same instances and "
                         "time limit) and run only dsa: for a change to dsa alone")
    ap.add_argument("--threads", type=int, default=2, help="supermalloc's threads (default 2)")
    ap.add_argument("--set", choices=list(SETS), default="main",
                    help="the instances: the main set (default), other generator settings, "
                    "omnimalloc's own generators, generator settings drawn at random, the main set's "
                    "families at 10,000-20,000 (large) or 50,000-100,000 buffers (huge), or tall cuts")
    ap.add_argument("--instances", help="comma-separated names (family-n-sSEED) or indices in the set "
                    "(default: all)")
    ap.add_argument("--random-seeds", metavar="FIRST-LAST", help="with --set random: draw the set from these "
                    f"seeds instead (default {RANDOM_SEEDS[0]}-{RANDOM_SEEDS[-1]}), settings no run has seen")
    ap.add_argument("--random-sizes", metavar="LO-HI", help="with --set random: draw each instance's buffers "
                    "log-uniformly from LO-HI instead of 200-5000 (the other settings stay those of its seed)")
    ap.add_argument("--out", type=Path, default=Path("out/peers_generated"), help="output path without suffix")
    ap.add_argument("--summary", type=Path, help="also write the compact JSON here")
    ap.add_argument("--dsa-commit", help="the commit of the dsa measured, for the report (default: git's HEAD "
                    "of the checkout dsa is imported from, '+dirty' with local changes); to measure a snapshot, "
                    "put it first on PYTHONPATH")
    args = ap.parse_args(argv)
    if args.report is not None:
        write_all(json.loads(args.report.read_text()), args.report.with_suffix(""), args.summary)
        return 0
    if not args.peer_python:
        ap.error("--peer-python is needed to run the comparison")
    families, specs = SETS[args.set]
    if args.random_seeds:
        bounds = re.fullmatch(r"(\d+)-(\d+)", args.random_seeds)
        if args.set != "random" or not bounds or int(bounds.group(1)) > int(bounds.group(2)):
            ap.error("--random-seeds takes FIRST-LAST (FIRST <= LAST), with --set random")
        families, specs = random_set(range(int(bounds.group(1)), int(bounds.group(2)) + 1))
    if args.random_sizes:
        sizes = re.fullmatch(r"(\d+)-(\d+)", args.random_sizes)
        if args.set != "random" or not sizes or not 1 <= int(sizes.group(1)) <= int(sizes.group(2)):
            ap.error("--random-sizes takes LO-HI (1 <= LO <= HI), with --set random")
        seeds = [seed for _, _, seed in specs]
        families, specs = random_set(seeds, (int(sizes.group(1)), int(sizes.group(2))))
    specs = select(specs, args.instances)
    reused = None
    if args.reuse_peers is not None:
        earlier = json.loads(args.reuse_peers.read_text())
        if earlier.get("time_limit") != args.time_limit or not set(args.peers) <= set(earlier.get("peers", [])):
            ap.error("--reuse-peers needs a run with the same --time-limit and the peers asked for")
        args.earlier_rows = {r["instance"]: r for r in earlier["rows"]}
        missing = [instance_name(*spec) for spec in specs if instance_name(*spec) not in args.earlier_rows]
        if missing:
            ap.error(f"--reuse-peers: {args.reuse_peers} has no row for {', '.join(missing)}")
        # (where the earlier run reused its peers' figures in turn, they come from the run it names)
        reused = earlier.get("peers_reused") or {"file": args.reuse_peers.name, "date": earlier.get("date"),
                                                 "peer_version": earlier.get("peer_version")}
    import dsa

    dsa.warmup()
    warm_exact()  # no instance's time includes loading a kernel
    doc = {**provenance("peers_generated.py", argv), "time_limit": args.time_limit, "threads": args.threads,
           "peers": args.peers, "peer_settings": {m: PEERS[m] for m in args.peers}, "peer_version": None,
           "set": args.set, "plot": args.out.with_suffix(".png").name, "families": families,
           "dsa_path": str(Path(dsa.__file__).parent),
           "dsa_commit": args.dsa_commit or _commit(Path(dsa.__file__).parent), "rows": []}
    if reused is not None:
        doc["peers_reused"], doc["peer_version"] = reused, reused["peer_version"]
    version = [None]
    t0 = time.perf_counter()
    doc["load_average"] = [round(os.getloadavg()[0], 2)]
    for spec in specs:
        doc["rows"].append(measure(spec, args, version))
        doc["peer_version"] = version[0] or doc["peer_version"]
        doc["wall_s"] = time.perf_counter() - t0
        doc["load_average"][1:] = [round(os.getloadavg()[0], 2)]
        write_all(doc, args.out, args.summary, with_plot=False)  # after every instance: nothing is lost
    write_all(doc, args.out, args.summary)
    print(f"done in {doc['wall_s'] / 60:.1f} min", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
