"""dsa as an ExecuTorch memory-planning algorithm, plus ``lower``, ``trace`` and ``compare``."""
from __future__ import annotations

import copy
import os
import time

from ._convert import require_executorch, convert, plan

__all__ = ["DsaMemoryPlanner", "memory_planning_algo", "memory_planning_member", "lower", "trace", "compare"]


class DsaMemoryPlanner:
    """A memory-planning algorithm for ExecuTorch's ``MemoryPlanningPass`` that plans with dsa.

    Made by :func:`memory_planning_algo` (writes the specs, returns the arena sizes) or
    :func:`memory_planning_member` (returns a ``MemoryAlgoResult``, for a
    ``MemoryPlanningAlgorithmSuite``). Called as ``planner(alignment, specs, graph_module,
    graph_signature, extra_padding)``, the signature of ExecuTorch's ``greedy``
    (``executorch/exir/memory_planning.py``).

    Attributes
    ----------
    strategy : str or callable
        The dsa strategy.
    solve_options : dict
        Passed to :func:`dsa.solve`.
    history : list of (SpecTable, Plan)
        One entry per call (one per control-flow submodule, then the graph itself), for inspection.
    """

    def __init__(self, strategy="best", *, member: bool = False, **solve_options):
        self.strategy = strategy
        self.member = bool(member)
        self.solve_options = solve_options
        self.history: list = []
        name = strategy if isinstance(strategy, str) else getattr(strategy, "__name__", "custom")
        # MemoryPlanningAlgorithmSuite keys its members by __name__: one name per strategy
        self.__name__ = f"dsa_{name}"

    def __repr__(self) -> str:
        return f"<{self.__name__}: dsa.solve(strategy={self.strategy!r}, **{self.solve_options!r})>"

    def __call__(self, alignment, specs, graph_module, graph_signature=None, extra_padding=0):
        """Plan ``specs``; see the class docstring.

        Returns
        -------
        list of int or MemoryAlgoResult
            The arena sizes indexed by ``mem_id`` (index 0 reserved, 0), or, for a suite member, a
            ``MemoryAlgoResult(spec_dict, bufsizes)`` that leaves the specs untouched.
        """
        table = convert(alignment, specs, graph_module, extra_padding)
        result = plan(table, self.strategy, **self.solve_options)
        self.history.append((table, result))
        if self.member:
            mp = require_executorch()
            spec_dict = {
                s: mp.SpecAllocResult(mem_id=result.mem_ids[i], mem_obj_id=result.mem_obj_ids[i],
                                      mem_offset=result.offsets[i])
                for i, s in enumerate(table.specs)}
            return mp.MemoryAlgoResult(spec_dict, list(result.bufsizes))
        for i, s in enumerate(table.specs):
            s.mem_id = result.mem_ids[i]
            s.mem_offset = result.offsets[i]
            s.mem_obj_id = result.mem_obj_ids[i]
        return list(result.bufsizes)


def memory_planning_algo(strategy="best", **solve_options) -> DsaMemoryPlanner:
    """An ExecuTorch memory-planning algorithm that plans every arena with ``dsa.solve``.

    Pass it as ``MemoryPlanningPass(memory_planning_algo=memory_planning_algo())``. Like ExecuTorch's
    ``MemoryPlanningAlgorithmSuite``, it writes ``mem_id``, ``mem_offset`` and ``mem_obj_id`` on
    the specs and returns the arena sizes, index 0 reserved (see ``apply_algo`` in
    ``executorch/exir/memory_planning.py``).

    Each ``mem_id`` becomes one :class:`dsa.Problem`: the specs' inclusive lifetimes ``[first,
    last]`` become ``[first, last + 1)``, sizes are ``allocated_memory`` at the pass's alignment,
    offsets are multiples of it; specs with a ``storage_base`` are placed inside their base; the
    bytes reserved for control-flow submodules (``graph_module.input_mem_buffer_sizes``) stay at the
    bottom of the arena and ``extra_padding`` is added to its size, as ExecuTorch's greedy does.
    Every plan passes :func:`dsa.validate` before it is written.

    Parameters
    ----------
    strategy : str or callable, default "best"
        A dsa strategy (see :func:`dsa.available_strategies`).
    **solve_options
        Passed to :func:`dsa.solve` (``time_limit=``, ``seed=``...). With ``pools=[dsa.Pool(...),
        ...]`` the tensors of the default arena are planned over memory pools (:mod:`dsa.pools`):
        pool ``p`` becomes the arena ``mem_id = pool_mem_ids[p]`` (option ``pool_mem_ids``; default
        ``p + 1``, so the first pool, the fastest, is arena 1), each arena within its pool's capacity,
        the cost ``sum cost(pool) x size`` minimised. The device then places each arena in its memory.

    Returns
    -------
    DsaMemoryPlanner

    Raises
    ------
    ValueError
        (when the pass calls it) for a spec it cannot plan, naming the spec's node: no lifetime, an
        unbounded dynamic shape, a negative size...
    RuntimeError
        If dsa finds no valid plan.

    Examples
    --------
    >>> from dsa.adapters.executorch import memory_planning_algo
    >>> algo = memory_planning_algo("best", time_limit=1.0)
    >>> algo.__name__
    'dsa_best'
    """
    return DsaMemoryPlanner(strategy, member=False, **solve_options)


