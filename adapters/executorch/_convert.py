"""ExecuTorch tensor specs to dsa problems, and dsa plans back to spec offsets.

This module holds the contract between ExecuTorch's ``MemoryPlanningPass`` and dsa. It was read off
ExecuTorch 1.5.1's sources (``executorch/exir/memory_planning.py``: ``update_all_tensors_lifetime``,
``collect_specs_from_nodes``, ``apply_algo``, ``greedy``, ``naive``, ``_compute_total_sizes``,
``_resolve_storage_base_specs``; ``executorch/exir/tensor.py``: ``TensorSpec``):

* The pass calls ``algo(alignment, specs, graph_module, graph_signature, extra_padding)`` once per
  graph (control-flow submodules first, then their parent) with the specs to plan, already filtered by
  the pass's flags (``alloc_graph_input``, ``alloc_graph_output``, ``alloc_mutable_buffers``), the
  constants and the unbounded dynamic tensors removed.
* ``spec.lifetime`` is ``[first, last]``: *inclusive* indices of the first and last node that use the
  tensor (graph inputs start at 0; mutable buffers live to the last node). dsa's lifetimes are
  half-open, so a spec becomes ``[first, last + 1)``.
* A spec's size is ``spec.allocated_memory`` after ``spec.realign(alignment)``: its byte count
  rounded up to the alignment. Offsets are multiples of the alignment.
* ``spec.mem_id`` selects the arena: ``None`` means the default arena 1; a value set by an earlier
  pass is kept. The algorithm returns ``bufsizes``, the size of each arena indexed by ``mem_id``, with
  index 0 reserved (always 0).
* A spec whose ``storage_base`` is set lives inside its base's storage at ``storage_base_offset``
  bytes (chains are allowed, cycles are not): it takes its base's ``mem_id``, and its ``mem_offset``
  is absolute (the base's offset plus the offset). The pass has already widened the base's lifetime
  to cover it. Only roots (specs without a base) are planned.
* ``graph_module.input_mem_buffer_sizes[mem_id]`` bytes at the bottom of an arena are reserved for
  the control-flow submodules (planned from offset 0 of the same arena); ExecuTorch's greedy places
  everything else above them for the whole graph, and so does this adapter.
* ``extra_padding`` (64 when an XNNPACK delegate is present) is added once to each arena's size, not
  to each tensor.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["SpecTable", "convert", "spec_labels"]


def require_executorch():
    """ExecuTorch's ``exir.memory_planning`` module; ImportError naming the extra when it is missing."""
    try:
        import executorch.exir.memory_planning as memory_planning
    except ImportError as exc:  # pragma: no cover - exercised only without executorch
        raise ImportError(
            "dsa.adapters.executorch needs ExecuTorch: pip install 'dsa-planner[executorch]' "
            "(executorch==1.5.1 beside torch==2.13.0)") from exc
    return memory_planning


def _op_name(node) -> str:
    if node.op == "placeholder":
        return "input"
    if node.op == "call_function":
        target = node.target
        if getattr(target, "__module__", "").startswith("executorch.exir.memory"):
            return getattr(target, "__name__", str(target))
        return str(target)
    return node.op


