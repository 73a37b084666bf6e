"""dsa plans the memory arenas of ExecuTorch programs.

ExecuTorch's ``MemoryPlanningPass`` places every activation of an exported program ahead of time in
arenas (one per ``mem_id``) that the device allocates. :func:`memory_planning_algo` is a planning
algorithm for that pass that plans each arena with :func:`dsa.solve`::

    from executorch.exir import ExecutorchBackendConfig, to_edge
    from executorch.exir.passes import MemoryPlanningPass
    from dsa.adapters.executorch import memory_planning_algo

    pte = to_edge(torch.export.export(model, args)).to_executorch(ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(memory_planning_algo=memory_planning_algo())))

Also: :func:`memory_planning_member` (a member of ExecuTorch's ``MemoryPlanningAlgorithmSuite``),
:func:`lower` (the two lines above), :func:`trace` (an exported program's tensors as a
:class:`dsa.Problem`) and :func:`compare` (arena per algorithm against LOAD; on the command line,
``python -m dsa.adapters.executorch compare model.pt2``).

Needs ``pip install 'dsa-planner[executorch]'`` (executorch 1.5.1 with torch 2.13.0). Importing this
package imports neither torch nor executorch; its functions do.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "memory_planning_algo": "._planner",
    "memory_planning_member": "._planner",
    "DsaMemoryPlanner": "._planner",
    "lower": "._planner",
    "trace": "._planner",
    "compare": "._planner",
    "convert": "._convert",
    "SpecTable": "._convert",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
