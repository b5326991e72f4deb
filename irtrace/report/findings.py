"""Group failing results into distinct bugs: (backend, op type, mode, attribute signature, verdict)."""
import dataclasses
import hashlib
import json
import re

import numpy as np

from irtrace import compare


def attr_signature(attrs):
    def short(v):
        if isinstance(v, np.ndarray):
            return f"tensor<{v.dtype}{list(v.shape)}>"
        return v
    return json.dumps({k: short(v) for k, v in sorted(attrs.items())}, sort_keys=True, default=str)


def _rank(r):
    """A result's place among its finding's: the verdict's severity, the relative error, then how many times its
    allowance the error is (a relative error saturates at 1 where the reference is ~0: MegEngine's softmax double
    backward on EdgeNeXt gives 5.5e-16 for a d2x of 4.6e-23, 6e5 allowances, and 0.42 for a d2g of 5e-8, 9e5; the
    finding shows the one no reader takes for rounding)."""
    m = r.metrics
    if m is None:
        return compare.SEVERITY.get(r.verdict, 0), 0.0, 0.0
    return compare.SEVERITY.get(r.verdict, 0), m.max_rel, m.max_abs / r.allowed if r.allowed else 0.0


# what varies between nodes that fail for one reason: numbers (shapes, sizes, addresses, timings), the
# value and node names a framework quotes, and what follows the framework's first line
_VARIES = [(re.compile(r"\| stderr:.*$"), ""), (re.compile(r"0x[0-9a-fA-F]+"), "#"),
           (re.compile(r"'[^']*'|\"[^\"]*\""), "'…'"), (re.compile(r"\d+(\.\d+)?([eE][-+]?\d+)?"), "#"),
           (re.compile(r"\s+"), " ")]


def normalised(message):
    """A framework's message without what varies from node to node, so one cause is one text."""
    text = (message or "").strip().splitlines()[0] if (message or "").strip() else ""
    for rx, sub in _VARIES:
        text = rx.sub(sub, text)
    return text.strip()[:200]


def _role(label, node_inputs, node_outputs):
    """A result's label by position, not by value name: d:<input k>, d2x:<input k>, d2g:<output j>, out:<j>."""
    if label.endswith("*"):
        return label
    kind, name = label.split(":", 1) if label.startswith(("d:", "d2x:", "d2g:")) else ("out", label)
    names = node_outputs if kind in ("out", "d2g") else node_inputs
    return f"{kind}:{names.index(name) if name in names else '?'}"


