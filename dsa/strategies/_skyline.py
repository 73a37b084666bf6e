"""Skyline search: restarted, randomised depth-first searches that fill the lowest gap first.

See :mod:`dsa._kernels.skyline` for one search. :class:`Skyline` prepares a problem once (time
columns, buffers grouped by first column, work space); :meth:`Skyline.probe` runs dives at one
capacity with node limits that follow the Luby sequence (M. Luby, A. Sinclair and D. Zuckerman,
"Optimal speedup of Las Vegas algorithms", Information Processing Letters 47(4), 1993) and random
tie-breaks; :func:`skyline_search` lowers a plan's peak with it, anytime: probes just below the
incumbent's peak, now and then probes of the lower bound itself (where the bytes alive at every
instant fill the capacity, every wasted byte ends a branch at once and the search is at its
strongest), and a large-neighbourhood search (P. Shaw, CP 1998) that keeps the incumbent's buffers
below a random level and re-packs the others above them with the same dives, or, turned upside down,
keeps its top and re-packs its bottom, or keeps both and re-packs a band between them that takes in a
hole of every column at the peak, so that what lies above the band can move down (the dives obey a
ceiling over each column there), or keeps a bottom with no waste in it (what the best of a few dives
at the lower bound placed, or the largest such bottom of a climb: an iterated greedy search, R. Ruiz
and T. Stutzle, European Journal of Operational Research 177(3), 2007, whose dives at the bound start
from that bottom cut at a level or around where the dives stopped) and re-packs the rest above it,
or flattens the incumbent: re-packs the buffers around a window of the columns that reach its peak,
at that peak but one quantum lower over the window, and takes the plan where it lowers the peak or
has fewer columns in the top quantum, so that those columns are cleared a window at a time.
Busy periods (spans of time that nothing crosses) are searched apart, the one that sets the peak
first.

Complexity: a node costs O(T + c) for ``T`` time columns and ``c`` buffers starting at the chosen
column, plus the buffers starting in closed wells that the dead-end check looks at (up to all of
them); a dive places each buffer once unless it backtracks.
"""
from __future__ import annotations

import time

import numpy as np

from dsa.bounds import lower_bound
from dsa.budget import check_seed
from dsa.solution import plan_peak

__all__ = ["Skyline", "skyline_search", "bound_look", "luby", "next_beam_width", "warm", "warm_beam", "beam_ready"]

SLICE_S = 0.1     # seconds of the first probe (doubled after each probe below the incumbent that fails)
SLICE_MAX = 4.0   # ... up to this
NOISE = 0.5       # weight of the random part of the candidates' scores in restarts
FULL_EVERY = 4    # one probe of the whole problem per this many (the others keep a floor)
FLOOR_LO, FLOOR_HI = 0.5, 0.95  # the floor's level, as a share of the peak, is drawn from this range
FLOOR_SLICE_S = 0.05  # seconds of a probe above a floor
MRV = 3           # where to branch (see dsa._kernels.skyline.dive)
PATH = True       # check that closed wells' bottom rows can be covered (dsa._kernels.skyline.dive)
TWINS = True      # skip candidates identical to one tried before at the same node (the same subtree)
STALL_SHARE = 0.25  # the search stops after this share of its time limit without a lower plan ...
STALL_MIN_S = 0.5   # ... or this many seconds, if more
LOAD_EVERY = 4    # every this many probes, one probes the lower bound itself
# node limit of the shortest dive: this many per row and per time column (wasted-space steps raise
# one column at a time, so where columns are many a dive takes more nodes than it has buffers)
UNIT_ROWS, UNIT_COLS = 2, 2
# column steps of a dive per second left before the deadline (see Skyline.dive): one takes 0.5-3 ns
# on the machine where this was measured, so a dive ends before the deadline. Each buffer that the
# dead-end check looks at counts as a step too (about 2 ns): uncounted, on 50,000 buffers over 700
# columns they made a node cost 30-56 us where it was counted as 1,400 steps, and a dive under a 1.4 s
# limit ran 4.3 s
WORK_PER_S = 300_000_000
PERFECT_AT = 2  # the round of each FULL_EVERY that builds a bottom with no waste and re-packs above it
PERFECT_NODES = 4  # node limit of the dive at the bound, per buffer
# ... the best of this many such dives (the one that covers the most bytes x time before its node
# limit): how much a dive at the bound covers is heavy-tailed (on a pinwheel cut of 3,001 buffers, 30
# dives covered 4-41 % of the area but one 67 %; of 12 bottoms re-packed for 0.5 s each, only that
# one gave a lower plan, 1.207 x LOAD from 1.258). best at 20 s on 15 cuts of 1,500-5,000 buffers,
# 3 seeds, against one dive: 10 of 45 runs lower (by up to 16.6 % of LOAD: continuous-1500-s14 planned
# at LOAD; mean -0.62 %), 8 higher (by at most 0.35 %)
PERFECT_TRIES = 6
# In the rounds that do not extend the incumbent's bottom (EXTEND_SHARE below), those dives climb:
# each starts from the largest bottom the climb has found, cut (at a random level, or around where the
# dives stopped), and a bottom that covers at least as much replaces it (iterated greedy, Ruiz and
# Stutzle 2007, on the area a bottom with no waste covers). Standalone, 10 s of such dives from a 4 s
# plan planned random607-1697 at LOAD (in 3.5 and 5.7 s), omni-pinwheel-3001-s5 (6.8 s) and
# continuous-1500-s14 (2.8 s) on some seeds (of these, best with dives from nothing had planned only
# continuous-1500-s14, on 1 of 3 seeds); on coarse cuts (pinwheel-128-2000, random601, random605)
# every climb stayed under 10 % of the area. best at 20 s, 15 cuts of 1,500-5,000 buffers x 3 seeds,
# against the best of 6 dives from nothing: mean -1.51 % of LOAD, 12 of 45 runs lower (4 at LOAD:
# random607-1697 on seeds 0 and 1, continuous-1500-s14 on 0 and 1, where seed 2 was at LOAD before
# too), 10 higher (by at most 1.3 %); 23 cuts of 225-1,000 buffers, one seed: 5 lower (4 to LOAD),
# 1 higher (0.5 %)
CLIMB = True
CLIMB_STUCK = 60  # the climb starts again from nothing after this many dives without a larger bottom
CLIMB_LOCAL_SHARE = 0.5  # share of the cuts that take out a window around where the dives stopped ...
CLIMB_WINDOW = 0.1  # ... of up to this share of the time columns on each side (the others: a level)
CLIMB_SLICE_FROM = 0.1  # once the climb has covered this share of the area (bytes x time), its rounds
CLIMB_SLICE_S = 1.0  # ... run dives for this many seconds (at least PERFECT_TRIES) ...
CLIMB_STALL = True  # ... and a bottom larger than any before counts as progress for the stall rule
# (without that share, slices of 1 s and the stall rule's progress on every larger bottom: the same
# wins, but 17 of 30 runs higher, up to 1.1 %, where climbs stay small and took the random dives' time)
EXTEND_SHARE = 0.5  # share of those rounds that start from the incumbent's bottom with no waste ...
EXTEND_LO = 0.6     # ... cut at a level drawn from [EXTEND_LO, 1] of its height
MIRROR_SHARE = 0.5  # share of the re-packs that keep the top of the incumbent and re-pack its bottom
BAND_SHARE = 0.5    # share of the re-packs that keep its top and its bottom and re-pack a band between
# (A band is one probe of at most FLOOR_SLICE_S, a probe of the whole up to SLICE_MAX, a bottom with
# no waste 0.3-0.5 s: traced in best at 20 s on 7 rectangle cuts of 550-5,000 buffers, bands lowered
# the peak 11 times in 7 s, probes of the whole 20 times in 56 s, bottoms 13 times in 52 s, floors
# never in 121 tries, each ending at once. Rounds of up to 8 bands each, until one lowers the peak,
# with bands in place of floors: on those cuts and 3 others, 2 seeds, mean -0.30 % of LOAD, 12 of 20
# runs lower, 3 higher; but on 24 cuts no run had seen (250-4,000 buffers) 8 lower and 10 higher,
# +0.30 % on the six of 1,500-4,000 buffers over 2 seeds. Not taken.)
# Flattening re-packs (_Search._flatten) work at the incumbent's peak, with a ceiling one quantum
# lower over a window of the columns in its top quantum and over every column below it, and take a
# plan that clears the window: the peak falls once the last such column is cleared. The floors above
# must clear every column at once, one byte below the peak, and on coarse cuts almost never do.
# Flattening alone from a skyline plan of 5 s: guillotine-3000-s0's top quantum went from 6,080 to
# 256 bytes x time steps in 30 s (11 plans taken of 1,243 re-packs, levels of 0.5-0.95 of the peak),
# and with levels of 0.2-0.9 of the peak (kept) it lowered the peak in 20 s, 1.0909 -> 1.0773 x
# LOAD, as on pinwheel-350-s0, 1.0667 -> 1.0533. best at 20 s on the main set's 9 coarse cuts
# (250-5,000 buffers, 16 cells per buffer), seeds 0-3, against FLAT_SHARE = 0 in the same session:
# mean 1.0593 -> 1.0560 (per seed -0.0075, -0.0048, -0.0024, +0.0014), 15 of 36 runs lower, 7
# higher; pinwheel-350-s0 1.0667 -> 1.0467 on average (1.0400 on 2 seeds, the results pages' runs
# 1.0533 at best), guillotine-700-s0 1.0660 -> 1.0566 on all 4, long-tall-250-s2 lost LOAD on one (1.0080),
# guillotine-3000-s0 level (1.0761). best at its default 1 s on 40 draws of 100-400 buffers: level
# (35 at LOAD both ways, mean 1.0064 -> 1.0066). Levels no higher than the highest hole's bottom in
# each of the window's columns (where their waste lies), seeds 0-1: 1.0549 and 1.0564 against 1.0536
# and 1.0548; not taken.
FLAT_SHARE = 0.5   # share of the re-packs other than bands that flatten the incumbent's top (_flatten) ...
FLAT_ROUND_S = 0.5  # ... each round of them re-packing for up to this long, until the peak falls
FLAT_MIN = 0.0      # the window is a share of its run of hot columns drawn from [FLAT_MIN, 1]
FLAT_MARGIN = 0.05  # buffers go up to a random margin of this share of the columns around it ...
FLAT_LO, FLAT_HI = 0.2, 0.9  # ... above a level drawn from this range, as a share of the peak
BAND_JITTER = 0.5   # the band takes in each column at the peak the hole nearest a random level, give
                    # or take a random distance up to this share of the peak ...