def memory_planning_member(strategy="best", **solve_options) -> DsaMemoryPlanner:
    """Like :func:`memory_planning_algo`, but a member of ExecuTorch's ``MemoryPlanningAlgorithmSuite``.

    It returns a ``MemoryAlgoResult`` and leaves the specs as they are; the suite keeps the member
    with the smallest total and writes its plan, so
    ``MemoryPlanningAlgorithmSuite([greedy, memory_planning_member()])`` is never worse than
    ExecuTorch's greedy.

    Parameters
    ----------
    strategy : str or callable, default "best"
    **solve_options
        Passed to :func:`dsa.solve`.

    Returns
    -------
    DsaMemoryPlanner
    """
    return DsaMemoryPlanner(strategy, member=True, **solve_options)


def _load_program(program):
    """An ExportedProgram or a copy of an EdgeProgramManager, from either or from a ``.pt2`` path."""
    require_executorch()
    import torch
    from executorch.exir import EdgeProgramManager, to_edge

    if isinstance(program, (str, os.PathLike)):
        path = os.fspath(program)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such file")
        try:
            program = torch.export.load(path)
        except Exception as exc:
            raise ValueError(f"{path}: not a saved torch.export program (.pt2): {exc}") from None
    if isinstance(program, torch.export.ExportedProgram):
        return to_edge(program)
    if isinstance(program, EdgeProgramManager):
        return copy.deepcopy(program)  # to_executorch changes the programs it lowers
    raise TypeError(f"expected a torch.export.ExportedProgram, an EdgeProgramManager or a path to a .pt2 "
                    f"file, got {type(program).__name__}")


def lower(program, strategy="best", *, method=None, config=None, alloc_graph_input=True,
          alloc_graph_output=True, alloc_mutable_buffers=True, **solve_options):
    """Lower ``program`` to an ExecuTorch program whose memory dsa plans.

    Parameters
    ----------
    program : ExportedProgram, EdgeProgramManager or path to a ``.pt2`` file
        An EdgeProgramManager is copied (``to_executorch`` changes the programs it lowers).
    strategy : str, callable or None, default "best"
        The dsa strategy; None keeps ExecuTorch's own planner (for comparisons).
    method : str, optional
        Plan only this method with dsa (the others with ExecuTorch's planner). Default: all.
    config : dict, optional
        Other ``ExecutorchBackendConfig`` fields (such as ``reinplace_extra_ops``).
    alloc_graph_input, alloc_graph_output, alloc_mutable_buffers : bool, default True
        ``MemoryPlanningPass`` flags: whether the arenas hold the graph's inputs, outputs and
        mutable buffers.
    **solve_options
        Passed to :func:`dsa.solve`.

    Returns
    -------
    ExecutorchProgramManager
        Its ``buffer`` is the ``.pte`` program; ``executorch_program.execution_plan[k]
        .non_const_buffer_sizes`` the arenas.
    """
    require_executorch()
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass

    edge = _load_program(program)

    def make_pass():
        algo = None if strategy is None else memory_planning_algo(strategy, **solve_options)
        return MemoryPlanningPass(memory_planning_algo=algo, alloc_graph_input=alloc_graph_input,
                                  alloc_graph_output=alloc_graph_output,
                                  alloc_mutable_buffers=alloc_mutable_buffers)

    if method is None:
        passes = make_pass()
    else:
        if method not in edge.methods:
            raise ValueError(f"no method {method!r}; the program has {sorted(edge.methods)}")
        passes = {name: make_pass() if name == method else MemoryPlanningPass() for name in edge.methods}
    return edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=passes, **(config or {})))


