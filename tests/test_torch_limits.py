"""attach() under unusual use: a bounded plan cache, never-repeating signatures, outputs that a
replay took from the slab, and plain callables."""
from __future__ import annotations

import gc
import os
import warnings

import pytest

torch = pytest.importorskip("torch")

from dsa.adapters.torch import PlanningWarning, attach  # noqa: E402


def mlp(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16)).eval()


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


# ------------------------------------------------------------------ item 6: a bounded plan cache
def test_signature_limit_evicts_the_least_recently_used():
    net = mlp()
    m = attach(net, max_signatures=3, strategy="greedy_by_size")
    with torch.inference_mode():
        for batch in range(1, 9):
            x = torch.randn(batch, 16)
            for _ in range(3):
                assert torch.equal(m(x), net(x))
        r = m.report()
        assert r["signatures"] == 3 and r["evictions"] == 5 and r["profiles"] == 8
        # a recently used signature stays; an evicted one is planned again when it comes back
        x6, x1 = torch.randn(6, 16), torch.randn(1, 16)
        m(x6)
        assert m.report()["profiles"] == 8
        assert torch.equal(m(x1), net(x1))
        r = m.report()
        assert r["profiles"] == 9 and r["evictions"] == 6 and r["signatures"] == 3
        assert torch.equal(m(x1), net(x1)) and m.report()["replays"] == r["replays"] + 1


def test_byte_limit_gives_back_idle_slabs_and_keeps_replaying():
    net = mlp()
    m = attach(net, max_slab_bytes=0, strategy="greedy_by_size")
    xs = [torch.randn(b, 16) for b in (64, 128, 256)]
    with torch.inference_mode():
        expected = [net(x) for x in xs]
        for _ in range(4):
            for x, y in zip(xs, expected):
                assert torch.equal(m(x), y)
    r = m.report()
    assert r["profiles"] == 3 and r["replays"] == 9 and r["fallbacks"] == 0
    assert r["slab_trims"] >= 6  # every switch of signature gives the previous slab back
    latest = r["plans"][-1]["slab_bytes"]
    assert 0 < r["resident_slab_bytes"] <= latest  # only the latest slab is kept
    assert r["bytes_from_slab"] > 0


def test_default_limits_bound_many_distinct_shapes():
    net = mlp()
    m = attach(net, strategy="greedy_by_size", max_signatures=16, max_slab_bytes=2**20)
    with torch.inference_mode():
        for batch in range(1, 61):
            x = torch.randn(batch * 8, 16)
            for _ in range(2):
                assert torch.equal(m(x), net(x))
    r = m.report()
    assert r["signatures"] == 16 and r["evictions"] == 44
    largest = max(p["slab_bytes"] for p in r["plans"])
    assert r["resident_slab_bytes"] <= 2**20 + largest


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "64"])
def test_limits_are_checked(bad):
    with pytest.raises(ValueError, match="max_signatures"):
        attach(mlp(), max_signatures=bad)
    if bad != 0:
        with pytest.raises(ValueError, match="max_slab_bytes"):
            attach(mlp(), max_slab_bytes=bad)


def test_limits_can_be_lifted():
    m = attach(mlp(), max_signatures=None, max_slab_bytes=None)
    with torch.inference_mode():
        for batch in range(1, 70):
            x = torch.randn(batch, 16)
            m(x)
            m(x)
    assert m.report()["signatures"] == 69 and m.report()["evictions"] == 0


# ------------------------------------------------------------------ item 8: never-repeating signatures
class TakesAnything(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 32)

    def forward(self, x, scale, tag=None):
        return torch.relu(self.lin(x)) * (2.0 if scale != scale else scale)


def test_nan_argument_repeats():
    torch.manual_seed(0)
    net = TakesAnything().eval()
    x = torch.randn(4, 16)
    m = attach(net)
    with torch.inference_mode():
        outs = [m(x, float("nan")) for _ in range(5)]
        expected = net(x, float("nan"))
    assert all(torch.equal(o, expected) for o in outs)
    r = m.report()
    assert r["signatures"] == 1 and r["profiles"] == 1 and r["replays"] == 4


def test_never_repeating_signatures_run_eagerly_and_stay_bounded():
    torch.manual_seed(0)
    net = TakesAnything().eval()
    x = torch.randn(4, 16)
    keep = []  # fresh objects kept alive: their ids never repeat
    m = attach(net, max_signatures=32)
    with torch.inference_mode():
        expected = net(x, 3.0)
        for _ in range(200):
            keep.append(object())
            assert torch.equal(m(x, 3.0, keep[-1]), expected)
        r = m.report()
        assert r["profiles"] <= 9, r["profiles"]  # 8 plans that were never replayed, then no more
        assert r["deferred_calls"] >= 190 and r["signatures"] <= 9
        assert len(m._seen) <= m._seen_limit
        # a signature that does repeat is still planned (at its second call) and replayed
        tag = object()
        for _ in range(4):
            assert torch.equal(m(x, 3.0, tag), expected)
    after = m.report()
    assert after["profiles"] == r["profiles"] + 1 and after["replays"] == r["replays"] + 2


