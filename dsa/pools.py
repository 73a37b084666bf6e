"""Memory pools: fast and slow memories with capacities, planned together.

On the devices where static plans ship, memory comes in tiers: a small fast SRAM next to a large slow
DRAM. A :class:`Pool` is one of them: a name, a capacity in bytes (None: unbounded) and a cost per
unit of weight. Planning with pools (``dsa.solve(problem, pools=[...])``) gives every row a pool and
an offset inside it, so that the rows of each pool form a valid plan within its capacity, and
minimises the cost

    sum over rows i of cost(pool of i) x weight_i

where the weight of a row defaults to its size (a user may give another, such as the bytes a kernel
reads and writes). One pool, or none, is the classic problem.

:func:`check_pools` turns what the user gave (pools, the pools each row may use, weights) into a
:class:`PoolSpec`, checked once, which the strategies, the validator and :func:`finalize_pools` use:
what a row may use, what a plan costs (computed exactly, the same way everywhere, so that a cost and
a bound compare exactly), the sub-problem of each pool.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

import numpy as np

from dsa.problem import as_int_column
from dsa.solution import Solution, Status, as_conflict, as_offsets, describe_row, plan_peak, rows_text

__all__ = ["Pool", "PoolSpec", "check_pools", "finalize_pools", "pool_peaks"]

_MAX_VALUE = 2**62


@dataclass(frozen=True)
class Pool:
    """One memory: a name, a capacity in bytes and a cost per unit of weight.

    Parameters
    ----------
    name : str
        A non-empty label, unique among the pools of one call.
    capacity : int, optional
        Bytes the pool holds (a non-negative integer, at most ``2**62``); None: unbounded.
    cost : float, default 1.0
        What a unit of weight costs in this pool (a finite number >= 0): lower is faster. Pools are
        ranked by cost, ties by their order in the list.

    Raises
    ------
    ValueError
        For an empty name, a negative, non-integer or too large capacity, or a cost that is negative,
        NaN or infinite.

    Examples
    --------
    >>> import dsa
    >>> dsa.Pool("sram", 256 * 1024, cost=1.0), dsa.Pool("dram", None, cost=20)
    (Pool(name='sram', capacity=262144, cost=1.0), Pool(name='dram', capacity=None, cost=20.0))
    """

    name: str
    capacity: int | None = None
    cost: float = 1.0

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"a pool's name must be a non-empty string, got {self.name!r}")
        if self.capacity is not None:
            cap = self.capacity
            if isinstance(cap, (bool, np.bool_)) or not isinstance(cap, numbers.Real):
                raise ValueError(f"pool {self.name!r}: capacity must be an integer >= 0 or None, got {cap!r}")
            if not (isinstance(cap, numbers.Integral) or (math.isfinite(cap) and cap == int(cap))):
                raise ValueError(f"pool {self.name!r}: capacity must be an integer >= 0 or None, got {cap!r}")
            cap = int(cap)
            if cap < 0:
                raise ValueError(f"pool {self.name!r}: capacity {cap} is negative")
            if cap > _MAX_VALUE:
                raise ValueError(f"pool {self.name!r}: capacity {cap} is above 2**62")
            object.__setattr__(self, "capacity", cap)
        cost = self.cost
        if isinstance(cost, (bool, np.bool_)) or not isinstance(cost, numbers.Real) or not math.isfinite(cost) \
                or cost < 0:
            raise ValueError(f"pool {self.name!r}: cost must be a finite number >= 0, got {cost!r}")
        object.__setattr__(self, "cost", float(cost))


def _as_pool(item, k: int) -> Pool:
    if isinstance(item, Pool):
        return item
    if isinstance(item, dict):
        unknown = set(item) - {"name", "capacity", "cost"}
        if unknown:
            raise ValueError(f"pool {k}: unknown keys {sorted(unknown)}; a pool has name, capacity, cost")
        return Pool(**item)
    if isinstance(item, (tuple, list)) and 1 <= len(item) <= 3:
        return Pool(*item)
    raise ValueError(f"pool {k}: expected a dsa.Pool, a (name, capacity[, cost]) tuple or a dict, got {item!r}")


class PoolSpec:
    """The pools of one call, checked: what every row may use, its weight, and what a plan costs.

    Built by :func:`check_pools`; read-only.

    Attributes
    ----------
    pools : tuple of Pool
    allowed : numpy.ndarray of bool, shape (n, k)
        ``allowed[i, p]``: row ``i`` may live in pool ``p``.
    weights : numpy.ndarray, shape (n,)
        The weight of each row (int64, or float64 for weights given as fractions).
    rank : numpy.ndarray of int64
        The pool indices from the cheapest (fastest) to the dearest; ties keep the given order.
    """

    def __init__(self, pools, allowed, weights):
        self.pools = tuple(pools)
        self.allowed = allowed
        self.weights = weights
        self.rank = np.array(sorted(range(len(self.pools)), key=lambda p: (self.pools[p].cost, p)),
                             dtype=np.int64)
        self.allowed.flags.writeable = False
        self.weights.flags.writeable = False
        #: the pool costs as exact rationals (costs are compared exactly)
        self.exact_costs = [Fraction(pool.cost) for pool in self.pools]

    @cached_property
    def exact_weights(self) -> list:
        """The row weights as exact rationals (computed on first use: the searches need them)."""
        return [Fraction(w) for w in self.weights.tolist()]

    def __repr__(self) -> str:
        return f"PoolSpec(pools={list(self.pools)}, n={len(self.weights)})"

    def __len__(self) -> int:
        return len(self.pools)

    @property
    def names(self) -> tuple[str, ...]:
        """The pool names, in the given order."""
        return tuple(pool.name for pool in self.pools)

    @property
    def costs(self) -> np.ndarray:
        """The cost of each pool (float64)."""
        return np.array([pool.cost for pool in self.pools], dtype=np.float64)

    def capacity(self, p: int) -> int | None:
        """The capacity of pool ``p`` (None: unbounded)."""
        return self.pools[p].capacity

    def pool_weights(self, pool) -> list:
        """The total weight of the rows in each pool (exact: Python ints, or floats summed by fsum)."""
        pool = np.asarray(pool, dtype=np.int64)
        out = []
        for p in range(len(self.pools)):
            w = self.weights[pool == p]
            out.append(int(w.astype(object).sum()) if w.dtype.kind == "i" else math.fsum(w.tolist()))
        return out

    def cost(self, pool) -> float:
        """What an assignment costs: ``sum_i cost(pool[i]) * weight[i]``.

        Computed exactly (rationals) and rounded once, so that two assignments of the same cost, and a
        bound that is the cost of an assignment, compare equal."""
        return float(self.exact_cost(pool))

    def exact_cost(self, pool) -> Fraction:
        """The cost of an assignment as an exact rational number (see :meth:`cost`)."""
        return sum((c * Fraction(w) for c, w in zip(self.exact_costs, self.pool_weights(pool))), Fraction(0))

    def cheapest(self) -> np.ndarray:
        """Every row in its cheapest allowed pool: the assignment whose cost is :meth:`trivial_bound`."""
        order = np.full(len(self.weights), -1, dtype=np.int64)
        for p in self.rank[::-1].tolist():  # the cheapest allowed pool is written last
            order[self.allowed[:, p]] = p
        return order

    def round_up(self, bound: float) -> float:
        """A proven bound raised to the next cost that an assignment can have.

        With integer weights every cost is a multiple of ``1 / D``, D the least common denominator of
        the pool costs (as exact fractions), so a bound can be rounded up to such a multiple; with
        fractional weights it is returned as it is."""
        if self.weights.dtype.kind != "i" or not math.isfinite(bound):
            return bound
        denominator = 1
        for cost in self.exact_costs:
            denominator = denominator * cost.denominator // math.gcd(denominator, cost.denominator)
        if denominator > 2**20:
            return bound
        return float(Fraction(math.ceil(Fraction(bound) * denominator), denominator))

    def trivial_bound(self) -> float:
        """A proven lower bound on the cost: every row in its cheapest allowed pool, capacities ignored."""
        return self.cost(self.cheapest())

    def sub_problem(self, problem, rows, p: int):
        """The rows ``rows`` of ``problem`` as a problem of their own with pool ``p``'s capacity."""
        return problem.take(np.asarray(rows, dtype=np.int64)).replace(capacity=self.capacity(p))


