"""The latency study of the PyTorch adapter (issue 10, part 3), after the MemoMalloc thesis's chapter 4.

For every configuration (model, batch, input size, serving threads, intra-op threads, allocator)
it measures eager forwards against ``attach(model)`` forwards, in a process of its own whose
malloc is chosen by the environment:

- ``glibc``: the system allocator (no preload);
- ``jemalloc``: ``LD_PRELOAD=libjemalloc.so.2`` (Debian ``libjemalloc2``) with its defaults;
- ``jemalloc-thesis``: the same with ``MALLOC_CONF=oversize_threshold:1048576,narenas:<4 x CPUs>``
  (the thesis's setting: a 1 MiB oversize threshold, four arenas per core);
- ``tcmalloc``: ``LD_PRELOAD=libtcmalloc.so.4`` (Debian ``libgoogle-perftools4``).

An allocator whose library is missing (or does not load) is skipped with a message, not an error.

Per configuration (see ``_latency_worker.py``): a *pair* process times eager and attached in
interleaved paired blocks on ``serving`` threads (each thread runs its own forward loop on the same
model and gets its own slab), checks that every thread's attached output is bit-identical to eager
(``torch.equal``) and records the attached report (slab/LOAD, share of bytes from the slab); two
short processes run one side only (eager-only, attached-only) and read their peak RSS (``VmHWM``).
By default the processes are forked from one prepared *zygote* per allocator (started with that
allocator's environment; torch and dsa loaded, one tiny model planned, no forward run), which
saves the interpreter's start per measurement; ``--no-fork`` starts a fresh interpreter instead.
A per-call overhead micro-benchmark (``x + 1`` on 16 floats, eager vs attached) runs once per
allocator in a fresh interpreter.

Models: ``resnet``, ``mobilenet``, ``transformer``, ``gru``, ``inplace_views``, ``multi_output``
(``examples.ZOO``; the safety-test models ``stash_on_self`` and ``raises`` are left out), ``unet``
(``UNetLike``) and ``mobilenet_v2`` (``MobileNetV2Like``, half width). The *size* axis is the image
side for image models, the sequence length for ``transformer`` and ``gru``, and is skipped for
``inplace_views`` (fixed 16 x 16 input; reported as ``native``).

Presets (every axis can be overridden by its flag)::

    quick    mobilenet, unet; batch 8; sizes 64, 128; serving 1, 2; intra 1; 4 allocators
             (about 2 minutes: development and smoke test)
    default  every model; batch 1, 8; sizes 64, 224; serving 1, 2; intra 1, plus intra 2 for the
             heavy models (unet, mobilenet_v2); 4 allocators; every configuration run twice, a pass
             over the grid apart, medians reported (about 31 minutes on 2 idle cores)
    full     every model; batch 1, 4, 8; sizes 64, 128, 224; serving 1, 2, 4; intra 1, 2;
             4 allocators (hours)

Output: ``docs/results/latency.json`` (written after every configuration, so an interrupted run
keeps what it measured), ``latency.md`` and ``latency_*.png``; ``--report IN.json`` regenerates the
Markdown and the plots from a JSON file alone. Usage::

    .venv/bin/python benchmarks/latency_study.py --preset quick
    .venv/bin/python benchmarks/latency_study.py --preset default          # or: make bench-latency
    .venv/bin/python benchmarks/latency_study.py --models unet --sizes 64,128,224 --serving 1,2,4
    .venv/bin/python benchmarks/latency_study.py --report docs/results/latency.json
"""
from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORKER = HERE / "_latency_worker.py"
sys.path.insert(0, str(HERE))
import _latency_report as report  # noqa: E402

ALL_MODELS = ("resnet", "mobilenet", "transformer", "gru", "inplace_views", "multi_output", "unet", "mobilenet_v2")
HEAVY_MODELS = ("unet", "mobilenet_v2")  # the default preset runs intra-op 1 and 2 for these
FIXED_SIZE = {"inplace_views": 16}  # models without a size axis: their native input side
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib",
            "/lib/x86_64-linux-gnu", "/lib64", "/lib")

