"""Shared objects by minimum-cost flow, then laid out as offsets.

The shared-objects planner of

    J. Lee, N. Chirkov, E. Ignasheva, Y. Pisarchyk, M. Shieh, F. Riccardi, R. Sarokin,
    A. Kulik and M. Grundmann, "On-Device Neural Net Inference with Mobile GPUs",
    CVPR 2019 workshop (EMC2), arXiv:1907.01989

(TFLite GPU's ``MIN_COST_FLOW`` memory strategy). Buffers are grouped into *shared objects*: a
buffer either opens a new object, at cost its size, or takes over the object of an earlier buffer
``i`` that ended before it starts, at cost ``max(0, size_j - size_i)`` (the paper's estimate of the
bytes the object must grow by). A minimum-cost flow picks the cheapest such assignment. Each object
is a chain of buffers that are disjoint in time, and its size is the largest buffer in its chain.

The flow. In the network ``source -> {L_i, R_j} -> sink`` of the paper every buffer ``j`` receives
exactly one unit, either from the source (a new object) or through one ``L_i -> R_j`` edge of an
earlier buffer, and every ``L_i`` passes on at most one unit. That is a bipartite assignment: rows
are the buffers, columns are "reuse ``i``'s object" (capacity one each) plus one private
"new object" column per buffer. It is solved here exactly by successive shortest augmenting paths
with Dijkstra on reduced costs (Hungarian potentials), one buffer at a time in start order, in
numba (:mod:`dsa._kernels.mincost_flow`). Why this and not a general min-cost-flow code or scipy:

* the assignment form has half the nodes of the flow network and no source/sink arcs to store;
* Dijkstra with potentials needs no negative-cost handling (TFLite's SPFA/Bellman-Ford does) and each
  augmentation stops at the first free column it settles; a buffer that opened a new object can never
  be re-routed through (its column is private), so searches stay local on real traces;
* all costs are integers, so the potentials are exact (no tolerance);
* scipy's ``min_weight_full_bipartite_matching`` would need a full matching on a padded graph and is
  an optional dependency; the library must plan without it.

Candidate predecessors. The full edge set has one edge per pair ``i`` before ``j``: O(n^2). With
``candidates=K`` each buffer may only reuse the object of one of K earlier buffers (among those
whose alignment divides or is divided by its own): by default the K that ended most recently at or
before its start; with ``window=W > K``, the K of the last W to end with the largest saving
``min(size_i, size_j)``. ``candidates=None`` keeps every predecessor (the exact flow of the paper's
model). The default, ``"auto"``, is exact when the full edge set has at most ``2**20`` edges (some
1,400 short-lived buffers; about a second) and K = 16 otherwise. With ``K >= n`` the restricted set
is the full set. The restriction changes which objects form, and on random traces the final peak is
not monotone in K or W: fewer, larger objects are not always easier to lay out.

Layout. ``layout="gap"`` (default) places whole objects, largest first, each with a best-fit gap
search over every already placed buffer that meets any of its members in time; an object is thus a
set of disjoint intervals, not one long interval, so objects interleave where their chains leave
holes. ``layout="stack"`` is the paper's baseline (TFLite's ObjectsToOffsets): the objects stacked one
on top of the other. Both start above nothing but the fixed buffers, which keep their offsets and
take no part in the flow: the gap search treats them as obstacles, the stack starts above the highest
of them. An object's offset is a multiple of its members' largest alignment (a chain is cut where
alignments stop dividing one another, so that largest alignment suits every member). Zero-size
buffers get offset 0 (or their fixed offset). With ``compact=True`` (default) the plan is then
compacted by :func:`dsa.compaction.compact`, which re-places every buffer on its own in ascending
offset order and never raises the peak.

Complexity: O(n log n + n W log W) to build the candidates (W = max(K, window)). The assignment
costs, per buffer, a Dijkstra over the part of the graph it explores: O(n (nK + n) log n) in the
worst case, near linear on DNN traces (``stats["explored"]`` reports the columns settled). The gap
layout and the compaction cost O(n log n + E + sum_i k_i log k_i), E the intersecting lifetime
pairs, with memory O(n K + E); when most pairs of rows meet (:attr:`dsa.sweep.Sweep.dense`) and the
overlap graph is not built yet, both scan a list of the placed rows instead: O(n^2 log K) time
(O(n^2) for the compaction), O(n K) memory, no overlap graph. Measured on 2 shared cores: 100,000
buffers in 0.7-1.4 s (K = 16); 1,500 exactly in ~1 s; 20,000 buffers all alive at once in 1.8 s.
"""
from __future__ import annotations