def spec_labels(graph_module) -> dict[int, str]:
    """Map ``id(spec)`` to a readable label ``"node_name (op)"`` for every spec in ``graph_module``.

    An out-variant op's output spec is first seen on its ``memory.alloc`` node; the op's own node
    names it instead. Nodes with several outputs label them ``name[i]``; a spec that only the graph's
    output node holds is labelled ``output[i] (output)``.
    """
    mp = require_executorch()
    labels: dict[int, str] = {}
    weak: set[int] = set()
    for node in graph_module.graph.nodes:
        # the output node only names what no other node does
        is_weak = node.op == "output" or (node.op == "call_function" and _op_name(node) in ("alloc", "view"))
        specs = mp.get_node_tensor_specs(node)
        for i, spec in enumerate(specs):
            key = id(spec)
            if key in labels and (is_weak or key not in weak):
                continue
            name = f"{node.name}[{i}]" if len(specs) > 1 else node.name
            labels[key] = f"{name} ({_op_name(node)})"
            if is_weak:
                weak.add(key)
            else:
                weak.discard(key)
    return labels


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass
class SpecTable:
    """The specs of one ``algo`` call, checked and grouped into one dsa problem per ``mem_id``.

    Attributes
    ----------
    alignment, extra_padding : int
        As the pass gave them.
    specs : list
        The specs, in the order the pass gave them.
    labels : list of str
        One per spec: ``"node_name (op)"``.
    sizes : list of int
        ``allocated_memory`` of each spec, aligned.
    mem_ids : list of int
        The arena of each spec (a storage-backed spec takes its root's).
    root : list of int
        Index of the spec whose storage each spec lives in (itself for a root).
    root_offset : list of int
        Byte offset of each spec inside its root's storage (0 for a root).
    problems : dict
        ``mem_id -> (dsa.Problem, [spec indices of its rows])``: the roots of each arena, with
        half-open lifetimes ``[first, last + 1)``.
    reserved : dict
        ``mem_id -> bytes`` at the bottom of the arena reserved for control-flow submodules (rounded up
        to the alignment).
    input_sizes : list of int
        ``graph_module.input_mem_buffer_sizes`` as given (empty when there is none).
    """

    alignment: int
    extra_padding: int
    specs: list
    labels: list
    sizes: list
    mem_ids: list
    root: list
    root_offset: list
    problems: dict = field(default_factory=dict)
    reserved: dict = field(default_factory=dict)
    input_sizes: list = field(default_factory=list)

    @property
    def n_buffers(self) -> int:
        """Length of the ``bufsizes`` list: index 0 reserved, then one per ``mem_id`` in use."""
        top = max(self.mem_ids, default=1)
        return max(2, top + 1, len(self.input_sizes))

    def lower_bounds(self) -> list[int]:
        """Per ``mem_id`` (index 0 reserved), the smallest arena any plan can have in this layout.

        ``reserved + LOAD + extra_padding`` for an arena with specs, where LOAD is that of the
        aligned sizes; the reserved size alone for an arena used only by submodules.
        """
        from dsa.bounds import load

        out = [0] * self.n_buffers
        for m, (problem, _) in self.problems.items():
            out[m] = self.reserved.get(m, 0) + load(problem) + self.extra_padding
        for m, size in enumerate(self.input_sizes):
            if m > 0:
                out[m] = max(out[m], int(size))
        return out


