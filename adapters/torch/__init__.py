"""dsa for PyTorch: profile the CPU allocations of a forward pass, plan them, replay them from a slab.

>>> from dsa.adapters.torch import attach        # doctest: +SKIP
>>> m = attach(model)                            # doctest: +SKIP
>>> y = m(x)   # first call for this input signature: profile and plan   # doctest: +SKIP
>>> y = m(x)   # later calls: allocations served from one planned slab   # doctest: +SKIP

A small C++ allocator (sources in ``dsa/_native``) is built at first use against the installed
torch, cached (see :func:`build_info`), and installed once with ``c10::SetCPUAllocator``. Threads
without an open dsa session pass every allocation straight to torch's default allocator.

Public names: :func:`attach`, :class:`AttachedModule`, :func:`profile`, :class:`Trace`,
:func:`build_info`, :class:`BuildError`, :class:`PlanningWarning`; example models are in
:mod:`dsa.adapters.torch.examples`.
"""
from ._build import BuildError
from ._native import BuildInfo, build_info
from .attach import AttachedModule, PlanningWarning, attach
from .trace import Trace, profile

__all__ = ["AttachedModule", "BuildError", "BuildInfo", "PlanningWarning", "Trace", "attach", "build_info",
           "profile"]
