"""Command line: ``python -m dsa solve|compare|validate|strategies|warmup``.

Errors are printed as one line starting with ``error:`` and exit with code 2; an invalid plan given to
``validate`` exits with code 1. No input gives a traceback: an unexpected exception is reported on one
line as an internal error (set the environment variable ``DSA_TRACEBACK=1`` to see its traceback). A
KeyboardInterrupt is not caught.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

__all__ = ["main"]

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
COMPARE_TIME_LIMIT = 1.0  # seconds per instance for strategies that take a time limit, unless given


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints usage too; keep it short)
        self.exit(EXIT_USAGE, f"error: {message}\n")


def _instances(files: list[str], bundled: str | None) -> list[Path]:
    from dsa import data

    paths = [Path(f) for f in files]
    for p in paths:
        if not p.is_file():
            raise ValueError(f"no such file: {p}")
    if bundled:
        paths += data.paths(bundled)
    if not paths:
        raise ValueError("no instances: give CSV/JSON files or --bundled {all,minimalloc,traces}")
    return paths


def _read(path: Path, capacity):
    from dsa.io import read

    from dsa.data import bundled_capacity

    problem = read(path, capacity=capacity)
    if capacity is None and problem.capacity is None and bundled_capacity(path) is not None:
        problem = problem.replace(capacity=bundled_capacity(path))
    return problem


def _plot(problem, sol, path: str, source: Path, title: str) -> Path:
    """Write the heap map of ``sol`` to ``path``: an HTML page for ``.html``/``.htm``, else matplotlib.

    For an HTML page of a CSV with a ``stack`` column (an adapter trace written by ``Trace.to_csv``),
    the op stacks go into the tooltips. Returns the path written (``heap`` is written as ``heap.png``).
    """
    from dsa.plot import heap_map, output_format, output_path

    stacks = _csv_op_stacks(source, len(problem)) if output_format(path) == "html" else None
    heap_map(problem, sol, path=path, title=title, op_stacks=stacks)
    return output_path(path)


def _csv_op_stacks(path: Path, n: int) -> list | None:
    """The ``stack`` column of a CSV (ops joined by ``" > "``), one tuple per row; None if there is none."""
    import csv

    if path.suffix.lower() != ".csv":
        return None
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:  # as dsa.read_csv reads it
            reader = csv.reader(f)
            header = [name.strip().lower() for name in next(reader, [])]
            if "stack" not in header:
                return None
            k = header.index("stack")
            rows = [r for r in reader if any(cell.strip() for cell in r)]  # the rows dsa.read_csv keeps
    except (OSError, ValueError, csv.Error):  # the stacks are a nicety: the plan is drawn without them
        return None
    if len(rows) != n:
        return None
    return [tuple(op.strip() for op in r[k].split(" > ") if op.strip()) if k < len(r) else () for r in rows]


def _cmd_solve(args) -> int:
    import dsa

    from dsa.strategies import strategy_options

    batch = len(args.inputs) > 1 or args.out_dir is not None or Path(args.inputs[0]).is_dir()
    if args.pool and (batch or args.capacity is not None):
        raise ValueError("--pool plans one file, and each pool has its own capacity: give neither "
                         "--capacity nor several inputs with it")
    if batch:
        return _solve_batch(args)
    args.input = args.inputs[0]  # one file: as before the batch mode
    problem = _read(Path(args.input), args.capacity)
    if args.pool and problem.capacity is not None:
        problem = problem.replace(capacity=None)  # (a bundled instance's capacity: the pools have theirs)
    options = {}
    verbose = args.verbose if args.verbose is not None else sys.stderr.isatty()
    if verbose and "verbose" in strategy_options(args.strategy)[0]:
        options["verbose"] = True  # long searches log their progress on stderr
    pools = args.pool or None
    if pools and "verbose" not in strategy_options(args.strategy)[0]:
        options.pop("verbose", None)
    sol = dsa.solve(problem, args.strategy, time_limit=args.time_limit, seed=args.seed, pools=pools, **options)
    if sol.pool_names is not None and len(sol.pool_names) > 1:
        _print_pools(problem, sol, Path(args.input).name)
    else:
        print(f"{Path(args.input).name}: n={len(problem)} strategy={sol.strategy} status={sol.status} "
              f"peak={sol.peak} LOAD={dsa.load(problem)} lower_bound={sol.lower_bound} peak/LB={sol.ratio:.4f} "
              f"time={sol.stats['time_s'] * 1e3:.2f} ms")
        print(sol.message)
    if sol.conflict is not None:
        _print_conflict(problem, sol, pools=pools)
    if args.output and sol.offsets is not None:
        out = Path(args.output)
        (dsa.write_json if out.suffix.lower() == ".json" else dsa.write_csv)(out, problem, sol)
        print(f"plan written to {out}")
    if args.plot and sol.offsets is not None:
        written = _plot(problem, sol, args.plot, Path(args.input), f"{Path(args.input).stem}: {sol.strategy}")
        print(f"heap map written to {written}")
    return EXIT_OK if sol.success else EXIT_INVALID


def _print_pools(problem, sol, name: str) -> None:
    """The summary of a plan over pools: status, cost and bound, then one line per pool."""
    cost = "none" if sol.cost is None else f"{sol.cost:g}"
    print(f"{name}: n={len(problem)} strategy={sol.strategy} status={sol.status} cost={cost} "
          f"cost_bound={sol.cost_bound:g} time={sol.stats['time_s'] * 1e3:.2f} ms")
    print(sol.message)
    if sol.pool is None:
        return
    caps = sol.stats.get("pool_capacities", [None] * len(sol.pool_names))
    for p, pool_name in enumerate(sol.pool_names):
        cap = "unbounded" if caps[p] is None else caps[p]
        print(f"  pool {pool_name}: {int((sol.pool == p).sum())} buffers, peak={sol.pool_peaks[p]} "
              f"capacity={cap} weight={sol.stats['pool_weights'][p]}")


def _pool_arg(text: str):
    """``NAME:CAPACITY[:COST]`` (CAPACITY ``none`` or empty: unbounded) as a :class:`dsa.Pool`."""
    from dsa.pools import Pool

    parts = text.split(":")
    if len(parts) not in (2, 3) or not parts[0].strip():
        raise argparse.ArgumentTypeError(f"expected NAME:CAPACITY[:COST], got {text!r}")
    cap_text = parts[1].strip().lower()
    try:
        cap = None if cap_text in ("", "none", "inf", "unbounded") else int(cap_text)
        cost = float(parts[2]) if len(parts) == 3 else 1.0
        return Pool(parts[0].strip(), cap, cost)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--pool {text!r}: {exc}") from None


def _print_conflict(problem, sol, most: int = 200, pools=None) -> None:
    """The rows of an INFEASIBLE solution's conflict, one a line, with their labels."""
    rows = sol.conflict
    where = (f"the capacity {problem.capacity}" if not pools else
             "the pools they may use (" + ", ".join(f"{p.name}: {p.capacity}" for p in pools) + ")")
    print(f"conflict: these {len(rows)} buffers cannot fit in {where} together; "
          "removing any one of them makes the rest fit:")
    for i in rows[:most]:
        extra = ""
        if problem.alignments[i] != 1:
            extra += f" alignment={int(problem.alignments[i])}"
        if problem.is_fixed[i]:
            extra += f" fixed_offset={int(problem.fixed_offsets[i])}"
        print(f"  row {i} id={problem.ids[i]!r} lifetime=[{int(problem.starts[i])}, {int(problem.ends[i])}) "
              f"size={int(problem.sizes[i])}{extra}")
    if len(rows) > most:
        print(f"  ... and {len(rows) - most} more rows")


