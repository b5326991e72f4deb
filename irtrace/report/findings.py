"""Group failing results into distinct bugs: (backend, op type, mode, attribute signature, verdict)."""
import hashlib
import json
import re

import numpy as np

from irtrace import compare
from irtrace.ir.spec import node_specs


def attr_signature(attrs):
    def short(v):
        if isinstance(v, np.ndarray):
            return f"tensor<{v.dtype}{list(v.shape)}>"
        return v
    return json.dumps({k: short(v) for k, v in sorted(attrs.items())}, sort_keys=True, default=str)


def _rank(r):
    return (compare.SEVERITY.get(r.verdict, 0), r.metrics.max_rel if r.metrics else 0.0)


def group(replay, strict=False):
    """Findings (worst first). UNSUPPORTED is a coverage gap, a finding only with `strict`."""
    attrs = {s.name: s.attrs for s in node_specs(replay.bundle.model)}
    failing = set(compare.FAILING) | ({compare.UNSUPPORTED} if strict else set())
    groups = {}
    for node in replay.nodes:
        for r in node.results:
            if r.verdict not in failing:
                continue
            sig = attr_signature(attrs.get(node.name, {}))
            key = (r.backend, node.op_type, r.mode, sig, r.verdict)
            g = groups.setdefault(key, {"results": [], "nodes": []})
            g["results"].append((node, r))
            if node.name not in g["nodes"]:
                g["nodes"].append(node.name)
    findings = []
    for (backend, op, mode, sig, verdict), g in groups.items():
        first_node, _ = min(g["results"], key=lambda nr: nr[0].index)
        worst_node, worst = max(g["results"], key=lambda nr: _rank(nr[1]))
        digest = hashlib.sha1(f"{backend}|{op}|{mode}|{sig}|{verdict}".encode()).hexdigest()[:8]
        plain = re.sub(r"[^A-Za-z0-9_]", "_", op)[:60]  # the id names a folder: an op type is any text
        tags = sorted({t for _, r in g["results"] for t in r.tags})
        findings.append(compare.Finding(
            id=f"{backend}-{plain}-{mode}-{verdict.lower()}-{digest}", backend=backend, op_type=op, mode=mode,
            verdict=verdict, signature=sig, nodes=g["nodes"], first_node=first_node.name,
            module=first_node.source.get("module", ""), file_line=first_node.source.get("file_line", ""),
            worst={"node": worst_node.name, **worst.to_json()}, tags=tags, message=worst.message))
    findings.sort(key=lambda f: (-compare.SEVERITY.get(f.verdict, 0), -(f.worst.get("max_rel") or 0.0), f.id))
    return findings
