"""The big-M model of the ``mip`` strategy, as plain arrays that every backend can take.

The model (Sekiyama, Imamichi, Imai and Raymond, "Profile-guided memory optimization for deep neural
networks", arXiv:1804.10001, 2018), with the strengthenings listed in ``reference/algorithms.md`` (f)::

    minimise    T
    subject to  o_i + s_i <= T                                   every free row i
                o_i + s_i <= o_j + M_ij (1 - z_ij)               every time-overlapping free pair i < j
                o_j + s_j <= o_i + M_ji z_ij
                LB <= T <= upper,   0 <= o_i <= upper - s_i,   o_i = step_i * k_i,  k_i integer,
                z_ij binary (1: i lies below j)

* **Units.** Everything is divided by ``unit``, the gcd of the free rows' sizes and of the fixed
  rows' offsets and sizes, reduced until every alignment divides it or is a multiple of it. This loses
  nothing: compaction (:mod:`dsa.compaction`) turns any plan into one no higher whose offsets are all
  multiples of ``unit``. It keeps the coefficients small (MiniMalloc's instances have ``unit`` = 1024).
* **Rows out of the model.** Zero-size rows sit at offset 0 and fixed rows are constants; neither gets
  a variable. A free row that meets a fixed row either lies below it or above it: one binary, or a
  tighter bound on ``o_i`` when only one side is possible.
* **Big-M per pair** from the offset bounds: ``M_ij = hi_i + s_i - lo_j``. A pair whose bounds already
  decide the order gets no binary (and no constraint when the bounds imply it).
* **Symmetry breaking** where it is sound. Identical free rows (same start, end, size, alignment) can
  swap places in any plan, so row ``i < j`` is put below ``j`` with no binary. Without fixed rows and
  alignments (in units), the mirror image ``T - o - s`` of a plan is a plan with the same peak, so one
  binary between two rows without identical twins is fixed.
* **Bounds from a heuristic.** ``upper`` (a heuristic's peak, or one unit less to ask only for a
  strictly better plan) bounds ``T`` and the offsets; ``T >= LB``, the front end's lower bound (LOAD
  and the highest fixed top) in units, rounded up.

Size: with ``m`` free non-empty rows, ``p`` undecided pairs among them (at most the ``E`` edges of the
time-overlap graph, O(n^2) in the worst case) and ``q`` undecided (free, fixed) pairs, the model has
``m + 1 + p + q`` variables and at most ``m + 2 (E + q)`` constraints with three non-zeros each (two
for the peak rows). Building it is O(n log n + E) with numpy.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["MipModel", "build_model", "model_unit", "proven_units", "BackendResult", "OUTCOMES"]

NO_BOUND = 1e20  # a dual bound this large is a solver's way of saying it has none

# what the front end distinguishes; each backend maps its own statuses onto these in one table
OUTCOMES = ("optimal", "limit", "infeasible", "other", "error")


@dataclass
class BackendResult:
    """One solver run.

    Attributes
    ----------
    outcome : str
        ``"optimal"`` (solved to the requested gap), ``"limit"`` (stopped by a limit), ``"infeasible"``
        (proven: no point), ``"other"`` (a status that proves nothing) or ``"error"`` (the solver could
        not run; ``message`` says why).
    x : numpy.ndarray or None
        The best point found.
    dual_bound : float or None
        The solver's proven bound on the objective, if it reports one (ignored when infeasible).
    nodes : int or None
        Branch-and-bound nodes, if the solver reports them.
    solver_status : str
        The solver's own status, for ``stats["solver_status"]``.
    message : str
        Why the run failed (outcome ``"error"``).
    """

    outcome: str
    x: np.ndarray | None = None
    dual_bound: float | None = None
    nodes: int | None = None
    solver_status: str = ""
    message: str = ""


@dataclass
class MipModel:
    """``min c @ x`` subject to ``A @ x <= b_upper``, ``lb <= x <= ub``, integrality.

    ``A`` is given as coordinates (``a_rows``, ``a_cols``, ``a_vals``) so that no backend needs
    scipy. Columns ``0 .. len(rows) - 1`` are the offsets of ``rows`` in multiples of ``step`` units;
    column ``peak_col`` is the peak ``T`` in units; the remaining columns are binaries.

    Attributes
    ----------
    c, b_upper, lb, ub : numpy.ndarray of float64
    a_rows, a_cols : numpy.ndarray of int64
    a_vals : numpy.ndarray of float64
    integrality : numpy.ndarray of int8
        1 for an integer column (every column here).
    rows : numpy.ndarray of int64
        The problem rows that have an offset variable.
    step : numpy.ndarray of int64
        Offset of ``rows[k]`` in units is ``step[k] * x[k]`` (its alignment in units, or 1 when the
        alignment divides the unit).
    peak_col : int
    unit : int
        Bytes per model unit.
    upper : int
        The largest peak the model admits, in units.
    start : numpy.ndarray or None
        A feasible point built from the incumbent, for backends that take a warm start.
    empty : str or None
        Why no point satisfies the bounds (found while building; the backends are then not called).
    counts : dict
        ``variables``, ``constraints``, ``binaries``, ``ordered_pairs`` (pairs ordered without a binary:
        by symmetry or by the bounds), ``rows`` (free rows in the model).
    """

    c: np.ndarray
    a_rows: np.ndarray
    a_cols: np.ndarray
    a_vals: np.ndarray
    b_upper: np.ndarray
    lb: np.ndarray
    ub: np.ndarray
    integrality: np.ndarray
    rows: np.ndarray
    step: np.ndarray
    peak_col: int
    unit: int
    upper: int
    start: np.ndarray | None = None
    empty: str | None = None
    counts: dict = field(default_factory=dict)

    @property
    def n_vars(self) -> int:
        return len(self.c)

    @property
    def n_cons(self) -> int:
        return len(self.b_upper)

    def csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(indptr, indices, data)`` of ``A`` by constraint, for backends that add rows one by one."""
        order = np.argsort(self.a_rows, kind="stable")
        indptr = np.zeros(self.n_cons + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.a_rows, minlength=self.n_cons), out=indptr[1:])
        return indptr, self.a_cols[order], self.a_vals[order]

    def offsets(self, problem, x) -> np.ndarray:
        """The plan of a solver's point ``x``, in bytes, every row (rounded to the nearest integers)."""
        out = np.where(problem.is_fixed, problem.fixed_offsets, 0).astype(np.int64)
        k = np.rint(np.asarray(x, dtype=np.float64)[:len(self.rows)]).astype(np.int64)
        out[self.rows] = k * self.step * self.unit
        return out