SUMMARY_FIELDS = ("file", "n", "peak", "load", "ratio", "status", "time_s", "message", "plan")


def _check_jobs(jobs: int) -> None:
    if jobs == 0:
        raise ValueError("--jobs must be a positive number of workers, or -1 for one per core")


def _batch_inputs(inputs: list[str]) -> tuple[list[Path], list[Path]]:
    """The files to plan (a directory gives its ``*.csv`` and ``*.json`` files, sorted) and the directories."""
    files, dirs = [], []
    for text in inputs:
        p = Path(text)
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.suffix.lower() in (".csv", ".json") and f.is_file())
            if not found:
                raise ValueError(f"no .csv or .json files in the directory {p}")
            files += found
            dirs.append(p)
        elif p.is_file():
            files.append(p)
        else:
            raise ValueError(f"no such file or directory: {p}")
    return files, dirs


def _plan_names(paths: list[Path]) -> list[str]:
    """``<stem>.plan.csv`` (``.json`` for a JSON input) per input; a repeated name gets ``-2``, ``-3``..."""
    names, used = [], set()
    for p in paths:
        suffix = ".json" if p.suffix.lower() == ".json" else ".csv"
        name, k = f"{p.stem}.plan{suffix}", 1
        while name.lower() in used:
            k += 1
            name = f"{p.stem}-{k}.plan{suffix}"
        used.add(name.lower())
        names.append(name)
    return names


