"""What every results-writing benchmark script shares: the provenance of a run and writing it out.

A script's document (a dict) carries ``date``, ``machine`` and ``command`` (:func:`provenance`), and
:func:`write_results` writes it as ``OUT.json`` beside its Markdown report ``OUT.md``. Scripts that
run one child process per (model, batch, size) configuration take their grid options from
:func:`grid_parser`.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path


def this_checkouts_generator():
    """This checkout's ``dsa/generate.py`` as a standalone module, so that instances come from it
    even when a script's ``--src`` puts another checkout's dsa first on the path."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "dsa" / "generate.py"
    spec = importlib.util.spec_from_file_location("_dsa_generate", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def provenance(script: str, argv) -> dict:
    """``date``, ``machine`` and the ``command`` that ran ``benchmarks/<script>`` with ``argv``."""
    return {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "machine": f"{platform.platform()}, {os.cpu_count()} cores",
            "command": f"python benchmarks/{script} " + " ".join(argv)}


def write_results(out: Path, doc: dict, report) -> None:
    """Write ``doc`` to ``out.json`` and ``report(doc)`` to ``out.md`` (folders made as needed)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1))
    out.with_suffix(".md").write_text(report(doc))
    print(f"wrote {out.with_suffix('.md')}", file=sys.stderr)


def warm_exact() -> None:
    """Load every kernel ``exact`` may use before anything is timed: the search (C is planned by
    the first look at the bound) and the portfolio and improvement phase (D's optimum is above its
    bound, so a short call runs both)."""
    import dsa

    dsa.solve(dsa.data.load("C.1048576").replace(capacity=None), "exact", time_limit=5)
    dsa.solve(dsa.data.load("D.1048576").replace(capacity=None), "exact", time_limit=0.5)


def grid_parser(description: str, *, models, batches, sizes) -> argparse.ArgumentParser:
    """A parser with the options of a per-configuration script: ``--one CFG`` (internal: measure one
    configuration in this process), ``--models``, ``--batches``, ``--sizes`` (comma-separated, with
    these defaults) and ``--out-dir`` (default ``docs/results``). The script adds its own options."""
    from latency_study import _ints  # this folder is on sys.path, as for every script here

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--models", type=lambda t: tuple(t.split(",")), default=tuple(models))
    ap.add_argument("--batches", type=_ints, default=tuple(batches))
    ap.add_argument("--sizes", type=_ints, default=tuple(sizes))
    ap.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "results")
    return ap
