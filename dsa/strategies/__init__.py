"""Strategy registry: one line per strategy, modules imported on first use.

Every strategy module exposes ``solve(problem, *, <keyword-only options>) -> Solution``. Register a
new one by adding a line to ``_REGISTRY``; :func:`dsa.solve` needs no change.
"""
from __future__ import annotations

import importlib
from typing import Callable

__all__ = ["available_strategies", "get_strategy", "resolve_name"]

_REGISTRY: dict[str, str] = {
    "best": "dsa.strategies.best",
    "bump": "dsa.strategies.bump",
    "greedy": "dsa.strategies.greedy",
    "greedy_by_size": "dsa.strategies.greedy_by_size",
    "greedy_by_breadth": "dsa.strategies.greedy_by_breadth",
}

_ALIASES: dict[str, str] = {
    "size": "greedy_by_size",
    "gbs": "greedy_by_size",
    "breadth": "greedy_by_breadth",
    "gbb": "greedy_by_breadth",
    "naive": "bump",
    "portfolio": "best",
}


def available_strategies() -> list[str]:
    """Names of the registered strategies, sorted (aliases not included)."""
    return sorted(_REGISTRY)


def resolve_name(name: str) -> str:
    """Map a strategy name or alias to its registered name.

    Raises
    ------
    ValueError
        For an unknown name, listing the valid ones.
    """
    key = name.strip().lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key not in _REGISTRY:
        aliases = ", ".join(f"{a}->{t}" for a, t in sorted(_ALIASES.items()))
        raise ValueError(f"unknown strategy {name!r}; valid strategies: {', '.join(available_strategies())} "
                         f"(aliases: {aliases})")
    return key


def get_strategy(name: str) -> Callable:
    """The ``solve`` function of the strategy ``name`` (or alias), importing its module on first use."""
    return importlib.import_module(_REGISTRY[resolve_name(name)]).solve