def _solve_batch(args) -> int:
    """``dsa solve`` with several inputs or a directory: one plan per input, summary.csv and summary.json."""
    import csv
    import io
    import json
    import time

    import dsa
    from dsa.io import write_file

    if args.output:
        raise ValueError("-o/--output takes one input; with several, give --out-dir DIR")
    if args.plot:
        raise ValueError("--plot takes one input")
    if args.out_dir is None:
        raise ValueError("several inputs need --out-dir DIR (one plan per input, summary.csv, summary.json)")
    _check_jobs(args.jobs)
    paths, dirs = _batch_inputs(args.inputs)
    out_dir = Path(args.out_dir)
    if any(out_dir.resolve() == d.resolve() for d in dirs):
        raise ValueError(f"--out-dir {out_dir} is an input directory; give another one")
    out_dir.mkdir(parents=True, exist_ok=True)
    names = _plan_names(paths)
    problems, errors = {}, {}
    for k, path in enumerate(paths):
        try:
            problems[k] = _read(path, args.capacity)
        except (OSError, ValueError) as exc:  # a bad input costs its own row
            errors[k] = _text_of(exc)
    progress = args.progress if args.progress is not None else sys.stderr.isatty()
    t0 = time.perf_counter()
    keys = list(problems)
    sols = dict(zip(keys, dsa.solve_many([problems[k] for k in keys], args.strategy, n_jobs=args.jobs,
                                         progress=progress, time_limit=args.time_limit, seed=args.seed)))
    wall = time.perf_counter() - t0
    rows = []
    for k, path in enumerate(paths):
        row = dict.fromkeys(SUMMARY_FIELDS, None)
        row.update(file=str(path), status="error", message=f"cannot read it: {errors.get(k)}", plan="")
        if k in sols:
            problem, sol = problems[k], sols[k]
            load = dsa.load(problem)
            row.update(n=len(problem), peak=sol.peak, load=load, status=str(sol.status),
                       ratio=(sol.peak / load if load else 1.0) if sol.peak is not None else None,
                       time_s=sol.stats.get("time_s"), message=sol.message)
            if sol.offsets is not None:
                target = out_dir / names[k]
                (dsa.write_json if target.suffix == ".json" else dsa.write_csv)(target, problem, sol)
                row["plan"] = names[k]
            if not sol.success and sol.message.startswith("problem "):  # "problem <i>: why" of solve_many
                row["message"] = sol.message.split(": ", 1)[-1]
        rows.append(row)
    text = io.StringIO()
    w = csv.DictWriter(text, fieldnames=SUMMARY_FIELDS, lineterminator="\n")
    w.writeheader()
    w.writerows({key: "" if v is None else v for key, v in r.items()} for r in rows)
    write_file(out_dir / "summary.csv", text.getvalue())
    write_file(out_dir / "summary.json", json.dumps(rows, indent=1) + "\n")

    header = f"{'file':<30} {'n':>7} {'peak':>12} {'LOAD':>12} {'peak/LOAD':>9} {'status':<13} {'time ms':>9}"
    print(header)
    print("-" * len(header))
    for r in rows:
        ratio = f"{r['ratio']:.4f}" if r["ratio"] is not None else "-"
        ms = f"{r['time_s'] * 1e3:.2f}" if r["time_s"] is not None else "-"
        print(f"{Path(r['file']).name[:30]:<30} {r['n'] if r['n'] is not None else '-':>7} "
              f"{r['peak'] if r['peak'] is not None else '-':>12} {r['load'] if r['load'] is not None else '-':>12} "
              f"{ratio:>9} {r['status']:<13} {ms:>9}")
    failed = [r for r in rows if r["status"] not in ("optimal", "feasible", "limit_reached")]
    for r in failed:
        print(f"{Path(r['file']).name}: {r['message']}")
    print(f"planned {len(rows) - len(failed)} of {len(rows)} inputs with {args.strategy} in {wall:.2f} s "
          f"(--jobs {args.jobs}); plans, summary.csv and summary.json in {out_dir}")
    return EXIT_OK if not failed else EXIT_INVALID