# name -> (library file to preload or None, MALLOC_CONF template or None, Debian package)
ALLOCATORS = {
    "glibc": (None, None, None),
    "jemalloc": ("libjemalloc.so.2", None, "libjemalloc2"),
    "jemalloc-thesis": ("libjemalloc.so.2", "oversize_threshold:1048576,narenas:{arenas}", "libjemalloc2"),
    "tcmalloc": ("libtcmalloc.so.4", None, "libgoogle-perftools4"),
}

PRESETS = {
    "quick": {"models": ("mobilenet", "unet"), "batches": (8,), "sizes": (64, 128), "serving": (1, 2),
              "intra": (1,), "heavy_intra": None, "budget_s": 0.4, "min_rounds": 5, "max_rounds": 12,
              "block_ms": 20.0, "rss_calls": 3, "overhead_rounds": 15, "repeats": 1},
    "default": {"models": ALL_MODELS, "batches": (1, 8), "sizes": (64, 224), "serving": (1, 2), "intra": (1,),
                "heavy_intra": (1, 2), "budget_s": 1.2, "min_rounds": 7, "max_rounds": 25, "block_ms": 25.0,
                "rss_calls": 4, "overhead_rounds": 31, "repeats": 2},
    "full": {"models": ALL_MODELS, "batches": (1, 4, 8), "sizes": (64, 128, 224), "serving": (1, 2, 4),
             "intra": (1, 2), "heavy_intra": None, "budget_s": 2.0, "min_rounds": 9, "max_rounds": 30,
             "block_ms": 30.0, "rss_calls": 6, "overhead_rounds": 31, "repeats": 1},
}


# ------------------------------------------------------------------ allocators
def find_library(name: str, extra_dirs=()) -> str | None:
    """Path of a shared library by file name: the usual directories, then ``ldconfig -p``."""
    for d in (*extra_dirs, *LIB_DIRS):
        p = Path(d) / name
        if p.exists():
            return str(p)
    for ldconfig in ("ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"):
        try:
            out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        for line in out.splitlines():
            if line.strip().startswith(name + " ") and "=>" in line:
                return line.split("=>")[-1].strip()
        break
    return None


