"""`irtrace diff A.irt B.irt`: two bundles that should be the same model (a TensorFlow original
and its PyTorch port, two versions of a port). Their compute nodes are aligned (topological
order, op class, shapes; weights compared up to layout transposes), then:
- structural differences of aligned nodes (pads, strides, dilations, eps, ...), and compute ops
  present on one side only (layout-only Transposes are folded away);
- numeric differences: the recorded (chained) values of aligned nodes compared — through a fused
  chain where one side folded ops (tf2onnx folds inference BatchNorm into Conv) — and B's node run
  on A's recorded inputs (isolated) against A's value;
- one verdict line naming the first cause."""
from dataclasses import asdict, dataclass, field

import networkx as nx
import numpy as np

from backends._runtime.wire import is_float
from irtrace.compare import close
from irtrace.ir.graph import dag

OP_CLASS = {"Conv": "conv", "ConvTranspose": "convT", "Gemm": "linear", "MatMul": "linear",
            "BatchNormalization": "norm", "TrainBatchNormalization": "norm", "InstanceNormalization": "norm",
            "LayerNormalization": "norm", "MaxPool": "maxpool", "AveragePool": "avgpool",
            "GlobalAveragePool": "gap", "ReduceMean": "gap", "GlobalMaxPool": "gmp", "Relu": "relu",
            "LeakyRelu": "lrelu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Gelu": "gelu", "Softmax": "softmax",
            "Add": "add", "Resize": "resize", "Pad": "pad", "Concat": "concat"}
ATTRS = ("pads", "strides", "dilations", "group", "kernel_shape", "epsilon", "momentum", "count_include_pad",
         "ceil_mode", "approximate", "mode", "coordinate_transformation_mode", "alpha", "output_padding",
         "running_var_estimator")
LAYOUTS = ([0, 2, 3, 1], [0, 3, 1, 2])


@dataclass
class Pair:
    a: str
    b: str
    op_class: str
    a_module: str
    b_module: str
    attr_diffs: dict = field(default_factory=dict)
    weights: str = ""            # equal / differ / -
    chained: str = ""            # equal / diverge / incomparable
    chained_max_abs: float = None
    fused_with: list = field(default_factory=list)
    isolated: str = ""           # equal / diverge / -
    isolated_max_abs: float = None


def _compute_nodes(bundle):
    specs = bundle.specs
    v = bundle.values
    out = []
    for i, s in enumerate(specs):
        cls = OP_CLASS.get(s.op_type)
        src = bundle.node_source(s.name)
        if cls is None or src.get("layout_only") or not s.outputs or s.outputs[0] not in v:
            continue
        if not is_float(v.spec(s.outputs[0])[0]) or int(np.prod(v.spec(s.outputs[0])[1])) <= 1:
            continue
        if cls == "add" and all(i in {t.name for t in bundle.model.graph.initializer} or not i for i in s.inputs[1:]) \
                and s.inputs[0] in {t.name for t in bundle.model.graph.initializer}:
            continue  # arithmetic on weights only
        out.append((i, s))
    return specs, out


def _order(specs, nodes):
    """Compute nodes in a topological order of the graph (networkx), ties by position."""
    g = dag(specs)
    pos = {s.name: i for i, s in enumerate(specs)}
    keep = {s.name for _, s in nodes}
    by_name = {s.name: s for _, s in nodes}
    return [by_name[n] for n in nx.lexicographical_topological_sort(g, key=lambda n: pos[n]) if n in keep]


def _adapt(x, like):
    """x in like's layout (NHWC <-> NCHW), or None."""
    x = np.asarray(x)
    if x.shape == tuple(like.shape):
        return x
    if x.ndim == 4:
        for p in LAYOUTS:
            if np.transpose(x, p).shape == tuple(like.shape):
                return np.transpose(x, p)
    return None