def _cmd_compare(args) -> int:
    import dsa

    from dsa.strategies import resolve_name, strategy_info

    if args.strategies:
        strategies = [resolve_name(s.strip()) for s in args.strategies.split(",")]
    else:  # every installed strategy; those meant for small instances only on those
        strategies = dsa.available_strategies(installed=True)
    paths = _instances(args.inputs, args.bundled)
    header = f"{'instance':<30} {'n':>7} {'LOAD':>12} {'strategy':<18} {'peak':>12} {'peak/LOAD':>9} " \
             f"{'time ms':>9}  valid"
    print(header)
    print("-" * len(header))
    ratios: dict[str, list[float]] = {s: [] for s in strategies}
    best_overall = None
    _check_jobs(args.jobs)
    problems = [_read(path, args.capacity) for path in paths]
    progress = args.progress if args.progress is not None else sys.stderr.isatty()
    sols = {}
    for name in strategies:  # one batch per strategy (dsa.solve_many, --jobs workers)
        max_n = strategy_info(name).max_n
        rows = [k for k, problem in enumerate(problems)
                if args.strategies or max_n is None or len(problem) <= max_n]
        limit = args.time_limit
        if limit is None and strategy_info(name).time_limit:
            limit = COMPARE_TIME_LIMIT  # an exact search would otherwise run until its proof
        got = dsa.solve_many([problems[k] for k in rows], name, n_jobs=args.jobs, progress=progress,
                             time_limit=limit, seed=args.seed)
        sols.update(((k, name), sol) for k, sol in zip(rows, got))
    for k, path in enumerate(paths):
        problem = problems[k]
        load = dsa.lower_bound(problem)
        for name in strategies:
            sol = sols.get((k, name))
            if sol is None:
                continue
            valid = "yes" if sol.status != dsa.Status.ERROR and sol.offsets is not None else "NO"
            if sol.status in (dsa.Status.NO_FIT, dsa.Status.INFEASIBLE):
                valid += f" ({sol.status})"
            ratio = sol.ratio
            ratios[name].append(ratio)
            print(f"{path.stem[:30]:<30} {len(problem):>7} {load:>12} {name:<18} {sol.peak!s:>12} "
                  f"{ratio:>9.4f} {sol.stats.get('time_s', float('nan')) * 1e3:>9.2f}  {valid}")
            if args.plot and sol.offsets is not None and (best_overall is None or ratio > best_overall[0]) \
                    and name != "bump":
                best_overall = (ratio, problem, sol, path)
    if len(paths) > 1:
        print("-" * len(header))
        for name in strategies:
            vals = [r for r in ratios[name] if r == r]
            if not vals:
                continue
            print(f"{'mean over ' + str(len(vals)) + ' instances':<30} {'':>7} {'':>12} {name:<18} {'':>12} "
                  f"{sum(vals) / len(vals):>9.4f}")
    if args.plot and best_overall is not None:
        ratio, problem, sol, path = best_overall
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        written = _plot(problem, sol, args.plot, path, f"{path.stem}: {sol.strategy} (peak/LOAD {ratio:.3f})")
        print(f"heap map of the hardest case ({path.stem}, {sol.strategy}) written to {written}")
    return EXIT_OK


