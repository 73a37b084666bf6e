"""The planning problem: buffers with half-open lifetimes ``[start, end)`` and sizes.

A :class:`Problem` is frozen and stored as a struct of int64 arrays. Rows are identified by their
index; ``ids`` are labels only. Every constructor goes through one input check,
:func:`_check_inputs`, which raises :class:`ValueError` naming the row and the rule it breaks.
"""
from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["Problem", "as_int_column"]

# Offsets and sizes are added together in int64; keeping every value and the total size below 2**62
# leaves room for alignment padding without overflow.
_MAX_VALUE = 2**62
FREE = -1  # sentinel in ``Problem.fixed_offsets`` for a buffer whose offset is not fixed

_START_KEYS = ("start", "lower", "begin")
_END_KEYS = ("end", "upper")


def _row(i: int, ids: Sequence | None) -> str:
    if ids is None or isinstance(ids, range):
        return f"row {i}"
    return f"row {i} (id {ids[i]!r})"


def as_int_column(values: Any, name: str, n: int | None, ids, *, allow_free: bool = False) -> np.ndarray:
    """Convert one column to int64, rejecting NaN, infinities, fractions, bools and non-numbers.

    The rule every integer column of a problem follows (starts, ends, sizes, alignments, fixed
    offsets, the capacity), shared with :mod:`dsa.io`'s reading of plans.

    Parameters
    ----------
    values : array_like
        The column.
    name : str
        What the column holds (``"size"``), for the messages.
    n : int or None
        The number of rows it must have (None: any).
    ids : sequence or None
        Row labels, for the messages.
    allow_free : bool, default False
        Read missing values (None, NaN) as ``FREE``, the marker of a row without a fixed offset.

    Returns
    -------
    numpy.ndarray of int64

    Raises
    ------
    ValueError
        Naming the row and the rule it breaks.
    """
    # a masked array exists only once numpy.ma is imported; np.ma would import it (about 0.5 MB of
    # Python objects that an attached model's serving process would keep for nothing)
    if "numpy.ma" in sys.modules and np.ma.isMaskedArray(values):
        masked = np.ma.getmaskarray(values)
        if masked.any():
            i = int(np.argmax(masked))
            raise ValueError(f"{_row(i, ids)}: {name} is masked (a missing value); fill it or drop the row")
        values = np.ma.getdata(values)
    arr = values if isinstance(values, np.ndarray) else np.asarray(values)
    if not isinstance(values, np.ndarray) and (
            arr.dtype.kind not in "iuf"
            or (arr.ndim == 1 and any(isinstance(v, (bool, np.bool_)) for v in values))):
        # keep mixed input as given: [1, "a"] must not become strings, nor [True, 1] integers
        arr = np.asarray(values, dtype=object)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if n is not None and len(arr) != n:
        raise ValueError(f"{name} has {len(arr)} entries but there are {n} buffers")
    if arr.dtype.kind in "iu":
        # the one range rule of every input path: |value| <= 2**62 (the same check as for floats
        # and Python ints below), so that sums of two values never wrap around int64
        big = (arr > _MAX_VALUE) | ((arr < -_MAX_VALUE) if arr.dtype.kind == "i" else False)
        if len(arr) and big.any():
            i = int(np.argmax(big))
            raise ValueError(f"{_row(i, ids)}: {name} {int(arr[i])} is too large (limit 2**62)")
        return arr.astype(np.int64, copy=True)
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr)
        if allow_free:
            bad &= ~np.isnan(arr)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{_row(i, ids)}: {name} must be a finite integer, got {arr[i]}")
        free = np.isnan(arr)
        frac = (arr != np.floor(arr)) & ~free
        if frac.any():
            i = int(np.argmax(frac))
            raise ValueError(f"{_row(i, ids)}: {name} must be an integer, got {arr[i]}")
        big = (np.abs(arr) > _MAX_VALUE) & ~free
        if big.any():
            i = int(np.argmax(big))
            raise ValueError(f"{_row(i, ids)}: {name} {arr[i]} is too large (limit 2**62)")
        return np.where(free, FREE, arr).astype(np.int64)
    # object, string, bool...: check element by element
    out = np.empty(len(arr), dtype=np.int64)
    for i, v in enumerate(arr.tolist()):
        if allow_free and (v is None or (isinstance(v, float) and math.isnan(v))):
            out[i] = FREE
            continue
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise ValueError(f"{_row(i, ids)}: {name} must be an integer, got {v!r}")
        if isinstance(v, numbers.Integral):
            iv = int(v)
        else:
            fv = float(v)
            if not math.isfinite(fv):
                raise ValueError(f"{_row(i, ids)}: {name} must be a finite integer, got {v!r}")
            if fv != math.floor(fv):
                raise ValueError(f"{_row(i, ids)}: {name} must be an integer, got {v!r}")
            iv = int(fv)
        if abs(iv) > _MAX_VALUE:
            raise ValueError(f"{_row(i, ids)}: {name} {iv} is too large (limit 2**62)")
        out[i] = iv
    return out