def _weights_equal(a_bundle, a, b_bundle, b):
    if len(a.inputs) < 2 or len(b.inputs) < 2 or not a.inputs[1] or not b.inputs[1]:
        return "-"
    wa, wb = np.asarray(a_bundle.values[a.inputs[1]]), np.asarray(b_bundle.values[b.inputs[1]])
    for cand in (wa, wa.T if wa.ndim == 2 else wa):
        if cand.shape == wb.shape and close(cand, wb)[0]:
            return "equal"
    return "differ"


def _weight_shape(bundle, s):
    if len(s.inputs) > 1 and s.inputs[1] and OP_CLASS.get(s.op_type) in ("conv", "convT", "linear"):
        return tuple(sorted(bundle.values.spec(s.inputs[1])[1]))  # sorted: equal up to a layout transpose
    return None


def _fused_values(bundle, b, users):
    """b's value, then the values after a chain of normalizations that the other side may have
    folded into b (tf2onnx folds inference BatchNorm into the Conv before it)."""
    out, cur, names = [(b.outputs[0], [])], b.outputs[0], []
    for _ in range(2):
        nxt = [s for s in users.get(cur, []) if OP_CLASS.get(s.op_type) == "norm"]
        if len(nxt) != 1:
            break
        names = names + [nxt[0].name]
        cur = nxt[0].outputs[0]
        out.append((cur, list(names)))
    return out


def _align(a_bundle, a_seq, b_bundle, b_seq, b_users):
    """Greedy, in A's topological order: a B node of the same op class and weight shape whose
    recorded value equals A's (through a folded norm), else the nearest such node by position."""
    used, pairs = set(), []
    na, nb = max(len(a_seq), 1), max(len(b_seq), 1)
    for ia, a in enumerate(a_seq):
        va = np.asarray(a_bundle.values[a.outputs[0]])
        wa = _weight_shape(a_bundle, a)
        best = None
        for jb, b in enumerate(b_seq):
            if b.name in used or OP_CLASS[b.op_type] != OP_CLASS[a.op_type] or _weight_shape(b_bundle, b) != wa:
                continue
            err, shaped = None, False
            for v, _ in _fused_values(b_bundle, b, b_users):
                x = _adapt(b_bundle.values[v], va)
                if x is not None:
                    shaped = True
                    ok, d = close(x, va)
                    if ok:
                        err = d if err is None else min(err, d)
            if not shaped:
                continue
            key = (0, err) if err is not None else (1, abs(ia / na - jb / nb))
            if best is None or key < best[0]:
                best = (key, b)
        if best is not None:
            used.add(best[1].name)
            pairs.append((a, best[1]))
    return pairs


def _consumers(specs):
    by_input = {}
    for s in specs:
        for i in s.inputs:
            by_input.setdefault(i, []).append(s)
    return by_input


def _isolated(a_bundle, a, b_bundle, b, b_specs, aligned_b):
    """B's node (with the one-side-only ops that feed it, e.g. an explicit Pad) on A's recorded inputs."""
    from backends.torch.ops import OPS
    import torch
    made = {o: s for s in b_specs for o in s.outputs if o}
    chain, cur = [], b.inputs[0]
    while cur in made and made[cur].name not in aligned_b and OP_CLASS.get(made[cur].op_type) == "pad":
        chain.insert(0, made[cur])
        cur = made[cur].inputs[0]
    x = _adapt(a_bundle.values[a.inputs[0]], b_bundle.values[cur])
    if x is None:
        return "-", None
    t = torch.from_numpy(np.array(x))
    for s in chain:
        e = OPS.lookup(s.domain, s.op_type, s.opset)
        rest = [torch.from_numpy(np.array(b_bundle.values[i])) if i else None for i in s.inputs[1:]]
        t = e.fn(t, *rest, **s.attrs)
    rest = []
    for k, i in enumerate(b.inputs[1:], start=1):
        src = a.inputs[k] if k < len(a.inputs) and a.inputs[k] else None
        val = a_bundle.values[src] if src else (b_bundle.values[i] if i else None)
        rest.append(None if val is None else torch.from_numpy(np.array(val)))
    e = OPS.lookup(b.domain, b.op_type, b.opset)
    try:
        with torch.no_grad():
            y = e.fn(t, *rest, **b.attrs)
            y = y[0] if isinstance(y, (tuple, list)) else y
    except Exception as ex:  # B's op cannot even run on A's inputs: that is the difference
        return f"error: {type(ex).__name__}", None
    ref = np.asarray(a_bundle.values[a.outputs[0]])
    y = _adapt(y.numpy(), ref)
    if y is None:
        return "diverge (shape)", None
    ok, d = close(y, ref)
    return ("equal" if ok else "diverge"), d


