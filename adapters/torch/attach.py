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

import weakref

import torch

from . import _native
from ._cache import DEFAULT_MAX_SIGNATURES, DEFAULT_MAX_SLAB_BYTES, PlanCache, signature
from ._planning import DEFAULT_PLAN_TIME_LIMIT, PLANNER_GRACE_S, PLANNERS, Planner, PlanningWarning
from ._replay import Replayer
from ._report import build_report

# the constants and signature() live in the parts' modules; they stay importable from here
__all__ = ["AttachedModule", "DEFAULT_MAX_SIGNATURES", "DEFAULT_MAX_SLAB_BYTES", "DEFAULT_PLAN_TIME_LIMIT",
           "PLANNERS", "PLANNER_GRACE_S", "PlanningWarning", "attach", "signature"]


def _check_limit(name, value, low):
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
        raise ValueError(f"{name} must be None or an int >= {low}, got {value!r}")


class AttachedModule(torch.nn.Module):
    """A module whose forward passes are served from planned slabs; see :func:`attach`.

    The wrapped model is the submodule ``module``; parameters, buffers, ``train()``/``eval()`` and
    ``to()`` reach it as usual (for a plain callable, ``module`` is the callable itself).
    """

    # It composes four parts: the plan cache (signatures, entries, bounds, the shared lock and
    # counters: _cache.PlanCache), the planner (_planning.Planner), the replayer (profiled passes,
    # native plans and slabs, misses: _replay.Replayer) and the report (_report.build_report). It
    # keeps the per-call path: the native dispatcher, then forward's choice of replay, profile or
    # eager call.

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
        cache = PlanCache(max_signatures, max_slab_bytes)
        self._cache = cache
        self._handles = cache.handles
        self._lock = cache.lock
        self._finalizer = weakref.finalize(self, cache.handles.release)  # holds no reference to self
        self._replayer = Replayer(model, cache, Planner(strategy, planner, solve_options, cache.count),
                                  max_replans=max_replans, op_stacks=op_stacks)
        self._detached = False
        # the per-call path: a native dispatcher that replays bound signatures without running
        # Python, and hands every other call to nn.Module.__call__ (hooks, then forward below)
        fast = _native.fast()
        self.__dict__["_fast"] = None
        self.__dict__["_dispatch"] = self._slow_call
        if fast is not None:
            from torch.nn.modules import module as _module

            hooks = (_module._global_forward_hooks, _module._global_forward_pre_hooks,
                     _module._global_backward_hooks, _module._global_backward_pre_hooks)
            self._fast = self._dispatch = fast.Dispatcher(model, self._slow_call, self._replayer.after_fast,
                                                          owner, self.__dict__, hooks, torch.Tensor)
            cache.fast = self._replayer.fast = self._fast

    # ------------------------------------------------------------------ calls
    def __call__(self, *args, **kwargs):
        return self._dispatch(*args, **kwargs)

    def _slow_call(self, *args, **kwargs):
        return torch.nn.Module.__call__(self, *args, **kwargs)

    def forward(self, *args, **kwargs):
        if self._detached:
            return self.module(*args, **kwargs)
        key = signature(self._owner, args, kwargs)
        entry = self._handles.entries.get(key)  # a dict lookup is atomic; writers hold the lock
        if entry is not None and entry.plan is not None and not entry.stale:
            return self._replayer.replay(key, entry, args, kwargs)
        if key is None or _native.lib().dsa_thread_busy():
            self._cache.count("eager_calls")
            return self.module(*args, **kwargs)
        if entry is None:
            if not self._cache.admit(key):  # seen for the first time while signatures do not repeat
                return self.module(*args, **kwargs)
            return self._replayer.profile_and_plan(key, args, kwargs, None)
        if entry.stale:
            return self._replayer.profile_and_plan(key, args, kwargs, entry)
        self._cache.eager_call(key, entry)  # planning failed or kept missing: eager for good
        return self.module(*args, **kwargs)

    # the cache's state under its former names (the tests and debugging read them)
    def _sync(self) -> None:
        self._cache.sync()

    @property
    def _seen(self):
        return self._cache.seen

    @property
    def _seen_limit(self) -> int:
        return self._cache.seen_limit

    @property
    def _solve_options(self) -> dict:
        return self._replayer.planner.solve_options

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
            self._replayer.profile_and_plan(key, args, kwargs, entry)
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
        return build_report(self._cache)

    def detach(self) -> torch.nn.Module:
        """Release every slab and plan and return the plain model.

        Tensors that still live in a slab keep it alive until they die. After ``detach`` this
        wrapper runs the model eagerly.
        """
        self._detached = True
        with self._lock:
            if self._fast is not None:
                self._fast.enabled = False
            self._cache.clear()
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
