"""``python -m dsa.adapters.torch``: every example model replays bit-identically; the heap map shows op stacks."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")

from dsa.adapters.torch.__main__ import main  # noqa: E402


def test_demo_replays_every_model_and_writes_an_html_heap_map_with_op_stacks(tmp_path, capsys):
    path = tmp_path / "map.html"
    assert main(["--batch", "1", "--replays", "1", "--plot", str(path)]) == 0
    out = capsys.readouterr().out
    assert " NO" not in out and "heap map of resnet" in out
    page = path.read_text()
    assert "aten::convolution" in page  # the tooltips carry the ops that allocated each block
