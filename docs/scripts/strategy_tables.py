"""The strategy tables of the docs, generated from the registry (``dsa/strategies/__init__.py``).

Four regions are generated, each between a pair of markers in a committed file:

* ``README.md`` and ``docs/strategies/index.md``: the table of strategies (name linked to its page, kind,
  what, paper, complexity, time limit, size it is meant for, optional extra), between
  ``<!-- strategies:begin ... -->`` and ``<!-- strategies:end -->``;
* ``docs/api.md``: one ``::: dsa.strategies.<name>`` entry per strategy, between
  ``<!-- strategies-api:begin ... -->`` and ``<!-- strategies-api:end -->``.
* ``docs/cli.md``: the output of ``python -m dsa strategies -v`` (every strategy taken as installed),
  between ``<!-- strategies-cli:begin ... -->`` and ``<!-- strategies-cli:end -->``.

Everything else in those files is written by hand. Rows come in the order of ``KINDS`` (baseline,
heuristic, approximation, portfolio, exact), then by name. The "time limit" column is the default of
the ``time_limit`` parameter of the strategy's ``solve``, read from its signature.

    python docs/scripts/strategy_tables.py            # check: exit 1 and name the stale files
    python docs/scripts/strategy_tables.py --write    # rewrite them (make docs-tables)

``tests/test_strategy_tables.py`` runs the check.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from dsa.strategies import KINDS, StrategyInfo, available_strategies, strategy_info  # noqa: E402

COMMAND = "python docs/scripts/strategy_tables.py --write"
HEADER = ("| strategy | kind | what | paper | complexity | time limit | meant for | extra |\n"
          "|---|---|---|---|---|---|---|---|")


def strategies() -> list[StrategyInfo]:
    """Every registered strategy, by kind (in the order of ``KINDS``), then by name."""
    infos = [strategy_info(name) for name in available_strategies()]
    return sorted(infos, key=lambda info: (KINDS.index(info.kind), info.name))


def _time_limit(info: StrategyInfo) -> str:
    if not info.time_limit:
        return ""
    # the module, not get_strategy: mip's solve exists without its optional backend
    param = inspect.signature(importlib.import_module(info.module).solve).parameters.get("time_limit")
    if param is None:
        raise ValueError(f"strategy {info.name!r} is registered with time_limit=True, but its solve takes none")
    if param.default is None or param.default is inspect.Parameter.empty:
        return "none by default"
    return f"{param.default:g} s default"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table(link: str) -> str:
    """The Markdown table of the strategies; ``link`` formats the page of one (``{name}``)."""
    rows = [HEADER]
    for info in strategies():
        cells = [f"[`{info.name}`]({link.format(name=info.name)})", info.kind, info.summary, info.paper,
                 info.complexity, _time_limit(info),
                 "any size" if info.max_n is None else f"≤ {info.max_n:,} buffers",
                 f"`[{info.extra}]`" if info.extra else ""]
        rows.append("|" + "|".join(f" {_cell(c)} " if c else " " for c in cells) + "|")
    return "\n".join(rows)


def api_entries() -> str:
    """The mkdocstrings entries of the strategy modules, for docs/api.md."""
    return "\n\n".join(f"::: {info.module}\n    options:\n      show_root_full_path: true" for info in strategies())


def cli_listing() -> str:
    """``python -m dsa strategies -v`` as docs/cli.md shows it, with every optional dependency taken as
    installed (so that the page does not depend on the machine that builds it)."""
    import contextlib
    import io

    from dsa.cli import main as cli

    out = io.StringIO()
    available = StrategyInfo.available
    StrategyInfo.available = property(lambda self: True)
    try:
        with contextlib.redirect_stdout(out):
            code = cli(["strategies", "-v"])
    finally:
        StrategyInfo.available = available
    if code != 0:
        raise RuntimeError(f"python -m dsa strategies -v exited with {code}")
    return f"```\n$ python -m dsa strategies -v\n{out.getvalue()}```"


# file -> (region, generator)
REGIONS = {
    "README.md": ("strategies", lambda: table("docs/strategies/{name}.md")),
    "docs/strategies/index.md": ("strategies", lambda: table("{name}.md")),
    "docs/api.md": ("strategies-api", api_entries),
    "docs/cli.md": ("strategies-cli", cli_listing),
}


def replace_region(text: str, region: str, body: str, where: str = "") -> str:
    """``text`` with the lines between the markers of ``region`` replaced by ``body``."""
    pattern = re.compile(rf"(^<!-- {re.escape(region)}:begin\b[^\n]*-->\n)(.*?)(^<!-- {re.escape(region)}:end -->$)",
                         re.S | re.M)
    found = pattern.findall(text)
    if len(found) != 1:
        raise ValueError(f"{where}: expected one '<!-- {region}:begin -->' ... '<!-- {region}:end -->' region, "
                         f"found {len(found)}")
    return pattern.sub(lambda m: m.group(1) + "\n" + body + "\n\n" + m.group(3), text)


def expected(root: Path = ROOT) -> dict[Path, tuple[str, str]]:
    """``{path: (current text, generated text)}`` for every file with a generated region."""
    out = {}
    for rel, (region, make) in REGIONS.items():
        path = root / rel
        current = path.read_text(encoding="utf-8")
        out[path] = current, replace_region(current, region, make(), rel)
    return out


def stale(root: Path = ROOT) -> list[str]:
    """The files whose generated regions differ from the registry."""
    return [str(path.relative_to(root)) for path, (now, new) in expected(root).items() if now != new]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the stale files (default: only check)")
    args = parser.parse_args(argv)
    changed = [(path, new) for path, (now, new) in expected().items() if now != new]
    for path, new in changed:
        if args.write:
            path.write_text(new, encoding="utf-8")
        print(f"{'rewrote' if args.write else 'stale:'} {path.relative_to(ROOT)}")
    if changed and not args.write:
        print(f"the strategy tables differ from the registry: run `{COMMAND}` (make docs-tables)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