import numpy as np

from dsa.solution import make_solution, plan_peak

__all__ = ["solve", "shared_objects", "LAYOUTS", "AUTO_EXACT_EDGES", "AUTO_CANDIDATES", "AUTO_WINDOW"]

LAYOUTS = ("gap", "stack")
AUTO_EXACT_EDGES = 1 << 20  # "auto" keeps every predecessor up to this many edges ...
AUTO_CANDIDATES = 16        # ... and K candidates beyond,
AUTO_WINDOW = 1             # ... the best of the last AUTO_WINDOW * K to end (1: the last K)


def _flow_rows(problem) -> np.ndarray:
    """Rows that take part in the flow (free, size > 0), in start order (ties: end, then row)."""
    rows = np.flatnonzero(problem.is_movable)
    key = np.lexsort((rows, problem.ends[rows], problem.starts[rows]))
    return rows[key]


def _resolve_candidates(candidates, starts, ends) -> int:
    """The K to use for ``m`` flow rows: ``m`` means every predecessor."""
    m = len(starts)
    if candidates is None:
        return m
    if isinstance(candidates, str):
        if candidates != "auto":
            raise ValueError(f"candidates must be 'auto', None or a positive int, got {candidates!r}")
        full = int(np.searchsorted(np.sort(ends), starts, side="right").sum())
        return m if full <= AUTO_EXACT_EDGES else min(AUTO_CANDIDATES, m)
    if isinstance(candidates, bool) or not isinstance(candidates, (int, np.integer)) or candidates < 1:
        raise ValueError(f"candidates must be 'auto', None or a positive int, got {candidates!r}")
    return min(int(candidates), m)


def shared_objects(problem, *, candidates="auto", window=None):
    """Group the free, non-empty rows of ``problem`` into shared objects by min-cost flow.

    Parameters
    ----------
    problem : Problem
    candidates : "auto", int or None
        Candidate predecessors per buffer (see the module docstring); None: all of them.
    window : int, optional
        Pick the ``candidates`` best-saving predecessors among the last ``window`` to end
        (default: ``AUTO_WINDOW * K``, i.e. simply the K most recently ended).

    Returns
    -------
    dict
        ``objects``: list of arrays of problem rows, each a chain in time order; ``sizes`` and
        ``alignments`` of the objects (int64 arrays); ``pred``: per problem row, the row whose object
        it took over (-1: none, or not in the flow); ``flow_cost``: the minimum cost; ``k``: the K
        used; ``edges``: candidate edges; ``explored``: columns settled by the augmentations.

    Examples
    --------
    >>> import dsa
    >>> p = dsa.Problem([0, 2, 4], [2, 4, 6], [8, 4, 8])
    >>> res = shared_objects(p)
    >>> [o.tolist() for o in res["objects"]], res["sizes"].tolist(), res["flow_cost"]
    ([[0, 1, 2]], [8], 12)
    """
    from dsa._kernels import python_path
    from dsa._kernels.mincost_flow import assign, candidate_edges, objects_from_pred

    if window is not None and (isinstance(window, bool) or not isinstance(window, (int, np.integer))
                               or window < 1):
        raise ValueError(f"window must be a positive int, got {window!r}")
    rows = _flow_rows(problem)
    starts, ends = problem.starts[rows], problem.ends[rows]
    sizes, aligns = problem.sizes[rows], problem.alignments[rows]
    m = len(rows)
    k = _resolve_candidates(candidates, starts, ends)
    pred_all = np.full(len(problem), -1, dtype=np.int64)
    if m == 0:
        empty = np.zeros(0, dtype=np.int64)
        return {"objects": [], "sizes": empty, "alignments": empty, "pred": pred_all, "flow_cost": 0,
                "k": k, "edges": 0, "explored": 0, "_members": empty, "_ptr": np.zeros(1, np.int64)}
    w = k * AUTO_WINDOW if window is None else int(window)
    by_end = np.argsort(ends, kind="stable")
    avail = np.searchsorted(ends[by_end], starts, side="right")  # rows ended by each start
    # (small problems use its numpy version while the kernel is not compiled: same edges)
    indptr, cols, costs = python_path(candidate_edges, m)(by_end, avail, sizes, aligns, k, max(k, w))
    pred, total, explored = assign(indptr, cols, costs, sizes)
    # (small problems run its Python version while the kernel is not compiled: same objects)
    obj_ptr, members, obj_size, obj_align = python_path(objects_from_pred, m)(pred, sizes, aligns)
    has = pred >= 0
    pred_all[rows[has]] = rows[pred[has]]
    members = rows[members]  # flow rows -> problem rows
    return {"objects": np.split(members, obj_ptr[1:-1]), "sizes": obj_size, "alignments": obj_align,
            "pred": pred_all, "flow_cost": int(total), "k": k, "edges": int(indptr[-1]),
            "explored": int(explored), "_members": members, "_ptr": obj_ptr}