BAND_MARGIN = 0.05  # ... and a random margin up to this share of it below and above
HOLES_MAX_CELLS = 1 << 22  # no band where the columns at the peak hold more buffers than this in all
# the first round of a search is one deterministic dive below the incumbent's peak with this many
# times the node limit of the shortest dive, and at most this share of the time left; when it finds
# a plan, the dives' unit becomes at least the nodes it took (see _Search._calibrate)
CALIBRATE_UNITS = 64
CALIBRATE_SHARE = 0.25
MEMO = True        # remember dead states from dive to dive (see dsa._kernels.skyline.dive)
MEMO_PER_CELL = 64  # entries of that table per row and time column ...
MEMO_MAX_LOG2 = 21  # ... up to 2 ** this (16 MiB)
# beam searches at the bound (Skyline.beam) take turns with the dives in bound_look: each skyline's
# beams get as much time as its dives, the first BEAM_WIDTH states wide, the next ones wider (see
# BEAM_LUBY; up to what BEAM_MAX_BYTES holds), at most BEAM_PER_PARENT children of one state per level
BEAM_WIDTH = 64
BEAM_PER_PARENT = 2
BEAM_MAX_BYTES = 128 << 20
# ... where the beam's kernel is compiled (in this process or numba's cache: dsa warmup compiles it),
# or where the look has at least this long: compiling it takes about as long as the dive's (3 s)
BEAM_COLD_MIN_S = 10.0
# ... once a skyline's dives have run this long: where they plan at once (MiniMalloc's A in 0.07 s),
# the look's plan stays theirs, the same from run to run, not that of a beam racing them on another
# thread
BEAM_AFTER_S = 0.5
# the widths of a skyline's beams: each twice the one before on the skyline with time forwards, and
# BEAM_WIDTH x the Luby sequence (64, 64, 128, 64, 64, 128, 256, ...) with time backwards, a
# portfolio of the two: some problems plan at the bound only in wide beams, others in many narrow
# ones, and the wide ones come only at the end of a doubling schedule. Either way a beam that would not
# end before the look's deadline (its width over the last one's, times the last one's seconds) is not
# started: the next is BEAM_WIDTH wide instead (before, the last beams of a look were cut by its
# deadline, wasted). Looks of 4 s at the bound, 6 seeds each, on 6 rectangle cuts of 400-630 buffers
# where they plan some of the time: 25 of 36 planned, against 16 of 36 with doubling on both skylines
# (all-pinwheel-400-s112, planned only by beams of 1,024 or more: 2 of 6 against 3 of 6)
BEAM_LUBY = True


def next_beam_width(width: int, beams: int, by_luby: bool, took: float, left: float, widest: int) -> int:
    """The width of a skyline's next beam in :func:`bound_look`, after ``beams`` of them, the last
    ``width`` wide, which took ``took`` seconds, with ``left`` seconds left: twice ``width``, or with
    ``by_luby`` ``BEAM_WIDTH`` times the next term of the Luby sequence; at most ``widest``, and
    ``BEAM_WIDTH`` where a beam that wide would not end in time (taking its width over ``width``
    times ``took``)."""
    wide = min(BEAM_WIDTH * luby(beams + 1) if by_luby else 2 * width, widest)
    return BEAM_WIDTH if took * wide / max(width, 1) > left else max(1, wide)


def luby(i: int) -> int:
    """The ``i``-th term (``i >= 1``) of the Luby sequence 1, 1, 2, 1, 1, 2, 4, 1, ..."""
    k = 1
    while (1 << k) - 1 < i:
        k += 1
    while True:
        if i == (1 << k) - 1:
            return 1 << (k - 1)
        i -= (1 << (k - 1)) - 1
        k = 1
        while (1 << k) - 1 < i:
            k += 1


_NO_CEILING = np.iinfo(np.int64).max