def allocator_env(name: str, lib: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MALLOC_CONF", "TCMALLOC_RELEASE_RATE")}
    _, conf, _ = ALLOCATORS[name]
    if lib:
        env["LD_PRELOAD"] = lib
    if conf:
        env["MALLOC_CONF"] = conf.format(arenas=4 * (os.cpu_count() or 1))
    return env


def _package_version(pkg: str | None) -> str | None:
    if not pkg:
        return None
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def resolve_allocators(names) -> tuple[dict[str, dict], dict[str, str]]:
    """``(available, skipped)``: per available allocator its preload, MALLOC_CONF and package version;
    per skipped one the reason."""
    available, skipped = {}, {}
    for name in names:
        lib_name, conf, pkg = ALLOCATORS[name]
        lib = None
        if lib_name:
            lib = find_library(lib_name)
            if lib is None:
                skipped[name] = f"{lib_name} not found (Debian package {pkg}: apt-get install {pkg})"
                continue
        env = allocator_env(name, lib)
        available[name] = {"preload": lib, "malloc_conf": env.get("MALLOC_CONF"), "package": pkg,
                           "package_version": _package_version(pkg)}
    return available, skipped


# ------------------------------------------------------------------ processes
class Zygote:
    """A prepared worker process for one allocator; ``run`` forks a child per measurement."""

    def __init__(self, name: str, env: dict, tmp: Path) -> None:
        self.name = name
        self.tmp = tmp
        self.count = 0
        self.log_path = tmp / f"zygote-{name}.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen([sys.executable, str(WORKER), "--serve"], env=env, cwd=str(ROOT),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True)
        line = self.proc.stdout.readline()
        if not line:
            self.close()
            raise RuntimeError(f"the {name} worker did not start: {self.log_tail()}")
        self.info = json.loads(line)

    def log_tail(self, n: int = 6) -> str:
        try:
            return " | ".join(self.log_path.read_text().strip().splitlines()[-n:])
        except OSError:
            return ""

    def run(self, phase: str, cfg: dict, timeout: float) -> dict:
        self.count += 1
        out = self.tmp / f"{self.name}-{self.count}.json"
        req = {"phase": phase, "config": cfg, "out": str(out), "timeout": timeout}
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            return {"ok": False, "error": f"the {self.name} worker died: {self.log_tail()}"}
        status = json.loads(line)["status"]
        return _read_result(out, status, self.log_tail)

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def _read_result(out: Path, status: str, tail=lambda: "") -> dict:
    try:
        result = json.loads(out.read_text())
        out.unlink()
    except (OSError, ValueError):
        result = {"ok": False, "error": f"no result ({status}) {tail()}"}
    if status == "timeout":
        result = {"ok": False, "error": "timed out"}
    return result


def run_fresh(phase: str, cfg: dict, env: dict, tmp: Path, timeout: float) -> dict:
    """One measurement in a fresh interpreter."""
    out = tmp / f"fresh-{phase}-{time.monotonic_ns()}.json"
    cmd = [sys.executable, str(WORKER), "--phase", phase, "--config", json.dumps(cfg), "--out", str(out)]
    try:
        proc = subprocess.run(cmd, env=env, cwd=str(ROOT), capture_output=True, text=True, timeout=timeout)
        status = "exited" if proc.returncode == 0 else f"exit {proc.returncode}"
        tail = proc.stderr.strip().splitlines()[-4:]
    except subprocess.TimeoutExpired:
        status, tail = "timeout", []
    return _read_result(out, status, lambda: " | ".join(tail))


# ------------------------------------------------------------------ grid
def grid(axes: dict) -> list[dict]:
    """Every point (a configuration without its allocator), in the order they run."""
    points = []
    for model in axes["models"]:
        sizes = [None] if model in FIXED_SIZE else list(axes["sizes"])
        intras = axes["heavy_intra"] if (axes.get("heavy_intra") and model in HEAVY_MODELS) else axes["intra"]
        for batch, size, serving, intra in itertools.product(axes["batches"], sizes, axes["serving"], intras):
            points.append({"model": model, "batch": batch, "size": size, "serving": serving, "intra": intra})
    return points


def _size_kind(model: str) -> str:
    from_examples = {"transformer": "sequence", "gru": "sequence"}
    if model in FIXED_SIZE:
        return f"fixed {FIXED_SIZE[model]}x{FIXED_SIZE[model]}"
    return from_examples.get(model, "image")


def _row(point: dict, allocator: str, pair: dict, rss_e: dict | None, rss_a: dict | None) -> dict:
    row = {**point, "allocator": allocator, "size_kind": _size_kind(point["model"])}
    row.update(pair)
    row["ok"] = bool(pair.get("ok"))
    for side, res in (("eager", rss_e), ("attached", rss_a)):
        if res is None:
            continue
        if res.get("ok"):
            row[f"rss_{side}_peak_kb"] = res.get("peak_kb")
            row[f"rss_{side}_delta_kb"] = res.get("delta_kb")
            row[f"rss_{side}_start_kb"] = res.get("rss_start_kb")
            if side == "attached":
                row["planned_in"] = res.get("planned_in")
                row["planner_hwm_kb"] = res.get("planner_hwm_kb")
        else:
            row[f"rss_{side}_error"] = res.get("error")
    return row


def _machine(load_start) -> dict:
    cpu_model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"platform": platform.platform(), "machine": platform.machine(), "cpu_model": cpu_model,
            "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "load_average_start": load_start}


def _load() -> list | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _git() -> tuple[str | None, bool | None]:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                timeout=10).stdout.strip() or None
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                    capture_output=True, text=True, timeout=10).stdout.strip())
        return commit, dirty
    except (OSError, subprocess.SubprocessError):
        return None, None


def _command(argv) -> str:
    exe = sys.executable
    try:
        exe = os.path.relpath(exe)
    except ValueError:
        pass
    script = os.path.relpath(__file__) if Path(__file__).is_absolute() else __file__
    return shlex.join([exe, script, *argv])


def write_outputs(doc: dict, out_json: Path | None, out_md: Path, plot_dir: Path) -> list[Path]:
    """The JSON (with the derived per-row fields and the summary), the plots and the Markdown."""
    if out_json is not None:
        report.derive(doc.get("results", []))  # vs_fastest, fastest_eager per row
        doc["summary"] = report.summarize(doc)
        out_json.parent.mkdir(parents=True, exist_ok=True)
        tmp = out_json.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        tmp.replace(out_json)
    plots = report.plot(doc, plot_dir)
    out_md.parent.mkdir(parents=True, exist_ok=True)
    out_md.write_text(report.render_markdown(doc, [str(p) for p in plots]))
    return plots


