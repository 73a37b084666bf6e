"""The python examples of the docs run, so that they cannot rot.

Every fenced ```python block of ``docs/getting-started.md`` and ``docs/index.md`` is executed, each in
a fresh namespace and a temporary working directory (the examples write ``heap.png``). The examples
assert their own results; the tests below check a few more facts. A block that uses the PyTorch
adapter is skipped, with the reason, when torch is missing or the native allocator cannot be built
(no C++ compiler): ``dsa.adapters.torch`` raises ``BuildError`` then.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)


def python_blocks(page: str) -> list[str]:
    """The source of every fenced ```python block of ``docs/<page>``, in order."""
    return FENCE.findall((DOCS / page).read_text(encoding="utf-8"))


def _uses_torch(source: str) -> bool:
    return "dsa.adapters.torch" in source or "import torch" in source


def _run(source: str, page: str, index: int, tmp_path, monkeypatch) -> dict:
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": f"docs_{page.replace('-', '_').removesuffix('.md')}_{index}"}
    code = compile(source, f"docs/{page} (python block {index + 1})", "exec")
    if not _uses_torch(source):
        exec(code, namespace)
        return namespace
    pytest.importorskip("torch", reason="the example needs torch: pip install 'dsa-planner[torch]'")
    from dsa.adapters.torch import BuildError

    try:
        exec(code, namespace)
    except BuildError as exc:
        pytest.skip(f"the native allocator cannot be built here: {exc}")
    return namespace


def test_the_pages_have_the_examples():
    blocks = python_blocks("getting-started.md")
    assert len(blocks) == 2
    assert "dsa.solve(" in blocks[0] and not _uses_torch(blocks[0])
    assert "attach(" in blocks[1]
    for source in blocks:  # "a ten-line example": short enough to read at a glance
        code = [line for line in source.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        assert len(code) <= 16, source
    assert len(python_blocks("index.md")) == 1


def test_getting_started_solve(tmp_path, monkeypatch):
    ns = _run(python_blocks("getting-started.md")[0], "getting-started.md", 0, tmp_path, monkeypatch)
    assert ns["sol"].offsets.tolist() == [8, 8, 4, 4, 0]
    assert str(ns["sol"].status) == "optimal"
    assert ns["plan"].success
    assert (tmp_path / "heap.png").stat().st_size > 0


def test_getting_started_attach(tmp_path, monkeypatch):
    ns = _run(python_blocks("getting-started.md")[1], "getting-started.md", 1, tmp_path, monkeypatch)
    report = ns["report"]
    assert report["signatures"] == 1 and report["profiles"] == 1
    assert report["slab_bytes"] >= report["lower_bound_bytes"] > 0
    assert report["fallbacks"] == 0 and report["misses"] == 0
    ns["m"].detach()


def test_home_page_example(tmp_path, monkeypatch):
    ns = _run(python_blocks("index.md")[0], "index.md", 0, tmp_path, monkeypatch)
    sol = ns["sol"]
    assert sol.success and sol.peak == sol.lower_bound == 11644288  # the numbers the page prints
    assert (tmp_path / "heap.png").stat().st_size > 0