class Skyline:
    """A problem prepared for skyline dives (rows of size 0 and fixed rows are not supported: see
    :func:`supported`)."""

    def __init__(self, problem, seed=0):
        from dsa._kernels import skyline as K

        self.K = K
        self.problem = problem
        self.rows = np.flatnonzero(problem.sizes > 0).astype(np.int64)
        starts, ends = problem.starts[self.rows], problem.ends[self.rows]
        pts = np.unique(np.concatenate([starts, ends]))
        self.cs = np.searchsorted(pts, starts).astype(np.int64)
        self.ce = np.searchsorted(pts, ends).astype(np.int64)
        self.T = max(1, len(pts) - 1)
        self.widths = np.diff(pts).astype(np.int64) if len(pts) > 1 else np.ones(1, np.int64)
        self.sz = problem.sizes[self.rows].astype(np.int64)
        self.al = problem.alignments[self.rows].astype(np.int64)
        m = len(self.rows)
        order = np.argsort(self.cs, kind="stable")
        self.bs_rows = order.astype(np.int64)
        self.bs_ptr = np.searchsorted(self.cs[order], np.arange(self.T + 1)).astype(np.int64)
        order = np.argsort(self.ce, kind="stable")
        self.be_rows = order.astype(np.int64)
        self.be_ptr = np.searchsorted(self.ce[order], np.arange(self.T + 2)).astype(np.int64)
        self.offsets = np.zeros(m, dtype=np.int64)
        T = self.T
        self.h = np.zeros(T, np.int64)
        self.rem = np.zeros(T, np.int64)
        self.slack = np.zeros(T, np.int64)
        self.placed = np.zeros(m, np.bool_)
        depth = 2 * m + 2 * T + 16
        self.fr = [np.zeros(depth, np.int64) for _ in range(8)]
        self.fr_k = np.zeros(depth, np.uint64)
        self.cand = np.zeros(max(64, 16 * m), np.int64)
        self.score = np.zeros(len(self.cand), np.float64)
        s = int(np.random.SeedSequence(check_seed(seed)).generate_state(1, dtype=np.uint64)[0])
        self.rng = np.array([s or 0x9E3779B97F4A7C15], dtype=np.uint64)
        # the table of dead states (see dsa._kernels.skyline.dive), shared by the dives of one
        # setting (capacity, kept rows, ceiling: the salt changes with the last two)
        keys = np.random.default_rng(check_seed(seed))
        self.keys = keys.integers(0, np.iinfo(np.int64).max, m, dtype=np.int64).astype(np.uint64)
        size = 1 << int(np.clip(np.ceil(np.log2(MEMO_PER_CELL * (m + T + 1))), 10, MEMO_MAX_LOG2))
        self.memo = np.zeros(size if MEMO else 0, np.uint64)
        self.salt = self._salts = 0
        self.nodes = 0
        self.keep = np.zeros(m, np.bool_)
        self.h0 = np.zeros(T, np.int64)
        self.ceil = np.full(T, _NO_CEILING, np.int64)
        self.rcap = np.zeros(m, np.int64)
        self.deadline = None  # (see dive)
        # every level a dive reaches is a multiple of the grain (the greatest common divisor of the
        # sizes and alignments) while the kept rows' tops and the ceilings are: see _cap
        grain = np.gcd.reduce(np.concatenate([self.sz, self.al[self.al > 1]])) if m else 1
        self.grain = max(1, int(grain))
        self.on_grain = True

    def dive(self, cap, node_limit, noise):
        """One dive; returns the status (1 plan, 0 none, -1 limit) and fills ``self.offsets``.

        With ``self.deadline`` set (a ``time.perf_counter()`` value; None: no limit), its work is
        limited to ``WORK_PER_S`` column steps per second left (see :func:`dsa._kernels.skyline.dive`):
        where columns are many and lifetimes long, a node costs far more than usual, and a node limit
        alone let one dive outlast the caller's deadline many times over. The frame stack grows
        (doubles) when a dive runs out of it: wasted-space steps, one per column raised, can
        outnumber the buffers many times where time columns are many."""
        work = self._work_limit()
        while True:
            state = self.rng.copy()
            status = self._dive(cap, node_limit, work, noise)
            if status != -2:
                return status
            self.rng[:] = state  # the same dive again, deeper
            self.fr = [np.zeros(2 * len(a), np.int64) for a in self.fr]
            self.fr_k = np.zeros(2 * len(self.fr_k), np.uint64)

    def _work_limit(self) -> int:
        """``WORK_PER_S`` column steps per second left before ``self.deadline`` (no limit without one)."""
        if self.deadline is None:
            return _NO_CEILING
        steps = max(0.0, self.deadline - time.perf_counter()) * WORK_PER_S
        return int(steps) + 1 if steps < _NO_CEILING else _NO_CEILING  # (an infinite deadline too)

    def beam(self, cap, width, per_parent=None, noise=NOISE):
        """One beam search for a plan within ``cap`` (:func:`dsa._kernels.skyline_beam.beam`): the
        dive's states, ``width`` of them kept per level (at most :meth:`beam_max_width`), at most
        ``per_parent`` (default ``BEAM_PER_PARENT``) children of one state; random tie-breaks.
        Returns the status (1: a plan, in ``self.offsets``; 0: the beam died out, which proves
        nothing; -1: the work limit, as a dive's under ``self.deadline``). The whole problem only
        (no kept rows, no ceiling)."""
        from dsa._kernels.skyline_beam import beam

        if self.keep.any() or (self.ceil != _NO_CEILING).any():
            raise ValueError("a beam search covers the whole problem: no kept rows, no ceiling")
        levels = len(self.rows) + self.T + 16  # (one per buffer, and one per wasted step: grown on demand)
        while True:
            width = max(1, min(int(width), self.beam_max_width(levels)))
            state = self.rng.copy()
            status, nodes = beam(self.cs, self.ce, self.sz, self.al, self.bs_ptr, self.bs_rows, self.be_ptr,
                                 self.be_rows, self.T, self._cap(cap), width,
                                 int(BEAM_PER_PARENT if per_parent is None else max(1, per_parent)),
                                 self._work_limit(), self.rng, float(noise), self.keys, PATH, levels,
                                 self.offsets)
            self.nodes += int(nodes)
            if status != -2:
                return int(status)
            self.rng[:] = state  # (the same beam again, with room for more levels)
            levels *= 2

    def beam_max_width(self, levels=None) -> int:
        """The widest beam that fits in ``BEAM_MAX_BYTES`` (states, children and the back pointers of
        ``levels`` levels, by default one per buffer and per column)."""
        m = len(self.rows)
        levels = m + self.T + 16 if levels is None else levels
        # two generations of states (skyline and bytes left, 8 bytes a column each; buffers placed, a
        # byte each; hash, count, runs and well, 64 bytes), up to 16 children a state (96 bytes
        # each), a hash table of at most 8 slots a state, and back pointers (16 bytes a level)
        per_state = 2 * m + 32 * self.T + 2 * 64 + 16 * 96 + 8 * 8 + 16 * levels
        return max(1, BEAM_MAX_BYTES // per_state)

    def _dive(self, cap, node_limit, work_limit, noise):
        status, nodes = self.K.dive(self.cs, self.ce, self.sz, self.al, self.bs_ptr, self.bs_rows,
                                    self.be_ptr, self.be_rows,
                                    self.T, self._cap(cap), int(node_limit), int(work_limit), self.rng, float(noise),
                                    self.offsets, self.keep, self.h0, self.ceil, MRV, PATH, TWINS, self.keys,
                                    self.memo, np.uint64(self.salt), self.h, self.rem, self.slack, self.placed,
                                    self.rcap, *self.fr, self.fr_k, self.cand, self.score)
        self.nodes += int(nodes)
        return int(status)

    def _cap(self, cap) -> int:
        """``cap`` rounded down to a multiple of the grain where the dives' levels all are one.

        A dive places each buffer on a level of the skyline: the top of the kept rows (``h0``), of
        a buffer placed, or a wasted step up to one of those or to an aligned level. When the sizes,
        the alignments, the kept tops and the ceilings are all multiples of the grain, so is every
        level and every plan's peak, and a peak of at most ``cap`` is one of at most that multiple:
        the same plans. The columns' slack is then exact, so the corners of a column with no room
        left are checked (``_dead``): with a capacity one byte below a peak of 64-byte sizes, every
        column kept 63 bytes of slack that nothing could use, and no corner was ever checked."""
        cap = int(cap)
        return cap - cap % self.grain if self.on_grain else cap

    def set_floor(self, offsets=None, level=0):
        """Keep the rows of ``offsets`` whose tops are at most ``level`` (None: keep nothing); the
        dives then place the others above them."""
        if offsets is None or level <= 0:
            return self.set_keep(None, None)
        off = np.asarray(offsets, dtype=np.int64)[self.rows]
        return self.set_keep(offsets, off + self.sz <= level)

    def set_keep(self, offsets, keep, above=None):
        """Keep the rows of this problem's rows (``self.rows``) where ``keep`` is True at their offsets
        in ``offsets`` (a plan of the whole problem; None: keep nothing); the dives place the others
        above the skyline of the kept ones (the highest kept top over each column), so that a plan
        they find never overlaps a kept row. Rows where ``above`` is True are kept too, at their
        offsets in ``offsets``, as a ceiling: the others are placed below their lowest bottom over
        each column (the caller makes sure that it lies above the skyline of the rows in ``keep``).
        Returns the number kept."""
        self.keep[:] = False
        self.h0[:] = 0
        self.ceil[:] = _NO_CEILING
        if offsets is None:
            self.salt = 0  # (the whole problem: dives of every round share its dead states)
            self.on_grain = True
            return 0
        self._salts += 1  # (dead states of another setting do not hold in this one)
        self.salt = self._salts
        off = np.asarray(offsets, dtype=np.int64)[self.rows]
        self.keep[:] = keep
        if above is not None:
            self.keep |= above
            k = np.flatnonzero(above)
            low = -self.ceil  # (the lowest bottom over each column: the highest of their negatives)
            self.K.cover_max(self.cs[k], self.ce[k], -off[k], low)
            self.ceil[:] = -low
        self.offsets[self.keep] = off[self.keep]
        k = np.flatnonzero(keep)
        self.K.cover_max(self.cs[k], self.ce[k], off[k] + self.sz[k], self.h0)
        ceil = self.ceil[self.ceil != _NO_CEILING]
        self.on_grain = bool(np.all(self.h0 % self.grain == 0) and np.all(ceil % self.grain == 0))
        return int(np.count_nonzero(self.keep))

    def lower_ceiling(self, lo, hi, level):
        """Lower the ceiling over columns ``[lo, hi)`` to ``level`` (an int, or an array of one per
        column there; where it is higher), after :meth:`set_keep`: a setting of its own for the
        table of dead states."""
        self._salts += 1
        self.salt = self._salts
        self.ceil[lo:hi] = np.minimum(self.ceil[lo:hi], level)
        ceil = self.ceil[self.ceil != _NO_CEILING]
        self.on_grain = bool(np.all(self.h0 % self.grain == 0) and np.all(ceil % self.grain == 0))

    def base_unit(self) -> int:
        """The node limit of the shortest dive: ``UNIT_ROWS`` per row and ``UNIT_COLS`` per time
        column (wasted-space steps raise one column at a time)."""
        return UNIT_ROWS * len(self.rows) + UNIT_COLS * self.T + 16

    def column_sums(self, k, values):
        """Over each time column, the sum of ``values`` (one per row of ``k``, rows of ``self.rows``,
        or one for all) of the rows ``k`` alive there: O(len(k) + T)."""
        delta = np.zeros(self.T + 1, dtype=np.int64)
        np.add.at(delta, self.cs[k], values)
        np.add.at(delta, self.ce[k], -np.asarray(values))
        return np.cumsum(delta)[:-1]

    def plan(self):
        """The last plan found, as offsets of every row of the problem (size-0 rows at 0; kept rows
        where the floor had them)."""
        out = np.zeros(len(self.problem), dtype=np.int64)
        out[self.rows] = self.offsets
        return out

    def probe(self, cap, deadline, unit, noise=0.5, max_dives=None, deterministic=True):
        """Dives at ``cap`` until a plan (returned, as full offsets), a proof (the deterministic first
        dive, when ``deterministic``, ended without a plan: returns "infeasible"), the deadline or
        ``max_dives`` (None); every other dive has random tie-breaks."""
        i = 0
        while time.perf_counter() < deadline and (max_dives is None or i < max_dives):
            i += 1
            first = i == 1 and deterministic
            status = self.dive(cap, unit * luby(i), 0.0 if first else noise)
            if status == 1:
                return self.plan()
            if status == 0 and first:
                return "infeasible"
        return None


def _ranges(lo, hi):
    """For the ranges ``[lo[i], hi[i])``: ``i`` once per element, and the elements (vectorised)."""
    lengths = hi - lo
    owner = np.repeat(np.arange(len(lengths)), lengths)
    return owner, np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths) + lo[owner]


