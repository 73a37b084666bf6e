"""How the layers' cut of a rectangle cut compares with the cut that the generator made.

A diagnosis for issue 24, not a measurement of speed. ``dsa.strategies._layers.plan`` cuts a tiling
into layers (sets of buffers whose bytes alive are the same at every instant) and plans the leaves
apart; where it finds a set that keeps a constant load by coincidence rather than a layer of the
generator's cut, a leaf can have no plan within its band, and on coarse cuts the attempt then ends
with no plan. :func:`dsa.generate.rectangle_cut` returns its own plan at LOAD, so each leaf can be
checked against it:

- *band*: the leaf's buffers fill a band of the leaf's height in the generator's plan (then the leaf
  surely has a plan within its band; a leaf that is not a band may still have one);
- *merged bands*: of the leaf's merged buffers (``dsa.strategies._contract``), how many fill a band
  of their size there (forced merges of the whole period always do; merges made inside a block cut
  by a coincidence need not);
- per busy period, the generator's *full lines*: the levels that no buffer of the period straddles
  in its plan (the layers that a guillotine cut put at the top of the period's tree);
- per layer cut from a block that fills a rectangle of the generator's plan, in the order taken
  (``_layers.split``'s ``trace``): whether a reordering of the plan's bands puts it at the bottom
  (:func:`valid_layer`; a sufficient condition for a true layer, not a necessary one);
- per block where the search for a rectangle (``_layers.find_rectangle``) found none: the rectangles
  of the generator's cut that it holds all the same (nodes of the cut's tree, ``rectangle_cut``'s
  ``return_tree``, filled by two or more of the block's buffers, not all), and how many of them have
  both ends among the instants that the search's windows end at (:func:`missed_rectangles`).

Usage (instance names as in ``peers_generated.py``: FAMILY-N-sSEED of any of its sets)::

    .venv/bin/python benchmarks/layer_truth.py guillotine-700-s0 pinwheel-350-s0 --seconds 10

prints Markdown tables per instance: whether the layers planned it at LOAD, their statistics, the
periods' full lines, every leaf of more than one buffer, the largest first, and the layers judged.
"""
from __future__ import annotations

import argparse
import re
import sys
import time

import numpy as np


def parse(name: str) -> tuple:
    """``(family, n, seed)`` of an instance name ``FAMILY-N-sSEED``; a ``ValueError`` otherwise."""
    match = re.fullmatch(r"(.+)-(\d+)-s(\d+)", name)
    if match is None:
        raise ValueError(f"instance name {name!r} is not FAMILY-N-sSEED")
    return match.group(1), int(match.group(2)), int(match.group(3))


def full_lines(problem, offsets, rows) -> list:
    """The levels (multiples of the sizes' greatest common divisor, strictly between 0 and the plan's
    peak over ``rows``) that no buffer of ``rows`` straddles in the plan ``offsets``."""
    sizes, low = problem.sizes[rows], offsets[rows]
    quantum = int(np.gcd.reduce(problem.sizes)) or 1
    top = int((low + sizes).max())
    return [y for y in range(quantum, top, quantum) if not np.any((low < y) & (low + sizes > y))]


def is_band(problem, offsets, rows, height: int) -> bool:
    """Whether ``rows`` fill ``height`` bytes from their lowest offset in the plan ``offsets``."""
    return int((offsets[rows] + problem.sizes[rows]).max() - offsets[rows].min()) == int(height)


def _runs(lows, highs):
    """Cut points of intervals ``[lows, highs)``: the values strictly inside their hull that none of
    them straddles (a cut at ``x``: every interval ends at or before it or starts at or after it)."""
    order = np.argsort(lows, kind="stable")
    lows, reach = lows[order], np.maximum.accumulate(highs[order])
    inside = reach[:-1] <= lows[1:]
    return np.unique(lows[1:][inside])


def _pieces(rows, keys, cuts):
    """``rows`` cut apart at the values ``cuts`` of their ``keys`` (one per row), in order of key."""
    order = np.argsort(keys, kind="stable")
    return np.split(rows[order], np.searchsorted(keys[order], cuts))


def fills_rectangle(problem, offsets, rows) -> bool:
    """Whether ``rows`` cover the rectangle of their hull (time span x address range) in the plan
    ``offsets`` (a valid plan: the rows do not overlap, so their area equals the hull's)."""
    starts, ends, sizes, low = problem.starts[rows], problem.ends[rows], problem.sizes[rows], offsets[rows]
    area = int(((ends - starts) * sizes).sum())
    return area == int((ends.max() - starts.min()) * ((low + sizes).max() - low.min()))


