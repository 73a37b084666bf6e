"""The planning context: what :func:`dsa.solve` hands down to a strategy, built once per call.

A strategy should be an algorithm and nothing else. What several strategies need is computed once, by
the front end, lazily, and passed to the strategies that ask for it (XLA's heap simulator and
MiniMalloc's ``SweepResult`` work this way). A :class:`Context` holds, for one problem:

* the sweep (:class:`dsa.sweep.Sweep`): time-overlap graph, sections and their live bytes, LOAD, busy
  periods, each computed on first use;
* the proven lower bound (:func:`dsa.lower_bound`: LOAD strengthened by alignments and fixed buffers);
* the budget: the time limit and node limit the call was given (a strategy starts its
  :class:`dsa.budget.Budget` from them, with its own defaults where they are None), and the seed;
* the incumbent: the best plan known so far, which strategies may offer and read (a warm start for a
  MIP, the first bound of a branch and bound).

What a strategy hands back is offsets and any lower bound it proved, plus the facts of its run (a
limit stopped it; it failed, and why): see :func:`dsa.solution.make_solution`. Only
:func:`dsa.solution.finalize` turns those into a status.

Strategies receive the context through :func:`dsa.strategies.call`: a strategy whose ``solve`` takes
``context`` gets this object, one that takes ``sweep`` gets :attr:`Context.sweep`, and ``time_limit``,
``node_limit`` and ``seed`` are passed to strategies that take them. A portfolio hands the same
context, or one made by :meth:`Context.derive` with other limits, to all its members, so that the
sweep is built once.
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

from dsa.bounds import lower_bound as _lower_bound_of
from dsa.budget import Budget, check_node_limit, check_seed, check_time_limit
from dsa.solution import plan_peak
from dsa.sweep import Sweep

__all__ = ["Context"]


class Context:
    """Facts about one problem that :func:`dsa.solve` computes once and hands to its strategy.

    Parameters
    ----------
    problem : Problem
    time_limit : float, optional
        Seconds the call may take (None: the strategy's own default).
    node_limit : int, optional
        Search nodes the call may use (None: no node limit, or the strategy's default).
    seed : int, optional
        Seed of randomised strategies.
    sweep : dsa.sweep.Sweep, optional
        A sweep of ``problem`` already built (by default a new, lazily computed one).
    pools : dsa.pools.PoolSpec, optional
        The memory pools of a plan over pools (checked by :func:`dsa.pools.check_pools`); None for
        one slab.

    Raises
    ------
    ValueError
        For an invalid ``time_limit``, ``node_limit`` or ``seed`` (see :mod:`dsa.budget`).

    Examples
    --------
    >>> import dsa
    >>> from dsa.context import Context
    >>> ctx = Context(dsa.Problem([0, 1, 5], [2, 3, 6], [4, 8, 2]), time_limit=1.0)
    >>> ctx.load, ctx.lower_bound, ctx.sweep.n_periods
    (12, 12, 2)
    >>> ctx.offer([0, 4, 0]), ctx.incumbent_peak
    (True, 12)
    """

    def __init__(self, problem, *, time_limit=None, node_limit=None, seed=None, sweep=None, pools=None):
        if sweep is not None and sweep.problem is not problem:
            raise ValueError("the sweep given to a Context must be of the same problem")
        self.problem = problem
        self.sweep = sweep if sweep is not None else Sweep(problem)
        self.time_limit = check_time_limit(time_limit)
        self.node_limit = check_node_limit(node_limit)
        self.seed = check_seed(seed)
        self.pools = pools
        # shared with the contexts derived from this one: one incumbent per problem
        self._best = {"offsets": None, "peak": None}

    def __repr__(self) -> str:
        return (f"Context(n={len(self.problem)}, time_limit={self.time_limit}, node_limit={self.node_limit}, "
                f"seed={self.seed}, incumbent_peak={self.incumbent_peak})")

    @cached_property
    def lower_bound(self) -> int:
        """The front end's proven lower bound on the optimal peak: :func:`dsa.lower_bound` (LOAD,
        strengthened by the rows' alignments and the fixed buffers)."""
        return _lower_bound_of(self.problem, sweep=self.sweep)

    @property
    def load(self) -> int:
        """LOAD, the most bytes alive at one instant (:attr:`dsa.sweep.Sweep.load`)."""
        return self.sweep.load

    def budget(self, time_limit=None, node_limit=None) -> Budget:
        """A :class:`~dsa.budget.Budget` started now, from the given limits or else the context's."""
        return Budget(self.time_limit if time_limit is None else time_limit,
                      self.node_limit if node_limit is None else node_limit)

    def derive(self, **changes) -> "Context":
        """A context of the same problem (same sweep, lower bound and incumbent) with other limits.

        Parameters
        ----------
        **changes
            ``time_limit``, ``node_limit`` and ``seed``: the new values (None removes a limit).
        """
        unknown = set(changes) - {"time_limit", "node_limit", "seed"}
        if unknown:
            raise TypeError(f"derive takes time_limit, node_limit and seed, not {sorted(unknown)}")
        values = {"time_limit": self.time_limit, "node_limit": self.node_limit, "seed": self.seed, **changes}
        child = Context(self.problem, sweep=self.sweep, pools=self.pools, **values)
        if "lower_bound" in self.__dict__:
            child.__dict__["lower_bound"] = self.__dict__["lower_bound"]
        child._best = self._best
        return child

    @property
    def incumbent(self) -> np.ndarray | None:
        """The offsets of the lowest plan offered so far (None before the first)."""
        return self._best["offsets"]

    @property
    def incumbent_peak(self) -> int | None:
        """The peak of :attr:`incumbent` (None before the first plan)."""
        return self._best["peak"]

    def offer(self, offsets) -> bool:
        """Keep ``offsets`` (a valid plan of the problem) as the incumbent if its peak is the lowest yet.

        Returns
        -------
        bool
            Whether it became the incumbent.
        """
        if offsets is None:
            return False
        offsets = np.asarray(offsets, dtype=np.int64)
        peak = plan_peak(self.problem, offsets)
        if self._best["peak"] is not None and peak >= self._best["peak"]:
            return False
        self._best["offsets"], self._best["peak"] = offsets.copy(), peak
        return True
