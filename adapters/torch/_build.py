"""Build, cache and locate the native allocator library for the installed torch.

The allocator (``dsa/_native/dsa_alloc.cpp``) is a small C++20 library with a C interface; its
per-call path (``dsa/_native/dsa_fast.cpp``) is compiled into the same library, which is also a
CPython extension module (``_dsa_fast``). They include c10 and ATen headers and ``Python.h`` --
not ``torch/extension.h`` -- so a cold build takes seconds. C++ headers of torch are not ABI-stable,
so the library is cached per torch version, torch commit, C++ ABI flag, machine, compiler and
source hash, in ``$DSA_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/dsa`` (``~/.cache/dsa``).

The compiler is ``$DSA_CXX``, else ``$CXX``, else the first of ``g++``, ``c++``, ``clang++`` on the
``PATH``.
"""
from __future__ import annotations

import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
import time
from importlib import resources
from pathlib import Path

SOURCES = ("dsa_alloc.cpp", "dsa_fast.cpp")  # one library: the allocator and its CPython call path
_COMPILERS = ("g++", "c++", "clang++")
_INSTALL_HINT = ("install a C++20 compiler (Debian/Ubuntu: 'apt install g++'; Fedora: 'dnf install "
                 "gcc-c++'; conda: 'conda install -c conda-forge gxx') or point DSA_CXX at one")


class BuildError(RuntimeError):
    """The native allocator could not be built or loaded.

    Plain eager PyTorch is unaffected: nothing was installed into torch.
    """


def cache_dir() -> Path:
    """The directory that holds built libraries (``$DSA_CACHE_DIR`` or the user cache)."""
    env = os.environ.get("DSA_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "dsa"


def find_compiler() -> str:
    """The C++ compiler to use, as a command string.

    Raises
    ------
    BuildError
        If ``$DSA_CXX``/``$CXX`` are unset and no known compiler is on the ``PATH``.
    """
    for var in ("DSA_CXX", "CXX"):
        value = os.environ.get(var)
        if value:
            return value
    for name in _COMPILERS:
        found = shutil.which(name)
        if found:
            return found
    raise BuildError(f"no C++ compiler found (looked for $DSA_CXX, $CXX, {', '.join(_COMPILERS)}): "
                     f"dsa.adapters.torch builds its allocator at first use; {_INSTALL_HINT}")


def _torch_paths():
    import torch

    root = Path(torch.__file__).resolve().parent
    return torch, root / "include", root / "lib"


def _split(compiler: str) -> list[str]:
    """The compiler command as arguments (shell quoting rules).

    Raises
    ------
    BuildError
        If the string cannot be parsed (an unbalanced quote) or names no program.
    """
    try:
        words = shlex.split(compiler)
    except ValueError as exc:
        raise BuildError(f"cannot parse the C++ compiler command {compiler!r} (from $DSA_CXX or $CXX): {exc}; "
                         "fix its quoting or point DSA_CXX at a compiler") from None
    if not words:
        raise BuildError(f"the C++ compiler command {compiler!r} (from $DSA_CXX or $CXX) is empty; "
                         f"{_INSTALL_HINT}")
    return words


def _command(compiler: str, sources: list[Path], output: Path) -> list[str]:
    torch, include, lib = _torch_paths()
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    # Python's symbols are resolved from the running interpreter at load time (as for any extension)
    return [*_split(compiler), "-std=c++20", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
            f"-D_GLIBCXX_USE_CXX11_ABI={abi}", "-I", str(include), "-I", sysconfig.get_paths()["include"],
            "-o", str(output), *map(str, sources), "-L", str(lib), "-lc10", "-ltorch_cpu", "-ldl", f"-Wl,-rpath,{lib}"]


def _source_bytes(name: str) -> bytes:
    return resources.files("dsa._native").joinpath(name).read_bytes()


def _key(compiler: str) -> str:
    torch, _, _ = _torch_paths()
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update(_source_bytes(name))
    digest.update(compiler.encode())
    digest.update(" ".join(_command("CXX", [Path(s) for s in SOURCES], Path("out"))).encode())
    digest.update(sysconfig.get_config_var("EXT_SUFFIX").encode())  # the CPython ABI of dsa_fast.cpp
    version = torch.__version__.replace("+", "_")
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    git = (getattr(torch.version, "git_version", "") or "")[:12]
    return f"torch-{version}-{git}-cxx11abi{abi}-{platform.machine()}-{digest.hexdigest()[:16]}"


def library_path(*, rebuild: bool = False) -> tuple[Path, float | None]:
    """Return the path of the built library, building it first if the cache has none.

    Parameters
    ----------
    rebuild : bool
        Build even if a cached library exists.

    Returns
    -------
    path : pathlib.Path
        The shared library.
    build_seconds : float or None
        How long this call spent compiling; None when the cached library was used.

    Raises
    ------
    BuildError
        If no compiler is found, the compiler command cannot be parsed, the cache directory is
        not writable, or compilation fails; the message says which (with the compiler's output).
    """
    compiler = find_compiler()
    _split(compiler)  # a malformed command is a BuildError before anything else
    directory = cache_dir()
    path = directory / f"libdsa_alloc-{_key(compiler)}.so"
    try:
        if path.is_file() and not rebuild:
            return path, None
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildError(f"cannot create the build cache {directory}: {exc}; set DSA_CACHE_DIR to a "
                         "writable directory") from None
    # the file the library is staged in, made first: an unwritable cache fails before compiling
    try:
        fd, partial = tempfile.mkstemp(dir=directory, prefix=".partial-", suffix=".so")
        os.close(fd)
    except OSError as exc:
        raise BuildError(f"cannot write into the build cache {directory}: {exc}; set DSA_CACHE_DIR to a "
                         "writable directory") from None
    try:
        return path, _build(compiler, path, Path(partial))
    except OSError as exc:  # e.g. no writable temporary directory
        raise BuildError(f"building the dsa allocator failed: {exc}") from None
    finally:
        Path(partial).unlink(missing_ok=True)


def _build(compiler: str, path: Path, partial: Path) -> float:
    """Compile into a temporary directory, then move the library to ``path`` through ``partial``
    (in the cache directory); return the seconds it took."""
    directory = path.parent
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dsa-build-") as tmp:
        sources = [Path(tmp) / name for name in SOURCES]
        for source in sources:
            source.write_bytes(_source_bytes(source.name))
        staged = Path(tmp) / path.name
        cmd = _command(compiler, sources, staged)
        try:
            done = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as exc:  # the compiler named by DSA_CXX/CXX does not exist
            raise BuildError(f"cannot run the C++ compiler {compiler!r}: {exc}; {_INSTALL_HINT}") from None
        if done.returncode != 0 or not staged.exists():
            output = (done.stderr or done.stdout or "").strip().splitlines()
            tail = "\n".join(output[-20:])
            raise BuildError(f"building the dsa allocator failed (exit {done.returncode}); {_INSTALL_HINT}.\n"
                             f"command: {shlex.join(cmd)}\n{tail}")
        # move into place atomically: concurrent processes may build the same key
        try:
            shutil.copyfile(staged, partial)
            os.replace(partial, path)
        except OSError as exc:
            raise BuildError(f"cannot write the built library into the build cache {directory}: {exc}; "
                             "set DSA_CACHE_DIR to a writable directory") from None
    return time.perf_counter() - t0