def _exact_sum(values: np.ndarray) -> int:
    """The sum of non-negative int64 ``values`` as a Python int (an int64 sum could wrap around)."""
    high = int((values >> 31).sum())  # each part below 2**32: no int64 sum of < 2**31 rows can wrap
    low = int((values & (2**31 - 1)).sum())
    return (high << 31) + low


def _check_worst_peak(sizes, alignments, fixed, ids) -> None:
    """Raise ValueError if a plan of these rows could put a buffer's end beyond ``2**62``.

    A strategy may stack every row that is not fixed above the fixed buffers, each after up to
    ``alignment - 1`` bytes of padding, so the largest peak a plan can reach is the highest end of a
    fixed buffer plus the sum over the other rows of ``size + alignment - 1``. Strategies add offsets,
    sizes and alignments in int64; below ``2**62`` none of their sums can wrap around. The sum is
    taken in Python ints, so that the check itself cannot overflow.
    """
    free = fixed == FREE
    terms = sizes[free] + (alignments[free] - 1)  # each term < 2**63: both parts are <= 2**62
    top = int((fixed[~free] + sizes[~free]).max()) if not free.all() else 0
    worst = top + _exact_sum(terms)
    if worst > _MAX_VALUE:
        i = int(np.flatnonzero(free)[np.argmax(terms)])
        raise ValueError(
            f"the worst-case peak, the sum of size + alignment - 1 over the rows that are not fixed "
            f"plus the highest end of a fixed buffer ({worst}), exceeds 2**62, the largest peak dsa can "
            f"plan (the largest term is {_row(i, ids)}: size {sizes[i]}, alignment {alignments[i]})")


