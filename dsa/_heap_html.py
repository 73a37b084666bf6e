"""The interactive heap map: one self-contained HTML page (private; see :func:`dsa.plot.heap_map`).

The page embeds the plan as JSON in a ``<script type="application/json">`` element and draws it on a
canvas with its own inline script: no network access when it is viewed. Every string of the plan
(ids, op names, the title, the strategy) reaches the page only inside that JSON, with ``<``, ``>``
and ``&`` written as ``\\u003c``, ``\\u003e`` and ``\\u0026``, and is shown with ``textContent``; the
``<title>`` element is HTML-escaped. Every string is valid Unicode text: an unpaired surrogate (which
UTF-8 cannot encode, and which crashes Chromium when the page shows it) becomes U+FFFD, and a pair of
surrogates the character it encodes (see :func:`unicode_text`).

JSON layout (``version`` 1), one entry per row in the column lists::

    {"version": 1, "title": str, "ids": [...], "start": [...], "end": [...], "size": [...],
     "offset": [...], "stacks": [[str, ...], ...], "stack": [int, ...] or null,
     "live_t": [...], "live_b": [...], "peak": int, "load": int, "lower_bound": int or null,
     "capacity": int or null, "strategy": str, "status": str, "message": str, "time_s": float or null,
     "conflict": [int, ...]}

``conflict`` lists the rows of an INFEASIBLE solution's irreducible infeasible subset (empty
otherwise): the page outlines them and names them in the legend and the tooltips.

``stack[i]`` indexes the table ``stacks`` (each op stack once, outermost op first), or is -1. Integer
columns whose magnitude exceeds 2**53 (where JavaScript numbers stop being exact) are written as
decimal strings; the page draws them as numbers and prints the strings.

The page's markup, style sheet and script are package data, ``dsa/templates/heap_map.html``,
``heap_map.css`` and ``heap_map.js``; :func:`template` joins them into one page (see there).
"""
from __future__ import annotations

import functools
import html
import json
import math
import numbers
import re
from collections.abc import Sequence
from importlib import resources

import numpy as np

_EXACT = 2**53  # JavaScript numbers hold every integer up to this exactly
_MARKERS = re.compile(r"__DSA_(TITLE|DATA)__")
_INLINE = re.compile(r"^__DSA_(CSS|JS)__\n", re.M)  # the lines of heap_map.html that the files replace


def unicode_text(text: str) -> str:
    """``text`` with each unpaired surrogate replaced by U+FFFD and each surrogate pair joined.

    Python strings may hold surrogate code points (from ``"\\ud800"`` in JSON, or
    ``os.fsdecode``); UTF-8 cannot encode them, and a lone one in a page's JSON crashes Chromium
    when it draws the text. A high surrogate followed by a low one is the character they encode
    in UTF-16, as JSON and JavaScript read them.
    """
    if text.isascii():
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _column(values) -> list:
    """A list for JSON: ints, or decimal strings when any magnitude exceeds 2**53."""
    arr = np.asarray(values, dtype=np.int64)
    if arr.size and int(np.abs(arr).max()) > _EXACT:
        return [str(v) for v in arr.tolist()]
    return arr.tolist()


def _scalar(value):
    if value is None:
        return None
    value = int(value)
    return str(value) if abs(value) > _EXACT else value


def _id(label):
    if isinstance(label, numbers.Integral) and not isinstance(label, (bool, np.bool_)):
        return _scalar(label)
    return unicode_text(str(label))


def _stack_of(item, row: int) -> tuple:
    if item is None:
        return ()
    if isinstance(item, str):
        return (unicode_text(item),) if item else ()
    if isinstance(item, bytes) or not isinstance(item, (Sequence, np.ndarray)):
        raise ValueError(f"op_stacks[{row}]: expected a string, a sequence of strings or None, "
                         f"got {type(item).__name__}")
    return tuple(unicode_text(str(op)) for op in item)


def _trace_index(label, row: int) -> int:
    """The allocation index a row id names (an int, or its decimal text as read from a CSV)."""
    if isinstance(label, numbers.Integral) and not isinstance(label, (bool, np.bool_)):
        return int(label)
    if isinstance(label, str) and label.strip().isdigit():
        return int(label.strip())
    raise ValueError(f"row {row}: id {label!r} is not an allocation index of the trace; pass "
                     "op_stacks as one entry per row instead")


def op_stacks_per_row(problem, op_stacks) -> list[tuple] | None:
    """Normalise ``op_stacks`` (None, one entry per row, or a Trace) to one tuple of str per row."""
    if op_stacks is None:
        return None
    n = len(problem)
    stacks = getattr(op_stacks, "stacks", None)
    if stacks is not None and callable(getattr(op_stacks, "to_problem", None)):  # an adapter Trace
        out = []
        for row, label in enumerate(problem.ids):
            k = _trace_index(label, row)
            if not 0 <= k < len(stacks):
                raise ValueError(f"row {row}: id {label!r} is not an allocation of the trace "
                                 f"({len(stacks)} allocations)")
            out.append(_stack_of(stacks[k], row))
        return out
    if isinstance(op_stacks, (str, bytes)) or not hasattr(op_stacks, "__len__"):
        raise ValueError("op_stacks must be a sequence with one entry per row, or a Trace, "
                         f"got {type(op_stacks).__name__}")
    if len(op_stacks) != n:
        hint = " (for a Trace's problem, pass the Trace itself to match rows by id)" \
            if len(op_stacks) > n else ""
        raise ValueError(f"op_stacks has {len(op_stacks)} entries but the problem has {n} rows{hint}")
    return [_stack_of(item, row) for row, item in enumerate(op_stacks)]


