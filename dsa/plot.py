"""Heap maps: a picture of a plan (requires matplotlib: ``pip install dsa-planner[plot]``)."""
from __future__ import annotations

import numpy as np

__all__ = ["heap_map"]


def heap_map(problem, solution, path=None, *, ax=None, title: str | None = None):
    """Draw a plan: time on x, address on y, one rectangle per buffer.

    A dashed line marks LOAD (the lower bound), a solid one the peak, and a thin step line the bytes
    alive at each time: the space between that line and the rectangles' upper edge is fragmentation.

    Parameters
    ----------
    problem : Problem
    solution : Solution or array_like of int
        A solution or the offsets, one per row.
    path : str or path-like, optional
        Write the figure there (PNG, SVG or PDF, by suffix) and close it.
    ax : matplotlib.axes.Axes, optional
        Draw into this axes instead of a new figure.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ImportError
        If matplotlib is not installed (the message names the ``plot`` extra).
    ValueError
        If the number of offsets does not match the problem.
    """
    try:
        import matplotlib

        if path is not None and ax is None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
        from matplotlib.collections import PolyCollection
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("heap_map needs matplotlib: pip install 'dsa-planner[plot]'") from exc
    from dsa.bounds import live_bytes, lower_bound

    offsets = getattr(solution, "offsets", solution)
    if offsets is None:
        raise ValueError("the solution holds no plan (offsets is None)")
    offsets = np.asarray(offsets, dtype=np.int64)
    if offsets.shape != (len(problem),):
        raise ValueError(f"expected {len(problem)} offsets, got shape {offsets.shape}")

    if ax is None:
        fig, ax = plt.subplots(figsize=(11, 5.5), dpi=110)
    else:
        fig = ax.figure
    s, e = problem.starts.astype(float), problem.ends.astype(float)
    lo = offsets.astype(float)
    hi = lo + problem.sizes
    rects = np.stack([np.c_[s, lo], np.c_[e, lo], np.c_[e, hi], np.c_[s, hi]], axis=1)
    rng = np.random.default_rng(0)  # fixed colours: the same plan always looks the same
    colors = plt.get_cmap("tab20")(rng.integers(0, 20, len(problem)))
    ax.add_collection(PolyCollection(rects, facecolors=colors, edgecolors="black", linewidths=0.3))

    peak = int(hi.max()) if len(problem) else 0
    bound = lower_bound(problem)
    times, live = live_bytes(problem)
    if len(times):
        ax.step(times, live, where="post", color="dimgray", linewidth=0.8, label="live bytes")
        ax.set_xlim(times[0], times[-1])
    ax.axhline(bound, color="tab:green", linestyle="--", linewidth=1.2, label=f"LOAD = {bound:,}")
    ax.axhline(peak, color="tab:red", linewidth=1.2,
               label=f"peak = {peak:,}" + (f" ({peak / bound:.3f} x LOAD)" if bound else ""))
    if problem.capacity is not None:
        ax.axhline(problem.capacity, color="black", linestyle=":", linewidth=1,
                   label=f"capacity = {problem.capacity:,}")
    ax.set_ylim(0, max(peak, bound, problem.capacity or 0, 1) * 1.05)
    ax.set_xlabel("time")
    ax.set_ylabel("address (bytes)")
    name = getattr(solution, "strategy", "")
    ax.set_title(title or (f"heap map: {name}" if name else "heap map"))
    ax.legend(loc="upper right", fontsize=8, framealpha=0.9)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path)
        plt.close(fig)
    return fig
