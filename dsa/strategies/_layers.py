"""Plans at the bound cut into layers: smaller looks at the bound, stacked.

Where the bytes alive in a busy period are the same at every instant and equal to the capacity, a
plan within the capacity wastes no byte: it tiles the rectangle (the period's time x the capacity).
Such tilings often come in layers. A *layer* is a subset of the buffers whose bytes alive are the same
at every instant of the block (at each instant inside it, the chosen buffers that end free as many
bytes as the chosen ones that start take); if the block has a tiling with that subset in a band of
its own, the subset can be planned alone, as high as its load, and the rest planned above it. Cut
recursively (blocks cut where no buffer crosses, buffers that span their block stacked alone,
layers), a tiling of thousands of buffers becomes several of hundreds, which the restarted dives of
:func:`dsa.strategies._skyline.bound_look` plan at the bound where they do not plan the whole (their
success falls steeply with the rows). Rectangle cuts on a fine grid (``dsa.generate.rectangle_cut``,
``cells_per_buffer=1024``): 2,000 buffers planned at the bound in about 2.5 s as 5 leaves of 19-1,061
buffers, where 15 s of dives on the whole found no plan there.

Between cuts, a block's buffers are merged where a tiling allows (:mod:`dsa.strategies._contract`:
chains and stacks that every plan within the height makes, and pinwheels): a leaf is then planned as
its merged buffers, fewer than its rows, and the plan expanded. Cuts and merges feed each other: a
layer leaves fewer buffers at each instant, where more merges are forced, and merged buffers make
fewer, larger pieces for the next cut. Rectangle cuts with pinwheels on a nearly continuous grid
(``cells_per_buffer=4096``): 1,361 buffers planned at the bound in 0.5 s, as two leaves of at most
209 merged buffers (the whole look found none in 20 s).

A block with no layer may still hold *rectangles*: sets of buffers whose bytes alive are the same
over a window of time inside the block and zero outside it, such as the pieces of a pinwheel block
whose pieces were cut further (the pinwheel merge needs five single buffers). Where a tiling has such
a set in a band of its window, the set is planned apart as a block of its own and stands in the rest
as one buffer, whose offset the set's leaves are then counted from (:func:`find_rectangle`; the
windows tried end where the most bytes end or start). Once a pinwheel's five pieces each stand as one
buffer, they merge. A fine cut of 5,000 buffers with pinwheels (``cells_per_buffer=1024``): a leaf
of 1,012 merged buffers that the look did not plan became leaves of at most 289, and the whole was
planned at the bound in 2.9 s (1.2 x the bound before, at ``time_limit=20``).

A layer holding a given buffer is found by integer programming (HiGHS, through
:func:`scipy.optimize.milp`): a 0/1 variable per buffer, one equation per instant inside the block
(the bytes of chosen buffers ending there equal those starting), the given buffer chosen, at most all
but one chosen, the number chosen minimised, so that the smallest layer holding it comes back (a
guillotine cut's band). The buffers given are first those alive at the block's first or last
instant, the smallest first (every layer holds one of the first; a thin band is a small layer, found
and proven the smallest at once), then random ones. Before it runs, buffers that every layer takes
together become one variable (:func:`_groups`): at an instant where few buffers end or start, the
sets of them that balance are often unions of a few disjoint *atoms* (a buffer that ends and the two
that start in its bytes), and a layer takes an atom whole; merged, the instant's equation holds for
any choice and drops out, and merged buffers make fewer, larger terms at the next instants, whose
atoms are found in turn (where the balanced sets overlap, buffers that each of them holds both or
neither of still merge). Where sizes coincide (coarse grids) the sets overlap and little merges; on
fine grids the program shrinks twenty-fold or more (a block of 6,641 merged buffers and 1,698
equations: 55 variables and 12 equations; its smallest layer in 0.25 s, where the whole program took
14 s). The solver's
answer is checked again in integers. Before the program, a depth-first search with constraint
propagation (:mod:`dsa._kernels.layer_search`) looks for the same smallest layer: where it exhausts
its tree, its answer is proven and the program does not run (on tall cuts, 256 cells per buffer, in
milliseconds to a second where the program took seconds). A set of buffers with a
constant load need not have a tiling of its own band (a coincidence of sizes): then a leaf's look
fails and :func:`plan` returns None; nothing it returns is trusted before the independent validator
accepts it. On coarse grids (16 cells per buffer) such coincidences abound and the program on a large
block stops at its time limit, with a layer it has not proven the smallest (most often a coincidence)
or with none: such a block is left whole, and its look is short (``UNSETTLED_LEAF``). Where it is
too large to stay whole, a rectangle is looked for instead (``LARGE_RECTANGLE``): on balanced cuts
(pieces of similar shape) the first block's program stops so, and rectangles, then layers inside
them, take it apart (balanced-256-2500-s63: leaves of at most 222 merged buffers, a plan at 1.04 x
the bound, where the search of the whole stops near 1.18).

The structure used is that of guillotine cuts (P. C. Gilmore and R. E. Gomory, "Multistage cutting
stock problems of two and more dimensions", Operations Research 13(1), 1965): a cut along the time
axis is an instant nothing crosses, one along the address axis a layer; a rectangle is a node of a
cut's tree below a non-guillotine block.

Complexity: an integer program per split (its cost is the solver's: 0.02-2 s on blocks of 300-5,000
buffers), after the merge of its variables (per round, O(2 ** ATOM_ITEMS) per instant with at most
``ATOM_ITEMS`` terms, the rounds until nothing merges), O(n log n) per block for the cuts, then the
leaves' looks. A rectangle's search checks
``(RECTANGLE_WINDOWS + 1) ** 2`` windows in O(n log n) each, then runs up to ``RECTANGLE_SEEDS``
programs in each of ``2 * RECTANGLE_WINDOWS`` windows, for at most ``RECTANGLE_S`` seconds.
"""
from __future__ import annotations

import time

from typing import NamedTuple

import numpy as np

__all__ = ["plan", "tiles", "available", "find_layer", "find_rectangle", "split", "Leaf"]