def check_pools(problem, pools, allowed=None, weights=None) -> PoolSpec:
    """Check what a call gave about its pools, and build the :class:`PoolSpec`.

    Parameters
    ----------
    problem : Problem
        Without a capacity (each pool has its own).
    pools : sequence of Pool
        At least one; (name, capacity[, cost]) tuples and dicts are accepted too. Names are unique.
    allowed : sequence or array_like of bool, optional
        The pools each row may use: a boolean matrix of shape (n, k), or one entry per row holding a
        pool name, a list of pool names, or None (every pool). Default: every row may use every pool.
    weights : array_like, optional
        One finite number >= 0 per row (default: the row's size).

    Returns
    -------
    PoolSpec

    Raises
    ------
    ValueError
        Naming the rule: no pools, a duplicate or unknown pool name, a problem capacity given along
        with pools, a row allowed in no pool, a row larger than every pool it may use, a fixed row
        allowed in more than one pool or beyond its pool's capacity, a weight that is negative, NaN
        or infinite, a matrix of the wrong shape.

    Examples
    --------
    >>> import dsa
    >>> from dsa.pools import check_pools
    >>> p = dsa.Problem([0, 0], [2, 2], [4, 8])
    >>> spec = check_pools(p, [dsa.Pool("sram", 8), dsa.Pool("dram", None, 10)], allowed=[None, "dram"])
    >>> spec.allowed.tolist(), spec.trivial_bound()
    ([[True, True], [False, True]], 84.0)
    """
    n = len(problem)
    if isinstance(pools, (Pool, str)) or not hasattr(pools, "__iter__"):
        raise ValueError("pools must be a list of dsa.Pool")
    pools = [_as_pool(item, k) for k, item in enumerate(pools)]
    if not pools:
        raise ValueError("pools is empty: give at least one dsa.Pool")
    names = [pool.name for pool in pools]
    seen = set()
    for name in names:
        if name in seen:
            raise ValueError(f"pool name {name!r} is given twice: pool names must be unique")
        seen.add(name)
    if problem.capacity is not None:
        raise ValueError("a capacity and pools cannot be given together: give each pool its capacity")
    k = len(pools)
    index = {name: p for p, name in enumerate(names)}

    if allowed is None:
        mask = np.ones((n, k), dtype=bool)
    elif isinstance(allowed, np.ndarray) and allowed.ndim == 2:
        if allowed.shape != (n, k):
            raise ValueError(f"allowed must have shape (rows, pools) = ({n}, {k}), got {allowed.shape}")
        if allowed.dtype != bool:
            raise ValueError(f"an allowed matrix must be boolean, got dtype {allowed.dtype}")
        mask = allowed.copy()
    else:
        try:
            entries = list(allowed)
        except TypeError:
            raise ValueError("allowed must be a boolean matrix (rows x pools) or one entry per row, "
                             f"got {type(allowed).__name__}") from None
        if len(entries) != n:
            raise ValueError(f"allowed must have one entry per row ({n}), got {len(entries)}")
        mask = np.zeros((n, k), dtype=bool)
        for i, entry in enumerate(entries):
            if entry is None:
                mask[i] = True
                continue
            if isinstance(entry, str):
                entry = [entry]
            try:
                entry = list(entry)
            except TypeError:
                raise ValueError(f"{describe_row(problem, i)}: allowed pools must be a pool name, a list of pool names "
                                 f"or None, got {entry!r}") from None
            if entry and all(isinstance(v, (bool, np.bool_)) for v in entry):
                if len(entry) != k:
                    raise ValueError(f"{describe_row(problem, i)}: {len(entry)} allowed flags for {k} pools")
                mask[i] = entry
                continue
            for name in entry:
                if name not in index:
                    raise ValueError(f"{describe_row(problem, i)}: unknown pool {name!r}; pools: {', '.join(names)}")
                mask[i, index[name]] = True
    none = np.flatnonzero(~mask.any(axis=1))
    if len(none):
        raise ValueError(f"{describe_row(problem, int(none[0]))} is allowed in no pool: every row needs at least one")

    caps = np.array([_MAX_VALUE if pool.capacity is None else pool.capacity for pool in pools], dtype=np.int64)
    room = np.where(mask, caps[None, :], -1).max(axis=1) if n else np.zeros(0, dtype=np.int64)
    big = np.flatnonzero(problem.sizes > room)
    if len(big):
        i = int(big[0])
        usable = [names[p] for p in np.flatnonzero(mask[i])]
        raise ValueError(f"{describe_row(problem, i)} (size {problem.sizes[i]}) is larger than every pool it may use "
                         f"({', '.join(f'{name}: {pools[index[name]].capacity}' for name in usable)})")
    fixed = np.flatnonzero(problem.is_fixed)
    for i in fixed.tolist():
        usable = np.flatnonzero(mask[i])
        if len(usable) != 1:
            raise ValueError(f"{describe_row(problem, i)} has a fixed offset but may use {len(usable)} pools: a fixed "
                             "row must be allowed in exactly one pool, the one its offset is in")
        cap = pools[int(usable[0])].capacity
        end = int(problem.fixed_offsets[i] + problem.sizes[i])
        if cap is not None and end > cap:
            raise ValueError(f"{describe_row(problem, i)}: its fixed offset ends at {end}, beyond the capacity {cap} of "
                             f"pool {pools[int(usable[0])].name!r}")

    if weights is None:
        w = problem.sizes.copy()
    else:
        raw = np.asarray(weights)
        if raw.shape != (n,):
            raise ValueError(f"weights must have one value per row ({n}), got shape {raw.shape}")
        if raw.dtype.kind in "iu":
            w = as_int_column(raw, "weight", n, problem.ids)
        else:
            try:
                w = raw.astype(np.float64)
            except (TypeError, ValueError):
                raise ValueError(f"weights must be numbers, got dtype {raw.dtype}") from None
            if raw.dtype.kind == "b":
                raise ValueError("weights must be numbers, not booleans")
        bad = np.flatnonzero(~np.isfinite(w) | (w < 0)) if w.dtype.kind == "f" else np.flatnonzero(w < 0)
        if len(bad):
            i = int(bad[0])
            raise ValueError(f"{describe_row(problem, i)}: weight {raw[i]!r} must be a finite number >= 0")
        if w.dtype.kind == "f" and np.all(w == np.floor(w)) and np.all(w < 2.0**53):
            w = w.astype(np.int64)
    return PoolSpec(pools, mask, w)


