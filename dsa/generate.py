"""Random planning problems for tests and benchmarks.

:func:`random_trace` draws a :class:`dsa.Problem` with the shape of a real DNN inference trace
(``kind="dnn"``) or a structureless one (``kind="uniform"``). Generation is vectorised numpy: about a
second or less for a million buffers. The module imports nothing beyond numpy.

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

__all__ = ["random_trace", "KINDS"]

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