# a split's layer (find_layer) gets at most this many seconds (and never past the deadline) ...
LAYER_S = 1.5
# ... of which the integer program gets at most this many (the search before it: SEARCH_SHARE)
PROGRAM_S = 0.5
# ... and a block this many seeds (buffers the layer must hold, drawn at random) before it is a leaf
SEEDS = 2
# where a layer's search and program stop at their limits (neither proved a layer the smallest nor
# ruled one out; not a search that the split's deadline cut shorter), the block stays whole: a leaf,
# with no more seeds and no rectangle tried (but see LARGE_RECTANGLE). On coarse
# cuts many sets keep a constant load by coincidence and such programs are the rule: the cuts went on
# until their share of the time ran out, for no plan (2.5-3 s of best's 20 s on 11 coarse cuts of
# 1,500-5,000 buffers, 3.5-7 s at 60 s; now 0.6-2.2 s). On the cuts that the layers plan at the bound
# the programs settle (0.01-0.5 s), or stop late on a block that the look then plans at once. Such a
# block stays a leaf only up to LEAF_MAX_ROWS, and where its look does not plan it the attempt ends,
# with partial plans too: no partial plan is made around it (random714, 12,863 buffers, best at 20 s:
# kept, a block of 3,100 merged buffers planned by best and searched apart for 4.9 s gave 1.2118 x
# LOAD at 8.8 s; not kept, the search of the whole was at 1.1688 at 6.0 s; both 1.1658 at 20 s. On 11
# cuts of 350-950 buffers, partial plans around such leaves, once their looks were short, were at
# 1.07-1.14 x LOAD; before, those looks ran out the attempt's time and nothing came back, and partial
# plans on coarse cuts have not paid: see _fallback)
UNSETTLED_LEAF = True
# ... and such a leaf's look gets at most this share of the time left to the deadline: where the dives
# plan one they do so at once in the runs seen (random604, random611: 778 and 925 merged buffers in
# 0.01 s; random604's missed in its 0.06 s in one trace of three); on three tall cuts of 1,200-2,500
# buffers they took 4.5-5.4 s for none
UNSETTLED_LOOK_SHARE = 0.05
# before a layer's program, buffers that every layer takes together are merged into one variable
# (_groups), at instants where at most ATOM_ITEMS groups take or free bytes (each such instant
# enumerates the 2 ** ATOM_ITEMS sets of them). The first block of a fine cut of 20,000 buffers
# (rectangle_cut(20000, seed=37, pinwheel=0.2, cells_per_buffer=1024); 8,934 merged buffers, 1,963
# equations): 1,262 / 799 / 631 variables left with 12 / 14 / 16, its program 1.2 / 0.33 / 0.36 s
# (without the merge, none found in 10 s); past 16 the instants left are those where sizes coincide
ATOMS = True
ATOM_ITEMS = 16
# ... then, where its kernel is compiled, a depth-first search with constraint propagation
# (dsa._kernels.layer_search) looks for the smallest layer, for SEARCH_SHARE of find_layer's time
# (counted in work units, about SEARCH_WORK_PER_S of them a second; 1.2-1.5e9 were measured); where it
# exhausts its tree its answer is proven and no program runs, else the program runs as before. On the
# first blocks of tall cuts (256 cells per buffer) where the program stopped at 0.5 s: tall-256-900-s132
# (204 groups, 40 equations) proven in 0.04-1.1 s over 16 seeds (the program: 4.9 s for one),
# tall-mixed-128-800-s134 in 0.01 s (2.9 s); fine-20000-s37's in milliseconds (0.36 s). The program
# proves some the search does not: short-wide-4000-s2's (3,533 groups; 0.72 s, the search none in
# 2 s). With 1 s of search (LAYER_S 0.5 -> 1.5), best at 20 s: tall-256-900-s132 1.1223 -> 1.0556-1.0584,
# tall-long-256-800-s55 1.1094 -> 1.0038 (with a quarter of a second for the search, neither moved by more than 0.3 % of LOAD)
SEARCH = True
SEARCH_SHARE = 2 / 3
SEARCH_WORK_PER_S = 1_500_000_000
# before those seeds, up to EDGE_SEEDS buffers at the block's edges (alive at its first or its last
# instant), the smallest first, each with a search of EDGE_S seconds, EDGE_TOTAL_S in all
# (_edge_layer): every layer holds some buffer alive at the block's first instant (its load is the
# same throughout and not 0), so no layer is out of their reach, and a thin band (small buffers) is
# a small layer that the search finds, and most often proves the smallest, in milliseconds; a random
# seed lies most often in a large layer (the rest of the block above a thin band), which it does not.
# The first block of guillotine-700-s0 (631 merged buffers): random seeds stopped unsettled after
# 1.5 s; two of its nine first buffers of size 64 gave a layer of 5 in 0.02 s. _layers.plan alone
# (4 s, from a greedy plan) on 82 cuts (the main, second and tall sets, 46 random draws): 42 -> 52
# planned at the bound, none lost (by-area-pinwheel-256-4000-s28, tall-long-256-800-s55,
# short-tall-3000-s15, long-flat-2000-s12, random600, random614 among them); 8 seeds of 0.3 s in all:
# 51; a layer that its search did not prove the smallest refused: 48
EDGE_SEEDS = 16
EDGE_S = 0.05
EDGE_TOTAL_S = 0.6
# blocks of at most this many buffers are leaves (the dives plan such blocks at the bound at once)
LEAF_ROWS = 2
# merge buffers before looking for layers (dsa.strategies._contract): where every plan within the
# height makes the merge, and pinwheels
CONTRACT = True
# HiGHS's presolve. It once found the first layer of a fine cut of 2,000 buffers in 0.02-0.2 s, where
# the whole program without it found none in 0.5 s; since the merge of groups (_groups) and the search
# before the program, it slows the programs left (reduced first blocks, 2 s each: short-wide-4000-s2's
# settled in 1.02 s with it, 0.56 s without; guillotine-3000-s0's 0.16 -> 0.08 s; three tall blocks
# unsettled either way; the layers' plans of fine-2000-s2, fine-5000-s3, fine-10000-s35,
# tall-256-900-s132 and tall-long-256-800-s55 cut into the same blocks with the same programs). With
# it, HiGHS printed "HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();" to
# stdout (from its C++ code, not its log) 12 times in best at 20 s on long-tall-2000-s0; without it,
# never in the runs since
PRESOLVE = False
# no look is tried where a leaf has more than this many buffers: restarted dives at the bound plan
# fine cuts (cells_per_buffer=1024) of 800-1,200 buffers in 0.1-2.3 s, 1,500 on one seed of two, 2,000
# on none (8 s each); a leaf of 4,338 buffers of a fine cut of 5,000 found none in 10 s
LEAF_MAX_ROWS = 1200
# with partial plans, a leaf that its look does not plan within its height gets a plan from best in
# this many seconds (at most what is left to the deadline; with none left, the attempt ends)
FALLBACK_S = 0.25
# ... and then, where the leaves so planned above their bands hold at most REPAIR_MAX_SHARE of the
# buffers cut (merged: a failed leaf of 256 merged buffers held 945 of a cut's 1,500), each gets
# best's improvement phase on its own buffers (_repair), for REPAIR_SHARE of the call's time left
# in all: searches of a problem several times smaller than the whole lower it further. best at 20 s
# (the results pages' runs at 2b04b48): pinwheel-long-1500-s26 1.1387 -> 1.0613 x LOAD (its leaf's
# excess 2,752 -> 1,152-1,408 bytes in single runs; the search of the whole had not lowered the
# partial plan in 14 s), by-area-pinwheel-256-4000-s28 1.1858 -> 1.1551; the second set 1.0358 ->
# 1.0279, the random set 1.0219 -> 1.0211, the main set level (1.0303 -> 1.0318, its coarse cuts'
# spread). Where the failed leaves are most of the cut (coarse cuts: 631 of 700 buffers), their
# searches did worse than the search of the whole (guillotine-700-s0's leaf 1,536 -> 512 bytes above
# its band in 5 s, 1.075 x LOAD, where the whole reaches 1.057-1.066), so none runs
REPAIR_SHARE = 0.3
REPAIR_MAX_SHARE = 0.5
# a leaf's search needs at least this long; leaves of at most REPAIR_EXACT_ROWS merged buffers are
# searched by exact instead, which stops once it proves its plan optimal (best at 30 s on a cut of
# 120 buffers whose failed leaf of 11 has no tiling of its band: improve_plan spent 9 s there, exact
# proves it at once)
REPAIR_MIN_S = 0.05
REPAIR_EXACT_ROWS = 100
# a block of more than RECTANGLE_MIN_ROWS buffers with no layer is searched for a rectangle
# (find_rectangle) for at most RECTANGLE_S seconds: windows that end at the RECTANGLE_WINDOWS instants
# where the most bytes end or start, up to RECTANGLE_SEEDS programs per window. (Smaller blocks: the
# leaves' looks plan fine cuts of a few hundred buffers at once. A fine cut of 5,000 buffers,
# rectangle_cut(5000, seed=3, cells_per_buffer=1024): a leaf of 1,012 merged buffers, a pinwheel
# block whose pieces were cut further, failed its look; 8 rectangles took 0.4 s and the whole was
# planned at the bound in 2.9 s)
RECTANGLE_MIN_ROWS = 300
RECTANGLE_S = 1.0
RECTANGLE_WINDOWS = 8
RECTANGLE_SEEDS = 2
# the cuts get this share of the time to the deadline (the leaves' looks the rest): where a block
# too large for the look stays whole, the attempt ends there. (That fine cut took 195 programs,
# 1.9-2.3 s: at 0.25 of best's layers' window at time_limit=20, its cuts stopped at a block of 822)
SPLIT_SHARE = 0.5
# a block whose layer's program stopped at its limit but that is too large to stay whole (more
# buffers than a leaf may have: LEAF_MAX_ROWS, or split's max_rows) gets a rectangle search all the
# same, where before the attempt ended there. On balanced cuts (pieces of similar shape) the first
# block's program stops unsettled, and rectangles then take it apart: balanced-256-2500-s63's first
# block (1,705 merged buffers) after 2.2 s of programs gave 27 rectangles in 1 s, then 18 layers in
# 0.3 s, leaves of at most 222 merged buffers, and a partial plan at 1.04 x LOAD (10 s of
# _layers.plan, 2 runs of 3; 1.12 or none with 5.9 s, the layers' share in best at 20 s before
# best.LAYERS_SHARE went 0.3 -> 0.45). best at 20 s, both changes, on 16 cuts of 1,500-5,000 buffers
# that it leaves above LOAD (the main, second, tall, balanced and random sets): seed 0 1.1055 ->
# 1.0955 x LOAD, seed 1 1.1049 -> 1.0998 (balanced-256-2500-s63 1.1775 -> 1.0375 and 1.1750 ->
# 1.0987; pinwheel-long-1500-s26 1.0742 -> 1.0484 on seed 0; the others within 0.5 % of LOAD either
# way); with this alone (the share at 0.3), seed 0: 1.1049, balanced-256-2500-s63 level. Cuts of at
# most 1,200 buffers are not touched. Where no rectangle is found the attempt ends as before
# (balanced-256-4000-s64: 8 rectangles of 2-45 buffers, then none in a rest of 2,543). On 16 draws no
# run had seen (benchmarks/peers_generated.random_settings, seeds 1400-1415 at 1,200-5,000 buffers),
# seed 0: 1.0389 -> 1.0288 (random1400 1.1402 -> LOAD, random1414 1.1557 -> 1.0738; higher:
# random1402 1.0294 -> 1.0588, random1403 1.0423 -> 1.0704, random1408 1.0387 -> 1.0423, coarse cuts
# with no unsettled program and no rectangle: random1402 gave 1.0294 again with each change alone and
# 1.0588 on seed 1 both ways, random1403 1.0563 on seed 1 both ways and 1.0704 with the share alone)
LARGE_RECTANGLE = True


