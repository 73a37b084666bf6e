"""Private numba kernels: functions on arrays and scalars only, compiled on first use (``cache=True``).

Nothing here is imported by ``import dsa``; modules import a kernel module when they first need it.
Kernel modules take ``njit`` from this package (``from dsa._kernels import njit``) rather than from
numba: the first access imports numba, timing it, and registers a listener on numba's compiler lock,
so that :func:`jit_seconds` can tell how much of a call went to importing numba, compiling kernels or
loading them from numba's cache. :func:`dsa.solve` reports it as ``stats["jit_s"]``.

Kernels declare the argument types they are compiled for with ``kernel`` (``from dsa._kernels import
kernel``) rather than ``njit``: ``@kernel("i8[]r", "i8[]", "i8", "b1", nogil=True)``. A plain numba
dispatcher compiles one specialisation per combination of argument types it meets (a read-only array
and a writable one, ``int32`` and ``int64``, the literal ``0`` and an ``int64``: each costs a full
compile, 0.1-2 s), while a declared kernel compiles (or loads from numba's cache) its one declared
signature on first use, and calls with convertible types (writable where read-only is declared,
literals, narrower integers) use it. A call whose types do not convert safely still works: it gets a
specialisation of its own, as with ``njit``. Nothing is compiled at import: a kernel no call uses is
never compiled. Argument specs: ``i8``, ``i4``, ``f8``, ``b1`` (scalars); with ``[]`` a C-contiguous
1-D array of that type, ``[,]`` a 2-D one, and a trailing ``r`` marks it read-only (the kernel does
not write it; writable arrays are accepted too).

Callers that have a numpy stand-in for a kernel (the greedy placement, the address-overlap check)
choose between them by :func:`use_numpy`: an ``engine=`` option (``"auto"``, ``"numpy"``,
``"kernel"``), and for ``"auto"`` a rule on the problem's size (overridden for the whole process by
the environment variable ``DSA_ENGINE``), never by what the process ran before.
"""
from __future__ import annotations

import os
import time

__all__ = ["jit_seconds", "numba_loaded", "use_numpy", "kernels_loaded", "load_numba", "ENGINES"]

_state = {"seconds": 0.0, "numba": None}

# engine= values of the callers that have a numpy stand-in for their kernel (see use_numpy)
ENGINES = ("auto", "numpy", "kernel")
# the override of engine="auto" for the whole process: "numpy" (or "sweep", dsa.address_overlap's
# name for its stand-in) or "kernel"; None: the size rule. Set from the environment variable
# DSA_ENGINE at import; tests and dsa.warmup set it to exercise one path.
FORCE: str | None = os.environ.get("DSA_ENGINE") or None


def load_numba():
    """Import numba once, timing it (and every compile or cache load after it) in :func:`jit_seconds`;
    return the module."""
    numba = _state["numba"]
    if numba is None:
        t0 = time.perf_counter()
        import numba
        from numba.core import event

        class _CompileTimer(event.Listener):
            """Adds the time spent holding numba's compiler lock (compiling or loading from cache)."""

            depth = 0
            t0 = 0.0

            def on_start(self, ev):
                if self.depth == 0:
                    self.t0 = time.perf_counter()
                self.depth += 1

            def on_end(self, ev):
                self.depth -= 1
                if self.depth == 0:
                    _state["seconds"] += time.perf_counter() - self.t0

        event.register("numba:compiler_lock", _CompileTimer())
        _ensure_cache_dir(numba)
        _state["numba"] = numba
        _state["seconds"] += time.perf_counter() - t0
    return numba


def numba_loaded() -> bool:
    """Whether this process has imported numba through :mod:`dsa._kernels` (a kernel was needed)."""
    return _state["numba"] is not None


def use_numpy(n: int, limit: int, engine: str = "auto") -> bool:
    """Whether a caller runs its numpy stand-in rather than its kernel: an explicit rule, never
    the history of the process.

    ``engine="numpy"`` or ``"kernel"`` decides. ``"auto"`` follows :data:`FORCE` when it is set
    (``"numpy"`` and ``"sweep"`` mean the stand-in), else the size rule: the stand-in below
    ``limit`` rows (``n < limit``), where it costs about as much as calling the kernel and a plan
    then needs no numba at all (no import, no kernel load: about 0.5 s in a fresh process), the
    kernel from ``limit`` on. Both paths give the same answer (tested).

    Raises
    ------
    ValueError
        If ``engine`` (or :data:`FORCE`) is not a known engine.
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; valid engines: {', '.join(ENGINES)}")
    if engine == "auto" and FORCE is not None:
        if FORCE not in ("numpy", "sweep", "kernel"):
            raise ValueError(f"unknown engine {FORCE!r} in DSA_ENGINE; valid engines: numpy, kernel")
        engine = "kernel" if FORCE == "kernel" else "numpy"
    if engine == "auto":
        return n < limit
    return engine == "numpy"


def _cache_probe():
    """A function in the kernels' folder: numba finds a cache place for it as for the kernels."""