def group(replay, strict=False):
    """Findings (worst first), one per root cause: (backend, op type, mode, verdict, and what the failure
    has in common across nodes: the framework's message without numbers and names for an ERROR, CRASH,
    TIMEOUT or UNSUPPORTED; for a numeric verdict, nothing more: which results fail on its nodes, by position,
    is its signature). The attribute classes
    of its nodes are listed in it with their node counts (one cause often spans kernel sizes, strides and
    groups: 46 grouped convolutions are one TensorFlow finding, not 46). UNSUPPORTED is a coverage gap, a
    finding only with `strict`."""
    specs = {s.name: s for s in replay.bundle.specs}
    failing = set(compare.FAILING) | ({compare.UNSUPPORTED} if strict else set())
    groups = {}
    for node in replay.nodes:
        spec = specs.get(node.name)
        ins, outs = (list(spec.inputs), list(spec.outputs)) if spec else ([], [])
        per = {}  # (backend, mode, verdict) -> this node's failing results
        for r in node.results:
            if r.verdict in failing:
                per.setdefault((r.backend, r.mode, r.verdict), []).append(r)
        for (backend, mode, verdict), rows in per.items():
            # a numeric failure of one op in one mode is one cause whichever of its results each node gets
            # wrong (MegEngine's train-mode BatchNorm double backward: d2x on some nodes, d2x and d2g on
            # others): the failing roles of all its nodes are the finding's signature
            cause = "" if verdict in compare.NUMERIC_FAILURES else normalised(max(rows, key=_rank).message)
            g = groups.setdefault((backend, node.op_type, mode, verdict, cause), {"results": [], "nodes": [],
                                                                                  "classes": {}, "roles": set()})
            g["roles"].update(_role(r.output, ins, outs) for r in rows)
            g["results"] += [(node, r) for r in rows]
            g["nodes"].append(node.name)
            sig = attr_signature(spec.attrs if spec else {})
            g["classes"][sig] = g["classes"].get(sig, 0) + 1
    findings = []
    for (backend, op, mode, verdict, cause), g in groups.items():
        cause = cause or ", ".join(sorted(g["roles"]))
        first_node, _ = min(g["results"], key=lambda nr: nr[0].index)
        worst_node, worst = max(g["results"], key=lambda nr: _rank(nr[1]))
        digest = hashlib.sha1(f"{backend}|{op}|{mode}|{cause}|{verdict}".encode()).hexdigest()[:8]
        plain = re.sub(r"[^A-Za-z0-9_]", "_", op)[:60]  # the id names a folder: an op type is any text
        tags = sorted({t for _, r in g["results"] for t in r.tags})
        classes = [{"attributes": sig, "nodes": n} for sig, n in sorted(g["classes"].items(), key=lambda kv: -kv[1])]
        named = backend.replace("@", "-")  # a release ('paddle@3.0.0') as a folder names it
        findings.append(compare.Finding(
            id=f"{named}-{plain}-{mode}-{verdict.lower()}-{digest}", backend=backend, op_type=op, mode=mode,
            verdict=verdict, signature=cause, nodes=g["nodes"], first_node=first_node.name,
            module=first_node.source.get("module", ""), file_line=first_node.source.get("file_line", ""),
            worst={"node": worst_node.name, **worst.to_json()}, tags=tags, message=worst.message, classes=classes))
    findings = across_releases(replay, findings)
    findings.sort(key=lambda f: (-compare.SEVERITY.get(f.verdict, 0), -(f.worst.get("max_rel") or 0.0), f.id))
    return findings


def _releases(backends):
    """{framework backend: {version: backend name}} of the backends replayed at a chosen release
    ('paddle@3.2.0'; a plain name beside them is its default release)."""
    from irtrace.envs.discover import release_of
    out = {}
    for name in backends:
        base, version = release_of(name)
        if version is not None:
            out.setdefault(base, {})[version] = name
    return {base: named for base, named in out.items() if any("@" in n for n in named.values())}


def across_releases(replay, findings):
    """One finding per bug of a framework replayed at several releases side by side: the finding of the
    newest release it fails on stands for the others, and lists the versions it reproduces on, those whose
    results on its nodes in its mode all pass ("clean": fixed there, or not yet broken), and the latest
    version the backend declares. A backend replayed at one plain name is left as it is."""
    from irtrace.envs.discover import discover, latest, split_release, version_key
    releases = _releases(replay.backends)
    if not releases:
        return findings
    version_of = {name: v for named in releases.values() for v, name in named.items()}
    merged, out = {}, []
    for f in findings:
        base = split_release(f.backend)[0]
        if f.backend not in version_of:
            out.append(f)
            continue
        cause = "" if f.verdict in compare.NUMERIC_FAILURES else f.signature
        merged.setdefault((base, f.op_type, f.mode, f.verdict, cause), []).append(f)
    for (base, _, mode, _, _), same in merged.items():
        same.sort(key=lambda f: version_key(version_of[f.backend]))
        failing = {version_of[f.backend] for f in same}
        nodes = {n for f in same for n in f.nodes}
        clean = [v for v, name in releases[base].items() if v not in failing and _passes(replay, name, mode, nodes)]
        out.append(dataclasses.replace(same[-1], versions={
            "reproduces": sorted(failing, key=version_key), "clean": sorted(clean, key=version_key),
            "latest": latest(discover()[base].declaration)}))
    return out


def _passes(replay, backend, mode, nodes):
    """Whether `backend` was judged on `nodes` in `mode`, and nothing it answered there fails."""
    rows = [r for node in replay.nodes if node.name in nodes for r in node.results
            if r.backend == backend and r.mode == mode]
    return bool(rows) and not any(r.verdict in compare.FAILING for r in rows)
