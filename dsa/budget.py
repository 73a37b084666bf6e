"""The search budget: a time limit and a node limit, with one convention for stopping.

numba code cannot read the clock, so a long search runs in node-limited chunks inside compiled code
and the Python driver asks the budget between chunks whether to go on (MiniMalloc counts
``nodes_remaining`` inside its search and checks a deadline the same way). A strategy stopped by its
budget before it finished returns the best plan it has with status ``LIMIT_REACHED`` and reports the
nodes it used in ``stats["nodes"]``.

Time spent importing numba and compiling or loading kernels while a budget runs (the first calls in
a process; ``stats["jit_s"]``) does not count against its time limit: the deadline moves by it, so
that a plan does not depend on whether the kernels were already compiled. A call can therefore
take its time limit plus that one-off cost.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
import numbers
import os
import time

import numpy as np

from dsa._kernels import jit_seconds

__all__ = ["Budget", "check_time_limit", "check_seconds", "check_node_limit", "check_seed", "max_threads", "thread_cap",
           "thread_limit", "THREADS_ENV"]

# The one knob on the threads a strategy may start (exact's raced searches, best's greedy pool, the
# MIP solvers): the environment variable, or thread_limit() in the calling context (dsa.solve_many
# sets 1 in its workers). The smaller of the two wins.
THREADS_ENV = "DSA_THREADS"
_THREAD_LIMIT: contextvars.ContextVar = contextvars.ContextVar("dsa_thread_limit", default=None)


def thread_cap() -> int | None:
    """The cap on threads per strategy call set by ``DSA_THREADS`` or :func:`thread_limit`; None if none.

    The smaller of the two when both are set. A ``DSA_THREADS`` that is not a positive integer is
    ignored.
    """
    cap = None
    text = os.environ.get(THREADS_ENV, "").strip()
    if text.isdigit() and int(text) >= 1:
        cap = int(text)
    limit = _THREAD_LIMIT.get()
    if limit is not None:
        cap = limit if cap is None else min(cap, limit)
    return cap


def max_threads(default: int) -> int:
    """The threads a strategy may use: ``default``, capped by :func:`thread_cap`.

    Parameters
    ----------
    default : int
        What the strategy would use unconstrained (say, the cores it may run on).

    Returns
    -------
    int
        At least 1.
    """
    n = max(1, int(default))
    cap = thread_cap()
    return n if cap is None else min(n, cap)


@contextlib.contextmanager
def thread_limit(n: int):
    """Within the ``with`` block, strategies called from this thread use at most ``n`` threads.

    :func:`dsa.solve_many` runs every problem of a parallel batch under ``thread_limit(1)``, so that
    its workers do not oversubscribe the cores. A context variable: other threads are not affected.

    Parameters
    ----------
    n : int
        A positive integer.
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"thread_limit needs a positive integer, got {n!r}")
    token = _THREAD_LIMIT.set(int(n))
    try:
        yield
    finally:
        _THREAD_LIMIT.reset(token)


