"""attach(model): replayed forwards are bit-identical to eager, and the safety rules hold."""
from __future__ import annotations

import dataclasses
import gc
import threading
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dsa  # noqa: E402
from dsa.adapters.torch import AttachedModule, PlanningWarning, attach  # noqa: E402
from dsa.adapters.torch.examples import MODELS, ZOO, flatten_outputs  # noqa: E402

REPORT_KEYS = {"signatures", "planned_allocations", "slab_bytes", "lower_bound_bytes", "bytes_from_slab",
               "bytes_from_default", "fallbacks", "misses"}


def build(name, batch=2, seed=0):
    torch.manual_seed(seed)
    model, make_input = MODELS[name]()
    return model, make_input(batch)


def same(a, b) -> bool:
    fa, fb = flatten_outputs(a), flatten_outputs(b)
    return len(fa) == len(fb) and all(x.dtype == y.dtype and torch.equal(x, y) for x, y in zip(fa, fb))


@pytest.mark.parametrize("mode", ["inference_mode", "no_grad"])
@pytest.mark.parametrize("name", ZOO)
def test_replays_are_bit_identical_to_eager(name, mode):
    model, x = build(name)
    guard = getattr(torch, mode)
    with guard():
        expected = model(*x)
        m = attach(model)
        outs = [m(*x) for _ in range(6)]  # 1 profile + 5 replays
        problem, solution = m.plan(*x)    # same signature: no new profile
    assert all(same(expected, out) for out in outs)
    r = m.report()
    assert REPORT_KEYS <= set(r)
    assert r["signatures"] == 1 and r["profiles"] == 1 and r["replays"] == 5
    assert r["fallbacks"] == 0 and r["misses"] == 0
    assert r["bytes_from_slab"] > 0 and r["planned_allocations"] > 0
    # the plan is valid and, with the default portfolio, within 2 % of LOAD
    dsa.validate(problem, solution.offsets)
    assert r["lower_bound_bytes"] == dsa.load(problem)
    assert r["slab_bytes"] == solution.peak <= 1.02 * dsa.load(problem)


def test_replayed_outputs_do_not_alias_each_other():
    model, x = build("multi_output")
    with torch.inference_mode():
        m = attach(model)
        outs = [m(*x) for _ in range(4)]
        expected = model(*x)
    # outputs escape the pass, so later passes must not write over earlier outputs
    assert all(same(expected, out) for out in outs)


def test_signature_change_gets_a_new_plan():
    model, _ = build("resnet")
    make_input = MODELS["resnet"]()[1]
    with torch.inference_mode():
        m = attach(model)
        for batch in (1, 3, 1, 3, 1):
            x = make_input(batch)
            assert same(model(*x), m(*x))
    r = m.report()
    assert r["signatures"] == 2 and r["profiles"] == 2 and r["replays"] == 3 and r["fallbacks"] == 0


def test_strides_and_dtype_are_part_of_the_signature():
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU()).eval()
    x = torch.randn(16, 8)
    with torch.inference_mode():
        m = attach(net)
        m(x)
        m(x.t().contiguous().t())  # same shape, other strides
        m(x.double().float())      # same signature as x
        with pytest.raises(RuntimeError):
            m(x.double())          # new signature; the model itself rejects float64
    assert m.report()["signatures"] == 2


def test_stashed_intermediate_survives_later_calls():
    model, x = build("stash_on_self")
    with torch.inference_mode():
        m = attach(model)
        kept = []
        for _ in range(5):
            m(*x)
            kept.append((model.stash, model.stash.clone()))
        for _ in range(5):
            m(*x)
    assert all(torch.equal(t, copy) for t, copy in kept)