def available() -> bool:
    """Whether the integer programs can run (SciPy with :func:`scipy.optimize.milp`, 1.9 or later)."""
    try:
        import scipy.optimize
    except ImportError:
        return False
    return hasattr(scipy.optimize, "milp")


def _spans(starts, ends):
    """Positions (into ``starts``) of each span of time that no buffer crosses, in time order (the
    busy periods of the block, :func:`dsa.sweep.period_labels`)."""
    from dsa.sweep import period_labels, rows_by_label

    return rows_by_label(period_labels(starts, ends))


def _net(starts, ends, sizes, chosen):
    """``(times, net)``: the block's distinct instants, and at each the bytes the chosen buffers
    take there less those they free (in integers)."""
    times = np.unique(np.concatenate([starts, ends]))
    net = np.zeros(len(times), dtype=np.int64)
    np.add.at(net, np.searchsorted(times, starts[chosen]), sizes[chosen])
    np.add.at(net, np.searchsorted(times, ends[chosen]), -sizes[chosen])
    return times, net


def _balanced(starts, ends, sizes, chosen) -> bool:
    """Whether the chosen buffers free as many bytes as they take at every instant inside the
    block (in integers), and are neither none nor all."""
    k = int(np.count_nonzero(chosen))
    if k == 0 or k == len(sizes):
        return False
    times, net = _net(starts, ends, sizes, chosen)
    inside = (times > starts.min()) & (times < ends.max())
    return not np.any(net[inside])


def find_layer(starts, ends, sizes, seed_row: int, time_limit: float, report=None):
    """The smallest layer of the block holding ``seed_row``, as a boolean mask, or None.

    The block is the buffers given (all of them alive within ``[starts.min(), ends.max())``); a layer
    is a proper, non-empty subset whose chosen buffers ending at each instant inside the block
    free as many bytes as those starting there take (so its bytes alive are the same throughout).

    Parameters
    ----------
    starts, ends, sizes : arrays of int
    seed_row : int
        A position into the arrays: the layer holds that buffer.
    time_limit : float
        Seconds in all: ``SEARCH_SHARE`` of them for the search (where its kernel is compiled),
        then what is left, at most ``PROGRAM_S``, for the integer program where the search proved
        nothing.
    report : dict, optional
        Gets ``settled``: False where the search and the program stopped at their limits (with a
        layer that neither proved the smallest, or with none found and none ruled out), True
        otherwise.

    Returns
    -------
    array of bool or None
        None where neither found one in time, or where one proved there is none.
    """
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csr_matrix

    began = time.perf_counter()
    n = len(sizes)
    rows, cols, vals, instants = _equations(starts, ends, sizes)
    if report is not None:
        report["settled"] = True
    if instants == 0:                     # every buffer spans the block: each one alone is a layer
        chosen = np.arange(n) == seed_row
        return chosen if n > 1 else None
    if ATOMS:
        # (buffers that every layer takes together become one variable, and the instants that
        # those groups balance drop out: see _groups)
        group, balance = _groups(rows, cols, vals, instants, n)
    else:
        group, balance = np.arange(n), csr_matrix((vals, (rows, cols)), shape=(instants, n))
    m = int(group.max()) + 1
    if m == 1:
        return None                       # (every layer holds every buffer: there is none)
    counts = np.bincount(group, minlength=m)       # (a group's weight: the buffers it holds)
    weight = counts.astype(np.float64)
    if balance.shape[0] == 0:
        # (no equation is left: every union of groups balances, the seed's group alone the smallest)
        chosen = group == group[seed_row]
        return chosen if _balanced(starts, ends, sizes, chosen) else None
    if SEARCH and _search_ready():
        # (the search first: where it exhausts its tree the answer is proven, often in milliseconds
        # where the program takes seconds; where it does not, the program runs as before)
        found, chosen = _search(balance, counts, int(group[seed_row]), time_limit * SEARCH_SHARE)
        if found is not None:
            if not found:
                return None               # (proven: no layer holds the seed)
            chosen = chosen[group]
            if chosen[seed_row] and _balanced(starts, ends, sizes, chosen):
                return chosen
    lower = np.zeros(m)
    lower[group[seed_row]] = 1.0
    constraints = [LinearConstraint(weight[None, :], 1.0, n - 1.0),
                   LinearConstraint(balance.astype(np.float64), 0.0, 0.0)]
    left = time_limit - (time.perf_counter() - began)
    options = {"time_limit": max(0.01, min(PROGRAM_S, left)), "presolve": PRESOLVE}
    result = milp(weight, constraints=constraints, integrality=np.ones(m),
                  bounds=Bounds(lower, np.ones(m)), options=options)
    if report is not None:
        report["settled"] = result.status in (0, 2)   # (optimal, or proven infeasible; 1: a limit)
    if result.x is None:
        return None
    chosen = (np.asarray(result.x) > 0.5)[group]
    return chosen if chosen[seed_row] and _balanced(starts, ends, sizes, chosen) else None


def _search_ready() -> bool:
    """Whether the layer search's kernel runs without compiling (``dsa warmup`` compiles it)."""
    from dsa._kernels import compiled
    from dsa._kernels import layer_search

    return compiled(layer_search.smallest_layer)