def _is_number(value) -> bool:
    """A real number that is not a bool (``True`` is an int to Python and a number to numpy)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def check_time_limit(time_limit):
    """Return ``time_limit`` as a float (None stays None); raise ValueError unless it is a positive number.

    Integers and numpy scalars (``np.int64(1)``, ``np.float64(0.5)``) are accepted; bools, strings and
    NaN are not.
    """
    if time_limit is None:
        return None
    if not _is_number(time_limit) or not time_limit > 0:
        raise ValueError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
    return float(time_limit)


def check_seconds(value, name: str):
    """Return ``value`` as a float (None stays None); raise ValueError unless it is a number of seconds
    ``>= 0``.

    For options that may be zero (``best``'s ``portfolio_time``): the same numbers as
    :func:`check_time_limit` accepts, and 0; the message names the option.

    Examples
    --------
    >>> from dsa.budget import check_seconds
    >>> check_seconds(0, "portfolio_time"), check_seconds(None, "portfolio_time")
    (0.0, None)
    >>> check_seconds(-1, "portfolio_time")
    Traceback (most recent call last):
    ...
    ValueError: portfolio_time must be None or a number of seconds >= 0, got -1
    """
    if value is None:
        return None
    if not _is_number(value) or not value >= 0:
        raise ValueError(f"{name} must be None or a number of seconds >= 0, got {value!r}")
    return float(value)


def check_node_limit(node_limit):
    """Return ``node_limit`` as an int (None stays None); raise ValueError unless it is a positive integer.

    An integral float (``1e6``) is accepted; infinity, NaN, fractions and bools are not (``None`` is
    the way to ask for no node limit).
    """
    if node_limit is None:
        return None
    if (not _is_number(node_limit) or not math.isfinite(node_limit) or node_limit != math.floor(node_limit)
            or node_limit < 1):
        raise ValueError(f"node_limit must be a positive integer (None for no limit), got {node_limit!r}")
    return int(node_limit)


def check_seed(seed):
    """Return ``seed`` as an int (None stays None); raise ValueError unless it is a non-negative integer.

    Every randomised strategy turns its seed into a numpy generator; checking here names the option
    instead of leaving numpy's message (``expected non-negative integer``).
    """
    if seed is None:
        return None
    if not isinstance(seed, numbers.Integral) or isinstance(seed, (bool, np.bool_)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer (or None), got {seed!r}")
    return int(seed)


# the limit of a budget made spent (Budget.lasting): the constructor takes positive limits only
_SPENT_S = 1e-9


class Budget:
    """Seconds and nodes a search may still spend.

    Parameters
    ----------
    time_limit : float, optional
        Seconds from construction, not counting time spent loading numba kernels meanwhile;
        ``None`` means no time limit.
    node_limit : int, optional
        Nodes (or iterations) in all; ``None`` means no node limit.

    Raises
    ------
    ValueError
        If ``time_limit`` is not a positive number or ``node_limit`` not a positive integer (see
        :func:`check_time_limit` and :func:`check_node_limit`).

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
        self.time_limit = time_limit = check_time_limit(time_limit)
        self.node_limit = check_node_limit(node_limit)
        self.started = time.perf_counter()
        self._deadline = None if time_limit is None else self.started + time_limit
        self._jit0 = jit_seconds()
        self.nodes = 0

    @classmethod
    def lasting(cls, seconds) -> "Budget":
        """A budget of ``seconds`` from now that may be 0 or less (spent at once then), for a limit a
        caller works out (what is left of a deadline, a share of a time limit), where the constructor
        takes positive limits only. Its deadline moves with kernel loading like any budget's.

        Examples
        --------
        >>> from dsa.budget import Budget
        >>> Budget.lasting(0.0).exhausted, Budget.lasting(-1.0).exhausted, Budget.lasting(60.0).exhausted
        (True, True, False)
        """
        return cls(max(float(seconds), _SPENT_S))

    @property
    def deadline(self) -> float | None:
        """The ``time.perf_counter()`` value at which the time runs out (None without a limit):
        ``time_limit`` after construction, moved later by the kernel-loading time spent since."""
        if self._deadline is None:
            return None
        return self._deadline + (jit_seconds() - self._jit0)

    def elapsed(self) -> float:
        """Seconds since the budget was made."""
        return time.perf_counter() - self.started

    def remaining(self) -> float:
        """Seconds left (``inf`` without a time limit; never negative)."""
        deadline = self.deadline
        if deadline is None:
            return float("inf")
        return max(0.0, deadline - time.perf_counter())

    @property
    def exhausted(self) -> bool:
        """True once the time or the nodes are spent."""
        if self.node_limit is not None and self.nodes >= self.node_limit:
            return True
        deadline = self.deadline
        return deadline is not None and time.perf_counter() >= deadline

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

    @contextlib.contextmanager
    def alarm(self, flag):
        """Within the ``with`` block, set ``flag[0] = 1`` once the time runs out.

        For code that cannot read the clock and cannot be interrupted (a compiled kernel that releases
        the GIL and reads ``flag`` now and then): a timer thread sets the flag at the deadline, or later
        if the deadline has moved by kernel-loading time in the meantime (the timer is then set
        again). Leaving the block cancels it. Without a time limit nothing is set. ``flag`` must be a
        numpy array of at least one element (``ValueError`` otherwise: a wrong one would fail only
        in the timer thread, unseen).

        Examples
        --------
        >>> import numpy as np, time
        >>> flag = np.zeros(1, dtype=np.int64)
        >>> with Budget(time_limit=0.01).alarm(flag):
        ...     time.sleep(0.2)
        >>> int(flag[0])
        1
        """
        import threading

        if not (isinstance(flag, np.ndarray) and flag.ndim == 1 and len(flag) >= 1):
            raise ValueError(f"flag must be a 1-d numpy array of at least one element, got {flag!r}")
        state = {"timer": None, "off": False}
        lock = threading.Lock()

        def arm():
            with lock:
                if state["off"]:
                    return
                timer = threading.Timer(self.remaining(), ring)
                timer.daemon = True
                state["timer"] = timer
                timer.start()

        def ring():
            if self.remaining() > 0.0:
                arm()  # the deadline moved (kernels compiled meanwhile)
            else:
                flag[0] = 1

        if self._deadline is not None:
            arm()
        try:
            yield flag
        finally:
            with lock:
                state["off"] = True
                if state["timer"] is not None:
                    state["timer"].cancel()
