"""HiGHS backend of the ``mip`` strategy, through :func:`scipy.optimize.milp`.

scipy's ``milp`` takes no starting point, so the front end asks HiGHS only for plans strictly better
than the heuristic's (``upper`` one unit below its peak): the heuristic acts as the incumbent, and an
infeasible model proves it optimal. HiGHS reports its dual bound (``mip_dual_bound``) and node count
whatever the outcome, as scipy's ``OptimizeResult`` carries them.

The model is the big-M formulation of Sekiyama, Imamichi, Imai and Raymond, "Profile-guided memory
optimization for deep neural networks", arXiv:1804.10001, 2018, built by
:mod:`dsa.strategies._mip_model` (about ``m + p`` variables and ``m + 2p`` constraints for ``m`` free
buffers and ``p`` time-overlapping pairs); the search is branch and bound, exponential in ``p`` at worst.
"""
from __future__ import annotations

import warnings

from dsa.budget import thread_cap
from dsa.strategies._mip_model import BackendResult

__all__ = ["solve_model", "WARM_START", "require"]

WARM_START = False
EXTRA = "mip"

# scipy.optimize.milp status -> outcome of the mip strategy (one table, as scipy's own
# _highs_to_scipy_status_message maps HiGHS's statuses to these five)
STATUS = {
    0: "optimal",     # solved to mip_rel_gap
    1: "limit",       # time, node or iteration limit; x holds the incumbent if there is one
    2: "infeasible",  # no point satisfies the model
    3: "other",       # unbounded: impossible with bounded offsets and peak
    4: "other",       # anything else HiGHS reports (numerical trouble, interrupted)
}


def require():
    """Import the backend; raise ImportError naming the extra when it is missing."""
    try:  # "import a.b", not "from a import b": a stubbed-out submodule must fail here too
        import scipy.optimize as optimize
        import scipy.sparse as sparse
    except ImportError as exc:
        raise ImportError("the mip strategy's 'highs' backend needs scipy (scipy.optimize.milp): "
                          f"pip install 'dsa-planner[{EXTRA}]'") from exc
    return optimize, sparse


def solve_model(model, *, time_limit=None, mip_rel_gap=0.0, verbose=False) -> BackendResult:
    """Solve ``model`` (a :class:`~dsa.strategies._mip_model.MipModel`) with HiGHS."""
    optimize, sparse = require()
    a = sparse.csr_array((model.a_vals, (model.a_rows, model.a_cols)), shape=(model.n_cons, model.n_vars))
    options = {"disp": bool(verbose), "mip_rel_gap": float(mip_rel_gap)}
    if time_limit is not None:
        options["time_limit"] = float(time_limit)
    cap = thread_cap()
    with warnings.catch_warnings():
        if cap is not None:  # milp passes options it does not know on to HiGHS (and warns that it does)
            options["threads"] = int(cap)
            warnings.filterwarnings("ignore", message="Unrecognized options", category=RuntimeWarning)
        res = optimize.milp(model.c, integrality=model.integrality,
                            bounds=optimize.Bounds(model.lb, model.ub),
                            constraints=optimize.LinearConstraint(a, ub=model.b_upper), options=options)
    outcome = STATUS.get(res.status, "other")
    return BackendResult(outcome=outcome, x=res.x, dual_bound=getattr(res, "mip_dual_bound", None),
                         nodes=getattr(res, "mip_node_count", None),
                         solver_status=f"{res.status}: {res.message}")