def convert(alignment, specs, graph_module, extra_padding=0) -> SpecTable:
    """Check the specs of one ``algo`` call and build one dsa problem per ``mem_id``.

    Parameters
    ----------
    alignment : int
        The pass's alignment; every spec is realigned to it (``spec.realign``), as ExecuTorch's own
        algorithms do.
    specs : iterable of TensorSpec
    graph_module : torch.fx.GraphModule
        Labels the specs by node, and carries ``input_mem_buffer_sizes``.
    extra_padding : int, default 0

    Returns
    -------
    SpecTable

    Raises
    ------
    ValueError
        For a spec that cannot be planned, naming it: no lifetime, an unbounded dynamic shape, a
        size that is not a non-negative integer, a bad ``mem_id``, a ``storage_base`` that is not
        planned here, cyclic, misaligned or too small.
    """
    from dsa.problem import Problem

    if not _is_int(alignment) or alignment < 1:
        raise ValueError(f"alignment must be a positive integer, got {alignment!r}")
    if not _is_int(extra_padding) or extra_padding < 0:
        raise ValueError(f"extra_padding must be a non-negative integer, got {extra_padding!r}")
    specs = list(specs)
    by_id = {id(s): i for i, s in enumerate(specs)}
    names = spec_labels(graph_module) if graph_module is not None and hasattr(graph_module, "graph") else {}
    labels, seen = [], set()
    for i, s in enumerate(specs):
        label = names.get(id(s), f"spec #{i}")
        if label in seen:
            label = f"{label} #{i}"
        seen.add(label)
        labels.append(label)

    sizes, mem_ids, lifetimes = [], [], []
    for i, s in enumerate(specs):
        what = f"spec {labels[i]!r}"
        dynamism = getattr(s, "shape_dynamism", None)
        if getattr(dynamism, "name", None) == "DYNAMIC_UNBOUND":
            raise ValueError(f"{what}: its shape is dynamic and unbounded, so its size is not known ahead "
                             "of time; ExecuTorch allocates such tensors at run time and they cannot be planned")
        realign = getattr(s, "realign", None)
        if callable(realign):
            realign(alignment)
        try:
            size = s.allocated_memory
        except Exception as exc:  # a symbolic shape, a missing attribute...
            raise ValueError(f"{what}: its size (allocated_memory) cannot be computed: {exc}") from None
        if not _is_int(size) or size < 0:
            raise ValueError(f"{what}: size (allocated_memory) must be a non-negative integer, got {size!r}")
        lifetime = getattr(s, "lifetime", None)
        if (lifetime is None or len(lifetime) != 2 or not all(_is_int(t) for t in lifetime)):
            raise ValueError(f"{what}: no lifetime (got {lifetime!r}); ExecuTorch's update_all_tensors_lifetime "
                             "gives every spec used in the graph [first, last] node indices")
        first, last = lifetime
        if first < 0 or last < first:
            raise ValueError(f"{what}: lifetime [{first}, {last}] is not a range of node indices (inclusive)")
        mem_id = getattr(s, "mem_id", None)
        if mem_id is None:
            mem_id = 1
        elif not _is_int(mem_id) or mem_id < 1:
            raise ValueError(f"{what}: mem_id must be a positive integer (0 is reserved), got {mem_id!r}")
        sizes.append(size)
        mem_ids.append(mem_id)
        lifetimes.append([first, last])

    # storage-backed specs: resolve each chain to its root, with the byte offset inside it
    root, root_offset = list(range(len(specs))), [0] * len(specs)
    for i, s in enumerate(specs):
        base = getattr(s, "storage_base", None)
        if base is None:
            continue
        offset, j, chain = 0, i, {i}
        while True:
            b = getattr(specs[j], "storage_base", None)
            if b is None:
                break
            what = f"spec {labels[j]!r}"
            k = by_id.get(id(b))
            if k is None:
                raise ValueError(f"{what}: its storage_base is not among the specs planned in this call "
                                 "(a graph input or output that the pass does not allocate?)")
            if k in chain:
                raise ValueError(f"{what}: circular storage_base chain")
            off = getattr(specs[j], "storage_base_offset", 0)
            if not _is_int(off) or off < 0:
                raise ValueError(f"{what}: storage_base_offset must be a non-negative integer, got {off!r}")
            if off + sizes[j] > sizes[k]:
                raise ValueError(f"{what}: {sizes[j]} bytes at offset {off} do not fit in its storage_base "
                                 f"{labels[k]!r} ({sizes[k]} bytes)")
            chain.add(k)
            offset += off
            j = k
        if offset % alignment:
            raise ValueError(f"spec {labels[i]!r}: its offset {offset} inside {labels[j]!r} is not a multiple "
                             f"of the alignment {alignment}")
        root[i], root_offset[i] = j, offset
        # a root's lifetime covers every spec stored in it (ExecuTorch's pass widens it already)
        lifetimes[j][0] = min(lifetimes[j][0], lifetimes[i][0])
        lifetimes[j][1] = max(lifetimes[j][1], lifetimes[i][1])
    for i in range(len(specs)):
        mem_ids[i] = mem_ids[root[i]]

    input_sizes = [int(v) for v in (getattr(graph_module, "input_mem_buffer_sizes", None) or [])]
    table = SpecTable(alignment, extra_padding, specs, labels, sizes, mem_ids, root, root_offset,
                      input_sizes=input_sizes)
    rows_by_mem: dict[int, list[int]] = {}
    for i in range(len(specs)):
        if root[i] == i:
            rows_by_mem.setdefault(mem_ids[i], []).append(i)
    for m, rows in sorted(rows_by_mem.items()):
        problem = Problem([lifetimes[i][0] for i in rows], [lifetimes[i][1] + 1 for i in rows],
                          [sizes[i] for i in rows], ids=[labels[i] for i in rows], alignments=alignment)
        table.problems[m] = (problem, rows)
    for m, size in enumerate(input_sizes):
        if m > 0 and size > 0:
            table.reserved[m] = math.ceil(size / alignment) * alignment
    return table


