"""Draw the heap maps of the documentation into ``docs/img/``.

The PNGs are committed: ``make docs`` does not run this script (the strategies compile their numba
kernels on first use, and ``exact`` and ``mip`` search for seconds). Regenerate them after a change
to a strategy or to :func:`dsa.plot.heap_map` with::

    make docs-figures                       # or: .venv/bin/python docs/scripts/make_figures.py

from the repository root, with the ``plot`` and ``mip`` extras installed (without scipy the ``mip``
figure is skipped and the old one is kept). Options: ``--out DIR`` (default ``docs/img``) and
``--only NAME`` (one strategy, or ``home`` / ``concepts``). The table of the strategy figures goes to
``snippets/strategies_E.md`` beside the ``--out`` folder (``docs/snippets/`` by default).

What it draws, all with fixed seeds:

* ``strategy_<name>.png`` for every registered strategy: its plan of one instance, MiniMalloc's
  challenging instance E (215 buffers; bundled as ``dsa/data/minimalloc/E.1048576.csv``), with the
  instance's capacity dropped so that every strategy minimises the peak. The strategies visibly
  differ on it (from LOAD to 1.7 x LOAD, and bump far above). Every plan except bump's shares one
  address axis, so the pictures compare by eye; bump's own axis is an order of magnitude taller.
  ``time_limit`` is 1 s for ``best``, 10 s for ``exact`` and ``mip`` (``mip`` runs to it on this
  instance, as its page says).
* ``strategies_grid.png``: the same plans as small multiples on one shared axis (without bump), and
  ``docs/snippets/strategies_E.md``, their peaks as a Markdown table (the strategies page includes it).
* ``home.png``: ``best``'s plan of the bundled EfficientNet-B0 forward trace.
* ``concepts.png``: a 16-buffer random instance planned by ``greedy_by_size`` and by ``exact``.

Titles give the peak as a multiple of LOAD and the status (not the time, so that the PNGs only
change when a plan does). Files are kept under 150 KB (the script fails above).

The interactive heap map of ``concepts.md`` (``assets/resnet_heap_map.html``) is not drawn here: the
MkDocs hook ``heap_map_page.py`` renders it on every build.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import dsa  # noqa: E402
from dsa.generate import random_trace  # noqa: E402
from dsa.plot import heap_map  # noqa: E402
from dsa.strategies import strategy_info  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
INSTANCE = "E.1048576"          # MiniMalloc challenging instance E
SEED = 0
TIME_LIMITS = {"best": 1.0, "exact": 10.0, "mip": 10.0}
FIGSIZE = (9.0, 4.0)
DPI = 90
MAX_BYTES = 150_000
AXIS_TOP = 1.9                  # the shared address axis of the strategy figures, x LOAD


def _instance():
    return dsa.data.load(INSTANCE).replace(capacity=None)


def _solve(problem, name):
    return dsa.solve(problem, name, time_limit=TIME_LIMITS.get(name), seed=SEED)


def _seconds(t: float) -> str:
    return f"{t:.1f} s" if t >= 1 else f"{t * 1e3:.2g} ms" if t >= 1e-3 else "< 1 ms"


def _title(label, problem, sol):
    load = dsa.lower_bound(problem)
    return f"{label}: peak {sol.peak / load:.3f} x LOAD ({sol.status})"


def _save(fig, path: Path, dpi: int = DPI) -> None:
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    size = path.stat().st_size
    print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {size / 1e3:.0f} KB")
    if size > MAX_BYTES:
        raise SystemExit(f"{path} is {size} bytes, above the {MAX_BYTES} limit")


def strategy_figures(out: Path, only: str | None) -> None:
    problem = _instance()
    names = [n for n in dsa.available_strategies() if only in (None, n)]
    # a time limit counts the loading of numba kernels, which only the first calls of a process pay:
    # load them all first, so that the plans do not depend on a cold cache
    dsa.solve(problem, "best", seed=SEED)
    plans = {}
    for name in names:
        if not strategy_info(name).available:
            print(f"skipping {name}: pip install 'dsa-planner[{strategy_info(name).extra}]'", file=sys.stderr)
            continue
        sol = _solve(problem, name)
        if sol.offsets is None:
            raise SystemExit(f"{name} gave no plan: {sol.message}")
        plans[name] = sol
        print(f"{name}: peak {sol.peak} ({sol.ratio:.4f} x LOAD), {sol.status}, {_seconds(sol.stats['time_s'])}")
    # one address axis for every plan but bump's, which is an order of magnitude taller; fixed, so
    # that --only redraws a figure as the full run does (widened only if a plan would not fit)
    top = max([AXIS_TOP * dsa.lower_bound(problem)] + [s.peak * 1.12 for n, s in plans.items() if n != "bump"])
    for name, sol in plans.items():
        fig, ax = plt.subplots(figsize=FIGSIZE)
        heap_map(problem, sol, ax=ax, title=_title(f"{name} on MiniMalloc E ({len(problem)} buffers)",
                                                   problem, sol))
        if name != "bump":
            ax.set_ylim(0, top)
        fig.tight_layout()
        _save(fig, out / f"strategy_{name}.png")
    if only is None:
        grid = [n for n in plans if n != "bump"]
        cols = 3
        rows = -(-len(grid) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(12, 3.0 * rows), sharex=True, sharey=True)
        for ax, name in zip(axes.flat, grid):
            sol = plans[name]
            heap_map(problem, sol, ax=ax, title=f"{name}: {sol.ratio:.3f} x LOAD")
            ax.get_legend().remove()
            ax.set_xlabel("")
            ax.set_ylabel("")
            ax.set_ylim(0, top)
        for ax in list(axes.flat)[len(grid):]:
            ax.remove()
        fig.suptitle(f"MiniMalloc E ({len(problem)} buffers): time on x, address on y; "
                     "dashed: LOAD, solid: peak")
        fig.tight_layout()
        _save(fig, out / "strategies_grid.png", dpi=70)
        _write_table(problem, plans, out.parent / "snippets" / "strategies_E.md")


def _write_table(problem, plans, path: Path) -> None:
    """The numbers of the figures, as a Markdown table that the strategies page includes."""
    load = dsa.lower_bound(problem)
    lines = ["<!-- written by docs/scripts/make_figures.py; do not edit -->",
             f"MiniMalloc E: {len(problem)} buffers, LOAD = {load:,} bytes, capacity dropped, seed {SEED}; "
             f"time limits: {', '.join(f'`{k}` {v:g} s' for k, v in TIME_LIMITS.items())}.",
             "",
             "| strategy | peak (bytes) | peak / LOAD | status |",
             "|---|---:|---:|---|"]
    for name, sol in sorted(plans.items(), key=lambda item: (item[1].peak, item[0])):
        lines.append(f"| [`{name}`](../strategies/{name}.md) | {sol.peak:,} | {sol.peak / load:.3f} | `{sol.status.name}` |")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: table")


def home_figure(out: Path) -> None:
    problem = dsa.data.load("efficientnet_b0_b1_224")
    sol = dsa.solve(problem, "best", seed=SEED)
    fig, ax = plt.subplots(figsize=FIGSIZE)
    heap_map(problem, sol, ax=ax, title=_title(f"EfficientNet-B0 forward, {len(problem)} buffers, best",
                                               problem, sol))
    fig.tight_layout()
    _save(fig, out / "home.png")


def concepts_figure(out: Path) -> None:
    problem = random_trace(16, seed=26, kind="uniform")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    top = 0
    for ax, name in zip(axes, ("greedy_by_size", "exact")):
        sol = dsa.solve(problem, name, seed=SEED)
        heap_map(problem, sol, ax=ax, title=_title(name, problem, sol))
        top = max(top, sol.peak)
    axes[0].set_ylim(0, top * 1.35)  # shared: room for the legends above the plans
    fig.tight_layout()
    _save(fig, out / "concepts.png")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--only", help="one strategy name, or 'home' or 'concepts'")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.only in (None, "home"):
        home_figure(args.out)
    if args.only in (None, "concepts"):
        concepts_figure(args.out)
    if args.only not in ("home", "concepts"):
        strategy_figures(args.out, args.only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
