"""The replay's verdicts as Model Explorer node data: overlays on graph.onnx in Google's Model Explorer
(`model-explorer graph.onnx --extensions=model_explorer_onnx --node_data_paths=...`).

The format is Model Explorer's node-data JSON (model_explorer.node_data_builder: ModelNodeData ->
{graph id: GraphNodeData}), written here as plain JSON so irtrace needs nothing to write it; a test checks
it against the package's own builder. The ONNX adapter names a graph by the graph's name and a node by its
name, as report.json does. Per backend under test (and the reference), three overlays:
- `<backend>.verdict.json`: the node's worst verdict over modes and outputs, as its severity (0 MATCH ...
  8 CRASH, compare.Verdict.severity) coloured as report.html colours the verdict;
- `<backend>.max_rel.json`: the largest relative error of its judged results;
- `<backend>.finding.json`: the id of the finding the node is in (a string value), for nodes in one."""
import json
from pathlib import Path

from irtrace.compare import Verdict


def overlays(report, graph_name):
    """{file name: node data (a dict, ModelNodeData's JSON)} for `report` (report.json as a dict)."""
    per = {}
    for node in report["nodes"]:
        for r in node["results"]:
            b = per.setdefault(r["backend"], {"verdict": {}, "max_rel": {}})
            v = Verdict(r["verdict"])
            worst = b["verdict"].get(node["name"])
            if worst is None or v.severity > worst.severity:
                b["verdict"][node["name"]] = v
            if r.get("max_rel") is not None:
                b["max_rel"][node["name"]] = max(r["max_rel"], b["max_rel"].get(node["name"], 0.0))
    findings = {}
    for f in report["findings"]:
        for n in f["nodes"]:
            findings.setdefault(f["backend"], {}).setdefault(n, f["id"])
    out = {}
    for backend in sorted(per):
        verdicts = per[backend]["verdict"]
        out[f"{backend}.verdict.json"] = _graph(graph_name, {
            "results": {n: {"value": v.severity, "bgColor": v.color[1]} for n, v in sorted(verdicts.items())},
            "name": f"irtrace {backend}: worst verdict (severity 0 MATCH .. {len(Verdict) - 1} CRASH)",
            "thresholds": [{"value": v.severity, "bgColor": v.color[1]} for v in sorted(Verdict, key=lambda v: v.severity)]})
        out[f"{backend}.max_rel.json"] = _graph(graph_name, {
            "results": {n: {"value": e} for n, e in sorted(per[backend]["max_rel"].items())},
            "name": f"irtrace {backend}: max relative error",
            "gradient": [{"stop": 0, "bgColor": "#ffffff"}, {"stop": 1, "bgColor": "#dd3333"}]})
        if findings.get(backend):
            out[f"{backend}.finding.json"] = _graph(graph_name, {
                "results": {n: {"value": i} for n, i in sorted(findings[backend].items())},
                "name": f"irtrace {backend}: finding id", "showExpandedSummaryOnGroupNode": True})
    return out


def _graph(graph_name, data):
    return {graph_name: data}


def write(report, bundle, folder):
    """The overlays of `report` over the graph.onnx of bundle folder `bundle`, in `folder` (created); the
    paths written."""
    import onnx
    graph_name = onnx.load(str(Path(bundle) / "graph.onnx"), load_external_data=False).graph.name
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in overlays(report, graph_name).items():
        path = folder / name
        path.write_text(json.dumps(data, indent=2) + "\n")
        paths.append(path)
    return paths
