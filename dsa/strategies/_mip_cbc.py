"""CBC backend of the ``mip`` strategy, through python-mip.

python-mip picks Gurobi when gurobipy is installed unless told otherwise, so the model is always
created with ``solver_name="CBC"``. CBC gets no warm start: given the heuristic's plan as a MIP start
(``Model.start``), CBC 2.10 declared a plan optimal with a bound above the true optimum (4 buffers of
about 2^31 bytes and a fixed one, solved as the relaxation in units of 185,304 bytes: "optimal" at
64,651 units where 64,489 fit; without the start it finds 64,489), a known class of CBC bugs with MIP
starts (coin-or/Cbc issues 449 and 786). Like HiGHS, it is asked for a strictly lower peak instead, so
that an infeasible model proves the heuristic optimal.
python-mip does not report CBC's node count, so ``nodes`` is None. CBC's bundled libraries clash
with ortools' and highspy's when loaded into one process (scipy's own HiGHS is not affected).

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

WARM_START = False  # (see above: a MIP start can make CBC prove a false bound)
EXTRA = "cbc"

# mip.OptimizationStatus name -> outcome of the mip strategy
STATUS = {
    "OPTIMAL": "optimal",
    "FEASIBLE": "limit",            # a solution, but a limit stopped the search
    "NO_SOLUTION_FOUND": "limit",   # a limit stopped the search before any solution
    "INFEASIBLE": "infeasible",
    "INT_INFEASIBLE": "infeasible",
    "UNBOUNDED": "other",
    "INF_OR_UNBD": "other",
    "CUTOFF": "other",              # no cutoff is set, so this proves nothing here
    "LOADED": "other",
    "OTHER": "other",
    "ERROR": "error",
}


def require():
    """Import python-mip; raise ImportError naming the extra when it is missing."""
    try:
        import mip
    except ImportError as exc:
        raise ImportError("the mip strategy's 'cbc' backend needs python-mip: "
                          f"pip install 'dsa-planner[{EXTRA}]'") from exc
    return mip


def solve_model(model, *, time_limit=None, mip_rel_gap=0.0, verbose=False) -> BackendResult:
    """Solve ``model`` (a :class:`~dsa.strategies._mip_model.MipModel`) with CBC."""
    mip = require()
    m = mip.Model(sense=mip.MINIMIZE, solver_name="CBC")
    m.verbose = int(bool(verbose))
    m.max_mip_gap = float(mip_rel_gap)
    if thread_cap() is not None:  # DSA_THREADS, or one thread per worker of dsa.solve_many
        m.threads = int(thread_cap())
    m.max_mip_gap_abs = 0.5  # the objective is integral: a gap below one unit proves optimality
    xs = [m.add_var(lb=float(lo), ub=float(hi), var_type=mip.INTEGER if integer else mip.CONTINUOUS)
          for lo, hi, integer in zip(model.lb, model.ub, model.integrality)]
    m.objective = mip.minimize(mip.xsum(float(c) * xs[j] for j, c in enumerate(model.c) if c))
    indptr, cols, vals = model.csr()
    for r in range(model.n_cons):
        lo, hi = indptr[r], indptr[r + 1]
        m.add_constr(mip.LinExpr([xs[j] for j in cols[lo:hi]], vals[lo:hi].tolist()) <= float(model.b_upper[r]))
    if model.start is not None:
        m.start = [(v, float(val)) for v, val in zip(xs, model.start)]
    kw = {} if time_limit is None else {"max_seconds": float(time_limit)}
    try:
        status = m.optimize(**kw)
    except Exception as exc:  # python-mip raises its own exceptions on solver failures
        return BackendResult(outcome="error", solver_status=type(exc).__name__,
                             message=f"CBC failed: {exc}")
    outcome = STATUS.get(status.name, "other")
    x = np.array([v.x for v in xs], dtype=np.float64) if m.num_solutions else None
    # CBC's bound is meaningful only once the search ran (with no solution it reports DBL_MAX)
    dual = m.objective_bound if status.name in ("OPTIMAL", "FEASIBLE") else None
    return BackendResult(outcome=outcome, x=x, dual_bound=dual, nodes=None, solver_status=status.name)
