"""A step that cannot fit in this machine's memory is refused with its reason before it runs (never an
OOM kill midway): an export whose module's parameters alone need more than is available, a replayed call
whose inputs do. $IRTRACE_MEMORY_AVAILABLE stands in for the machine's MemAvailable."""
import json
import re

import pytest
import torch

import irtrace
from irtrace.errors import IrtraceError
from irtrace.export.torch_export import EXPORT_HOLDS
from irtrace.replay import ReplayOptions, execute
from irtrace.report.folder import replay_into


def test_an_export_that_cannot_fit_is_refused_before_any_work(tmp_path, monkeypatch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(100, 50), torch.nn.BatchNorm1d(50))
    # by hand: 100*50 + 50 weights and bias, 50 + 50 BN affine, 50 + 50 running stats (float32) and
    # num_batches_tracked (int64): 5250 * 4 + 8 bytes
    nbytes = 5250 * 4 + 8
    assert EXPORT_HOLDS * nbytes == 210080
    monkeypatch.setenv("IRTRACE_MEMORY_AVAILABLE", "200000")
    with pytest.raises(IrtraceError) as e:
        irtrace.export(model, (torch.randn(4, 100),), tmp_path / "m.irt")
    assert str(e.value) == (
        "exporting Sequential needs about 0.21 MB of memory and 0.20 MB is available: its parameters and buffers "
        "(21.0 kB; the largest "
        "0.weight, 50x100 float32, 20.0 kB) are held about 10 times (the module, the ONNX graph, the recorded "
        "values, gradients and directions); export a part of the model, or on a machine with more memory")
    assert not (tmp_path / "m.irt").exists()
    monkeypatch.setenv("IRTRACE_MEMORY_AVAILABLE", str(EXPORT_HOLDS * nbytes))  # exactly enough: exported
    assert irtrace.export(model, (torch.randn(4, 100),), tmp_path / "m.irt").path.exists()


def test_a_call_that_cannot_fit_is_a_gap_with_its_sizes_not_a_finding(example_bundle, tmp_path, monkeypatch):
    bundle = example_bundle("resnet")  # exported before the machine is made small
    monkeypatch.setattr(execute, "MEMORY_CHECKED", 0)  # every call checked, not only those needing 1 GB
    monkeypatch.setenv("IRTRACE_MEMORY_AVAILABLE", "300000")
    written = replay_into(bundle, ReplayOptions(cache=False), tmp_path / "out")
    report = json.loads((written.out / "report.json").read_text())
    refused = [r for n in report["nodes"] for r in n["results"] if r["verdict"] == "UNSUPPORTED"
               and "of memory" in r["message"]]
    assert refused and not report["findings"] and report["summary"]["MATCH"] > 0
    for r in refused:
        m = re.search(r"needs about ([\d.]+) (kB|MB) of memory and 0.30 MB is available: it sends ([\d.]+) kB \(the "
                      r"largest, \S+, [\dx]+ float32, [\d.]+ kB\), held about 20 times", r["message"])
        assert m, r["message"]
        need = float(m.group(1)) * (1e3 if m.group(2) == "kB" else 1e6)
        assert need > 3e5 and need == pytest.approx(20 * float(m.group(3)) * 1e3, rel=0.02)
    # every call small enough was sent and judged
    passed = [r for n in report["nodes"] for r in n["results"] if r["verdict"] == "MATCH"]
    assert all(r["mode"] for r in passed)
