"""The planning context: facts about a problem's time axis, computed once and shared by strategies.

:func:`dsa.solve` builds one :class:`Sweep` per call and hands it to every strategy whose ``solve``
takes a ``sweep`` argument; a portfolio hands the same one to all its members. Each fact is computed
on first use and kept, so a strategy pays only for what it reads. This is the shape of MiniMalloc's
``SweepResult`` and of networkx's flow functions taking a prebuilt ``residual=`` network.

Facts:

* :attr:`Sweep.overlap`: the time-overlap graph as CSR adjacency (numba; O(n log n + E));
* :attr:`Sweep.n_overlaps` and :attr:`Sweep.dense`: how many pairs of rows meet in time (O(n log n),
  without building the graph), and whether so many do that the graph is not worth its memory;
* :attr:`Sweep.times`, :attr:`Sweep.live`: sections (maximal time intervals with a constant live set)
  and the bytes alive in each, the live-bytes step function;
* :attr:`Sweep.first_section`, :attr:`Sweep.last_section`: the sections each row spans;
* :attr:`Sweep.load`: LOAD, the most bytes alive at one instant;
* :attr:`Sweep.periods`: busy periods, independent sub-problems cut at instants where nothing lives.
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

__all__ = ["Sweep", "sections", "step_function", "period_labels", "rows_by_label"]

DENSE_SHARE = 16        # see Sweep.dense
DENSE_PAIRS = 1 << 20   # (an overlap graph of this many pairs takes 8 MiB)


def sections(starts, ends) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sections of rows with lifetimes ``[starts, ends)``: ``(times, first, last)``.

    ``times`` are the distinct event times, sorted; section ``k`` is ``[times[k], times[k + 1])``.
    Row ``i`` spans sections ``first[i]`` to ``last[i]`` (inclusive). Complexity O(n log n). The
    one place section times are computed: :class:`Sweep` holds them for a whole problem; strategies
    that work on a subset of rows call this.
    """
    times = np.sort(np.concatenate([starts, ends]))
    times = times[np.r_[True, times[1:] != times[:-1]]] if len(times) else times  # (faster than unique)
    return times, np.searchsorted(times, starts), np.searchsorted(times, ends) - 1


def step_function(starts, ends, sizes) -> tuple[np.ndarray, np.ndarray]:
    """The step function of the bytes alive over time: ``(times, live)``, where ``times`` are the
    distinct event times, sorted (those of :func:`sections`), and ``live[k]`` bytes are alive on
    ``[times[k], times[k + 1])`` (the last value, after the last end, is 0).

    At equal times frees are applied before allocations (lifetimes are half-open). Sums are int64
    all the way: no rounding of large byte counts. Complexity O(n log n). :attr:`Sweep.live` and
    :attr:`Sweep.load` come from it; :func:`dsa.bounds.aligned_load` uses it with padded
    sizes.
    """
    if len(starts) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    times = np.concatenate([starts, ends])
    deltas = np.concatenate([sizes, -sizes])
    order = np.argsort(times, kind="stable")
    times, deltas = times[order], deltas[order]
    live = np.cumsum(deltas)
    # keep the last value of each time: all events at one time are applied together
    last = np.r_[times[1:] != times[:-1], True]
    return times[last], live[last]


def period_labels(starts, ends) -> np.ndarray:
    """Busy-period label of each row, ``0 .. n_periods - 1`` in time order.

    A busy period is a maximal time span in which something is alive (lifetimes half-open: a row
    ending at ``t`` and one starting at ``t`` are in different periods unless another row crosses
    ``t``). :attr:`Sweep.periods` is this for a problem. O(n log n).
    """
    n = len(starts)
    labels = np.zeros(n, dtype=np.int64)
    if n == 0:
        return labels
    order = np.argsort(starts, kind="stable")
    reach = np.maximum.accumulate(ends[order])
    # a row opens a new period when it starts at or after every earlier row has ended
    new = np.r_[False, starts[order][1:] >= reach[:-1]]
    labels[order] = np.cumsum(new)
    return labels


def rows_by_label(labels) -> list[np.ndarray]:
    """Row indices of each label ``0, 1, ...`` in order, each ascending (the busy periods' rows, for
    :func:`period_labels`)."""
    order = np.argsort(labels, kind="stable")
    cuts = np.flatnonzero(np.diff(labels[order])) + 1
    return np.split(order, cuts) if len(order) else []


