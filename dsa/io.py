"""Reading and writing problems and plans: MiniMalloc-compatible CSV, and JSON.

CSV columns (MiniMalloc's): ``id,lower,upper,size[,alignment][,offset]``, lifetime ``[lower, upper)``.
Accepted aliases: ``start``/``begin`` for ``lower``; ``buffer``/``buffer_id`` for ``id``; ``end`` is an
*inclusive* end (1 is added). ``hint`` and the provenance columns ``thread``, ``op`` and ``stack`` of
adapter traces are read and ignored; ``gaps`` is not supported. A plan is written as the input
columns plus ``offset``, so MiniMalloc and dsa read each other's files.
"""
from __future__ import annotations

import csv
import errno
import io
import json
import os
import re
import stat
import sys
import tempfile
from pathlib import Path

import numpy as np

from dsa.problem import FREE, Problem, as_int_column

__all__ = ["read_csv", "write_csv", "read_plan", "read_json", "write_json", "read", "write_file"]

_ALIASES = {
    "id": "id", "buffer": "id", "buffer_id": "id",
    "lower": "lower", "start": "lower", "begin": "lower",
    "upper": "upper", "end": "end",
    "size": "size", "alignment": "alignment", "offset": "offset", "hint": "hint", "gaps": "gaps", "pool": "pool",
    # provenance written by dsa.adapters.torch traces: read and ignored
    "thread": "thread", "op": "op", "stack": "stack",
}


def _number(text: str):
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text  # the Problem check names the row and rejects it


def _read_table(path) -> tuple[Problem, np.ndarray | None, list | None]:
    """Parse a CSV file into a problem without fixed offsets, plus its ``offset`` and ``pool`` columns
    (or None)."""
    path = Path(path)
    try:
        return _parse_table(path)
    except csv.Error as exc:  # e.g. a field larger than the csv module's limit, a NUL byte
        raise ValueError(f"{path}: not a readable CSV file ({exc})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not a text file ({exc.reason} at byte {exc.start})") from None


def _parse_table(path: Path) -> tuple[Problem, np.ndarray | None, list | None]:
    with open(path, newline="", encoding="utf-8-sig") as f:  # -sig: Excel's "CSV UTF-8" starts with a BOM
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise ValueError(f"{path}: empty file, expected a header such as id,lower,upper,size") from None
        cols: dict[str, int] = {}
        for k, name in enumerate(header):
            key = _ALIASES.get(name.strip().lower())
            if key is None:
                raise ValueError(f"{path}: unknown column {name.strip()!r}; known: {', '.join(sorted(_ALIASES))}")
            if key in cols or (key in ("upper", "end") and ({"upper", "end"} & set(cols))):
                raise ValueError(f"{path}: column {name.strip()!r} given twice (or with an alias)")
            cols[key] = k
        missing = [c for c in ("lower", "size") if c not in cols]
        if "upper" not in cols and "end" not in cols:
            missing.append("upper (or end)")
        if missing:
            raise ValueError(f"{path}: missing columns {missing}; header is {header}")
        rows = [r for r in reader if any(cell.strip() for cell in r)]
    columns = {key: [] for key in cols}
    for i, r in enumerate(rows):
        if len(r) != len(header):
            raise ValueError(f"{path}: row {i} has {len(r)} fields, the header has {len(header)}")
        for key, k in cols.items():
            columns[key].append(r[k].strip())
    if "gaps" in columns and any(columns["gaps"]):
        raise ValueError(f"{path}: the 'gaps' column is not supported")
    for key in ("lower", "upper", "end", "size"):
        if key in columns:
            for i, v in enumerate(columns[key]):
                if v == "":
                    raise ValueError(f"{path}: row {i}: empty {key}")
    starts = np.array([_number(v) for v in columns["lower"]], dtype=object)
    if "upper" in columns:
        ends = np.array([_number(v) for v in columns["upper"]], dtype=object)
    else:
        ends = np.array([_add_one(_number(v)) for v in columns["end"]], dtype=object)
    sizes = np.array([_number(v) for v in columns["size"]], dtype=object)
    ids = columns.get("id")
    aligns = None
    if "alignment" in columns:
        aligns = np.array([_number(v) if v else 1 for v in columns["alignment"]], dtype=object)
    offsets = None
    if "offset" in columns:
        offsets = np.array([_number(v) if v else None for v in columns["offset"]], dtype=object)
    try:
        problem = Problem(starts, ends, sizes, ids=ids, alignments=aligns)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return problem, offsets, columns.get("pool")


