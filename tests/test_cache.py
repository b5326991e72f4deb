"""The reference's and oracle's answers are computed once per bundle (issue 12): a second replay
starts neither, reads BUNDLE.cache/, and writes the same report.json; anything that could change an
answer (the bundle's content, the worker that computes it) is another key; a torn entry is computed
again; --no-cache computes everything."""
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from irtrace.cli import main
from irtrace.export.onnx_bundle import bundle_from_onnx
from irtrace.pipeline import run_replay
from irtrace.replay import backends
from irtrace.replay.worker import WorkerProxy
from test_faults import HERE


def small(path, seed=0):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Sigmoid", ["m"], ["s"], name="sig"),
             helper.make_node("ReduceSum", ["s"], ["y"], name="sum", keepdims=0)]  # a 0-d result
    m = helper.make_model(helper.make_graph(nodes, "g", [x, w], [y]), opset_imports=[helper.make_opsetid("", 17)])
    rng = np.random.default_rng(seed)
    return bundle_from_onnx(m, {"x": rng.standard_normal((2, 3)).astype(np.float32),
                                "w": rng.standard_normal((3, 4)).astype(np.float32)}, path, force=True)


@pytest.fixture
def started(monkeypatch):
    """The names of the workers started, in order."""
    names, real = [], WorkerProxy.start

    def start(self):
        names.append(self.info.name)
        return real(self)
    monkeypatch.setattr(WorkerProxy, "start", start)
    return names


def replay(bundle, out, *extra):
    assert main(["replay", str(bundle.path), "--backend", "torch,onnxruntime", "-o", str(out), *extra]) == 0
    return (Path(out) / "report.json").read_bytes()


def test_second_replay_starts_no_reference_or_oracle_and_reports_the_same(tmp_path, started, capsys):
    b = small(tmp_path / "b.irt")
    cold = replay(b, tmp_path / "cold")
    assert sorted(started) == ["onnxruntime", "oracle", "torch"]
    cache = Path(str(b.path) + ".cache")
    entries = sorted(p.name for p in cache.glob("*.safetensors"))
    assert len(entries) == 2 * 3 * 3  # reference and oracle, three nodes, three modes
    started.clear()
    assert replay(b, tmp_path / "warm") == cold
    assert started == ["onnxruntime"]
    assert sorted(p.name for p in cache.glob("*.safetensors")) == entries

    # a torn entry is computed again, the report the same
    torn = cache / entries[0]
    torn.write_bytes(torn.read_bytes()[:40])
    started.clear()
    assert replay(b, tmp_path / "torn") == cold
    assert len(started) == 2 and started[0] == "onnxruntime"  # and the one whose entry was torn

    # --no-cache: both start, nothing is read
    started.clear()
    assert replay(b, tmp_path / "nocache", "--no-cache") == cold
    assert sorted(started) == ["onnxruntime", "oracle", "torch"]


def test_another_bundle_or_another_reference_is_another_key(tmp_path, started):
    b = small(tmp_path / "b.irt")
    replay(b, tmp_path / "r0")
    b = small(tmp_path / "b.irt", seed=1)  # exported again at the same path: other values
    started.clear()
    replay(b, tmp_path / "r1")
    assert sorted(started) == ["onnxruntime", "oracle", "torch"]

    saved = dict(backends.BACKENDS)
    try:  # a reference that raises in Sigmoid's vjp: its answers must not come from the real one's entries
        info = backends.get("torch")
        backends.register(replace(info, worker="faulty_backend", extra_path=tuple(info.extra_path) + (HERE,),
                                  env={**info.env, "IRTRACE_FAULT_BASE": info.worker,
                                       "IRTRACE_FAULT": "memory:Sigmoid:vjp"}))
        report, _ = run_replay(b.path, "torch,onnxruntime", "fwd,vjp", tmp_path / "faulty", quiet=True)
    finally:
        backends.BACKENDS.clear()
        backends.BACKENDS.update(saved)
    (failed,) = [r for n in report["nodes"] for r in n["results"] if r["verdict"] == "ERROR"]
    assert (failed["node"], failed["mode"]) == ("sig", "vjp") and "MemoryError" in failed["message"]