@dataclass
class Plan:
    """A plan of a :class:`SpecTable`: an absolute offset and an arena per spec, and the arena sizes.

    Attributes
    ----------
    offsets, mem_ids, mem_obj_ids : list of int
        One per spec of the table, in its order. ``mem_obj_ids`` number the groups of specs whose
        address ranges overlap (ExecuTorch's verifier asks specs that share storage to share it).
    bufsizes : list of int
        Arena sizes, index 0 reserved.
    solutions : dict
        ``mem_id -> dsa.Solution`` of each arena's problem.
    seconds : float
        Planning time of the whole call.
    """

    offsets: list
    mem_ids: list
    mem_obj_ids: list
    bufsizes: list
    solutions: dict
    seconds: float = 0.0


def plan(table: SpecTable, strategy="best", **solve_options) -> Plan:
    """Plan every arena of ``table`` with :func:`dsa.solve`, validate, and place the storage-backed specs.

    With ``pools=[dsa.Pool(...), ...]`` among the options, the tensors of the default arena
    (``mem_id`` 1) are planned over the pools (:mod:`dsa.pools`) and pool ``p`` becomes the arena
    ``pool_mem_ids[p]`` (default ``p + 1``: the first pool is arena 1); a pool's capacity bounds its
    whole arena (reserved bytes and padding included). Arenas that an earlier pass assigned stay
    as they are.

    Raises
    ------
    RuntimeError
        If dsa returns no valid plan for an arena (never a silently wrong plan).
    ValueError
        For pools that the table cannot use (a pool mem_id taken by an earlier pass, a pool smaller than
        its reserved bytes), or ``allowed=``/``weights=``.
    dsa.InvalidPlanError
        If :func:`dsa.validate` rejects a plan.
    """
    import time

    from dsa.solver import solve
    from dsa.validator import validate

    t0 = time.perf_counter()
    solve_options = dict(solve_options)
    pools, pool_mem_ids = _pool_options(table, solve_options)
    n = len(table.specs)
    offsets = [0] * n
    mem_ids = list(table.mem_ids)
    top = max([table.n_buffers - 1] + (pool_mem_ids or []))
    bufsizes = [0] * (top + 1)
    solutions = {}
    for m, (problem, rows) in table.problems.items():
        if pools is not None and m == 1:  # the default arena, planned over the pools
            _plan_pools(table, problem, rows, strategy, pools, pool_mem_ids, solve_options, offsets, mem_ids,
                        bufsizes, solutions)
            continue
        sol = solve(problem, strategy, **solve_options)
        if not sol.success or sol.offsets is None:
            raise RuntimeError(f"dsa could not plan arena mem_id={m} ({len(rows)} tensors) with strategy "
                               f"{strategy!r}: {sol.status.value}: {sol.message}")
        validate(problem, sol)  # always, whatever solve_options say
        base = table.reserved.get(m, 0)
        for r, i in enumerate(rows):
            offsets[i] = base + int(sol.offsets[r])
        bufsizes[m] = base + int(sol.peak) + table.extra_padding
        solutions[m] = sol
    for i in range(n):
        if table.root[i] != i:
            offsets[i] = offsets[table.root[i]] + table.root_offset[i]
            mem_ids[i] = mem_ids[table.root[i]]
    for m, size in enumerate(table.input_sizes):  # an arena used only by the submodules still holds them
        if m > 0:
            bufsizes[m] = max(bufsizes[m], size)
    # independent of dsa's validator: every spec lies inside its arena, aligned
    for i in range(n):
        m = mem_ids[i]
        if offsets[i] % table.alignment or offsets[i] < table.reserved.get(m, 0) or \
                offsets[i] + table.sizes[i] > bufsizes[m] - table.extra_padding:
            raise RuntimeError(f"internal error: spec {table.labels[i]!r} at offset {offsets[i]} is outside "
                               f"arena {m} or misaligned")
    if pools is not None:
        for pool, m in zip(pools, pool_mem_ids):
            if pool.capacity is not None and bufsizes[m] > pool.capacity:
                raise RuntimeError(f"internal error: arena {m} (pool {pool.name!r}) is {bufsizes[m]} bytes, above "
                                   f"its capacity {pool.capacity}")
    mem_obj_ids = _address_groups(offsets, table.sizes, mem_ids)
    return Plan(offsets, mem_ids, mem_obj_ids, bufsizes, solutions, time.perf_counter() - t0)