def valid_layer(problem, offsets, block, part) -> bool:
    """Whether the rows ``part`` of ``block`` are a layer that some tiling puts below the rest: one
    that the generator's plan ``offsets`` gives when its bands are reordered.

    ``block`` must fill a rectangle in the plan (:func:`fills_rectangle`; a ``ValueError``
    otherwise). The block is cut the way a guillotine cut is read back: across time at every instant
    that none of its rows crosses, across addresses at every level that none straddles, and each
    piece again. Bands of a piece cut across addresses span its whole time, so they can be stacked in
    any order: ``part`` can go to the bottom of such a piece where its rows in each band can go to
    the bottom of that band. In a piece cut across time, ``part`` must take the same height in each
    slice. A piece that neither cut applies to (a single buffer, or a pinwheel block whose pieces
    interlock) must be wholly in ``part`` or wholly out.

    It is a sufficient condition only: a layer of some other tiling, one that no such reordering
    gives, reads False (two buffers of one size that meet end to start at another height, swapped;
    or guillotine-300-s1's first cut, which the layers then plan at LOAD).
    """
    block = np.asarray(block, dtype=np.int64)
    if not fills_rectangle(problem, offsets, block):
        raise ValueError("block must fill a rectangle of the plan")
    chosen = np.zeros(len(problem), dtype=bool)
    chosen[np.asarray(part, dtype=np.int64)] = True
    starts, ends, sizes = problem.starts, problem.ends, problem.sizes
    tops = offsets + sizes

    def height(rows):
        # the height the rows of `part` take at the bottom of the piece `rows`, or None where they cannot
        inside = chosen[rows]
        if not inside.any():
            return 0
        if inside.all():
            return int(tops[rows].max() - offsets[rows].min())
        cuts = _runs(starts[rows], ends[rows])
        if len(cuts):
            heights = set()
            for piece in _pieces(rows, starts[rows], cuts):
                h = height(piece)
                if h is None:
                    return None
                heights.add(h)
            return heights.pop() if len(heights) == 1 else None
        levels = _runs(offsets[rows], tops[rows])
        if not len(levels):
            return None                   # (a single buffer or an interlocking block, split by part)
        total = 0
        for band in _pieces(rows, offsets[rows], levels):
            h = height(band)
            if h is None:
                return None
            total += h
        return total

    return height(block) is not None


def missed_rectangles(problem, offsets, nodes, leaf, real_rows) -> dict:
    """The generator's rectangles inside a block where ``_layers.find_rectangle`` found none.

    ``leaf`` is the block as ``_layers.split`` left it (a ``Leaf``: merged buffers and buffers standing
    for rectangles cut out of it), ``real_rows(j)`` the problem's rows that its buffer ``j`` holds,
    ``nodes`` the cut's tree (``rectangle_cut(..., return_tree=True)``'s first array). A buffer is
    placed where the plan ``offsets`` puts its rows (``consistent``: they fill a rectangle of its
    lifetime and size there). A node of the tree is a rectangle of the block when two or more of the
    block's consistent buffers lie inside it, not all, and fill it. Returns a dict: ``buffers``,
    ``consistent``, ``rectangles`` (the nodes so found), ``reached`` (those whose start is the block's
    or one of the instants where the search's windows start, and whose end likewise: the search tries
    windows only between such instants), ``interior`` (those that touch neither end of the block),
    and ``sizes``: the buffers in each rectangle, the smallest first.
    """
    from dsa.strategies import _layers

    count = len(leaf.sizes)
    box = np.zeros((count, 4), dtype=np.int64)
    consistent = np.zeros(count, dtype=bool)
    for j in range(count):
        rows = real_rows(j)
        low, high = offsets[rows].min(), (offsets[rows] + problem.sizes[rows]).max()
        box[j] = leaf.starts[j], leaf.ends[j], low, high
        area = int(((problem.ends[rows] - problem.starts[rows]) * problem.sizes[rows]).sum())
        consistent[j] = high - low == leaf.sizes[j] and area == (leaf.ends[j] - leaf.starts[j]) * (high - low)
    t0, t1 = int(leaf.starts.min()), int(leaf.ends.max())
    opening = {t0, *_layers._instants(leaf.starts, leaf.sizes, t0)}
    closing = {t1, *_layers._instants(leaf.ends, leaf.sizes, t1)}
    found, reached, interior = [], 0, 0
    for x0, x1, y0, y1, _ in nodes:
        inside = consistent & (box[:, 0] >= x0) & (box[:, 1] <= x1) & (box[:, 2] >= y0) & (box[:, 3] <= y1)
        k = int(inside.sum())
        if k < 2 or k == count:
            continue
        area = int(((box[inside, 1] - box[inside, 0]) * (box[inside, 3] - box[inside, 2])).sum())
        if area != (x1 - x0) * (y1 - y0):
            continue
        found.append(k)
        reached += int(x0) in opening and int(x1) in closing
        interior += x0 > t0 and x1 < t1
    return {"buffers": count, "consistent": int(consistent.sum()), "rectangles": len(found), "reached": reached,
            "interior": interior, "sizes": sorted(found)}


