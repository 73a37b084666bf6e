"""Heap maps: a picture of a plan.

Two outputs: a static figure drawn with matplotlib (PNG, SVG or PDF; requires matplotlib:
``pip install dsa-planner[plot]``), and an interactive, self-contained HTML page (no extra
dependency) with zoom, pan and a tooltip per buffer.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

__all__ = ["heap_map", "output_path", "output_format"]

_HTML_SUFFIXES = (".html", ".htm")
_FORMATS = ("html", "png", "svg", "pdf")


def output_format(path, format: str | None = None) -> str | None:
    """The kind of file :func:`heap_map` writes for ``path`` and ``format``.

    Parameters
    ----------
    path : str or path-like, optional
        The ``path`` given to :func:`heap_map`.
    format : str, optional
        The ``format`` given to :func:`heap_map`.

    Returns
    -------
    str or None
        ``"html"`` (an explicit ``format="html"``, or a path ending in ``.html`` or ``.htm``), a
        matplotlib format (``"png"``, ``"svg"``, ``"pdf"``), or None: a matplotlib figure in the
        format its path's suffix names.

    Raises
    ------
    ValueError
        For an unknown ``format``.
    """
    if format is None:
        if path is not None and Path(path).suffix.lower() in _HTML_SUFFIXES:
            return "html"
        return None
    fmt = format.lower().lstrip(".") if isinstance(format, str) else format
    if fmt not in _FORMATS:
        raise ValueError(f"unknown heap map format {format!r}; choose one of {', '.join(map(repr, _FORMATS))}")
    return fmt


def output_path(path, format: str | None = None) -> Path:
    """The file :func:`heap_map` writes for ``path``: ``path`` itself, or ``path`` plus a suffix.

    As matplotlib does, a figure whose ``path`` has no suffix (and no explicit ``format``) is saved in
    matplotlib's default format (``rcParams["savefig.format"]``, PNG unless configured) with that
    suffix appended: ``heap`` becomes ``heap.png`` (when nothing named ``heap`` exists, or it is a
    directory). Every other path is written as given: one with a suffix, and one that exists (a
    file, a link, a FIFO, ``/dev/stdout``), into which the figure then goes.

    Parameters
    ----------
    path : str or path-like
        The ``path`` given to :func:`heap_map`.
    format : str, optional
        The ``format`` given to :func:`heap_map`.

    Returns
    -------
    pathlib.Path
    """
    path = Path(os.fspath(path))
    if output_format(path, format) is None and not os.path.splitext(str(path))[1][1:] \
            and (not os.path.lexists(path) or os.path.isdir(path)):
        return path.with_name(path.name.rstrip(".") + "." + _default_format())
    return path


def _default_format() -> str:
    try:
        import matplotlib
    except ImportError:  # heap_map will say which extra to install
        return "png"
    return str(matplotlib.rcParams["savefig.format"]).lower()


def heap_map(problem, solution, path=None, *, ax=None, title: str | None = None, format: str | None = None,
             op_stacks=None):
    """Draw a plan: time on x, address on y, one rectangle per buffer.

    A dashed line marks LOAD (the lower bound), a solid one the peak, and a thin step line the bytes
    alive at each time: the space between that line and the rectangles' upper edge is fragmentation.

    With ``format="html"`` (or a ``path`` ending in ``.html``) the plan becomes one interactive page
    instead of a matplotlib figure: see Notes.

    Parameters
    ----------
    problem : Problem
    solution : Solution or array_like of int
        A solution or the offsets, one per row. A :class:`~dsa.Solution` also gives the strategy,
        the status and the proven lower bound shown on the page.
    path : str or path-like, optional
        Write the figure there and close it: PNG, SVG or PDF by suffix, or the HTML page for a
        ``.html``/``.htm`` suffix (unless ``format`` says otherwise). Without a suffix, matplotlib's
        default format (PNG) is used and its suffix appended (see :func:`output_path`). The file is
        written whole or not at all, through links and into FIFOs and devices, as
        :func:`dsa.io.write_file` does: the figure is rendered in memory first.
    ax : matplotlib.axes.Axes, optional
        Draw into this axes instead of a new figure (matplotlib output only).
    title : str, optional
        Default: ``"heap map: <strategy>"``.
    format : {None, "html", "png", "svg", "pdf"}, optional
        The output. None (the default) draws with matplotlib, except that a ``path`` ending in
        ``.html`` or ``.htm`` selects ``"html"``. ``"png"``, ``"svg"`` and ``"pdf"`` draw with
        matplotlib and save in that format whatever the suffix. Case-insensitive.
    op_stacks : sequence or Trace, optional
        Where each buffer came from, shown in the HTML tooltip (matplotlib output ignores it). Either
        one entry per row: a sequence of op names, outermost first (a tuple of ``str``), a single
        string (one label), or None (nothing known); or a :class:`dsa.adapters.torch.Trace`, whose
        ``stacks`` are matched to the rows by ``problem.ids`` (the allocation indices that
        :meth:`Trace.to_problem` gives as ids, as ints or as their decimal text).

    Returns
    -------
    matplotlib.figure.Figure or pathlib.Path or str
        The figure (matplotlib output); the path written (HTML with a ``path``); or the page
        itself as a string (HTML without a ``path``).

    Raises
    ------
    ImportError
        If matplotlib is not installed (the message names the ``plot`` extra); never for HTML.
    ValueError
        If the number of offsets does not match the problem, if the solution holds no plan, if
        ``format`` is not one of the values above (the message names it), if ``ax`` is given with
        HTML output, if the suffix of ``path`` names no format matplotlib can write, or if
        ``op_stacks`` does not give one entry per row (or, for a Trace, a row's id is not one of its
        allocations).
    OSError
        If ``path`` cannot be written; an existing file there is left as it was.

    Notes
    -----
    The HTML page needs nothing but a browser: its data (as JSON) and its script are inline, and it
    loads nothing from the network. Every buffer is a rectangle drawn on a canvas; hovering one
    shows its id, size, lifetime, offset and op stack. The mouse wheel zooms both axes around the
    cursor (Shift+wheel: time only, Alt+wheel: address only; buttons select the axes the wheel zooms
    by default), dragging pans, Shift+drag zooms to a box, and *Reset view*, double-click or the key
    ``0`` show the whole plan again. The header gives peak, LOAD, peak/LOAD, the proven lower bound
    (when above LOAD), the capacity, strategy, status and time.

    For automated checks, a URL fragment ``#hover=<row>`` makes the page point at that row once
    loaded (zooming in first if its rectangle is too small) by sending a synthetic ``mousemove``
    event through the normal handler. ``<body>`` carries ``data-status="ok"`` once drawn (or
    ``"error"`` with ``data-error``), and ``data-hover-row`` while a tooltip is shown; the
    ``#plot`` element carries the visible ranges as ``data-view="t0,t1,a0,a1"``.

    Strings are shown as Unicode text: an unpaired surrogate in an id, an op name or the title
    (which UTF-8 cannot encode, and which crashes Chromium when hovered) is replaced by U+FFFD.

    Examples
    --------
    >>> import dsa
    >>> from dsa.plot import heap_map
    >>> problem = dsa.Problem([0, 0, 3], [3, 5, 5], [4, 2, 4], ids=["a", "b", "c"])
    >>> page = heap_map(problem, dsa.solve(problem), format="html",
    ...                 op_stacks=[("aten::linear", "aten::addmm"), None, "aten::relu"])
    >>> page.startswith("<!DOCTYPE html>"), "aten::addmm" in page
    (True, True)
    """
    fmt = output_format(path, format)
    if getattr(solution, "pool_names", None) is not None and len(solution.pool_names) > 1:
        return _pool_maps(problem, solution, path, ax=ax, title=title, format=fmt)
    offsets = getattr(solution, "offsets", solution)
    if offsets is None:
        raise ValueError("the solution holds no plan (offsets is None)")
    offsets = np.asarray(offsets, dtype=np.int64)
    if offsets.shape != (len(problem),):
        raise ValueError(f"expected {len(problem)} offsets, got shape {offsets.shape}")
    if fmt == "html":
        if ax is not None:
            raise ValueError("ax draws with matplotlib; it cannot be combined with the HTML output")
        from dsa._heap_html import render_page

        page = render_page(problem, offsets, solution=solution,
                           title=title, op_stacks=op_stacks)
        if path is None:
            return page
        from dsa.io import write_file

        return write_file(path, page)
    return _matplotlib_map(problem, solution, offsets, path, ax=ax, title=title, format=fmt)


def _pool_maps(problem, solution, path, *, ax, title, format):
    """A plan over several pools (:mod:`dsa.pools`): one heap map per pool, stacked, each with its
    capacity (a dotted line) and its peak; matplotlib output only."""
    if solution.pool is None or solution.offsets is None:
        raise ValueError("the solution holds no plan (offsets is None)")
    if format == "html":
        raise ValueError("the interactive heap map draws one slab; for a plan over pools write an image "
                         "(.png, .svg or .pdf): one panel per pool")
    if ax is not None:
        raise ValueError("a plan over pools draws one panel per pool: give a path, not ax")
    try:
        import matplotlib

        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("heap_map needs matplotlib: pip install 'dsa-planner[plot]'") from exc
    names = solution.pool_names
    caps = solution.stats.get("pool_capacities", [None] * len(names))
    weights = solution.stats.get("pool_weights", [None] * len(names))
    fig, axes = plt.subplots(len(names), 1, figsize=(11, 3.2 * len(names)), dpi=110, sharex=True, squeeze=False)
    try:
        for p, (name, ax_p) in enumerate(zip(names, axes[:, 0])):
            rows = np.flatnonzero(solution.pool == p)
            head = f"pool {name}: {len(rows)} buffers, peak {solution.pool_peaks[p]}"
            if caps[p] is not None:
                head += f" of capacity {caps[p]}"
            if weights[p] is not None:
                head += f", weight {weights[p]}"
            if len(rows) == 0:
                ax_p.set_title(head)
                continue
            sub = problem.take(rows)
            _matplotlib_map(sub, None, solution.offsets[rows], None, ax=ax_p, title=head, format=None)
            if caps[p] is not None:
                ax_p.axhline(caps[p], color="black", linestyle=":", linewidth=1.5, label=f"capacity = {caps[p]:,}")
                ax_p.legend(loc="upper right", fontsize=8)
        if title is None:
            title = f"heap maps: {solution.strategy}, cost {solution.cost:g} ({solution.status.value})"
        from dsa._heap_html import unicode_text

        fig.suptitle(unicode_text(str(title)))
        fig.tight_layout()
        if path is not None:
            import io

            from dsa.io import write_file

            target = output_path(path, format)
            buffer = io.BytesIO()
            fig.savefig(buffer, format=format or os.path.splitext(str(target))[1][1:].lower() or _default_format())
            write_file(target, buffer.getbuffer())
    finally:
        if path is not None:
            plt.close(fig)
    return fig


def _matplotlib_map(problem, solution, offsets, path, *, ax, title, format):
    try:
        import matplotlib

        if path is not None and ax is None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
        from matplotlib.collections import PolyCollection
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("heap_map needs matplotlib: pip install 'dsa-planner[plot]'") from exc
    from dsa._heap_html import unicode_text
    from dsa.bounds import live_bytes, lower_bound

    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(11, 5.5), dpi=110)
    else:
        fig = ax.figure
    try:
        _draw(problem, solution, offsets, fig, ax, None if title is None else unicode_text(str(title)),
              plt=plt, PolyCollection=PolyCollection, live_bytes=live_bytes, lower_bound=lower_bound)
        if path is not None:
            import io

            from dsa.io import write_file

            target = output_path(path, format)
            buffer = io.BytesIO()  # rendered in memory, then written whole (or not at all)
            fig.savefig(buffer, format=format or os.path.splitext(str(target))[1][1:].lower() or _default_format())
            write_file(target, buffer.getbuffer())
    finally:
        if path is not None and own:
            plt.close(fig)
    return fig


def _draw(problem, solution, offsets, fig, ax, title, *, plt, PolyCollection, live_bytes, lower_bound):
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
