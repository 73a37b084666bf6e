"""Random planning problems for tests and benchmarks.

:func:`random_trace` draws a :class:`dsa.Problem` with the shape of a real DNN inference trace
(``kind="dnn"``) or a structureless one (``kind="uniform"``). Generation is vectorised numpy: about a
second or less for a million buffers. The module imports nothing beyond numpy.

:func:`rectangle_cut` draws a problem whose optimum is known: a time x address rectangle cut into
buffers by guillotine splits and non-guillotine "pinwheel" blocks, so that the optimal peak equals
LOAD (the height of the rectangle). :func:`guillotine_separable` tells whether a set of rectangles
can be taken apart by straight cuts alone.

Examples
--------
>>> import dsa.generate
>>> p = dsa.generate.random_trace(1000, seed=0)
>>> len(p)
1000
"""
from __future__ import annotations

import numbers

import numpy as np

__all__ = ["random_trace", "KINDS", "rectangle_cut", "guillotine_separable", "LIFETIMES", "DRAWS"]

KINDS = ("dnn", "uniform")

# sizes: log-uniform in [4 KiB, 4 MiB], rounded up to a multiple of 64 bytes
_MIN_SIZE = 4 << 10
_MAX_SIZE = 4 << 20
_SIZE_QUANTUM = 64

# dnn kind
_P_TEMP = 0.25                      # share of buffers that are an op's short-lived temporary
_P_SKIP = 0.10                      # share of op outputs that are skip connections
_NEAR_USES = np.array([1, 2, 3])    # an ordinary output dies after 1-3 later ops ...
_NEAR_P = np.array([0.6, 0.25, 0.15])  # ... with these probabilities
_SKIP_MIN, _SKIP_MAX = 4, 256       # a skip connection dies after 4-256 later ops (log-uniform)

# uniform kind
_MEAN_LIFETIME = 16.0               # geometric lifetimes (>= 1) with this mean


