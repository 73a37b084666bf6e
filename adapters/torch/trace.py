"""The allocation trace of one forward pass, recorded by the native allocator.

:func:`profile` runs a callable once with the profiling allocator active on the calling thread and
returns a :class:`Trace`: one row per CPU allocation the thread made (ATen kernels and oneDNN
included), in allocation order, with its size, its lifetime on the session clock (one tick per
allocation and per free of a recorded block), the thread, and the stack of ATen ops in flight.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import _native

ALIGNMENT = 64  # c10's CPU alignment: every planned offset keeps it


@dataclass(frozen=True, eq=False)
class Trace:
    """Allocations of one profiled pass, in allocation order.

    Attributes
    ----------
    sizes, starts, ends : numpy.ndarray of int64
        Requested bytes and the half-open lifetime ``[start, end)`` on the session clock. ``end`` is
        -1 for a block still alive when the pass ended (an output, a cache): it *escapes*.
    threads : numpy.ndarray of uint64
        Hash of the thread that made the allocation.
    stacks : tuple of tuple of str
        The ATen ops in flight at each allocation, outermost first (the innermost is often
        ``aten::empty``); empty when the allocation came from outside any op.
    clock : int
        The session clock when the pass ended; every block has ``start < clock``.
    """

    sizes: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    threads: np.ndarray
    stacks: tuple
    clock: int

    def __len__(self) -> int:
        return len(self.sizes)

    def __repr__(self) -> str:
        return (f"Trace(allocations={len(self)}, escaping={int(self.escapes.sum())}, "
                f"bytes={int(self.sizes.sum())})")

    @property
    def escapes(self) -> np.ndarray:
        """Boolean mask of the blocks still alive at the end of the pass."""
        return self.ends < 0

    def _closed_ends(self) -> np.ndarray:
        """``ends`` with the escaping blocks' lifetimes running to the end of the pass."""
        return np.where(self.escapes, self.clock, self.ends)

    @property
    def ops(self) -> tuple:
        """The innermost op of each allocation that is not an allocation op itself, or ``""``."""
        skip = {"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty",
                "aten::new_empty_strided", "aten::resize_"}
        out = []
        for stack in self.stacks:
            named = [op for op in stack if op not in skip]
            out.append(named[-1] if named else (stack[-1] if stack else ""))
        return tuple(out)

    def to_problem(self, *, include_escaping: bool = False, alignment: int = ALIGNMENT):
        """The planning problem of this trace.

        Parameters
        ----------
        include_escaping : bool
            Also include the blocks alive at the end of the pass, with lifetimes running to the end
            of the pass. They are never served from a slab, so by default they are left out.
        alignment : int
            Alignment of every offset (c10 assumes 64 bytes).

        Returns
        -------
        dsa.Problem
            One buffer per kept allocation; ``ids`` are the allocation indices in this trace.
        """
        from dsa.problem import Problem

        keep = np.ones(len(self), bool) if include_escaping else ~self.escapes
        index = np.flatnonzero(keep)
        ends = self._closed_ends()[index]
        return Problem(self.starts[index], ends, self.sizes[index], ids=tuple(int(i) for i in index),
                       alignments=np.full(len(index), alignment, np.int64))

    def to_csv(self, path, *, include_escaping: bool = False) -> Path:
        """Write the trace as a MiniMalloc-style CSV with provenance columns.

        Columns: ``id,lower,upper,size,alignment,thread,op,stack`` (``stack`` joins the op stack with
        ``" > "``). :func:`dsa.read_csv` reads it back as the problem of :meth:`to_problem`; the
        provenance columns are ignored there. The file is written as :func:`dsa.io.write_file` writes:
        whole or not at all, through links, and into FIFOs and devices.
        """
        from dsa.io import write_file

        path = Path(path)
        problem = self.to_problem(include_escaping=include_escaping)
        ops = self.ops
        text = io.StringIO()
        writer = csv.writer(text)
        writer.writerow(["id", "lower", "upper", "size", "alignment", "thread", "op", "stack"])
        for row, i in enumerate(problem.ids):
            writer.writerow([i, int(problem.starts[row]), int(problem.ends[row]), int(problem.sizes[row]),
                             int(problem.alignments[row]), int(self.threads[i]), ops[i],
                             " > ".join(self.stacks[i])])
        write_file(path, text.getvalue())  # as dsa.write_csv: atomic, through links, into FIFOs
        return path

    def deadlines(self) -> np.ndarray:
        """For each block, the index of the first allocation made after its free.

        A replay checks that a planned block is gone by then; escaping blocks get ``len(self)``.
        """
        return np.searchsorted(self.starts, self._closed_ends(), side="left").astype(np.int64)


def call_profiled(fn, args, kwargs, *, op_stacks: bool = True):
    """Run ``fn(*args, **kwargs)`` with profiling on this thread; return its output and trace.

    Parameters
    ----------
    fn : callable
        Called once, eagerly, with the default allocator.
    args : tuple
        Its positional arguments.
    kwargs : dict
        Its keyword arguments.
    op_stacks : bool
        Record the stack of ATen ops in flight at each allocation. Without it no RecordFunction
        callback is added (ops keep torch's fast dispatch path and their code pages stay untouched)
        and every stack is empty.

    Returns
    -------
    tuple
        ``(output, Trace)``.

    Raises
    ------
    RuntimeError
        If a dsa session (a profile or a replay) is already open on this thread.
    """
    lib = _native.lib()
    handle = lib.dsa_profile_begin(1 if op_stacks else 0)
    if not handle:
        raise RuntimeError("cannot profile: a dsa session is already open on this thread")
    try:
        output = fn(*args, **kwargs)
    except BaseException:
        _native.copy_profile(handle)  # closes the session; the partial trace is dropped
        raise
    raw = _native.copy_profile(handle)
    trace = Trace(raw["size"], raw["start"], raw["end"], raw["thread"],
                  tuple(_native.op_stacks(raw["node"])), raw["clock"])
    return output, trace


_call_profiled = call_profiled  # the former name (tests/test_torch_trace.py imports it)


def profile(model, *inputs, **kwargs) -> Trace:
    """Record every CPU allocation the calling thread makes during ``model(*inputs, **kwargs)``.

    Parameters
    ----------
    model : callable
        A ``torch.nn.Module`` or any callable; it runs once, eagerly, with the default allocator.
    *inputs, **kwargs
        Its arguments.

    Returns
    -------
    Trace
        The allocations in order with sizes, lifetimes and op stacks. Allocations made by other
        threads (intra-op worker threads) are not part of it.

    Raises
    ------
    dsa.adapters.torch.BuildError
        If the native allocator cannot be built; torch keeps working eagerly.

    Examples
    --------
    >>> import torch
    >>> from dsa.adapters.torch import profile
    >>> net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    >>> with torch.inference_mode():
    ...     trace = profile(net, torch.randn(2, 8))
    >>> len(trace) >= 2, bool(trace.escapes[-1])
    (True, True)
    """
    return call_profiled(model, inputs, kwargs)[1]
