"""The strategy tables of the docs are generated from the registry, and every strategy has its page.

* The generated regions of ``README.md``, ``docs/strategies/index.md``, ``docs/api.md`` and
  ``docs/cli.md`` are what ``docs/scripts/strategy_tables.py`` makes from the registry now.
* Every registered strategy has its module, its page ``docs/strategies/<name>.md`` and a nav entry in
  ``mkdocs.yml``; no page or nav entry names a strategy that is not registered.
* Every registry entry fills the fields the tables show, and its ``time_limit`` flag matches its ``solve``.

So a new strategy is one module, one registry line, its page and its tests ("Adding a strategy" in
``docs/strategies/index.md``); the tables follow with ``make docs-tables``.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
from pathlib import Path

import pytest

import dsa
from dsa import strategies
from dsa.strategies import KINDS, StrategyInfo, strategy_info

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "docs" / "scripts" / "strategy_tables.py"
_spec = importlib.util.spec_from_file_location("strategy_tables", SCRIPT)
tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tables)

NAMES = dsa.available_strategies()


def _nav_strategy_pages() -> dict[str, str]:
    """``{label: name}`` for the nav entries ``- label: strategies/<name>.md`` of mkdocs.yml."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text[text.index("\nnav:"):]
    nav = nav[:re.search(r"\n\S", nav[1:]).start() + 1]  # up to the next top-level key
    return dict(re.findall(r"^\s+-\s+(\S+):\s+strategies/(\w+)\.md\s*$", nav, re.M))


def test_generated_regions_match_the_registry():
    stale = tables.stale()
    assert not stale, (f"{', '.join(stale)}: the generated strategy tables differ from the registry in "
                       f"dsa/strategies/__init__.py; run `{tables.COMMAND}` (or make docs-tables)")


@pytest.mark.parametrize("name", NAMES)
def test_every_strategy_has_its_module_page_and_nav_entry(name):
    assert (ROOT / "dsa" / "strategies" / f"{name}.py").is_file(), f"no module dsa/strategies/{name}.py"
    assert (ROOT / "docs" / "strategies" / f"{name}.md").is_file(), f"no page docs/strategies/{name}.md"
    assert _nav_strategy_pages().get(name) == name, \
        f"mkdocs.yml: the nav lacks '- {name}: strategies/{name}.md' under Strategies"


def test_no_page_or_nav_entry_without_a_registered_strategy():
    pages = {p.stem for p in (ROOT / "docs" / "strategies").glob("*.md")} - {"index"}
    assert pages <= set(NAMES), f"pages of unregistered strategies: {sorted(pages - set(NAMES))}"
    nav = set(_nav_strategy_pages().values()) - {"index"}
    assert nav <= set(NAMES), f"nav entries of unregistered strategies: {sorted(nav - set(NAMES))}"


@pytest.mark.parametrize("name", NAMES)
def test_every_registry_entry_fills_what_the_tables_show(name):
    info = strategy_info(name)
    assert info.module == f"dsa.strategies.{name}" and info.kind in KINDS
    assert info.summary and info.complexity, f"{name}: the registry entry needs a summary and a complexity"
    assert "|" not in info.summary + info.paper + info.complexity
    assert bool(info.extra) == bool(info.requires), f"{name}: an optional dependency needs its extra"
    # the module, not get_strategy: mip's solve exists without its optional backend
    takes = "time_limit" in inspect.signature(importlib.import_module(info.module).solve).parameters
    assert info.time_limit == takes, f"{name}: registered time_limit={info.time_limit}, its solve says {takes}"


def test_a_new_registry_line_reaches_every_table(monkeypatch):
    new = StrategyInfo(name="zz_new", module="dsa.strategies.bump", kind="exact", summary="a new one",
                       paper="Someone 2030", complexity="O(1)", requires=("no_such_module_xyz",),
                       extra="new", max_n=1234)
    monkeypatch.setitem(strategies._REGISTRY, "zz_new", new)
    rows = tables.table("{name}.md").splitlines()
    assert rows[-1] == "| [`zz_new`](zz_new.md) | exact | a new one | Someone 2030 | O(1) | | ≤ 1,234 buffers " \
                       "| `[new]` |"
    assert len(rows) == len(NAMES) + 3
    assert "::: dsa.strategies.bump" in tables.api_entries().split("\n\n")[-1]
    listing = tables.cli_listing()
    assert "zz_new" in listing and "needs pip install" not in listing  # taken as installed
    assert not new.available  # and put back


def test_replace_region_keeps_the_rest_and_needs_one_pair_of_markers():
    text = "head\n<!-- t:begin: note -->\nold\n<!-- t:end -->\ntail\n"
    assert tables.replace_region(text, "t", "new") == "head\n<!-- t:begin: note -->\n\nnew\n\n<!-- t:end -->\ntail\n"
    for bad in ("no markers\n", text + text, "<!-- t:begin -->\nx\n"):
        with pytest.raises(ValueError, match="expected one"):
            tables.replace_region(bad, "t", "new")


def test_stale_names_a_file_whose_region_was_edited(tmp_path, capsys):
    for rel in tables.REGIONS:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text((ROOT / rel).read_text(encoding="utf-8"), encoding="utf-8")
    assert tables.stale(tmp_path) == []
    readme = tmp_path / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8").replace("| [`bump`]", "| [`bmup`]"), encoding="utf-8")
    assert tables.stale(tmp_path) == ["README.md"]
