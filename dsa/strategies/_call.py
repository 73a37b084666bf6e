"""The one door into a strategy: :func:`call` hands it the planning context and the options it takes.

The front end (:func:`dsa.solve`), the portfolio of ``best`` (its members), ``mip`` (its heuristic),
``exact`` (its portfolio) and the CLI all go through here, so that what a strategy receives is decided
in one place. Re-exported as :func:`dsa.strategies.call` and :func:`dsa.strategies.strategy_options`.
"""
from __future__ import annotations

import inspect
import weakref
from typing import Callable

__all__ = ["call", "strategy_options"]

# what call() passes from the context, to strategies whose solve names them (or takes **kwargs,
# except the context object itself, which only a strategy that names it gets)
_FROM_CONTEXT = ("time_limit", "node_limit", "seed", "sweep")


def _function(strategy) -> Callable:
    if callable(strategy):
        return strategy
    if isinstance(strategy, str):
        from dsa.strategies import get_strategy

        return get_strategy(strategy)
    raise TypeError(f"strategy must be a name or a callable, got {type(strategy).__name__}")


def strategy_options(strategy) -> tuple[frozenset, bool]:
    """The keyword options a strategy takes after the problem, and whether it takes any (``**kwargs``).

    Parameters
    ----------
    strategy : str or callable
        A registered name (or alias) or a strategy function ``f(problem, **options)``.

    Returns
    -------
    (frozenset of str, bool)
        The names of its keyword parameters (``sweep`` and ``context`` included when it takes them),
        and whether it also takes arbitrary keywords.

    Examples
    --------
    >>> from dsa.strategies import strategy_options
    >>> names, any_keyword = strategy_options("greedy")
    >>> sorted(names), any_keyword
    (['fit', 'order', 'seed', 'sweep'], False)
    """
    fn = _function(strategy)
    try:
        return _SIGNATURES[fn]
    except (KeyError, TypeError):  # (TypeError: a callable that takes no weak reference or no hash)
        pass
    params = list(inspect.signature(fn).parameters.values())[1:]
    names = frozenset(p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
    found = names, any(p.kind == p.VAR_KEYWORD for p in params)
    try:
        _SIGNATURES[fn] = found
    except TypeError:
        pass
    return found


# what strategy_options found, per strategy function (reading a signature costs ~10 us a call); weak,
# so that a cached callable does not outlive its caller
_SIGNATURES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def call(strategy, problem, context=None, /, **options):
    """Run ``strategy`` on ``problem`` with the planning context and the options it takes.

    From ``context`` (a :class:`dsa.context.Context` of ``problem``; a fresh one when None) the
    strategy gets, when its ``solve`` takes them: ``context`` itself, ``sweep``, and ``time_limit``,
    ``node_limit`` and ``seed`` when they are not None. ``options`` are passed when the strategy takes
    them and override the context's values; options it does not take are dropped (:func:`dsa.solve`
    warns about them first, naming them).

    Parameters
    ----------
    strategy : str or callable
        A registered name (or alias) or a strategy function ``f(problem, **options)``.
    problem : Problem
    context : dsa.context.Context, optional
    **options
        Strategy options.

    Returns
    -------
    object
        What the strategy returned: a raw :class:`~dsa.Solution` (its offsets, any proven bound and
        the facts of the run; :func:`dsa.solution.finalize` gives it its status), bare offsets, or
        None. :func:`dsa.solver.conclude` turns any of these into the final Solution.

    Examples
    --------
    >>> import dsa
    >>> from dsa.strategies import call
    >>> raw = call("greedy", dsa.Problem([0, 1], [2, 3], [4, 4]), fit="first", colour="red")
    >>> raw.offsets.tolist()
    [0, 4]
    """
    fn = _function(strategy)
    if context is None:
        from dsa.context import Context

        context = Context(problem)
    names, var_kw = strategy_options(fn)
    kwargs = {}
    for key in _FROM_CONTEXT:
        value = getattr(context, key)
        if value is not None and key not in options and (key in names or var_kw):
            kwargs[key] = value
    if "context" in names and "context" not in options:
        kwargs["context"] = context
    kwargs.update({k: v for k, v in options.items() if k in names or var_kw})
    return fn(problem, **kwargs)
