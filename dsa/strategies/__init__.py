"""Strategy registry: one line per strategy, modules imported on first use.

Every strategy module exposes ``solve(problem, *, <keyword-only options>) -> Solution``. Register a
new one by adding a line to ``_REGISTRY``; :func:`dsa.solve` needs no change. Each entry carries the
strategy's capabilities (:class:`StrategyInfo`), so that tests and benchmarks can loop over the
registry sensibly: no exact search on a million buffers, no crash on a missing optional backend.
"""
from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Callable

__all__ = ["available_strategies", "get_strategy", "get_pool_strategy", "pool_strategies", "resolve_name",
           "strategy_info", "StrategyInfo", "call", "strategy_options"]

KINDS = ("baseline", "heuristic", "approximation", "portfolio", "exact")


@dataclass(frozen=True)
class StrategyInfo:
    """What a registered strategy is and what it needs.

    Attributes
    ----------
    name : str
        Registered name.
    module : str
        Module whose ``solve`` implements it.
    kind : str
        ``"baseline"``, ``"heuristic"``, ``"approximation"`` (a proven worst-case factor),
        ``"portfolio"`` or ``"exact"`` (can prove optimality).
    requires : tuple of str
        Modules it imports that are optional dependencies (empty: always available).
    extra : str or None
        The ``pip install dsa-planner[extra]`` that provides ``requires``.
    time_limit : bool
        Whether it takes ``time_limit`` (and uses it to stop).
    max_n : int or None
        The largest number of buffers it is meant for within its default budget (None: any).
    summary : str
        One line for listings: what it does, without the citation.
    paper : str
        The paper it follows, short (``"Pisarchyk & Lee 2020"``; empty: none). Its page gives the
        full reference.
    complexity : str
        Its running time, for the tables of the docs (E: lifetime-overlapping pairs).
    pools : str or None
        ``"module:function"`` of its planner over several memory pools (:mod:`dsa.pools`), taking the
        problem and the planning context (whose ``pools`` is set); None: it plans one slab only.
    """

    name: str
    module: str
    kind: str
    requires: tuple = ()
    extra: str | None = None
    time_limit: bool = False
    max_n: int | None = None
    summary: str = ""
    paper: str = ""
    complexity: str = ""
    pools: str | None = None

    @property
    def available(self) -> bool:
        """True when every optional module it needs can be imported."""
        return all(importlib.util.find_spec(m) is not None for m in self.requires)


def _entry(name, kind, summary, **kw) -> tuple[str, StrategyInfo]:
    return name, StrategyInfo(name=name, module=f"dsa.strategies.{name}", kind=kind, summary=summary, **kw)


_REGISTRY: dict[str, StrategyInfo] = dict([
    # one entry per strategy; the strategy tables of README.md and docs/ are generated from these
    # (make docs-tables; see "Adding a strategy" in docs/strategies/index.md)
    _entry("best", "portfolio", "every constructive strategy (stops at LOAD), then canonical and local search "
           "within the time limit", time_limit=True, complexity="15 runs + the search",
           pools="dsa.strategies._pools:search"),
    _entry("buchsbaum", "heuristic", "boxing by size class around random critical times, unboxing, compaction; "
           "random restarts, greedy fallback", paper="Buchsbaum et al. 2004", complexity="O(n log n) per start"),
    _entry("bump", "baseline", "bump pointer, reset when nothing is alive", complexity="O(n log n)"),
    _entry("exact", "exact", "complete canonical search: minimises the peak, or decides whether a plan fits the "
           "capacity; anytime", paper="Moffitt 2023, MiniMalloc", time_limit=True, max_n=500,
           complexity="exponential in the worst case", pools="dsa.strategies._pools:exact"),
    _entry("fastest_first", "baseline", "pools: largest first, each into the cheapest pool where it fits (TVM's "
           "USMP, ExecuTorch's banked greedy); one slab: greedy by size", paper="TVM RFC 0009, 2021",
           complexity="O(n log n + E + Σ k log k)", pools="dsa.strategies._pools:solve_fastest_first"),
    _entry("gergov", "approximation", "skyline placement, conflict colouring, compaction", paper="Gergov 1999",
           complexity="O(n log² n + E) per order"),
    _entry("greedy", "heuristic", "any ordering x best or first fit", complexity="O(n log n + E + Σ k log k)"),
    _entry("greedy_by_breadth", "heuristic", "sections by breadth, then size; best fit", paper="Pisarchyk & Lee 2020",
           complexity="as greedy"),
    _entry("greedy_by_size", "heuristic", "size order, lowest fitting gap", paper="Pisarchyk & Lee 2020",
           complexity="as greedy"),
    _entry("mincost_flow", "heuristic", "buffers share objects by a min-cost flow; objects laid out, compacted",
           paper="Lee et al. 2019", complexity="O(n K log n)"),
    _entry("mip", "exact", "big-M MIP from a heuristic start (HiGHS, CBC or Gurobi); proves bounds",
           paper="Sekiyama et al. 2018", requires=("scipy",), extra="mip", time_limit=True, max_n=60,
           complexity="one binary per overlapping pair", pools="dsa.strategies._pools_mip:solve_pools"),
])

_ALIASES: dict[str, str] = {
    "size": "greedy_by_size",
    "gbs": "greedy_by_size",
    "breadth": "greedy_by_breadth",
    "gbb": "greedy_by_breadth",
    "naive": "bump",
    "portfolio": "best",
}


def available_strategies(*, kind: str | None = None, installed: bool = False) -> list[str]:
    """Names of the registered strategies, sorted (aliases not included).

    Parameters
    ----------
    kind : str, optional
        Keep only strategies of this kind (see :class:`StrategyInfo`).
    installed : bool, default False
        Keep only strategies whose optional dependencies are installed.
    """
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; valid kinds: {', '.join(KINDS)}")
    return sorted(name for name, info in _REGISTRY.items()
                  if (kind is None or info.kind == kind) and (not installed or info.available))


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


def strategy_info(name: str) -> StrategyInfo:
    """The :class:`StrategyInfo` of strategy ``name`` (or alias)."""
    return _REGISTRY[resolve_name(name)]


def get_strategy(name: str) -> Callable:
    """The ``solve`` function of the strategy ``name`` (or alias), importing its module on first use.

    Raises
    ------
    ImportError
        When the strategy needs an optional dependency that is not installed, naming the extra.
    """
    info = strategy_info(name)
    missing = [m for m in info.requires if importlib.util.find_spec(m) is None]
    if missing:
        raise ImportError(f"strategy {info.name!r} needs {', '.join(missing)}: "
                          f"pip install 'dsa-planner[{info.extra}]'")
    return importlib.import_module(info.module).solve


def pool_strategies() -> list[str]:
    """Names of the registered strategies that plan over several memory pools (see :mod:`dsa.pools`)."""
    return sorted(name for name, info in _REGISTRY.items() if info.pools)


def get_pool_strategy(name: str) -> Callable:
    """The planner over several pools of strategy ``name`` (or alias), importing it on first use.

    Raises
    ------
    ValueError
        When the strategy plans one slab only, listing those that plan pools.
    """
    info = strategy_info(name)
    if info.pools is None:
        raise ValueError(f"strategy {info.name!r} plans one slab only; strategies that plan over several pools: "
                         f"{', '.join(pool_strategies())}")
    module, function = info.pools.split(":")
    return getattr(importlib.import_module(module), function)


# the one door into a strategy (defined in a module of its own; it needs get_strategy above)
from dsa.strategies._call import call, strategy_options  # noqa: E402
