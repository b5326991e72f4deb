"""Trimming torch.onnx's per-node metadata keeps every source irtrace reads from it."""
import onnx
import pytest

torch = pytest.importorskip("torch")

from irtrace.export import torch_export


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 3, 3, padding=1)
        self.lin = torch.nn.Linear(3, 4)

    def forward(self, x):
        y = torch.relu(self.conv(x)).mean((2, 3))
        return torch.tanh(self.lin(y))


def test_trimmed_metadata_gives_the_same_sources():
    program = torch.onnx.export(Block().eval(), (torch.randn(1, 2, 5, 5),), dynamo=True, optimize=False)
    raw = program.model_proto
    before = {n.name: torch_export._source(n) for n in raw.graph.node}
    size = raw.ByteSize()
    for n in raw.graph.node:
        torch_export._trim_metadata(n)
    assert {n.name: torch_export._source(n) for n in raw.graph.node} == before
    assert any("file_line" in s for s in before.values()) and any(s.get("module") for s in before.values())
    assert raw.ByteSize() < size
    onnx.checker.check_model(raw)


def test_trim_keeps_only_the_last_user_frame():
    node = onnx.helper.make_node("Relu", ["x"], ["y"], name="n")
    trace = (f'  File "{torch_export._TORCH_DIR}/nn/modules/module.py", line 1, in _call_impl\n    return f()\n'
             '  File "/home/u/model.py", line 10, in forward\n    y = self.a(x)\n'
             '  File "/home/u/model.py", line 20, in forward\n    return torch.relu(y)\n'
             f'  File "{torch_export._TORCH_DIR}/_ops.py", line 5, in __call__\n    return g()')
    node.metadata_props.add(key="pkg.torch.onnx.stack_trace", value=trace)
    node.metadata_props.add(key="pkg.torch.onnx.other", value="x" * 100)
    before = torch_export._source(node)
    torch_export._trim_metadata(node)
    assert [p.key for p in node.metadata_props] == ["pkg.torch.onnx.stack_trace"]
    assert node.metadata_props[0].value == '  File "/home/u/model.py", line 20, in forward\n    return torch.relu(y)'
    assert torch_export._source(node) == before and before["file_line"].endswith("model.py:20")