def _pool_options(table: SpecTable, options: dict):
    """Take ``pools`` and ``pool_mem_ids`` out of the solve options and check them against the table."""
    pools = options.pop("pools", None)
    pool_mem_ids = options.pop("pool_mem_ids", None)
    for key in ("allowed", "weights"):
        if key in options:
            raise ValueError(f"{key}= is not supported by the ExecuTorch bridge: every tensor of the default "
                             "arena may use every pool, weighted by its size")
    if pools is None:
        if pool_mem_ids is not None:
            raise ValueError("pool_mem_ids needs pools=")
        return None, None
    from dsa.pools import check_pools
    from dsa.problem import Problem

    pools = list(check_pools(Problem([], [], []), pools).pools)
    if pool_mem_ids is None:
        pool_mem_ids = list(range(1, len(pools) + 1))
    pool_mem_ids = [int(m) for m in pool_mem_ids]
    if len(pool_mem_ids) != len(pools) or len(set(pool_mem_ids)) != len(pools) or min(pool_mem_ids) < 1:
        raise ValueError(f"pool_mem_ids must give each of the {len(pools)} pools its own mem_id >= 1, "
                         f"got {pool_mem_ids}")
    taken = sorted(m for m in table.problems if m != 1 and m in pool_mem_ids)
    if taken:
        raise ValueError(f"mem_id {taken[0]} is already an arena of its own (set by an earlier pass); give the "
                         "pools other mem_ids with pool_mem_ids=")
    return pools, pool_mem_ids


def _plan_pools(table, problem, rows, strategy, pools, pool_mem_ids, options, offsets, mem_ids, bufsizes, solutions):
    """Plan the default arena's tensors over the pools: pool ``p`` becomes arena ``pool_mem_ids[p]``."""
    from dsa.pools import Pool
    from dsa.solver import solve
    from dsa.validator import validate

    room = []
    for pool, m in zip(pools, pool_mem_ids):
        cap = pool.capacity
        if cap is not None:
            cap -= table.reserved.get(m, 0) + table.extra_padding
            if cap < 0:
                raise ValueError(f"pool {pool.name!r} (mem_id {m}) cannot hold the {table.reserved.get(m, 0)} bytes "
                                 f"reserved for control flow plus {table.extra_padding} bytes of padding")
        room.append(Pool(pool.name, cap, pool.cost))
    sol = solve(problem, strategy, pools=room, **options)
    if not sol.success or sol.offsets is None:
        raise RuntimeError(f"dsa could not plan the default arena ({len(rows)} tensors) over the pools "
                           f"{[p.name for p in pools]} with strategy {strategy!r}: {sol.status.value}: {sol.message}")
    validate(problem, sol, pools=room)  # always, whatever the options say
    pool = sol.pool if sol.pool is not None else [0] * len(rows)
    for r, i in enumerate(rows):
        m = pool_mem_ids[int(pool[r])]
        mem_ids[i] = m
        offsets[i] = table.reserved.get(m, 0) + int(sol.offsets[r])
    peaks = sol.pool_peaks if sol.pool_peaks is not None else (sol.peak,)
    for p, m in enumerate(pool_mem_ids):
        if peaks[p] or table.reserved.get(m, 0):
            bufsizes[m] = table.reserved.get(m, 0) + int(peaks[p]) + table.extra_padding
    solutions[1] = sol


def _address_groups(offsets, sizes, mem_ids) -> list[int]:
    """Number the connected groups of overlapping address ranges ``[offset, offset + size)`` per arena."""
    order = sorted(range(len(offsets)), key=lambda i: (mem_ids[i], offsets[i]))
    out = [0] * len(offsets)
    group, end, mem = -1, -1, None
    for i in order:
        if mem_ids[i] != mem or offsets[i] >= end:
            group += 1
            mem, end = mem_ids[i], offsets[i] + sizes[i]
        else:
            end = max(end, offsets[i] + sizes[i])
        out[i] = group
    return out
