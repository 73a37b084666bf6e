"""The measuring side of ``benchmarks/latency_study.py``: one configuration per process.

A configuration is ``(model, batch, size, serving threads, intra-op threads, allocator)``. The
allocator is chosen by the environment the process starts with (``LD_PRELOAD``, ``MALLOC_CONF``),
so every allocator has its own *zygote*: a process started with that environment which imports
torch and dsa, installs dsa's allocator, plans one tiny model (``warm_planner``) with one
intra-op thread, and then forks one child per measurement (``--serve``; requests on stdin, one
JSON line each). No forward pass of a study model and no parallel region ever runs in the zygote,
so every child starts from the same clean state and creates its own OpenMP threads. With
``--phase`` the same measurement runs in a fresh interpreter instead (the study's ``--no-fork``).

Phases (``run_phase``):

- ``pair``: eager and attached timed in interleaved paired blocks, plus the bit-identity check
  and the attached report;
- ``rss-eager`` / ``rss-attached``: the same warm-up and a few calls of one side only, then the
  process's peak RSS (``VmHWM``) and its RSS at the start of the phase;
- ``overhead``: the per-call overhead of ``attach`` on a one-op model (always a fresh interpreter:
  it also times the model before dsa's allocator is installed).

Nothing here imports torch at module level (pytest's doctest collection imports this file).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import threading
import time
import traceback

WARM_PLAN_ELEMENTS = 16  # the zygote's tiny planning warm-up


# ------------------------------------------------------------------ process facts
def proc_status_kb(*keys: str) -> dict[str, int]:
    """Fields of ``/proc/self/status`` in kB (``VmHWM``, ``VmRSS``...); missing ones are absent."""
    out = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name in keys:
                    out[name] = int(rest.split()[0])
    except OSError:
        pass
    return out


def loaded_allocator() -> str | None:
    """Path of a preloaded malloc replacement mapped into this process (jemalloc, tcmalloc), or None."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                base = os.path.basename(path)
                if base.startswith(("libjemalloc", "libtcmalloc")):
                    return path
    except OSError:
        pass
    return None


def warm_planner() -> None:
    """Plan and replay a tiny model: maps the code a plan made in place and a replay run.

    Run once in the zygote, and again in each RSS child before its starting RSS is read: a forked
    child inherits the parent's anonymous pages but maps its file-backed code pages again as it
    touches them, which would otherwise count against whichever side plans. The tiny model is
    planned in place (a greedy member reaches its bound: ``dsa.strategies.best.portfolio_head``), so
    no planner process starts here; a model whose trace needs one starts its own in the child (a
    forked child does not use its parent's, see ``dsa._planner_process``), and the pair phase's
    first call pays for it.
    """
    import torch
    from dsa.adapters.torch import attach

    class Probe(torch.nn.Module):
        def forward(self, t):
            return (t * 2 + 1) * 3  # two 64-byte intermediates: LOAD is reachable, the plan is quick

    probe = attach(Probe())
    with torch.inference_mode():
        x = torch.ones(WARM_PLAN_ELEMENTS)
        probe(x)
        probe(x)  # one replay
    probe.detach()
    del probe
    gc.collect()


def prepare_process() -> dict:
    """What the zygote (or a fresh worker) does once before any measurement."""
    import torch

    torch.set_num_threads(1)  # no parallel region before the fork: children create their own threads
    from dsa.adapters.torch import attach, build_info
    from dsa.adapters.torch import examples  # noqa: F401  (imported once, before the fork)

    build_info()
    warm_planner()
    return {"torch": torch.__version__, "allocator_path": loaded_allocator(),
            "malloc_conf": os.environ.get("MALLOC_CONF"), "pid": os.getpid(),
            **{k.lower() + "_kb": v for k, v in proc_status_kb("VmRSS", "VmHWM").items()}}


