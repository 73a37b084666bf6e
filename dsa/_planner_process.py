"""Planning in a helper process, so that the process being served never loads numba.

The planner's kernels are compiled with numba; loading numba, llvmlite and the kernels costs a
process about 120 MB of resident memory for as long as it lives, far more than the slab of a small
model. The torch adapter therefore plans in a helper: a second Python process that imports numba,
solves, and sends the plan back, while the served process only validates it (:mod:`dsa.address_overlap`
checks plans without numba) and replays it.

Protocol: a request or a reply is an 8-byte little-endian length and a pickle. A request is ``{"id",
"problem", "strategy", "options"}``; a reply is ``{"id", "ok": True, "solution", "warnings"}`` or
``{"id", "ok": False, "kind", "error"}``, with the request's id; the solution's
``stats["planner_process_hwm_kb"]`` is the helper's peak resident memory so far. The helper exits
when its input closes (its client is gone) or after ``idle`` seconds without a request; the client
starts a new one when it next needs it.

The helper's plan is never trusted: :meth:`PlannerProcess.solve` returns the helper's raw
solution, and the caller validates it in its own process (as the adapter does).
"""
from __future__ import annotations

import atexit
import itertools
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
import warnings

__all__ = ["PlannerProcess", "PlannerUnavailable", "shared"]

# a helper with no request for this long exits (its ~120 MB go back to the system)
IDLE_SECONDS = 30.0
_HEADER = struct.Struct("<Q")


class PlannerUnavailable(RuntimeError):
    """The helper process could not be started, died, or did not answer in time."""


# ------------------------------------------------------------------ framing
def _read_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    """``n`` bytes from ``fd``; None at end of file. TimeoutError past ``deadline`` (monotonic)."""
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes, deadline: float | None) -> None:
    """All of ``data`` to ``fd``. TimeoutError past ``deadline``: with a deadline, each write is at
    most ``PIPE_BUF`` bytes after ``select`` says the pipe has room, so a write never blocks."""
    view = memoryview(data)
    chunk = select.PIPE_BUF if deadline is not None else 1 << 16
    while view:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise TimeoutError
        view = view[os.write(fd, view[:chunk]):]


def _frame(obj) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


def _send(fd: int, obj, deadline: float | None = None) -> None:
    _write_all(fd, _frame(obj), deadline)


def _receive(fd: int, deadline: float | None = None):
    """The next message, or None at end of file."""
    header = _read_exact(fd, _HEADER.size, deadline)
    if header is None:
        return None
    body = _read_exact(fd, _HEADER.unpack(header)[0], deadline)
    if body is None:
        return None
    return pickle.loads(body)


# ------------------------------------------------------------------ the helper's side
def _answer(request: dict) -> dict:
    from dsa.solver import solve

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            solution = solve(request["problem"], strategy=request["strategy"], **request["options"])
        except (ValueError, TypeError) as exc:  # bad input: the caller raises the same kind
            return {"ok": False, "kind": type(exc).__name__, "error": str(exc)}
        except Exception as exc:  # noqa: BLE001  (reported to the client, which falls back)
            return {"ok": False, "kind": "error", "error": f"{type(exc).__name__}: {exc}"}
    solution.stats["planner_process_hwm_kb"] = _peak_rss_kb()
    return {"ok": True, "solution": solution,
            "warnings": [f"{w.category.__name__}: {w.message}" for w in caught]}


