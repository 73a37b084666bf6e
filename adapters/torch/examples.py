"""Small example models for exercising the PyTorch memory-planning adapter.

The models here are written in plain :mod:`torch.nn` (no torchvision) and are
meant for tests and benchmarks of the adapter, not for accuracy.  Each one is
tiny, so a forward pass at batch 8 runs in a few milliseconds on a CPU, yet is
structured like a real network so that it allocates many intermediate buffers
with overlapping lifetimes: convolutions with residual adds, depthwise
convolutions, attention, recurrent layers, in-place ops on views, several
outputs, tensors kept alive on the module, and a forward that raises midway.
Two larger ones, :class:`UNetLike` (encoder-decoder with skip concatenations
and upsampling) and :class:`MobileNetV2Like` (the MobileNetV2 layout at half
width), are allocation-heavy at image sizes 64 to 224.

:data:`MODELS` maps a name to a zero-argument factory returning
``(model, make_input)``; ``make_input(batch)`` returns a tuple of positional
inputs built from a fixed-seed :class:`torch.Generator`, so inputs are the same
on every call.  Models are returned in ``eval()`` mode; their weights depend on
the global RNG, so call :func:`torch.manual_seed` first for reproducible
weights.  :data:`ZOO` lists the names used by benchmarks.

:func:`sized` builds a model for a given input size: the image side for image
models, the sequence length for sequence models (see :data:`SIZE_KIND`);
:data:`SIZES` are the sizes of the latency study.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["ResNetLike", "MobileNetLike", "TransformerLike", "GRULike", "InplaceViews", "MultiOutput",
           "StashOnSelf", "RaisesOnFlag", "UNetLike", "MobileNetV2Like", "MODELS", "ZOO", "SIZES", "SIZE_KIND",
           "sized", "flatten_outputs"]

_INPUT_SEED = 1234


def _conv_bn(cin: int, cout: int, k: int = 3, stride: int = 1, groups: int = 1) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]


class BasicBlock(nn.Module):
    """ResNet basic block: two 3x3 convs with a residual add.

    Parameters
    ----------
    cin, cout : int
        Input and output channels.
    stride : int, optional
        Stride of the first conv; when it is not 1 or channels change, the
        shortcut is a strided 1x1 conv with batch norm.
    """

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1, self.bn1 = _conv_bn(cin, cout, 3, stride)
        self.conv2, self.bn2 = _conv_bn(cout, cout, 3)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(*_conv_bn(cin, cout, 1, stride))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNetLike(nn.Module):
    """Small ResNet-style CNN for ``(B, 3, 32, 32)`` images.

    Stem conv + BatchNorm + ReLU + MaxPool, three basic blocks (the middle
    one strided with a 1x1 downsample), global average pool and a linear head.

    Parameters
    ----------
    num_classes : int, optional
        Size of the output logits.
    """

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(*_conv_bn(3, 16), nn.ReLU(inplace=True), nn.MaxPool2d(2))
        self.layers = nn.Sequential(BasicBlock(16, 16), BasicBlock(16, 32, stride=2), BasicBlock(32, 32))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.pool(self.layers(self.stem(x)))
        return self.fc(torch.flatten(h, 1))


class InvertedResidual(nn.Module):
    """MobileNetV2 block: 1x1 expand, 3x3 depthwise, 1x1 linear projection.

    Parameters
    ----------
    cin, cout : int
        Input and output channels.
    stride : int
        Stride of the depthwise conv.
    expand : int
        Expansion ratio of the hidden width.
    """

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.body = nn.Sequential(
            *_conv_bn(cin, hidden, 1), nn.ReLU6(inplace=True),
            *_conv_bn(hidden, hidden, 3, stride, groups=hidden), nn.ReLU6(inplace=True),
            *_conv_bn(hidden, cout, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.body(x)
        return x + out if self.use_res else out


class MobileNetLike(nn.Module):
    """Small MobileNetV2-style network for ``(B, 3, 32, 32)`` images.

    Parameters
    ----------
    num_classes : int, optional
        Size of the output logits.
    """

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(*_conv_bn(3, 16, 3, 2), nn.ReLU6(inplace=True))
        self.blocks = nn.Sequential(
            InvertedResidual(16, 16, 1, 4), InvertedResidual(16, 24, 2, 4),
            InvertedResidual(24, 24, 1, 4), InvertedResidual(24, 32, 2, 4),
            InvertedResidual(32, 32, 1, 4),
        )
        self.head = nn.Sequential(*_conv_bn(32, 64, 1), nn.ReLU6(inplace=True), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.head(self.blocks(self.stem(x))).flatten(1))


class TransformerLike(nn.Module):
    """Tiny transformer encoder classifier over ``(B, T)`` token ids.

    Parameters
    ----------
    vocab : int, optional
        Vocabulary size; inputs must be in ``[0, vocab)``.
    seq_len : int, optional
        Maximum sequence length (size of the positional table).
    d_model, nhead, num_layers : int, optional
        Encoder width, attention heads and depth.
    num_classes : int, optional
        Size of the output logits.
    fused : bool, optional
        If False (default) the layers use a SiLU feed-forward, which keeps
        PyTorch off its fused ``_transformer_encoder_layer_fwd`` fast path, so
        attention, layer norms and the MLP run as separate ops with their own
        intermediates.  If True they use GELU, and in eval mode without grad
        (and without forward hooks) each layer runs as one fused op.
    """

    def __init__(self, vocab: int = 100, seq_len: int = 16, d_model: int = 64, nhead: int = 4,
                 num_layers: int = 2, num_classes: int = 10, fused: bool = False) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.randn(seq_len, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=4 * d_model, dropout=0.0,
                                           activation="gelu" if fused else F.silu, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.fc = nn.Linear(d_model, num_classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.tok(ids) + self.pos[: ids.shape[1]]
        return self.fc(self.encoder(h).mean(dim=1))


class GRULike(nn.Module):
    """Two-layer GRU over ``(B, T, F)`` sequences with a linear head on the last step.

    Parameters
    ----------
    input_size, hidden_size, num_classes : int, optional
        Feature, hidden and output sizes.
    """

    def __init__(self, input_size: int = 16, hidden_size: int = 32, num_classes: int = 10) -> None:
        super().__init__()
        self.gru = nn.GRU(input_size, hidden_size, num_layers=2, batch_first=True)
        self.fc = nn.Linear(hidden_size, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(x)
        return self.fc(out[:, -1])


class InplaceViews(nn.Module):
    """Mixes in-place ops on intermediates with views, slices and copies.

    Uses ``relu_``, ``add_``, ``mul_`` (on intermediates and on a slice of
    one, never on the input), ``transpose``, ``reshape``, ``chunk``,
    ``cat``, ``contiguous`` and advanced indexing.  Input ``(B, 3, 16, 16)``,
    output ``(B, 4)``.  Forward works with grad enabled; backward is not
    supported (the in-place ops overwrite values autograd saved).
    """

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.proj = nn.Linear(16, 16)
        self.register_buffer("index", torch.tensor([0, 2, 4, 6, 1, 3, 5, 7]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv(x)                      # (B, 8, 16, 16)
        h.relu_()
        a, b = h[:, :4], h[:, 4:]             # slice views (in-place allowed even with grad on)
        a.mul_(0.5)                           # in-place through a view
        c = b.transpose(2, 3).contiguous()    # copy of a permuted view
        c.add_(a)
        d = torch.cat([c, h[:, ::2]], dim=1)  # strided slice, (B, 8, 16, 16)
        d = d[:, self.index]                  # gather channels
        e = self.proj(d.reshape(d.shape[0], -1, 16))  # (B, 128, 16)
        e.mul_(torch.sigmoid(e))
        p, q = e.chunk(2, dim=1)              # read-only views, (B, 64, 16)
        return (p * q).reshape(-1, 4, 16, 16).sum(dim=(2, 3))


class MultiOutput(nn.Module):
    """Returns ``(logits, features_view, {"aux": ...})`` for ``(B, 3, 16, 16)`` inputs.

    The second output is a view (a slice) of an intermediate and the dict
    value is a reshaped view of another intermediate.
    """

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1))
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        feats = self.body(x)
        pooled = feats.mean(dim=(2, 3))
        logits = self.fc(pooled)
        return logits, feats[:, :4], {"aux": pooled.view(-1)}


class StashOnSelf(nn.Module):
    """Keeps an intermediate alive on ``self.stash`` and returns a different tensor.

    Input ``(B, 16)``; ``self.stash`` holds the hidden activation after the call.
    """

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8)
        self.stash: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        self.stash = h
        return self.fc2(h * 2.0)


class RaisesOnFlag(nn.Module):
    """Raises ``RuntimeError("requested failure")`` midway through forward when asked.

    Input ``(B, 16)``.  ``forward(x, fail=True)`` runs a few ops, allocating
    intermediates, and then raises; with ``fail=False`` it returns normally.
    """

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x: torch.Tensor, fail: bool = False) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        h = h * torch.sigmoid(h)
        if fail:
            raise RuntimeError("requested failure")
        return self.fc2(h)


class UNetLike(nn.Module):
    """Small U-Net for ``(B, 3, H, W)`` images, ``H`` and ``W`` divisible by 8.

    Three encoder levels (two 3x3 conv + BatchNorm + ReLU, then a 2x2 max-pool), a
    bottleneck, and three decoder levels (nearest 2x upsampling, concatenation with the
    encoder's skip tensor, two 3x3 convs), then a 1x1 conv to ``num_classes`` maps of
    size ``H x W``.  Every level allocates full-resolution intermediates that live until
    the decoder consumes the skip, so a forward pass allocates many large, overlapping
    buffers.

    Parameters
    ----------
    base : int, optional
        Channels of the first level; each level doubles them.
    num_classes : int, optional
        Channels of the output map.
    """

    def __init__(self, base: int = 8, num_classes: int = 2) -> None:
        super().__init__()

        def double(cin: int, cout: int) -> nn.Sequential:
            return nn.Sequential(*_conv_bn(cin, cout), nn.ReLU(inplace=True), *_conv_bn(cout, cout),
                                 nn.ReLU(inplace=True))

        c1, c2, c3, c4 = base, 2 * base, 4 * base, 8 * base
        self.enc1, self.enc2, self.enc3 = double(3, c1), double(c1, c2), double(c2, c3)
        self.bottleneck = double(c3, c4)
        self.dec3, self.dec2, self.dec1 = double(c4 + c3, c3), double(c3 + c2, c2), double(c2 + c1, c1)
        self.head = nn.Conv2d(c1, num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s1 = self.enc1(x)
        s2 = self.enc2(F.max_pool2d(s1, 2))
        s3 = self.enc3(F.max_pool2d(s2, 2))
        h = self.bottleneck(F.max_pool2d(s3, 2))
        h = self.dec3(torch.cat([F.interpolate(h, scale_factor=2.0, mode="nearest"), s3], dim=1))
        h = self.dec2(torch.cat([F.interpolate(h, scale_factor=2.0, mode="nearest"), s2], dim=1))
        h = self.dec1(torch.cat([F.interpolate(h, scale_factor=2.0, mode="nearest"), s1], dim=1))
        return self.head(h)


def _divisible(v: float, d: int = 8) -> int:
    return max(d, int(v + d / 2) // d * d)


class MobileNetV2Like(nn.Module):
    """The MobileNetV2 layout (17 inverted residual blocks) at a width multiplier, for ``(B, 3, H, W)``.

    Stem 3x3 conv with stride 2, the blocks of MobileNetV2 (expansion, channels, repeats,
    stride): ``(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
    (6, 160, 3, 2), (6, 320, 1, 1)``, a 1x1 conv to 1280 channels, global average pool and
    a linear head.  At half width and 224 x 224 it costs about 0.1 GFLOP per image.

    Parameters
    ----------
    width : float, optional
        Channel multiplier (channels rounded to multiples of 8).
    num_classes : int, optional
        Size of the output logits.
    """

    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1))

    def __init__(self, width: float = 0.5, num_classes: int = 10) -> None:
        super().__init__()
        cin = _divisible(32 * width)
        self.stem = nn.Sequential(*_conv_bn(3, cin, 3, 2), nn.ReLU6(inplace=True))
        blocks = []
        for t, c, n, s in self.SETTINGS:
            cout = _divisible(c * width)
            for i in range(n):
                blocks.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Sequential(*_conv_bn(cin, 1280, 1), nn.ReLU6(inplace=True), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(1280, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.head(self.blocks(self.stem(x))).flatten(1))


InputMaker = Callable[[int], tuple]
Factory = Callable[[], tuple[nn.Module, InputMaker]]


def _inputs(*shape: int, vocab: int | None = None) -> InputMaker:
    """Input maker for one tensor of shape ``(batch, *shape)``: normal floats, or token ids < vocab."""
    def make_input(batch: int) -> tuple:
        g = torch.Generator().manual_seed(_INPUT_SEED)
        if vocab is None:
            return (torch.randn(batch, *shape, generator=g),)
        return (torch.randint(0, vocab, (batch, *shape), generator=g),)
    return make_input


def _factory(cls: type[nn.Module], make_input: InputMaker) -> Factory:
    def build() -> tuple[nn.Module, InputMaker]:
        return cls().eval(), make_input
    build.__doc__ = f"Build ``{cls.__name__}`` in eval mode and return it with its input maker."
    return build


MODELS: dict[str, Factory] = {
    "resnet": _factory(ResNetLike, _inputs(3, 32, 32)),
    "mobilenet": _factory(MobileNetLike, _inputs(3, 32, 32)),
    "transformer": _factory(TransformerLike, _inputs(16, vocab=100)),
    "gru": _factory(GRULike, _inputs(12, 16)),
    "inplace_views": _factory(InplaceViews, _inputs(3, 16, 16)),
    "multi_output": _factory(MultiOutput, _inputs(3, 16, 16)),
    "stash_on_self": _factory(StashOnSelf, _inputs(16)),
    "raises": _factory(RaisesOnFlag, _inputs(16)),
    "unet": _factory(UNetLike, _inputs(3, 64, 64)),
    "mobilenet_v2": _factory(MobileNetV2Like, _inputs(3, 64, 64)),
}
"""Name -> zero-argument factory returning ``(model, make_input)``."""

ZOO: tuple[str, ...] = ("resnet", "mobilenet", "transformer", "gru", "inplace_views", "multi_output")
"""Names of the realistic models used by benchmarks."""


SIZES: tuple[int, ...] = (64, 128, 224)
"""Input sizes of the latency study (image side, or sequence length)."""

SIZE_KIND: dict[str, str] = {
    "resnet": "image", "mobilenet": "image", "multi_output": "image", "unet": "image", "mobilenet_v2": "image",
    "transformer": "sequence", "gru": "sequence",
}
"""What :func:`sized`'s ``size`` means per model: ``"image"`` (``size x size`` images) or
``"sequence"`` (sequence length).  Models not listed here have a fixed input size."""


def sized(name: str, size: int | None = None) -> tuple[nn.Module, InputMaker]:
    """Build model ``name`` in eval mode for inputs of the given size.

    Parameters
    ----------
    name : str
        A key of :data:`MODELS`.
    size : int or None, optional
        For image models (:data:`SIZE_KIND`), the side of the square input images; for
        sequence models the sequence length (the transformer's positional table is built
        that long).  None gives ``MODELS[name]()``, the model's own default input.

    Returns
    -------
    (nn.Module, InputMaker)
        As the factories of :data:`MODELS`: the model and ``make_input(batch)``.

    Raises
    ------
    ValueError
        If ``name`` has a fixed input size and ``size`` is not None.

    Examples
    --------
    >>> model, make_input = sized("unet", 64)
    >>> tuple(make_input(2)[0].shape)
    (2, 3, 64, 64)
    """
    if size is None:
        return MODELS[name]()
    kind = SIZE_KIND.get(name)
    if kind is None:
        if name not in MODELS:
            raise KeyError(name)
        raise ValueError(f"model {name!r} has a fixed input size")
    if kind == "image":
        return MODELS[name]()[0], _inputs(3, size, size)
    if name == "transformer":
        return TransformerLike(seq_len=size).eval(), _inputs(size, vocab=100)
    return GRULike().eval(), _inputs(size, 16)


def flatten_outputs(out: Any) -> list[torch.Tensor]:
    """Flatten the tensors out of a nested output structure.

    Parameters
    ----------
    out : Any
        A tensor, or tuples/lists/dicts nesting tensors; other leaves are ignored.

    Returns
    -------
    list of torch.Tensor
        Tensors in depth-first order; dicts are visited in sorted key order.

    Examples
    --------
    >>> t = torch.zeros(1)
    >>> len(flatten_outputs((t, {"b": t, "a": [t, 3]})))
    3
    """
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for k in sorted(out) for t in flatten_outputs(out[k])]
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in flatten_outputs(item)]
    return []
