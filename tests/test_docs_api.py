"""The docs cover the public API: every exported name is in the API reference, every strategy has a page.

* Every name of ``dsa.__all__`` and ``dsa.adapters.torch.__all__`` has a mkdocstrings entry
  (``::: module.name``) in ``docs/api.md`` that resolves to that very object (``dsa.__version__``,
  a string, is named in the text instead).
* Every ``:::`` entry of ``docs/api.md`` resolves, so that a rename cannot leave a stale entry.
* Every registered strategy has a page in the nav of ``mkdocs.yml`` whose options table lists each
  keyword option of the strategy's ``solve`` with its default as in the code, and shows the strategy's
  heap map, which exists and is small.
"""
from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

import dsa
from dsa.strategies import get_strategy, strategy_info

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
API = (DOCS / "api.md").read_text(encoding="utf-8")
IDENTIFIERS = re.findall(r"^:::\s+(\S+)", API, re.M)
# the adapter's sources live in adapters/torch/ and are documented from there; installed as dsa.adapters.torch
ADAPTER_SOURCE, ADAPTER_PACKAGE = "adapters.torch", "dsa.adapters.torch"
# likewise adapters/executorch/, installed as dsa.adapters.executorch
ET_SOURCE, ET_PACKAGE = "adapters.executorch", "dsa.adapters.executorch"
MAX_PNG_BYTES = 150_000


def resolve(identifier: str):
    """The object a mkdocstrings identifier names (the adapter's through its installed package)."""
    if identifier == ADAPTER_SOURCE or identifier.startswith(ADAPTER_SOURCE + "."):
        identifier = ADAPTER_PACKAGE + identifier[len(ADAPTER_SOURCE):]
    if identifier == ET_SOURCE or identifier.startswith(ET_SOURCE + "."):
        identifier = ET_PACKAGE + identifier[len(ET_SOURCE):]
    parts = identifier.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(f"nothing importable in {identifier!r}")


def documented(name: str, package) -> bool:
    """Whether some ``:::`` entry of docs/api.md names ``package.<name>`` (by its defining module)."""
    target = getattr(package, name)
    for identifier in IDENTIFIERS:
        if identifier.rsplit(".", 1)[-1] != name:
            continue
        if identifier.startswith(ADAPTER_SOURCE) and package.__name__ != ADAPTER_PACKAGE:
            continue
        if identifier.startswith(ET_SOURCE) and package.__name__ != ET_PACKAGE:
            continue
        if resolve(identifier) is target:
            return True
    return False


@pytest.mark.parametrize("name", dsa.__all__)
def test_every_public_name_of_dsa_is_in_the_api_reference(name):
    if name == "__version__":
        assert "`dsa.__version__`" in API
        return
    assert documented(name, dsa), f"docs/api.md has no '::: <module>.{name}' entry for dsa.{name}"


def test_every_public_name_of_the_torch_adapter_is_in_the_api_reference():
    pytest.importorskip("torch")
    adapter = importlib.import_module(ADAPTER_PACKAGE)
    missing = [name for name in adapter.__all__ if not documented(name, adapter)]
    assert not missing, f"docs/api.md lacks entries for dsa.adapters.torch.{missing}"


def test_every_public_name_of_the_executorch_adapter_is_in_the_api_reference():
    adapter = importlib.import_module(ET_PACKAGE)  # its names resolve lazily; executorch is not needed
    missing = [name for name in adapter.__all__ if not documented(name, adapter)]
    assert not missing, f"docs/api.md lacks entries for dsa.adapters.executorch.{missing}"


@pytest.mark.parametrize("identifier", IDENTIFIERS)
def test_every_api_entry_resolves(identifier):
    if identifier.startswith(ADAPTER_SOURCE):
        pytest.importorskip("torch")
    resolve(identifier)


def _options_table(page: str) -> dict[str, str]:
    """``{option: default}`` from the rows "| `option` | `default` | ..." of a strategy page."""
    rows = re.findall(r"^\|\s*`([A-Za-z_]\w*)`\s*\|\s*`([^`]*)`\s*\|", page, re.M)
    return dict(rows)


@pytest.mark.parametrize("name", dsa.available_strategies())
def test_every_strategy_has_a_page_with_its_options_and_heap_map(name):
    path = DOCS / "strategies" / f"{name}.md"
    assert path.is_file(), f"no page docs/strategies/{name}.md"
    assert f"strategies/{name}.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), "page not in the nav"
    page = path.read_text(encoding="utf-8")
    info = strategy_info(name)
    # the module is imported, not the strategy looked up: mip's solve exists without its optional backend
    solve = importlib.import_module(info.module).solve if not info.available else get_strategy(name)
    table = _options_table(page)
    for option, param in inspect.signature(solve).parameters.items():
        if param.kind is not param.KEYWORD_ONLY or option in ("sweep", "context"):  # passed by dsa.solve
            continue
        assert option in table, f"{name}.md: the options table lacks `{option}`"
        assert table[option] == repr(param.default), \
            f"{name}.md: `{option}` defaults to {param.default!r} in the code, {table[option]} on the page"
    image = DOCS / "img" / f"strategy_{name}.png"
    assert f"../img/strategy_{name}.png" in page
    assert image.is_file() and 0 < image.stat().st_size < MAX_PNG_BYTES


def test_the_other_figures_exist_and_are_small():
    for png in sorted((DOCS / "img").glob("*.png")):
        assert png.stat().st_size < MAX_PNG_BYTES, png
    for name in ("home", "concepts", "strategies_grid"):
        assert (DOCS / "img" / f"{name}.png").is_file()
