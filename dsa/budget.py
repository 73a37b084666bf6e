"""The search budget: a time limit and a node limit, with one convention for stopping.

numba code cannot read the clock, so a long search runs in node-limited chunks inside compiled code
and the Python driver asks the budget between chunks whether to go on (MiniMalloc counts
``nodes_remaining`` inside its search and checks a deadline the same way). A strategy stopped by its
budget before it finished returns the best plan it has with status ``LIMIT_REACHED`` and reports the
nodes it used in ``stats["nodes"]``.
"""
from __future__ import annotations

import time

__all__ = ["Budget"]


class Budget:
    """Seconds and nodes a search may still spend.

    Parameters
    ----------
    time_limit : float, optional
        Seconds from construction; ``None`` means no time limit.
    node_limit : int, optional
        Nodes (or iterations) in all; ``None`` means no node limit.

    Examples
    --------
    >>> from dsa.budget import Budget
    >>> b = Budget(time_limit=10.0, node_limit=1000)
    >>> b.grant(400), b.spend(400), b.grant(400), b.spend(400), b.grant(400)
    (400, None, 400, None, 200)
    >>> b.spend(200); b.exhausted, b.nodes
    (True, 1000)
    """

    def __init__(self, time_limit: float | None = None, node_limit: int | None = None):
        if time_limit is not None and not time_limit > 0:
            raise ValueError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
        if node_limit is not None and (isinstance(node_limit, bool) or int(node_limit) != node_limit
                                       or node_limit < 1):
            raise ValueError(f"node_limit must be a positive integer, got {node_limit!r}")
        self.time_limit = time_limit
        self.node_limit = None if node_limit is None else int(node_limit)
        self.started = time.perf_counter()
        self.deadline = None if time_limit is None else self.started + time_limit
        self.nodes = 0

    def elapsed(self) -> float:
        """Seconds since the budget was made."""
        return time.perf_counter() - self.started

    def remaining(self) -> float:
        """Seconds left (``inf`` without a time limit; never negative)."""
        if self.deadline is None:
            return float("inf")
        return max(0.0, self.deadline - time.perf_counter())

    @property
    def exhausted(self) -> bool:
        """True once the time or the nodes are spent."""
        if self.node_limit is not None and self.nodes >= self.node_limit:
            return True
        return self.deadline is not None and time.perf_counter() >= self.deadline

    def grant(self, chunk: int) -> int:
        """Nodes the next chunk may use: ``chunk``, or fewer if the node limit is closer (0 when spent)."""
        if self.exhausted:
            return 0
        if self.node_limit is None:
            return int(chunk)
        return int(min(chunk, self.node_limit - self.nodes))

    def spend(self, nodes: int) -> None:
        """Record the nodes a chunk used."""
        self.nodes += int(nodes)
