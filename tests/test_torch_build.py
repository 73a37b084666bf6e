"""Building the native allocator: the cache, clear errors, and the package boundary."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[1]

# Runs in a fresh interpreter: builds (or finds) the library, installs it, runs a forward, reports.
PROBE = """
import json, torch
import dsa.adapters.torch as t
result = {}
try:
    info = t.build_info()
    result.update(path=info.path, built=info.built, seconds=info.build_seconds)
except t.BuildError as exc:
    result["error"] = str(exc)
net = torch.nn.Linear(4, 2)
with torch.inference_mode():
    y = net(torch.ones(3, 4))
result["eager_ok"] = bool(torch.isfinite(y).all())
print(json.dumps(result))
"""


def probe(tmp_path, **env):
    full = {**os.environ, "DSA_CACHE_DIR": str(tmp_path / "cache"), **env}
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=full, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_second_process_reuses_the_cached_build(tmp_path):
    first = probe(tmp_path)
    assert first["built"] and first["eager_ok"], first
    assert Path(first["path"]).parent == tmp_path / "cache"
    mtime = Path(first["path"]).stat().st_mtime_ns
    second = probe(tmp_path)
    assert second["built"] is False and second["path"] == first["path"]
    assert Path(second["path"]).stat().st_mtime_ns == mtime
    assert first["seconds"] < 60  # the issue asks for <= 15 s; leave room for a loaded CI machine


def test_missing_compiler_is_a_clear_error_and_eager_torch_keeps_working(tmp_path):
    result = probe(tmp_path, DSA_CXX=str(tmp_path / "no-such-compiler"), PATH=os.environ.get("PATH", ""))
    assert "error" in result and result["eager_ok"]
    assert "cannot run the C++ compiler" in result["error"] and "apt install g++" in result["error"]


def test_no_compiler_on_path(tmp_path, monkeypatch):
    from dsa.adapters.torch import BuildError
    from dsa.adapters.torch import _build

    monkeypatch.delenv("DSA_CXX", raising=False)
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BuildError, match="no C[+][+] compiler found.*install"):
        _build.find_compiler()


def test_failed_build_shows_the_compiler_output(tmp_path):
    fake = tmp_path / "fake-cxx"
    fake.write_text("#!/bin/sh\necho 'fatal error: something broke' >&2\nexit 3\n")
    fake.chmod(0o755)
    result = probe(tmp_path, DSA_CXX=str(fake))
    assert result["eager_ok"]
    assert "building the dsa allocator failed (exit 3)" in result["error"]
    assert "something broke" in result["error"]


def test_cache_dir_defaults_to_the_user_cache(monkeypatch, tmp_path):
    from dsa.adapters.torch import _build

    monkeypatch.delenv("DSA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _build.cache_dir() == tmp_path / "dsa"
    monkeypatch.setenv("DSA_CACHE_DIR", str(tmp_path / "x"))
    assert _build.cache_dir() == tmp_path / "x"


def test_adapters_is_not_a_top_level_module():
    done = subprocess.run([sys.executable, "-c", "import adapters.torch"], capture_output=True, text=True,
                          cwd=REPO)
    assert done.returncode != 0
    assert "import it as dsa.adapters" in done.stderr


def test_import_dsa_does_not_import_torch():
    code = "import sys, dsa; dsa.solve([(0, 1, 4)]); print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


def test_unbalanced_quote_in_the_compiler_command_is_a_build_error(tmp_path):
    result = probe(tmp_path, DSA_CXX='g++ "-O2')
    assert result["eager_ok"] and "error" in result, result
    assert "cannot parse the C++ compiler command" in result["error"]
    assert "No closing quotation" in result["error"]


def test_blank_compiler_command_is_a_build_error(monkeypatch):
    from dsa.adapters.torch import BuildError, _build

    monkeypatch.setenv("DSA_CXX", "   ")
    with pytest.raises(BuildError, match="is empty"):
        _build.library_path()


def _unwritable_dir(tmp_path) -> Path:
    """A directory this process cannot create files in (root ignores permission bits: use /proc)."""
    if os.geteuid() == 0:
        return Path("/proc/self")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    return ro


def test_unwritable_cache_dir_is_a_build_error(tmp_path):
    result = probe(tmp_path, DSA_CACHE_DIR=str(_unwritable_dir(tmp_path)))
    assert result["eager_ok"] and "error" in result, result
    assert "build cache" in result["error"] and "DSA_CACHE_DIR" in result["error"]


def test_cache_dir_below_a_file_is_a_build_error(tmp_path):
    (tmp_path / "file").write_text("")
    result = probe(tmp_path, DSA_CACHE_DIR=str(tmp_path / "file" / "cache"))
    assert result["eager_ok"] and "cannot create the build cache" in result["error"]
