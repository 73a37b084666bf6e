"""Gurobi backend of the ``mip`` strategy, through gurobipy.

Gurobi takes the heuristic plan as a warm start (``Start`` attributes). The licence that comes with
``pip install gurobipy`` is size-limited (2000 variables and 2000 constraints); a larger model is
reported as an ERROR with a message that says so, not a traceback.

The model is the big-M formulation of Sekiyama, Imamichi, Imai and Raymond, "Profile-guided memory
optimization for deep neural networks", arXiv:1804.10001, 2018, built by
:mod:`dsa.strategies._mip_model` (about ``m + p`` variables and ``m + 2p`` constraints for ``m`` free
buffers and ``p`` time-overlapping pairs); the search is branch and bound, exponential in ``p`` at worst.
"""
from __future__ import annotations

import numpy as np

from dsa.budget import thread_cap
from dsa.strategies._mip_model import BackendResult

__all__ = ["solve_model", "WARM_START", "require"]

WARM_START = True
EXTRA = "gurobi"
SIZE_LIMIT_ERRNO = 10010  # GRB.Error.SIZE_LIMIT_EXCEEDED

# gurobipy GRB.Status name -> outcome of the mip strategy
STATUS = {
    "OPTIMAL": "optimal",
    "INFEASIBLE": "infeasible",
    "INF_OR_UNBD": "other",
    "UNBOUNDED": "other",
    "CUTOFF": "other",
    "ITERATION_LIMIT": "limit",
    "NODE_LIMIT": "limit",
    "TIME_LIMIT": "limit",
    "SOLUTION_LIMIT": "limit",
    "INTERRUPTED": "limit",
    "NUMERIC": "other",
    "SUBOPTIMAL": "limit",
    "INPROGRESS": "other",
    "USER_OBJ_LIMIT": "limit",
    "WORK_LIMIT": "limit",
    "MEM_LIMIT": "limit",
}


def require():
    """Import gurobipy; raise ImportError naming the extra when it is missing."""
    try:
        import gurobipy
    except ImportError as exc:
        raise ImportError("the mip strategy's 'gurobi' backend needs gurobipy: "
                          f"pip install 'dsa-planner[{EXTRA}]'") from exc
    return gurobipy


def _error_message(exc, model) -> str:
    errno = getattr(exc, "errno", None)
    text = str(getattr(exc, "message", "") or exc)
    if errno == SIZE_LIMIT_ERRNO or "size-limited" in text.lower():
        return (f"Gurobi's size-limited licence (the one pip installs) allows at most 2000 variables and "
                f"2000 constraints; this model has {model.n_vars} variables and {model.n_cons} "
                "constraints. Use backend='highs' or 'cbc', or a full Gurobi licence.")
    return f"Gurobi failed (error {errno}): {text}"


def solve_model(model, *, time_limit=None, mip_rel_gap=0.0, verbose=False) -> BackendResult:
    """Solve ``model`` (a :class:`~dsa.strategies._mip_model.MipModel`) with Gurobi."""
    gp = require()
    env = m = None
    try:
        env = gp.Env(empty=True)
        env.setParam("OutputFlag", int(bool(verbose)))
        env.start()
        m = gp.Model(env=env)
        m.Params.MIPGap = float(mip_rel_gap)
        if thread_cap() is not None:  # DSA_THREADS, or one thread per worker of dsa.solve_many
            m.Params.Threads = int(thread_cap())
        if time_limit is not None:
            m.Params.TimeLimit = float(time_limit)
        vtype = [gp.GRB.INTEGER if i else gp.GRB.CONTINUOUS for i in model.integrality]
        xs = m.addVars(model.n_vars, lb=model.lb.tolist(), ub=model.ub.tolist(), vtype=vtype,
                       obj=model.c.tolist())
        m.ModelSense = gp.GRB.MINIMIZE
        indptr, cols, vals = model.csr()
        for r in range(model.n_cons):
            lo, hi = indptr[r], indptr[r + 1]
            expr = gp.LinExpr(vals[lo:hi].tolist(), [xs[int(j)] for j in cols[lo:hi]])
            m.addLConstr(expr, gp.GRB.LESS_EQUAL, float(model.b_upper[r]))
        if model.start is not None:
            for j, val in enumerate(model.start):
                xs[j].Start = float(val)
        m.optimize()
        names = {getattr(gp.GRB.Status, k): k for k in STATUS if hasattr(gp.GRB.Status, k)}
        name = names.get(m.Status, str(m.Status))
        outcome = STATUS.get(name, "other")
        x = np.array([xs[j].X for j in range(model.n_vars)]) if m.SolCount > 0 else None
        try:
            dual = float(m.ObjBound)
        except (gp.GurobiError, AttributeError):  # no bound (infeasible, or stopped in presolve)
            dual = None
        nodes = int(m.NodeCount) if hasattr(m, "NodeCount") else None
        return BackendResult(outcome=outcome, x=x, dual_bound=dual, nodes=nodes, solver_status=name)
    except gp.GurobiError as exc:
        return BackendResult(outcome="error", solver_status=f"GurobiError {getattr(exc, 'errno', '')}".strip(),
                             message=_error_message(exc, model))
    finally:
        if m is not None:
            m.dispose()
        if env is not None:
            env.dispose()