def _conflict_rows(solution, n: int) -> list:
    """The solution's conflict rows (see :attr:`dsa.Solution.conflict`) as a list of row indices."""
    rows = getattr(solution, "conflict", None)
    if rows is None:
        return []
    return sorted({int(i) for i in rows if isinstance(i, numbers.Integral) and 0 <= int(i) < n})


def page_data(problem, offsets, *, solution=None, title: str | None = None, op_stacks=None) -> dict:
    """The JSON document the page draws (see the module docstring for its layout)."""
    from dsa.bounds import live_bytes, load

    offsets = np.asarray(offsets, dtype=np.int64)
    n = len(problem)
    peak = int((offsets + problem.sizes).max()) if n else 0
    strategy = str(getattr(solution, "strategy", "") or "")
    lower = getattr(solution, "lower_bound", None)
    status = getattr(solution, "status", None)
    stats = getattr(solution, "stats", None) or {}
    time_s = stats.get("time_s") if isinstance(stats, dict) else None
    if not isinstance(time_s, numbers.Real) or not math.isfinite(time_s):
        time_s = None
    if title is None:
        title = f"heap map: {strategy}" if strategy else "heap map"
    times, live = live_bytes(problem)
    doc = {
        "version": 1,
        "title": unicode_text(str(title)),
        "ids": [_id(label) for label in problem.ids],
        "start": _column(problem.starts),
        "end": _column(problem.ends),
        "size": _column(problem.sizes),
        "offset": _column(offsets),
        "stacks": [],
        "stack": None,
        "live_t": _column(times),
        "live_b": _column(live),
        "peak": _scalar(peak),
        "load": _scalar(load(problem)),
        "lower_bound": _scalar(lower),
        "capacity": _scalar(problem.capacity),
        "strategy": unicode_text(strategy),
        "status": "" if status is None else unicode_text(str(getattr(status, "value", status))),
        "message": unicode_text(str(getattr(solution, "message", "") or "")),
        "time_s": None if time_s is None else float(time_s),
        "conflict": _conflict_rows(solution, n),
    }
    per_row = op_stacks_per_row(problem, op_stacks)
    if per_row is not None:
        table: dict[tuple, int] = {}
        doc["stack"] = [table.setdefault(s, len(table)) if s else -1 for s in per_row]
        doc["stacks"] = [list(s) for s in table]
    return doc


def script_json(doc: dict) -> str:
    """``doc`` as JSON that is safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` in it."""
    text = json.dumps(doc, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_page(problem, offsets, *, solution=None, title: str | None = None, op_stacks=None) -> str:
    """The whole HTML page of a plan, as a string."""
    doc = page_data(problem, offsets, solution=solution, title=title, op_stacks=op_stacks)
    parts = {"TITLE": html.escape(doc["title"], quote=True), "DATA": script_json(doc)}
    # one pass, so that a title containing a marker is never substituted twice
    return _MARKERS.sub(lambda m: parts[m.group(1)], template())


@functools.lru_cache(maxsize=1)
def template() -> str:
    """The page with its style and script inlined and the markers ``__DSA_TITLE__``, ``__DSA_DATA__``.

    Read once from the package data ``dsa/templates/heap_map.{html,css,js}`` (with
    :mod:`importlib.resources`, so from a wheel, a zip or a source tree alike): the lines
    ``__DSA_CSS__`` and ``__DSA_JS__`` of the HTML file are replaced by the whole style sheet and script,
    so that the page needs no other file and no network access.
    """
    folder = resources.files("dsa") / "templates"
    page, css, js = ((folder / f"heap_map.{ext}").read_text(encoding="utf-8")
                     for ext in ("html", "css", "js"))
    for name, text, end in (("css", css, "</style"), ("js", js, "</script")):
        # inlined as is: the file must end its last line, must not close its element early, and must
        # not hold a marker that render_page would substitute
        if not text.endswith("\n") or end in text.lower() or _MARKERS.search(text):
            raise RuntimeError(f"dsa/templates/heap_map.{name} cannot be inlined into the page")
    if sorted(_INLINE.findall(page)) != ["CSS", "JS"] or sorted(_MARKERS.findall(page)) != ["DATA", "TITLE"]:
        raise RuntimeError("dsa/templates/heap_map.html: expected each of its four markers once")
    parts = {"CSS": css, "JS": js}
    page = _INLINE.sub(lambda m: parts[m.group(1)], page)
    return page