class StashSometimes(torch.nn.Module):
    """Keeps an intermediate only on even calls: a block freed in the profiled pass escapes later."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(32, 32)
        self.calls = 0
        self.kept = []

    def forward(self, x):
        h = torch.relu(self.lin(x))
        g = h * 2
        if self.calls % 2 == 1:
            self.kept.append(h)
        self.calls += 1
        return self.lin(g) + 1


def test_block_that_escapes_a_replay_is_never_overwritten():
    torch.manual_seed(0)
    model = StashSometimes().eval()
    x = torch.randn(4, 32)
    with torch.inference_mode():
        expected_h = torch.relu(model.lin(x))
        expected_y = model.lin(expected_h * 2) + 1
        m = attach(model)
        ys = [m(x) for _ in range(8)]
    assert all(torch.equal(y, expected_y) for y in ys)
    assert len(model.kept) == 4
    assert all(torch.equal(h, expected_h) for h in model.kept)
    assert m.report()["fallbacks"] == 0  # a fresh region was taken instead


def test_four_threads_each_get_correct_outputs():
    model, _ = build("resnet")
    make_input = MODELS["resnet"]()[1]
    inputs = [(make_input(2)[0] * (k + 1),) for k in range(4)]
    with torch.inference_mode():
        expected = [model(*x) for x in inputs]
    m = attach(model)
    errors, results = [], {k: [] for k in range(4)}
    barrier = threading.Barrier(4)

    def run(k):
        try:
            barrier.wait()
            with torch.inference_mode():
                for _ in range(8):
                    results[k].append(m(*inputs[k]))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k in range(4):
        assert len(results[k]) == 8 and all(same(expected[k], out) for out in results[k])
    r = m.report()
    assert r["replays"] > 0 and r["bytes_from_slab"] > 0
    assert max(p["threads"] for p in r["plans"]) >= 2  # more than one thread got its own slab


def test_exception_inside_forward_leaves_the_allocator_consistent():
    model, x = build("raises")
    with torch.inference_mode():
        expected = model(*x)
        m = attach(model)
        assert same(expected, m(*x))  # profile
        assert same(expected, m(*x))  # replay
        with pytest.raises(RuntimeError, match="requested failure"):
            m(*x, fail=True)         # new signature: fails while profiling
        with pytest.raises(RuntimeError, match="requested failure"):
            m(*x, fail=True)         # still not planned
        for _ in range(3):
            assert same(expected, m(*x))
    assert m.report()["signatures"] == 1


class FailsOnAttribute(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)
        self.fail = False

    def forward(self, x):
        h = torch.relu(self.lin(x))
        h = self.lin(h) * 3
        if self.fail:
            raise RuntimeError("requested failure")
        return self.lin(h)


def test_exception_during_a_replay():
    torch.manual_seed(0)
    model = FailsOnAttribute().eval()
    x = torch.randn(8, 16)
    with torch.inference_mode():
        expected = model(x)
        m = attach(model)
        m(x)
        model.fail = True
        with pytest.raises(RuntimeError, match="requested failure"):
            m(x)  # same signature: raises inside a replay
        model.fail = False
        outs = [m(x) for _ in range(3)]
    assert all(torch.equal(expected, y) for y in outs)


class WidthFromAttribute(torch.nn.Module):
    """Allocation sizes depend on an attribute the signature cannot see."""

    def __init__(self):
        super().__init__()
        self.width = 8

    def forward(self, x):
        h = x.repeat(1, self.width)
        return (h * 2).sum(dim=1)


def test_size_mismatch_falls_back_then_replans():
    model = WidthFromAttribute()
    x = torch.randn(4, 16)
    with torch.inference_mode():
        m = attach(model, max_replans=1)
        m(x)
        m(x)
        model.width = 9  # replay sees other sizes
        assert torch.equal(m(x), model(x))
        r = m.report()
        assert r["fallbacks"] == 1 and r["misses"] > 0
        assert torch.equal(m(x), model(x))  # re-profiled
        assert m.report()["profiles"] == 2
        assert torch.equal(m(x), model(x))  # replays the new plan
        assert m.report()["fallbacks"] == 1
        model.width = 10  # misses again: over the replan limit, so it runs eagerly
        with pytest.warns(PlanningWarning, match="runs eagerly"):
            assert torch.equal(m(x), model(x))
        assert torch.equal(m(x), model(x))
    r = m.report()
    assert r["eager_calls"] >= 1 and r["plans"][0]["eager"]


def test_autograd_enabled_gives_the_same_gradients():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4))
    x = torch.randn(8, 16)

    def grads(module):
        module.zero_grad()
        out = module(x)
        out.square().sum().backward()
        return out.detach().clone(), [p.grad.clone() for p in model.parameters()]

    y0, g0 = grads(model)
    m = attach(model)
    for _ in range(4):
        y, g = grads(m)
        assert torch.equal(y, y0)
        assert all(torch.equal(a, b) for a, b in zip(g, g0))
    assert m.report()["replays"] == 3


def test_nested_attached_modules():
    torch.manual_seed(0)
    inner = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU())
    outer = torch.nn.Sequential(torch.nn.Linear(16, 16), inner, torch.nn.Linear(16, 2)).eval()
    x = torch.randn(4, 16)
    with torch.inference_mode():
        expected = outer(x)
        outer[1] = attach(inner)
        m = attach(outer)
        outs = [m(x) for _ in range(4)]
    assert all(torch.equal(expected, y) for y in outs)
    assert outer[1].report()["eager_calls"] >= 3  # inside a replay the inner wrapper runs eagerly


def test_detach_returns_the_model_and_stops_planning():
    model, x = build("gru")
    with torch.inference_mode():
        m = attach(model)
        m(*x)
        m(*x)
        assert m.detach() is model
        replays = m.report()["replays"]
        assert same(model(*x), m(*x))
    assert m.report()["replays"] == replays and m.report()["signatures"] == 0


def test_wrapper_is_a_module_around_the_model():
    model, x = build("resnet")
    m = attach(model)
    assert isinstance(m, AttachedModule) and isinstance(m, torch.nn.Module)
    assert m.module is model
    assert {n for n, _ in m.named_parameters()} == {f"module.{n}" for n, _ in model.named_parameters()}
    m.train()
    assert model.training
    m.eval()
    assert not model.training


def test_plan_profiles_on_demand_and_returns_a_valid_plan():
    model, x = build("mobilenet")
    with torch.inference_mode():
        m = attach(model, strategy="greedy_by_size")
        problem, solution = m.plan(*x)
    assert solution.strategy == "greedy_by_size" and solution.success
    dsa.validate(problem, solution.offsets)
    assert all(int(a) == 64 for a in problem.alignments)
    assert (solution.offsets % 64 == 0).all()


def test_bad_arguments():
    with pytest.raises(TypeError, match="torch.nn.Module or callable"):
        attach(3)
    with pytest.raises(ValueError, match="max_replans"):
        attach(torch.nn.ReLU(), max_replans=-1)
    with pytest.raises(ValueError, match="unknown strategy"):
        attach(torch.nn.Linear(2, 2), strategy="nope")
    with pytest.raises(ValueError, match="always validates"):
        attach(torch.nn.Linear(2, 2), validate=False)
    with pytest.raises(ValueError, match="op_stacks must be True or False"):
        attach(torch.nn.Linear(2, 2), op_stacks="yes")


def test_a_bad_plan_is_never_replayed():
    """A strategy whose plan overlaps: the adapter validates it, warns and runs eagerly."""
    def everything_at_zero(problem):
        return [0] * len(problem)

    net, x = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)).eval(), \
        torch.randn(8, 4)
    with torch.inference_mode():
        expected = net(x)
        m = attach(net, strategy=everything_at_zero)
        with pytest.warns(PlanningWarning, match="failed validation"):
            first = m(x)
        later = m(x)
    assert torch.equal(first, expected) and torch.equal(later, expected)
    assert m.report()["bytes_from_slab"] == 0


def test_strategies_with_a_time_limit_get_a_short_one_per_signature():
    net = torch.nn.Linear(4, 4)
    assert attach(net)._solve_options == {"time_limit": 0.2, "validate": True}
    assert attach(net, time_limit=3.0)._solve_options["time_limit"] == 3.0
    assert attach(net, strategy="greedy_by_size")._solve_options == {"validate": True}


@pytest.mark.parametrize("capacity, reason", [(64, "smaller than the buffer"), (131072, "INFEASIBLE")])
def test_unplannable_signature_warns_and_runs_eagerly(capacity, reason):
    model, x = build("resnet")
    with torch.inference_mode():
        m = attach(model, capacity=capacity)  # the largest block fits, the whole pass does not
        with pytest.warns(PlanningWarning, match=reason):
            y = m(*x)
        assert same(model(*x), y) and same(model(*x), m(*x))
    r = m.report()
    assert r["eager_calls"] == 1 and r["signatures"] == 1 and r["plans"][0]["eager"]
    assert r["slab_bytes"] == 0 and r["replays"] == 0


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.skipif(not hasattr(__import__("os"), "sysconf"), reason="needs /proc")
def test_replays_keep_rss_flat_and_serve_from_the_slab():
    model, x = build("resnet", batch=1)
    with torch.inference_mode():
        m = attach(model)
        for _ in range(50):
            m(*x)
        gc.collect()
        start = m.report()
        # RSS after each of three blocks of 500 replays: a leak grows it in every block, while the
        # process's other allocations (other tests' threads, the allocator's arenas) can grow it once
        # in some test orders (once by 8.9 MiB over 1000 replays in a full run)
        rss = [_rss_bytes()]
        for _ in range(3):
            for _ in range(500):
                m(*x)
            gc.collect()
            rss.append(_rss_bytes())
    end = m.report()
    from_slab = end["bytes_from_slab"] - start["bytes_from_slab"]
    from_default = end["bytes_from_default"] - start["bytes_from_default"]
    assert end["replays"] - start["replays"] == 1500 and end["fallbacks"] == 0, (start, end)
    assert from_slab / (from_slab + from_default) > 0.90, (from_slab, from_default)
    growth = np.diff(rss) / 2**20
    assert growth.min() < 2, f"RSS grew in every block of 500 replays (MiB): {growth.round(1).tolist()}"


def test_no_warning_on_plain_use():
    model, x = build("transformer")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlanningWarning)
        with torch.inference_mode():
            m = attach(model)
            for _ in range(3):
                m(*x)


def test_plan_rejects_inputs_that_cannot_be_planned():
    m = attach(torch.nn.Identity())
    sparse = torch.eye(3).to_sparse()
    with pytest.raises(ValueError, match="only strided CPU tensors"):
        m.plan(sparse)
    assert m(sparse) is sparse and m.report()["eager_calls"] == 1  # a call runs eagerly instead


# ------------------------------------------------------------------ where plans are made
def _mlp():
    net = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)).eval()
    return net, torch.randn(8, 4)


@pytest.fixture
def no_head(monkeypatch):
    """Plans of ``best`` skip the head (its greedy members at the bound, made here): the helper plans."""
    from dsa.strategies import best

    monkeypatch.setattr(best, "portfolio_head", lambda problem: None)


def _warned_then_replayed(match):
    """Attach the MLP, call it twice (the first call warns with ``match``); outputs equal eager."""
    net, x = _mlp()
    with torch.inference_mode():
        expected = net(x)
        m = attach(net)
        with pytest.warns(PlanningWarning, match=match):
            first = m(x)
        later = m(x)
    assert torch.equal(first, expected) and torch.equal(later, expected)
    return m


@pytest.mark.parametrize("planner", ["process", "inline"])
def test_plans_are_made_where_the_planner_option_says(planner, no_head):
    net, x = _mlp()
    with torch.inference_mode():
        expected = net(x)
        m = attach(net, planner=planner)
        outs = [m(x) for _ in range(3)]
    assert all(torch.equal(o, expected) for o in outs)
    rep = m.report()
    assert [p["planned_in"] for p in rep["plans"]] == [planner]
    assert rep["bytes_from_slab"] > 0 and rep["planner_fallbacks"] == 0


@pytest.mark.parametrize("op_stacks", [False, True])
def test_op_stacks_are_recorded_only_when_asked_and_the_plan_does_not_depend_on_them(op_stacks):
    model, x = build("resnet")
    with torch.inference_mode():
        expected = model(*x)
        m = attach(model, op_stacks=op_stacks)
        outs = [m(*x) for _ in range(3)]
        problem, solution = m.plan(*x)
    assert all(torch.equal(o, expected) for o in outs)
    trace = next(iter(m._handles.entries.values())).trace
    labelled = sum(1 for stack in trace.stacks if stack)
    assert labelled == (len(trace) if op_stacks else 0)
    assert solution.success and m.report()["fallbacks"] == 0
    dsa.validate(problem, solution.offsets)


def test_a_callable_strategy_plans_inline_and_a_bad_planner_is_refused():
    net, x = _mlp()
    m = attach(net, strategy=lambda problem: dsa.solve(problem, "greedy_by_size").offsets)
    with torch.inference_mode():
        m(x)
    assert m.report()["plans"][0]["planned_in"] == "inline"
    with pytest.raises(ValueError, match="planner must be one of"):
        attach(net, planner="thread")


def test_a_plan_at_the_bound_by_bests_first_member_needs_no_helper(monkeypatch):
    """The head of best's portfolio plans the MLP at its bound here; the helper is never asked."""
    from dsa import _planner_process

    class Unused:
        def solve(self, *args, **kwargs):
            raise AssertionError("the helper was asked")

    monkeypatch.setattr(_planner_process, "shared", lambda: Unused())
    net, x = _mlp()
    with torch.inference_mode():
        expected = net(x)
        m = attach(net)
        outs = [m(x) for _ in range(3)]
        problem, solution = m.plan(x)
    assert all(torch.equal(o, expected) for o in outs)
    assert solution.status is dsa.Status.OPTIMAL and solution.stats["planned_in"] == "inline"
    assert solution.stats["member"] == "size/first"
    assert np.array_equal(solution.offsets, dsa.solve(problem, "best").offsets)


