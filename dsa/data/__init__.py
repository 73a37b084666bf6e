"""Instances bundled with dsa: MiniMalloc's challenging suite and real DNN traces.

``dsa.data.paths("minimalloc")`` lists the CSV files of one collection; ``dsa.data.load(name)`` reads
one instance by its file stem (``"A.1048576"``, ``"resnet18_b1_224"``) as a :class:`dsa.Problem`.
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["COLLECTIONS", "paths", "load", "bundled_capacity"]

_ROOT = Path(__file__).resolve().parent
COLLECTIONS = ("minimalloc", "traces")


def paths(collection: str = "all") -> list[Path]:
    """Return the bundled CSV files of ``collection`` (``"minimalloc"``, ``"traces"`` or ``"all"``).

    Raises
    ------
    ValueError
        If ``collection`` is not one of the names above.
    """
    if collection == "all":
        names = COLLECTIONS
    elif collection in COLLECTIONS:
        names = (collection,)
    else:
        raise ValueError(f"unknown collection {collection!r}; choose one of {('all',) + COLLECTIONS}")
    return [p for name in names for p in sorted((_ROOT / name).glob("*.csv"))]


def load(name: str):
    """Read the bundled instance whose file stem is ``name`` and return it as a :class:`dsa.Problem`.

    The MiniMalloc instances carry their benchmark capacity (the number in the file name) as
    ``Problem.capacity``.

    Raises
    ------
    ValueError
        If no bundled instance has that name.
    """
    from dsa.io import read_csv

    for path in paths("all"):
        if path.stem == name:
            return read_csv(path, capacity=bundled_capacity(path))
    raise ValueError(f"no bundled instance named {name!r}; known: {[p.stem for p in paths('all')]}")


def bundled_capacity(path) -> int | None:
    """The capacity a bundled MiniMalloc file carries in its name (``A.1048576.csv`` -> 1048576), else None."""
    path = Path(path)
    parts = path.stem.split(".")
    if path.parent.name == "minimalloc" and len(parts) == 2 and parts[1].isdigit():
        return int(parts[1])
    return None