def _cmd_validate(args) -> int:
    import numpy as np

    import dsa

    problem = _read(Path(args.input), args.capacity)
    if args.pool and problem.capacity is not None:
        if args.capacity is not None:
            raise ValueError("--pool and --capacity cannot be given together: each pool has its own capacity")
        problem = problem.replace(capacity=None)
    plan_problem, offsets, pool_names = dsa.read_plan(args.plan, with_pools=True)
    if pool_names is not None and not args.pool:
        raise ValueError(f"{args.plan} is a plan over pools ({', '.join(sorted(set(pool_names)))}): give them "
                         "with --pool NAME:CAPACITY[:COST]")
    if len(plan_problem) != len(problem):
        raise ValueError(f"the plan has {len(plan_problem)} rows, the input {len(problem)}")
    perm = _match_rows(problem.ids, plan_problem.ids)  # plan rows may come in another order
    ids = list(problem.ids)
    for field in ("starts", "ends", "sizes"):
        differ = np.flatnonzero(getattr(plan_problem, field)[perm] != getattr(problem, field))
        if len(differ):
            raise ValueError(f"the plan's {field[:-1]} of id {ids[differ[0]]!r} differs from the input's")
    offsets = offsets[perm]
    if args.pool:
        return _validate_pools(problem, offsets, None if pool_names is None else [pool_names[k] for k in perm],
                               args.pool)
    try:
        dsa.validate(problem, offsets)
    except dsa.InvalidPlanError as exc:
        print(f"invalid: {exc}")
        return EXIT_INVALID
    from dsa.solution import plan_peak

    peak = plan_peak(problem, offsets)
    load = dsa.lower_bound(problem)
    print(f"valid: peak {peak}, LOAD {load}, peak/LOAD {peak / load if load else 1.0:.4f}")
    return EXIT_OK


def _validate_pools(problem, offsets, pool_names, pools) -> int:
    """``dsa validate`` of a plan over pools: each row's pool by name, then the validator per pool."""
    import numpy as np

    import dsa
    from dsa.pools import check_pools, pool_peaks

    spec = check_pools(problem, pools)
    if pool_names is None:
        pool_names = [spec.names[0]] * len(problem)  # a plan of one slab: all in the first pool
    index = {name: p for p, name in enumerate(spec.names)}
    unknown = sorted(set(pool_names) - set(index))
    if unknown:
        raise ValueError(f"the plan puts rows in pools not given with --pool: {', '.join(unknown)}")
    pool = np.array([index[name] for name in pool_names], dtype=np.int64)
    try:
        dsa.validate(problem, (pool, offsets), pools=spec)
    except dsa.InvalidPlanError as exc:
        print(f"invalid: {exc}")
        return EXIT_INVALID
    peaks = pool_peaks(problem, spec, pool, offsets)
    print(f"valid over pools: cost {spec.cost(pool):g}; " + ", ".join(
        f"{name}: peak {peak}" + ("" if spec.capacity(p) is None else f" of {spec.capacity(p)}")
        for p, (name, peak) in enumerate(zip(spec.names, peaks))))
    return EXIT_OK


