"""Where a search's time went: its phases, in the order they ran, with the cores they kept busy.

``best`` and ``exact`` record each phase of a call (the portfolio, the layers, the look at the bound,
the canonical search, each turn of the skyline search, of the random dives, of the local search or
of the window repairs) in ``stats["phases"]``: ``(name, start_s, end_s, cpu_s)``, seconds since the
call began, and the process's CPU seconds over the phase, all threads together (turns of one kind in
a row make one phase). ``cpu_s / (end_s - start_s)`` is the number of cores the phase kept busy on
average: on two cores, a phase at 1.0 left one idle (the layers' integer programs do; the skyline
search's turns run on every core). Four clock reads a phase; a call of 20 s has a few dozen.
"""
from __future__ import annotations

import contextlib
import time

__all__ = ["Phases", "NAMES"]

# the phases' names, in the order a call of best meets them (turns repeat)
NAMES = ("portfolio", "layers", "look", "canonical", "skyline", "dives", "local", "repair")


class Phases:
    """A record of phases, as ``(name, start_s, end_s, cpu_s)`` tuples in :attr:`rows`; phases of
    one name that follow each other (the turns of one search near the deadline, say) are one row.

    Parameters
    ----------
    t0 : float
        ``time.perf_counter()`` at the start of the call: times are counted from it.
    """

    def __init__(self, t0: float):
        self.t0 = float(t0)
        self.rows: list = []

    @contextlib.contextmanager
    def __call__(self, name: str):
        """Record the ``with`` block as the phase ``name`` (also where it raises)."""
        if name not in NAMES:
            raise ValueError(f"unknown phase {name!r}; valid: {', '.join(NAMES)}")
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            end, used = time.perf_counter() - self.t0, time.process_time() - cpu
            if self.rows and self.rows[-1][0] == name:   # (turns of one kind in a row: one phase)
                _, start, _, before = self.rows[-1]
                self.rows[-1] = (name, start, end, before + used)
            else:
                self.rows.append((name, wall - self.t0, end, used))


def record(phases, name: str):
    """``phases(name)``, or a block that records nothing where ``phases`` is None."""
    return contextlib.nullcontext() if phases is None else phases(name)
