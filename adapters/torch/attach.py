"""``attach(model)``: profile a forward once per input signature, plan it, replay it from a slab.

The first call with a new input signature (shapes, strides, dtypes, layouts and ``requires_grad`` of
the tensor arguments, the other arguments, grad / inference mode, ``model.training`` and the
intra-op thread count) runs eagerly under the profiling allocator; its trace is planned with
:func:`dsa.solve`. Later calls with that signature replay: the k-th allocation of the pass is
served at ``slab + offset[k]``. Safety rules, enforced in the native allocator:

* a size that differs from the plan, more allocations than planned, or a slab block still alive
  past its planned lifetime sends the rest of that pass to the default allocator (a *fallback*);
  the next call for that signature profiles and plans again (up to ``max_replans`` times, then
  the signature runs eagerly);
* blocks still alive at the end of the profiled pass (outputs, caches, tensors saved for
  backward) are never served from the slab;
* a slab region that still holds live tensors after a pass is never reused: the next pass takes
  a fresh region, and the old one gives back every page those tensors do not touch and is freed
  when its last tensor dies;
* slab blocks alive after a replayed pass (an output picked by a data-dependent branch) are
  learned: the signature is planned again, from the same trace, with them left to the default
  allocator (this counts as a replan);
* each thread that runs the model has its own slab; a nested call on a thread that is already
  replaying runs eagerly;
* an exception inside forward closes the pass normally.

The plan cache is bounded (``max_signatures``, ``max_slab_bytes``; least recently used first), and
signatures that never repeat stop being planned at their first call (see :func:`attach`).

Per-call cost: once a signature has replayed on a thread, its later calls there are served by a
native dispatcher (``dsa_fast.cpp``, compiled into the allocator's library) that computes the
signature from the tensors' metadata, starts the replay, calls the model and ends the replay
without running Python code of ours and without a lock of ours (a fraction of a microsecond).
Keyword arguments, non-tensor or non-CPU arguments, hooks on the wrapper and every call that needs
a decision (a new signature, a fallback, a cache limit) take the Python path described above.
"""
from __future__ import annotations

import threading
import warnings
import weakref
from collections import OrderedDict, deque
from dataclasses import dataclass, field

import numpy as np
import torch

from . import _native
from .trace import Trace, _call_profiled

# report() key -> field of the native per-slab counters
_NATIVE_COUNTERS = {"bytes_from_slab": "bytes_from_slab", "bytes_from_default": "bytes_from_default",
                    "fallbacks": "fallback", "misses": "misses", "replays": "replays",
                    "allocations": "allocations", "allocations_from_slab": "from_slab"}


class PlanningWarning(UserWarning):
    """A signature could not be planned or kept missing its plan; it runs eagerly."""


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


_Tensor = torch.Tensor
_strided = torch.strided


def signature(module, args, kwargs):
    """The hashable key a call is planned under, or None if it cannot be planned (non-CPU tensors,
    sparse layouts). ``module`` gives its ``training`` flag (None for a plain callable)."""
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
class _Entry:
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


def _slab_counters(slab) -> dict:
    c = _native.slab_counters(slab)
    return {key: getattr(c, name) for key, name in _NATIVE_COUNTERS.items()}


class _Handles:
    """Native plan and slab handles to release (also from a weakref finalizer), the counters of
    slabs already released, and the least-recently-used orders of signatures and resident slabs."""

    def __init__(self):
        self.entries: OrderedDict = OrderedDict()  # signature -> _Entry, least recently used first
        self.resident: OrderedDict = OrderedDict()  # slab handle -> bytes, least recently used first
        self.resident_bytes = 0
        self.released = dict.fromkeys(_NATIVE_COUNTERS, 0)

    def forget_slab(self, slab) -> None:
        self.resident_bytes -= self.resident.pop(slab, 0)

    def release_entry(self, entry: _Entry) -> None:
        lib = _native.lib()
        for slab in entry.slabs.values():
            for key, value in _slab_counters(slab).items():
                self.released[key] += value
            self.forget_slab(slab)
            lib.dsa_slab_free(slab)  # deferred by the library while a pass is using it
        entry.slabs.clear()
        if entry.plan is not None:
            lib.dsa_plan_free(entry.plan)
            entry.plan = None

    def release(self) -> None:
        for entry in list(self.entries.values()):
            self.release_entry(entry)
        self.entries.clear()


