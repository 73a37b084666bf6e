"""ExecuTorch arenas planned by dsa against ExecuTorch's own planners (``make bench-executorch``).

For each model: export (torch.export), lower (to_edge, to_executorch) and plan the same tensor specs
with ExecuTorch's greedy and naive algorithms and dsa's ``best`` and ``exact``
(:func:`dsa.adapters.executorch.compare`), against LOAD of the specs (sizes aligned as ExecuTorch
aligns them). Models: the ExecuTorch example models that build offline (no download) and export
here, plus transformer-class models built in code. Then every dsa ``best`` plan is lowered again and
run in ExecuTorch's runtime against ExecuTorch's own plan: outputs must be bit-identical.

Writes ``<out>.json``, ``<out>.md`` (a table for docs/results.md and docs/executorch.md) and
``<out>.png`` (arena over LOAD per model and planner).

Usage: ``python benchmarks/executorch_arenas.py [--out docs/results/executorch] [--time-limit 10]``
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

# ----------------------------------------------------------------------------- models built in code


class CausalBlock(nn.Module):
    def __init__(self, d, heads):
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
    """A decoder-only LM: embedding, causal attention blocks (SDPA), LM head."""

    def __init__(self, vocab=512, d=128, heads=4, blocks=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(*[CausalBlock(d, heads) for _ in range(blocks)])
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, tokens):
        return self.head(self.norm(self.blocks(self.emb(tokens))))


class MixerBlock(nn.Module):
    def __init__(self, tokens, d):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.t1, self.t2 = nn.Linear(tokens, 2 * tokens), nn.Linear(2 * tokens, tokens)
        self.c1, self.c2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.t2(F.gelu(self.t1(self.n1(x).transpose(1, 2)))).transpose(1, 2)
        return x + self.c2(F.gelu(self.c1(self.n2(x))))


class MLPMixer(nn.Module):
    def __init__(self, patch=4, image=32, d=128, blocks=4, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, d, patch, stride=patch)
        self.blocks = nn.Sequential(*[MixerBlock((image // patch) ** 2, d) for _ in range(blocks)])
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, x):
        x = self.stem(x).flatten(2).transpose(1, 2)
        return self.head(self.norm(self.blocks(x)).mean(1))


def _dw_separable(cin, cout, stride):
    return nn.Sequential(nn.Conv2d(cin, cin, 3, stride, 1, groups=cin), nn.BatchNorm2d(cin), nn.ReLU6(),
                         nn.Conv2d(cin, cout, 1), nn.BatchNorm2d(cout), nn.ReLU6())


class InvertedResidual(nn.Module):
    def __init__(self, c, expand=4):
        super().__init__()
        h = c * expand
        self.body = nn.Sequential(nn.Conv2d(c, h, 1), nn.BatchNorm2d(h), nn.ReLU6(),
                                  nn.Conv2d(h, h, 3, 1, 1, groups=h), nn.BatchNorm2d(h), nn.ReLU6(),
                                  nn.Conv2d(h, c, 1), nn.BatchNorm2d(c))

    def forward(self, x):
        return x + self.body(x)


class MobileNetLike(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU6(),
            _dw_separable(16, 24, 2), InvertedResidual(24), _dw_separable(24, 32, 2), InvertedResidual(32),
            InvertedResidual(32), _dw_separable(32, 64, 2), InvertedResidual(64), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(64, 100)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


class UNetLike(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.d1, self.d2 = nn.Conv2d(3, c, 3, 1, 1), nn.Conv2d(c, 2 * c, 3, 2, 1)
        self.mid = nn.Conv2d(2 * c, 2 * c, 3, 1, 1)
        self.up = nn.ConvTranspose2d(2 * c, c, 2, 2)
        self.out = nn.Conv2d(2 * c, 3, 3, 1, 1)

    def forward(self, x):
        a = F.relu(self.d1(x))
        b = F.relu(self.mid(F.relu(self.d2(a))))
        return self.out(torch.cat([a, self.up(b)], 1))


def built_in_models():
    """``name -> (make_model, make_inputs)`` of the models written here."""
    return {
        "encoder (3 layers, d=192, seq 96)": (
            lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(192, 4, 384, batch_first=True,
                                                                     dropout=0.0), 3),
            lambda: (torch.randn(1, 96, 192),)),
        **{f"causal LM (2 blocks, d=128, seq {t})": (CausalLM, (lambda t=t: (torch.randint(0, 512, (1, t)),)))
           for t in (64, 128, 256)},
        "MLP-mixer (4 blocks)": (MLPMixer, lambda: (torch.randn(1, 3, 32, 32),)),
        "MobileNet-like": (MobileNetLike, lambda: (torch.randn(1, 3, 96, 96),)),
        "U-Net-like": (UNetLike, lambda: (torch.randn(1, 3, 64, 64),)),
    }


# ExecuTorch's example models that are built from code (no download, no torchvision)
EXAMPLES = ["ds_cnn", "mobilenet_v1_025", "resnet8", "deep_autoencoder", "lstm", "sdpa", "softmax", "add_mul"]


def example_models():
    """``name -> (make_model, make_inputs)`` for the ExecuTorch examples that build here; skipped ones."""
    out, skipped = {}, {}
    try:
        from executorch.examples.models import MODEL_NAME_TO_MODEL
        from executorch.examples.models.model_factory import EagerModelFactory
    except Exception as exc:  # the wheel may not ship the examples
        return out, {name: f"examples not importable: {exc}" for name in EXAMPLES}
    for name in EXAMPLES:
        try:
            module, cls = MODEL_NAME_TO_MODEL[name]
            model, inputs, *_ = EagerModelFactory.create_model(module, cls)
            out[f"example: {name}"] = (lambda model=model: model, lambda inputs=inputs: tuple(inputs))
        except Exception as exc:
            skipped[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    return out, skipped


# ----------------------------------------------------------------------------- measuring


def measure(name, make_model, make_inputs, time_limit):
    from executorch.exir import to_edge
    from executorch.runtime import Runtime

    from dsa.adapters.executorch import compare, lower

    torch.manual_seed(0)
    model = make_model().eval()
    for p in model.parameters():
        p.requires_grad_(False)
    inputs = make_inputs()
    with torch.no_grad():
        edge = to_edge(torch.export.export(model, inputs))
    rows = compare(edge, ("best", "exact"), time_limit=time_limit)
    # proof by running: dsa best's program against ExecuTorch's own, in the runtime
    ours, theirs = lower(edge, "best", time_limit=time_limit), lower(edge, None)
    runtime = Runtime.get()
    flat = torch.utils._pytree.tree_flatten(inputs)[0]  # the runtime takes a flat list of tensors
    a = runtime.load_program(ours.buffer).load_method("forward").execute(flat)
    b = runtime.load_program(theirs.buffer).load_method("forward").execute(flat)
    identical = len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))
    by = {r["algorithm"]: r for r in rows}
    return dict(model=name, specs=rows[0]["specs"], rows=rows, identical=identical,
                **{k: by[k]["total"] for k in by})


def write_markdown(results, skipped, path, meta):
    lines = [
        "# ExecuTorch arenas: dsa against ExecuTorch's own planners",
        "",
        f"Generated {meta['date']} on {meta['platform']}, {meta['cores']} cores by `make bench-executorch` "
        f"(`python benchmarks/executorch_arenas.py`; executorch {meta['executorch']}, torch {meta['torch']}, "
        f"dsa time limit {meta['time_limit']} s per strategy). Arena bytes of the default `mem_id` over "
        "LOAD of the same tensor specs (sizes aligned as ExecuTorch aligns them); planning seconds in "
        "brackets. *identical*: the dsa-planned program's outputs in ExecuTorch's runtime equal those of "
        "ExecuTorch's own plan bit for bit.",
        "",
        "| model | specs | LOAD (KiB) | dsa best | dsa exact | ExecuTorch greedy | ExecuTorch naive | identical |",
        "|---|---:|---:|---:|---:|---:|---:|:---:|",
    ]

    def cell(r):
        if r["error"]:
            return "failed"
        return f"{r['ratio']:.3f} ({r['seconds']:.3f} s)"

    for res in results:
        by = {r["algorithm"]: r for r in res["rows"]}
        lines.append(f"| {res['model']} | {res['specs']} | {by['LOAD']['total'] / 1024:.1f} | "
                     f"{cell(by['dsa best'])} | {cell(by['dsa exact'])} | {cell(by['executorch greedy'])} | "
                     f"{cell(by['executorch naive'])} | {'yes' if res['identical'] else 'NO'} |")
    saved = [1 - r["dsa best"] / r["executorch greedy"] for r in results]
    lines += ["", f"dsa `best` reaches LOAD on {sum(r['dsa best'] == r['LOAD'] for r in results)} of "
              f"{len(results)} models; against ExecuTorch's greedy it saves {max(saved):.1%} at most and "
              f"{sum(saved) / len(saved):.1%} on average, and is never larger."]
    if skipped:
        lines += ["", "Example models not measured: " + "; ".join(f"`{k}` ({v})" for k, v in skipped.items()) + "."]
    lines += ["", "![arena over LOAD per model](executorch.png)", ""]
    Path(path).write_text("\n".join(lines), encoding="utf-8")


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = [r["model"].replace("example: ", "") for r in results]
    series = [("dsa best", "#3f51b5"), ("dsa exact", "#7986cb"), ("executorch greedy", "#ef6c00")]
    y = np.arange(len(results))
    fig, ax = plt.subplots(figsize=(7.5, 0.32 * len(results) + 1.4), dpi=90)
    h = 0.8 / len(series)
    for k, (algo, color) in enumerate(series):
        vals = [(r[algo] or float("nan")) / r["LOAD"] if r["LOAD"] else 1.0 for r in results]
        ax.barh(y + (k - 1) * h, vals, height=h, color=color, label=algo)
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_yticks(y, names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0.95, max(1.1, max(r["executorch greedy"] / r["LOAD"] for r in results if r["LOAD"]) + 0.05))
    ax.set_xlabel("arena / LOAD (lower is better; naive, up to 21x, not shown)")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/results/executorch", help="path without extension")
    parser.add_argument("--time-limit", type=float, default=10.0)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")

    import executorch  # noqa: F401

    from dsa.precompile import warmup

    warmup()  # numba's cache: planning times without compile time
    models = built_in_models()
    examples, skipped = example_models()
    models.update(examples)
    results = []
    for name, (make_model, make_inputs) in models.items():
        t0 = time.perf_counter()
        try:
            res = measure(name, make_model, make_inputs, args.time_limit)
        except Exception as exc:
            skipped[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
            print(f"{name}: skipped ({skipped[name]})", flush=True)
            continue
        results.append(res)
        print(f"{name}: {res['specs']} specs, LOAD {res['LOAD']}, dsa best {res['dsa best']}, dsa exact "
              f"{res['dsa exact']}, greedy {res['executorch greedy']}, naive {res['executorch naive']}, "
              f"identical {res['identical']} ({time.perf_counter() - t0:.1f} s)", flush=True)
    import executorch.version as etv

    import os

    meta = dict(date=time.strftime("%Y-%m-%d %H:%M"), platform=platform.platform(), cores=os.cpu_count(),
                executorch=getattr(etv, "__version__", "?"),
                torch=torch.__version__, python=platform.python_version(), machine=platform.machine(),
                time_limit=args.time_limit)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(dict(meta=meta, results=results, skipped=skipped), indent=1))
    write_markdown(results, skipped, out.with_suffix(".md"), meta)
    plot(results, out.with_suffix(".png"))
    print(f"wrote {out}.json, {out}.md, {out}.png")
    bad = [r["model"] for r in results if not r["identical"] or r["dsa best"] > r["executorch greedy"]]
    if bad:
        print(f"FAILED: {bad}", file=sys.stderr)
    return 1 if bad or len(results) < 8 else 0


if __name__ == "__main__":
    sys.exit(main())
