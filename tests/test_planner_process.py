"""dsa._planner_process: solving in a helper process, and checking plans without numba."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import dsa
from dsa._planner_process import PlannerProcess, PlannerUnavailable


@pytest.fixture
def helper():
    client = PlannerProcess(idle=60)
    yield client
    client.close()


def test_a_problem_survives_pickling_with_every_field():
    problem = dsa.Problem([0, 1, 2], [3, 4, 5], [8, 16, 4], ids=["a", "b", 7], alignments=[8, 16, 4],
                          fixed_offsets=[-1, 32, -1], capacity=64)
    again = pickle.loads(pickle.dumps(problem))
    assert again == problem and list(again.ids) == ["a", "b", 7] and again.capacity == 64
    assert np.array_equal(again.fixed_offsets, problem.fixed_offsets)


def test_the_helper_solves_as_this_process_does(helper):
    problem = dsa.data.load("E.1048576").replace(capacity=None)
    remote = helper.solve(problem, "greedy_by_size", {})
    here = dsa.solve(problem, "greedy_by_size")
    assert remote.success and remote.peak == here.peak
    assert np.array_equal(remote.offsets, here.offsets)
    dsa.validate(problem, remote)
    assert helper.starts == 1
    helper.solve(problem, "bump", {})
    assert helper.starts == 1  # the same helper answers again


def test_bad_requests_raise_the_solvers_error_here(helper):
    problem = dsa.Problem([0], [1], [4])
    with pytest.raises(ValueError, match="unknown strategy 'nope'"):
        helper.solve(problem, "nope", {})
    with pytest.raises(ValueError, match="time_limit"):
        helper.solve(problem, "best", {"time_limit": -1})
    with pytest.raises(PlannerUnavailable, match="cannot be sent"):
        helper.solve(problem, "bump", {"callback": lambda: None})
    assert helper.solve(problem, "bump", {}).success  # the helper survived every one


def test_a_helper_that_died_is_replaced(helper):
    problem = dsa.Problem([0, 1], [2, 3], [4, 4])
    helper.solve(problem, "bump", {})
    helper._proc.kill()
    helper._proc.wait()
    assert helper.solve(problem, "bump", {}).peak == 8
    assert helper.starts == 2


def test_an_idle_helper_exits_and_a_new_one_starts():
    client = PlannerProcess(idle=0.3)
    try:
        problem = dsa.Problem([0, 1], [2, 3], [4, 4])
        client.solve(problem, "bump", {})
        proc = client._proc
        proc.wait(timeout=30)  # it exits by itself once idle
        assert proc.returncode == 0
        assert client.solve(problem, "bump", {}).peak == 8 and client.starts == 2
    finally:
        client.close()


def test_a_helper_past_its_timeout_is_killed(helper):
    problem = dsa.data.load("D.1048576").replace(capacity=None)  # exact cannot finish D in 30 s
    helper.solve(dsa.Problem([0], [1], [4]), "bump", {})  # started: the timeout below is the search's
    proc = helper._proc
    t0 = time.monotonic()
    with pytest.raises(PlannerUnavailable, match="did not answer within 1 s"):
        helper.solve(problem, "exact", {"time_limit": 30}, timeout=1.0)
    assert time.monotonic() - t0 < 10
    assert proc.poll() is not None and helper._proc is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_its_own_helper():
    from dsa import _planner_process

    client = _planner_process.shared()
    problem = dsa.Problem([0, 1], [2, 3], [4, 4])
    client.solve(problem, "bump", {})
    parent_helper = client._proc
    pid = os.fork()
    if pid == 0:  # the child: the parent's helper is not used, a new one answers
        code = 1
        try:
            ok = client._proc is None and client.solve(problem, "bump", {}).peak == 8
            code = 0 if ok and client._proc.pid != parent_helper.pid else 2
            client.close()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert parent_helper.poll() is None and client.solve(problem, "bump", {}).peak == 8


def test_a_process_that_plans_in_the_helper_never_loads_numba():
    """The client side (request, validation of a 3000-row plan with the numpy engine, as the torch
    adapter asks for it) runs without numba."""
    code = textwrap.dedent("""
        import sys
        import dsa
        from dsa._planner_process import shared
        problem = dsa.generate.random_trace(3000, seed=3)
        solution = shared().solve(problem, "best", {"time_limit": 0.5})
        dsa.validate(problem, solution, engine="numpy")
        print(solution.success, "numba" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "False"]


