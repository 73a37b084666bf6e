"""dsa plans ExecuTorch's memory arenas (dsa.adapters.executorch), proven by running the programs.

Each model is exported with torch.export, lowered with to_edge and to_executorch twice (ExecuTorch's
own planner, and dsa's ``memory_planning_algo``), and both programs run in ExecuTorch's runtime: the
outputs must be bit-identical (same kernels, different addresses), dsa's arenas no larger than
ExecuTorch's and within 1.001 x LOAD of the same specs, and no two tensors of one arena may overlap
in both time and address (checked here pair by pair, independently of dsa's validator, and by
ExecuTorch's own ``Verifier``).
"""
from __future__ import annotations

import copy
import subprocess
import sys
import types

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch")
pytest.importorskip("executorch.runtime")

from executorch.exir import ExecutorchBackendConfig, to_edge  # noqa: E402
from executorch.exir.dialects._ops import ops as exir_ops  # noqa: E402
from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite, Verifier, greedy  # noqa: E402
from executorch.exir.passes import MemoryPlanningPass  # noqa: E402
from executorch.exir.tensor import TensorSpec  # noqa: E402
from executorch.runtime import Runtime  # noqa: E402

import dsa  # noqa: E402
from dsa.adapters.executorch import (compare, convert, memory_planning_algo,  # noqa: E402
                                     memory_planning_member, trace)

nn = torch.nn
F = torch.nn.functional