# seconds of planning per input signature for strategies that search until a time limit
DEFAULT_PLAN_TIME_LIMIT = 0.2
# default bounds of the plan cache
DEFAULT_MAX_SIGNATURES = 64
DEFAULT_MAX_SLAB_BYTES = 64 * 2**20
# where plans are made: "process", a helper process (dsa._planner_process: numba and the kernels,
# ~120 MB, never load in the served process), or "inline", in the calling thread
PLANNERS = ("process", "inline")
# seconds a planning helper may take beyond the strategy's time limit (its start, numba's kernels)
# before it is killed and the plan is made inline instead
PLANNER_GRACE_S = 300.0
# this many signatures planned at their first call in a row, none called again: plan at the 2nd call
_CHURN_WINDOW = 8


def _takes_time_limit(strategy: str) -> bool:
    from dsa.strategies import strategy_info

    return strategy_info(strategy).time_limit


def _check_limit(name, value, low):
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
        raise ValueError(f"{name} must be None or an int >= {low}, got {value!r}")


def _trace_with_escapes(trace: Trace, escaped) -> Trace:
    """``trace`` with the blocks ``escaped`` marked as alive at the end of the pass."""
    index = np.fromiter((i for i in escaped if 0 <= i < len(trace)), np.int64)
    if not len(index):
        return trace
    ends = trace.ends.copy()
    ends[index] = -1
    return Trace(trace.sizes, trace.starts, ends, trace.threads, trace.stacks, trace.clock)


def _checked_here(problem, raw, planned_in: str):
    """A strategy's raw solution, validated and given its final status in this process."""
    from dsa.bounds import lower_bound
    from dsa.solution import finalize
    from dsa.validator import validate

    error = None
    if raw.offsets is not None:
        try:
            validate(problem, raw.offsets, check_capacity=False)
        except ValueError as exc:
            error = str(exc)
    return finalize(problem, raw, lower_bound(problem), error=error, checked=raw.offsets is not None,
                    extra_stats={"planned_in": planned_in})