class _Recorder:
    """Runs several planning algorithms on each call's specs, records them, and writes the smallest plan."""

    def __init__(self, members):
        self.members = members  # [(name, callable returning MemoryAlgoResult)]
        self.calls = []  # per call: (SpecTable, {name: (bufsizes or None, seconds, error)})
        self.__name__ = "dsa_compare"

    def __call__(self, alignment, specs, graph_module, graph_signature=None, extra_padding=0):
        specs = list(specs)
        table = convert(alignment, specs, graph_module, extra_padding)
        results, best = {}, None
        saved = getattr(graph_module, "input_mem_buffer_sizes", None)
        for name, algo in self.members:
            # ExecuTorch's naive extends input_mem_buffer_sizes in place: give each member a copy
            if saved is not None:
                graph_module.input_mem_buffer_sizes = list(saved)
            t0 = time.perf_counter()
            try:
                res = algo(alignment, specs, graph_module, graph_signature, extra_padding)
            except Exception as exc:  # naive refuses storage-backed specs, exact may time out...
                results[name] = (None, time.perf_counter() - t0, f"{type(exc).__name__}: {exc}")
                continue
            results[name] = (list(res.bufsizes), time.perf_counter() - t0, None)
            if best is None or sum(res.bufsizes) < sum(best.bufsizes):
                best = res
        if saved is not None:
            graph_module.input_mem_buffer_sizes = saved
        self.calls.append((table, results))
        if best is None:
            raise RuntimeError("no planning algorithm succeeded: " +
                               "; ".join(f"{k}: {v[2]}" for k, v in results.items()))
        for spec, r in best.spec_dict.items():
            spec.mem_id, spec.mem_offset, spec.mem_obj_id = r.mem_id, r.mem_offset, r.mem_obj_id
        return list(best.bufsizes)


def trace(program, *, method="forward", mem_id=1, config=None, alloc_graph_input=True,
          alloc_graph_output=True, alloc_mutable_buffers=True):
    """The tensors ExecuTorch plans in one arena of ``program``, as a :class:`dsa.Problem`.

    The program is lowered with ``to_executorch`` (ExecuTorch's own planner places the tensors so
    that lowering completes); the specs its ``MemoryPlanningPass`` hands to the planning algorithm
    for the top-level graph of ``method`` are converted exactly as :func:`memory_planning_algo`
    converts them: half-open lifetimes ``[first, last + 1)`` in node indices, sizes aligned as
    ExecuTorch aligns them, the pass's alignment, and ``"node_name (op)"`` as each buffer's label.
    Storage-backed specs are folded into their base, and the bytes reserved for control-flow
    submodules are not rows.

    Parameters
    ----------
    program : ExportedProgram, EdgeProgramManager or path to a ``.pt2`` file
    method : str, default "forward"
    mem_id : int, default 1
        The arena (1 is ExecuTorch's default one).
    config : dict, optional
        Other ``ExecutorchBackendConfig`` fields.
    alloc_graph_input, alloc_graph_output, alloc_mutable_buffers : bool, default True
        ``MemoryPlanningPass`` flags.

    Returns
    -------
    dsa.Problem
        Plan it with :func:`dsa.solve`, compare strategies, or draw it with :mod:`dsa.plot`.
    """
    table = _record(program, [("greedy", _greedy())], method, config, alloc_graph_input, alloc_graph_output,
                    alloc_mutable_buffers).calls[-1][0]
    if mem_id not in table.problems:
        from dsa.problem import Problem

        if any(m != mem_id for m in table.problems):
            raise ValueError(f"no tensor is planned in mem_id {mem_id}; arenas in use: {sorted(table.problems)}")
        return Problem([], [], [], ids=[], alignments=table.alignment)
    return table.problems[mem_id][0]


