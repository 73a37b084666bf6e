"""Profiled passes and replays of an attached module: native plans, per-thread slabs, misses.

:class:`Replayer` runs the model in the two ways the cache asks for. It profiles a pass and
installs its plan as a native plan handle, or it replays a pass from the calling thread's slab. It
also handles what a replay reports: a fallback marks the signature to be profiled again, blocks that
outlive the pass are learned and planned again, and a signature that keeps missing runs eagerly.
"""
from __future__ import annotations

import threading
import warnings

import numpy as np

from . import _native
from ._cache import Entry, PlanCache
from ._planning import Planner, PlanningWarning
from .trace import call_profiled


class Replayer:
    """Profiles and replays the passes of ``model`` for the signatures of ``cache``.

    Parameters
    ----------
    model : callable
        The wrapped model.
    cache : PlanCache
        The plan cache (its lock guards every write below).
    planner : Planner
        Makes the plans.
    max_replans : int
        How many times a signature that misses its plan is planned again before it runs eagerly.
    op_stacks : bool
        Record op stacks in profiled passes.
    """

    def __init__(self, model, cache: PlanCache, planner: Planner, *, max_replans: int, op_stacks: bool):
        self.model = model
        self.cache = cache
        self.planner = planner
        self.max_replans = max_replans
        self.op_stacks = op_stacks
        self.fast = None  # the native dispatcher, bound to a signature after its first clean replay

    def entry(self, trace, problem, solution, escaped) -> Entry:
        """A cache entry for a plan; it replays (it gets a native plan handle) when ``solution``
        succeeded, else it runs eagerly."""
        if solution is None or not solution.success:
            return Entry(trace, problem, solution, None, escaped=frozenset(escaped))
        offsets = np.full(len(trace), -1, np.int64)
        offsets[np.asarray(problem.ids, np.int64)] = solution.offsets
        sizes = np.ascontiguousarray(trace.sizes, np.int64)
        deadlines = trace.deadlines()
        handle = _native.lib().dsa_plan_new(len(trace), sizes.ctypes.data, offsets.ctypes.data,
                                            deadlines.ctypes.data, int(solution.peak))
        if not handle:
            raise MemoryError("dsa_plan_new failed: " + _native.lib().dsa_last_error().decode())
        return Entry(trace, problem, solution, handle, escaped=frozenset(escaped))

    def profile_and_plan(self, key, args, kwargs, old: Entry | None):
        """Run a profiled pass, plan its trace and install the plan under ``key``; return the output.

        ``old`` is the signature's entry when it is planned again (its replans and learned escapes
        carry over), else None.
        """
        output, trace = call_profiled(self.model, args, kwargs, op_stacks=self.op_stacks)
        # the pass's blocks came from an arena that is gone; have malloc give back what it still
        # holds free (the pass's other allocations) before the slab is made
        _native.lib().dsa_release_free_memory()
        escaped = old.escaped if old is not None and len(old.trace) == len(trace) else frozenset()
        entry = self.entry(*self.planner.plan(trace, escaped), escaped)
        if old is not None:
            entry.replans = old.replans + 1
        self.cache.add_profiled(key, entry, old is None)
        return output

    def slab(self, entry: Entry):
        """The calling thread's slab of ``entry`` (made now if needed), or None once it is released."""
        ident = threading.get_ident()
        slab = entry.slabs.get(ident)
        if slab is None:
            with self.cache.lock:
                if entry.plan is None:
                    return None
                slab = _native.lib().dsa_slab_new(entry.plan)
                entry.slabs[ident] = slab
        return slab

    def replay(self, key, entry: Entry, args, kwargs):
        """Call the model with its allocations served from the calling thread's slab of ``entry``."""
        # the hot path: two ctypes calls around the forward; the counters stay in the library
        lib = _native.lib()
        cache = self.cache
        slab = entry.slabs.get(threading.get_ident()) or self.slab(entry)
        if slab is not None and slab != cache.mru_slab:
            cache.touch(key, entry, slab)
        session = lib.dsa_replay_begin(slab) if slab is not None else None
        if not session:  # nested in another session, or no memory for a region
            cache.count("eager_calls")
            return self.model(*args, **kwargs)
        entry.calls += 1
        try:
            return self.model(*args, **kwargs)
        finally:
            result = lib.dsa_replay_end(session)
            if result > 0:
                self.after_pass(key, entry, slab, result)
            elif result == 0 and self.fast is not None and not kwargs:
                # it followed its plan: the dispatcher serves this signature on this thread from now on
                with cache.lock:
                    if cache.handles.entries.get(key) is entry and not entry.stale and entry.plan is not None:
                        self.fast.bind(args, slab, entry)

    def after_fast(self, entry: Entry, slab: int, result: int) -> None:
        """A pass replayed by the dispatcher fell back or let blocks escape."""
        self.after_pass(entry.key, entry, slab, result)

    def after_pass(self, key, entry: Entry, slab, result: int) -> None:
        """A replay fell back, or slab blocks outlived it: learn, and replan or give up."""
        cache = self.cache
        reason = result & _native.REASON_MASK
        escaped = entry.escaped
        if result & _native.ESCAPED:
            found = _native.slab_escaped(slab)
            cache.count("escaped_blocks", len(found))
            escaped = escaped | frozenset(found.tolist())
        if reason:
            fallback_at = _native.slab_counters(slab).fallback_at
            what = f"{_native.REASONS[reason]} at allocation {fallback_at}"
        else:
            what = "a slab block outlived the pass"
        with cache.lock:
            if entry.plan is None or cache.handles.entries.get(key) is not entry:
                return  # already replanned, evicted or given up
            cache.unbind()
            entry.escaped = escaped
            if entry.replans >= self.max_replans:
                warnings.warn(f"the plan for this signature missed {entry.replans + 1} times ({what}); "
                              "it now runs eagerly", PlanningWarning, stacklevel=5)
                cache.handles.release_entry(entry)
                return
            if reason:
                entry.stale = True  # profile again at the next call (the learned escapes carry over)
                return
        # blocks that the plan serves from the slab escaped (e.g. an output picked by a branch):
        # plan again from the same trace with them left to the default allocator
        new = self.entry(*self.planner.plan(entry.trace, escaped), escaped)
        new.replans = entry.replans + 1
        new.calls = entry.calls
        with cache.lock:
            if cache.handles.entries.get(key) is entry:
                cache.install(key, new)
            else:
                cache.handles.release_entry(new)