def _match_rows(ids, plan_ids):
    """For each input row, the plan row with the same id.

    Ids match by value (``1`` and ``"1"`` are different ids). Only when the two files spell every id
    differently (a CSV, whose ids are text, against a JSON file with numbers) are they matched by
    their text, and then only if no two ids of either file share a text.
    """
    import numpy as np

    where = {label: k for k, label in enumerate(plan_ids)}
    if set(where) == set(ids):
        return np.array([where[label] for label in ids], dtype=np.int64)
    as_text = {str(label): k for k, label in enumerate(plan_ids)}
    input_text = [str(label) for label in ids]
    if (set(where) & set(ids)) or len(as_text) != len(plan_ids) or len(set(input_text)) != len(input_text) \
            or set(as_text) != set(input_text):
        raise ValueError("the plan's ids do not match the input's")
    return np.array([as_text[label] for label in input_text], dtype=np.int64)


def _cmd_strategies(args) -> int:
    import dsa
    from dsa.strategies import strategy_info

    names = dsa.available_strategies()
    if not args.verbose:
        print("\n".join(names))
        return EXIT_OK
    for name in names:
        info = strategy_info(name)
        notes = [info.paper, info.kind] if info.paper else [info.kind]
        if info.time_limit:
            notes.append("takes a time limit")
        if info.max_n is not None:
            notes.append(f"up to {info.max_n} buffers")
        if not info.available:
            notes.append(f"needs pip install 'dsa-planner[{info.extra}]'")
        print(f"{name:<18} {info.summary} ({'; '.join(notes)})")
    return EXIT_OK


def _cmd_warmup(args) -> int:
    from dsa.precompile import warmup

    info = warmup(verbose=args.verbose)
    where = info["cache_dir"] or "beside the installed package (or the user cache directory)"
    print(f"compiled or loaded {info['kernels']} kernel signatures in {info['seconds']:.1f} s "
          f"(numba: {info['jit_s']:.1f} s); numba cache: {where}")
    return EXIT_OK