def pool_peaks(problem, spec: PoolSpec, pool, offsets) -> tuple[int, ...]:
    """The peak of each pool: ``max(offset + size)`` over its rows (0 for an empty pool)."""
    pool = np.asarray(pool, dtype=np.int64)
    return tuple(plan_peak(problem, offsets, np.flatnonzero(pool == p)) for p in range(len(spec)))


def as_assignment(spec: PoolSpec, raw, n: int) -> tuple[np.ndarray | None, str]:
    """A strategy's pool indices as int64: ``(pool, "")``, or ``(None, reason)`` if they are none."""
    try:
        arr = np.asarray(raw)
    except (TypeError, ValueError):
        return None, "the strategy returned pool indices that are not one integer per row"
    if arr.shape != (n,):
        return None, f"the strategy returned pool indices of shape {arr.shape} for {n} rows"
    if n and arr.dtype.kind not in "iu":
        return None, f"the strategy returned non-integer pool indices (dtype {arr.dtype})"
    arr = arr.astype(np.int64)
    bad = np.flatnonzero((arr < 0) | (arr >= len(spec)))
    if len(bad):
        return None, f"the strategy returned pool index {arr[bad[0]]} for row {int(bad[0])}, not one of 0..{len(spec) - 1}"
    return arr, ""