class AttachedModule(torch.nn.Module):
    """A module whose forward passes are served from planned slabs; see :func:`attach`.

    The wrapped model is the submodule ``module``; parameters, buffers, ``train()``/``eval()`` and
    ``to()`` reach it as usual (for a plain callable, ``module`` is the callable itself).
    """

    def __init__(self, model, strategy="best", *, max_replans: int = 3,
                 max_signatures: int | None = DEFAULT_MAX_SIGNATURES,
                 max_slab_bytes: int | None = DEFAULT_MAX_SLAB_BYTES, planner: str = "process",
                 op_stacks: bool = False, **solve_options):
        super().__init__()
        if not callable(model):
            raise TypeError(f"attach() needs a torch.nn.Module or callable, got {type(model).__name__}")
        if isinstance(model, AttachedModule):
            raise TypeError("this model is already attached; attach the plain model (see detach())")
        if isinstance(max_replans, bool) or not isinstance(max_replans, int) or max_replans < 0:
            raise ValueError(f"max_replans must be a non-negative int, got {max_replans!r}")
        _check_limit("max_signatures", max_signatures, 1)
        _check_limit("max_slab_bytes", max_slab_bytes, 0)
        if planner not in PLANNERS:
            raise ValueError(f"planner must be one of {PLANNERS}, got {planner!r}")
        if not isinstance(op_stacks, bool):
            raise ValueError(f"op_stacks must be True or False, got {op_stacks!r}")
        if isinstance(strategy, str):
            from dsa.strategies import resolve_name

            resolve_name(strategy)  # an unknown name fails here, not at the first call
        if solve_options.get("validate", True) is not True:
            raise ValueError("attach() always validates its plans (a wrong offset would corrupt the model's "
                             "outputs); do not pass validate=False")
        _native.lib()  # build and install now: a BuildError surfaces at attach time
        self.module = model
        # whose train()/eval() state is part of the signature: the module, or a bound method's owner
        owner = model if isinstance(model, torch.nn.Module) else getattr(model, "__self__", None)
        # kept out of nn.Module's registry: the model is registered once, as ``module``
        self.__dict__["_owner"] = owner if isinstance(owner, torch.nn.Module) else None
        self._strategy = strategy
        if isinstance(strategy, str) and _takes_time_limit(strategy):
            solve_options.setdefault("time_limit", DEFAULT_PLAN_TIME_LIMIT)
        self._solve_options = {**solve_options, "validate": True}
        self._max_replans = max_replans
        # a callable strategy cannot be sent to another process: it plans here
        self._planner = planner if isinstance(strategy, str) else "inline"
        self._max_signatures = max_signatures
        self._max_slab_bytes = max_slab_bytes
        self._op_stacks = op_stacks
        self._lock = threading.Lock()
        self._handles = _Handles()
        self._finalizer = weakref.finalize(self, self._handles.release)
        self._stats = {"profiles": 0, "eager_calls": 0, "evictions": 0, "slab_trims": 0,
                       "deferred_calls": 0, "escaped_blocks": 0, "planner_fallbacks": 0}
        self._detached = False
        self._mru_slab = None  # the slab of the latest replay: its bookkeeping is skipped
        self._fresh = deque(maxlen=_CHURN_WINDOW)  # entries planned at their signature's first call
        self._deferring = False  # signatures do not repeat: plan a signature at its second call
        self._seen: OrderedDict = OrderedDict()  # hashes of signatures seen once, not planned
        self._seen_limit = 4 * (max_signatures or DEFAULT_MAX_SIGNATURES)
        # the per-call path: a native dispatcher that replays bound signatures without running
        # Python, and hands every other call to nn.Module.__call__ (hooks, then forward below)
        fast = _native.fast()
        self.__dict__["_fast"] = None
        self.__dict__["_dispatch"] = self._slow_call
        if fast is not None:
            from torch.nn.modules import module as _module

            hooks = (_module._global_forward_hooks, _module._global_forward_pre_hooks,
                     _module._global_backward_hooks, _module._global_backward_pre_hooks)
            self._fast = self._dispatch = fast.Dispatcher(model, self._slow_call, self._after_fast, owner,
                                                          self.__dict__, hooks, torch.Tensor)

    # ------------------------------------------------------------------ calls
    def __call__(self, *args, **kwargs):
        return self._dispatch(*args, **kwargs)

    def _slow_call(self, *args, **kwargs):
        return torch.nn.Module.__call__(self, *args, **kwargs)

    def _after_fast(self, entry: _Entry, slab: int, result: int) -> None:
        """A pass replayed by the dispatcher fell back or let blocks escape."""
        self._after_pass(entry.key, entry, slab, result)

    def _unbind(self) -> None:
        """Forget the dispatcher's bindings (the caches changed); calls refill them."""
        if self._fast is not None:
            self._fast.clear()

    def _sync(self) -> None:
        """Fold the dispatcher's call counts and recency into the caches (lock held)."""
        if self._fast is None:
            return
        entries, resident = self._handles.entries, self._handles.resident
        for entry, slab, calls, _ in sorted(self._fast.sync(), key=lambda r: r[3]):
            entry.calls += calls
            if entries.get(entry.key) is entry:
                entries.move_to_end(entry.key)
            if slab in resident:
                resident.move_to_end(slab)

    def forward(self, *args, **kwargs):
        if self._detached:
            return self.module(*args, **kwargs)
        key = signature(self._owner, args, kwargs)
        entry = self._handles.entries.get(key)  # a dict lookup is atomic; writers hold the lock
        if entry is not None and entry.plan is not None and not entry.stale:
            return self._replay(key, entry, args, kwargs)
        if key is None or _native.lib().dsa_thread_busy():
            self._count("eager_calls")
            return self.module(*args, **kwargs)
        if entry is None:
            if not self._admit(key):  # seen for the first time while signatures do not repeat
                return self.module(*args, **kwargs)
            return self._profile_and_plan(key, args, kwargs, None)
        if entry.stale:
            return self._profile_and_plan(key, args, kwargs, entry)
        with self._lock:  # planning failed or kept missing: eager for good
            self._stats["eager_calls"] += 1
            entry.calls += 1
            if self._handles.entries.get(key) is entry:
                self._handles.entries.move_to_end(key)
        return self.module(*args, **kwargs)

    def _count(self, name, value=1):
        with self._lock:
            self._stats[name] += value

    def _admit(self, key) -> bool:
        """Whether a signature with no entry is profiled now (else this call runs eagerly).

        Signatures are planned at their first call until ``_CHURN_WINDOW`` of them in a row were
        planned and never called again; from then on (for the wrapper's life) a signature is
        planned at its second call, and the first runs eagerly.
        """
        with self._lock:
            self._sync()
            if not self._deferring:
                fresh = self._fresh
                if len(fresh) < fresh.maxlen or any(e.calls > 1 for e in fresh):
                    return True
                self._deferring = True
                fresh.clear()
            h = hash(key)
            if h in self._seen:
                del self._seen[h]
                return True
            self._seen[h] = None
            if len(self._seen) > self._seen_limit:
                self._seen.popitem(last=False)
            self._stats["deferred_calls"] += 1
            self._stats["eager_calls"] += 1
            return False

    def _profile_and_plan(self, key, args, kwargs, old: _Entry | None):
        output, trace = _call_profiled(self.module, args, kwargs, op_stacks=self._op_stacks)
        # the pass's blocks came from an arena that is gone; have malloc give back what it still
        # holds free (the pass's other allocations) before the slab is made
        _native.lib().dsa_release_free_memory()
        escaped = old.escaped if old is not None and len(old.trace) == len(trace) else frozenset()
        entry = self._plan(trace, escaped)
        if old is not None:
            entry.replans = old.replans + 1
        with self._lock:
            self._stats["profiles"] += 1
            self._install(key, entry)
            if old is None and not self._deferring:
                self._fresh.append(entry)
        return output

    def _install(self, key, entry: _Entry) -> None:
        """Put ``entry`` in the cache under ``key`` (lock held), evicting the least recently used
        signatures beyond ``max_signatures``."""
        self._sync()
        self._unbind()
        entries = self._handles.entries
        current = entries.pop(key, None)
        entry.key = key
        entries[key] = entry
        if current is not None and current is not entry:
            self._handles.release_entry(current)
        while self._max_signatures is not None and len(entries) > self._max_signatures:
            _, victim = entries.popitem(last=False)
            self._handles.release_entry(victim)
            self._stats["evictions"] += 1

    def _solve(self, problem):
        """``dsa.solve`` of ``problem``, in the helper process when the planner is "process".

        The helper's plan is validated here, by the same validator ``dsa.solve`` uses (without
        numba: see :mod:`dsa.overlap`); if no helper answers, the plan is made inline. Before the
        helper, ``best``'s plan is tried here when one of its greedy members reaches the lower
        bound (:func:`dsa.strategies.best.portfolio_head`, numpy only): on most models one does, in
        milliseconds, and no helper has to start.
        """
        if self._planner == "process":
            from dsa._planner_process import PlannerUnavailable, shared

            if self._solve_options.get("capacity") is not None:
                # the helper plans against this capacity: its answer is checked against it here too
                # (finalize turns an INFEASIBLE whose plan fits the problem's capacity into a plan)
                from dsa.problem import as_problem

                problem = as_problem(problem, capacity=self._solve_options["capacity"])

            head = self._head(problem)
            if head is not None:
                return head

            limit = self._solve_options.get("time_limit")
            timeout = PLANNER_GRACE_S + (float(limit) if isinstance(limit, (int, float)) else 0.0)
            try:
                raw = shared().solve(problem, self._strategy, self._solve_options, timeout=timeout)
            except PlannerUnavailable as exc:
                warnings.warn(f"dsa plans in this process instead ({exc})", PlanningWarning, stacklevel=5)
                with self._lock:
                    self._stats["planner_fallbacks"] += 1
            else:
                return _checked_here(problem, raw, "process")
        from dsa.solver import solve

        return solve(problem, strategy=self._strategy, **self._solve_options)

    def _head(self, problem):
        """``best``'s plan made in this thread when a greedy member reaches the lower bound, else
        None (another strategy, options other than ``time_limit``, or no member within the head's
        work reaches it)."""
        if self._strategy != "best" or set(self._solve_options) - {"time_limit", "validate"}:
            return None
        from dsa.budget import Budget
        from dsa.strategies import best

        Budget(self._solve_options.get("time_limit"))  # a bad limit fails as it would in best.solve
        raw = best.portfolio_head(problem)
        return None if raw is None else _checked_here(problem, raw, "inline")

    def _plan(self, trace: Trace, escaped=frozenset()) -> _Entry:
        trace = _trace_with_escapes(trace, escaped)
        problem = trace.to_problem()
        try:
            solution = self._solve(problem)
        except ValueError as exc:  # e.g. a capacity below the largest buffer (a TypeError propagates)
            warnings.warn(f"dsa could not plan this signature ({exc}); it runs eagerly", PlanningWarning,
                          stacklevel=4)
            return _Entry(trace, problem, None, None, escaped=frozenset(escaped))
        if not solution.success:
            warnings.warn(f"dsa could not plan this signature ({solution.status.name}: {solution.message}); "
                          "it runs eagerly", PlanningWarning, stacklevel=4)
            return _Entry(trace, problem, solution, None, escaped=frozenset(escaped))
        offsets = np.full(len(trace), -1, np.int64)
        offsets[np.asarray(problem.ids, np.int64)] = solution.offsets
        sizes = np.ascontiguousarray(trace.sizes, np.int64)
        deadlines = trace.deadlines()
        handle = _native.lib().dsa_plan_new(len(trace), sizes.ctypes.data, offsets.ctypes.data,
                                            deadlines.ctypes.data, int(solution.peak))
        if not handle:
            raise MemoryError("dsa_plan_new failed: " + _native.lib().dsa_last_error().decode())
        return _Entry(trace, problem, solution, handle, escaped=frozenset(escaped))

    def _slab(self, entry: _Entry):
        ident = threading.get_ident()
        slab = entry.slabs.get(ident)
        if slab is None:
            with self._lock:
                if entry.plan is None:
                    return None
                slab = _native.lib().dsa_slab_new(entry.plan)
                entry.slabs[ident] = slab
        return slab

    def _touch(self, key, entry: _Entry, slab) -> None:
        """Mark ``entry`` and ``slab`` most recently used; give back the memory of the least recently
        used idle slabs beyond ``max_slab_bytes`` (never this one's)."""
        lib = _native.lib()
        with self._lock:
            entries = self._handles.entries
            if entries.get(key) is entry:
                entries.move_to_end(key)
            elif entry.plan is None:  # evicted or replanned meanwhile
                return
            self._sync()
            handles = self._handles
            if slab in handles.resident:
                handles.resident.move_to_end(slab)
            else:
                handles.resident[slab] = entry.slab_bytes
                handles.resident_bytes += entry.slab_bytes
            limit = self._max_slab_bytes
            while limit is not None and handles.resident_bytes > limit and len(handles.resident) > 1:
                victim = next(iter(handles.resident))
                handles.forget_slab(victim)
                self._unbind()  # a trimmed slab goes back through here (and is counted) when used again
                if lib.dsa_slab_trim(victim):
                    self._stats["slab_trims"] += 1
            self._mru_slab = slab

    def _replay(self, key, entry: _Entry, args, kwargs):
        # the hot path: two ctypes calls around the forward; the counters stay in the library
        lib = _native.lib()
        slab = entry.slabs.get(threading.get_ident()) or self._slab(entry)
        if slab is not None and slab != self._mru_slab:
            self._touch(key, entry, slab)
        session = lib.dsa_replay_begin(slab) if slab is not None else None
        if not session:  # nested in another session, or no memory for a region
            self._count("eager_calls")
            return self.module(*args, **kwargs)
        entry.calls += 1
        try:
            return self.module(*args, **kwargs)
        finally:
            result = lib.dsa_replay_end(session)
            if result > 0:
                self._after_pass(key, entry, slab, result)
            elif result == 0 and self._fast is not None and not kwargs:
                # it followed its plan: the dispatcher serves this signature on this thread from now on
                with self._lock:
                    if self._handles.entries.get(key) is entry and not entry.stale and entry.plan is not None:
                        self._fast.bind(args, slab, entry)

    def _after_pass(self, key, entry: _Entry, slab, result: int) -> None:
        """A replay fell back, or slab blocks outlived it: learn, and replan or give up."""
        reason = result & _native.REASON_MASK
        escaped = entry.escaped
        if result & _native.ESCAPED:
            found = _native.slab_escaped(slab)
            self._count("escaped_blocks", len(found))
            escaped = escaped | frozenset(found.tolist())
        if reason:
            fallback_at = _native.slab_counters(slab).fallback_at
            what = f"{_native.REASONS[reason]} at allocation {fallback_at}"
        else:
            what = "a slab block outlived the pass"
        with self._lock:
            if entry.plan is None or self._handles.entries.get(key) is not entry:
                return  # already replanned, evicted or given up
            self._unbind()
            entry.escaped = escaped
            if entry.replans >= self._max_replans:
                warnings.warn(f"the plan for this signature missed {entry.replans + 1} times ({what}); "
                              "it now runs eagerly", PlanningWarning, stacklevel=5)
                self._handles.release_entry(entry)
                return
            if reason:
                entry.stale = True  # profile again at the next call (the learned escapes carry over)
                return
        # blocks that the plan serves from the slab escaped (e.g. an output picked by a branch):
        # plan again from the same trace with them left to the default allocator
        new = self._plan(entry.trace, escaped)
        new.replans = entry.replans + 1
        new.calls = entry.calls
        with self._lock:
            if self._handles.entries.get(key) is entry:
                self._install(key, new)
            else:
                self._handles.release_entry(new)

    # ------------------------------------------------------------------ public
    def plan(self, *args, **kwargs):
        """The ``(dsa.Problem, dsa.Solution)`` planned for this call's signature.

        If the signature has not been planned yet, this runs one profiled forward first.
        """
        key = signature(self._owner, args, kwargs)
        if key is None:
            raise ValueError("these inputs cannot be planned (only strided CPU tensors are)")
        with self._lock:
            entry = self._handles.entries.get(key)
        if entry is None or entry.stale:
            self._profile_and_plan(key, args, kwargs, entry)
            with self._lock:
                entry = self._handles.entries[key]
        return entry.problem, entry.solution

    def report(self) -> dict:
        """Counters and sizes of every plan so far.

        Returns
        -------
        dict
            ``signatures`` (input signatures in the plan cache, planned or eager; at most
            ``max_signatures``), ``planned_allocations`` (slab-served blocks over all plans),
            ``slab_bytes`` and ``lower_bound_bytes`` (sum over cached plans of the plan's peak and
            of its LOAD; each thread holds one slab per plan), ``resident_slab_bytes`` (bytes of
            the slabs the cache keeps in memory now; at most ``max_slab_bytes`` plus the latest
            slab), ``evictions`` (signatures dropped from the cache, least recently used first),
            ``slab_trims`` (idle slabs whose memory was given back for ``max_slab_bytes``),
            ``deferred_calls`` (calls run eagerly because their signature was new while
            signatures were not repeating), ``escaped_blocks`` (slab blocks found alive after a
            replay; the next plan leaves them to the default allocator), ``bytes_from_slab`` and
            ``bytes_from_default`` (over all replayed passes; the default allocator serves the
            blocks that escape a pass, and everything after a fallback), ``fallbacks`` (passes
            that left their plan), ``misses`` (allocations after a fallback), ``replays``,
            ``profiles``, ``eager_calls``, ``allocations``, ``allocations_from_slab``,
            ``planner_fallbacks`` (plans made inline because the planner process failed), and
            ``plans``: one dict per cached signature, least recently used first (its
            ``planned_in`` says "process" or "inline").
        """
        from dsa.bounds import load

        with self._lock:
            entries = list(self._handles.entries.values())
            stats = dict(self._stats, resident_slab_bytes=self._handles.resident_bytes)
            native = dict(self._handles.released)
            for e in entries:
                for slab in e.slabs.values():
                    for key, value in _slab_counters(slab).items():
                        native[key] += value
        stats.update(native)
        plans = []
        for e in entries:
            planned = e.plan is not None
            sol = e.solution
            plans.append({"allocations": len(e.trace), "planned_allocations": len(e.problem),
                          "slab_bytes": int(sol.peak) if planned else 0,
                          "lower_bound_bytes": int(load(e.problem)),
                          "status": sol.status.name if sol is not None else "ERROR",
                          "strategy": sol.strategy if sol is not None else None,
                          "planned_in": sol.stats.get("planned_in", "inline") if sol is not None else None,
                          "replans": e.replans, "threads": len(e.slabs), "eager": not planned,
                          "escaped": len(e.escaped)})
        planned = [p for p in plans if not p["eager"]]
        return {"signatures": len(plans),
                "planned_allocations": sum(p["planned_allocations"] for p in planned),
                "slab_bytes": sum(p["slab_bytes"] for p in planned),
                "lower_bound_bytes": sum(p["lower_bound_bytes"] for p in planned),
                **stats, "plans": plans}

    def detach(self) -> torch.nn.Module:
        """Release every slab and plan and return the plain model.

        Tensors that still live in a slab keep it alive until they die. After ``detach`` this
        wrapper runs the model eagerly.
        """
        self._detached = True
        with self._lock:
            self._unbind()
            if self._fast is not None:
                self._fast.enabled = False
            self._handles.release()
            self._seen.clear()
            self._fresh.clear()
        return self.module