def _sizes(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` sizes, log-uniform in ``[4 KiB, 4 MiB]``, rounded up to a multiple of 64 bytes."""
    raw = np.exp(rng.uniform(np.log(_MIN_SIZE), np.log(_MAX_SIZE), n))
    q = np.ceil(raw / _SIZE_QUANTUM).astype(np.int64) * _SIZE_QUANTUM
    return np.clip(q, _MIN_SIZE, _MAX_SIZE)


def _dnn(rng: np.random.Generator, n: int):
    """Starts, ends and sizes of a DNN-like forward pass with ``n`` buffers (times are event indices).

    Op ``k`` runs as four phases of events, in this order: (0) allocate its output, (1) allocate its
    temporaries, (2) free its temporaries (last allocated, first freed), (3) free the outputs of earlier
    ops whose last use was op ``k`` (in random order). Each event has its own time index, as in the
    bundled real traces. Outputs still needed after the last op are never freed and end one past the
    last event.
    """
    is_temp = rng.random(n) < _P_TEMP
    is_temp[0] = False
    op = np.cumsum(~is_temp) - 1                     # the op each buffer belongs to (rows in op order)
    n_ops = int(op[-1]) + 1
    outputs = np.flatnonzero(~is_temp)
    temps = np.flatnonzero(is_temp)

    # last use of each output: 1-3 ops later, or much later for a skip connection
    near = rng.choice(_NEAR_USES, size=n_ops, p=_NEAR_P)
    skip = np.rint(np.exp(rng.uniform(np.log(_SKIP_MIN), np.log(_SKIP_MAX), n_ops))).astype(np.int64)
    last_use = np.arange(n_ops) + np.where(rng.random(n_ops) < _P_SKIP, skip, near)
    freed = last_use < n_ops
    freed_outputs = outputs[freed]

    # events, each with a unique sort key: (op * 4 + phase) * (n + 1) + tie-break in [0, n]
    stride = np.int64(n + 1)
    rows = np.arange(n, dtype=np.int64)
    alloc_key = (op * 4 + np.where(is_temp, 1, 0)) * stride + rows     # rows in allocation order
    temp_free_key = (op[temps] * 4 + 2) * stride + (n - temps)          # LIFO within an op
    out_free_key = (last_use[freed] * 4 + 3) * stride + rng.permutation(n)[: len(freed_outputs)]
    keys = np.concatenate([alloc_key, temp_free_key, out_free_key])
    order = np.argsort(keys)
    times = np.empty(len(keys), dtype=np.int64)
    times[order] = np.arange(len(keys), dtype=np.int64)

    starts = times[:n]
    horizon = len(keys)                              # one past the last event index
    ends = np.full(n, horizon, dtype=np.int64)
    ends[temps] = times[n: n + len(temps)]
    ends[freed_outputs] = times[n + len(temps):]
    return starts, ends, _sizes(rng, n)


def _uniform(rng: np.random.Generator, n: int):
    """Starts uniform in ``[0, n)``, geometric lifetimes (mean 16), log-uniform sizes."""
    starts = rng.integers(0, max(n, 1), size=n, dtype=np.int64)
    lifetimes = rng.geometric(1.0 / _MEAN_LIFETIME, size=n).astype(np.int64)
    return starts, starts + lifetimes, _sizes(rng, n)


def random_trace(n, *, seed=None, kind: str = "dnn", alignment=1):
    """Draw a random planning problem with ``n`` buffers.

    Parameters
    ----------
    n : int
        Number of buffers (rows), ``>= 0``.
    seed : int, numpy.random.SeedSequence or numpy.random.Generator, optional
        Seed for :func:`numpy.random.default_rng`. The same seed gives the same problem.
    kind : {"dnn", "uniform"}, default "dnn"
        ``"dnn"``: a DNN-like forward pass. A sequence of ops each allocates an output and, for about a
        quarter of the buffers, a short-lived temporary that is freed before the op ends. Most outputs
        die after 1 to 3 later ops; about 10% are skip connections that live 4 to 256 ops (log-uniform).
        Times are event indices, one allocation or free per index, as in the bundled real traces, and
        rows are in allocation order. The bytes alive at one time stay moderate however large ``n`` is.

        ``"uniform"``: starts uniform in ``[0, n)`` and geometric lifetimes (at least 1, mean 16), with
        no structure.

        In both kinds sizes are log-uniform between 4 KiB and 4 MiB, rounded up to a multiple of 64
        bytes.
    alignment : int, default 1
        Alignment of every buffer (``Problem.alignments``), ``>= 1``.

    Returns
    -------
    Problem
        ``n`` buffers with ids ``0..n-1`` and no capacity.

    Raises
    ------
    ValueError
        If ``n`` is not a non-negative integer, ``kind`` is unknown (the message lists the kinds) or
        ``alignment`` is not a positive integer.

    Notes
    -----
    Vectorised numpy, O(n log n): well under a second for ``n = 10**6``.

    Examples
    --------
    >>> import dsa
    >>> from dsa.generate import random_trace
    >>> p = random_trace(10_000, seed=1)
    >>> len(p), p == random_trace(10_000, seed=1)
    (10000, True)
    >>> dsa.lower_bound(p) < int(p.sizes.sum()) // 100   # only a few buffers are alive at once
    True
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    if not isinstance(kind, str) or kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; valid kinds: {', '.join(KINDS)}")
    if isinstance(alignment, bool) or not isinstance(alignment, numbers.Integral) or alignment < 1:
        raise ValueError(f"alignment must be a positive integer, got {alignment!r}")
    from dsa.problem import Problem

    n = int(n)
    rng = np.random.default_rng(seed)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        starts, ends, sizes = empty, empty, empty
    elif kind == "dnn":
        starts, ends, sizes = _dnn(rng, n)
    else:
        starts, ends, sizes = _uniform(rng, n)
    alignments = None if alignment == 1 else np.full(n, int(alignment), dtype=np.int64)
    return Problem(starts, ends, sizes, alignments=alignments)


# rectangle_cut: probability of a split along the time axis (a guillotine split), by lifetime mix
LIFETIMES = ("mixed", "short", "long", "balanced")
_P_TIME_SPLIT = {"mixed": 0.5, "short": 0.75, "long": 0.25}
# rectangle_cut: how the next piece to split is drawn
DRAWS = ("largest", "area")


def _area_draw(pieces, n, rng):
    """``push(i)``, ``pick()`` for :func:`rectangle_cut` with ``draw="area"``: ``pick`` draws a piece
    of area >= 2 with probability proportional to its area, from a Fenwick tree over the piece indices
    (``n`` at most) holding each piece's area as ``push`` last saw it (0 when it cannot be split).
    Exact integer weights; O(log n) each."""
    tree = [0] * (n + 1)
    weight = [0] * n
    top = 1 << (n.bit_length() - 1)

    def push(i):
        x0, x1, y0, y1 = pieces[i]
        area = (x1 - x0) * (y1 - y0)
        delta = (area if area >= 2 else 0) - weight[i]
        weight[i] += delta
        k = i + 1
        while k <= n:
            tree[k] += delta
            k += k & -k

    def pick():
        total = 0
        k = n
        while k > 0:
            total += tree[k]
            k -= k & -k
        r = int(rng.integers(total))  # the piece whose prefix of weights first exceeds r
        pos = 0
        step = top
        while step:
            if pos + step <= n and tree[pos + step] <= r:
                pos += step
                r -= tree[pos]
            step >>= 1
        return pos

    return push, pick


def _check_int(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_real(name, value, lo, hi, lo_open=False):
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value)
    ok = ok and (value > lo if lo_open else value >= lo) and value <= hi
    if not ok:
        left = "(" if lo_open else "["
        raise ValueError(f"{name} must be a number in {left}{lo:g}, {hi:g}], got {value!r}")
    return float(value)


def rectangle_cut(n, *, seed=None, aspect=1.0, pinwheel=0.2, alignment=64, lifetimes: str = "mixed",
                  cells_per_buffer=16, draw: str = "largest", return_plan: bool = False,
                  return_blocks: bool = False, return_tree: bool = False):
    """Draw a problem with ``n`` buffers whose optimal peak is known: it equals LOAD.

    A rectangle of ``T`` time steps by ``H`` bytes is cut into ``n`` pieces; each piece
    ``[t0, t1) x [y0, y1)`` becomes a buffer alive over ``[t0, t1)`` with size ``y1 - y0``. The cut
    itself is a valid plan (offset ``y0``) of peak ``H``, and at every time step the pieces alive
    cover the whole height, so LOAD is ``H`` too: the plan is optimal and the optimum is ``H``.

    The pieces come from repeated splits of a piece drawn at random, larger pieces more often (see
    ``draw``): a guillotine split (one straight cut along the time or the address axis) or, with
    probability ``pinwheel``, a "pinwheel" block: four rectangles wound around a centre one, so that
    no straight cut separates any of them (see :func:`guillotine_separable`). Pinwheels make the
    instances hard for searches that build plans by stacking buffers in order. So do coarse grids
    (few ``cells_per_buffer``, where many pieces share their boundaries); on fine grids (thousands of
    cells per buffer, above all on a long rectangle) guillotine cuts are far easier.

    Parameters
    ----------
    n : int
        Number of buffers, ``>= 1`` (100 to 100,000 is the intended range).
    seed : int, numpy.random.SeedSequence or numpy.random.Generator, optional
        Seed for :func:`numpy.random.default_rng`. The same seed and parameters give the same problem.
    aspect : float, default 1.0
        Time steps per address quantum of the rectangle (``T / (H / alignment)``), in
        ``[0.01, 100]``: large values give a long, low rectangle (many time steps, few bytes).
    pinwheel : float, default 0.2
        Probability in ``[0, 1]`` that a split is a pinwheel block (5 pieces) rather than a
        guillotine split (2 pieces); 0 gives guillotine cuts only.
    alignment : int, default 64
        Size quantum in bytes, ``>= 1``: every size and every offset of the known plan is a multiple of
        it (the problem itself carries no alignment constraint).
    lifetimes : {"mixed", "short", "long", "balanced"}, default "mixed"
        How guillotine splits choose their axis: ``"mixed"`` the time or the address axis with equal
        probability (short- and long-lived buffers), ``"short"`` the time axis three times in four
        (many short lifetimes), ``"long"`` the address axis three times in four (long lifetimes, thin
        buffers), ``"balanced"`` the longer side relative to ``aspect`` (pieces of similar shape).
    cells_per_buffer : int, default 16
        Granularity, ``>= 1``: the rectangle has about this many cells (time step x size quantum) per
        buffer. Few cells give coarse pieces of few distinct shapes, many of which are alike; many
        cells give pieces of nearly unique sizes and lifetimes over many time steps (4,096: a nearly
        continuous cut).
    draw : {"largest", "area"}, default "largest"
        Which piece is split next: ``"largest"`` one of the largest (the piece of largest area times a
        random weight in ``[0.25, 1.25)``), so pieces end up of similar area; ``"area"`` any piece, with
        probability proportional to its area (as omnimalloc's ``TilingSource`` draws them), so small
        pieces are split too and areas spread over orders of magnitude: a few large buffers among
        many small ones.
    return_plan : bool, default False
        Also return the known optimal plan.
    return_blocks : bool, default False
        Also return the pinwheel blocks as they were cut (later splits may cut their pieces further):
        a list of int64 arrays of shape (5, 4), one row ``(start, end, low, high)`` per rectangle
        (times, then bytes), the centre last.
    return_tree : bool, default False
        Also return the cut's tree: ``(nodes, parent)``. ``nodes`` is an int64 array of shape (k, 5),
        one row ``(start, end, low, high, up)`` per rectangle that was split, in the order split
        (the whole rectangle first, ``up`` -1; otherwise ``up`` is the row of ``nodes`` it was cut
        from); ``parent`` (int64, one per buffer) is the row of ``nodes`` each buffer's piece was cut
        from (-1 when ``n == 1``). The pieces inside a node tile it exactly, so a node of two or
        more buffers is a *rectangle* of the instance (a set of buffers whose bytes alive are the
        same over a window of time and zero outside it) that a plan at the optimum can hold in a band,
        as the decompositions of :mod:`dsa.strategies._layers` look for.

    Returns
    -------
    Problem or tuple
        The problem (ids ``0..n-1`` in random order, no capacity); with ``return_plan``, then
        ``offsets`` (int64, peak = LOAD = the optimum); with ``return_blocks``, then the blocks;
        with ``return_tree``, then ``(nodes, parent)``.

    Raises
    ------
    ValueError
        Naming the parameter: ``n`` not an integer >= 1, ``aspect`` outside ``[0.01, 100]``,
        ``pinwheel`` outside ``[0, 1]``, ``alignment`` or ``cells_per_buffer`` not an integer >= 1, an
        unknown ``lifetimes`` or ``draw`` (the message lists the valid ones).

    Notes
    -----
    O(n log n) (a heap of pieces, or for ``draw="area"`` a Fenwick tree of their areas); about a
    second for ``n = 100_000``. The rectangle has about ``cells_per_buffer * n`` cells (time step x
    quantum), at least ``n``, so pieces can always be split.

    Examples
    --------
    >>> import dsa
    >>> from dsa.generate import rectangle_cut
    >>> p, offsets = rectangle_cut(500, seed=3, return_plan=True)
    >>> len(p), dsa.lower_bound(p) == int((offsets + p.sizes).max())
    (500, True)
    >>> bool(p.sizes.min() % 64 == 0)
    True
    """
    import heapq

    n = _check_int("n", n, 1)
    aspect = _check_real("aspect", aspect, 0.01, 100.0)
    pinwheel = _check_real("pinwheel", pinwheel, 0.0, 1.0)
    alignment = _check_int("alignment", alignment, 1)
    cells_per_buffer = _check_int("cells_per_buffer", cells_per_buffer, 1)
    if not isinstance(lifetimes, str) or lifetimes not in LIFETIMES:
        raise ValueError(f"unknown lifetimes {lifetimes!r}; valid: {', '.join(LIFETIMES)}")
    if not isinstance(draw, str) or draw not in DRAWS:
        raise ValueError(f"unknown draw {draw!r}; valid: {', '.join(DRAWS)}")
    from dsa.problem import Problem

    rng = np.random.default_rng(seed)
    cells = cells_per_buffer * n
    width = max(1, int(round(np.sqrt(cells * aspect))))          # T, time steps
    height = max(1, -(-cells // width))                          # H / alignment, quanta
    p_time = _P_TIME_SPLIT.get(lifetimes)

    # pieces as (x0, x1, y0, y1); push(i) offers piece i (again) for splitting, pick() takes the next
    pieces = [(0, width, 0, height)]
    blocks = []
    nodes, made = [], [-1]               # (the split pieces, and per piece the node it was cut from)
    if draw == "largest":
        # a heap of the splittable pieces keyed by -(area x random weight)
        heap = []
        counter = 0

        def push(i):
            nonlocal counter
            x0, x1, y0, y1 = pieces[i]
            area = (x1 - x0) * (y1 - y0)
            if area >= 2:
                heapq.heappush(heap, (-area * (0.25 + rng.random()), counter, i))
                counter += 1

        def pick():
            return heapq.heappop(heap)[2]
    else:
        push, pick = _area_draw(pieces, n, rng)

    push(0)
    while len(pieces) < n:
        i = pick()
        x0, x1, y0, y1 = pieces[i]
        w, h = x1 - x0, y1 - y0
        nodes.append((x0, x1, y0, y1, made[i]))
        if n - len(pieces) >= 4 and w >= 3 and h >= 3 and rng.random() < pinwheel:
            a, b = np.sort(rng.choice(np.arange(x0 + 1, x1), 2, replace=False)).tolist()
            c, d = np.sort(rng.choice(np.arange(y0 + 1, y1), 2, replace=False)).tolist()
            new = [(x0, b, y0, c), (b, x1, y0, d), (a, x1, d, y1), (x0, a, c, y1), (a, b, c, d)]
            ids = [i] + list(range(len(pieces), len(pieces) + 4))
            pieces[i] = new[0]
            pieces.extend(new[1:])
            blocks.append(new)
        else:
            if w >= 2 and h >= 2:
                along_time = (w / aspect > h) if p_time is None else rng.random() < p_time
            else:
                along_time = w >= 2
            if along_time:
                cut = int(rng.integers(x0 + 1, x1))
                new = [(x0, cut, y0, y1), (cut, x1, y0, y1)]
            else:
                cut = int(rng.integers(y0 + 1, y1))
                new = [(x0, x1, y0, cut), (x0, x1, cut, y1)]
            ids = [i, len(pieces)]
            pieces[i] = new[0]
            pieces.append(new[1])
        made.extend([0] * (len(pieces) - len(made)))
        for j in ids:
            made[j] = len(nodes) - 1
            push(j)

    rect = np.array(pieces, dtype=np.int64).reshape(-1, 4)
    perm = rng.permutation(n)
    rect = rect[perm]                            # row r is piece perm[r]
    q = np.int64(alignment)
    problem = Problem(rect[:, 0], rect[:, 1], (rect[:, 3] - rect[:, 2]) * q)
    out = [problem]
    if return_plan:
        out.append(rect[:, 2] * q)
    if return_blocks:
        out.append([np.array(b, dtype=np.int64) * np.array([1, 1, q, q]) for b in blocks])
    if return_tree:
        tree = np.array(nodes, dtype=np.int64).reshape(-1, 5)
        tree[:, 2:4] *= q
        out.append((tree, np.asarray(made, dtype=np.int64)[perm]))
    return out[0] if len(out) == 1 else tuple(out)


def guillotine_separable(starts, ends, lows, highs) -> bool:
    """Whether rectangles ``[starts, ends) x [lows, highs)`` can be taken apart by straight cuts alone.

    A guillotine cut is a line across the bounding box of a set (along either axis) that crosses the
    interior of none of its rectangles; the set is separable if one exists and both sides are
    separable in turn (a single rectangle is). A pinwheel block of :func:`rectangle_cut` is not.

    Parameters
    ----------
    starts, ends, lows, highs : array of int
        The rectangles' sides (e.g. a problem's starts and ends, and offsets and offsets + sizes).

    Returns
    -------
    bool

    Notes
    -----
    O(k^2 log k) for ``k`` rectangles (meant for small sets).

    Examples
    --------
    >>> from dsa.generate import guillotine_separable
    >>> guillotine_separable([0, 1], [1, 2], [0, 0], [5, 5])      # side by side
    True
    >>> guillotine_separable([0, 2, 1, 0, 1], [2, 3, 3, 1, 2], [0, 0, 2, 1, 1], [1, 2, 3, 3, 2])
    False
    """
    rects = np.column_stack([np.asarray(a, dtype=np.int64).ravel() for a in (starts, ends, lows, highs)])
    stack = [rects]
    while stack:
        r = stack.pop()
        if len(r) <= 1:
            continue
        for lo_col, hi_col in ((0, 1), (2, 3)):
            cuts = np.unique(r[:, lo_col])
            cuts = cuts[cuts > r[:, lo_col].min()]
            crossed = (r[:, lo_col][None, :] < cuts[:, None]) & (cuts[:, None] < r[:, hi_col][None, :])
            free = cuts[~crossed.any(axis=1)]
            if len(free):
                side = r[:, lo_col] < free[0]
                stack.extend([r[side], r[~side]])
                break
        else:
            return False
    return True