# ---------------------------------------------------------------- models
class CausalBlock(nn.Module):
    """A decoder-only LM block: pre-norm causal self-attention (SDPA) and an MLP."""

    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).split(d, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.down(F.gelu(self.up(self.n2(x))))


class CausalLM(nn.Module):
    def __init__(self, vocab=128, d=64, blocks=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(*[CausalBlock(d) for _ in range(blocks)])
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens):
        return self.head(self.blocks(self.emb(tokens)))


class ResidualMLP(nn.Module):
    def __init__(self, d=64, blocks=3):
        super().__init__()
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(blocks))
        self.ups = nn.ModuleList(nn.Linear(d, 4 * d) for _ in range(blocks))
        self.downs = nn.ModuleList(nn.Linear(4 * d, d) for _ in range(blocks))
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        for norm, up, down in zip(self.norms, self.ups, self.downs):
            x = x + down(F.gelu(up(norm(x))))
        return self.head(x)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.Conv2d(16, 32, 1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc(self.body(x).flatten(1))


class CondModel(nn.Module):
    """torch.cond: ExecuTorch plans each branch first and reserves its arena in the parent's."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 32), nn.Linear(32, 16)

    def forward(self, x):
        def yes(x):
            return (self.b(F.relu(self.a(x))) * 2,)

        def no(x):
            return (self.b(torch.sigmoid(self.a(x))) - 1,)

        y = torch.cond(x.sum() > 0, yes, no, (x,))[0]
        return torch.tanh(y) + x


class Accumulator(nn.Module):
    """A mutable buffer: the state lives in the arena for the whole graph, across executions."""

    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.zeros(4, 32))
        self.l1, self.l2 = nn.Linear(32, 64), nn.Linear(64, 32)

    def forward(self, x):
        y = self.l2(F.relu(self.l1(x)))
        self.acc.add_(y)
        return y * self.acc + 1


class SoftmaxChain(nn.Module):
    """Attention-like softmax; lowered with reinplace_extra_ops={_softmax}, its output shares its input's
    storage (a TensorSpec with a storage_base)."""

    def __init__(self):
        super().__init__()
        self.q, self.o = nn.Linear(32, 32), nn.Linear(32, 32)

    def forward(self, x):
        s = self.q(x) @ x.transpose(-1, -2)
        p = torch.softmax(s * 0.25, dim=-1)
        return self.o(p @ x) + x


def _models():
    return {
        "encoder": (lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(
            64, 4, 128, batch_first=True, dropout=0.0), 2), lambda: (torch.randn(2, 24, 64),), {}),
        "causal_lm": (CausalLM, lambda: (torch.randint(0, 128, (1, 32)),), {}),
        "mlp": (ResidualMLP, lambda: (torch.randn(8, 64),), {}),
        "cnn": (CNN, lambda: (torch.randn(1, 3, 16, 16),), {}),
        "cond": (CondModel, lambda: (torch.randn(4, 16),), {}),
        "mutable_buffer": (Accumulator, lambda: (torch.randn(4, 32),), {}),
        "storage_base": (SoftmaxChain, lambda: (torch.randn(2, 8, 32),),
                         dict(reinplace_extra_ops=frozenset({exir_ops.edge.aten._softmax.default}))),
    }


MODELS = _models()
# where ExecuTorch's greedy leaves room above LOAD, dsa must plan strictly smaller arenas
STRICTLY_SMALLER = ("encoder", "causal_lm", "mlp")


class Lowered(types.SimpleNamespace):
    pass


def _arenas(prog):
    return list(prog.executorch_program.execution_plan[0].non_const_buffer_sizes)


def _run(prog, inputs, times=2):
    method = Runtime.get().load_program(prog.buffer).load_method("forward")
    return [method.execute(list(inputs)) for _ in range(times)]


@pytest.fixture(scope="module", params=list(MODELS))
def lowered(request):
    name = request.param
    make, make_inputs, config = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    for p in model.parameters():
        p.requires_grad_(False)
    inputs = make_inputs()
    with torch.no_grad():
        edge = to_edge(torch.export.export(model, inputs))
    algo = memory_planning_algo("best", time_limit=2.0)
    ours = copy.deepcopy(edge).to_executorch(ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(memory_planning_algo=algo), **config))
    theirs = copy.deepcopy(edge).to_executorch(ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(), **config))
    return Lowered(name=name, edge=edge, config=config, inputs=inputs, algo=algo, ours=ours, theirs=theirs)


# ---------------------------------------------------------------- proof by running
def test_outputs_are_bit_identical_to_executorchs_own_plan(lowered):
    ours, theirs = _run(lowered.ours, lowered.inputs), _run(lowered.theirs, lowered.inputs)
    for a, b in zip(ours, theirs):  # two executions each: state (mutable buffers) carries over
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert torch.equal(x, y), lowered.name


def test_arenas_are_no_larger_than_executorchs_and_reach_load(lowered):
    ours, theirs = _arenas(lowered.ours), _arenas(lowered.theirs)
    assert ours[0] == 0 and len(ours) == len(theirs)
    assert all(a <= b for a, b in zip(ours, theirs)), (ours, theirs)
    if lowered.name in STRICTLY_SMALLER:
        assert sum(ours) < sum(theirs), (ours, theirs)
    table, plan = lowered.algo.history[-1]  # the top-level graph (submodules come first)
    bound = table.lower_bounds()
    assert plan.bufsizes == ours
    for m in range(1, len(ours)):
        assert ours[m] <= 1.001 * bound[m], (m, ours, bound)


def _storage_chain(spec):
    chain = []
    while spec is not None:
        chain.append(spec)
        spec = spec.storage_base
    return chain


def test_no_two_tensors_overlap_in_time_and_address(lowered):
    _assert_disjoint(lowered.algo, lowered.ours)


def _assert_disjoint(algo, prog):
    """No two tensors of one arena overlap in time and address (unless one lives in the other's
    storage), by brute force and by ExecuTorch's own Verifier."""
    for table, _ in algo.history:  # every graph: the submodules', then the top-level one
        specs = table.specs
        assert all(s.mem_offset is not None and s.mem_offset % table.alignment == 0 for s in specs)
        for m, reserved in table.reserved.items():  # the submodules' bytes stay at the bottom
            assert all(s.mem_offset >= reserved for s in specs if s.mem_id == m)
        for i, a in enumerate(specs):
            for b in specs[i + 1:]:
                if a.mem_id != b.mem_id or a.allocated_memory == 0 or b.allocated_memory == 0:
                    continue
                in_time = a.lifetime[0] <= b.lifetime[1] and b.lifetime[0] <= a.lifetime[1]
                in_space = (a.mem_offset < b.mem_offset + b.allocated_memory
                            and b.mem_offset < a.mem_offset + a.allocated_memory)
                if in_time and in_space:  # allowed only when one lives inside the other's storage
                    assert a in _storage_chain(b) or b in _storage_chain(a), (a, b)
    gm = prog.exported_program().graph_module
    verifier = Verifier(gm, True, True, True, prog.exported_program().graph_signature)
    verifier.verify_storage_reuse()  # ExecuTorch's own check (it runs it only for its greedy)
    verifier.verify_graph_input_output()


def test_special_cases_are_really_there(lowered):
    table, _ = lowered.algo.history[-1]
    if lowered.name == "cond":
        assert len(lowered.algo.history) == 3 and table.reserved.get(1, 0) > 0
    if lowered.name == "storage_base":
        assert any(s.storage_base is not None for s in table.specs)
        child = next(s for s in table.specs if s.storage_base is not None)
        assert child.mem_offset == child.storage_base.mem_offset + child.storage_base_offset
    if lowered.name == "mutable_buffer":
        last = max(s.lifetime[1] for s in table.specs)
        assert any(s.lifetime == [0, last] and s.shape == [4, 32] for s in table.specs)


def test_trace_gives_the_same_problem(lowered):
    problem = trace(lowered.edge, config=lowered.config)
    table, plan = lowered.algo.history[-1]
    assert problem == table.problems[1][0]
    assert all(isinstance(label, str) and "(" in label for label in problem.ids)
    assert dsa.load(problem) + table.reserved.get(1, 0) == table.lower_bounds()[1]
    assert dsa.solve(problem, "best").peak == plan.solutions[1].peak


# ---------------------------------------------------------------- other forms and flags
@pytest.fixture(scope="module")
def lm_edge():
    torch.manual_seed(0)
    model = CausalLM(blocks=1).eval()
    inputs = (torch.randint(0, 128, (1, 16)),)
    with torch.no_grad():
        return to_edge(torch.export.export(model, inputs)), inputs


def test_member_of_executorchs_suite(lm_edge):
    edge, inputs = lm_edge
    suite = MemoryPlanningAlgorithmSuite([greedy, memory_planning_member("best")])
    prog = copy.deepcopy(edge).to_executorch(ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(memory_planning_algo=suite)))
    ref = copy.deepcopy(edge).to_executorch(ExecutorchBackendConfig())
    assert sum(_arenas(prog)) < sum(_arenas(ref))
    for a, b in zip(_run(prog, inputs, 1)[0], _run(ref, inputs, 1)[0]):
        assert torch.equal(a, b)