def _batch_options(parser, jobs: str, progress: str) -> None:
    """``--jobs`` and ``--progress``, as ``solve`` and ``compare`` take them (dsa.solve_many)."""
    parser.add_argument("--jobs", "-j", type=int, default=1,
                        help=f"{jobs} at a time in worker processes (-1: one per core)")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help=f"{progress} on stderr (default: when stderr is a terminal)")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m dsa", description="Plan memory offsets for buffers with lifetimes.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("solve", help="plan one instance, or a batch of them (several files, directories)")
    s.add_argument("inputs", nargs="+", metavar="input",
                   help="CSV (id,lower,upper,size[,alignment][,offset]) or JSON; several files or directories "
                        "(their *.csv and *.json files) are planned as a batch into --out-dir")
    s.add_argument("--strategy", "-s", default="greedy_by_size")
    s.add_argument("--capacity", type=int)
    s.add_argument("--pool", action="append", type=_pool_arg, metavar="NAME:CAPACITY[:COST]",
                   help="plan over memory pools (repeat for each; CAPACITY 'none' is unbounded; COST "
                        "default 1): each buffer gets a pool, at the least sum of cost x size")
    s.add_argument("--time-limit", type=float)
    s.add_argument("--seed", type=int)
    s.add_argument("-o", "--output", help="write the plan (CSV, or JSON by suffix)")
    s.add_argument("--verbose", "-v", action=argparse.BooleanOptionalAction, default=None,
                   help="progress of long searches (exact, mip) on stderr (default: when stderr is a terminal)")
    s.add_argument("--plot", help="write a heap map: an interactive page for a .html path, else an image "
                                  "(PNG, SVG or PDF by suffix)")
    s.add_argument("--out-dir", help="batch: write one plan per input (<name>.plan.csv or .json) and "
                                     "summary.csv / summary.json here")
    _batch_options(s, "batch: plan this many inputs", "batch: a progress bar")
    s.set_defaults(func=_cmd_solve)

    c = sub.add_parser("compare", help="compare strategies on instances")
    c.add_argument("inputs", nargs="*", help="CSV or JSON files")
    c.add_argument("--bundled", choices=["all", "minimalloc", "traces"], help="add the bundled instances")
    c.add_argument("--strategies", help="comma-separated names (default: every installed strategy, "
                                        "each on the instances within its size limit)")
    c.add_argument("--capacity", type=int)
    c.add_argument("--time-limit", type=float,
                   help=f"seconds per instance for strategies that take one (default {COMPARE_TIME_LIMIT:g})")
    c.add_argument("--seed", type=int)
    c.add_argument("--plot", help="write the heap map of the case with the worst peak/LOAD to this file "
                                  "(.html: an interactive page; else PNG, SVG or PDF by suffix)")
    _batch_options(c, "plan this many instances", "a progress bar per strategy")
    c.set_defaults(func=_cmd_compare)

    v = sub.add_parser("validate", help="check a plan against an instance")
    v.add_argument("input")
    v.add_argument("plan", help="a plan file: the input columns plus offset (CSV or JSON)")
    v.add_argument("--capacity", type=int)
    v.add_argument("--pool", action="append", type=_pool_arg, metavar="NAME:CAPACITY[:COST]",
                   help="the pools of a plan over pools (as for solve); the plan's pool column names them")
    v.set_defaults(func=_cmd_validate)

    st = sub.add_parser("strategies", help="list the strategies")
    st.add_argument("-v", "--verbose", action="store_true", help="with kind, capabilities and a summary")
    st.set_defaults(func=_cmd_strategies)

    w = sub.add_parser("warmup", help="compile every numba kernel into numba's cache (e.g. in an image build)")
    w.add_argument("-v", "--verbose", action="store_true", help="one line per step on stderr")
    w.set_defaults(func=_cmd_warmup)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``) and return the exit code.

    Parameters
    ----------
    argv : list of str, optional
        The arguments after the program name.

    Returns
    -------
    int
        0 on success, 1 for a plan that is invalid or does not fit, 2 for any error (bad arguments,
        unreadable or invalid files, a file that cannot be written, a missing optional extra...),
        which is printed as one line starting with ``error:`` on stderr.
    """
    args = _parser().parse_args(argv)
    stdout = sys.stdout
    errors = getattr(stdout, "errors", None)
    _set_errors(stdout, "backslashreplace")  # file names that are not valid UTF-8 are printed escaped
    try:
        code = args.func(args)
        stdout.flush()  # here, so that a closed pipe is reported below and not at the interpreter's exit
        return code
    except KeyboardInterrupt:
        raise
    except BrokenPipeError as exc:
        # a print met a closed stdout (`| head`): stop quietly; a FIFO given as -o or --plot lost its
        # reader (dsa.io.write_file names the path): say so
        if exc.filename is not None:
            _error(exc)
        try:
            stdout.flush()
        except (OSError, ValueError):
            _silence_stdout()
        return EXIT_USAGE
    except (ValueError, OSError, ImportError, ArithmeticError, RecursionError) as exc:
        # ValueError includes UnicodeError; ArithmeticError includes OverflowError
        _error(exc)
        return EXIT_USAGE
    except MemoryError:
        _error("out of memory")
        return EXIT_USAGE
    except Exception as exc:
        if os.environ.get("DSA_TRACEBACK"):
            raise
        _error(f"internal error ({type(exc).__name__}): {_text_of(exc)} (set DSA_TRACEBACK=1 to see the "
               "traceback)")
        return EXIT_USAGE
    finally:
        _set_errors(stdout, errors)


def _set_errors(stream, errors) -> None:
    if errors is not None and callable(getattr(stream, "reconfigure", None)):
        try:
            stream.reconfigure(errors=errors)
        except (ValueError, OSError, AttributeError, LookupError):
            pass


def _text_of(exc) -> str:
    """An exception's message on one line (its type's name if it has none)."""
    text = re.sub(r"\s*[\r\n]+\s*", " ", str(exc)).strip()
    return text or type(exc).__name__


def _error(exc) -> None:
    message = exc if isinstance(exc, str) else _text_of(exc)
    try:
        print(f"error: {message}", file=sys.stderr)
    except (OSError, ValueError):  # stderr is closed or cannot take the text: the exit code says it
        pass


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
