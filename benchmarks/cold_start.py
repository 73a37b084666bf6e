"""Cold-start cost of ``best``: numba compile time from an empty cache, and call times after a warmup.

Opt-in (``make bench-cold-start``; not part of ``make test``). For each source tree, in fresh
processes with ``PYTHONPATH`` pointing at the tree and ``NUMBA_CACHE_DIR`` at a new empty directory:

1. cold: ``dsa.solve(instance, "best", time_limit=T)`` on the 11 MiniMalloc instances, one process,
   recording each call's wall time and ``stats["jit_s"]`` (numba import, compiling, cache loading);
2. warm: ``python -m dsa warmup`` (a tree without that command: the cold run's cache is kept instead),
   then the same 11 calls in a new process, reporting ``max(call time - T)``.

``stats["jit_s"]`` also counts the time that kernels not compiled yet spend running as Python
(:func:`dsa._kernels.python_path`), so that the cold totals are the whole cost of the cold start.
``--repeat N`` measures the cold runs ``N`` times, the trees taking turns, and reports the median
ratio (the machine's load drifts between runs).

``--baseline-src DIR`` adds a second tree, side by side in the same run (for example
``git worktree add --detach /tmp/dsa-base HEAD``; with ``--baseline-src HEAD`` the script makes
that worktree itself in a temporary directory and removes it at the end). numba keys its cache by
source path, so the trees never share compiled kernels.

    python benchmarks/cold_start.py --baseline-src HEAD --json out/cold_start.json
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, sys, time
import dsa, dsa.data
limit = float(sys.argv[1])
rows = []
for path in dsa.data.paths("minimalloc"):
    problem = dsa.data.load(path.stem)
    t0 = time.perf_counter()
    sol = dsa.solve(problem, "best", time_limit=limit)
    rows.append({"instance": path.stem, "wall_s": time.perf_counter() - t0,
                 "jit_s": float(sol.stats.get("jit_s", 0.0)), "peak": int(sol.peak),
                 "status": str(sol.status.value)})
print("RESULT " + json.dumps(rows))
"""


def _run(src: Path, cache: str, args: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(src), NUMBA_CACHE_DIR=cache, PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, *args], env=env, cwd=tempfile.gettempdir(),
                          capture_output=True, text=True, check=False)


def _calls(src: Path, cache: str, limit: float) -> list[dict]:
    proc = _run(src, cache, ["-c", _CHILD, str(limit)])
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"the run in {src} failed:\n{proc.stderr[-3000:]}")


def measure(src: Path, limit: float, warm: bool = True) -> dict:
    """Cold and (with ``warm``) warm runs of one source tree (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="dsa-cold-") as cold_cache, \
            tempfile.TemporaryDirectory(prefix="dsa-warm-") as warm_cache:
        cold = _calls(src, cold_cache, limit)
        if not warm:
            return {"src": str(src), "time_limit": limit, "cold": cold,
                    "cold_jit_s": sum(r["jit_s"] for r in cold),
                    "cold_wall_s": sum(r["wall_s"] for r in cold)}
        # (dsa/precompile.py, dsa/warmup.py before it was renamed: a tree with either has the command)
        if any((src / "dsa" / name).exists() for name in ("precompile.py", "warmup.py")):
            proc = _run(src, warm_cache, ["-m", "dsa", "warmup"])
            if proc.returncode != 0:
                raise RuntimeError(f"dsa warmup failed in {src}: {proc.stderr[-2000:]}")
            how, cache = "dsa warmup", warm_cache
        else:
            how, cache = "cache of the cold run", cold_cache
        warm = _calls(src, cache, limit)
    return {"src": str(src), "time_limit": limit, "cold": cold, "warm": warm, "warmed_by": how,
            "cold_jit_s": sum(r["jit_s"] for r in cold), "cold_wall_s": sum(r["wall_s"] for r in cold),
            "warm_max_over_s": max(r["wall_s"] - limit for r in warm)}


def _table(results: dict) -> str:
    names = list(results)
    lines = ["| instance | " + " | ".join(f"{n}: cold wall / jit (s) | {n}: warm wall (s)" for n in names)
             + " |", "|---" * (1 + 2 * len(names)) + "|"]
    for i, row in enumerate(results[names[0]]["cold"]):
        cells = []
        for n in names:
            c, w = results[n]["cold"][i], results[n]["warm"][i]
            cells += [f"{c['wall_s']:.2f} / {c['jit_s']:.2f}", f"{w['wall_s']:.2f}"]
        lines.append(f"| {row['instance']} | " + " | ".join(cells) + " |")
    cells = []
    for n in names:
        r = results[n]
        cells += [f"**{r['cold_wall_s']:.2f} / {r['cold_jit_s']:.2f}**",
                  f"max over limit **{r['warm_max_over_s']:+.2f}** ({r['warmed_by']})"]
    lines.append("| total | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=str(ROOT), help="the source tree to measure (default: this checkout)")
    ap.add_argument("--baseline-src", help="a second tree to measure side by side (HEAD: a worktree of HEAD)")
    ap.add_argument("--time-limit", type=float, default=2.0)
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--repeat", type=int, default=1,
                    help="cold runs of each tree, the trees taking turns (the machine's load drifts); the "
                         "table shows the first round, the ratio every round and their median")
    args = ap.parse_args(argv)
    trees = {"this": Path(args.src).resolve()}
    worktree = None
    try:
        if args.baseline_src == "HEAD":
            worktree = Path(tempfile.mkdtemp(prefix="dsa-base-")) / "tree"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(worktree), "HEAD"],
                           check=True, capture_output=True)
            trees = {"baseline": worktree, **trees}
        elif args.baseline_src:
            trees = {"baseline": Path(args.baseline_src).resolve(), **trees}
        results = {}
        extra: dict = {name: [] for name in trees}  # cold totals of the later rounds
        for name, src in trees.items():
            print(f"measuring {name} ({src}) ...", file=sys.stderr, flush=True)
            results[name] = measure(src, args.time_limit)
        for _ in range(args.repeat - 1):
            for name, src in trees.items():
                print(f"measuring {name} again (cold only) ...", file=sys.stderr, flush=True)
                extra[name].append(measure(src, args.time_limit, warm=False))
    finally:
        if worktree is not None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)],
                           check=False, capture_output=True)
            shutil.rmtree(worktree.parent, ignore_errors=True)
    print(_table(results))
    if "baseline" in results:
        rounds = [(results["baseline"], results["this"])] + list(zip(extra["baseline"], extra["this"]))
        ratios = [t["cold_jit_s"] / max(b["cold_jit_s"], 1e-9) for b, t in rounds]
        for k, (b, t) in enumerate(rounds):
            print(f"\nround {k + 1}: cold jit_s baseline {b['cold_jit_s']:.2f}, this {t['cold_jit_s']:.2f}; "
                  f"cold wall baseline {b['cold_wall_s']:.2f}, this {t['cold_wall_s']:.2f}; "
                  f"ratio {ratios[k]:.2f}", end="")
        print(f"\n\ncold compile time, this / baseline: {statistics.median(ratios):.2f}"
              + (f" (median of {len(ratios)} rounds)" if len(ratios) > 1 else ""))
        results["ratios"] = ratios
    for name in extra:
        if extra[name]:
            results[f"{name}_later_rounds"] = extra[name]
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