def _check_inputs(starts, ends, sizes, ids=None, alignments=None, fixed_offsets=None, capacity=None):
    """The one input check. Return canonical ``(starts, ends, sizes, ids, alignments, fixed, capacity)``.

    Rules, each reported as ``ValueError("row i (id x): <rule>")``:

    * every value is a finite integer (no NaN, infinity, fraction, bool or string);
    * ``end > start`` (lifetimes are half-open and non-empty);
    * ``size >= 0`` (zero-size buffers are allowed, see :class:`Problem`);
    * ids, if given, are unique;
    * ``alignment >= 1``;
    * a fixed offset is ``>= 0`` and a multiple of the row's alignment;
    * two fixed buffers that are alive at the same time do not overlap in address;
    * ``capacity >= 0``, ``capacity >= size`` of every buffer, and every fixed buffer ends within it;
    * every value, and the worst-case peak of a plan (see :func:`_check_worst_peak`), is at most
      ``2**62``, so that no sum a strategy forms can wrap around int64.
    """
    if ids is not None:
        ids = tuple(ids) if not isinstance(ids, range) else ids
    starts = as_int_column(starts, "start", None, ids)
    n = len(starts)
    if ids is not None and len(ids) != n:
        raise ValueError(f"ids has {len(ids)} entries but there are {n} buffers")
    ends = as_int_column(ends, "end", n, ids)
    sizes = as_int_column(sizes, "size", n, ids)

    bad = ends <= starts
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{_row(i, ids)}: end ({ends[i]}) must be greater than start ({starts[i]}); "
                         "lifetimes are half-open [start, end)")
    # a lifetime may not span more than 2**62 either (ends - starts must not wrap around)
    bad = (starts < 0) & (ends > _MAX_VALUE + starts)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{_row(i, ids)}: lifetime [{starts[i]}, {ends[i]}) is longer than 2**62")
    bad = sizes < 0
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{_row(i, ids)}: size must be >= 0, got {sizes[i]}")
    if n and int(sizes.sum(dtype=np.float64)) > _MAX_VALUE:
        raise ValueError("the sizes add up to more than 2**62 bytes")

    if ids is not None and not isinstance(ids, range):
        seen: dict = {}
        for i, label in enumerate(ids):
            try:
                j = seen.setdefault(label, i)
            except TypeError:
                raise ValueError(f"row {i}: id must be hashable, got {label!r}") from None
            if j != i:
                raise ValueError(f"{_row(i, ids)}: duplicate id (first used at row {j})")

    if alignments is None:
        alignments = np.ones(n, dtype=np.int64)
    else:
        if np.ndim(alignments) == 0:
            alignments = np.full(n, alignments, dtype=object)
        alignments = as_int_column(alignments, "alignment", n, ids)
        bad = alignments < 1
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{_row(i, ids)}: alignment must be >= 1, got {alignments[i]}")

    if fixed_offsets is None:
        fixed = np.full(n, FREE, dtype=np.int64)
    else:
        fixed = as_int_column(fixed_offsets, "fixed offset", n, ids, allow_free=True)
        bad = fixed < FREE
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{_row(i, ids)}: fixed offset must be >= 0, got {fixed[i]}")
        bad = (fixed != FREE) & (fixed > _MAX_VALUE - sizes)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{_row(i, ids)}: fixed buffer [{fixed[i]}, {fixed[i]} + {sizes[i]}) ends beyond 2**62")
        bad = (fixed != FREE) & (fixed % alignments != 0)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{_row(i, ids)}: fixed offset {fixed[i]} is not a multiple of its "
                             f"alignment {alignments[i]}")

    if capacity is not None:
        capacity = int(as_int_column([capacity], "capacity", 1, None)[0])
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        if n and sizes.max() > capacity:
            i = int(np.argmax(sizes))
            raise ValueError(f"capacity {capacity} is smaller than the buffer at {_row(i, ids)} "
                             f"(size {sizes[i]})")
        is_fixed = fixed != FREE
        over = is_fixed & (fixed + sizes > capacity)
        if over.any():
            i = int(np.argmax(over))
            raise ValueError(f"{_row(i, ids)}: fixed buffer [{fixed[i]}, {fixed[i] + sizes[i]}) does not "
                             f"fit in capacity {capacity}")

    _check_worst_peak(sizes, alignments, fixed, ids)

    rows = np.flatnonzero(fixed != FREE)
    if len(rows) > 1:
        from dsa.address_overlap import find_overlap

        pair = find_overlap(starts[rows], ends[rows], sizes[rows], fixed[rows])
        if pair is not None:
            i, j = sorted(int(rows[k]) for k in pair)
            raise ValueError(f"{_row(i, ids)} and {_row(j, ids)}: fixed buffers are alive at the same "
                             "time and overlap in address")

    if ids is None:
        ids = range(n)
    for arr in (starts, ends, sizes, alignments, fixed):
        arr.flags.writeable = False
    return starts, ends, sizes, ids, alignments, fixed, capacity