def _add_one(v):
    return v + 1 if isinstance(v, (int, float)) else v


def read_csv(path, *, capacity=None) -> Problem:
    """Read a problem from a MiniMalloc-style CSV file.

    An ``offset`` column fixes those buffers at the given offsets (blank cells leave a buffer free).
    ``capacity`` is not stored in the file; pass it here or to :func:`dsa.solve`.

    Raises
    ------
    ValueError
        For a missing or unknown column, a malformed row, or a row that breaks a rule of
        :class:`dsa.Problem`; the message names the file and the row.
    """
    problem, offsets, _ = _read_table(path)  # (a plan's pool column is not part of the problem)
    if offsets is None and capacity is None:
        return problem
    try:
        return problem.replace(fixed_offsets=offsets if offsets is not None else problem.fixed_offsets,
                               capacity=capacity)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def read_plan(path, *, with_pools: bool = False):
    """Read a plan file (CSV or JSON): the problem it describes and its offsets, one per row.

    Parameters
    ----------
    path : str or path-like
    with_pools : bool, default False
        Also return the pool name of each row of a plan over pools (the ``pool`` column of a CSV
        plan, ``"pool"`` of a JSON one; see :func:`write_csv`), or None for a plan of one slab.

    Returns
    -------
    (Problem, numpy.ndarray) or (Problem, numpy.ndarray, list of str or None)

    Raises
    ------
    ValueError
        If the file has no offsets or an offset is missing, or a pool name is missing.
    """
    path = Path(path)
    if path.suffix.lower() == ".json":
        doc = _load_json(path)
        problem = _problem_from_doc(doc, path, fixed=False)
        plan = doc.get("solution") or {}
        if not isinstance(plan, dict) or "offsets" not in plan:
            raise ValueError(f"{path}: no solution offsets in this file (expected \"solution\": "
                             "{\"offsets\": [...]})")
        offsets = plan["offsets"]
        pools = plan.get("pool")
    else:
        problem, offsets, pools = _read_table(path)
        if offsets is None:
            raise ValueError(f"{path}: no 'offset' column, so this file holds no plan")
    if pools is not None:
        if not isinstance(pools, list) or len(pools) != len(problem) or \
                not all(isinstance(name, str) and name for name in pools):
            raise ValueError(f"{path}: the pool of every row must be a pool name")
    if not isinstance(offsets, (list, np.ndarray)):
        raise ValueError(f"{path}: the solution's offsets must be a list, got {type(offsets).__name__}")
    if len(offsets) != len(problem):
        raise ValueError(f"{path}: {len(offsets)} offsets for {len(problem)} buffers")
    if any(o is None for o in offsets):
        i = next(k for k, o in enumerate(offsets) if o is None)
        raise ValueError(f"{path}: row {i} has no offset")
    try:
        # the rules of problem files: integers only (no fractions, booleans or strings), |v| <= 2**62
        arr = as_int_column(np.array(list(offsets), dtype=object), "offset", len(problem), problem.ids)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return (problem, arr, pools) if with_pools else (problem, arr)


def write_csv(path, problem: Problem, solution=None) -> None:
    """Write ``problem`` as ``id,lower,upper,size[,alignment][,offset]``.

    With ``solution`` (a :class:`dsa.Solution` or an offsets array) the ``offset`` column holds the
    plan; without it, the problem's fixed offsets (blank for free rows) if it has any. A plan over
    several pools (``dsa.solve(..., pools=[...])``) adds a ``pool`` column: the name of each row's
    pool (its offset is inside that pool).
    """
    offsets = _offsets_of(problem, solution)
    header = ["id", "lower", "upper", "size"]
    with_align = bool((problem.alignments != 1).any())
    if with_align:
        header.append("alignment")
    if offsets is None and problem.is_fixed.any():
        offsets = [None if o == FREE else int(o) for o in problem.fixed_offsets]
    if offsets is not None:
        header.append("offset")
    pools = _pool_column(solution)
    if pools is not None:
        header.append("pool")
    text = io.StringIO()
    w = csv.writer(text)
    w.writerow(header)
    for i in range(len(problem)):
        row = [problem.ids[i], int(problem.starts[i]), int(problem.ends[i]), int(problem.sizes[i])]
        if with_align:
            row.append(int(problem.alignments[i]))
        if offsets is not None:
            row.append("" if offsets[i] is None else int(offsets[i]))
        if pools is not None:
            row.append(pools[i])
        w.writerow(row)
    write_file(path, _encode(path, text.getvalue()))