def _ensure_cache_dir(numba) -> None:
    """Give numba a writable cache directory when it would find none (read-only install, no home).

    numba caches compiled kernels beside their source or in the user's cache directory; when
    neither is writable, ``cache=True`` fails at the first kernel. Then the kernels are cached in a
    fresh temporary directory for this process, with a warning.
    """
    from numba.core.caching import FunctionCache

    try:
        FunctionCache(_cache_probe)
    except RuntimeError:
        import atexit
        import shutil
        import tempfile
        import warnings

        numba.config.CACHE_DIR = tempfile.mkdtemp(prefix="dsa-numba-cache-")
        atexit.register(shutil.rmtree, numba.config.CACHE_DIR, ignore_errors=True)
        warnings.warn("numba cannot write its cache beside dsa or in the user cache directory; compiled "
                      f"kernels are cached in {numba.config.CACHE_DIR} for this process only (set "
                      "NUMBA_CACHE_DIR to a writable directory to keep them)", RuntimeWarning, stacklevel=3)


def jit_seconds() -> float:
    """Seconds this process has spent importing numba and compiling or cache-loading kernels."""
    return _state["seconds"]


_SCALARS = {"i8": "int64", "i4": "int32", "f8": "float64", "b1": "boolean"}


def _arg_type(spec: str):
    """The numba type of one argument spec (see the module docstring): ``"i8"``, ``"i4[]r"``..."""
    from numba.core import types

    text = spec.replace(" ", "")
    readonly = "[" in text and text.endswith("r")
    if readonly:
        text = text[:-1]
    base, _, dims = text.partition("[")
    if base not in _SCALARS or (dims and not dims.endswith("]")):
        raise ValueError(f"bad kernel argument spec {spec!r}")
    dtype = getattr(types, _SCALARS[base])
    if not dims:
        return dtype
    return types.Array(dtype, dims.count(",") + 1, "C", readonly=readonly)


_kernel_class = None


def _make_kernel_class():
    """numba's CPU dispatcher, compiling its declared signature first (see the module docstring)."""
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.registry import CPUDispatcher
    from numba.core.typeconv import Conversion

    class Kernel(CPUDispatcher):
        _dsa_sigs = None      # declared argument types, until compiled
        _dsa_declared = ()    # the declared signatures' argument types, once compiled

        def _dsa_declare(self):
            if self._dsa_sigs is None:
                return
            with global_compiler_lock:
                sigs, self._dsa_sigs = self._dsa_sigs, None
                if sigs is not None:
                    for sig in sigs:
                        self.compile(sig)
                    self._dsa_declared = tuple(sigs)

        def _dsa_match(self, tys):
            """The declared signature that ``tys`` convert to safely, or None."""
            ctx = self.typingctx
            for sig in self._dsa_declared:
                if len(sig) == len(tys) and all(
                        (conv := ctx.can_convert(a, p)) is not None and conv <= Conversion.safe
                        for a, p in zip(tys, sig)):
                    return sig
            return None

        def _compile_for_args(self, *args, **kws):
            # called by numba's C dispatcher when no compiled signature matches exactly
            self._dsa_declare()
            if not kws:
                sig = self._dsa_match([self.typeof_pyval(a) for a in args])
                if sig is not None:
                    register = getattr(self, "_search_new_conversions", None)  # (numba-internal)
                    if register is not None:
                        register(*args)  # later calls convert in C, without coming here
                    return self.overloads[sig].entry_point
            return super()._compile_for_args(*args, **kws)

        def get_call_template(self, args, kws):
            # called when another kernel that calls this one is compiled
            self._dsa_declare()
            if not kws and self._dsa_match(args) is not None:
                self._can_compile = False  # resolve against the declared signature by conversion
                try:
                    return super().get_call_template(args, kws)
                finally:
                    self._can_compile = True
            return super().get_call_template(args, kws)

    return Kernel


def _kernel(*arg_specs, cache: bool = True, **options):
    """Decorator: a numba kernel compiled for the declared argument types (see the module docstring)."""
    global _kernel_class
    numba = load_numba()
    if _kernel_class is None:
        try:
            _kernel_class = _make_kernel_class()
        except (ImportError, AttributeError):  # numba's internals moved: compile per call, as njit does
            _kernel_class = False
    if _kernel_class is False:
        return numba.njit(cache=cache, **options)
    sig = tuple(_arg_type(s) for s in arg_specs)

    def decorate(fn):
        disp = _kernel_class(py_func=fn, locals={}, targetoptions={"nopython": True, **options})
        if cache:
            disp.enable_caching()
        disp._dsa_sigs = [sig]
        _KERNELS.append(disp)
        return disp

    return decorate


_KERNELS: list = []


def kernels_loaded() -> dict:
    """``{"module.name": number of compiled signatures}`` of the declared kernels defined so far."""
    return {f"{k.py_func.__module__}.{k.py_func.__name__}": len(k.signatures) for k in _KERNELS}


def __getattr__(name: str):
    if name == "njit":
        return load_numba().njit
    if name == "kernel":
        return _kernel
    raise AttributeError(f"module 'dsa._kernels' has no attribute {name!r}")