def truth(problem, offsets, seconds: float, seed: int = 0, nodes=None) -> dict:
    """Run the layers on ``problem`` (a tiling at LOAD) for ``seconds`` and compare their leaves with
    the plan ``offsets`` at LOAD.

    Returns a dict: ``planned`` (the layers' plan came back), ``stats`` (theirs), ``periods`` (per busy
    period: ``rows``, ``span``, ``lines``, see :func:`full_lines`), ``leaves`` (per leaf of every cut,
    the largest first: ``merged`` buffers, ``rows`` of the problem, ``height``, ``band`` and
    ``merged_bands``; ``band`` is None for a leaf holding a rectangle cut out of its block, whose
    buffers stand for others), ``cuts`` (per layer or rectangle taken, in the order taken: ``kind``,
    ``rows`` of the block and ``height``, ``part_rows`` and ``part_height`` of what was cut from it,
    ``block_band``: whether the block fills a rectangle of the plan, and ``valid``: for a layer cut
    from such a block, :func:`valid_layer`, else None) and ``whole`` (a cut ended with no leaves: a
    block too large for the leaves' look stayed whole). The leaves come from wrapping
    ``_layers.split`` for the call, the cuts from its ``trace``. With ``nodes`` (the cut's tree),
    also ``missed``: per block where the search for a rectangle found none, :func:`missed_rectangles`.
    """
    import dsa
    from dsa.strategies import _layers
    from dsa.sweep import Sweep

    cap = dsa.load(problem)
    if int((offsets + problem.sizes).max()) != cap:
        raise ValueError("offsets must be a plan at LOAD (the generator's own)")
    cuts, taken = [], []
    split, find, make_leaf = _layers.split, _layers.find_rectangle, _layers._Buffers.leaf
    held, empty, made = {}, [], []     # (a rectangle's id: its rows; blocks with no rectangle; leaves made)
    first = [len(problem)]

    def record(kind, block, part, height, low):
        if kind == "rectangle":
            held[first[0] + sum(1 for cut in taken if cut["kind"] == "rectangle" and cut["split"] == len(cuts))] = part
        band = fills_rectangle(problem, offsets, block)
        taken.append({"kind": kind, "split": len(cuts), "rows": len(block), "height": height,
                      "part_rows": len(part), "part_height": low, "block_band": band,
                      "valid": valid_layer(problem, offsets, block, part) if band and kind == "layer" else None})

    def spy(*args, **kwargs):
        first[0] = kwargs.get("first_virtual") or len(problem)
        leaves = split(*args, trace=record, **kwargs)
        cuts.append(leaves)
        return leaves

    def spy_find(starts, ends, sizes, *args):
        out = find(starts, ends, sizes, *args)
        if out is None:
            empty.append((starts.copy(), ends.copy(), sizes.copy()))
        return out

    def spy_leaf(self, *args, **kwargs):
        leaf = make_leaf(self, *args, **kwargs)
        made.append(leaf)
        return leaf

    stats = {}
    _layers.split, _layers.find_rectangle, _layers._Buffers.leaf = spy, spy_find, spy_leaf
    try:
        out = _layers.plan(problem, np.cumsum(problem.sizes) - problem.sizes, cap,
                           time.perf_counter() + seconds, seed=seed, stats=stats)
    finally:
        _layers.split, _layers.find_rectangle, _layers._Buffers.leaf = split, find, make_leaf
    n = len(problem)
    leaves, whole = [], any(cut is None for cut in cuts)
    for cut in cuts:
        for leaf in cut or ():
            real = leaf.rows[leaf.rows < n]
            virtual = len(real) < len(leaf.rows) or leaf.anchor != -1
            bands = sum(is_band(problem, offsets, leaf.rows[leaf.node == j], leaf.sizes[j])
                        for j in range(len(leaf.sizes)) if np.all(leaf.rows[leaf.node == j] < n))
            leaves.append({"merged": len(leaf.sizes), "rows": len(leaf.rows), "height": int(leaf.height),
                           "band": None if virtual else is_band(problem, offsets, real, leaf.height),
                           "merged_bands": int(bands), "settled": bool(leaf.settled)})
    leaves.sort(key=lambda leaf: -leaf["merged"])
    periods = [{"rows": len(rows), "span": (int(problem.starts[rows].min()), int(problem.ends[rows].max())),
                "lines": full_lines(problem, offsets, rows)} for rows in Sweep(problem).period_rows()]
    missed = []
    if nodes is not None:
        def real_rows(leaf, j):
            rows = leaf.rows[leaf.node == j]
            return np.concatenate([np.asarray(held[r], dtype=np.int64) if r >= n else [r] for r in rows])

        for starts, ends, sizes in empty:
            leaf = next((leaf for leaf in made if np.array_equal(leaf.starts, starts)
                         and np.array_equal(leaf.ends, ends) and np.array_equal(leaf.sizes, sizes)), None)
            if leaf is not None:
                missed.append(missed_rectangles(problem, offsets, nodes, leaf, lambda j, leaf=leaf: real_rows(leaf, j)))
    return {"planned": out is not None, "stats": stats, "periods": periods, "leaves": leaves, "cuts": taken,
            "whole": whole, "missed": missed}