def _fmt_eta(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


def run_study(args, axes: dict, argv) -> dict:
    available, skipped = resolve_allocators(axes["allocators"])
    for name, why in skipped.items():
        print(f"latency study: skipping allocator {name}: {why}", file=sys.stderr)
    points = grid(axes)
    repeats = max(1, int(axes.get("repeats", 1)))
    n_conf = len(points) * len(available)
    print(f"latency study: {len(points)} points x {len(available)} allocators = {n_conf} configurations"
          f" ({'fresh processes' if args.no_fork else 'forked from one prepared process per allocator'})",
          file=sys.stderr)
    if args.dry_run:
        for p in points:
            print("  " + " ".join(f"{k}={v}" for k, v in p.items()), file=sys.stderr)
        return {}
    commit, dirty = _git()
    t_start = time.monotonic()
    doc = {"meta": {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                    "command": _command(argv), "preset": args.preset, "machine": _machine(_load()),
                    "git_commit": commit, "git_dirty": dirty, "fork": not args.no_fork,
                    "axes": {k: (list(v) if isinstance(v, (tuple, list)) else v) for k, v in axes.items()},
                    "heavy_models": list(HEAVY_MODELS), "allocators": available, "skipped_allocators": skipped,
                    "heavy_penalty": report.HEAVY_PENALTY},
           "results": [], "runs": [], "overhead": []}
    meta = doc["meta"]
    timeout = args.timeout
    with tempfile.TemporaryDirectory(prefix="dsa-latency-") as tmpdir:
        tmp = Path(tmpdir)
        zygotes: dict[str, Zygote] = {}
        try:
            for name in list(available):
                env = allocator_env(name, available[name]["preload"])
                if args.no_fork:
                    check = run_fresh("rss-eager", {"model": "multi_output", "batch": 1, "size": None,
                                                    "serving": 1, "intra": 1, "rss_calls": 1}, env, tmp, timeout)
                    info = {"allocator_path": check.get("allocator_path"), "ok": check.get("ok"),
                            "error": check.get("error")}
                else:
                    try:
                        zygotes[name] = Zygote(name, env, tmp)
                        info = zygotes[name].info
                    except RuntimeError as exc:
                        info = {"ok": False, "error": str(exc)}
                want = available[name]["preload"]
                problem = None
                if info.get("ok") is False:
                    problem = f"the worker failed: {info.get('error')}"
                elif want and info.get("allocator_path") is None:
                    problem = f"{want} did not load (LD_PRELOAD ignored?)"
                elif not want and info.get("allocator_path"):
                    problem = f"another allocator is mapped: {info.get('allocator_path')}"
                if problem:
                    print(f"latency study: skipping allocator {name}: {problem}", file=sys.stderr)
                    skipped[name] = problem
                    available.pop(name)
                    z = zygotes.pop(name, None)
                    if z is not None:
                        z.close()
                    continue
                if "torch" in info:
                    meta["torch"] = info["torch"]
                    available[name]["zygote_rss_kb"] = info.get("vmrss_kb")
            if not available:
                raise SystemExit("latency study: no allocator could be run")
            if "torch" not in meta:
                import importlib.metadata as md

                try:
                    meta["torch"] = md.version("torch")
                except md.PackageNotFoundError:
                    meta["torch"] = None
            names = list(available)
            n_conf = len(points) * len(names)
            meta["repeats"] = repeats
            n_runs = n_conf * repeats

            def measure(name, phase, cfg):
                if args.no_fork:
                    return run_fresh(phase, cfg, allocator_env(name, available[name]["preload"]), tmp, timeout)
                return zygotes[name].run(phase, cfg, timeout)

            done = 0
            out_json = args.json
            # every configuration runs `repeats` times, a whole pass over the grid apart, so that a
            # slow spell of the machine does not hit one allocator's only run
            schedule = [(rep, i, point) for rep in range(repeats) for i, point in enumerate(points)]
            for rep, i, point in schedule:
                shift = (i + rep) % len(names)
                order = names[shift:] + names[:shift]  # rotate: no allocator always first
                for name in order:
                    cfg = {**point, "budget_s": axes["budget_s"], "min_rounds": axes["min_rounds"],
                           "max_rounds": axes["max_rounds"], "block_ms": axes["block_ms"],
                           "rss_calls": axes["rss_calls"]}
                    pair = measure(name, "pair", cfg)
                    rss_e = rss_a = None
                    if not args.no_rss:
                        sides = ("rss-eager", "rss-attached") if (i + done) % 2 == 0 else ("rss-attached", "rss-eager")
                        res = {s: measure(name, s, cfg) for s in sides}
                        rss_e, rss_a = res["rss-eager"], res["rss-attached"]
                    row = _row(point, name, pair, rss_e, rss_a)
                    row["rep"] = rep
                    doc["runs"].append(row)
                    doc["results"] = report.merge_repeats(doc["runs"])
                    done += 1
                    elapsed = time.monotonic() - t_start
                    eta = elapsed / done * (n_runs - done)
                    where = (f"{point['model']} b={point['batch']} size={point['size'] or 'native'} "
                             f"serving={point['serving']} intra={point['intra']} {name}")
                    if row["ok"]:
                        rss = ""
                        if row.get("rss_eager_delta_kb") is not None and row.get("rss_attached_delta_kb") is not None:
                            rss = (f", RSS +{row['rss_eager_delta_kb'] / 1024:.0f}/"
                                   f"+{row['rss_attached_delta_kb'] / 1024:.0f} MB")
                        msg = (f"ratio {row['ratio']:.3f} (eager {row['eager_us'] / 1e3:.2f} ms, attached "
                               f"{row['attached_us'] / 1e3:.2f} ms){rss}"
                               f"{'' if row.get('identical') else ', OUTPUTS DIFFER'}")
                    else:
                        msg = "FAILED: " + str(row.get("error", "")).strip().splitlines()[-1:][0] if row.get(
                            "error") else "FAILED"
                    print(f"[{done}/{n_runs} {_fmt_eta(elapsed)} eta {_fmt_eta(eta)}] {where}: {msg}",
                          file=sys.stderr, flush=True)
                    if out_json is not None and (done % 4 == 0 or done == n_runs):
                        meta["duration_s"] = round(time.monotonic() - t_start, 1)
                        _save_json(doc, out_json)
            if not args.no_overhead:
                for name in names:
                    rounds = axes["overhead_rounds"]
                    cfg = {"rounds": rounds, "block_ms": 20.0 if rounds > 20 else 10.0}
                    res = run_fresh("overhead", cfg, allocator_env(name, available[name]["preload"]), tmp, timeout)
                    res["allocator"] = name
                    doc["overhead"].append(res)
                    msg = (f"{res['overhead_us']:.2f} µs over eager ({res['eager_us']:.2f} µs)" if res.get("ok")
                           else "FAILED: " + str(res.get("error", "")).strip()[-200:])
                    print(f"overhead {name}: {msg}", file=sys.stderr, flush=True)
        except KeyboardInterrupt:
            meta["note"] = (f"Interrupted after {len(doc['results'])} of {n_conf} configurations; the figures "
                            "cover those only.")
            print("latency study: interrupted; writing what was measured", file=sys.stderr)
        finally:
            for z in zygotes.values():
                z.close()
    meta["duration_s"] = round(time.monotonic() - t_start, 1)
    meta["machine"]["load_average_end"] = _load()
    return doc


def _save_json(doc: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(path)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(t) for t in text.split(",") if t.strip())


def _names(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(",") if t.strip())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="default")
    ap.add_argument("--models", type=_names, help=f"comma-separated, from {', '.join(ALL_MODELS)}")
    ap.add_argument("--batches", type=_ints, help="comma-separated batch sizes")
    ap.add_argument("--sizes", type=_ints, help="comma-separated input sizes (image side / sequence length)")
    ap.add_argument("--serving", type=_ints, help="comma-separated serving-thread counts")
    ap.add_argument("--intra", type=_ints, help="comma-separated intra-op thread counts, for every model")
    ap.add_argument("--heavy-intra", type=_ints,
                    help=f"intra-op thread counts for {', '.join(HEAVY_MODELS)} (default preset: 1,2)")
    ap.add_argument("--allocators", type=_names, help=f"comma-separated, from {', '.join(ALLOCATORS)}")
    ap.add_argument("--budget", type=float, dest="budget_s", help="seconds of paired timing per configuration")
    ap.add_argument("--min-rounds", type=int, help="paired rounds at least")
    ap.add_argument("--max-rounds", type=int, help="paired rounds at most")
    ap.add_argument("--block-ms", type=float, help="target duration of one timed block")
    ap.add_argument("--rss-calls", type=int, help="calls per serving thread in the RSS processes")
    ap.add_argument("--repeats", type=int,
                    help="runs of every configuration, a pass over the grid apart (their medians are reported)")
    ap.add_argument("--no-rss", action="store_true", help="skip the eager-only / attached-only RSS processes")
    ap.add_argument("--no-overhead", action="store_true", help="skip the per-call overhead micro-benchmark")
    ap.add_argument("--no-fork", action="store_true",
                    help="a fresh interpreter per measurement instead of forking a prepared one (slower)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per measurement process")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "docs" / "results",
                    help="where latency.json, latency.md and latency_*.png go")
    ap.add_argument("--json", type=Path, help="JSON output (default OUT_DIR/latency.json)")
    ap.add_argument("--md", type=Path, help="Markdown output (default OUT_DIR/latency.md)")
    ap.add_argument("--report", type=Path, metavar="IN.json",
                    help="regenerate the Markdown and plots from this JSON; measure nothing")
    ap.add_argument("--dry-run", action="store_true", help="list the configurations and exit")
    ap.add_argument("--check-allocators", action="store_true",
                    help="say which allocator libraries are found; exit 1 if one is missing")
    args = ap.parse_args(argv)
    out_md = args.md or args.out_dir / "latency.md"

    if args.report is not None:
        doc = json.loads(args.report.read_text())
        plots = write_outputs(doc, None, out_md, out_md.parent)
        print(f"wrote {out_md}" + "".join(f", {p}" for p in plots), file=sys.stderr)
        return 0
    if args.check_allocators:
        available, skipped = resolve_allocators(ALLOCATORS)
        for name, a in available.items():
            print(f"{name}: {a['preload'] or 'system malloc'}" + (f" MALLOC_CONF={a['malloc_conf']}"
                                                                  if a["malloc_conf"] else ""))
        for name, why in skipped.items():
            print(f"{name}: missing: {why}")
        return 1 if skipped else 0

    axes = dict(PRESETS[args.preset])
    axes["allocators"] = tuple(ALLOCATORS)
    for key in ("models", "batches", "sizes", "serving", "intra", "allocators", "budget_s", "min_rounds",
                "max_rounds", "block_ms", "rss_calls", "repeats"):
        value = getattr(args, key)
        if value is not None:
            axes[key] = value
    if args.intra is not None and args.heavy_intra is None:
        axes["heavy_intra"] = None  # --intra applies to every model
    if args.heavy_intra is not None:
        axes["heavy_intra"] = args.heavy_intra
    bad = [m for m in axes["models"] if m not in ALL_MODELS]
    if bad:
        ap.error(f"unknown model(s) {bad}; choose from {', '.join(ALL_MODELS)}")
    bad = [a for a in axes["allocators"] if a not in ALLOCATORS]
    if bad:
        ap.error(f"unknown allocator(s) {bad}; choose from {', '.join(ALLOCATORS)}")
    if args.json is None:
        args.json = args.out_dir / "latency.json"
    doc = run_study(args, axes, argv)
    if not doc:
        return 0
    plots = write_outputs(doc, args.json, out_md, out_md.parent)
    s = report.summarize(doc)
    print(f"wrote {args.json}, {out_md}" + "".join(f", {p}" for p in plots), file=sys.stderr)
    print(f"summary: worst ratio {report._f(s.get('worst_ratio'), '.3f')}; allocation-heavy points "
          f"{s['heavy_points']}: attached(glibc)/eager(glibc) {report._f(s['heavy_glibc_ratio'], '.3f')}, "
          f"attached(glibc)/fastest eager {report._f(s['heavy_vs_fastest'], '.3f')}; RSS "
          f"{s['rss_met']}/{s['rss_points']}; worst slab/LOAD {report._f(s.get('worst_slab_over_load'), '.3f')}; "
          f"identical {s['identical']}/{s['measured']}; overhead {report._f(s.get('overhead_us'), '.2f')} µs; "
          f"{doc['meta']['duration_s']:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