def test_first_calls_that_do_repeat_are_planned_at_once():
    torch.manual_seed(0)
    net = TakesAnything().eval()
    m = attach(net, strategy="greedy_by_size")
    with torch.inference_mode():
        for batch in range(1, 21):
            x = torch.randn(batch, 16)
            m(x, 1.0)
            m(x, 1.0)
    r = m.report()
    assert r["profiles"] == 20 and r["replays"] == 20 and r["deferred_calls"] == 0


# ------------------------------------------------------------------ item 7: outputs that came from the slab
class PicksByData(torch.nn.Module):
    """Returns one of two small results of a big intermediate, chosen by the data."""

    def __init__(self, width=64):
        super().__init__()
        self.width = width

    def forward(self, x):
        h = x.repeat(1, self.width)
        a = h.sum(dim=1)
        b = h.amax(dim=1)
        return a if bool(x[0, 0] > 0) else b


def _signed_inputs(rows=64, cols=256):
    torch.manual_seed(0)
    xs = [torch.randn(rows, cols) for _ in range(2)]
    xs[0][0, 0], xs[1][0, 0] = 1.0, -1.0
    return xs


def test_output_picked_by_a_branch_is_learned_and_leaves_the_slab():
    net = PicksByData()
    xs = _signed_inputs()
    m = attach(net)
    kept = []
    with torch.inference_mode():
        expected = [net(x) for x in xs]
        for i in range(40):
            kept.append((i % 2, m(xs[i % 2])))
    assert all(torch.equal(y, expected[k]) for k, y in kept)
    r = m.report()
    assert r["profiles"] == 1 and r["fallbacks"] == 0
    assert r["escaped_blocks"] == 1  # learned once, then served by the default allocator
    assert r["plans"][0]["escaped"] == 1 and r["plans"][0]["replans"] == 1
    assert r["replays"] == 39 and r["bytes_from_slab"] > 0


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_kept_outputs_of_a_slab_do_not_pin_its_memory():
    net = PicksByData(width=1024)  # a 64 MiB intermediate, outputs of 256 bytes
    xs = _signed_inputs()
    with torch.inference_mode():
        expected = [net(x) for x in xs]
        m = attach(net, max_replans=0)  # no replan: the signature goes eager after the escape
        m(xs[0])
        m(xs[0])
        gc.collect()
        before = _rss_bytes()
        with pytest.warns(PlanningWarning, match="outlived the pass"):
            y = m(xs[1])  # this output comes from the slab
        kept = [y] + [m(xs[i % 2]) for i in range(20)]
        gc.collect()
        after = _rss_bytes()
    assert torch.equal(y, expected[1]) and all(torch.equal(k, expected[i % 2]) for i, k in enumerate(kept[1:]))
    assert m.report()["plans"][0]["eager"]
    # only the output's page of the released 64 MiB region stays resident
    assert after - before < 24 * 2**20, f"RSS grew by {(after - before) / 2**20:.1f} MiB"
    del kept, y


# ------------------------------------------------------------------ item 9: plain callables
def test_plain_function_is_planned_and_replayed():
    torch.manual_seed(0)
    w = torch.randn(64, 64)

    def f(x):
        return torch.tanh(x @ w) @ w + 1

    m = attach(f)
    x = torch.randn(16, 64)
    with torch.inference_mode():
        outs = [m(x) for _ in range(4)]
        expected = f(x)
    assert all(torch.equal(o, expected) for o in outs)
    r = m.report()
    assert r["profiles"] == 1 and r["replays"] == 3 and r["bytes_from_slab"] > 0
    assert m.detach() is f


def test_bound_method_keys_on_its_modules_training_flag():
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.0)).eval()
    m = attach(net.forward)
    x = torch.randn(2, 8)
    with torch.inference_mode():
        m(x)
        net.train()
        m(x)
    assert m.report()["signatures"] == 2


def test_attaching_twice_or_a_non_callable_is_a_type_error():
    with pytest.raises(TypeError, match="torch.nn.Module or callable"):
        attach(3)
    with pytest.raises(TypeError, match="already attached"):
        attach(attach(mlp()))


def test_callable_object_and_lambda():
    net = mlp()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = attach(lambda x: net(x) * 2)
        x = torch.randn(3, 16)
        with torch.inference_mode():
            assert all(torch.equal(m(x), net(x) * 2) for _ in range(3))
    assert m.report()["replays"] == 2


def test_bound_method_owner_is_not_registered_twice():
    net = mlp()
    m = attach(net.forward)
    assert list(m.state_dict()) == [] and not list(m.parameters())
    m = attach(net)
    assert set(m.state_dict()) == {f"module.{k}" for k in net.state_dict()}