def attach(model, strategy="best", *, max_replans: int = 3, max_signatures: int | None = DEFAULT_MAX_SIGNATURES,
           max_slab_bytes: int | None = DEFAULT_MAX_SLAB_BYTES, planner: str = "process",
           op_stacks: bool = False, **solve_options) -> AttachedModule:
    """Wrap ``model`` so that its CPU forward passes are planned ahead of time and served from a slab.

    Parameters
    ----------
    model : torch.nn.Module or callable
        The model; it is not copied (``detach()`` gives it back). Any other callable (a function,
        a bound method) is planned the same way; ``train()``/``eval()`` of the wrapper do not reach
        it, and only a bound method of a module has its owner's ``training`` flag in the signature.
    strategy : str or callable
        Any :func:`dsa.solve` strategy. The default, ``"best"``, runs a portfolio of greedy and
        approximation strategies and keeps the lowest peak (it stops at LOAD), then searches for a
        lower plan; traces of a few hundred allocations plan in milliseconds when a member reaches
        LOAD. Strategies that take a time limit get ``time_limit=0.2`` seconds per signature unless
        ``solve_options`` says otherwise.
    max_replans : int
        How many times a signature whose replay misses its plan (or lets a slab block outlive the
        pass) is planned again before it runs eagerly for good (with a :class:`PlanningWarning`).
    max_signatures : int or None
        The most input signatures kept in the plan cache (default 64); the least recently used
        one is dropped (with its slabs) to make room, and planned again if it comes back. None:
        no limit.
    max_slab_bytes : int or None
        The most bytes of idle slabs kept in memory (default 64 MiB, summed over signatures and
        threads); beyond it the least recently used slabs give their pages back to the system and
        fault them in again at their next pass. The slab of the latest pass is always kept, so a
        single plan larger than the limit still replays. None: no limit.
    planner : {"process", "inline"}
        Where plans are made. ``"process"`` (the default): in a helper Python process, started at
        the first plan and gone after 30 idle seconds, so that numba and the planner's compiled
        kernels (about 120 MB of resident memory for the life of a process) never load in the
        process that serves the model; the plan comes back and is validated here. The helper's
        start adds about 0.3 s to the first plan of a process. With ``strategy="best"`` and no
        options but ``time_limit``, a trace on which one of the portfolio's greedy members reaches
        the lower bound -- most models' -- is planned in the calling thread without numba and
        without the helper, in milliseconds: ``best`` would return that very plan (see
        :func:`dsa.strategies.best.portfolio_head`). ``"inline"``: in the calling thread. A
        callable ``strategy`` always plans inline; if no helper can be started or it does not
        answer, the plan is made inline with a :class:`PlanningWarning`.
    op_stacks : bool
        Record the stack of ATen ops in flight at each allocation of a profiled pass (what
        :func:`profile` records; a heap map can label blocks with it). Planning does not need it, and
        recording it runs the pass through torch's slower, observed dispatch path and maps that
        code into the process (about 0.6 MB of resident memory on a GRU), so it is off by default.
    **solve_options
        Passed to :func:`dsa.solve`. Plans are always validated: ``validate=False`` is refused.

    Returns
    -------
    AttachedModule
        Call it like the model. ``report()``, ``plan(*inputs)`` and ``detach()`` are documented there.

    Raises
    ------
    TypeError
        If ``model`` is not callable, or is already an :class:`AttachedModule`.
    dsa.adapters.torch.BuildError
        If the native allocator cannot be built or installed; the model and torch are untouched.
    ValueError
        For an unknown strategy name, a bad ``max_replans``, ``max_signatures``,
        ``max_slab_bytes``, ``planner`` or ``op_stacks``, or ``validate=False``.

    Notes
    -----
    A signature is planned at its first call. When the last 8 signatures planned that way were
    never called again (an argument that differs at every call: a fresh object, a counter), the
    wrapper stops paying for plans nobody replays: from then on a signature runs eagerly at its
    first call and is planned at its second.

    Examples
    --------
    >>> import torch
    >>> from dsa.adapters.torch import attach
    >>> net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).eval()
    >>> m = attach(net)
    >>> x = torch.randn(2, 8)
    >>> with torch.inference_mode():
    ...     outs = [m(x) for _ in range(3)]         # profile + plan, then two replays
    >>> all(torch.equal(outs[0], o) for o in outs), m.report()["signatures"]
    (True, 1)
    """
    return AttachedModule(model, strategy, max_replans=max_replans, max_signatures=max_signatures,
                          max_slab_bytes=max_slab_bytes, planner=planner, op_stacks=op_stacks,
                          **solve_options)