def warm() -> None:
    """Compile the layer search's kernel (or load it from numba's cache): ``dsa warmup`` calls this,
    as :func:`find_layer` runs the search only where it runs without compiling."""
    from scipy.sparse import csr_matrix

    _search(csr_matrix(np.array([[1, -1]], dtype=np.int64)), np.ones(2, dtype=np.int64), 0, 1e-6)


def _search(balance, weight, seed_group: int, seconds: float):
    """``(found, chosen)`` from :func:`dsa._kernels.layer_search.smallest_layer` on the equations
    ``balance`` (CSR, one column per group), for about ``seconds``: ``found`` None where the search
    stopped at its work limit (nothing proven), else whether a layer holds ``seed_group``, and
    ``chosen`` (a bool per group) the lightest one."""
    from dsa._kernels.layer_search import smallest_layer

    by_column = balance.tocsc()
    chosen = np.zeros(balance.shape[1], dtype=bool)
    work = max(1, int(seconds * SEARCH_WORK_PER_S))
    i8 = np.int64
    found, proven, _ = smallest_layer(
        balance.indptr.astype(i8), balance.indices.astype(i8), balance.data.astype(i8),
        by_column.indptr.astype(i8), by_column.indices.astype(i8), by_column.data.astype(i8),
        np.asarray(weight, dtype=i8), seed_group, work, chosen)
    return (bool(found) if proven else None), chosen


