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
never compiled. Argument specs: ``i8``, ``i4``, ``u8``, ``f8``, ``b1`` (scalars); with ``[]`` a C-contiguous
1-D array of that type, ``[,]`` a 2-D one, and a trailing ``r`` marks it read-only (the kernel does
not write it; writable arrays are accepted too).

A kernel whose caller can afford the interpreter on small calls (gergov's skyline and colouring,
buchsbaum's boxing, mincost_flow's objects and layout) is called through :func:`python_path`: while
the kernel is neither compiled in this process nor in numba's on-disk cache, a call of at most
:data:`PURE_MAX_ROWS` rows runs the kernel's own code as Python (or the numpy stand-in it declares
with ``pure=``), with the same result, instead of compiling it (seconds, mostly for a first call
that needs nothing else of it). The Python runs of a kernel stop once they have cost
:data:`PURE_BUDGET_S` seconds in the process (it is then compiled), and their time is counted by
:func:`jit_seconds` as the cold-start cost it is. ``dsa.warmup`` compiles every kernel regardless.

Callers that have a numpy stand-in for a kernel (the greedy placement, the address-overlap check)
choose between them by :func:`use_numpy`: an ``engine=`` option (``"auto"``, ``"numpy"``,
``"kernel"``), and for ``"auto"`` a rule on the problem's size (overridden for the whole process by
the environment variable ``DSA_ENGINE``), never by what the process ran before.
"""
from __future__ import annotations

import os
import time

__all__ = ["jit_seconds", "numba_loaded", "use_numpy", "kernels_loaded", "load_numba", "ENGINES",
           "compiled", "python_version", "python_path", "python_seconds"]

_state = {"seconds": 0.0, "numba": None, "pure": 0.0}

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
    """Seconds this process has spent importing numba and compiling or cache-loading kernels, and
    running kernels as Python while they were not compiled (:func:`python_path`)."""
    return _state["seconds"]


_SCALARS = {"i8": "int64", "i4": "int32", "u8": "uint64", "f8": "float64", "b1": "boolean"}


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

        def _dsa_load(self) -> bool:
            """Load the declared signatures from numba's cache, compiling nothing; True when the
            kernel is now ready to run compiled (it was, or every signature was in the cache)."""
            if self._dsa_sigs is None:
                return True
            with global_compiler_lock:
                sigs = self._dsa_sigs
                if sigs is None:
                    return True
                for sig in sigs:
                    if tuple(sig) in self.overloads:
                        continue
                    cres = self._cache.load_overload(sig, self.targetctx)
                    if cres is None:
                        return False
                    self._cache_hits[sig] += 1  # as Dispatcher.compile does on a cache hit
                    if not cres.objectmode:
                        self.targetctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
                    self.add_overload(cres)
                self._dsa_sigs = None
                self._dsa_declared = tuple(sigs)
                return True

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


def _kernel(*arg_specs, cache: bool = True, pure=None, **options):
    """Decorator: a numba kernel compiled for the declared argument types (see the module docstring).

    ``pure``, optional: a Python function equal to the kernel (same results, usually numpy), that
    :func:`pure` runs in place of the kernel's own Python code.
    """
    global _kernel_class
    numba = load_numba()
    if _kernel_class is None:
        try:
            _kernel_class = _make_kernel_class()
        except (ImportError, AttributeError):  # numba's internals moved: compile per call, as njit does
            _kernel_class = False
    if _kernel_class is False:
        plain = numba.njit(cache=cache, **options)

        def decorate_plain(fn):
            disp = plain(fn)
            _PURE_OF[disp] = pure
            return disp

        return decorate_plain
    sig = tuple(_arg_type(s) for s in arg_specs)

    def decorate(fn):
        disp = _kernel_class(py_func=fn, locals={}, targetoptions={"nopython": True, **options})
        if cache:
            disp.enable_caching()
        disp._dsa_sigs = [sig]
        _KERNELS.append(disp)
        _PURE_OF[disp] = pure
        return disp

    return decorate


_KERNELS: list = []


def kernels_loaded() -> dict:
    """``{"module.name": number of compiled signatures}`` of the declared kernels defined so far."""
    return {f"{k.py_func.__module__}.{k.py_func.__name__}": len(k.signatures) for k in _KERNELS}


# ---------------------------------------------------------------------------------------------
# the Python path of a kernel that is not compiled yet (see python_path)

# a declared kernel that is neither compiled in this process nor in numba's cache runs as Python code
# on calls of at most this many rows ...
PURE_MAX_ROWS = 1000
# ... until its Python runs have taken this long in this process (about what compiling one of the
# larger kernels costs); then it is compiled, as a plain call would have done at once: a rent-or-buy
# rule, so that a process never spends more than this on top of the compile time
PURE_BUDGET_S = 2.0

_PURE_OF: dict = {}    # kernel -> its pure= stand-in, or None (its own Python code)
_PURE_FN: dict = {}    # kernel -> the Python function run in its place
_PURE_SPENT: dict = {}  # kernel -> seconds its Python runs took in this process
_NOT_CACHED: set = set()  # kernels found neither compiled nor in numba's cache (looked up once)


def compiled(kern) -> bool:
    """Whether ``kern`` runs compiled without compiling anything: compiled in this process, or in
    numba's on-disk cache (then loaded now, in milliseconds). The cache is looked up once per process."""
    load = getattr(kern, "_dsa_load", None)
    if load is None:  # a plain numba dispatcher
        return bool(kern.overloads)
    if kern._dsa_sigs is None:
        return True
    if kern in _NOT_CACHED:
        return False
    if load():
        return True
    _NOT_CACHED.add(kern)
    return False


