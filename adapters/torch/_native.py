"""ctypes bindings of the native allocator, loaded and installed once per process."""
from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass

import numpy as np

from ._build import BuildError, library_path

_ABI_VERSION = 5
_p = ctypes.c_void_p
_i64 = ctypes.c_int64
_i32 = ctypes.c_int32

_SIGNATURES = {
    "dsa_abi_version": ([], ctypes.c_int),
    "dsa_last_error": ([], ctypes.c_char_p),
    "dsa_install": ([], ctypes.c_int),
    "dsa_thread_busy": ([], ctypes.c_int),
    "dsa_other_threads": ([_p], None),
    "dsa_release_free_memory": ([], ctypes.c_int),
    "dsa_profile_arena_chunks": ([], ctypes.c_int),
    "dsa_profile_begin": ([ctypes.c_int], _p),
    "dsa_profile_end": ([_p], _i64),
    "dsa_profile_clock": ([_p], _i64),
    "dsa_profile_copy": ([_p, _p, _p, _p, _p, _p], None),
    "dsa_profile_free": ([_p], None),
    "dsa_trie_size": ([], _i32),
    "dsa_trie_copy": ([_i32, _p, _p], None),
    "dsa_trie_name": ([_i32], ctypes.c_char_p),
    "dsa_plan_new": ([_i64, _p, _p, _p, _i64], _p),
    "dsa_plan_free": ([_p], None),
    "dsa_slab_new": ([_p], _p),
    "dsa_slab_free": ([_p], None),
    "dsa_slab_counters": ([_p, _p], None),
    "dsa_slab_escaped": ([_p, _p, _i64], _i64),
    "dsa_slab_trim": ([_p], _i64),
    "dsa_replay_begin": ([_p], _p),
    "dsa_replay_end": ([_p], ctypes.c_int),
}


class Counters(ctypes.Structure):
    """What the replay passes of one slab did (mirrors ``Counters`` in dsa_alloc.cpp).

    ``fallback`` counts the passes that fell back; ``fallback_at`` and ``reason`` describe the latest.
    """

    _fields_ = [(name, _i64) for name in (
        "allocations", "from_slab", "bytes_from_slab", "bytes_from_default", "fallback", "misses",
        "fallback_at", "reason", "replays")]


def slab_escaped(slab) -> np.ndarray:
    """The allocation indices of slab blocks found alive after a pass (each reported once)."""
    n = lib().dsa_slab_escaped(slab, None, 0)
    out = np.empty(max(n, 1), np.int64)
    n = lib().dsa_slab_escaped(slab, out.ctypes.data, len(out))
    return out[:n]


def other_threads() -> tuple[int, int]:
    """``(allocations, bytes)`` that threads without a dsa session (intra-op workers, other Python
    threads) made while some session was open, since the library was loaded; process-wide. They
    are served by the default allocator: a worker thread's allocation cannot be tied to one pass."""
    out = np.zeros(2, np.int64)
    lib().dsa_other_threads(out.ctypes.data)
    return int(out[0]), int(out[1])


def slab_counters(slab) -> Counters:
    """The counters summed over the replay passes of a native slab."""
    c = Counters()
    lib().dsa_slab_counters(slab, ctypes.byref(c))
    return c


ESCAPED = 16  # flag in dsa_replay_end's result: slab blocks outlived the pass
REASON_MASK = 15
REASONS = {0: None, 1: "size mismatch", 2: "a planned block outlived its planned lifetime",
           3: "more allocations than planned"}


@dataclass(frozen=True)
class BuildInfo:
    """Where the native library came from in this process."""

    path: str
    built: bool
    build_seconds: float | None


_lock = threading.Lock()
_lib = None
_info: BuildInfo | None = None
_fast = None  # the _dsa_fast module, or False when its tensor layout check failed