class Problem:
    """An offline Dynamic Storage Allocation instance.

    Buffer ``i`` is alive during the half-open interval ``[starts[i], ends[i])`` and needs ``sizes[i]``
    bytes. Two buffers may share addresses only if their lifetimes do not intersect, so a buffer that
    ends at ``t`` and one that starts at ``t`` may share memory.

    Parameters
    ----------
    starts, ends, sizes : array_like of int
        One entry per buffer. Values must be finite integers; floats such as ``3.0`` are accepted.
    ids : sequence of hashable, optional
        Unique labels (default ``range(n)``). Rows are identified by index; ids are used in messages
        and files only.
    alignments : int or array_like of int, optional
        Every offset of row ``i`` must be a multiple of ``alignments[i]`` (default 1).
    fixed_offsets : array_like, optional
        A pinned offset per row; ``None``, NaN or ``-1`` mean "not fixed".
    capacity : int, optional
        Size of the slab. Plans whose peak exceeds it are reported as unsuccessful.

    Raises
    ------
    ValueError
        Naming the first row that breaks a rule: non-integer or non-finite value, ``end <= start``,
        negative size, duplicate id, ``alignment < 1``, negative or misaligned fixed offset, two fixed
        buffers that collide, capacity below the largest buffer or below a fixed buffer's end, a value
        above ``2**62``, or a worst-case peak above ``2**62`` (the sum over the rows that are not fixed
        of ``size + alignment - 1``, plus the highest end of a fixed buffer).

    Notes
    -----
    Zero-size buffers are allowed. They occupy no bytes, never conflict with another buffer, and are
    given offset 0 (or their fixed offset) by every strategy.

    Examples
    --------
    >>> import dsa
    >>> p = dsa.Problem([0, 3], [3, 5], [64, 32])
    >>> len(p), dsa.lower_bound(p)
    (2, 64)
    """

    __slots__ = ("starts", "ends", "sizes", "ids", "alignments", "fixed_offsets", "capacity")

    starts: np.ndarray
    ends: np.ndarray
    sizes: np.ndarray
    ids: Sequence
    alignments: np.ndarray
    fixed_offsets: np.ndarray
    capacity: int | None

    def __init__(self, starts, ends, sizes, *, ids=None, alignments=None, fixed_offsets=None,
                 capacity=None):
        values = _check_inputs(starts, ends, sizes, ids, alignments, fixed_offsets, capacity)
        for name, value in zip(self.__slots__, values):
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError("Problem is immutable; use Problem.replace(...)")

    def __delattr__(self, name):
        raise AttributeError("Problem is immutable")

    def __reduce__(self):
        # pickling (multiprocessing, dsa's planner process) rebuilds through the checked constructor
        return _unpickle, tuple(getattr(self, name) for name in self.__slots__)

    def __len__(self) -> int:
        return len(self.starts)

    def __repr__(self) -> str:
        extra = f", capacity={self.capacity}" if self.capacity is not None else ""
        nfixed = int((self.fixed_offsets != FREE).sum())
        if nfixed:
            extra += f", fixed={nfixed}"
        return f"Problem(n={len(self)}{extra})"

    def __eq__(self, other) -> bool:
        if not isinstance(other, Problem):
            return NotImplemented
        return (self.capacity == other.capacity and list(self.ids) == list(other.ids)
                and all(np.array_equal(getattr(self, a), getattr(other, a))
                        for a in ("starts", "ends", "sizes", "alignments", "fixed_offsets")))

    __hash__ = None  # arrays inside; equality is by value

    @property
    def n(self) -> int:
        """Number of buffers."""
        return len(self.starts)

    @property
    def durations(self) -> np.ndarray:
        """``ends - starts`` for every row."""
        return self.ends - self.starts

    @property
    def is_fixed(self) -> np.ndarray:
        """Boolean mask of rows whose offset is pinned."""
        return self.fixed_offsets != FREE

    @property
    def is_movable(self) -> np.ndarray:
        """Boolean mask of the rows a strategy places: not pinned, and of positive size (a row of size
        0 takes no room, so any offset suits it)."""
        return ~self.is_fixed & (self.sizes > 0)

    def replace(self, **changes) -> "Problem":
        """Return a copy with some fields changed (``capacity=``, ``alignments=``, ...), re-checked."""
        fields = {"starts": self.starts, "ends": self.ends, "sizes": self.sizes, "ids": self.ids,
                  "alignments": self.alignments, "fixed_offsets": self.fixed_offsets,
                  "capacity": self.capacity}
        unknown = set(changes) - set(fields)
        if unknown:
            raise TypeError(f"Problem.replace got unknown fields {sorted(unknown)}; known: {sorted(fields)}")
        fields.update(changes)
        starts, ends, sizes = fields.pop("starts"), fields.pop("ends"), fields.pop("sizes")
        return Problem(starts, ends, sizes, **fields)

    def take(self, rows) -> "Problem":
        """Return the sub-problem made of ``rows`` (indices or a boolean mask), keeping ids and capacity."""
        rows = np.asarray(rows)
        if rows.size == 0:
            rows = rows.astype(np.int64)  # [] is float64 to numpy, which cannot index
        rows = np.arange(len(self))[rows]
        ids = [self.ids[int(i)] for i in rows]
        return Problem(self.starts[rows], self.ends[rows], self.sizes[rows], ids=ids,
                       alignments=self.alignments[rows], fixed_offsets=self.fixed_offsets[rows],
                       capacity=self.capacity)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_intervals(cls, intervals: Iterable, *, capacity=None, alignment=None) -> "Problem":
        """Build a problem from ``(start, end, size)`` tuples or from mappings.

        A mapping needs a start (key ``start``, ``lower`` or ``begin``), an end (``end`` or ``upper``,
        both exclusive here) and ``size``; it may add ``id``, ``alignment`` and ``offset`` (a fixed offset).
        A tuple may carry a fourth item, the id. ``alignment`` sets a default for rows that give none.

        Raises
        ------
        ValueError
            If a row has the wrong shape or misses a key, or breaks a rule of :class:`Problem`.
        """
        starts, ends, sizes, ids, aligns, fixed = [], [], [], [], [], []
        any_id = False
        for i, item in enumerate(intervals):
            if isinstance(item, Mapping):
                start = _pick(item, _START_KEYS, i, "start")
                end = _pick(item, _END_KEYS, i, "end")
                if "size" not in item:
                    raise ValueError(f"row {i}: missing key 'size'")
                size = item["size"]
                unknown = set(item) - {*_START_KEYS, *_END_KEYS, "size", "id", "alignment", "offset"}
                if unknown:
                    raise ValueError(f"row {i}: unknown keys {sorted(unknown)}")
                ident = item.get("id", i)
                any_id |= "id" in item
                aligns.append(item.get("alignment", alignment if alignment is not None else 1))
                fixed.append(item.get("offset"))
            else:
                try:
                    row = tuple(item)
                except TypeError:
                    raise ValueError(f"row {i}: expected (start, end, size) or a mapping, got {item!r}") from None
                if len(row) not in (3, 4):
                    raise ValueError(f"row {i}: expected (start, end, size[, id]), got {len(row)} items")
                start, end, size = row[:3]
                ident = row[3] if len(row) == 4 else i
                any_id |= len(row) == 4
                aligns.append(alignment if alignment is not None else 1)
                fixed.append(None)
            starts.append(start)
            ends.append(end)
            sizes.append(size)
            ids.append(ident)
        fixed_arr = None if all(f is None for f in fixed) else np.array(fixed, dtype=object)
        return cls(np.array(starts, dtype=object), np.array(ends, dtype=object),
                   np.array(sizes, dtype=object), ids=ids if any_id else None,
                   alignments=np.array(aligns, dtype=object), fixed_offsets=fixed_arr, capacity=capacity)

    @classmethod
    def from_events(cls, events: Iterable, *, capacity=None, alignment=None) -> "Problem":
        """Build a problem from an allocation/free event stream.

        Each event is ``("alloc", key, size)`` or ``("free", key)``; time is the event's position in
        the stream. A key (an address, say) may be reused after it was freed: each free closes the
        latest open allocation with that key. Buffers never freed live until one past the last event.
        The id of a buffer is its allocation's position among the allocations (``0, 1, ...``).

        Raises
        ------
        ValueError
            For an unknown event kind, a free of a key that is not allocated, or an allocation of a
            key that is still live.
        """
        starts, ends, sizes = [], [], []
        open_: dict = {}
        t = -1
        for t, event in enumerate(events):
            kind = event[0] if len(event) else None
            if kind == "alloc":
                if len(event) != 3:
                    raise ValueError(f"event {t}: expected ('alloc', key, size), got {event!r}")
                _, key, size = event
                if key in open_:
                    raise ValueError(f"event {t}: key {key!r} allocated again while still live "
                                     f"(allocated at event {starts[open_[key]]})")
                open_[key] = len(starts)
                starts.append(t)
                ends.append(None)
                sizes.append(size)
            elif kind == "free":
                if len(event) != 2:
                    raise ValueError(f"event {t}: expected ('free', key), got {event!r}")
                key = event[1]
                if key not in open_:
                    raise ValueError(f"event {t}: free of key {event[1]!r} that is not allocated")
                ends[open_.pop(key)] = t
            else:
                raise ValueError(f"event {t}: kind must be 'alloc' or 'free', got {kind!r}")
        horizon = t + 1
        ends = [horizon if e is None else e for e in ends]
        aligns = None if alignment is None else alignment
        return cls(np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64),
                   np.array(sizes, dtype=object), alignments=aligns, capacity=capacity)

    # ------------------------------------------------------------------ dict round trip
    def to_records(self) -> list[dict]:
        """One dict per row: ``id``, ``start``, ``end``, ``size``, plus ``alignment``/``offset`` when set."""
        out = []
        for i in range(len(self)):
            rec = {"id": self.ids[i], "start": int(self.starts[i]), "end": int(self.ends[i]),
                   "size": int(self.sizes[i])}
            if self.alignments[i] != 1:
                rec["alignment"] = int(self.alignments[i])
            if self.fixed_offsets[i] != FREE:
                rec["offset"] = int(self.fixed_offsets[i])
            out.append(rec)
        return out