def report(name: str, problem, found: dict) -> str:
    """Markdown for one instance (see the module docstring)."""
    import dsa

    quantum = int(np.gcd.reduce(problem.sizes)) or 1
    lines = [f"## {name}: {len(problem)} buffers, LOAD {dsa.load(problem)} ({dsa.load(problem) // quantum} quanta)",
             "", f"layers' plan at LOAD: {'yes' if found['planned'] else 'no'}; stats: {found['stats']}", "",
             "| period (buffers, span) | full lines, in quanta |", "|---|---|"]
    for period in found["periods"]:
        shown = [y // quantum for y in period["lines"]]
        lines.append(f"| {period['rows']}, [{period['span'][0]}, {period['span'][1]}) | {shown or 'none'} |")
    if found.get("whole"):
        lines += ["", "A cut ended with no leaves: a block too large for the leaves' look stayed whole."]
    lines += ["", "| leaf: merged buffers | rows | height | band of the generator's plan | merged bands | settled |",
              "|---:|---:|---:|---|---:|---|"]
    for leaf in found["leaves"]:
        if leaf["rows"] < 2:
            continue
        band = {None: "(holds a rectangle)", True: "yes", False: "no"}[leaf["band"]]
        lines.append(f"| {leaf['merged']} | {leaf['rows']} | {leaf['height']} | {band} | "
                     f"{leaf['merged_bands']} of {leaf['merged']} | {leaf['settled']} |")
    judged = [cut for cut in found.get("cuts", ()) if cut["valid"] is not None]
    if judged:
        wrong = sum(not cut["valid"] for cut in judged)
        lines += ["", f"Layers cut from blocks that fill a rectangle of the generator's plan: {len(judged)}; "
                  f"no reordering of the plan's bands puts {wrong} of them at the bottom (layers by "
                  "coincidence, or of a tiling where equal buffers are swapped):", "",
                  "| cut | block rows | block height | layer rows | layer height | reordered bands allow it |",
                  "|---:|---:|---:|---:|---:|---|"]
        for k, cut in enumerate(found["cuts"]):
            if cut["valid"] is not None:
                lines.append(f"| {k + 1} | {cut['rows']} | {cut['height'] // quantum} | {cut['part_rows']} | "
                             f"{cut['part_height'] // quantum} | {'yes' if cut['valid'] else 'no'} |")
    if found.get("missed"):
        lines += ["", "Blocks where the search for a rectangle found none, and the generator's rectangles in them "
                  "(*reached*: both ends among the instants its windows end at):", "",
                  "| block buffers | placed as in the plan | rectangles | reached | interior | buffers in each, "
                  "smallest first |", "|---:|---:|---:|---:|---:|---|"]
        for block in found["missed"]:
            shown = ", ".join(map(str, block["sizes"][:12])) + (", ..." if len(block["sizes"]) > 12 else "")
            lines.append(f"| {block['buffers']} | {block['consistent']} | {block['rectangles']} | {block['reached']} | "
                         f"{block['interior']} | {shown} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("instances", nargs="+", help="names FAMILY-N-sSEED (see peers_generated.py)")
    parser.add_argument("--seconds", type=float, default=10.0, help="the layers' time per instance")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from peers_generated import generator_args  # this script's folder is on sys.path

    from dsa.generate import rectangle_cut

    for name in args.instances:
        problem, offsets, (nodes, _) = rectangle_cut(**generator_args(*parse(name)), return_plan=True,
                                                     return_tree=True)
        print(report(name, problem, truth(problem, offsets, args.seconds, args.seed, nodes)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