_warm: list = []


def warm() -> None:
    """Load the dive kernel and the floor's (compile them, or read numba's cache) with a problem of one
    buffer; callers do this before their clock starts."""
    if not _warm:
        from dsa.problem import Problem

        sky = Skyline(Problem([0], [1], [1]))
        sky.set_keep(np.zeros(1, np.int64), np.ones(1, np.bool_))  # (loads cover_max)
        sky.set_keep(None, None)
        sky.dive(1, 10, 0.0)
        _warm.append(True)


def warm_beam() -> None:
    """Load the beam search's kernel (compile it, about as long as the dive's, or read numba's cache)."""
    from dsa.problem import Problem

    Skyline(Problem([0], [1], [1])).beam(1, 1)


def beam_ready() -> bool:
    """Whether the beam search's kernel runs without compiling (:func:`dsa._kernels.compiled`)."""
    from dsa._kernels import compiled
    from dsa._kernels import skyline_beam

    return compiled(skyline_beam.beam)


def ready() -> bool:
    """Whether the dive kernel (and the floor's, ``cover_max``) run without compiling: compiled in
    this process or in numba's cache (:func:`dsa._kernels.compiled`). Compiling them costs about 3 s."""
    from dsa._kernels import compiled
    from dsa._kernels import skyline as K

    return compiled(K.dive) and compiled(K.cover_max)


def supported(problem) -> bool:
    """Whether the skyline search applies: no fixed offsets."""
    return not bool(np.any(problem.is_fixed))