def diff(a_bundle, b_bundle):
    """A dict (diff.json) with pairs, one-side-only ops, the first divergence and the verdict line."""
    a_specs, a_nodes = _compute_nodes(a_bundle)
    b_specs, b_nodes = _compute_nodes(b_bundle)
    a_seq, b_seq = _order(a_specs, a_nodes), _order(b_specs, b_nodes)
    pairs = _align(a_bundle, a_seq, b_bundle, b_seq, _consumers(b_specs))
    aligned_a = {a.name for a, _ in pairs}
    aligned_bn = {b.name for _, b in pairs}
    only_a = [s for s in a_seq if s.name not in aligned_a]
    only_b = [s for s in b_seq if s.name not in aligned_bn]
    aligned_b = aligned_bn
    b_users = _consumers(b_specs)
    out_pairs = []
    for a, b in pairs:
        am, bm = a_bundle.node_source(a.name).get("module", ""), b_bundle.node_source(b.name).get("module", "")
        p = Pair(a.name, b.name, OP_CLASS[a.op_type], am, bm)
        for k in ATTRS:
            va, vb = a.attrs.get(k), b.attrs.get(k)
            if (va is not None or vb is not None) and va != vb and a.op_type == b.op_type:
                p.attr_diffs[k] = [va, vb]
        p.weights = _weights_equal(a_bundle, a, b_bundle, b) if p.op_class in ("conv", "convT", "linear") else "-"
        va = np.asarray(a_bundle.values[a.outputs[0]])
        candidates = _fused_values(b_bundle, b, b_users)
        best = None
        for bv, fw in candidates:
            x = _adapt(b_bundle.values[bv], va)
            if x is None:
                continue
            ok, d = close(x, va)
            if best is None or d < best[1]:
                best = (ok, d, fw)
        if best is None:
            p.chained = "incomparable"
        else:
            p.chained, p.chained_max_abs, p.fused_with = ("equal" if best[0] else "diverge"), best[1], best[2]
        if p.op_class in ("conv", "convT", "maxpool", "avgpool", "pad"):
            p.isolated, p.isolated_max_abs = _isolated(a_bundle, a, b_bundle, b, b_specs, aligned_b)
        out_pairs.append(p)
    first = next((p for p in out_pairs if p.chained == "diverge"), None)
    fa = a_bundle.manifest["source"]["framework"]
    fb = b_bundle.manifest["source"]["framework"]
    outputs = compare_outputs(a_bundle, b_bundle)
    # isolated: B's node on A's inputs; anything but "equal" (diverge, diverge (shape), error: ...) is a difference
    isolated = next((p for p in out_pairs if p.isolated not in ("", "-", "equal")), None)
    bad_output = next((o for o in outputs if o["values"] != "equal"), None)
    names = f"{a_bundle.manifest.get('name')} ({fa}) and {b_bundle.manifest.get('name')} ({fb})"
    # the verdict names the first cause; "equivalent" only when nothing above it says otherwise
    if first is not None:
        why = "; ".join(f"{k} {vb} vs {va}" for k, (va, vb) in first.attr_diffs.items())
        iso = f"; isolated, {fb}'s node on {fa}'s inputs: {first.isolated}" if first.isolated not in ("", "-") else ""
        verdict = (f"{first.b_module or first.b} ({fb}) ~ {first.a_module or first.a} ({fa}): "
                   f"{why or 'same attributes'} — values diverge from here (max abs {first.chained_max_abs:.3g}){iso}")
    elif not out_pairs:
        verdict = (f"not the same model: no compute node of {names} aligns with one of the other (op class, weight "
                   f"shape and value shape); graph outputs: {_outputs_text(outputs)}")
    elif isolated is not None:
        why = "; ".join(f"{k} {vb} vs {va}" for k, (va, vb) in isolated.attr_diffs.items())
        verdict = (f"{isolated.b_module or isolated.b} ({fb}) ~ {isolated.a_module or isolated.a} ({fa}): "
                   f"{why or 'same attributes'} — isolated, {fb}'s node on {fa}'s recorded inputs: {isolated.isolated}"
                   + (f" (max abs {isolated.isolated_max_abs:.3g})" if isolated.isolated_max_abs is not None else "")
                   + " although the recorded values agree")
    elif bad_output is not None:
        verdict = (f"the graph outputs of {names} differ ({_outputs_text(outputs)}) although the "
                   f"{len(out_pairs)} aligned node(s) agree: the difference is in what is not aligned")
    else:
        structural = [p for p in out_pairs if p.attr_diffs]
        verdict = (f"no numeric divergence between {names} over {len(out_pairs)} aligned nodes and "
                   f"{len(outputs)} graph output(s)"
                   + (f"; structural differences at {len(structural)} node(s) and {len(only_a) + len(only_b)} "
                      f"one-side-only op(s) are numerically equivalent" if structural or only_a or only_b else ""))
    differ = first is not None or not out_pairs or isolated is not None or bad_output is not None
    return {"schema": "irtrace.diff/1", "a": {"path": str(a_bundle.path), "framework": fa},
            "b": {"path": str(b_bundle.path), "framework": fb}, "pairs": [asdict(p) for p in out_pairs],
            "only_a": [{"node": s.name, "op_type": s.op_type, "module": a_bundle.node_source(s.name).get("module", "")}
                       for s in only_a],
            "only_b": [{"node": s.name, "op_type": s.op_type, "module": b_bundle.node_source(s.name).get("module", "")}
                       for s in only_b],
            "outputs": outputs, "first_divergence": asdict(first) if first else None, "verdict": verdict,
            "differ": differ}


