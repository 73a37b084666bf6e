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
  a fresh region, and the old one is freed when its last tensor dies;
* each thread that runs the model has its own slab; a nested call on a thread that is already
  replaying runs eagerly;
* an exception inside forward closes the pass normally.
"""
from __future__ import annotations

import threading
import warnings
import weakref
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
    sparse layouts)."""
    parts = [module.training, torch.is_grad_enabled(), torch.is_inference_mode_enabled(),
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


@dataclass
class _Entry:
    """One input signature: its trace, plan and per-thread slabs."""

    trace: Trace
    problem: object
    solution: object
    plan: int | None  # native plan handle, None when the signature runs eagerly
    slabs: dict = field(default_factory=dict)  # thread ident -> native slab handle
    replans: int = 0
    stale: bool = False  # a replay missed: profile again on the next call


def _slab_counters(slab) -> dict:
    c = _native.slab_counters(slab)
    return {key: getattr(c, name) for key, name in _NATIVE_COUNTERS.items()}


class _Handles:
    """Native plan and slab handles to release (also from a weakref finalizer), and the counters of
    slabs already released."""

    def __init__(self):
        self.entries: dict = {}
        self.released = dict.fromkeys(_NATIVE_COUNTERS, 0)

    def release_entry(self, entry: _Entry) -> None:
        lib = _native.lib()
        for slab in entry.slabs.values():
            for key, value in _slab_counters(slab).items():
                self.released[key] += value
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


def _takes_time_limit(strategy: str) -> bool:
    from dsa.strategies import strategy_info

    return strategy_info(strategy).time_limit


class AttachedModule(torch.nn.Module):
    """A module whose forward passes are served from planned slabs; see :func:`attach`.

    The wrapped model is the submodule ``module``; parameters, buffers, ``train()``/``eval()`` and
    ``to()`` reach it as usual.
    """

    def __init__(self, model: torch.nn.Module, strategy="best", *, max_replans: int = 3,
                 **solve_options):
        super().__init__()
        if not callable(model):
            raise TypeError(f"attach() needs a torch.nn.Module or callable, got {type(model).__name__}")
        if not isinstance(max_replans, int) or max_replans < 0:
            raise ValueError(f"max_replans must be a non-negative int, got {max_replans!r}")
        if isinstance(strategy, str):
            from dsa.strategies import resolve_name

            resolve_name(strategy)  # an unknown name fails here, not at the first call
        if solve_options.get("validate", True) is not True:
            raise ValueError("attach() always validates its plans (a wrong offset would corrupt the model's "
                             "outputs); do not pass validate=False")
        _native.lib()  # build and install now: a BuildError surfaces at attach time
        self.module = model
        self._strategy = strategy
        if isinstance(strategy, str) and _takes_time_limit(strategy):
            solve_options.setdefault("time_limit", DEFAULT_PLAN_TIME_LIMIT)
        self._solve_options = {**solve_options, "validate": True}
        self._max_replans = max_replans
        self._lock = threading.Lock()
        self._handles = _Handles()
        self._finalizer = weakref.finalize(self, self._handles.release)
        self._stats = {"profiles": 0, "eager_calls": 0}
        self._detached = False

    # ------------------------------------------------------------------ calls
    def forward(self, *args, **kwargs):
        if self._detached:
            return self.module(*args, **kwargs)
        key = signature(self.module, args, kwargs)
        entry = self._handles.entries.get(key)  # a dict lookup is atomic; writers hold the lock
        if entry is not None and entry.plan is not None and not entry.stale:
            return self._replay(entry, args, kwargs)
        if key is None or _native.lib().dsa_thread_busy():
            self._count("eager_calls")
            return self.module(*args, **kwargs)
        if entry is None or entry.stale:
            return self._profile_and_plan(key, args, kwargs, entry)
        self._count("eager_calls")  # planning failed or kept missing: eager for good
        return self.module(*args, **kwargs)

    def _count(self, name, value=1):
        with self._lock:
            self._stats[name] += value

    def _profile_and_plan(self, key, args, kwargs, old: _Entry | None):
        output, trace = _call_profiled(self.module, args, kwargs)
        entry = self._plan(trace)
        if old is not None:
            entry.replans = old.replans + 1
        with self._lock:
            self._stats["profiles"] += 1
            current = self._handles.entries.get(key)
            self._handles.entries[key] = entry
            if current is not None:
                self._handles.release_entry(current)
        return output

    def _plan(self, trace: Trace) -> _Entry:
        from dsa.solver import solve

        problem = trace.to_problem()
        try:
            solution = solve(problem, strategy=self._strategy, **self._solve_options)
        except ValueError as exc:  # e.g. a capacity below the largest buffer
            warnings.warn(f"dsa could not plan this signature ({exc}); it runs eagerly", PlanningWarning,
                          stacklevel=4)
            return _Entry(trace, problem, None, None)
        if not solution.success:
            warnings.warn(f"dsa could not plan this signature ({solution.status.name}: {solution.message}); "
                          "it runs eagerly", PlanningWarning, stacklevel=4)
            return _Entry(trace, problem, solution, None)
        offsets = np.full(len(trace), -1, np.int64)
        offsets[np.asarray(problem.ids, np.int64)] = solution.offsets
        sizes = np.ascontiguousarray(trace.sizes, np.int64)
        deadlines = trace.deadlines()
        handle = _native.lib().dsa_plan_new(len(trace), sizes.ctypes.data, offsets.ctypes.data,
                                            deadlines.ctypes.data, int(solution.peak))
        if not handle:
            raise MemoryError("dsa_plan_new failed: " + _native.lib().dsa_last_error().decode())
        return _Entry(trace, problem, solution, handle)

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

    def _replay(self, entry: _Entry, args, kwargs):
        # the hot path: two ctypes calls around the forward; the counters stay in the library
        lib = _native.lib()
        slab = entry.slabs.get(threading.get_ident()) or self._slab(entry)
        session = lib.dsa_replay_begin(slab) if slab is not None else None
        if not session:  # nested in another session, or no memory for a region
            self._count("eager_calls")
            return self.module(*args, **kwargs)
        try:
            return self.module(*args, **kwargs)
        finally:
            reason = lib.dsa_replay_end(session)
            if reason > 0:
                self._fell_back(entry, slab, reason)

    def _fell_back(self, entry: _Entry, slab, reason: int) -> None:
        fallback_at = _native.slab_counters(slab).fallback_at
        with self._lock:
            if entry.replans < self._max_replans:
                entry.stale = True
            elif entry.plan is not None:
                warnings.warn(f"the plan for this signature missed {entry.replans + 1} times "
                              f"({_native.REASONS[reason]} at allocation {fallback_at}); "
                              "it now runs eagerly", PlanningWarning, stacklevel=5)
                self._handles.release_entry(entry)

    # ------------------------------------------------------------------ public
    def plan(self, *args, **kwargs):
        """The ``(dsa.Problem, dsa.Solution)`` planned for this call's signature.

        If the signature has not been planned yet, this runs one profiled forward first.
        """
        key = signature(self.module, args, kwargs)
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
            ``signatures`` (planned input signatures), ``planned_allocations`` (slab-served blocks
            over all plans), ``slab_bytes`` and ``lower_bound_bytes`` (sum over plans of the plan's
            peak and of its LOAD; each thread holds one slab per plan), ``bytes_from_slab`` and
            ``bytes_from_default`` (over all replayed passes; the default allocator serves the
            blocks that escape a pass, and everything after a fallback), ``fallbacks`` (passes
            that left their plan), ``misses`` (allocations after a fallback), ``replays``,
            ``profiles``, ``eager_calls``, ``allocations``, ``allocations_from_slab``, and
            ``plans``: one dict per signature.
        """
        from dsa.bounds import load

        with self._lock:
            entries = list(self._handles.entries.values())
            stats = dict(self._stats)
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
                          "replans": e.replans, "threads": len(e.slabs), "eager": not planned})
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
            self._handles.release()
        return self.module


def attach(model, strategy="best", *, max_replans: int = 3, **solve_options) -> AttachedModule:
    """Wrap ``model`` so that its CPU forward passes are planned ahead of time and served from a slab.

    Parameters
    ----------
    model : torch.nn.Module
        The model; it is not copied (``detach()`` gives it back).
    strategy : str or callable
        Any :func:`dsa.solve` strategy. The default, ``"best"``, runs a portfolio of greedy and
        approximation strategies and keeps the lowest peak (it stops at LOAD), then searches for a
        lower plan; traces of a few hundred allocations plan in milliseconds when a member reaches
        LOAD. Strategies that take a time limit get ``time_limit=0.2`` seconds per signature unless
        ``solve_options`` says otherwise.
    max_replans : int
        How many times a signature whose replay misses its plan is profiled again before it runs
        eagerly for good (with a :class:`PlanningWarning`).
    **solve_options
        Passed to :func:`dsa.solve`. Plans are always validated: ``validate=False`` is refused.

    Returns
    -------
    AttachedModule
        Call it like the model. ``report()``, ``plan(*inputs)`` and ``detach()`` are documented there.

    Raises
    ------
    dsa.adapters.torch.BuildError
        If the native allocator cannot be built or installed; the model and torch are untouched.
    ValueError
        For an unknown strategy name, a bad ``max_replans`` or ``validate=False``.

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
    return AttachedModule(model, strategy, max_replans=max_replans, **solve_options)