def model_unit(problem) -> int:
    """Bytes per unit of the model of ``problem``: the largest unit that loses no plan (see the module
    docstring), computed from its free non-empty rows and its fixed rows."""
    fixed = problem.is_fixed
    free_rows = np.flatnonzero(~fixed & (problem.sizes > 0))
    fixed_rows = np.flatnonzero(fixed)
    return _unit(problem.sizes[free_rows], problem.alignments[free_rows],
                 np.concatenate([problem.fixed_offsets[fixed_rows], problem.sizes[fixed_rows]]))


def _unit(sizes, alignments, fixed_values) -> int:
    """The largest unit that loses no plan: it divides every size and fixed value, and for every
    alignment it divides it or is a multiple of it (so rounding a multiple of the unit up to the
    alignment gives a multiple of the unit)."""
    values = np.concatenate([np.asarray(sizes, dtype=np.int64), np.asarray(fixed_values, dtype=np.int64)])
    values = values[values != 0]
    g = int(np.gcd.reduce(values)) if len(values) else 0
    alignments = np.unique(np.asarray(alignments, dtype=np.int64))
    if g == 0:  # nothing to divide: the alignments alone decide
        g = int(alignments.min()) if len(alignments) else 1
    while True:
        bad = alignments[(alignments % g != 0) & (g % alignments != 0)]
        if not len(bad):
            return g
        g = int(np.gcd(g, bad[0]))


