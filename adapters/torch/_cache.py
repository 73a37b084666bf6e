"""The plan cache of an attached module: input signatures, their entries, and the cache's bounds.

A call is keyed by :func:`signature`. Each key maps to an :class:`Entry` (its trace, plan and
per-thread slabs). :class:`PlanCache` keeps the entries and the resident slabs in
least-recently-used order within ``max_signatures`` and ``max_slab_bytes``. It decides which new
signatures are profiled at their first call, and it holds the lock and the counters that the
other parts of :class:`~dsa.adapters.torch.attach.AttachedModule` share. :class:`Handles` holds the
native plan and slab handles. A weakref finalizer releases them without keeping the module alive.
"""
from __future__ import annotations

import threading
from collections import OrderedDict, deque
from dataclasses import dataclass, field

import torch

from . import _native
from .trace import Trace

# default bounds of the plan cache
DEFAULT_MAX_SIGNATURES = 64
DEFAULT_MAX_SLAB_BYTES = 64 * 2**20
# this many signatures planned at their first call in a row, none called again: plan at the 2nd call
CHURN_WINDOW = 8
# report() key -> field of the native per-slab counters
NATIVE_COUNTERS = {"bytes_from_slab": "bytes_from_slab", "bytes_from_default": "bytes_from_default",
                   "fallbacks": "fallback", "misses": "misses", "replays": "replays",
                   "allocations": "allocations", "allocations_from_slab": "from_slab"}

_Tensor = torch.Tensor
_strided = torch.strided


def _leaf_key(leaf):
    if isinstance(leaf, torch.Tensor):
        if not leaf.is_cpu or leaf.layout is not _strided:
            return None
        return (leaf.shape, leaf.stride(), leaf.dtype, leaf.requires_grad)
    if isinstance(leaf, float) and leaf != leaf:
        return ("float", "nan")  # NaN != NaN: key it by name so that it repeats
    if leaf is None or isinstance(leaf, (bool, int, float, complex, str, bytes, torch.dtype)):
        return (type(leaf).__name__, leaf)
    return ("object", type(leaf).__qualname__, id(leaf))  # conservative: one plan per object


def _flatten_key(value, out) -> bool:
    if isinstance(value, (tuple, list)):
        out.append((type(value).__name__, len(value)))
        return all(_flatten_key(v, out) for v in value)
    if isinstance(value, dict):
        out.append(("dict", tuple(sorted(map(repr, value)))))
        return all(_flatten_key(value[k], out) for k in sorted(value, key=repr))
    key = _leaf_key(value)
    out.append(key)
    return key is not None


def signature(module, args, kwargs):
    """The hashable key a call is planned under.

    Parameters
    ----------
    module : torch.nn.Module or None
        Whose ``training`` flag is part of the key (None for a plain callable).
    args, kwargs : tuple, dict
        The call's arguments.

    Returns
    -------
    tuple or None
        The key, or None when the call cannot be planned (non-CPU tensors, sparse layouts).
    """
    parts = [getattr(module, "training", None), torch.is_grad_enabled(), torch.is_inference_mode_enabled(),
             torch.get_num_threads()]
    if not kwargs:  # fast path (it runs on every call): positional plain tensors
        for a in args:
            if type(a) is not _Tensor:
                break
            if not a.is_cpu or a.layout is not _strided:
                return None
            parts.append((a.shape, a.stride(), a.dtype, a.requires_grad))
        else:
            return tuple(parts)
        del parts[4:]
    if not _flatten_key((args, kwargs), parts):
        return None
    return tuple(parts)


@dataclass(eq=False)
class Entry:
    """One input signature: its trace, plan and per-thread slabs."""

    trace: Trace
    problem: object
    solution: object
    plan: int | None  # native plan handle, None when the signature runs eagerly
    slabs: dict = field(default_factory=dict)  # thread ident -> native slab handle
    replans: int = 0
    stale: bool = False  # a replay missed: profile again on the next call
    calls: int = 1  # calls with this signature since it was planned
    escaped: frozenset = frozenset()  # allocation indices learned to escape a pass
    key: object = None  # the signature it is cached under (set when installed)

    @property
    def slab_bytes(self) -> int:
        return int(self.solution.peak) if self.plan is not None else 0


def native_counters(slab) -> dict:
    """The native counters of ``slab`` under their :meth:`AttachedModule.report` keys."""
    c = _native.slab_counters(slab)
    return {key: getattr(c, name) for key, name in NATIVE_COUNTERS.items()}


class Handles:
    """Native plan and slab handles to release (also from a weakref finalizer), the counters of
    slabs already released, and the least-recently-used orders of signatures and resident slabs."""

    def __init__(self):
        self.entries: OrderedDict = OrderedDict()  # signature -> Entry, least recently used first
        self.resident: OrderedDict = OrderedDict()  # slab handle -> bytes, least recently used first
        self.resident_bytes = 0
        self.released = dict.fromkeys(NATIVE_COUNTERS, 0)

    def forget_slab(self, slab) -> None:
        """Stop counting ``slab`` as resident."""
        self.resident_bytes -= self.resident.pop(slab, 0)

    def release_entry(self, entry: Entry) -> None:
        """Free the slabs and the plan of ``entry``; its slabs' counters go to ``released``."""
        lib = _native.lib()
        for slab in entry.slabs.values():
            for key, value in native_counters(slab).items():
                self.released[key] += value
            self.forget_slab(slab)
            lib.dsa_slab_free(slab)  # deferred by the library while a pass is using it
        entry.slabs.clear()
        if entry.plan is not None:
            lib.dsa_plan_free(entry.plan)
            entry.plan = None

    def release(self) -> None:
        """Release every entry and empty the cache."""
        for entry in list(self.entries.values()):
            self.release_entry(entry)
        self.entries.clear()