def _equations(starts, ends, sizes):
    """``(rows, cols, vals, instants)``: the equations of :func:`find_layer` in coordinates. One
    per instant inside the block (``rows``, numbered by time, ``instants`` of them), over the buffers
    (``cols``) that end there (their sizes in ``vals``) or start there (negated); sizes in units of
    their gcd, as the solver's tolerances act on smaller coefficients."""
    t0, t1 = starts.min(), ends.max()
    ending, starting = np.flatnonzero(ends < t1), np.flatnonzero(starts > t0)
    times = np.unique(np.concatenate([ends[ending], starts[starting]]))
    unit = int(np.gcd.reduce(sizes)) or 1
    rows = np.concatenate([np.searchsorted(times, ends[ending]), np.searchsorted(times, starts[starting])])
    cols = np.concatenate([ending, starting])
    vals = np.concatenate([sizes[ending] // unit, -(sizes[starting] // unit)]).astype(np.int64)
    return rows, cols, vals, len(times)


def _atoms(net):
    """``(classes, exact)`` for one instant: bit masks over ``net`` (the bytes that each group of
    buffers takes there, none zero), or None.

    Two groups are in one class where every set of the groups that sums to zero holds both or
    neither: a layer takes each class whole or not at all. ``exact`` where every union of classes
    sums to zero (the classes are then the atoms of the instant, and its equation holds for any
    choice of them). None where ``net`` does not sum to zero (not an instant of a tiling).
    """
    k = len(net)
    if int(np.sum(net)) != 0:
        return None
    if k <= 3:          # (no group is zero, so no proper subset of three or fewer sums to zero)
        return [(1 << k) - 1], True
    sums = np.zeros(1 << k, dtype=np.int64)
    for j in range(k):  # (the sum of every subset, by bit mask)
        sums[1 << j:2 << j] = sums[:1 << j] + int(net[j])
    zero = np.flatnonzero(sums == 0)          # (the empty set among them)
    member = (zero[None, :] >> np.arange(k)[:, None]) & 1
    classes = {}
    for j in range(k):
        key = member[j].tobytes()
        classes[key] = classes.get(key, 0) | (1 << j)
    exact = len(zero) == 1 << len(classes)
    return list(classes.values()), exact


def _groups(rows, cols, vals, instants: int, n: int):
    """``(group, balance)``: buffers that every layer takes together, and the equations left.

    The equations of :func:`find_layer` are one per instant (``rows``), over the buffers
    (``cols``), with coefficients ``vals`` (sizes, those that start negated; each group's term is
    the sum of its buffers'). At an instant where at most ``ATOM_ITEMS`` groups have a term, groups
    that every balanced set of them holds both or neither of (a class, :func:`_atoms`) are taken
    whole by every layer, so they merge; where every union of classes balances (atoms), the
    instant's equation then holds for any choice and drops out. Repeated until no group merges
    (merged groups make fewer terms at each instant, whose classes are found in turn). Every layer is
    still a union of groups, so no layer is lost. On the first block of a fine cut of 10,000 buffers
    (6,641 merged) the program shrank from 6,641 variables and 1,698 equations to 55 and 12.

    Returns ``group`` (int array, a group index from 0 per buffer) and ``balance`` (a CSR matrix,
    one row per equation left, one column per group)."""
    from scipy.sparse import csr_matrix

    group = np.arange(n)
    live = np.ones(instants, dtype=bool)     # (instants whose equation may still constrain)
    while True:
        balance = csr_matrix((vals, (rows, group[cols])), shape=(instants, n))
        balance.sum_duplicates()
        balance.eliminate_zeros()
        parent = np.arange(n)
        merged = False
        counts = np.diff(balance.indptr)
        for r in np.flatnonzero(live & (counts > 1) & (counts <= ATOM_ITEMS)):
            lo, hi = balance.indptr[r], balance.indptr[r + 1]
            members = balance.indices[lo:hi]
            found = _atoms(balance.data[lo:hi])
            if found is None:
                continue
            atoms, exact = found
            if exact:
                live[r] = False
            for atom in atoms:
                picked = [_root(parent, int(members[j])) for j in range(hi - lo) if atom >> j & 1]
                for g in picked[1:]:
                    if g != picked[0]:
                        parent[g] = picked[0]
                        merged = True
        if not merged:
            break
        while True:      # (each group's root)
            up = parent[parent]
            if np.array_equal(up, parent):
                break
            parent = up
        group = parent[group]
    # (the last matrix is over the groups as they stand: keep the groups' columns, numbered from 0)
    labels, group = np.unique(group, return_inverse=True)
    balance = balance[:, labels]
    return group, balance[np.diff(balance.indptr) > 0]


def _root(parent, g: int) -> int:
    """The root of ``g`` in the union-find forest ``parent``."""
    while parent[g] != g:
        g = int(parent[g])
    return g


def _rectangle(starts, ends, sizes, chosen):
    """``(start, end, height)`` where the chosen buffers (at least two, not all) take ``height``
    bytes at ``start`` and free them at ``end``, and free as many bytes as they take at every other
    instant (in integers: their bytes alive are ``height`` over ``[start, end)`` and none outside);
    None otherwise."""
    k = int(np.count_nonzero(chosen))
    if k < 2 or k == len(sizes):
        return None
    times, net = _net(starts, ends, sizes, chosen)
    moves = np.flatnonzero(net)
    if len(moves) != 2 or net[moves[0]] <= 0:
        return None
    return int(times[moves[0]]), int(times[moves[1]]), int(net[moves[0]])


def _instants(times, sizes, skip):
    """The distinct ``times`` but ``skip``, the most bytes (of ``sizes``) at them first (ties: the
    earlier first), at most ``RECTANGLE_WINDOWS``."""
    at, where = np.unique(times, return_inverse=True)
    weight = np.bincount(where, weights=sizes.astype(np.float64))
    order = np.lexsort((at, -weight))
    return [int(t) for t in at[order] if t != skip][:RECTANGLE_WINDOWS]


def find_rectangle(starts, ends, sizes, rng, time_limit: float):
    """A rectangle of the block, or None.

    A rectangle is a set of at least two buffers (not all of them) whose bytes alive are the same
    at every instant of a window ``[start, end)`` inside the block and zero outside it: the chosen
    buffers take ``h`` bytes at ``start``, free them at ``end``, and free as many as they take at
    every instant between. Where a tiling of the block has them in a band ``[y, y + h)`` of that
    window, they can be planned apart, within ``h``, and stand in the rest of the block as one
    buffer ``[start, end) x h``. Layers (:func:`find_layer`) are the rectangles whose window is the
    block's span; the pieces of a pinwheel block (``dsa.generate.rectangle_cut``), which has no
    layer, are rectangles whose windows end where many bytes end or start.

    So the windows tried end at the ``RECTANGLE_WINDOWS`` instants where the most bytes end, and
    start at those where the most start (or at the block's ends):

    - windows between two such instants: the buffers alive within the window, where they are a
      rectangle (no program);
    - windows from the block's start to such an end (from such a start to the block's end): the
      smallest layer (:func:`find_layer`) of the buffers alive within the window holding a buffer
      that ends (starts) at that instant (up to ``RECTANGLE_SEEDS`` of them, drawn with ``rng``),
      the windows holding the fewest buffers first (their programs are the quickest), while
      ``time_limit`` allows.

    Parameters
    ----------
    starts, ends, sizes : arrays of int
    rng : numpy.random.Generator
    time_limit : float
        Seconds for the integer programs, in all.

    Returns
    -------
    (array of bool, int, int, int) or None
        The chosen buffers, the window's start and end, and its height ``h``, checked in integers.
    """
    deadline = time.perf_counter() + time_limit
    t0, t1 = int(starts.min()), int(ends.max())
    closing, opening = _instants(ends, sizes, t1), _instants(starts, sizes, t0)
    for a in [t0] + opening:
        for b in closing + [t1]:
            if a < b and (a, b) != (t0, t1):
                inside = (starts >= a) & (ends <= b)
                window = _rectangle(starts, ends, sizes, inside)
                if window is not None:
                    return (inside, *window)
    # (the windows holding the fewest buffers first: their programs are the quickest)
    tried = sorted([(b, True) for b in closing] + [(a, False) for a in opening],
                   key=lambda c: int(np.count_nonzero(ends <= c[0] if c[1] else starts >= c[0])))
    for at, prefix in tried:
        inside = np.flatnonzero(ends <= at if prefix else starts >= at)
        touching = np.flatnonzero((ends[inside] if prefix else starts[inside]) == at)
        for seed_row in rng.permutation(touching)[:RECTANGLE_SEEDS]:
            left = deadline - time.perf_counter()
            if left <= 0:
                return None
            layer = find_layer(starts[inside], ends[inside], sizes[inside], int(seed_row), min(LAYER_S, left))
            if layer is None or np.count_nonzero(layer) < 2:
                continue
            chosen = np.zeros(len(sizes), dtype=bool)
            chosen[inside[layer]] = True
            window = _rectangle(starts, ends, sizes, chosen)
            if window is not None:
                return (chosen, *window)
    return None


class Leaf(NamedTuple):
    """A block of :func:`split` to be planned within ``[base, base + height)``: ``rows`` of the
    problem, merged into the buffers ``starts``, ``ends``, ``sizes`` (:mod:`dsa.strategies._contract`;
    one per row where nothing merged), row ``rows[i]`` at ``offsets[node[i]] + rel[i]`` for a plan
    ``offsets`` of those buffers.

    Where a rectangle was cut out of a block (:func:`find_rectangle`), it stands in the rest as one
    buffer, named by an id past the problem's rows (``len(problem) + k`` for the ``k``-th rectangle)
    among ``rows``; the leaves cut from the rectangle have that id as ``anchor``, and their ``base``
    is counted from the rectangle's offset (-1: from 0). ``settled`` is False for a block that stayed
    whole because a layer's program stopped at its time limit (``UNSETTLED_LEAF``)."""

    rows: np.ndarray
    base: int
    height: int
    starts: np.ndarray
    ends: np.ndarray
    sizes: np.ndarray
    node: np.ndarray
    rel: np.ndarray
    anchor: int = -1
    settled: bool = True

    def problem(self):
        """The leaf's buffers (merged, rectangles as one buffer each) as a :class:`dsa.Problem` with no
        capacity, whose plans within ``height`` :meth:`expand` turns into offsets of ``rows``."""
        from dsa.problem import Problem

        return Problem(self.starts, self.ends, self.sizes)

    def expand(self, offsets):
        """Offsets of ``rows`` from a plan of the leaf's buffers (within ``[0, height)``), counted
        from the anchor's offset."""
        return self.base + np.asarray(offsets, dtype=np.int64)[self.node] + self.rel


class _Buffers:
    """The buffers of the blocks being cut: the problem's rows, then merged ones (each a list of rows
    with their offsets inside it) and rectangles (each one id past the problem's rows)."""

    def __init__(self, problem, rows, first_virtual=None):
        rows = np.asarray(rows, dtype=np.int64)
        n = len(rows)
        self.starts, self.ends, self.sizes = (np.zeros(2 * n + 1, dtype=np.int64) for _ in range(3))
        self.starts[:n], self.ends[:n] = problem.starts[rows], problem.ends[rows]
        self.sizes[:n] = problem.sizes[rows]
        self.count = n
        self.rows = [np.array([r]) for r in rows]
        self.rel = [np.zeros(1, dtype=np.int64) for _ in rows]
        self.first_virtual = len(problem) if first_virtual is None else int(first_virtual)
        self.rectangles = 0
        self.held = {}                    # (a rectangle's id: the buffers it stands for)

    def arrays(self, block):
        return self.starts[block], self.ends[block], self.sizes[block]

    def add(self, start, end, size, rows, rel) -> int:
        """A new buffer's id."""
        k = self.count
        if k == len(self.sizes):
            self.starts, self.ends, self.sizes = (np.concatenate([a, np.zeros_like(a)])
                                                  for a in (self.starts, self.ends, self.sizes))
        self.starts[k], self.ends[k], self.sizes[k] = start, end, size
        self.rows.append(rows)
        self.rel.append(rel)
        self.count += 1
        return k

    def rectangle(self, start, end, size, held):
        """A buffer standing for a rectangle cut out of a block (the buffers ``held``): ``(its id,
        its row id)``."""
        virtual = self.first_virtual + self.rectangles
        self.rectangles += 1
        self.held[virtual] = held
        return self.add(start, end, size, np.array([virtual]), np.zeros(1, dtype=np.int64)), virtual

    def contract(self, block, deadline, stats):
        """``block`` with its merges made (:func:`dsa.strategies._contract.contract`): new ids."""
        from dsa.strategies._contract import contract

        c = contract(*self.arrays(block), deadline=deadline)
        if len(c) == len(block):
            return block
        if stats is not None:
            for kind, count in c.merges.items():
                stats[f"merged_{kind}"] = stats.get(f"merged_{kind}", 0) + count
        order = np.argsort(c.node, kind="stable")
        bounds = np.searchsorted(c.node[order], np.arange(len(c) + 1))
        out = []
        for j in range(len(c)):
            where = order[bounds[j]:bounds[j + 1]]
            if len(where) == 1 and c.rel[where[0]] == 0:
                out.append(int(block[where[0]]))      # (not merged: the same buffer)
                continue
            out.append(self.add(c.starts[j], c.ends[j], c.sizes[j],
                                np.concatenate([self.rows[block[i]] for i in where]),
                                np.concatenate([self.rel[block[i]] + c.rel[i] for i in where])))
        return np.asarray(out, dtype=np.int64)

    def real_rows(self, block):
        """The problem's rows (ids from ``rows`` of :func:`split`, not positions) in the buffers
        ``block``, rectangles expanded into the rows they hold."""
        out = []
        for k in block:
            for r in self.rows[k]:
                if r < self.first_virtual:
                    out.append(int(r))
                else:
                    out.extend(self.real_rows(self.held[int(r)]))
        return np.asarray(out, dtype=np.int64)

    def leaf(self, block, base, high, anchor=-1, settled=True) -> Leaf:
        starts, ends, sizes = self.arrays(block)
        counts = [len(self.rows[k]) for k in block]
        return Leaf(np.concatenate([self.rows[k] for k in block]), int(base), int(high), starts, ends, sizes,
                    np.repeat(np.arange(len(block)), counts), np.concatenate([self.rel[k] for k in block]),
                    int(anchor), bool(settled))


def _edge_layer(program, starts, ends, sizes, rng):
    """A layer of the block (a boolean mask) holding one of the buffers alive at its first or last
    instant, or None: :func:`find_layer` seeded with each of them, the smallest first (ties in a
    random order drawn from ``rng``), ``EDGE_S`` seconds each through ``program``, up to
    ``EDGE_SEEDS`` of them and ``EDGE_TOTAL_S`` seconds in all. A layer found is taken whether or not
    the search proved it the smallest (see ``EDGE_SEEDS``)."""
    edge = np.flatnonzero((starts == starts.min()) | (ends == ends.max()))
    edge = edge[np.lexsort((rng.random(len(edge)), sizes[edge]))][:EDGE_SEEDS]
    began = time.perf_counter()
    for seed_row in edge:
        if time.perf_counter() - began >= EDGE_TOTAL_S:
            break
        layer = program(find_layer, EDGE_S, starts, ends, sizes, int(seed_row), report={})
        if layer is not None:
            return layer
    return None


def split(problem, rows, height: int, deadline: float, rng, stats=None, max_rows=None, first_virtual=None,
          trace=None):
    """Cut a block into :class:`Leaf` s: each to be planned within ``[leaf.base, leaf.base +
    leaf.height)``, so that plans of all the leaves make a plan of the block within ``height``.

    The block is ``rows`` of ``problem``, whose bytes alive are ``height`` at every instant of its
    span. Spans that nothing crosses are cut apart; buffers alive over the whole block are stacked as
    leaves of their own; with ``CONTRACT``, groups of buffers are merged where every plan within the
    height makes them, or a pinwheel suggests it (:func:`dsa.strategies._contract.contract`); then a
    layer (:func:`find_layer`: first seeded at the block's edges, :func:`_edge_layer`, then up to
    ``SEEDS`` random seeds, while ``deadline`` allows) goes below the rest,
    and both are cut again, the largest block first. In a block of more than ``RECTANGLE_MIN_ROWS``
    buffers with no layer, a rectangle (:func:`find_rectangle`) becomes a block of its own, planned
    from the offset of one buffer that stands for it in the rest (the leaves cut from it have that
    buffer's id as ``anchor``: ``first_virtual`` for the first rectangle, default ``len(problem)``,
    then the next ids); no layer is looked for in the rest. With ``UNSETTLED_LEAF``, a block whose
    layer's program stops at its time limit stays whole, with no more seeds and no rectangle tried
    (a leaf whose ``settled`` is False), save one too large to stay whole: with ``LARGE_RECTANGLE``,
    a rectangle is looked for in it all the same. With ``max_rows``, None comes back as soon as a
    block of more buffers than that stays whole (one left whole by a program stopped at its limit:
    more than ``LEAF_MAX_ROWS``, where that is fewer). ``stats`` (a dict) counts ``layers``,
    ``rectangles``, ``layer_programs`` (a rectangle's search counts as one), ``layer_unsettled``
    (programs stopped at their limit, which ended their block's search for a layer) and the merges
    by kind (``merged_chain``,
    ``merged_stack``, ``merged_pinwheel``) and sums ``layer_s``. ``trace`` (a callable, optional) is
    called at each layer or rectangle taken, in the order taken, as ``trace(kind, block, part,
    height, low)``: ``kind`` ``"layer"`` or ``"rectangle"``, the problem's rows in the block and in
    the part cut from it (rows that a rectangle stands for count as theirs; a diagnosis aid, see
    ``benchmarks/layer_truth.py``), the block's height and the part's.
    """
    import heapq

    buffers = _Buffers(problem, rows, first_virtual)
    leaves = []
    # a heap of blocks, the largest first: (-buffers, count, ids, base, height, merged, anchor, layered)
    stack = []
    count = 0

    def push(block, base, high, anchor, merged=False, layered=True):
        nonlocal count
        heapq.heappush(stack, (-len(block), count, block, base, high, merged, anchor, layered))
        count += 1

    def too_large(block, settled=True):
        # (whether the block may not stay whole: more than max_rows buffers; a block left whole by a
        # program stopped at its limit, at most LEAF_MAX_ROWS, see UNSETTLED_LEAF)
        limit = max_rows if settled or max_rows is None else min(max_rows, LEAF_MAX_ROWS)
        return limit is not None and len(block) > limit

    def leaf(block, base, high, anchor, settled=True):
        leaves.append(buffers.leaf(block, base, high, anchor, settled))
        return too_large(block, settled)

    def program(find, limit, *args, **options):
        # (one search, up to `limit` seconds, counted; None once the deadline has passed)
        left = deadline - time.perf_counter()
        if left <= 0:
            return None
        began = time.perf_counter()
        out = find(*args, min(limit, left), **options)
        if stats is not None:
            stats["layer_programs"] = stats.get("layer_programs", 0) + 1
            stats["layer_s"] = stats.get("layer_s", 0.0) + time.perf_counter() - began
        return out

    push(np.arange(len(rows)), 0, int(height), -1)
    while stack:
        _, _, block, base, high, merged, anchor, layered = heapq.heappop(stack)
        starts, ends, sizes = buffers.arrays(block)
        spans = _spans(starts, ends)
        if len(spans) > 1:
            for span in spans:
                push(block[span], base, high, anchor)
            continue
        if len(block) <= LEAF_ROWS:
            leaf(block, base, high, anchor)
            continue
        whole = (starts == starts.min()) & (ends == ends.max())
        if whole.any():
            for k in np.flatnonzero(whole):
                leaf(block[[k]], base, int(sizes[k]), anchor)
                base += int(sizes[k])
                high -= int(sizes[k])
            if not whole.all():
                push(block[~whole], base, high, anchor)
            continue
        if CONTRACT and not merged:
            fewer = buffers.contract(block, deadline, stats)
            push(fewer, base, high, anchor, merged=True, layered=layered)
            continue
        layer, settled = None, True
        if layered and EDGE_SEEDS:
            layer = _edge_layer(program, starts, ends, sizes, rng)
        for seed_row in rng.permutation(len(block))[:SEEDS if layered and layer is None else 0]:
            report = {}
            full = deadline - time.perf_counter() >= LAYER_S   # (not cut short by the split's deadline)
            layer = program(find_layer, LAYER_S, starts, ends, sizes, int(seed_row), report=report)
            if UNSETTLED_LEAF and full and not report.get("settled", True):
                # (a program stopped at its own limit: the block stays whole, see UNSETTLED_LEAF; one
                # that the deadline cut short says nothing of the block)
                layer, settled = None, False
                if stats is not None:
                    stats["layer_unsettled"] = stats.get("layer_unsettled", 0) + 1
                break
            if layer is not None:
                break
        if layer is not None:
            if stats is not None:
                stats["layers"] = stats.get("layers", 0) + 1
            # (the layer's bytes alive, the same at every instant: those alive at its first one)
            low = int(sizes[layer & (starts == starts.min())].sum())
            if trace is not None:
                trace("layer", buffers.real_rows(block), buffers.real_rows(block[layer]), int(high), low)
            push(block[layer], base, low, anchor)
            push(block[~layer], base + low, high - low, anchor)
            continue
        cut = None
        # (no rectangle in a block whose program stopped at its limit, save one too large to stay
        # whole: see LARGE_RECTANGLE)
        if len(block) > RECTANGLE_MIN_ROWS and (settled or (LARGE_RECTANGLE and too_large(block, False))):
            cut = program(find_rectangle, RECTANGLE_S, starts, ends, sizes, rng)
        if cut is None:
            if leaf(block, base, high, anchor, settled):
                return None
            continue
        if stats is not None:
            stats["rectangles"] = stats.get("rectangles", 0) + 1
        # the rectangle's buffers become a block of their own, planned from the offset of the one
        # buffer that stands for them in the rest
        chosen, start, end, low = cut
        if trace is not None:
            trace("rectangle", buffers.real_rows(block), buffers.real_rows(block[chosen]), int(high), int(low))
        k, virtual = buffers.rectangle(start, end, low, block[chosen])
        push(block[chosen], 0, low, virtual)
        # (no layer is looked for in the rest: one would be a layer of the block, the rectangle's
        # buffers in place of the one standing for them, and none was found there; merges of the rest
        # are unions of its buffers too)
        push(np.append(block[~chosen], k), base, high, anchor, layered=False)
    return leaves


def _place(problem, leaves, plans, excess):
    """The problem's rows in the leaves and their offsets, from the leaves' plans: ``(rows,
    offsets)``, or None where a leaf's anchor is in no leaf.

    Each leaf's band starts ``leaf.base`` above its anchor's offset (above 0 without one); a leaf
    whose plan reaches ``excess`` above its band gets room: where its band ends, a band of that height
    is opened across the whole plan (everything at or above that level moves up, save the leaf and
    what its rectangles hold). Opening a band keeps apart any two buffers that were apart, so the
    plan stays valid; inner leaves open theirs first, and a band opened inside a leaf's band makes
    it as much taller."""
    ids = np.concatenate([leaf.rows for leaf in leaves])
    real = ids[ids < len(problem)]
    owner = np.full(int(ids.max()) + 1, -1, dtype=np.int64)
    for i, leaf in enumerate(leaves):
        owner[leaf.rows] = i
    parent = [-1 if leaf.anchor < 0 else int(owner[leaf.anchor]) for leaf in leaves]
    if any(leaf.anchor >= 0 and p < 0 for leaf, p in zip(leaves, parent)):
        return None
    depth, order, seen = [0] * len(leaves), [], set()
    for i in range(len(leaves)):           # (parents before children)
        chain, j = [], i
        while j >= 0 and j not in seen:
            chain.append(j)
            seen.add(j)
            j = parent[j]
        order += reversed(chain)
    pos = np.zeros(len(owner), dtype=np.int64)
    base = np.zeros(len(leaves), dtype=np.int64)
    for i in order:
        leaf = leaves[i]
        p = parent[i]
        depth[i] = 0 if p < 0 else depth[p] + 1
        base[i] = leaf.base + (0 if p < 0 else pos[leaf.anchor])
        pos[leaf.rows] = leaf.expand(plans[i]) + (base[i] - leaf.base)
    failed = sorted((i for i in range(len(leaves)) if excess[i] > 0), key=lambda i: -depth[i])
    if failed:
        sizes = np.zeros(len(owner), dtype=np.int64)
        sizes[real] = problem.sizes[real]
        top = base + np.array([leaf.height for leaf in leaves], dtype=np.int64)
        below = [[] for _ in leaves]
        for i, p in enumerate(parent):
            if p >= 0:
                below[p].append(i)
        for f in failed:
            family, todo = [], [f]
            while todo:
                i = todo.pop()
                family.append(leaves[i].rows)
                todo += below[i]
            inside = np.zeros(len(owner), dtype=bool)
            inside[np.concatenate(family)] = True
            extra = int((pos[inside] + sizes[inside]).max()) - int(top[f])
            if extra <= 0:
                continue
            level = int(top[f])
            pos[~inside & (pos >= level)] += extra
            grown = (base < level) & (top >= level)
            top[grown] += extra
            moved = base >= level
            base[moved] += extra
            top[moved] += extra
    return real, pos[real]


def _fallback(leaf: Leaf, seconds: float, seed=None):
    """A plan of a leaf's buffers that its look did not plan within its height: ``best`` for
    ``seconds`` (too short for its own look at the bound), or None with no time for it. (A plan
    made all the same, by best's first greedy pass, gave more partial plans, which the search went
    on from: the main set's three coarse cuts of 350-700 buffers ended 1 % higher, in 3 runs of 3.)"""
    from dsa.strategies import best

    if seconds < 0.01:
        return None
    return best.solve(leaf.problem(), time_limit=seconds, seed=seed).offsets


def _excess(leaf: Leaf, offsets) -> int:
    """How far a plan of the leaf's buffers reaches above its height (0: within it)."""
    return max(0, int((offsets + leaf.sizes).max()) - leaf.height)


def _repair(leaves, plans, excess, until: float, seed, stats):
    """Lower the plans of the leaves planned above their bands (``excess`` above 0), the highest
    first, each for an equal share of the time left to ``until`` (what a leaf leaves goes to the
    next): by best's improvement phase (:func:`dsa.strategies.best.improve_plan`) on the leaf's own
    merged buffers, from its plan, towards its height; on at most ``REPAIR_EXACT_ROWS`` merged
    buffers, by ``exact``, which stops once it proves its plan optimal (a leaf whose buffers have
    a constant load by coincidence and no tiling of its band then takes no more time). A plan is
    kept only where it is lower. ``plans`` and ``excess`` are updated in place; ``stats`` gets
    ``layer_repaired`` (leaves whose excess fell) and ``layer_repair_s``."""
    from dsa.budget import Budget
    from dsa.strategies import best, exact

    began = time.perf_counter()
    failed = sorted((i for i, extra in enumerate(excess) if extra > 0), key=lambda i: -excess[i])
    repaired = 0
    for k, i in enumerate(failed):
        left = until - time.perf_counter()
        if left < REPAIR_MIN_S:
            break
        leaf = leaves[i]
        sub, seconds = leaf.problem(), left / (len(failed) - k)
        if len(sub) <= REPAIR_EXACT_ROWS:   # (a small leaf that its band cannot hold: proven at once)
            out = exact.solve(sub, time_limit=seconds, seed=seed).offsets
        else:
            out, _ = best.improve_plan(sub, plans[i], leaf.height, Budget(seconds),
                                       0 if seed is None else seed)
        extra = _excess(leaf, out)
        if extra < excess[i]:
            plans[i], excess[i] = out, extra
            repaired += 1
    stats["layer_repaired"] = repaired
    stats["layer_repair_s"] = time.perf_counter() - began


def _flat(problem, rows, cap: int) -> bool:
    """Whether the bytes alive over the span of ``rows`` are ``cap`` at every instant."""
    from dsa.sweep import step_function

    times, live = step_function(problem.starts[rows], problem.ends[rows], problem.sizes[rows])
    return len(live) > 1 and bool(np.all(live[:-1] == cap))


def _tiled_periods(problem, offsets, cap: int):
    """The busy periods that ``offsets`` plans above ``cap`` (their rows of positive size), where
    :func:`plan` applies: no fixed offsets, no alignment above 1, and ``cap`` bytes alive at every
    instant of each of them; None otherwise."""
    from dsa.solution import plan_peak
    from dsa.strategies import _skyline
    from dsa.sweep import Sweep

    if len(problem) == 0 or not _skyline.supported(problem) or np.any(problem.alignments > 1):
        return None
    periods = [rows for rows in Sweep(problem).period_rows() if plan_peak(problem, offsets, rows) > cap]
    periods = [rows[problem.sizes[rows] > 0] for rows in periods]
    if not periods or not all(_flat(problem, rows, cap) for rows in periods):
        return None
    return periods


def tiles(problem, offsets, cap: int) -> bool:
    """Whether :func:`plan` has periods to cut: every busy period that ``offsets`` plans above ``cap``
    has ``cap`` bytes alive at every instant (a plan within ``cap`` tiles it), on a problem without
    fixed offsets or alignments above 1. O(n log n); imports nothing."""
    return _tiled_periods(problem, np.asarray(offsets, dtype=np.int64), cap) is not None


def plan(problem, offsets, cap: int, deadline: float, seed=None, stats=None, partial: bool = False,
         repair_until=None):
    """A plan within ``cap`` made of layers planned apart, or None.

    Applies where :func:`dsa.strategies._skyline.bound_look` does (no fixed offsets), on problems
    without alignments above 1 whose every busy period that ``offsets`` plans above ``cap`` has
    ``cap`` bytes alive at every instant (a plan within ``cap`` tiles it), and where SciPy's
    ``milp`` is installed. Each such period is cut (:func:`split`, for ``SPLIT_SHARE`` of the time
    to ``deadline``); where no period has a cut or a merge, None comes back (the look at the whole
    does as well, or better), and so it does where a block of more than ``LEAF_MAX_ROWS`` buffers
    stays whole (with ``partial``, of more than that and ``REPAIR_MAX_SHARE`` of its period's rows,
    save a block left whole by a program stopped at its limit).
    The leaves (their merged buffers) are then planned at their height by
    :func:`dsa.strategies._skyline.bound_look`, the largest first, until ``deadline``; the first
    that fails ends the attempt (None). With ``partial``, each leaf's look gets a share of the time
    left (the square root of its share of the buffers left; a leaf of more than ``LEAF_MAX_ROWS``
    buffers gets none; a leaf left whole by a program stopped at its limit, at most
    ``UNSETTLED_LOOK_SHARE`` of it, with or without ``partial``, and where it is not planned so the
    attempt ends), and any other leaf not planned within its height is planned by ``best`` for
    ``FALLBACK_S`` seconds (none past ``deadline``: then the attempt ends), above its band. With
    ``repair_until`` too, where such leaves hold at most ``REPAIR_MAX_SHARE`` of the buffers cut,
    each is then searched alone (best's improvement phase on its buffers, :func:`_repair`) for
    ``REPAIR_SHARE`` of the time left to ``repair_until`` in all. A band as high as each reaches
    above its own is opened across the plan there (:func:`_place`). The result is then a plan above
    ``cap`` when lower than ``offsets``' peak (None otherwise). Leaves cut from a rectangle are
    placed from the offset that the plan of the leaf holding it gives it.

    Parameters
    ----------
    problem : Problem
    offsets : array of int
        A valid plan: periods within ``cap`` keep their offsets.
    cap : int
    deadline : float
        A ``time.perf_counter()`` value.
    seed : int, optional
    stats : dict, optional
        Gets ``layers`` and ``rectangles`` (splits made), ``layer_programs``, ``layer_s`` (the
        integer programs' seconds), ``layer_unsettled`` (programs stopped at their limit that left a
        block whole), ``merged_chain``, ``merged_stack`` and ``merged_pinwheel`` (merges made),
        ``layer_leaves`` and ``layer_rows`` (the largest leaf's buffers, once merged), and
        ``layer_failed`` (leaves planned above their bands); where their searches ran,
        ``layer_repaired`` (those they lowered) and ``layer_repair_s``.
    partial : bool, default False
        Return a lower plan above ``cap`` where some leaves are not planned within their bands.
    repair_until : float, optional
        A ``time.perf_counter()`` value, the caller's deadline: with ``partial``, the leaves planned
        above their bands are searched apart for a share of the time to it (see above); None: not.

    Returns
    -------
    array of int or None
        A plan whose periods reaching above ``cap`` in ``offsets`` are now within it (with
        ``partial``, or one of lower peak than ``offsets``), checked by :func:`dsa.validate`.
    """
    from dsa.budget import check_seed
    from dsa.solution import plan_peak
    from dsa.strategies import _skyline
    from dsa.validator import InvalidPlanError, validate

    out = np.asarray(offsets, dtype=np.int64).copy()
    periods = _tiled_periods(problem, out, cap)
    if periods is None or not available():
        return None                       # (SciPy is imported only where there is a tiling to cut)
    rng = np.random.default_rng(check_seed(seed))
    stats = {} if stats is None else stats
    now = time.perf_counter()
    cutting = now + SPLIT_SHARE * max(0.0, deadline - now)
    leaves = []
    first = len(problem)                  # (the rectangles of each period get ids of their own)
    for rows in periods:
        # (with partial plans, a block too large for the look stays a leaf, planned by best, where it
        # holds at most REPAIR_MAX_SHARE of the rows: its search then runs apart from the rest)
        largest = max(LEAF_MAX_ROWS, int(REPAIR_MAX_SHARE * len(rows))) if partial else LEAF_MAX_ROWS
        cut = split(problem, rows, cap, cutting, rng, stats, max_rows=largest, first_virtual=first)
        if cut is None:
            return None                   # a block too large for the look stays whole
        leaves += cut
        first = max(first, 1 + max(int(leaf.rows.max()) for leaf in cut))
    if len(leaves) == len(periods) and all(len(leaf.sizes) == len(leaf.rows) for leaf in leaves):
        return None                       # nothing cut or merged: the look at the whole does the same
    leaves.sort(key=lambda leaf: -len(leaf.sizes))
    stats["layer_leaves"], stats["layer_rows"] = len(leaves), len(leaves[0].sizes)
    plans, excess = [], []                # per leaf: its plan, and how far it reaches above its height
    left = sum(len(leaf.sizes) for leaf in leaves)
    for leaf in leaves:
        look = np.zeros(1, dtype=np.int64) if len(leaf.sizes) == 1 else None
        if look is None and len(leaf.sizes) <= LEAF_MAX_ROWS:   # (larger ones: partial plans only)
            sub = leaf.problem()
            stacked = np.cumsum(sub.sizes) - sub.sizes   # a valid plan to start from (no two overlap)
            # (with partial plans, each leaf's look gets a share of the time left: the square root of
            # its share of the buffers left, so that the largest, the hardest, get the most)
            # (a leaf whose program stopped at its limit, UNSETTLED_LOOK_SHARE at most)
            now = time.perf_counter()
            share = (len(leaf.sizes) / left) ** 0.5 if partial else 1.0
            until = now + max(0.0, deadline - now) * (share if leaf.settled else min(share, UNSETTLED_LOOK_SHARE))
            look = _skyline.bound_look(sub, stacked, leaf.height, until, seed=seed)
        left -= len(leaf.sizes)
        if look is None:
            if not partial or not leaf.settled:   # (no partial plan around such a leaf: UNSETTLED_LEAF)
                return None
            look = _fallback(leaf, min(FALLBACK_S, deadline - time.perf_counter()), seed)
            if look is None:
                return None
        plans.append(look)
        excess.append(_excess(leaf, look))
    stats["layer_failed"] = sum(1 for extra in excess if extra > 0)
    # (the failed leaves searched apart, where they hold few of the buffers cut: see REPAIR_SHARE)
    failed_rows = sum(len(leaf.sizes) for leaf, extra in zip(leaves, excess) if extra > 0)
    if (partial and repair_until is not None and REPAIR_SHARE > 0 and stats["layer_failed"]
            and failed_rows <= REPAIR_MAX_SHARE * sum(len(rows) for rows in periods)):
        now = time.perf_counter()
        _repair(leaves, plans, excess, now + REPAIR_SHARE * max(0.0, repair_until - now), seed, stats)
    placed = _place(problem, leaves, plans, excess)
    if placed is None:
        return None
    out[placed[0]] = placed[1]
    try:
        validate(problem, out)
    except InvalidPlanError:
        return None
    if stats["layer_failed"]:
        return out if plan_peak(problem, out) < plan_peak(problem, offsets) else None
    return out if all(plan_peak(problem, out, rows) <= cap for rows in periods) else None