def test_inputs_and_outputs_left_to_the_caller(lm_edge):
    edge, inputs = lm_edge
    algo = memory_planning_algo("best")
    prog = copy.deepcopy(edge).to_executorch(ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(
        memory_planning_algo=algo, alloc_graph_input=False, alloc_graph_output=False)))
    table, _ = algo.history[-1]
    labels = " ".join(table.labels)
    assert "(input)" not in labels
    ref = copy.deepcopy(edge).to_executorch(ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(
        alloc_graph_input=False, alloc_graph_output=False)))
    assert sum(_arenas(prog)) <= sum(_arenas(ref))


def test_compare_rows_and_cli(lm_edge, tmp_path, capsys):
    from dsa.adapters.executorch.__main__ import main

    edge, _ = lm_edge
    rows = compare(edge, strategies=("best", "exact"), time_limit=2.0)
    by = {r["algorithm"]: r for r in rows}
    assert list(by) == ["executorch greedy", "executorch naive", "dsa best", "dsa exact", "LOAD"]
    assert by["dsa best"]["total"] == by["LOAD"]["total"] < by["executorch greedy"]["total"]
    assert by["executorch naive"]["total"] >= by["executorch greedy"]["total"]
    assert all(r["seconds"] >= 0 for r in rows[:-1]) and by["dsa exact"]["ratio"] == 1.0

    # a saved .pt2 through the command line
    torch.manual_seed(0)
    path = tmp_path / "mlp.pt2"
    with torch.no_grad():
        torch.export.save(torch.export.export(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 8)),
                                              (torch.randn(2, 8),)), path)
    assert main(["compare", str(path), "--strategies", "best", "--json", str(tmp_path / "rows.json")]) == 0
    out = capsys.readouterr().out
    assert "executorch greedy" in out and "dsa best" in out and "LOAD" in out
    assert (tmp_path / "rows.json").is_file()
    assert main(["trace", str(path), "-o", str(tmp_path / "t.csv")]) == 0
    assert dsa.read_csv(tmp_path / "t.csv").n > 0