_CHUNK = 1 << 20  # bytes per os.write call
# the paths through which a process writes to one of its own open file descriptors
_FD_PATH = re.compile(r"^/(?:dev/fd|proc/self/fd|proc/(\d+)/fd)/(\d+)$")


def write_file(path, data) -> Path:
    """Write ``data`` (``bytes``, or ``str`` written as UTF-8) to ``path``, whole or not at all.

    What ``path`` names decides how:

    * a regular file, or nothing yet: the data goes to a temporary file in the same directory, which
      is flushed to disk and renamed over ``path`` (:func:`os.replace`). A failure at any point (a
      full disk, say) leaves the old file as it was and removes the temporary file. A file that is
      replaced keeps its permission bits; a new file gets the mode the umask allows.
    * a symbolic link to a regular file, or a dangling one: the same, next to the link's final
      target (:func:`os.path.realpath`), so that the link stays a link and its target is written.
    * a FIFO, a character or block device, or anything else that is not a regular file (after
      following links): opened and written directly, as a shell's ``>`` would (a FIFO waits for
      its reader).
    * a process's own file descriptor, ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N`` or
      ``/proc/self/fd/N`` (directly or through links): written to that descriptor at its current
      position, after flushing :data:`sys.stdout` and :data:`sys.stderr`, so that the output of a
      command redirected to a file keeps both what it printed and the data.

    Parameters
    ----------
    path : str or path-like
        Where to write.
    data : bytes or str
        The contents. A ``str`` is encoded as UTF-8 first, so an unencodable string (one with an
        unpaired surrogate) raises before anything is touched.

    Returns
    -------
    pathlib.Path
        ``path``, as given.

    Raises
    ------
    OSError
        If the file cannot be written (the error names ``path``, not the temporary file), or if
        ``path`` is a directory.
    UnicodeEncodeError
        If ``data`` is a ``str`` that UTF-8 cannot encode (a :class:`ValueError`).
    """
    path = Path(os.fspath(path))
    if isinstance(data, str):
        data = data.encode("utf-8")
    data = memoryview(data).cast("B")
    try:
        fd = _own_descriptor(path)
        if fd is not None:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (AttributeError, ValueError, OSError):  # closed or replaced streams
                    pass
            _write_all(fd, data)
            return path
        try:
            info = os.stat(path)  # follows links
        except FileNotFoundError:
            info = None
        if info is not None and stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory, not a file", str(path))
        if info is not None and not stat.S_ISREG(info.st_mode):  # FIFO, device, socket...
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o666)
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
            return path
        _replace(Path(os.path.realpath(path)), data, None if info is None else stat.S_IMODE(info.st_mode))
    except OSError as exc:
        if exc.errno is None or exc.filename == str(path):
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    return path


def _own_descriptor(path: Path) -> int | None:
    """The descriptor ``path`` names if it, or a link it goes through, is ``/dev/fd/N`` and the like."""
    hop = os.path.abspath(path)
    for _ in range(40):  # the kernel's limit on links followed
        match = _FD_PATH.match(hop)
        if match and (match.group(1) is None or int(match.group(1)) == os.getpid()):
            return int(match.group(2))
        try:
            target = os.readlink(hop)
        except OSError:  # not a link, or not there
            return None
        hop = os.path.normpath(os.path.join(os.path.dirname(hop), target))
    return None


def _write_all(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data[:_CHUNK]):]


