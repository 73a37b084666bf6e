"""The report of an attached module: counters and sizes of every plan in its cache."""
from __future__ import annotations

from ._cache import PlanCache, native_counters


def _plan_row(entry, load) -> dict:
    planned = entry.plan is not None
    sol = entry.solution
    return {"allocations": len(entry.trace), "planned_allocations": len(entry.problem),
            "slab_bytes": int(sol.peak) if planned else 0,
            "lower_bound_bytes": int(load(entry.problem)),
            "status": sol.status.name if sol is not None else "ERROR",
            "strategy": sol.strategy if sol is not None else None,
            "planned_in": sol.stats.get("planned_in", "inline") if sol is not None else None,
            "replans": entry.replans, "threads": len(entry.slabs), "eager": not planned,
            "escaped": len(entry.escaped)}


def build_report(cache: PlanCache) -> dict:
    """The dict of :meth:`AttachedModule.report <dsa.adapters.torch.attach.AttachedModule.report>`.

    Parameters
    ----------
    cache : PlanCache
        The module's plan cache; its counters and the native counters of its slabs (live and
        released) are read under its lock.

    Returns
    -------
    dict
        The totals over the cached plans that replay, the counters, and ``plans``: one dict per
        cached signature, least recently used first.
    """
    from dsa.bounds import load

    with cache.lock:
        entries = list(cache.handles.entries.values())
        stats = dict(cache.stats, resident_slab_bytes=cache.handles.resident_bytes)
        native = dict(cache.handles.released)
        for e in entries:
            for slab in e.slabs.values():
                for key, value in native_counters(slab).items():
                    native[key] += value
    stats.update(native)
    plans = [_plan_row(e, load) for e in entries]
    planned = [p for p in plans if not p["eager"]]
    return {"signatures": len(plans),
            "planned_allocations": sum(p["planned_allocations"] for p in planned),
            "slab_bytes": sum(p["slab_bytes"] for p in planned),
            "lower_bound_bytes": sum(p["lower_bound_bytes"] for p in planned),
            **stats, "plans": plans}