@pytest.mark.parametrize("argv, needle", [
    (["compare", "no/such/model.pt2"], "no such file"),
    (["compare", "__NOTPT2__"], "not a saved torch.export program"),
    (["compare", "__NOTPT2__", "--strategies", "nope"], "unknown strategy"),
    (["compare"], "the following arguments are required"),
])
def test_cli_errors_are_one_line(argv, needle, tmp_path, capsys):
    from dsa.adapters.executorch.__main__ import main

    bad = tmp_path / "bad.pt2"
    bad.write_text("not a zip")
    argv = [str(bad) if a == "__NOTPT2__" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error:") and needle in err[-1], err
    assert "Traceback" not in "\n".join(err)


# ---------------------------------------------------------------- specs it cannot plan
def _graph_with(spec, name="bad_node"):
    g = torch.fx.Graph()
    node = g.placeholder(name)
    g.output(node)
    node.meta["spec"] = spec
    return torch.fx.GraphModule(nn.Module(), g)


def _spec(shape=(4, 8), lifetime=(0, 3)):
    spec = TensorSpec(torch.float32, torch.Size(shape))
    spec.lifetime = list(lifetime)
    return spec


def test_a_spec_without_lifetime_is_named():
    spec = _spec(lifetime=(None, None))
    with pytest.raises(ValueError, match=r"bad_node.*no lifetime"):
        memory_planning_algo()(16, [spec], _graph_with(spec), None, 0)
    assert spec.mem_offset is None  # nothing written


def test_an_unbounded_dynamic_spec_is_named():
    from executorch.exir.schema import TensorShapeDynamism

    spec = _spec()
    spec.shape_dynamism = TensorShapeDynamism.DYNAMIC_UNBOUND
    with pytest.raises(ValueError, match=r"bad_node.*dynamic and unbounded"):
        memory_planning_algo()(16, [spec], _graph_with(spec), None, 0)


def test_fake_specs_with_bad_fields():
    ok = types.SimpleNamespace(lifetime=[0, 2], allocated_memory=64, mem_id=None, storage_base=None)
    negative = types.SimpleNamespace(lifetime=[0, 2], allocated_memory=-16, mem_id=None, storage_base=None)
    with pytest.raises(ValueError, match=r"spec #1.*non-negative integer, got -16"):
        convert(16, [ok, negative], None, 0)
    backwards = types.SimpleNamespace(lifetime=[5, 2], allocated_memory=16, mem_id=None, storage_base=None)
    with pytest.raises(ValueError, match=r"spec #0.*lifetime \[5, 2\]"):
        convert(16, [backwards], None, 0)
    zero_arena = types.SimpleNamespace(lifetime=[0, 2], allocated_memory=16, mem_id=0, storage_base=None)
    with pytest.raises(ValueError, match=r"mem_id must be a positive integer"):
        convert(16, [zero_arena], None, 0)
    a = types.SimpleNamespace(lifetime=[0, 2], allocated_memory=16, mem_id=None, storage_base=None,
                              storage_base_offset=0)
    b = types.SimpleNamespace(lifetime=[0, 2], allocated_memory=16, mem_id=None, storage_base=a,
                              storage_base_offset=0)
    a.storage_base = b
    with pytest.raises(ValueError, match=r"circular storage_base"):
        convert(16, [a, b], None, 0)
    big = types.SimpleNamespace(lifetime=[0, 2], allocated_memory=64, mem_id=None, storage_base=ok,
                                storage_base_offset=16)
    with pytest.raises(ValueError, match=r"do not fit in its storage_base"):
        convert(16, [ok, big], None, 0)
    orphan = types.SimpleNamespace(lifetime=[0, 2], allocated_memory=16, mem_id=None, storage_base=ok,
                                   storage_base_offset=0)
    with pytest.raises(ValueError, match=r"not among the specs planned"):
        convert(16, [orphan], None, 0)


def test_conversion_details():
    # inclusive [first, last] -> half-open; sizes realigned; pre-assigned mem_ids; padding; reservation
    a, b, c = _spec((3,), (0, 2)), _spec((5,), (2, 4)), _spec((8,), (1, 1))
    c.mem_id = 2
    gm = _graph_with(a)
    gm.input_mem_buffer_sizes = [0, 40]
    algo = memory_planning_algo("best")
    sizes = algo(32, [a, b, c], gm, None, 64)
    assert (a.allocated_memory, b.allocated_memory, c.allocated_memory) == (32, 32, 32)
    table, _ = algo.history[-1]
    problem = table.problems[1][0]
    assert problem.starts.tolist() == [0, 2] and problem.ends.tolist() == [3, 5]
    assert table.reserved == {1: 64}  # 40 rounded up to the alignment
    assert sizes == [0, 64 + 64 + 64, 32 + 64]  # a and b overlap at node 2
    assert {a.mem_offset, b.mem_offset} == {64, 96} and c.mem_id == 2 and c.mem_offset == 0


def test_importing_the_adapter_imports_neither_torch_nor_executorch():
    code = ("import sys, dsa, dsa.adapters.executorch as e; e.__all__; "
            "print('torch' in sys.modules, 'executorch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# ---------------------------------------------------------------- memory pools onto mem_ids
@pytest.mark.parametrize("name", ["mlp", "cond", "storage_base"])
def test_pools_become_arenas_and_run_bit_identical(name):
    make, make_inputs, config = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    inputs = make_inputs()
    with torch.no_grad():
        edge = to_edge(torch.export.export(model, inputs))
    theirs = copy.deepcopy(edge).to_executorch(ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(), **config))
    whole = _arenas(theirs)[1]
    sram = dsa.Pool("sram", whole // 3, cost=1.0)
    algo = memory_planning_algo("best", time_limit=0.5, pools=[sram, dsa.Pool("dram", None, cost=10.0)])
    ours = copy.deepcopy(edge).to_executorch(ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(memory_planning_algo=algo), **config))
    arenas = _arenas(ours)
    assert len(arenas) >= 3 and arenas[0] == 0 and 0 < arenas[1] <= sram.capacity and arenas[2] > 0
    assert {s.mem_id for table, _ in algo.history for s in table.specs} >= {1, 2}
    for a, b in zip(_run(ours, inputs), _run(theirs, inputs)):
        for x, y in zip(a, b):
            assert torch.equal(x, y), name
    _assert_disjoint(algo, ours)
    assert algo.history[-1][1].solutions[1].pool_names == ("sram", "dram")


def _plan_with(**options):
    from dsa.adapters.executorch._convert import plan

    return plan(convert(16, [_spec()], _graph_with(_spec())), "best", **options)


def test_pool_options_are_checked():
    with pytest.raises(ValueError, match="pool_mem_ids must give each"):
        _plan_with(pools=[dsa.Pool("a", 64), dsa.Pool("b", None)], pool_mem_ids=[1, 1])
    with pytest.raises(ValueError, match="not supported by the ExecuTorch bridge"):
        _plan_with(pools=[dsa.Pool("a", 64), dsa.Pool("b", None)], weights=[1])
    with pytest.raises(ValueError, match="pool_mem_ids needs pools"):
        _plan_with(pool_mem_ids=[1])