def _as_plan(problem, spec: PoolSpec, pool, offsets):
    """A strategy's assignment and offsets as int64 arrays: ``(pool, offsets, "")``; ``(None, None,
    reason)`` when they are no plan; ``(None, None, "")`` when the strategy gave none."""
    if pool is None or offsets is None:
        return None, None, ""
    pool, reason = as_assignment(spec, pool, len(problem))
    if not reason:
        offsets, reason = as_offsets(problem, offsets)
    return (None, None, reason) if reason else (pool, offsets, "")


def make_pool_solution(problem, spec: PoolSpec, pool, offsets, *, strategy: str, cost_bound=0.0,
                       limit_reached: bool = False, error: str | None = None, message: str = "",
                       stats: dict | None = None, conflict=None, status: Status = Status.FEASIBLE) -> Solution:
    """A pool strategy's raw result: its assignment and offsets and the facts of its run.

    As :func:`dsa.solution.make_solution` for one slab: strategies report facts (the plan, a bound on
    the cost they *proved* — ``math.inf`` when they proved that no assignment fits —, whether a limit
    stopped them, why they failed); :func:`finalize_pools` alone decides the status.
    """
    if error is not None:
        status, message = Status.ERROR, error
    elif limit_reached:
        status = Status.LIMIT_REACHED
    pool, offsets, reason = _as_plan(problem, spec, pool, offsets)
    if reason:
        status, message = Status.ERROR, reason
    return Solution(offsets=offsets, peak=None, lower_bound=0, status=status, success=False, message=message,
                    strategy=strategy, stats=dict(stats or {}), conflict=as_conflict(problem, conflict),
                    pool=pool, cost_bound=float(cost_bound))