def _greedy():
    mp = require_executorch()
    return mp.greedy


def _record(program, members, method, config, alloc_graph_input, alloc_graph_output, alloc_mutable_buffers):
    require_executorch()
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass

    edge = _load_program(program)
    if method not in edge.methods:
        raise ValueError(f"no method {method!r}; the program has {sorted(edge.methods)}")
    recorder = _Recorder(members)
    passes = {name: MemoryPlanningPass(memory_planning_algo=recorder, alloc_graph_input=alloc_graph_input,
                                       alloc_graph_output=alloc_graph_output,
                                       alloc_mutable_buffers=alloc_mutable_buffers)
              if name == method else MemoryPlanningPass() for name in edge.methods}
    edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=passes, **(config or {})))
    if not recorder.calls:
        raise ValueError(f"method {method!r} has nothing to plan")
    return recorder


def compare(program, strategies=("best", "exact"), *, method="forward", time_limit=10.0, config=None,
            alloc_graph_input=True, alloc_graph_output=True, alloc_mutable_buffers=True):
    """Arena sizes of ExecuTorch's greedy and naive planners and of dsa's strategies, on the same specs.

    ``program`` is lowered once; every algorithm plans the same specs of every graph (control-flow
    submodules, then the top-level graph) and the smallest plan of each graph is kept for lowering to
    go on, so with control flow the reserved submodule bytes are the smallest plan's for all rows.

    Parameters
    ----------
    program : ExportedProgram, EdgeProgramManager or path to a ``.pt2`` file
    strategies : sequence of str, default ("best", "exact")
        dsa strategies, each run with ``time_limit``.
    method : str, default "forward"
    time_limit : float, default 10.0
        Seconds per dsa strategy and arena.
    config : dict, optional
        Other ``ExecutorchBackendConfig`` fields.
    alloc_graph_input, alloc_graph_output, alloc_mutable_buffers : bool, default True
        ``MemoryPlanningPass`` flags.

    Returns
    -------
    list of dict
        One row per algorithm (``"executorch greedy"``, ``"executorch naive"``, ``"dsa <strategy>"``),
        then ``"LOAD"``: ``algorithm``, ``arenas`` (bytes per ``mem_id``, from 1), ``total``,
        ``ratio`` (``total`` over the LOAD row's total), ``seconds`` (planning time, summed over the
        graphs; None for LOAD), ``specs`` (tensors planned in the top-level graph) and ``error``
        (None, or why the algorithm failed, as ExecuTorch's naive does on storage-backed tensors).
    """
    from dsa.strategies import resolve_name

    for s in strategies:
        if isinstance(s, str):
            resolve_name(s)  # an unknown name raises ValueError listing the valid ones, before lowering
    mp = require_executorch()
    members = [("executorch greedy", mp.greedy), ("executorch naive", mp.naive)]
    for s in strategies:
        members.append((f"dsa {s}", memory_planning_member(s, time_limit=time_limit)))
    recorder = _record(program, members, method, config, alloc_graph_input, alloc_graph_output,
                       alloc_mutable_buffers)
    table, results = recorder.calls[-1]
    bound = table.lower_bounds()
    total_bound = sum(bound)
    rows = []
    for name, _ in members:
        bufsizes, _, error = results[name]
        seconds = sum(call[1][name][1] for call in recorder.calls)
        if bufsizes is None:
            rows.append(dict(algorithm=name, arenas=None, total=None, ratio=None, seconds=seconds,
                             specs=len(table.specs), error=error))
            continue
        total = sum(bufsizes)
        rows.append(dict(algorithm=name, arenas=bufsizes[1:], total=total,
                         ratio=total / total_bound if total_bound else 1.0, seconds=seconds,
                         specs=len(table.specs), error=None))
    rows.append(dict(algorithm="LOAD", arenas=bound[1:], total=total_bound, ratio=1.0, seconds=None,
                     specs=len(table.specs), error=None))
    return rows
