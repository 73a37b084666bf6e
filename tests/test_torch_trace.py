"""profile(model) traces: contents, conversion to a Problem and CSV, and a cross-check with torch.profiler."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dsa  # noqa: E402
from dsa.adapters.torch import Trace, profile  # noqa: E402
from dsa.adapters.torch.trace import _call_profiled  # noqa: E402
from dsa.adapters.torch.examples import MODELS  # noqa: E402


def trace_of(name, batch=2):
    torch.manual_seed(0)
    model, make_input = MODELS[name]()
    x = make_input(batch)
    with torch.inference_mode():
        model(*x)  # lazy initialisation happens outside the trace
        return model, x, profile(model, *x)


def test_trace_rows_are_consistent():
    _, _, tr = trace_of("resnet")
    assert isinstance(tr, Trace) and len(tr) > 20
    assert (tr.sizes > 0).all()
    assert (np.diff(tr.starts) > 0).all()            # allocation order, one tick each
    live = ~tr.escapes
    assert (tr.ends[live] > tr.starts[live]).all() and (tr.ends[live] < tr.clock).all()
    assert tr.escapes[-1]                            # the logits outlive the pass
    assert len(set(tr.threads.tolist())) == 1
    assert len(tr.stacks) == len(tr) and all(isinstance(s, tuple) for s in tr.stacks)
    assert "aten::conv2d" in {op for s in tr.stacks for op in s}
    assert any(op.startswith("aten::") for op in tr.ops)
    assert "allocations=" in repr(tr)


def test_the_live_bytes_of_the_trace_match_torch_memory_accounting():
    _, _, tr = trace_of("mobilenet")
    # every start and end is a distinct tick: replaying them must end with only escaping blocks live
    events = sorted([(s, +int(b)) for s, b in zip(tr.starts, tr.sizes)]
                    + [(e, -int(b)) for e, b in zip(tr.ends, tr.sizes) if e >= 0])
    live = np.cumsum([d for _, d in events])
    assert live[-1] == int(tr.sizes[tr.escapes].sum())
    assert live.max() >= dsa.load(tr.to_problem())


def test_to_problem_keeps_allocation_indices_and_alignment():
    _, _, tr = trace_of("gru")
    p = tr.to_problem()
    kept = np.flatnonzero(~tr.escapes)
    assert list(p.ids) == kept.tolist()
    assert np.array_equal(p.sizes, tr.sizes[kept]) and (p.alignments == 64).all()
    full = tr.to_problem(include_escaping=True)
    assert len(full) == len(tr) and full.ends.max() == tr.clock
    sol = dsa.solve(p)
    assert sol.success and (sol.offsets % 64 == 0).all()


def test_csv_round_trip(tmp_path):
    _, _, tr = trace_of("transformer")
    path = tr.to_csv(tmp_path / "trace.csv")
    header = path.read_text().splitlines()[0]
    assert header == "id,lower,upper,size,alignment,thread,op,stack"
    back = dsa.read_csv(path)
    p = tr.to_problem()
    assert [int(i) for i in back.ids] == list(p.ids)
    for field in ("starts", "ends", "sizes", "alignments"):
        assert np.array_equal(getattr(back, field), getattr(p, field))
    assert " > " in path.read_text()


def test_csv_is_written_through_a_link_and_whole(tmp_path):
    """to_csv writes as dsa.write_csv does: a link stays a link and its target gets the trace; a
    write that fails leaves the old file as it was (issue 20)."""
    _, _, tr = trace_of("transformer")
    target = tmp_path / "real.csv"
    target.write_text("old")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    tr.to_csv(link)
    assert link.is_symlink() and target.read_text().startswith("id,lower,upper")
    # UTF-8 cannot encode a lone surrogate: nothing may be written
    bad = dataclasses.replace(tr, stacks=tuple(("\ud800",) for _ in tr.stacks))
    with pytest.raises(UnicodeEncodeError):
        bad.to_csv(target)
    assert target.read_text().startswith("id,lower,upper") and len(list(tmp_path.iterdir())) == 2


def test_deadlines_point_past_each_free():
    _, _, tr = trace_of("inplace_views")
    d = tr.deadlines()
    for i in range(len(tr)):
        if tr.escapes[i]:
            assert d[i] == len(tr)
        else:
            # allocations before the deadline started before the free; the one at it started after
            assert (tr.starts[:d[i]] < tr.ends[i]).all()
            assert d[i] == len(tr) or tr.starts[d[i]] > tr.ends[i]


def test_exception_while_profiling_propagates_and_closes_the_session():
    model, x, _ = trace_of("raises")
    with torch.inference_mode():
        with pytest.raises(RuntimeError, match="requested failure"):
            profile(model, *x, fail=True)
        assert len(profile(model, *x)) > 0  # the thread is free again


def test_allocations_of_other_threads_are_not_in_the_trace():
    import threading

    def work():
        a = torch.ones(1000)
        b = a * 2
        return b

    def run():
        t = threading.Thread(target=work)
        t.start()
        t.join()
        return torch.ones(10)

    tr = profile(run)
    assert list(tr.sizes) == [40]


def _profiler_allocations(prof, window_name):
    """Allocation and free events of torch.profiler inside the user scope ``window_name``."""
    from torch._C._profiler import _EventType

    allocs, windows = [], []

    def walk(node, ops):
        if node.tag == _EventType.Allocation:
            allocs.append((node, ops))
        if node.name == window_name:
            windows.append(node)
        for child in node.children:
            walk(child, ops + ([node.name] if node.name.startswith("aten::") else []))

    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root, [])
    (w,) = windows
    inside = [(n, ops) for n, ops in allocs if w.start_time_ns <= n.start_time_ns <= w.end_time_ns]
    inside.sort(key=lambda item: item[0].start_time_ns)
    return inside


@pytest.mark.parametrize("name", ["resnet", "transformer", "gru"])
def test_trace_agrees_with_torch_profiler_memory_events(name):
    from torch.profiler import ProfilerActivity, record_function
    from torch.profiler import profile as torch_profile

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # every allocation on this thread, for both recorders
    try:
        torch.manual_seed(0)
        model, make_input = MODELS[name]()
        x = make_input(2)
        with torch.inference_mode():
            model(*x)
            with torch_profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                with record_function("dsa-window"):
                    tr = profile(model, *x)
    finally:
        torch.set_num_threads(threads)
    events = _profiler_allocations(prof, "dsa-window")
    # allocations made inside ATen ops (the window's own bookkeeping is outside any op)
    allocs = [(n, ops) for n, ops in events if n.extra_fields.alloc_size > 0 and ops]
    assert [n.extra_fields.alloc_size for n, _ in allocs] == tr.sizes.tolist()
    # the op the profiler attributes each allocation to is on the trace's op stack
    assert all(ops[-1] in stack for (_, ops), stack in zip(allocs, tr.stacks))
    # every block the trace saw freed was freed in the profiler too (pair by address)
    freed = {n.extra_fields.ptr for n, _ in events if n.extra_fields.alloc_size < 0}
    assert all(allocs[i][0].extra_fields.ptr in freed for i in np.flatnonzero(~tr.escapes))


def test_profile_inside_a_profile_is_refused():
    def nested():
        return profile(lambda: torch.ones(4))

    with pytest.raises(RuntimeError, match="already open on this thread"):
        profile(nested)
    assert list(profile(lambda: torch.ones(4)).sizes) == [16]  # the outer session was closed


def test_a_profiled_pass_runs_in_an_arena_that_outputs_outlive():
    from dsa.adapters.torch import _native

    lib = _native.lib()
    torch.manual_seed(0)
    model, make_input = MODELS["resnet"]()
    x = make_input(2)
    with torch.inference_mode():
        want = model(*x)
        before = lib.dsa_profile_arena_chunks()  # arenas pinned by other tests' outputs
        out, trace = _call_profiled(model, x, {})
        # the pass has ended: its arena stays mapped only for the output, which is intact
        assert lib.dsa_profile_arena_chunks() == before + 1
        churn = [torch.randn(256, 256) for _ in range(8)]  # reuse freed memory elsewhere
        again, _ = _call_profiled(model, x, {})
        assert torch.equal(out, want) and torch.equal(again, want)
        del churn, again
        assert lib.dsa_profile_arena_chunks() == before + 1
        del out
        assert lib.dsa_profile_arena_chunks() == before  # the last block died: the arena is unmapped
    assert trace.escapes.sum() >= 1


def test_a_pass_profiled_without_op_stacks_has_the_same_rows_and_no_stacks():
    torch.manual_seed(0)
    model, make_input = MODELS["resnet"]()
    x = make_input(2)
    with torch.inference_mode():
        want = model(*x)
        out_with, with_stacks = _call_profiled(model, x, {}, op_stacks=True)
        out_without, without = _call_profiled(model, x, {}, op_stacks=False)
    assert torch.equal(out_with, want) and torch.equal(out_without, want)
    for field in ("sizes", "starts", "ends"):
        assert np.array_equal(getattr(with_stacks, field), getattr(without, field)), field
    assert without.clock == with_stacks.clock
    assert all(stack == () for stack in without.stacks) and set(without.ops) == {""}
    assert sum(1 for stack in with_stacks.stacks if stack) == len(with_stacks)


def test_a_thread_profiling_without_op_stacks_records_none_while_another_records_them():
    """The op-stack callback is process-wide: it must not label the passes that did not ask for it."""
    import threading

    started, go = threading.Event(), threading.Event()
    other = {}

    def slow(t):
        y = t * 2  # an allocation under aten::mul, before waiting
        started.set()
        go.wait(10)
        return y + 1

    def run_other():
        with torch.inference_mode():
            other["out"], other["trace"] = _call_profiled(slow, (torch.ones(64),), {}, op_stacks=True)

    torch.manual_seed(0)
    model, make_input = MODELS["resnet"]()
    x = make_input(2)
    thread = threading.Thread(target=run_other)
    thread.start()
    try:
        assert started.wait(10)
        with torch.inference_mode():
            _, mine = _call_profiled(model, x, {}, op_stacks=False)
    finally:
        go.set()
        thread.join()
    assert len(mine) > 20 and all(stack == () for stack in mine.stacks)
    assert any("aten::mul" in stack for stack in other["trace"].stacks)