class Sweep:
    """Lazily computed facts about ``problem``'s time axis (see the module docstring).

    Parameters
    ----------
    problem : Problem

    Examples
    --------
    >>> import dsa
    >>> from dsa.sweep import Sweep
    >>> s = Sweep(dsa.Problem([0, 1, 5], [2, 3, 6], [4, 8, 2]))
    >>> s.times.tolist(), s.live.tolist(), s.load
    ([0, 1, 2, 3, 5, 6], [4, 12, 8, 0, 2, 0], 12)
    >>> s.periods.tolist(), s.n_periods
    ([0, 0, 1], 2)
    """

    def __init__(self, problem):
        self.problem = problem

    def __repr__(self) -> str:
        done = sorted(k for k in ("overlap", "times", "periods")
                      if ("_sections" if k == "times" else k) in self.__dict__)
        return f"Sweep(n={len(self.problem)}, computed={done})"

    @cached_property
    def overlap(self) -> tuple[np.ndarray, np.ndarray]:
        """``(indptr, indices)``: the neighbours in time of row ``i`` are ``indices[indptr[i]:indptr[i+1]]``.

        Two rows are neighbours when their half-open lifetimes intersect, whatever their sizes.
        Complexity O(n log n + E) time and O(n + E) memory, E the number of intersecting pairs.
        """
        from dsa._kernels.time_overlap import overlap_csr

        return overlap_csr(self.problem.starts, self.problem.ends)

    @cached_property
    def n_overlaps(self) -> int:
        """Number of pairs of rows whose lifetimes intersect (E), counted in O(n log n)."""
        starts = np.sort(self.problem.starts)
        # rows starting in [start_i, end_i) after row i in start order: each intersecting pair once
        later = np.searchsorted(starts, np.sort(self.problem.ends), side="left")
        # pairs = sum over rows of (rows started before my end) - (rows up to and including me)
        return int(later.sum() - (len(starts) * (len(starts) + 1)) // 2)

    @property
    def dense(self) -> bool:
        """True when more than ``DENSE_PAIRS`` pairs, and more than ``1/DENSE_SHARE`` of all pairs, of
        rows meet in time.

        The overlap graph would then take O(n^2) memory (tens of MB and up) for little gain:
        placement scans a sorted list of the placed rows instead
        (:func:`dsa.strategies.greedy.greedy_offsets`).
        """
        n = len(self.problem)
        pairs = self.n_overlaps
        return pairs > DENSE_PAIRS and pairs * DENSE_SHARE > n * n

    @cached_property
    def _step(self):
        p = self.problem
        return step_function(p.starts, p.ends, p.sizes)

    @cached_property
    def _sections(self):
        return sections(self.problem.starts, self.problem.ends)

    @property
    def times(self) -> np.ndarray:
        """Sorted distinct event times; section ``k`` is ``[times[k], times[k + 1])`` (the last one
        starts at the last end and is empty)."""
        return self._sections[0]

    @property
    def live(self) -> np.ndarray:
        """Bytes alive in each section (frees before allocations at equal times)."""
        return self._step[1]  # (step_function's times are self.times)

    @property
    def first_section(self) -> np.ndarray:
        """Index of the first section of each row."""
        return self._sections[1]

    @property
    def last_section(self) -> np.ndarray:
        """Index of the last section of each row (inclusive)."""
        return self._sections[2]

    @property
    def load(self) -> int:
        """LOAD: the most bytes alive at one instant (0 for an empty problem)."""
        return int(self.live.max()) if len(self.live) else 0

    @cached_property
    def periods(self) -> np.ndarray:
        """Busy-period label of each row, ``0 .. n_periods - 1`` in time order.

        A busy period is a maximal time span in which something is alive; rows of different periods
        never meet, so each period can be planned on its own from offset 0. O(n log n).
        """
        return period_labels(self.problem.starts, self.problem.ends)

    @property
    def n_periods(self) -> int:
        """Number of busy periods."""
        return int(self.periods.max()) + 1 if len(self.periods) else 0

    def period_rows(self) -> list[np.ndarray]:
        """Row indices of each busy period, in time order (each ascending)."""
        return rows_by_label(self.periods)