class _Search:
    """The state of the search on one busy period (a sub-problem planned from offset 0)."""

    def __init__(self, problem, offsets, seed, unit):
        self.problem = problem
        self.best = np.asarray(offsets, dtype=np.int64).copy()
        self.peak = plan_peak(problem, self.best)
        self.bound = lower_bound(problem)
        self.sky = Skyline(problem, seed)
        self.unit = int(unit or self.sky.base_unit())
        self.rng = np.random.default_rng(check_seed(seed))
        self.slice_s = SLICE_S
        self.rounds = 0
        self.seen = set()  # capacities whose deterministic dive (of the whole problem) was run
        # plans are turned upside down only without alignments (a mirrored offset may break one)
        self.mirrorable = bool(np.all(problem.alignments == 1))
        # bands move the buffers above them down by the sizes' greatest common divisor, which keeps
        # every alignment that divides it
        sizes = problem.sizes[self.sky.rows]
        self.quantum = int(np.gcd.reduce(sizes)) if len(sizes) else 1
        self.bandable = bool(np.all(self.quantum % problem.alignments == 0))
        self.calibrated = False
        # each row's bytes x time (a bottom with no waste is measured by the area it covers)
        rows = self.sky.rows
        self.area = problem.sizes[rows].astype(np.float64) * (problem.ends[rows] - problem.starts[rows])
        self.area_total = float(self.area.sum())
        self.climb = None  # (offsets, kept rows, area) of the climb's bottom with no waste
        self.climb_fails = 0
        self.largest = -1.0  # (the area of the largest bottom the climb has found)
        self.grew = False  # (whether it grew in the last round: reset by round)
        self.flat = 0  # (plans taken at the same peak, flatter: see _flatten)

    def round(self, deadline) -> bool:
        """One probe (or, flattening, a round of them); returns whether it lowered the peak
        (``self.grew`` says whether the climb's bottom grew, see :meth:`_climb_step`, or a flatter
        plan was taken, see :meth:`_flatten`)."""
        self.grew = False
        if not self.calibrated:
            return self._calibrate(deadline)
        sky, peak, bound = self.sky, self.peak, self.bound
        # one probe of the whole problem every FULL_EVERY rounds (every LOAD_EVERY-th of those at the
        # bound itself), the others re-pack what lies above a level of the incumbent
        full = self.rounds % FULL_EVERY == 0
        if self.rounds % FULL_EVERY == PERFECT_AT and bound < peak - 1:
            self.rounds += 1
            return self._perfect_bottom(deadline)
        if not full and self.bandable and self.rng.random() < BAND_SHARE:
            self.rounds += 1
            return self._band(deadline)
        if not full and self.rng.random() < FLAT_SHARE:
            self.rounds += 1
            # (a re-pack takes a plan far less often than a band does: a round is many of them)
            # (a flatter plan sets self.grew, and nothing in the round clears it)
            end = min(deadline, time.perf_counter() + FLAT_ROUND_S)
            while not self._flatten(end):
                if time.perf_counter() >= end:
                    return False
            return True
        mirror = False
        cap = peak - 1
        if full:
            if (self.rounds // FULL_EVERY) % LOAD_EVERY == LOAD_EVERY - 1:
                cap = bound
            sky.set_floor(None)
            end = min(deadline, time.perf_counter() + self.slice_s)
        else:
            level = int(peak * self.rng.uniform(FLOOR_LO, FLOOR_HI))
            # half the time upside down: keep what lies below a level of the mirrored plan (the top
            # of the incumbent) and re-pack the rest (its bottom), then turn the plan back
            mirror = self.mirrorable and self.rng.random() < MIRROR_SHARE
            sky.set_floor(peak - self.best - self.problem.sizes if mirror else self.best, level)
            end = min(deadline, time.perf_counter() + FLOOR_SLICE_S)
        self.rounds += 1
        out = sky.probe(cap, end, self.unit, NOISE, deterministic=not full or cap not in self.seen)
        if isinstance(out, np.ndarray) and mirror:
            out = np.where(self.problem.sizes > 0, cap - out - self.problem.sizes, 0)
        if full:
            self.seen.add(cap)
        if isinstance(out, np.ndarray):
            new = plan_peak(self.problem, out)
            if new < peak:
                self.best, self.peak = out, new
                return True
        elif full and cap == peak - 1:
            self.slice_s = min(SLICE_MAX, self.slice_s * 2)  # harder from here on: longer probes
        return False

    def _calibrate(self, deadline) -> bool:
        """The first round: one deterministic dive of the whole problem one byte below the incumbent's
        peak, with ``CALIBRATE_UNITS`` times the node limit of the shortest dive and at most
        ``CALIBRATE_SHARE`` of the time left; returns whether the peak fell.

        The nodes a dive takes to reach a plan without backtracking vary with the instance far more
        than the default unit (a share of rows and time columns) does: on coarse cuts a straight dive
        takes fewer nodes than the unit, on nearly continuous ones (sizes and lifetimes almost all
        distinct, where many wasted-space steps raise one run at a time) ten to twenty-five times
        more, so that no dive of the other rounds could finish and the search found nothing. When
        this dive finds a plan, the unit becomes at least the nodes it took; when it ends without one
        (its complete search is a proof for the canonical space), the capacity counts as seen."""
        sky, cap = self.sky, self.peak - 1
        self.calibrated = True
        kept = sky.deadline
        now = time.perf_counter()
        sky.deadline = min(deadline, now + CALIBRATE_SHARE * max(0.0, deadline - now))
        if kept is not None:
            sky.deadline = min(sky.deadline, kept)
        sky.set_floor(None)
        before = sky.nodes
        try:
            status = sky.dive(cap, CALIBRATE_UNITS * self.unit, 0.0)
        finally:
            sky.deadline = kept
        if status == 0:
            self.seen.add(cap)
        if status != 1:
            return False
        self.unit = max(self.unit, sky.nodes - before)
        out = sky.plan()
        new = plan_peak(self.problem, out)
        if new < self.peak:
            self.best, self.peak = out, new
            return True
        return False

    def _peak_holes(self, off, top):
        """The gaps between buffers in the columns where the plan (``off`` and ``top``, of
        ``sky.rows``) reaches the incumbent's peak, from 0 up: arrays (column, bottom, top) of each;
        none where those columns hold more than ``HOLES_MAX_CELLS`` buffers in all. O(rows log T +
        the buffers in those columns)."""
        sky = self.sky
        k = np.flatnonzero(top == self.peak)  # the columns at the peak are theirs
        at = np.flatnonzero(sky.column_sums(k, 1) > 0)
        lo, hi = np.searchsorted(at, sky.cs), np.searchsorted(at, sky.ce)
        if int((hi - lo).sum()) > HOLES_MAX_CELLS:
            return (np.zeros(0, dtype=np.int64),) * 3
        owner, j = _ranges(lo, hi)  # each buffer in each column at the peak
        order = np.lexsort((off[owner], j))
        cols, lows, highs = at[j[order]], off[owner[order]], top[owner[order]]
        below = np.zeros(len(cols), dtype=np.int64)  # the top of the buffer below (0 for the lowest)
        same = np.r_[False, cols[1:] == cols[:-1]]
        below[same] = highs[:-1][same[1:]]
        gap = lows > below
        return cols[gap], below[gap], lows[gap]

    def _band(self, deadline) -> bool:
        """Re-pack a band of the incumbent so that what lies above it can move down by a quantum;
        returns whether the peak fell.

        The band ``[a, b)`` spans a hole in every column where the incumbent reaches its peak (in
        each, the hole nearest a random level, with random jitter and margins). The buffers that end
        at or below ``a`` stay; of those that start at or above ``b``, the ones that reach above the
        capacity (one quantum, the sizes' greatest common divisor, below the peak) move down by the
        quantum, with every buffer less than a quantum under one that moves, and the others stay:
        all of them bound the band from above (a ceiling over each column). The dives re-pack the
        other buffers between the two, at that capacity. Where the band wastes less than a quantum
        under a column of buffers that move, the first dive ends at once."""
        sky, peak, g, rng = self.sky, self.peak, self.quantum, self.rng
        off = self.best[sky.rows]
        top = off + sky.sz
        hc, hb, ht = self._peak_holes(off, top)
        if len(hc) == 0:
            return False
        y = int(rng.integers(0, peak))
        dist = np.maximum(0, np.maximum(hb - y, y - ht)) + rng.uniform(0, BAND_JITTER * peak, len(hc))
        order = np.lexsort((dist, hc))
        pick = order[np.r_[True, hc[order][1:] != hc[order][:-1]]]  # the nearest hole of each column
        a = max(0, int(hb[pick].min() - rng.uniform(0, BAND_MARGIN) * peak))
        b = max(a + g, int(ht[pick].max() + rng.uniform(0, BAND_MARGIN) * peak))
        low = top <= a
        high = (off >= b) & ~low
        move = high & (top > peak - g)
        # what lies less than a quantum under a moving buffer moves too (level by level, downwards:
        # a buffer that joins starts below the level that made it join)
        level = peak
        while np.any(move & (off < level)):
            level = int(off[move & (off < level)].max())
            k = np.flatnonzero(move & (off == level))
            cover = np.concatenate([[0], np.cumsum(sky.column_sums(k, 1) > 0)])
            under = np.flatnonzero(high & ~move & (top > level - g) & (top <= level))
            move[under[cover[sky.ce[under]] > cover[sky.cs[under]]]] = True
        moved = self.best.copy()
        moved[sky.rows[move]] -= g
        sky.set_keep(moved, low, high)
        out = sky.probe(peak - g, min(deadline, time.perf_counter() + FLOOR_SLICE_S), self.unit, NOISE)
        if isinstance(out, np.ndarray):
            new = plan_peak(self.problem, out)
            if new < peak:
                self.best, self.peak = out, new
                return True
        return False

    def _hot(self, offsets):
        """The skyline of the plan ``offsets`` (the highest top over each column) and its bytes x time
        above one quantum under the incumbent's peak."""
        sky = self.sky
        sky_top = np.zeros(sky.T, dtype=np.int64)
        sky.K.cover_max(sky.cs, sky.ce, np.asarray(offsets, dtype=np.int64)[sky.rows] + sky.sz, sky_top)
        return sky_top, int((np.maximum(0, sky_top - (self.peak - self.quantum)) * sky.widths).sum())

    def _flatten(self, deadline) -> bool:
        """Re-pack part of the incumbent at its own peak so that fewer columns reach it; returns
        whether the peak fell.

        The columns whose skyline lies in the top quantum (above the peak less the sizes' greatest
        common divisor) are the incumbent's hot ones. A window is drawn inside a run of them (a random
        part of the run around a random hot column); the buffers above a random level
        (``FLAT_LO``-``FLAT_HI`` of the peak) over the window and a random margin of up to
        ``FLAT_MARGIN`` of the columns on either side go, with every buffer that lies over one of them
        (so that nothing kept is above what goes), and the dives re-pack them at the peak under a
        ceiling one quantum lower over the window and over every column that is not hot. A plan
        they find lowers the peak, or keeps it with fewer hot columns: it replaces the incumbent
        either way (the same peak, flatter: ``self.flat`` counts those, and ``self.grew`` says so to
        the stall rule). Where the other re-packs must clear every hot column at once, this clears
        them a window at a time, and the peak falls when the last one goes.

        This is a large-neighbourhood search (Shaw, CP 1998) on a lexicographic objective: the peak,
        then the bytes x time in its top quantum (:meth:`_hot`)."""
        sky, peak, g, rng = self.sky, self.peak, self.quantum, self.rng
        if g >= peak:
            return False
        sky_top, hot = self._hot(self.best)
        hot_cols = sky_top > peak - g
        cols = np.flatnonzero(hot_cols)
        # the run of hot columns around a random one, and a random window inside it
        c = int(cols[rng.integers(len(cols))])
        cold = np.flatnonzero(~hot_cols)
        lo = int(cold[cold < c].max()) + 1 if np.any(cold < c) else 0
        hi = int(cold[cold > c].min()) if np.any(cold > c) else sky.T
        w = max(1, int((hi - lo) * rng.uniform(FLAT_MIN, 1.0)))
        a = int(rng.integers(lo, hi - w + 1))
        level = int(peak * rng.uniform(FLAT_LO, FLAT_HI))
        margin = int(sky.T * rng.uniform(0.0, FLAT_MARGIN))
        off = self.best[sky.rows]
        go = (sky.ce > a - margin) & (sky.cs < a + w + margin) & (off + sky.sz > level)
        go = self._with_rows_above(off, go, np.ones(len(go), dtype=np.bool_))
        sky.set_keep(self.best, ~go)
        hot_cols[a:a + w] = False  # (the columns that may still reach the peak)
        sky.lower_ceiling(0, sky.T, np.where(hot_cols, _NO_CEILING, peak - g))
        out = sky.probe(peak, min(deadline, time.perf_counter() + FLOOR_SLICE_S), self.unit, NOISE)
        if not isinstance(out, np.ndarray):
            return False
        new = plan_peak(self.problem, out)
        if new < peak:
            self.best, self.peak = out, new
            return True
        if self._hot(out)[1] < hot:  # (always, as the ceiling stands; checked all the same)
            self.best = out
            self.flat += 1
            self.grew = True
        return False

    def _with_rows_above(self, off, out, among):
        """``out`` (a mask of ``sky.rows``, the buffers to re-pack) with every buffer of ``among`` that
        lies over one of them (at ``off``), repeatedly: what stays then has nothing above what goes.
        O(rows + T) per pass."""
        sky = self.sky
        pairs = np.ravel(np.column_stack([sky.cs, sky.ce]))
        while True:
            r = np.flatnonzero(out)
            bottoms = np.full(sky.T, -_NO_CEILING, dtype=np.int64)  # (minus the lowest bottom gone)
            sky.K.cover_max(sky.cs[r], sky.ce[r], -off[r], bottoms)
            lowest = np.minimum.reduceat(np.r_[-bottoms, _NO_CEILING], pairs)[::2]
            over = among & ~out & (off >= lowest)
            if not over.any():
                return out
            out = out | over

    def _solid_level(self, offsets) -> int:
        """The highest level below which the plan ``offsets`` wastes nothing: the buffers whose tops
        are at most it fill every column up to their skyline (bisection: the waste under the
        buffers below a level never shrinks as the level rises)."""
        sky = self.sky
        off = np.asarray(offsets, dtype=np.int64)[sky.rows]
        tops = off + sky.sz
        levels = np.unique(tops)
        lo, hi = 0, len(levels)  # levels[:lo] are solid, levels[hi:] are not
        while lo < hi:
            mid = (lo + hi) // 2
            keep = tops <= levels[mid]
            sky.set_keep(offsets, keep)
            k = np.flatnonzero(keep)
            if np.array_equal(sky.column_sums(k, sky.sz[k]), sky.h0):
                lo = mid + 1
            else:
                hi = mid
        return int(levels[lo - 1]) if lo > 0 else 0

    def _perfect_bottom(self, deadline) -> bool:
        """Dives at the lower bound, where no byte may be wasted, keep the buffers one of them placed
        (a bottom with no waste in it) and dive again above them, at capacities below the incumbent's
        peak, where waste is allowed; returns whether the peak fell. ``EXTEND_SHARE`` of the time
        the dives (``PERFECT_TRIES`` of them, fewer where the deadline comes first) start from the
        incumbent's own bottom with no waste, the bottom is that of the one that covered the most
        bytes x time, and a plan at the same peak whose bottom with no waste is higher replaces the
        incumbent. Otherwise the dives are steps of the climb (:meth:`_climb_start`,
        :meth:`_climb_step`; ``CLIMB_SLICE_S`` seconds of them once it has covered
        ``CLIMB_SLICE_FROM`` of the area), and the bottom is the climb's."""
        sky, problem = self.sky, self.problem
        extend = self.rng.random() < EXTEND_SHARE
        if extend:
            # extend the incumbent's own bottom with no waste in it (cut lower at random), rather
            # than start from nothing: across rounds the waste-free part can grow
            solid = self._solid_level(self.best)
            level = int(solid * self.rng.uniform(EXTEND_LO, 1.0))
            sky.set_floor(self.best, level)
        else:
            sky.set_floor(None)
        bottom = kept = None
        most = -1
        climb = CLIMB and not extend
        long = climb and self.largest >= CLIMB_SLICE_FROM * self.area_total
        end = time.perf_counter() + (CLIMB_SLICE_S if long else 0.0)
        tries = 0
        while True:
            tries += 1
            if climb:
                self._climb_start()
            status = sky.dive(self.bound, PERFECT_NODES * len(sky.rows) + 16, NOISE)
            if status == 1:  # a plan at the bound itself
                self.best = sky.plan()
                self.peak = plan_peak(problem, self.best)
                return True
            area = float(self.area[sky.placed].sum())
            if climb:
                bottom, kept, most = self._climb_step(area)
            elif area > most:
                most, bottom, kept = area, sky.plan(), sky.placed.copy()
            now = time.perf_counter()
            if now >= deadline or (tries >= PERFECT_TRIES and now >= end):
                break
        improved = False
        if extend:
            # a plan at the incumbent's peak is taken when its bottom with no waste is higher
            sky.set_keep(bottom, kept)
            out = sky.probe(self.peak, min(deadline, time.perf_counter() + FLOOR_SLICE_S), self.unit, NOISE)
            if isinstance(out, np.ndarray) and self._solid_level(out) > solid:
                new = plan_peak(problem, out)
                improved = new < self.peak
                self.best, self.peak = out, new
        lo = self.bound  # (bisection between the bound and the incumbent's peak)
        while self.peak - lo > 1 and time.perf_counter() < deadline:
            cap = (lo + self.peak) // 2 if improved else self.peak - 1
            sky.set_keep(bottom, kept)
            out = sky.probe(cap, min(deadline, time.perf_counter() + FLOOR_SLICE_S), self.unit, NOISE)
            if isinstance(out, np.ndarray):
                self.best, self.peak = out, plan_peak(problem, out)
                improved = True
            elif improved:
                lo = cap
            else:
                break
        return improved

    def _climb_start(self):
        """Set the kept rows of the next dive at the bound: nothing when the climb has no bottom (or
        an empty one), else its bottom cut, ``CLIMB_LOCAL_SHARE`` of the time around where the dives
        stopped, otherwise at a random level (the rows whose tops are at most it stay). Either way
        what stays has no waste under its skyline. O(rows + T) per pass of the closure below."""
        sky = self.sky
        if self.climb is None or not self.climb[1].any():
            sky.set_floor(None)
            return
        bottom, kept, _ = self.climb
        off = bottom[sky.rows]
        tops = off + sky.sz
        if self.rng.random() >= CLIMB_LOCAL_SHARE:
            level = int(self.rng.integers(0, int(tops[kept].max()) + 1))
            sky.set_keep(bottom, kept & (tops <= level))
            return
        # where the dives stopped: the lowest column of the bottom's skyline (the first, as the dives
        # fill from the left); the rows over a window of columns around it above a level go, and with
        # them every row that lies over one of them (what is kept then has no waste under its skyline)
        k = np.flatnonzero(kept)
        sky_top = np.zeros(sky.T, dtype=np.int64)
        sky.K.cover_max(sky.cs[k], sky.ce[k], tops[k], sky_top)
        low = int(np.argmin(sky_top))
        half = max(1, int(sky.T * self.rng.uniform(0.0, CLIMB_WINDOW)))
        level = int(sky_top[low] * self.rng.random())
        out = kept & (sky.ce > low - half) & (sky.cs < low + half) & (tops > level)
        out = self._with_rows_above(off, out, kept)
        sky.set_keep(bottom, kept & ~out)

    def _climb_step(self, area):
        """Take the last dive's bottom (of ``area`` bytes x time) when it covers at least as much as
        the climb's; start again after ``CLIMB_STUCK`` dives without a larger one."""
        sky = self.sky
        if area > self.largest:
            # (progress for the stall rule once the climb covers a share worth a long round)
            self.grew = area >= CLIMB_SLICE_FROM * self.area_total
            self.largest = area
        if self.climb is None or area >= self.climb[2]:
            self.climb_fails = 0 if self.climb is None or area > self.climb[2] else self.climb_fails + 1
            self.climb = (sky.plan(), sky.placed.copy(), area)
        else:
            self.climb_fails += 1
        if self.climb_fails >= CLIMB_STUCK:
            self.climb_fails = 0
            last, self.climb = self.climb, None
            return last
        return self.climb

def _reversed(problem):
    """``problem`` with time running backwards (``[s, e)`` becomes ``[last - e, last - s)``, ``last``
    its latest end): two buffers meet in one exactly when they meet in the other, so a plan of one
    is a plan of the other, offset for offset. Sizes and alignments stay; no fixed offsets."""
    from dsa.problem import Problem

    last = int(problem.ends.max()) if len(problem) else 0
    return Problem(last - problem.ends, last - problem.starts, problem.sizes, alignments=problem.alignments)


def bound_look(problem, offsets, cap, deadline, seed=None, max_rows=None, large_deadline=None):
    """A plan of peak at most ``cap`` (the lower bound, typically) from restarted dives and beam
    searches, or None.

    Each busy period of ``problem`` whose plan in ``offsets`` reaches above ``cap`` gets a
    :class:`Skyline`, and one of the period with time running backwards (a plan of one is a plan of
    the other, and which of the two a dive fills more easily varies). Each dives at ``cap`` in turn
    with the others, node limits following the Luby sequence (the first dive of each
    deterministic), until every such period has a plan within ``cap`` (returned: ``offsets`` with
    those periods replaced), ``deadline`` (a ``time.perf_counter()`` value) passes, or a dive ends
    without a plan (it searched its whole canonical space: none within ``cap``; returns None).
    Between dives, each skyline gets beam searches (:meth:`Skyline.beam`) for as long as its dives
    have run, from ``BEAM_WIDTH`` states, each next one wider (:func:`next_beam_width`: doubling with
    time forwards, the Luby sequence with time backwards): where a dive's early
    mistakes are found only far below them, a beam keeps many partial plans side by side (on
    rectangle cuts of a few hundred buffers it plans about twice as many at the bound in the same
    time). Beams run where their kernel is compiled (:func:`beam_ready`) or the look has at least
    ``BEAM_COLD_MIN_S`` seconds, once the skyline's dives have run ``BEAM_AFTER_S`` seconds. When one
    of those periods has more than ``max_rows`` rows, the look ends by ``large_deadline`` instead
    (None: nothing is tried, None is returned). The dives
    run on as many threads as the canonical search would use (the kernel releases the GIL), each
    thread with its own share of the skylines; which thread plans a period first can change from
    run to run, so the plan can too (it is valid and within ``cap`` either way).

    At the lower bound, where the bytes alive at every instant fill the capacity, a wasted byte ends
    a branch at once; each skyline's dives share a table of the dead states they met (see
    :func:`dsa._kernels.skyline.dive`), so that restarts do not search them again.

    Parameters
    ----------
    problem : Problem
        Without fixed offsets (:func:`supported`).
    offsets : array of int
        A valid plan.
    cap : int
    deadline : float
    seed : int, optional
    max_rows : int, optional
    large_deadline : float, optional

    Returns
    -------
    array of int or None
    """
    from concurrent.futures import ThreadPoolExecutor

    from dsa.strategies._canonical_search import threads
    from dsa.sweep import Sweep

    best = np.asarray(offsets, dtype=np.int64).copy()
    if not supported(problem) or len(problem) == 0:
        return None
    warm()
    periods = [rows for rows in Sweep(problem).period_rows()
               if int((best[rows] + problem.sizes[rows]).max()) > cap]
    if max_rows is not None and any(len(rows) > max_rows for rows in periods):
        if large_deadline is None:
            return None
        deadline = min(deadline, large_deadline)
    seeds = np.random.SeedSequence(check_seed(seed)).generate_state(max(1, len(periods)), dtype=np.uint32)
    items = []  # [period, skyline, unit, dives so far]
    for j, rows in enumerate(periods):
        sub = problem.take(rows)
        for k, one in enumerate((sub, _reversed(sub))):
            sky = Skyline(one, int(seeds[j]) + k)
            sky.deadline = deadline
            # [period, skyline, unit, dives so far, seconds of dives, seconds of beams, next beam's
            # width, beams so far, widths by the Luby sequence]
            items.append([j, sky, sky.base_unit(), 0, 0.0, 0.0, BEAM_WIDTH, 0, BEAM_LUBY and k == 1])
    plans = {}  # period -> its plan (the first found)
    proof = []
    ready = beam_ready()
    beams = BEAM_WIDTH > 0 and (ready or deadline - time.perf_counter() >= BEAM_COLD_MIN_S)
    if beams and not ready:
        warm_beam()  # (compiled once, before the threads)

    def work(mine):
        # dives on the skylines of ``mine`` in turn (this thread's alone), and beam searches as long
        # as the dives, until the end, or until the periods of all of them have a plan
        while time.perf_counter() < deadline and not proof and len(plans) < len(periods):
            pending = [item for item in mine if item[0] not in plans]
            if not pending:
                return
            for item in pending:
                j, sky, unit, i = item[:4]
                if j in plans:
                    continue
                item[3] = i = i + 1
                began = time.perf_counter()
                status = sky.dive(cap, unit * luby(i), 0.0 if i == 1 else NOISE)
                item[4] += time.perf_counter() - began
                if status == 0:
                    proof.append(True)
                elif status == 1:
                    plans.setdefault(j, sky.plan())
                elif (beams and item[4] >= BEAM_AFTER_S and item[5] <= item[4]
                      and time.perf_counter() < deadline):
                    began = time.perf_counter()
                    if sky.beam(cap, item[6]) == 1:  # (a beam that dies out proves nothing)
                        plans.setdefault(j, sky.plan())
                    took = time.perf_counter() - began
                    item[5] += took
                    item[7] += 1
                    item[6] = next_beam_width(item[6], item[7], item[8], took, deadline - time.perf_counter(),
                                              sky.beam_max_width())
                if proof or time.perf_counter() >= deadline:
                    return

    width = min(threads(), len(items))
    if width <= 1:
        work(items)
    else:
        with ThreadPoolExecutor(width) as pool:
            list(pool.map(work, [items[k::width] for k in range(width)]))
    if proof or len(plans) < len(periods):
        return None
    for j, rows in enumerate(periods):
        best[rows] = plans[j]
    return best


def skyline_search(problem, offsets, *, time_limit: float, seed=None, progress=None, unit=None,
                   reverse: bool = False, stop=None):
    """Lower the peak of a plan with restarted skyline dives until ``time_limit`` or the bound.

    Each busy period (a span of time cut from the rest at instants where nothing lives) is searched on
    its own, from offset 0: each round works on a period at the peak. A period's first round is one long
    deterministic dive that sets the node limits of the others (see ``_Search._calibrate``); then rounds
    alternate between probes of the whole period (below the incumbent's peak, and now and then at the
    lower bound itself) and re-packs of part of the incumbent below its peak (what lies above a level,
    or below it, or in a band between two levels, or around a window of the columns at the peak with
    a lower ceiling there); a plan lowers the incumbent (or, from the last kind, flattens it: the same
    peak over fewer columns). The search stops early
    when it has found no lower plan for ``STALL_SHARE`` of ``time_limit`` (at least ``STALL_MIN_S``
    seconds; a larger bottom with no waste from the climb of :meth:`_Search._perfect_bottom`, or a
    flatter plan, counts as progress, see ``CLIMB_STALL``), so that the caller's other searches get
    the rest. A capacity whose deterministic dive ends without a plan is proven infeasible for plans
    of this canonical form only, so it is not reported as a bound.

    Parameters
    ----------
    problem : Problem
    offsets : array of int
        A valid plan; the result is never worse.
    time_limit : float
    seed : int, optional
    progress : callable, optional
        ``progress(seconds, peak)`` at each lower peak.
    unit : int, optional
        Node limit of the shortest dive (default: ``UNIT_ROWS`` per row and ``UNIT_COLS`` per time
        column of the period).
    reverse : bool, default False
        Search each busy period with time running backwards (the same plans, offset for offset;
        the dives fill the layout from the other end of time, so they reach other plans).
    stop : callable, optional
        ``stop()`` is asked between rounds; True ends the search (a search on another thread
        reached the bound, say).

    Returns
    -------
    (offsets, stats)
        ``stats``: ``skyline_nodes``, ``skyline_probes``, ``skyline_periods`` (busy periods searched
        apart), ``improvements`` (``(seconds, peak)``), ``skyline_stalled`` (True when it stopped
        early for want of progress), ``skyline_bottom_share`` (the largest share of a period's bytes x
        time that a bottom with no waste of the climb covered; 0 if none ran), ``skyline_flat``
        (plans taken at the same peak with less in its top quantum, see ``_Search._flatten``; the
        plan returned is the last of those where the peak did not fall).
    """
    warm()  # (not taken from the time limit)
    t0 = time.perf_counter()
    deadline = t0 + float(time_limit)
    best = np.asarray(offsets, dtype=np.int64).copy()
    peak = plan_peak(problem, best)
    stats = {"skyline_nodes": 0, "skyline_probes": 0, "skyline_periods": 0, "improvements": [],
             "skyline_bottom_share": 0.0}
    if not supported(problem) or len(problem) == 0:
        return best, stats
    from dsa.sweep import Sweep

    # busy periods with something to place, each planned from 0 (its offsets less their lowest);
    # a period's search is set up when it first sets the peak
    periods = [rows for rows in Sweep(problem).period_rows() if problem.sizes[rows].max() > 0]
    highest = np.zeros(len(periods), dtype=np.int64)
    for j, rows in enumerate(periods):
        shift = int(best[rows].min())
        if np.all(shift % problem.alignments[rows] == 0):  # (a shift that keeps every alignment)
            best[rows] -= shift
        highest[j] = int((best[rows] + problem.sizes[rows]).max())
    moved = plan_peak(problem, best)
    if moved < peak:  # (periods moved down to 0)
        peak = moved
        stats["improvements"].append((time.perf_counter() - t0, peak))
        if progress is not None:
            progress(time.perf_counter() - t0, peak)
    seeds = np.random.SeedSequence(check_seed(seed)).generate_state(len(periods), dtype=np.uint32)
    searches = [None] * len(periods)
    stats["skyline_periods"] = len(periods)
    rng = np.random.default_rng(check_seed(seed))
    last = time.perf_counter()
    stall = max(STALL_MIN_S, STALL_SHARE * float(time_limit))
    while time.perf_counter() < deadline and not (stop is not None and stop()):
        top = np.flatnonzero(highest == highest.max())
        for j in top:
            if searches[j] is None:
                rows = periods[j]
                sub = problem.take(rows)
                searches[j] = _Search(_reversed(sub) if reverse else sub, best[rows], int(seeds[j]), unit)
                searches[j].sky.deadline = deadline  # (no dive outlasts the search)
        if any(searches[j].peak <= searches[j].bound for j in top):
            break  # a period at the peak is at its own bound: so is the whole plan
        if time.perf_counter() - last > stall:
            stats["skyline_stalled"] = True  # no lower plan for a while: leave the rest to others
            break
        j = int(rng.choice(top))
        stats["skyline_probes"] += 1
        flat = searches[j].flat
        if searches[j].round(deadline):
            best[periods[j]] = searches[j].best
            highest[j] = searches[j].peak
            if highest.max() < peak:
                peak = int(highest.max())
                last = time.perf_counter()
                stats["improvements"].append((time.perf_counter() - t0, peak))
                if progress is not None:
                    progress(time.perf_counter() - t0, peak)
        else:
            if searches[j].flat > flat:  # (the same peak, flatter: go on from it)
                best[periods[j]] = searches[j].best
            if CLIMB_STALL and searches[j].grew:
                last = time.perf_counter()
    stats["skyline_nodes"] = sum(x.sky.nodes for x in searches if x is not None)
    stats["skyline_flat"] = sum(x.flat for x in searches if x is not None)
    stats["skyline_bottom_share"] = max([max(0.0, x.largest) / x.area_total for x in searches
                                         if x is not None and x.area_total > 0] + [0.0])
    return best, stats
