"""Imports run one way through the layers, and no module reaches into another's private names.

* The import-linter contract of ``pyproject.toml`` (``[tool.importlinter]``: kernels <- problem and
  context <- strategies <- front end <- CLI, planner process, adapters) holds: ``lint-imports`` passes.
  It sees every import, lazy ones inside functions included.
* No module of ``dsa`` or of the adapters uses a ``_private`` name of another module (``from dsa.x
  import _y``, or ``x._y`` on an imported module ``x``): what two modules share is a public name of
  the lower one, inside a private module if it is internal. Private modules may be imported; the
  numba kernels of ``dsa._kernels`` may share private helpers among themselves.
"""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dsa", "adapters")
KERNELS = "dsa._kernels"


def _lint_imports() -> list[str]:
    exe = Path(sys.executable).with_name("lint-imports")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("lint-imports")
    if found is None:
        pytest.skip("import-linter is not installed (pip install 'dsa-planner[test]')")
    return [found]


def test_the_layers_contract_holds():
    """``lint-imports`` (run from the repository root) keeps the layers contract."""
    result = subprocess.run(_lint_imports() + ["--no-cache"], cwd=ROOT, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "1 kept, 0 broken" in result.stdout, result.stdout[-2000:]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_module(name: str) -> bool:
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _exempt(importer: str, owner: str) -> bool:
    """The module itself, and the kernels among themselves."""
    return owner == importer or (importer.startswith(KERNELS) and owner.startswith(KERNELS))


def private_reach_ins(path: Path) -> list[str]:
    """``module: what`` for each use in ``path`` of another module's private name."""
    me = _module_name(path)
    package = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    modules = {}  # local name -> module it names
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                prefix = package[:len(package) - node.level + 1]
                base = ".".join(prefix + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if _is_module(full):
                    modules[alias.asname or alias.name] = full
                elif _private(alias.name) and not _exempt(me, base):
                    found.append(f"{me}: from {base} import {alias.name} (line {node.lineno})")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    modules[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in modules and _private(node.attr)):
            owner = modules[node.value.id]
            if not _is_module(f"{owner}.{node.attr}") and not _exempt(me, owner):
                found.append(f"{me}: {owner}.{node.attr} (line {node.lineno})")
    return found


def test_no_module_uses_another_modules_private_names():
    found = [hit for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
             for hit in private_reach_ins(path)]
    assert not found, "private names used across modules:\n" + "\n".join(found)


def test_the_private_name_check_finds_reach_ins(tmp_path, monkeypatch):
    """The check itself: it flags both forms, and leaves private modules and the module's own names."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "_helpers.py").write_text("def _secret(): pass\ndef shared(): pass\n")
    (pkg / "user.py").write_text("from pkg._helpers import _secret, shared\nfrom pkg import _helpers\n"
                                 "def f():\n    return _helpers._secret(), _helpers.shared()\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    hits = private_reach_ins(pkg / "user.py")
    assert [h.split(" (")[0] for h in hits] == ["pkg.user: from pkg._helpers import _secret",
                                                "pkg.user: pkg._helpers._secret"]