def _pick(item: Mapping, keys: tuple, i: int, what: str):
    found = [k for k in keys if k in item]
    if not found:
        raise ValueError(f"row {i}: missing key {what!r} (accepted: {', '.join(keys)})")
    if len(found) > 1:
        raise ValueError(f"row {i}: give the {what} once, got keys {found}")
    return item[found[0]]


def as_problem(obj, *, capacity=None) -> Problem:
    """Coerce a :class:`Problem`, a list of ``(start, end, size)`` tuples or a list of dicts to a Problem.

    ``capacity``, when given, overrides the problem's own.
    """
    if isinstance(obj, Problem):
        problem = obj
    elif isinstance(obj, (str, bytes)) or not isinstance(obj, Iterable):
        raise TypeError("expected a dsa.Problem or a list of (start, end, size) tuples or dicts, "
                        f"got {type(obj).__name__}")
    else:
        problem = Problem.from_intervals(obj)
    if capacity is not None and capacity != problem.capacity:
        problem = problem.replace(capacity=capacity)
    return problem


def _unpickle(starts, ends, sizes, ids, alignments, fixed_offsets, capacity) -> Problem:
    return Problem(starts, ends, sizes, ids=ids, alignments=alignments, fixed_offsets=fixed_offsets,
                   capacity=capacity)