def solve(problem, *, candidates="auto", window=None, layout: str = "gap", compact: bool = True,
          sweep=None):
    """Plan by min-cost-flow shared objects (Lee et al. 2019), laid out as offsets.

    Parameters
    ----------
    problem : Problem
    candidates : "auto", int or None, default "auto"
        How many earlier buffers each buffer may take the object of: the K that ended most recently
        (an int), all of them (None: the exact flow, O(n^2) edges), or ``"auto"``: all of them when
        that is at most ``AUTO_EXACT_EDGES`` edges, else ``AUTO_CANDIDATES``.
    window : int, optional
        With a K: choose the K predecessors with the largest saving ``min(size_i, size_j)`` among
        the last ``window`` to end (default K: the K most recently ended).
    layout : {"gap", "stack"}, default "gap"
        ``"gap"``: objects placed largest first with a best-fit gap search over their members'
        time-neighbours; ``"stack"``: objects stacked (the paper's baseline).
    compact : bool, default True
        Finish with :func:`dsa.compaction.compact` (never raises the peak).
    sweep : dsa.sweep.Sweep, optional
        The shared planning context (passed by :func:`dsa.solve`).

    Returns
    -------
    Solution
        ``stats``: ``objects`` (count), ``flow_cost``, ``object_bytes`` (sum of object sizes),
        ``peak_before_compaction``, ``candidates`` (the K used, or ``"all"``), ``edges``,
        ``explored`` and ``layout``.

    Examples
    --------
    >>> import dsa
    >>> from dsa.strategies import mincost_flow
    >>> p = dsa.Problem([0, 0, 2, 4], [2, 6, 4, 6], [8, 1, 4, 8])
    >>> sol = dsa.solve(p, strategy=mincost_flow.solve)
    >>> sol.peak, sol.stats["objects"], sol.stats["flow_cost"]
    (9, 2, 13)
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; valid layouts: {', '.join(LAYOUTS)}")
    from dsa._kernels import python_path
    from dsa._kernels.mincost_flow import place_objects, place_objects_dense, stack_objects
    from dsa.sweep import Sweep

    n = len(problem)
    res = shared_objects(problem, candidates=candidates, window=window)
    offsets = np.zeros(n, dtype=np.int64)
    fixed = problem.is_fixed
    offsets[fixed] = problem.fixed_offsets[fixed]
    obj_ptr, members = res["_ptr"], res["_members"]
    obj_size, obj_align = res["sizes"], res["alignments"]
    if len(obj_size):
        if layout == "stack":
            base = int((offsets[fixed] + problem.sizes[fixed]).max()) if fixed.any() else 0
            stack_objects(obj_ptr, members, obj_size, obj_align, base, offsets)
        else:
            sweep = sweep or Sweep(problem)
            offsets[members] = -1
            # largest object first; then the longest total lifetime, then the earliest (lowest index)
            span = np.add.reduceat(problem.durations[members], obj_ptr[:-1])
            order = np.lexsort((np.arange(len(obj_size)), -span, -obj_size))
            if "overlap" not in sweep.__dict__ and sweep.dense:
                # most pairs of rows meet: the overlap graph would take O(n^2) memory; scan a list
                # of the placed rows instead (same plan; the compaction does the same)
                place_objects_dense(order, obj_ptr, members, obj_size, obj_align, problem.sizes,
                                    problem.starts, problem.ends, offsets, True)
            else:
                indptr, indices = sweep.overlap
                # (small problems run its Python version while the kernel is not compiled)
                python_path(place_objects, n)(order, obj_ptr, members, obj_size, obj_align, problem.sizes,
                                              offsets, indptr, indices, True)
    peak_before = plan_peak(problem, offsets)
    if compact and n:
        from dsa.compaction import compact as squeeze

        offsets = squeeze(problem, offsets, sweep=sweep)
    stats = {
        "objects": len(obj_size),
        "flow_cost": res["flow_cost"],
        "object_bytes": int(obj_size.sum()),
        "peak_before_compaction": peak_before,
        "candidates": "all" if res["k"] >= len(members) else res["k"],
        "edges": res["edges"],
        "explored": res["explored"],
        "layout": layout,
    }
    return make_solution(problem, offsets, strategy="mincost_flow", stats=stats)