def python_version(kern):
    """The Python function that computes what ``kern`` computes: its ``pure=`` stand-in, else the
    kernel's own code, in which the kernels it calls are themselves run compiled when they are
    (see :func:`compiled`), else as Python."""
    fn = _PURE_FN.get(kern)
    if fn is not None:
        return fn
    fn = _PURE_OF.get(kern)
    if fn is None:
        import types

        from numba.core.dispatcher import Dispatcher

        py = kern.py_func
        names = dict(py.__globals__)
        for name, value in py.__globals__.items():
            if isinstance(value, Dispatcher):
                names[name] = _callee(value)
        fn = types.FunctionType(py.__code__, names, py.__name__, py.__defaults__, py.__closure__)
    _PURE_FN[kern] = fn
    return fn


def _callee(kern):
    """What the Python version of a kernel calls in place of the kernel ``kern`` it calls."""
    def call(*args):
        return (kern if compiled(kern) else python_version(kern))(*args)

    call.__name__ = kern.py_func.__name__
    return call


def python_path(kern, rows: int):
    """What to call for the kernel ``kern`` on a call of ``rows`` rows: the kernel, or its Python
    version while the kernel is not compiled.

    A process whose numba cache is empty would compile the kernel first (seconds); for a small
    call its Python version (:func:`python_version`: the same code run by the interpreter, or a
    numpy stand-in, same results) costs less. It is chosen when the kernel is neither compiled nor
    in numba's cache (:func:`compiled`), ``rows`` is at most :data:`PURE_MAX_ROWS`, the kernel's
    Python runs in this process have taken less than :data:`PURE_BUDGET_S` (then the kernel is
    compiled, and used from then on), and :data:`FORCE` is not ``"kernel"`` (``dsa.warmup`` sets
    it to compile). Which path runs changes how long a call takes, never its result. The time of
    the Python runs is counted by :func:`jit_seconds` (as the compile it stands in for: it does
    not count against a time limit) and by :func:`python_seconds`.
    """
    if (FORCE == "kernel" or rows > PURE_MAX_ROWS or compiled(kern)
            or _PURE_SPENT.get(kern, 0.0) >= PURE_BUDGET_S):
        return kern
    fn = python_version(kern)

    def timed(*args):
        t0 = time.perf_counter()
        jit0 = _state["seconds"]
        try:
            return fn(*args)
        finally:
            # (less any cache load of a kernel it calls, which the compile timer counted already)
            dt = max(0.0, time.perf_counter() - t0 - (_state["seconds"] - jit0))
            _PURE_SPENT[kern] = _PURE_SPENT.get(kern, 0.0) + dt
            _state["seconds"] += dt
            _state["pure"] += dt

    return timed


def python_seconds() -> float:
    """Seconds this process has spent running kernels as Python while they were not compiled
    (:func:`python_path`); included in :func:`jit_seconds`."""
    return _state["pure"]


def __getattr__(name: str):
    if name == "njit":
        return load_numba().njit
    if name == "kernel":
        return _kernel
    raise AttributeError(f"module 'dsa._kernels' has no attribute {name!r}")