def test_an_interrupted_exchange_drops_the_helper(helper, monkeypatch):
    """Ctrl-C while waiting: the helper's late reply must never answer a later request."""
    from dsa import _planner_process

    problem = dsa.Problem([0, 1], [2, 3], [4, 4])
    helper.solve(problem, "bump", {})
    first = helper._proc
    real = _planner_process._receive

    def interrupted(fd, deadline=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(_planner_process, "_receive", interrupted)
    with pytest.raises(KeyboardInterrupt):
        helper.solve(problem, "bump", {})
    assert helper._proc is None and first.poll() is not None
    monkeypatch.setattr(_planner_process, "_receive", real)
    other = dsa.Problem([0, 0], [2, 2], [4, 8])
    assert helper.solve(other, "bump", {}).peak == 12 and helper.starts == 2


def test_the_helper_ignores_ctrl_c(helper):
    import signal

    problem = dsa.Problem([0, 1], [2, 3], [4, 4])
    helper.solve(problem, "bump", {})
    helper._proc.send_signal(signal.SIGINT)
    time.sleep(0.2)
    assert helper._proc.poll() is None
    assert helper.solve(problem, "bump", {}).peak == 8 and helper.starts == 1


def test_a_frozen_interpreter_has_no_helper(monkeypatch):
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    client = PlannerProcess()
    with pytest.raises(PlannerUnavailable, match="no Python interpreter"):
        client.solve(dsa.Problem([0], [1], [4]), "bump", {})
    assert client.starts == 0


@pytest.mark.parametrize("executable", ["", "/usr/bin/uwsgi", "/usr/sbin/httpd"])
def test_an_embedded_interpreter_is_not_started_as_a_helper(monkeypatch, executable):
    """Under uwsgi or mod_wsgi, sys.executable is the server's binary: starting it with ``-c`` would
    not start Python, so the client refuses it (the adapter then plans inline) and says how to
    name an interpreter."""
    monkeypatch.setattr(sys, "executable", executable)
    from multiprocessing import spawn

    monkeypatch.setattr(spawn, "_python_exe", executable)
    client = PlannerProcess()
    with pytest.raises(PlannerUnavailable, match="no Python interpreter"):
        client.solve(dsa.Problem([0], [1], [4]), "bump", {})
    assert client.starts == 0


def test_an_interpreter_named_with_multiprocessing_set_executable_is_used(monkeypatch, tmp_path):
    """``multiprocessing.set_executable`` names the helper's interpreter, whatever its name."""
    import multiprocessing

    link = tmp_path / "embedded-interp"
    link.symlink_to(sys.executable)
    monkeypatch.setattr(multiprocessing.spawn, "_python_exe", multiprocessing.spawn.get_executable())
    monkeypatch.setattr(sys, "executable", "/usr/bin/uwsgi")
    multiprocessing.set_executable(str(link))  # undone with _python_exe by monkeypatch
    client = PlannerProcess()
    try:
        assert client.solve(dsa.Problem([0, 1], [2, 3], [4, 4]), "bump", {}).peak == 8
        assert client.starts == 1 and client._proc.args[0] == str(link)
    finally:
        client.close()


def test_a_large_request_crosses_the_pipe_in_pieces(helper):
    """A problem far larger than a pipe's buffer is sent (and its plan returned) within a deadline."""
    problem = dsa.generate.random_trace(20_000, seed=5)
    remote = helper.solve(problem, "greedy_by_size", {}, timeout=300)
    assert np.array_equal(remote.offsets, dsa.solve(problem, "greedy_by_size").offsets)