# ------------------------------------------------------------------ serving threads
class Pool:
    """``n`` serving threads, each inside ``torch.inference_mode()``, running one task at a time.

    ``run(task)`` starts ``task(i)`` on every thread at once (a barrier) and returns their results.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self._start = threading.Barrier(n + 1)
        self._done = threading.Barrier(n + 1)
        self._task = None
        self._results: list = [None] * n
        self._threads = [threading.Thread(target=self._loop, args=(i,), daemon=True) for i in range(n)]
        for t in self._threads:
            t.start()

    def _loop(self, i: int) -> None:
        import torch

        with torch.inference_mode():
            while True:
                self._start.wait()
                task = self._task
                if task is None:
                    return
                try:
                    self._results[i] = task(i)
                except BaseException as exc:  # noqa: BLE001 (re-raised on the main thread)
                    self._results[i] = exc
                self._done.wait()

    def run(self, task) -> list:
        self._task = task
        self._start.wait()
        self._done.wait()
        results = list(self._results)
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return results

    def close(self) -> None:
        self._task = None
        self._start.wait()
        for t in self._threads:
            t.join()


def _calls_ns(fn, args, k: int) -> int:
    t0 = time.perf_counter_ns()
    for _ in range(k):
        fn(*args)
    return time.perf_counter_ns() - t0


def _block_ns(pool: Pool, fn, args, k: int) -> float:
    """Mean per-call latency (ns) over the serving threads of one block of ``k`` calls per thread."""
    return statistics.fmean(pool.run(lambda i: _calls_ns(fn, args, k))) / k


def _interleaved(model, attached_model, rounds: int, block) -> tuple[list, list]:
    """``rounds`` pairs of timed blocks, eager and attached, the order swapped every round (the
    garbage collector off); ``block(fn)`` times one block. Returns (eager, attached)."""
    eager, attached = [], []
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            sides = ((eager, model), (attached, attached_model))
            for sink, fn in (sides if r % 2 == 0 else sides[::-1]):
                sink.append(block(fn))
    finally:
        gc.enable()
    return eager, attached


def _same(a, b) -> bool:
    import torch
    from dsa.adapters.torch.examples import flatten_outputs

    fa, fb = flatten_outputs(a), flatten_outputs(b)
    return len(fa) == len(fb) and all(x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)
                                      for x, y in zip(fa, fb))


def _quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _build(cfg: dict):
    import torch
    from dsa.adapters.torch.examples import sized

    torch.set_num_threads(int(cfg["intra"]))
    torch.manual_seed(0)
    model, make_input = sized(cfg["model"], cfg.get("size"))
    return model, make_input(int(cfg["batch"]))


# ------------------------------------------------------------------ phases
def phase_pair(cfg: dict) -> dict:
    """Eager vs attached in interleaved paired blocks on ``serving`` threads."""
    import torch
    from dsa.adapters.torch import attach

    model, x = _build(cfg)
    pool = Pool(int(cfg["serving"]))
    try:
        m = attach(model)
        with torch.inference_mode():
            ref = model(*x)
            t0 = time.perf_counter_ns()
            m(*x)  # the first call profiles and plans (on the main thread, before any other thread)
            first_call_ns = time.perf_counter_ns() - t0
            pool.run(lambda i: [f(*x) for f in (model, m, model, m)])  # each thread: its slab, warm caches
            warm = m.report()
            # calls per block: a block of eager calls lasts about block_ms
            one = statistics.median(_block_ns(pool, model, x, 1) for _ in range(3))
            block_ns = float(cfg.get("block_ms", 30.0)) * 1e6
            k = max(1, min(100_000, round(block_ns / max(one, 1.0))))
            k = max(1, min(100_000, round(block_ns / max(_block_ns(pool, model, x, k), 1.0))))
            per_side_s = max(k * one, block_ns) / 1e9
            rounds = round(float(cfg.get("budget_s", 2.0)) / (2 * per_side_s))
            rounds = max(int(cfg.get("min_rounds", 7)), min(int(cfg.get("max_rounds", 30)), rounds))
            eager, attached = _interleaved(model, m, rounds, lambda fn: _block_ns(pool, fn, x, k))
            outs = pool.run(lambda i: (model(*x), m(*x)))
        identical = all(_same(ref, att) for _, att in outs)
        deterministic = all(_same(ref, eag) for eag, _ in outs)
        rep = m.report()
        m.detach()
    finally:
        pool.close()
    ratios = [a / e for a, e in zip(attached, eager)]
    served = rep["bytes_from_slab"] + rep["bytes_from_default"]
    plans = rep.get("plans") or [{}]
    return {
        "calls_per_block": k, "rounds": rounds,
        "eager_us": statistics.median(eager) / 1e3, "attached_us": statistics.median(attached) / 1e3,
        "ratio": statistics.median(ratios), "ratio_q1": _quantile(ratios, 0.25),
        "ratio_q3": _quantile(ratios, 0.75),
        "eager_us_all": [round(v / 1e3, 3) for v in eager], "attached_us_all": [round(v / 1e3, 3) for v in attached],
        "first_call_ms": first_call_ns / 1e6, "identical": identical, "eager_deterministic": deterministic,
        "slab_bytes": rep["slab_bytes"], "lower_bound_bytes": rep["lower_bound_bytes"],
        "slab_over_load": rep["slab_bytes"] / rep["lower_bound_bytes"] if rep["lower_bound_bytes"] else None,
        "bytes_from_slab": rep["bytes_from_slab"], "bytes_from_default": rep["bytes_from_default"],
        "from_slab": rep["bytes_from_slab"] / served if served else None,
        "allocations": rep.get("allocations"), "allocations_from_slab": rep.get("allocations_from_slab"),
        "planned_allocations": rep["planned_allocations"], "plan_status": plans[0].get("status"),
        "fallbacks": rep["fallbacks"], "fallbacks_after_warmup": rep["fallbacks"] - warm["fallbacks"],
        "replays": rep["replays"], "profiles": rep["profiles"], "eager_calls": rep["eager_calls"],
        "escaped_blocks": rep.get("escaped_blocks"), "slab_threads": plans[0].get("threads"),
    }


def phase_rss(cfg: dict, attached: bool) -> dict:
    """One side only: warm-up and a few calls per serving thread; the peak RSS of the process."""
    import torch
    from dsa.adapters.torch import attach

    warm_planner()
    start = proc_status_kb("VmRSS", "VmHWM")
    model, x = _build(cfg)
    calls = int(cfg.get("rss_calls", 6))
    pool = Pool(int(cfg["serving"]))
    try:
        fn = attach(model) if attached else model
        with torch.inference_mode():
            fn(*x)  # attached: profile + plan on the main thread, as in the pair phase
            pool.run(lambda i: [fn(*x) for _ in range(calls)])
        end = proc_status_kb("VmRSS", "VmHWM")
        fallbacks = fn.report()["fallbacks"] if attached else None
        # where the plan was made, and the planner process's peak RSS (not part of this process's)
        with torch.inference_mode():  # the signature of the calls above (grad mode is part of it)
            solution = fn.plan(*x)[1] if attached else None
    finally:
        pool.close()
    return {"rss_start_kb": start.get("VmRSS"), "hwm_start_kb": start.get("VmHWM"),
            "rss_end_kb": end.get("VmRSS"), "peak_kb": end.get("VmHWM"),
            "delta_kb": (end["VmHWM"] - start["VmRSS"]) if "VmHWM" in end and "VmRSS" in start else None,
            "calls_per_thread": calls, "fallbacks": fallbacks,
            "planned_in": solution.stats.get("planned_in", "inline") if solution is not None else None,
            "planner_hwm_kb": solution.stats.get("planner_process_hwm_kb") if solution is not None else None}


def phase_overhead(cfg: dict) -> dict:
    """Per-call cost of ``attach`` on a one-op model (``x + 1`` on a small tensor), in a fresh process.

    First the plain model is timed before dsa's allocator is installed (``pure``), then dsa is
    installed and the plain model (``eager``, the allocator in passthrough) and the attached one are
    timed in interleaved blocks; the figure is the median over rounds of (attached - eager) per call.
    """
    import torch

    torch.set_num_threads(1)

    class AddOne(torch.nn.Module):
        def forward(self, t):
            return t + 1

    model = AddOne().eval()
    x = torch.ones(int(cfg.get("elements", 16)))
    block_ns = float(cfg.get("block_ms", 20.0)) * 1e6
    rounds = int(cfg.get("rounds", 31))
    with torch.inference_mode():
        for _ in range(1000):
            model(x)
        one = _calls_ns(model, (x,), 2000) / 2000
        k = max(100, round(block_ns / one))
        pure = [_calls_ns(model, (x,), k) / k for _ in range(max(5, rounds // 3))]
        from dsa.adapters.torch import attach, build_info

        build_info()
        m = attach(model)
        for _ in range(5):
            m(x)
        for _ in range(1000):
            model(x)
            m(x)
        eager, attached = _interleaved(model, m, rounds, lambda fn: _calls_ns(fn, (x,), k) / k)
        identical = _same(model(x), m(x))
    rep = m.report()
    diffs = [a - e for a, e in zip(attached, eager)]
    return {"calls_per_block": k, "rounds": rounds, "elements": x.numel(),
            "pure_eager_us": statistics.median(pure) / 1e3, "eager_us": statistics.median(eager) / 1e3,
            "attached_us": statistics.median(attached) / 1e3,
            "overhead_us": statistics.median(diffs) / 1e3,
            "overhead_us_q1": _quantile(diffs, 0.25) / 1e3, "overhead_us_q3": _quantile(diffs, 0.75) / 1e3,
            "passthrough_us": (statistics.median(eager) - statistics.median(pure)) / 1e3,
            "identical": identical, "replays": rep["replays"], "fallbacks": rep["fallbacks"]}


PHASES = {"pair": phase_pair, "rss-eager": lambda c: phase_rss(c, False),
          "rss-attached": lambda c: phase_rss(c, True), "overhead": phase_overhead}


def run_phase(phase: str, cfg: dict) -> dict:
    t0 = time.perf_counter()
    result = PHASES[phase](cfg)
    result["wall_s"] = round(time.perf_counter() - t0, 3)
    result["allocator_path"] = loaded_allocator()
    result["pid"] = os.getpid()
    return result


def _write(path: str, obj: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def _child(req: dict) -> None:
    """In the forked child: run the phase, write the result, exit without running atexit handlers."""
    code = 1
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(2, 1)  # stray prints must not reach the zygote's protocol stream
        _write(req["out"], {"ok": True, **run_phase(req["phase"], req["config"])})
        code = 0
    except BaseException:  # noqa: BLE001
        try:
            _write(req["out"], {"ok": False, "error": traceback.format_exc(limit=8)})
        except BaseException:  # noqa: BLE001
            pass
    finally:
        try:
            sys.stderr.flush()
        finally:
            os._exit(code)


def _wait(pid: int, timeout: float) -> str:
    import signal

    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return "exited" if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else f"status {status}"
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)  # our own child
            os.waitpid(pid, 0)
            return "timeout"
        time.sleep(0.02)


def serve() -> int:
    """The zygote: prepare once, then fork one child per request line on stdin."""
    info = prepare_process()
    out = sys.stdout
    out.write(json.dumps({"ready": True, **info}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        gc.collect()
        pid = os.fork()
        if pid == 0:
            _child(req)
        status = _wait(pid, float(req.get("timeout", 600)))
        out.write(json.dumps({"status": status}) + "\n")
        out.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="one measurement of the latency study (see latency_study.py)")
    ap.add_argument("--serve", action="store_true", help="be a zygote: fork one child per request on stdin")
    ap.add_argument("--phase", choices=sorted(PHASES))
    ap.add_argument("--config", help="the configuration as JSON")
    ap.add_argument("--out", help="write the result JSON here")
    args = ap.parse_args(argv)
    if args.serve:
        return serve()
    if not (args.phase and args.config and args.out):
        ap.error("--phase, --config and --out are needed without --serve")
    try:
        if args.phase != "overhead":
            prepare_process()  # the same start as a zygote's child
        _write(args.out, {"ok": True, **run_phase(args.phase, json.loads(args.config))})
    except BaseException:  # noqa: BLE001
        _write(args.out, {"ok": False, "error": traceback.format_exc(limit=8)})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