def test_best_with_other_options_or_another_strategy_asks_the_helper(monkeypatch):
    from dsa import _planner_process

    asked = []

    class Recording:
        def solve(self, problem, strategy, options, timeout=None):
            asked.append((strategy, sorted(options)))
            return dsa.solve(problem, strategy, **{k: v for k, v in options.items() if k != "validate"})

    monkeypatch.setattr(_planner_process, "shared", lambda: Recording())
    net, x = _mlp()
    with torch.inference_mode():
        for kwargs in ({"seed": 3}, {"strategy": "greedy_by_size"}):
            attach(net, **kwargs)(x)
    assert [a[0] for a in asked] == ["best", "greedy_by_size"]
    with pytest.warns(PlanningWarning, match="time_limit must be a positive number"):
        with torch.inference_mode():
            attach(net, time_limit=-1)(x)  # refused as best.solve would refuse it


def test_without_a_planner_process_the_plan_is_made_inline(monkeypatch, no_head):
    from dsa import _planner_process

    class Broken:
        def solve(self, *args, **kwargs):
            raise _planner_process.PlannerUnavailable("cannot start the planner process: test")

    monkeypatch.setattr(_planner_process, "shared", lambda: Broken())
    m = _warned_then_replayed("plans in this process instead.*test")
    rep = m.report()
    assert rep["planner_fallbacks"] == 1 and rep["plans"][0]["planned_in"] == "inline"
    assert rep["bytes_from_slab"] > 0


