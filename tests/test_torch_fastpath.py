"""The native per-call path of attach(): which calls it serves, and that everything else still works."""
from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch")

from dsa.adapters.torch import _native, attach  # noqa: E402


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 64)
        self.fc2 = torch.nn.Linear(64, 8)
        self.fail = False

    def forward(self, x):
        h = torch.relu(self.fc1(x)) * 2
        if self.fail:
            raise RuntimeError("requested failure")
        return self.fc2(h)


@pytest.fixture
def mlp():
    torch.manual_seed(0)
    return Mlp().eval(), torch.randn(4, 16)


def fast_or_skip(m):
    if m._fast is None:
        pytest.skip("the native per-call path is not available with this torch build")
    return m._fast


def natively_served(net, x, **options):
    """``attach(net)`` after three calls with ``x`` (profile, then replays that bind the native
    path), and its dispatcher; skips when the native path is not available."""
    m = attach(net, **options)
    fast = fast_or_skip(m)
    with torch.inference_mode():
        for _ in range(3):
            m(x)
    return m, fast


def replays(m) -> int:
    return m.report()["replays"]


def test_a_replayed_signature_is_served_natively(mlp):
    net, x = mlp
    m = attach(net)
    fast = fast_or_skip(m)
    with torch.inference_mode():
        want = net(x)
        outs = [m(x) for _ in range(6)]
    assert all(torch.equal(o, want) for o in outs)
    assert fast.size() == 1  # bound after the first replay of the Python path
    r = m.report()
    assert r["profiles"] == 1 and r["replays"] == 5 and r["fallbacks"] == 0
    assert r["plans"][0]["threads"] == 1


def test_calls_served_natively_count_for_the_caches(mlp):
    net, x = mlp
    m = attach(net)
    fast_or_skip(m)
    with torch.inference_mode():
        for _ in range(5):
            m(x)
        entry = next(iter(m._handles.entries.values()))
        with m._lock:
            m._sync()
    assert entry.calls == 5  # 1 profile + 1 Python replay + 3 native replays


def test_the_key_follows_every_part_of_the_signature(mlp):
    net, x = mlp
    m = attach(net)
    fast = fast_or_skip(m)
    with torch.inference_mode():
        base = fast.key((x,))
        assert base == fast.key((x.clone(),))
        assert fast.key((torch.randn(5, 16),)) != base       # shape
        assert fast.key((x.double(),)) != base               # dtype
        assert fast.key((x.t().contiguous().t(),)) != base   # strides
        net.train()
        assert fast.key((x,)) != base                        # the owner's training flag
        net.eval()
        threads = torch.get_num_threads()
        torch.set_num_threads(threads + 1)
        try:
            assert fast.key((x,)) != base                    # intra-op threads
        finally:
            torch.set_num_threads(threads)
    with torch.no_grad():
        assert fast.key((x,)) != base                        # inference mode
    assert fast.key((x,)) != base                            # grad mode
    assert fast.key((torch.nn.Parameter(x),)) is None        # not a plain tensor: Python decides
    assert fast.key((x, 3)) is None


def test_each_serving_thread_gets_its_own_binding(mlp):
    net, x = mlp
    m = attach(net)
    fast = fast_or_skip(m)
    with torch.inference_mode():
        want = net(x)
        m(x)  # planned here: both threads then replay (two threads planning at once would race to install)
    results, errors = [], []
    both = threading.Barrier(2, timeout=60)  # both threads alive at once: a finished thread's id may be reused

    def serve():
        try:
            with torch.inference_mode():
                results.append(torch.equal(m(x), want))
                both.wait()
                results.extend(torch.equal(m(x), want) for _ in range(19))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=serve) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 40 and all(results)
    assert fast.size() == 2
    r = m.report()
    assert r["plans"][0]["threads"] == 2 and r["fallbacks"] == 0


def test_hooks_on_the_wrapper_still_run(mlp):
    net, x = mlp
    m, _ = natively_served(net, x)
    seen = []
    with torch.inference_mode():
        handle = m.register_forward_hook(lambda mod, args, out: seen.append(out.shape))
        m(x)
        m(x)
        handle.remove()
        m(x)
    assert seen == [torch.Size([4, 8])] * 2
    assert replays(m) == 5


def test_global_module_hooks_still_run(mlp):
    net, x = mlp
    m, _ = natively_served(net, x)
    seen = []
    with torch.inference_mode():
        handle = torch.nn.modules.module.register_module_forward_hook(
            lambda mod, args, out: seen.append(type(mod).__name__))
        try:
            m(x)
        finally:
            handle.remove()
    assert "AttachedModule" in seen


def test_an_exception_in_a_native_replay_propagates_and_the_slab_recovers(mlp):
    net, x = mlp
    m, _ = natively_served(net, x)
    with torch.inference_mode():
        want = net(x)
        net.fail = True
        with pytest.raises(RuntimeError, match="requested failure"):
            m(x)
        net.fail = False
        assert torch.equal(m(x), want)
        assert torch.equal(m(x), want)


def test_a_native_replay_that_misses_goes_back_to_python():
    class Branchy(torch.nn.Module):
        wide = False

        def forward(self, x):
            h = x * 2
            if self.wide:
                h = torch.cat([h, h], 1)
            return (h + 1).sum(1)

    net, x = Branchy(), torch.randn(4, 32)
    m, fast = natively_served(net, x, max_replans=1)
    with torch.inference_mode():
        assert fast.size() == 1
        net.wide = True
        assert torch.equal(m(x), net(x))  # the native replay falls back; Python marks the plan stale
        assert fast.size() == 0
        assert torch.equal(m(x), net(x))  # profiled and planned again
    r = m.report()
    assert r["fallbacks"] == 1 and r["profiles"] == 2


def test_detach_stops_the_native_path(mlp):
    net, x = mlp
    m, fast = natively_served(net, x)
    with torch.inference_mode():
        m.detach()
        assert not fast.enabled and fast.size() == 0
        assert torch.equal(m(x), net(x))


def test_without_the_native_path_calls_take_the_python_path(mlp, monkeypatch):
    net, x = mlp
    monkeypatch.setattr(_native, "_fast", False)  # as when the tensor layout check fails
    m = attach(net)
    assert m._fast is None
    with torch.inference_mode():
        want = net(x)
        assert all(torch.equal(m(x), want) for _ in range(4))
    assert replays(m) == 3


def test_the_layout_check_reads_the_tensor_pointer():
    fast = _native.fast()
    if fast is None:
        pytest.skip("the native per-call path is not available with this torch build")
    t = torch.randn(3)
    assert fast.impl_address(t) == t._cdata
    assert fast.impl_address(object()) is None  # an object too small to hold one is not read



def test_allocations_of_threads_without_a_session_are_counted():
    started, finished = threading.Event(), threading.Event()

    class Waits(torch.nn.Module):
        def forward(self, x):
            h = x * 2
            started.set()
            assert finished.wait(10)
            return h + 1

    def other_thread():
        assert started.wait(10)
        torch.empty(1000, dtype=torch.float32).fill_(1)  # 4000 bytes while the session is open
        finished.set()

    m = attach(Waits())
    before = _native.other_threads()
    t = threading.Thread(target=other_thread)
    t.start()
    with torch.inference_mode():
        out = m(torch.ones(8))
    t.join()
    after = _native.other_threads()
    assert torch.equal(out, torch.full((8,), 3.0))
    assert after[0] - before[0] >= 1 and after[1] - before[1] >= 4000