def _peak_rss_kb() -> int | None:
    """This process's peak resident memory (``VmHWM``) in kB, where ``/proc`` has it."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def serve(idle: float = IDLE_SECONDS) -> int:
    """The helper's loop: answer requests on stdin until it closes or ``idle`` seconds pass.

    Ctrl-C in a terminal reaches the whole process group: the helper ignores it and leaves the
    interruption to its client (which then stops it).
    """
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inp = sys.stdin.fileno()
    out = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print must not reach the protocol
    while True:
        if not select.select([inp], [], [], idle)[0]:
            return 0
        request = _receive(inp)
        if request is None:
            return 0
        _send(out, {**_answer(request), "id": request.get("id")})


# ------------------------------------------------------------------ the client's side
def _interpreter() -> str:
    """The Python interpreter to start a helper with: multiprocessing's (``sys.executable`` unless
    ``multiprocessing.set_executable`` chose another, the standard setting for embedded
    interpreters).

    Raises :class:`PlannerUnavailable` for a frozen application, and for an executable that was not
    chosen explicitly and is not named like Python: under uwsgi or mod_wsgi ``sys.executable`` is
    the server's binary, which must not be started with ``-c``.
    """
    if getattr(sys, "frozen", False):
        raise PlannerUnavailable("this process has no Python interpreter to start a planner process with "
                                 "(a frozen application)")
    from multiprocessing import spawn

    python = spawn.get_executable()
    if isinstance(python, bytes):
        python = os.fsdecode(python)
    if not python:
        raise PlannerUnavailable("this process has no Python interpreter to start a planner process with "
                                 "(sys.executable is empty)")
    chosen = python != sys.executable  # set with multiprocessing.set_executable
    name = os.path.basename(python).lower()
    if not chosen and "python" not in name and "pypy" not in name:
        raise PlannerUnavailable(f"this process has no Python interpreter to start a planner process with: "
                                 f"sys.executable is {python!r} (an embedded interpreter?); name one with "
                                 f"multiprocessing.set_executable()")
    return python


class PlannerProcess:
    """A client of one helper process, started at the first request and again after it exits.

    Requests are serialised (one lock). ``starts`` counts the helpers started.
    """

    def __init__(self, idle: float = IDLE_SECONDS) -> None:
        self.idle = float(idle)
        self.starts = 0
        self._ids = itertools.count(1)
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen:
        python = _interpreter()
        # the helper imports with this process's sys.path, so it finds this very dsa (and numba)
        boot = (f"import sys; sys.path[:] = {list(sys.path)!r}; from dsa._planner_process import main; "
                f"sys.exit(main(['--idle', {repr(self.idle)!r}]))")
        try:
            proc = subprocess.Popen([python, "-c", boot], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    close_fds=True)
        except OSError as exc:
            raise PlannerUnavailable(f"cannot start the planner process: {exc}") from exc
        self.starts += 1
        return proc

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()

    def _drop(self) -> None:
        """Kill the helper now (it is mid-request) and forget it."""
        self._proc.kill()
        self._stop()

    def _forget(self) -> None:
        """In a forked child: drop the parent's helper without touching it (its pipes are closed)."""
        proc, self._proc = self._proc, None
        self._lock = threading.Lock()
        if proc is not None:
            for f in (proc.stdin, proc.stdout):
                try:
                    f.close()  # this process's copies of the pipes; the parent keeps its own
                except OSError:
                    pass
            proc.returncode = 0  # not ours to wait for

    def solve(self, problem, strategy: str, options: dict, timeout: float | None = None):
        """The helper's :func:`dsa.solve` of ``problem`` (not validated here: the caller validates).

        Raises
        ------
        ValueError, TypeError
            When ``dsa.solve`` raised one in the helper (bad input or options).
        PlannerUnavailable
            When no helper answers within ``timeout`` seconds (the helper is then killed), one
            dies twice, or the request cannot be pickled.
        """
        request_id = next(self._ids)
        try:
            data = _frame({"id": request_id, "problem": problem, "strategy": strategy, "options": options})
        except Exception as exc:  # noqa: BLE001
            raise PlannerUnavailable(f"the planning request cannot be sent to a process: {exc}") from exc
        with self._lock:
            for attempt in (1, 2):
                fresh = self._proc is None or self._proc.poll() is not None
                if fresh:
                    self._stop()
                    self._proc = self._start()
                deadline = None if timeout is None else time.monotonic() + timeout
                try:
                    _write_all(self._proc.stdin.fileno(), data, deadline)
                    reply = _receive(self._proc.stdout.fileno(), deadline)
                except TimeoutError:  # (an OSError too: caught first)
                    self._drop()
                    raise PlannerUnavailable(f"the planner process did not answer within {timeout:g} s") from None
                except OSError:  # a broken pipe: the helper exited (idle) just as we wrote
                    reply = None
                except BaseException:
                    # an interruption (Ctrl-C) mid-exchange: the helper's late reply must never be
                    # read as the answer to a later request, so the helper goes
                    self._drop()
                    raise
                if reply is not None and reply.get("id") != request_id:
                    self._drop()
                    raise PlannerUnavailable("the planner process answered another request")
                if reply is not None:
                    break
                self._stop()
                if not fresh and attempt == 1:
                    continue  # the idle helper we found had gone: start one
                raise PlannerUnavailable("the planner process exited without answering")
        for message in reply.get("warnings", ()):
            warnings.warn(f"(planner process) {message}", RuntimeWarning, stacklevel=3)
        if not reply["ok"]:
            kind = {"ValueError": ValueError, "TypeError": TypeError}.get(reply["kind"])
            if kind is not None:
                raise kind(reply["error"])
            raise PlannerUnavailable(f"the planner process failed: {reply['error']}")
        return reply["solution"]

    def close(self) -> None:
        """Stop the helper (it would also exit on its own when idle or when this process ends)."""
        with self._lock:
            self._stop()


_shared: PlannerProcess | None = None
_shared_lock = threading.Lock()


def shared() -> PlannerProcess:
    """The process-wide client (one helper per process)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = PlannerProcess()
            atexit.register(_shared.close)
        return _shared


def _after_fork_in_child() -> None:
    global _shared_lock
    _shared_lock = threading.Lock()
    if _shared is not None:
        _shared._forget()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="dsa's planner helper process (started by dsa itself)")
    parser.add_argument("--idle", type=float, default=IDLE_SECONDS, help="exit after this many idle seconds")
    return serve(parser.parse_args(argv).idle)


if __name__ == "__main__":
    sys.exit(main())