def _replace(target: Path, data: memoryview, mode: int | None) -> None:
    """Write ``data`` to a temporary file beside ``target``, flush it to disk, rename it over ``target``."""
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask  # mkstemp makes the file private; give it a new file's mode
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        try:
            os.fchmod(fd, mode)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _encode(path, text: str) -> bytes:
    """``text`` as UTF-8, or a ValueError naming the file and the character that has no encoding."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        line = text.count("\n", 0, exc.start) + 1
        raise ValueError(f"cannot write {path}: line {line} holds {exc.object[exc.start:exc.end]!r}, which "
                         f"UTF-8 cannot encode ({exc.reason}); ids must be valid Unicode text") from None


def _offsets_of(problem, solution):
    if solution is None:
        return None
    offsets = getattr(solution, "offsets", solution)
    if offsets is None:
        raise ValueError("the solution holds no plan (offsets is None)")
    offsets = np.asarray(offsets)
    if offsets.shape != (len(problem),):
        raise ValueError(f"expected {len(problem)} offsets, got shape {offsets.shape}")
    return [int(o) for o in offsets]


def write_json(path, problem: Problem, solution=None) -> None:
    """Write ``problem`` (and optionally a solution) as JSON: ``{"capacity", "buffers": [...], "solution"}``.

    Each buffer is ``{"id", "start", "end", "size"}`` plus ``alignment`` and a fixed ``offset`` when set.
    A solution with a conflict (status INFEASIBLE, see :attr:`dsa.Solution.conflict`) adds
    ``"conflict"`` (its row indices) and ``"conflict_ids"`` (their ids) to ``"solution"``. A plan
    over several pools adds ``"pool"`` (the pool name of each row; offsets are inside it),
    ``"pools"`` (name, capacity, cost, peak and weight of each) and ``"cost"``, ``"cost_bound"``.
    """
    doc = {"format": "dsa", "version": 1, "capacity": problem.capacity, "buffers": problem.to_records()}
    if solution is not None:
        plan = {"offsets": _offsets_of(problem, solution)}
        for key in ("peak", "lower_bound", "strategy", "message"):
            if hasattr(solution, key):
                plan[key] = getattr(solution, key)
        if hasattr(solution, "status"):
            plan["status"] = str(solution.status)
        if _pool_column(solution) is not None:  # a plan over pools: each row's pool, and each pool's figures
            plan["pool"] = _pool_column(solution)
            caps = solution.stats.get("pool_capacities", [None] * len(solution.pool_names))
            costs = solution.stats.get("pool_costs", [None] * len(solution.pool_names))
            plan["pools"] = [{"name": name, "capacity": caps[p], "cost": costs[p], "peak": solution.pool_peaks[p],
                              "weight": solution.stats.get("pool_weights", [None] * len(caps))[p]}
                             for p, name in enumerate(solution.pool_names)]
            plan["cost"], plan["cost_bound"] = solution.cost, solution.cost_bound
        conflict = getattr(solution, "conflict", None)
        if conflict is not None:  # an irreducible infeasible subset: its rows and their ids
            plan["conflict"] = [int(i) for i in conflict]
            plan["conflict_ids"] = [problem.ids[int(i)] for i in conflict]
        doc["solution"] = plan
    try:
        text = json.dumps(doc, indent=1, default=_plain)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"cannot write {path} as JSON: {exc}") from None
    write_file(path, _encode(path, text))


def _pool_column(solution) -> list | None:
    """The pool name of each row of a plan over several pools; None for any other solution."""
    names = getattr(solution, "pool_names", None)
    pool = getattr(solution, "pool", None)
    if names is None or pool is None or len(names) < 2:
        return None
    return [names[int(p)] for p in pool]


def _plain(value):
    """numpy scalars (ids, say) as the Python numbers they hold; anything else is not JSON."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} {value!r} is not JSON serialisable")


def _load_json(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8-sig") as f:  # a BOM (Windows editors) is skipped
            doc = json.load(f)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise ValueError(f"{path}: JSON nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not a text file ({exc.reason} at byte {exc.start})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("buffers"), list):
        raise ValueError(f"{path}: expected an object with a 'buffers' list")
    return doc


def _problem_from_doc(doc: dict, path: Path, *, fixed: bool) -> Problem:
    buffers = doc["buffers"] if fixed else [{k: v for k, v in b.items() if k != "offset"}
                                            if isinstance(b, dict) else b for b in doc["buffers"]]
    try:
        return Problem.from_intervals(buffers, capacity=doc.get("capacity"))
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def read_json(path) -> Problem:
    """Read a problem written by :func:`write_json` (or any ``{"buffers": [...]}`` document).

    Raises
    ------
    ValueError
        For invalid JSON, a missing ``buffers`` list, or a row that breaks a rule of :class:`dsa.Problem`.
    """
    path = Path(path)
    return _problem_from_doc(_load_json(path), path, fixed=True)


def read(path, *, capacity=None) -> Problem:
    """Read a problem from ``.json`` (:func:`read_json`) or any other suffix as CSV (:func:`read_csv`)."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        problem = read_json(path)
        return problem if capacity is None else problem.replace(capacity=capacity)
    return read_csv(path, capacity=capacity)