def finalize_pools(problem, spec: PoolSpec, solution: Solution, *, error: str | None = None,
                   checked: bool = True, extra_stats: dict | None = None) -> Solution:
    """Decide the status of a plan over pools, from facts, in one place (as :func:`dsa.solution.finalize`).

    The final ``cost_bound`` is the larger of the strategy's proven bound and
    :meth:`PoolSpec.trivial_bound`. OPTIMAL: a valid plan whose cost equals it. INFEASIBLE: the
    strategy proved that no assignment fits (bound ``inf``), with ``conflict`` when it found one.
    NO_FIT: no plan, infeasibility not proven. A bound above the cost of a valid plan is a bug
    (ERROR). ``stats`` gets ``pool_weights`` (the weight in each pool) and ``gap``,
    ``(cost - cost_bound) / cost``.
    """
    pool, offsets, status, message = solution.pool, solution.offsets, solution.status, solution.message
    stats = {**solution.stats, **(extra_stats or {})}
    claimed = solution.cost_bound if solution.cost_bound is not None else 0.0
    bound = max(float(claimed), spec.trivial_bound())
    pool, offsets, reason = _as_plan(problem, spec, pool, offsets)
    if reason:
        error = error or reason
    cost = peaks = None
    if pool is not None:
        cost = spec.cost(pool)
        peaks = pool_peaks(problem, spec, pool, offsets)
        stats["pool_weights"] = spec.pool_weights(pool)
        stats["pool_capacities"] = [spec.capacity(p) for p in range(len(spec))]
        stats["pool_costs"] = spec.costs.tolist()
        if error is None and bound > cost:
            error = f"the strategy claims a cost bound {claimed} above the cost {cost} of its own plan"
    if error is not None:
        status, message = Status.ERROR, f"plan failed validation: {error}"
    elif solution.status is Status.ERROR:
        message = message or "the strategy failed"
    elif pool is None:
        if math.isinf(bound):
            status = Status.INFEASIBLE
            message = message or "infeasible: no assignment of the rows to their allowed pools fits"
        elif status == Status.LIMIT_REACHED:
            message = message or "a time or node limit stopped the strategy before it found a plan"
        else:
            status = Status.NO_FIT
            message = message or "no plan within the pools' capacities was found; infeasibility is not proven"
    elif cost == bound:
        status = Status.OPTIMAL
        message = message if solution.status is Status.OPTIMAL and message else \
            f"optimal: cost {cost:g} equals the proven bound"
    else:
        status = Status.LIMIT_REACHED if status == Status.LIMIT_REACHED else Status.FEASIBLE
        message = message or (f"{status.value}: cost {cost:g}, proven bound {bound:g} "
                              f"({cost / bound:.4f} x)" if bound else f"{status.value}: cost {cost:g}")
    success = pool is not None and status in (Status.OPTIMAL, Status.FEASIBLE, Status.LIMIT_REACHED)
    if success and not checked:
        stats["unchecked_status"] = status.value
        status, success = Status.UNCHECKED, False
        message = "not validated (validate=False): check the plan with dsa.validate before using it"
    if cost is not None and status is not Status.ERROR:
        stats["gap"] = (cost - bound) / cost if cost else 0.0
    conflict = as_conflict(problem, solution.conflict) if status == Status.INFEASIBLE else None
    if conflict is not None and "(conflict: rows" not in message:
        message += (f"; {len(conflict)} rows cannot all fit in their allowed pools together, and can once "
                    f"any one of them is removed (conflict: rows {rows_text(conflict)})")
    return Solution(offsets=offsets, peak=max(peaks) if peaks else None,
                    lower_bound=0, status=status, success=success, message=message,
                    strategy=solution.strategy, stats=stats, conflict=conflict, pool=pool,
                    pool_peaks=peaks, cost=cost, cost_bound=bound, pool_names=spec.names)
