"""What every results-writing benchmark script shares: the provenance of a run and writing it out.

A script's document (a dict) carries ``date``, ``machine`` and ``command`` (:func:`provenance`), and
:func:`write_results` writes it as ``OUT.json`` beside its Markdown report ``OUT.md``.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from pathlib import Path


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