def lib():
    """The loaded library, with the allocator installed into c10 (built first if needed).

    Raises
    ------
    BuildError
        If the library cannot be built, loaded or installed; torch is then left untouched.
    """
    global _lib, _info
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        import torch  # noqa: F401  (loads libc10 / libtorch_cpu before the library needs them)

        path, seconds = library_path()
        try:
            handle = ctypes.CDLL(str(path))
        except OSError as exc:
            raise BuildError(f"cannot load {path}: {exc}; delete it (or set DSA_CACHE_DIR) to rebuild") from None
        for name, (args, res) in _SIGNATURES.items():
            fn = getattr(handle, name)
            fn.argtypes = args
            fn.restype = res
        if handle.dsa_abi_version() != _ABI_VERSION:
            raise BuildError(f"{path} has interface version {handle.dsa_abi_version()}, expected "
                             f"{_ABI_VERSION}; delete it to rebuild")
        if handle.dsa_install() != 0:
            raise BuildError("cannot install the dsa allocator: " + handle.dsa_last_error().decode())
        _info = BuildInfo(str(path), seconds is not None, seconds)
        _lib = handle
        return handle


def _layout_ok(module) -> bool:
    """Whether the tensor layout dsa_fast.cpp reads agrees with ``Tensor._cdata`` (checked without
    dereferencing anything) on tensors of several kinds."""
    import torch

    probes = [torch.empty(0), torch.zeros(3, 4, dtype=torch.float64).t(), torch.ones(2, requires_grad=True),
              torch.arange(5)[1:]]
    return all(module.impl_address(t) == t._cdata for t in probes)


def fast():
    """The ``_dsa_fast`` extension module (the per-call path of :mod:`.attach`), or None when it
    cannot be trusted with this torch build (then every call takes the Python path)."""
    global _fast
    if _fast is None:
        import importlib.machinery
        import importlib.util

        lib()
        with _lock:
            if _fast is None:
                loader = importlib.machinery.ExtensionFileLoader("_dsa_fast", _info.path)
                spec = importlib.util.spec_from_file_location("_dsa_fast", _info.path, loader=loader)
                module = importlib.util.module_from_spec(spec)
                loader.exec_module(module)
                _fast = module if _layout_ok(module) else False
    return _fast or None


def build_info() -> BuildInfo:
    """Build (if needed), load and install the allocator; say where the library came from."""
    lib()
    return _info


def copy_profile(handle) -> dict[str, np.ndarray]:
    """The records of an ended profile session as arrays (allocation order)."""
    n = lib().dsa_profile_end(handle)
    if n < 0:
        raise RuntimeError("profile session was not open on this thread")
    out = {"size": np.empty(n, np.int64), "start": np.empty(n, np.int64), "end": np.empty(n, np.int64),
           "node": np.empty(n, np.int32), "thread": np.empty(n, np.uint64)}
    out["clock"] = int(lib().dsa_profile_clock(handle))
    lib().dsa_profile_copy(handle, *(out[k].ctypes.data for k in ("size", "start", "end", "node", "thread")))
    lib().dsa_profile_free(handle)
    return out


def op_stacks(nodes: np.ndarray) -> list[tuple[str, ...]]:
    """The op stack (outermost first) of each trie node in ``nodes``."""
    handle = lib()
    size = handle.dsa_trie_size()
    parent = np.empty(size, np.int32)
    name = np.empty(size, np.int32)
    handle.dsa_trie_copy(size, parent.ctypes.data, name.ctypes.data)
    names: dict[int, str] = {}
    memo: dict[int, tuple[str, ...]] = {0: ()}

    def stack(node: int) -> tuple[str, ...]:
        path = []
        while node not in memo:
            path.append(node)
            node = int(parent[node])
        result = memo[node]
        for n in reversed(path):
            k = int(name[n])
            if k not in names:
                names[k] = handle.dsa_trie_name(k).decode("utf-8", "replace")
            result = result + (names[k],)
            memo[n] = result
        return result

    return [stack(int(n)) for n in nodes]