def _round_up(x, step):
    return -(-x // step) * step


def build_model(problem, sweep, *, upper: int, lower: int, incumbent=None) -> MipModel:
    """Build the model of ``problem`` for plans with a peak of at most ``upper`` bytes.

    Parameters
    ----------
    problem : Problem
    sweep : dsa.sweep.Sweep
        Supplies the time-overlap graph.
    upper : int
        Largest admissible peak in bytes (a heuristic's peak, or one less).
    lower : int
        A proven lower bound in bytes (LOAD and the highest fixed top).
    incumbent : array_like of int, optional
        A valid plan with peak at most ``upper``; it becomes ``start`` (after the symmetry-breaking
        relabelling that keeps it feasible). ``start`` stays None when it does not fit the model.

    Returns
    -------
    MipModel
    """
    starts, ends, sizes, align = problem.starts, problem.ends, problem.sizes, problem.alignments
    fixed = problem.is_fixed
    free_rows = np.flatnonzero(~fixed & (sizes > 0))
    fixed_rows = np.flatnonzero(fixed)
    unit = model_unit(problem)
    m = len(free_rows)
    upper_u = upper // unit
    size_u = sizes[free_rows] // unit
    al = align[free_rows]
    step = np.where(al % unit == 0, al // unit, 1)  # an alignment that divides the unit costs nothing
    local = np.full(len(problem), -1, dtype=np.int64)
    local[free_rows] = np.arange(m)

    # offset bounds in units, tightened by the fixed neighbours that leave only one side open
    lo = np.zeros(m, dtype=np.int64)
    hi = (upper_u - size_u) // step * step
    indptr, indices = sweep.overlap
    fixed_pairs = []  # (local free row, fixed offset in units, fixed size in units)
    for f in fixed_rows:
        if sizes[f] == 0:
            continue
        nb = indices[indptr[f]:indptr[f + 1]]
        nb = local[nb[local[nb] >= 0]]
        fo, fs = problem.fixed_offsets[f] // unit, sizes[f] // unit
        fixed_pairs.extend((int(i), int(fo), int(fs)) for i in nb)
    fixed_pairs = np.array(fixed_pairs, dtype=np.int64).reshape(-1, 3)
    empty = None
    for _ in range(len(fixed_pairs) + 1):  # each pass that changes a bound removes a side for good
        fi, fo, fs = fixed_pairs.T
        below_ok = lo[fi] + size_u[fi] <= fo
        above_ok = hi[fi] >= _round_up(fo + fs, step[fi])
        new_lo, new_hi = lo.copy(), hi.copy()
        only_above = ~below_ok & above_ok
        np.maximum.at(new_lo, fi[only_above], _round_up(fo + fs, step[fi])[only_above])
        only_below = below_ok & ~above_ok
        np.minimum.at(new_hi, fi[only_below], ((fo - size_u[fi]) // step[fi] * step[fi])[only_below])
        if (~below_ok & ~above_ok).any():
            i = int(free_rows[fi[~below_ok & ~above_ok][0]])
            empty = f"row {i} fits neither below nor above a fixed row under peak {upper_u * unit}"
            break
        if np.array_equal(new_lo, lo) and np.array_equal(new_hi, hi):
            break
        lo, hi = new_lo, new_hi
    if empty is None and (hi < lo).any():
        empty = f"row {int(free_rows[np.argmax(hi < lo)])} does not fit under peak {upper_u * unit}"
    peak_lo = max(-(-lower // unit), int((lo + size_u).max()) if m else 0)
    if empty is None and peak_lo > upper_u:
        empty = f"the lower bound {peak_lo * unit} exceeds the admitted peak {upper_u * unit}"

    # free-free pairs i < j (local indices), classified by what the bounds leave open
    src = np.repeat(np.arange(len(problem)), np.diff(indptr))
    keep = (local[src] >= 0) & (local[indices] >= 0) & (src < indices)
    pi, pj = local[src[keep]], local[indices[keep]]
    can_ij = lo[pi] + size_u[pi] <= hi[pj]  # i can lie below j
    can_ji = lo[pj] + size_u[pj] <= hi[pi]
    implied_ij = hi[pi] + size_u[pi] <= lo[pj]  # the bounds alone put i below j
    implied_ji = hi[pj] + size_u[pj] <= lo[pi]
    if empty is None and (~can_ij & ~can_ji).any():
        k = int(np.argmax(~can_ij & ~can_ji))
        empty = f"rows {int(free_rows[pi[k]])} and {int(free_rows[pj[k]])} cannot both fit"
    key = np.stack([starts[free_rows], ends[free_rows], size_u, step], axis=1)
    twin = (key[pi] == key[pj]).all(axis=1)
    has_twin = np.zeros(m, dtype=bool)
    has_twin[pi[twin]] = has_twin[pj[twin]] = True
    undecided = ~implied_ij & ~implied_ji
    force_ij = undecided & (twin | ~can_ji)            # i below j, no binary
    force_ji = undecided & ~twin & ~can_ij              # j below i, no binary
    binary = undecided & ~force_ij & ~force_ji
    mirror = None
    if len(fixed_rows) == 0 and m and (step == 1).all():
        # the mirror image of a plan is a plan: fix the order of one pair without identical twins
        cand = np.flatnonzero(binary & ~has_twin[pi] & ~has_twin[pj])
        if len(cand):
            mirror = int(cand[np.argmax(size_u[pi[cand]] + size_u[pj[cand]])])
            binary[mirror], force_ij[mirror] = False, True

    # assemble A x <= b: columns [k_0 .. k_{m-1}, T, z ..., w ...]
    peak_col = m
    zb = np.flatnonzero(binary)
    n_z, n_w = len(zb), 0
    r_list, c_list, v_list, b_list = [], [], [], []
    n_rows = 0

    def add(cols, vals, rhs):
        nonlocal n_rows
        k = len(rhs)
        r_list.append(np.repeat(np.arange(n_rows, n_rows + k), cols.shape[1]))
        c_list.append(cols.ravel())
        v_list.append(vals.ravel().astype(np.float64))
        b_list.append(np.asarray(rhs, dtype=np.float64))
        n_rows += k

    ar = np.arange(m)
    add(np.stack([ar, np.full(m, peak_col)], 1), np.stack([step, -np.ones(m, np.int64)], 1), -size_u)
    # forced orders: o_a + s_a <= o_b
    a = np.r_[pi[force_ij], pj[force_ji]]
    b = np.r_[pj[force_ij], pi[force_ji]]
    add(np.stack([a, b], 1), np.stack([step[a], -step[b]], 1), -size_u[a])
    # binaries: z = 1 puts i below j
    zi, zj = pi[zb], pj[zb]
    zc = peak_col + 1 + np.arange(n_z)
    m_ij = hi[zi] + size_u[zi] - lo[zj]
    m_ji = hi[zj] + size_u[zj] - lo[zi]
    add(np.stack([zi, zj, zc], 1), np.stack([step[zi], -step[zj], m_ij], 1), m_ij - size_u[zi])
    add(np.stack([zj, zi, zc], 1), np.stack([step[zj], -step[zi], -m_ji], 1), -size_u[zj])
    # free rows against fixed rows with both sides open: w = 1 puts the free row below
    if len(fixed_pairs) and empty is None:
        fi, fo, fs = fixed_pairs.T
        both = (lo[fi] + size_u[fi] <= fo) & (hi[fi] >= _round_up(fo + fs, step[fi])) \
            & (hi[fi] + size_u[fi] > fo) & (lo[fi] < fo + fs)
        fi, fo, fs = fi[both], fo[both], fs[both]
        n_w = len(fi)
        wc = peak_col + 1 + n_z + np.arange(n_w)
        m_b = hi[fi] + size_u[fi] - fo
        m_a = fo + fs - lo[fi]
        add(np.stack([fi, wc], 1), np.stack([step[fi], m_b], 1), fo - size_u[fi] + m_b)
        add(np.stack([fi, wc], 1), np.stack([-step[fi], -m_a], 1), -(fo + fs))
    else:
        fi = fo = fs = np.zeros(0, dtype=np.int64)

    n_vars = m + 1 + n_z + n_w
    c = np.zeros(n_vars)
    c[peak_col] = 1.0
    lb = np.zeros(n_vars)
    ub = np.ones(n_vars)
    lb[:m], ub[:m] = lo // step, np.maximum(hi, lo) // step
    lb[peak_col], ub[peak_col] = peak_lo, max(upper_u, peak_lo)
    model = MipModel(
        c=c, a_rows=np.concatenate(r_list), a_cols=np.concatenate(c_list).astype(np.int64),
        a_vals=np.concatenate(v_list), b_upper=np.concatenate(b_list), lb=lb, ub=ub,
        integrality=np.ones(n_vars, dtype=np.int8), rows=free_rows, step=step, peak_col=peak_col,
        unit=unit, upper=upper_u, empty=empty,
        counts={"variables": n_vars, "constraints": n_rows, "binaries": n_z + n_w,
                "ordered_pairs": int(force_ij.sum() + force_ji.sum()), "rows": m})
    if incumbent is not None and empty is None:
        model.start = _start(model, problem, np.asarray(incumbent, dtype=np.int64), zi, zj, fi, fo,
                             mirror is not None and (pi[mirror], pj[mirror]), key)
    return model


def _start(model, problem, offsets, zi, zj, fi, fo, mirror, key):
    """The model's point for the valid plan ``offsets``, or None if it does not satisfy the model."""
    rows, unit, step = model.rows, model.unit, model.step
    o = offsets[rows]
    if (o % unit).any():
        return None
    o = o // unit
    size_u = problem.sizes[rows] // unit
    peak = int((o + size_u).max()) if len(o) else 0
    if mirror:  # the mirror image keeps the peak: use it if the plan has the fixed pair the other way
        i, j = mirror
        if o[j] + size_u[j] <= o[i]:
            o = peak - o - size_u
    # identical rows: hand their offsets out in row order (swapping twins keeps a plan valid)
    _, group = np.unique(key, axis=0, return_inverse=True)
    order = np.lexsort((np.arange(len(o)), group.ravel()))
    by_offset = np.lexsort((o, group.ravel()))
    o_sorted = o.copy()
    o_sorted[order] = o[by_offset]
    o = o_sorted
    x = np.zeros(model.n_vars)
    x[:len(rows)] = o / step
    x[model.peak_col] = max(peak, model.lb[model.peak_col])
    n_z = len(zi)
    x[model.peak_col + 1:model.peak_col + 1 + n_z] = o[zi] + size_u[zi] <= o[zj]
    x[model.peak_col + 1 + n_z:] = o[fi] + size_u[fi] <= fo
    ax = np.bincount(model.a_rows, weights=model.a_vals * x[model.a_cols], minlength=model.n_cons)
    ok = ((ax <= model.b_upper + 1e-9).all() and (x >= model.lb).all() and (x <= model.ub).all()
          and (np.abs(x - np.rint(x)) == 0).all())
    return x if ok else None


def proven_units(dual_bound) -> int | None:
    """A solver's dual bound on ``T``, rounded up to an integer allowing for its tolerances; None when
    there is none (None, NaN, infinite, or a solver's "no bound" sentinel such as DBL_MAX)."""
    if dual_bound is None:
        return None
    d = float(dual_bound)
    if not math.isfinite(d) or abs(d) >= NO_BOUND:
        return None
    return math.ceil(d - 1e-6 * max(1.0, abs(d)))
