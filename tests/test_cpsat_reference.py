"""benchmarks/cpsat_reference.py without OR-Tools: the model's plumbing under a stand-in CP-SAT, the
checks on what it returns, and the report."""
from __future__ import annotations

import pytest

import dsa

from conftest import load_benchmark

# a stand-in for ortools.sat.python.cp_model: it records the variables and hints, and its "solution" is
# each buffer's hint, or with no hint the buffers stacked one on another in row order (a valid plan);
# FAKE_CPSAT=infeasible answers INFEASIBLE, FAKE_CPSAT=zeros puts every buffer at 0
_FAKE_CP_MODEL = """
import os

OPTIMAL, FEASIBLE, INFEASIBLE = 4, 2, 3


class _Var:
    def __init__(self, lb, ub):
        self.lb, self.ub, self.hint = lb, ub, None

    def __add__(self, other):
        return self

    def __le__(self, other):
        return self


class CpModel:
    def __init__(self):
        self.offsets = []

    def NewIntVar(self, lb, ub, name):
        var = _Var(lb, ub)
        if name.startswith("y"):
            self.offsets.append(var)
        return var

    def NewFixedSizeIntervalVar(self, start, size, name):
        return (start, size)

    def Add(self, constraint):
        pass

    def AddHint(self, var, value):
        var.hint = value

    def AddNoOverlap2D(self, xs, ys):
        self.quanta = [size for _, size in ys]

    def Minimize(self, var):
        self.peak = var


class _Params:
    pass


class CpSolver:
    def __init__(self):
        self.parameters = _Params()

    def Solve(self, model):
        mode = os.environ.get("FAKE_CPSAT", "")
        if mode == "infeasible":
            return INFEASIBLE
        top = 0
        self.values = {}
        for var, q in zip(model.offsets, model.quanta):
            self.values[id(var)] = 0 if mode == "zeros" else (var.hint if var.hint is not None else top)
            top += q
        self.bound = model.peak.lb
        return FEASIBLE

    def Value(self, var):
        return self.values[id(var)]

    def BestObjectiveBound(self):
        return self.bound

    def StatusName(self, status):
        return {OPTIMAL: "OPTIMAL", FEASIBLE: "FEASIBLE", INFEASIBLE: "INFEASIBLE"}[status]
"""


@pytest.fixture(scope="module")
def cr():
    return load_benchmark("cpsat_reference")


@pytest.fixture
def fake_cpsat(tmp_path, monkeypatch):
    import sys

    pkg = tmp_path / "ortools"
    (pkg / "sat" / "python").mkdir(parents=True)
    (pkg / "__init__.py").write_text("__version__ = 'fake'\n")
    (pkg / "sat" / "__init__.py").write_text("")
    (pkg / "sat" / "python" / "__init__.py").write_text("")
    (pkg / "sat" / "python" / "cp_model.py").write_text(_FAKE_CP_MODEL)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return sys.executable


@pytest.fixture
def instance(tmp_path):
    import dsa.io

    # sizes of 64 x (1, 2, 3) bytes: the model counts in units of 64 and the plan comes back in bytes
    p = dsa.Problem([0, 0, 1, 2], [2, 1, 3, 3], [128, 64, 64, 192])
    path = tmp_path / "instance.csv"
    dsa.io.write_csv(path, p)
    return p, path


def test_a_plan_from_nothing_comes_back_in_bytes_and_is_validated(cr, fake_cpsat, instance):
    p, path = instance
    got = cr.run_cpsat(fake_cpsat, path, p, 1.0, 2)
    assert got["valid"] and got["version"] == "fake" and got["status"] == "FEASIBLE"
    assert got["peak"] == 448  # the stand-in stacks all four: 128 + 64 + 64 + 192
    assert got["bound"] == dsa.load(p) == 256  # the peak's lower end is LOAD


def test_the_hint_is_dsas_plan_in_units(cr, fake_cpsat, instance):
    p, path = instance
    sol = dsa.solve(p, "best")
    got = cr.run_cpsat(fake_cpsat, path, p, 1.0, 2, hint=sol.offsets)
    assert got["valid"] and got["peak"] == sol.peak == 256  # the stand-in returns the hint as it got it


def test_a_bad_or_missing_plan_counts_for_nothing(cr, fake_cpsat, instance, monkeypatch):
    p, path = instance
    monkeypatch.setenv("FAKE_CPSAT", "zeros")
    got = cr.run_cpsat(fake_cpsat, path, p, 1.0, 2)
    assert not got["valid"] and got["error"].startswith("invalid plan:")
    monkeypatch.setenv("FAKE_CPSAT", "infeasible")
    got = cr.run_cpsat(fake_cpsat, path, p, 1.0, 2)
    assert not got["valid"] and got["error"] == "no plan (status INFEASIBLE)"


def test_report(cr):
    def run(peak, **extra):
        return {"valid": True, "peak": peak, "time_s": 20.0, **extra}

    rows = [{"instance": "a-300-s0", "n": 300, "load": 100,
             "methods": {"best": run(103), "cpsat": run(110),
                         "cpsat_from_best": run(102, bound=100, status="FEASIBLE")}},
            {"instance": "b-900-s1", "n": 900, "load": 200,
             "methods": {"best": run(200), "cpsat": {"valid": False, "error": "no plan (status UNKNOWN)"},
                         "cpsat_from_best": run(200, bound=200, status="OPTIMAL")}}]
    doc = {"date": "2026-01-01 00:00", "machine": "m", "command": "c", "time_limit": 20.0, "threads": 2,
           "set": "main", "dsa_commit": "abc", "cpsat_version": "9.x", "rows": rows}
    md = cr.report(doc)
    assert "| a-300-s0 | 300 | 100 | 1.0300 | 1.1000 | 1.0200 | 1.0000 | FEASIBLE |" in md
    assert "| b-900-s1 | 900 | 200 | 1.0000 | no plan | 1.0000 | 1.0000 | OPTIMAL |" in md
    # no mean for a column with an invalid plan in it; the others' means over both rows
    assert "| **mean** | | | 1.0150 |  | 1.0100 | | |" in md
    assert "below dsa's best on 0 of 2 instances; given dsa's plan, it lowered it on 1 of 2" in md