class PlanCache:
    """Entries by signature within the cache's bounds, and which new signatures are profiled.

    Writers hold ``lock``; a lookup in ``handles.entries`` is atomic and takes no lock. Methods
    whose docstrings say "lock held" expect the caller to hold it; the others take it.

    Parameters
    ----------
    max_signatures, max_slab_bytes : int or None
        The bounds of :func:`~dsa.adapters.torch.attach.attach`.
    """

    def __init__(self, max_signatures: int | None, max_slab_bytes: int | None):
        self.lock = threading.Lock()
        self.handles = Handles()
        self.max_signatures = max_signatures
        self.max_slab_bytes = max_slab_bytes
        self.fast = None  # the native dispatcher, whose bindings and counts follow the cache
        self.stats = {"profiles": 0, "eager_calls": 0, "evictions": 0, "slab_trims": 0,
                      "deferred_calls": 0, "escaped_blocks": 0, "planner_fallbacks": 0}
        self.mru_slab = None  # the slab of the latest replay: its bookkeeping is skipped
        self.fresh = deque(maxlen=CHURN_WINDOW)  # entries planned at their signature's first call
        self.deferring = False  # signatures do not repeat: plan a signature at its second call
        self.seen: OrderedDict = OrderedDict()  # hashes of signatures seen once, not planned
        self.seen_limit = 4 * (max_signatures or DEFAULT_MAX_SIGNATURES)

    def count(self, name: str, value: int = 1) -> None:
        """Add ``value`` to the counter ``name``."""
        with self.lock:
            self.stats[name] += value

    def unbind(self) -> None:
        """Forget the dispatcher's bindings (the cache changed); calls refill them."""
        if self.fast is not None:
            self.fast.clear()

    def sync(self) -> None:
        """Fold the dispatcher's call counts and recency into the cache (lock held)."""
        if self.fast is None:
            return
        entries, resident = self.handles.entries, self.handles.resident
        for entry, slab, calls, _ in sorted(self.fast.sync(), key=lambda r: r[3]):
            entry.calls += calls
            if entries.get(entry.key) is entry:
                entries.move_to_end(entry.key)
            if slab in resident:
                resident.move_to_end(slab)

    def admit(self, key) -> bool:
        """Whether a signature with no entry is profiled now (else this call runs eagerly).

        Signatures are planned at their first call until ``CHURN_WINDOW`` of them in a row were
        planned and never called again; from then on (for the cache's life) a signature is
        planned at its second call, and the first runs eagerly.
        """
        with self.lock:
            self.sync()
            if not self.deferring:
                fresh = self.fresh
                if len(fresh) < fresh.maxlen or any(e.calls > 1 for e in fresh):
                    return True
                self.deferring = True
                fresh.clear()
            h = hash(key)
            if h in self.seen:
                del self.seen[h]
                return True
            self.seen[h] = None
            if len(self.seen) > self.seen_limit:
                self.seen.popitem(last=False)
            self.stats["deferred_calls"] += 1
            self.stats["eager_calls"] += 1
            return False

    def add_profiled(self, key, entry: Entry, first: bool) -> None:
        """Install the entry of a profiled pass; ``first``: its signature had no entry."""
        with self.lock:
            self.stats["profiles"] += 1
            self.install(key, entry)
            if first and not self.deferring:
                self.fresh.append(entry)

    def install(self, key, entry: Entry) -> None:
        """Put ``entry`` in the cache under ``key`` (lock held), evicting the least recently used
        signatures beyond ``max_signatures``."""
        self.sync()
        self.unbind()
        handles = self.handles
        entries = handles.entries
        current = entries.pop(key, None)
        entry.key = key
        entries[key] = entry
        if current is not None and current is not entry:
            handles.release_entry(current)
        while self.max_signatures is not None and len(entries) > self.max_signatures:
            _, victim = entries.popitem(last=False)
            handles.release_entry(victim)
            self.stats["evictions"] += 1

    def touch(self, key, entry: Entry, slab) -> None:
        """Mark ``entry`` and ``slab`` most recently used; give back the memory of the least recently
        used idle slabs beyond ``max_slab_bytes`` (never this one's)."""
        lib = _native.lib()
        with self.lock:
            handles = self.handles
            entries = handles.entries
            if entries.get(key) is entry:
                entries.move_to_end(key)
            elif entry.plan is None:  # evicted or replanned meanwhile
                return
            self.sync()
            if slab in handles.resident:
                handles.resident.move_to_end(slab)
            else:
                handles.resident[slab] = entry.slab_bytes
                handles.resident_bytes += entry.slab_bytes
            limit = self.max_slab_bytes
            while limit is not None and handles.resident_bytes > limit and len(handles.resident) > 1:
                victim = next(iter(handles.resident))
                handles.forget_slab(victim)
                self.unbind()  # a trimmed slab goes back through here (and is counted) when used again
                if lib.dsa_slab_trim(victim):
                    self.stats["slab_trims"] += 1
            self.mru_slab = slab

    def eager_call(self, key, entry: Entry) -> None:
        """Count a call of a signature that runs eagerly for good, and mark it recently used."""
        with self.lock:
            self.stats["eager_calls"] += 1
            entry.calls += 1
            if self.handles.entries.get(key) is entry:
                self.handles.entries.move_to_end(key)

    def clear(self) -> None:
        """Release every entry and forget every signature seen (lock held)."""
        self.unbind()
        self.handles.release()
        self.seen.clear()
        self.fresh.clear()