def test_a_bad_plan_from_the_planner_process_is_never_replayed(monkeypatch, no_head):
    """The helper's plan is validated in the served process: an overlapping one runs eagerly."""
    from dsa import _planner_process

    class Lying:
        def solve(self, problem, strategy, options, timeout=None):
            good = dsa.solve(problem, "greedy_by_size")
            return dataclasses.replace(good, offsets=np.zeros(len(problem), np.int64))

    monkeypatch.setattr(_planner_process, "shared", lambda: Lying())
    m = _warned_then_replayed("failed validation")
    assert m.report()["bytes_from_slab"] == 0 and m.report()["plans"][0]["status"] == "ERROR"


def test_an_attached_model_never_loads_numba_in_the_served_process():
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import sys, torch
        from dsa.adapters.torch import attach
        from dsa.adapters.torch.examples import MODELS
        from dsa.strategies import best
        torch.manual_seed(0)
        model, make_input = MODELS["unet"]()
        x = make_input(2)
        for head in (True, False):
            if not head:  # the helper plans
                best.portfolio_head = lambda problem: None
            m = attach(model)
            with torch.inference_mode():
                expected = model(*x)
                outs = [m(*x) for _ in range(3)]
            rep = m.report()
            print(all(torch.equal(o, expected) for o in outs), rep["bytes_from_slab"] > 0,
                  rep["plans"][0]["planned_in"], "numba" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "inline", "False", "True", "True", "process", "False"]


@pytest.mark.parametrize("planner", ["process", "inline"])
def test_a_bad_solve_option_fails_loudly_wherever_the_plan_is_made(planner):
    net, x = _mlp()
    m = attach(net, planner=planner, sweep=None)
    with torch.inference_mode(), pytest.raises(TypeError, match="sweep is computed by dsa.solve"):
        m(x)
