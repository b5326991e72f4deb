"""Model Explorer overlays (irtrace replay --model-explorer): the worst verdict, the largest relative error
and the finding id per node and backend, in Model Explorer's node-data format as its own package's
builder (model_explorer.node_data_builder) reads and writes it."""
import json

import onnx
import pytest

from irtrace.cli import main
from irtrace.report import explorer

model_explorer = pytest.importorskip("model_explorer", reason="requirements-explorer.txt not installed")
import dacite  # noqa: E402 (installed with model_explorer, which reads node data with it)
from model_explorer.node_data_builder import GraphNodeData, ModelNodeData  # noqa: E402


def _result(backend, verdict, max_rel=None):
    return {"backend": backend, "verdict": verdict, "max_rel": max_rel}


REPORT = {
    "nodes": [
        {"name": "conv", "results": [_result("paddle", "MATCH", 1e-7), _result("paddle", "DIVERGENT", 0.25),
                                     _result("tensorflow", "NOISE", 3e-6)]},
        {"name": "relu", "results": [_result("paddle", "ERROR"), _result("paddle", "MATCH", 0.0)]},
        {"name": "gemm", "results": []},
    ],
    "findings": [{"id": "paddle-Conv-vjp-divergent-1", "backend": "paddle", "nodes": ["conv"]},
                 {"id": "paddle-Relu-vjp2-error-2", "backend": "paddle", "nodes": ["relu"]}],
}


def test_each_node_gets_its_worst_verdict_largest_error_and_finding_by_hand():
    out = explorer.overlays(REPORT, "g")
    assert sorted(out) == ["paddle.finding.json", "paddle.max_rel.json", "paddle.verdict.json",
                           "tensorflow.max_rel.json", "tensorflow.verdict.json"]
    # severities: MATCH 0, UNSUPPORTED 1, NOISE 2, DIVERGENT 3, NAN_MISMATCH 4, SHAPE_MISMATCH 5, ERROR 6
    assert out["paddle.verdict.json"]["g"]["results"] == {"conv": {"value": 3, "bgColor": "#d33"},
                                                          "relu": {"value": 6, "bgColor": "#a3a"}}
    assert out["tensorflow.verdict.json"]["g"]["results"] == {"conv": {"value": 2, "bgColor": "#7bc"}}
    assert out["paddle.max_rel.json"]["g"]["results"] == {"conv": {"value": 0.25}, "relu": {"value": 0.0}}
    assert out["paddle.finding.json"]["g"]["results"] == {"conv": {"value": "paddle-Conv-vjp-divergent-1"},
                                                          "relu": {"value": "paddle-Relu-vjp2-error-2"}}


def test_the_overlays_are_what_model_explorer_s_own_builder_reads_and_writes():
    defaults = json.loads(GraphNodeData(results={}).to_json_string())
    for name, data in explorer.overlays(REPORT, "g").items():
        numeric = not name.endswith(".finding.json")  # a string value: the UI's non-numerical node data
        graph = dacite.from_dict(GraphNodeData, data["g"], config=dacite.Config(strict=True, check_types=numeric))
        assert json.loads(ModelNodeData(graphsData={"g": graph}).to_json_string()) == {"g": {**defaults, **data["g"]}}


def test_replay_writes_them_keyed_by_the_graph_s_node_names(tmp_path, capsys):
    assert main(["export", "models_for_tests:tiny", "--input", "x=2x2x8x8", "-o", str(tmp_path / "t.irt")]) == 0
    assert main(["replay", str(tmp_path / "t.irt"), "--backend", "onnxruntime", "--modes", "fwd", "--model-explorer",
                 "-o", str(tmp_path / "out")]) == 0
    graph = onnx.load(str(tmp_path / "t.irt" / "graph.onnx"), load_external_data=False).graph
    written = sorted(p.name for p in (tmp_path / "out" / "model_explorer").iterdir())
    assert written == ["onnxruntime.max_rel.json", "onnxruntime.verdict.json"]  # no finding: no finding overlay
    data = json.loads((tmp_path / "out" / "model_explorer" / "onnxruntime.verdict.json").read_text())
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    judged = {n["name"] for n in report["nodes"] if n["results"]}
    assert list(data) == [graph.name] and set(data[graph.name]["results"]) == judged
    assert {v["value"] for v in data[graph.name]["results"].values()} == {0}  # all MATCH
    # the graph and nodes as Model Explorer's ONNX adapter names them
    from model_explorer_onnx.main import ONNXAdapter
    [shown] = ONNXAdapter().convert(str(tmp_path / "t.irt" / "graph.onnx"), {})["graphs"]
    assert shown.id == graph.name and judged <= {n.id for n in shown.nodes}
    # the same overlays for an existing replay's folder
    first = {p.name: p.read_text() for p in (tmp_path / "out" / "model_explorer").iterdir()}
    import shutil
    shutil.rmtree(tmp_path / "out" / "model_explorer")
    assert main(["report", str(tmp_path / "out"), "--model-explorer", "--bundle", str(tmp_path / "t.irt")]) == 0
    assert {p.name: p.read_text() for p in (tmp_path / "out" / "model_explorer").iterdir()} == first
    assert main(["report", str(tmp_path / "nowhere"), "--model-explorer"]) == 2
    assert "nowhere/report.json: not a replay's report.json" in capsys.readouterr().err