def compare_outputs(a_bundle, b_bundle):
    """The graph outputs of A and B, in order, compared by their recorded values (up to a layout
    transpose): [{"a", "b", "values": equal / diverge / incomparable / missing, "max_abs"}]. Two bundles
    with a different number of outputs have a "missing" entry for each output one side lacks."""
    a_out, b_out = list(a_bundle.manifest["outputs"]), list(b_bundle.manifest["outputs"])
    out = []
    for k in range(max(len(a_out), len(b_out))):
        a = a_out[k] if k < len(a_out) else None
        b = b_out[k] if k < len(b_out) else None
        entry = {"a": a, "b": b, "values": "missing", "max_abs": None}
        if a is not None and b is not None:
            va = np.asarray(a_bundle.values[a])
            x = _adapt(b_bundle.values[b], va)
            if x is None or x.dtype.kind != va.dtype.kind:
                entry["values"] = "incomparable"
            else:
                ok, d = close(x, va) if is_float(va.dtype) else (bool(np.array_equal(x, va)), None)
                entry["values"], entry["max_abs"] = ("equal" if ok else "diverge"), d
        out.append(entry)
    return out


def _outputs_text(outputs):
    if not outputs:
        return "none"
    bad = [o for o in outputs if o["values"] != "equal"]
    if not bad:
        return f"all {len(outputs)} equal"
    o = bad[0]
    what = {"missing": "on one side only", "incomparable": "of another shape or type"}.get(o["values"], o["values"])
    return (f"{len(bad)} of {len(outputs)} differ, first {o['b'] or o['a']} {what}"
            + (f" (max abs {o['max_abs']:.3g})" if o["max_abs"] is not None else ""))
