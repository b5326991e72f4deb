"""`irtrace export model.onnx`: any ONNX model (tf2onnx, paddle2onnx, ...) becomes a bundle.

Converted to opset 20 (onnx.version_converter), canonicalized like torch exports (auto_pad
resolved, defaults written out; training BatchNormalization keeps ONNX's own biased
running-variance estimator), values recorded by running the graph with the torch op table,
chained, with autograd for the cotangents. Export check: the model's outputs from
onnxruntime on the original file must match the recorded ones."""
import logging
from pathlib import Path

import numpy as np
import onnx

from irtrace.compare import close
from irtrace.errors import IrtraceError, strip_ansi
from irtrace.export.onnx_bundle import bundle_from_onnx
from irtrace.export.inputs import make_inputs

log = logging.getLogger(__name__)
OPSET = 20


def load_onnx(path):
    path = Path(path)
    if not path.is_file():
        raise IrtraceError(f"{path}: no such file")
    try:
        model = onnx.load(str(path))
    except Exception as e:  # protobuf's DecodeError and friends
        raise IrtraceError(f"{path}: not an ONNX model ({type(e).__name__})") from e
    if not model.graph.node:
        raise IrtraceError(f"{path}: not an ONNX model (no graph nodes)")
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as e:
        raise IrtraceError(f"{path}: fails onnx.checker: {strip_ansi(e).strip().splitlines()[0]}") from e
    return model


def _to_opset(model, path):
    current = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), OPSET)
    if current == OPSET:
        return model
    try:
        return onnx.version_converter.convert_version(model, OPSET)
    except Exception as e:
        raise IrtraceError(f"{path}: cannot convert opset {current} to {OPSET}: {(strip_ansi(e).splitlines() or [type(e).__name__])[0]}") from e


def _input_arrays(model, specs, arrays, seed, path):
    inits = {t.name for t in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in inits]
    given = dict(arrays or {})
    by_spec = {n: (shape, dtype) for n, shape, dtype in specs}
    out = {}
    for i in graph_inputs:
        if i.name in given:
            out[i.name] = np.asarray(given[i.name])
            continue
        t = i.type.tensor_type
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        if i.name in by_spec:
            shape, d = by_spec[i.name]
            out.update(make_inputs([(i.name, shape, d)], seed))
            continue
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        if any(d is None for d in dims):
            raise IrtraceError(f"{path}: input {i.name!r} has dynamic shape "
                               f"{[d.dim_param or '?' if not d.HasField('dim_value') else d.dim_value for d in t.shape.dim]};"
                               f" pass --input {i.name}=DIMxDIM...[:{dtype.name}] or --input-file")
        out.update(make_inputs([(i.name, tuple(dims), dtype.name)], seed))
    unknown = (set(given) | set(by_spec)) - {i.name for i in graph_inputs}
    if unknown:
        raise IrtraceError(f"{path}: no graph input named {', '.join(sorted(unknown))}; inputs are "
                           f"{', '.join(i.name for i in graph_inputs)}")
    return out


def _sources(model):
    """TF-style node names ('model/block2/conv1/Conv2D') give the module path ('model/block2/conv1')."""
    out = {}
    for n in model.graph.node:
        if "/" in n.name:
            out[n.name] = {"module": n.name.rsplit("/", 1)[0]}
    return out


def _ort_check(path, model, feeds, bundle):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    try:
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        got = dict(zip(names, sess.run(names, {k: v for k, v in feeds.items()
                                               if k in {i.name for i in sess.get_inputs()}})))
    except Exception as e:
        log.warning("export check skipped: onnxruntime cannot run %s (%s)", path, str(e).splitlines()[0])
        return None
    worst = 0.0
    for name, ref in got.items():
        if name not in bundle.values:
            continue
        ok, d = close(bundle.values[name], ref)
        if not ok:
            mine = np.shape(bundle.values[name])
            how = f"shape {list(np.shape(ref))} vs {list(mine)}" if np.shape(ref) != mine else f"max abs {d:.3g}"
            raise IrtraceError(f"export check failed: output {name!r} of {path} differs between onnxruntime and "
                               f"irtrace's torch replay, which follows the ONNX spec ({how})")
        worst = max(worst, d)
    return worst


def _specialize(model, feeds):
    """Graph inputs get the concrete shapes of the recorded inputs: auto_pad resolution and shape
    inference then see the sizes that are actually run, not a declared or symbolic one."""
    for i in model.graph.input:
        if i.name in feeds:
            dims = i.type.tensor_type.shape.dim
            del dims[:]
            for d in np.shape(feeds[i.name]):
                dims.add().dim_value = int(d)
    for o in model.graph.output:  # declared output shapes may have been for other input sizes
        if o.type.tensor_type.HasField("shape"):
            o.type.tensor_type.ClearField("shape")


def export_onnx(path, out, specs=(), arrays=None, seed=0, loss="dot", force=False):
    from irtrace.store import check_destination
    check_destination(out, force)
    model = load_onnx(path)
    model = _to_opset(model, path)
    feeds = _input_arrays(model, specs, arrays, seed, path)
    _specialize(model, feeds)
    try:
        bundle = bundle_from_onnx(model, feeds, out, seed=seed, loss=loss, name=Path(path).name, force=force,
                                  sources=_sources(model))
    except IrtraceError:
        raise
    worst = _ort_check(path, model, feeds, bundle)
    if worst is not None:
        log.info("export check passed against onnxruntime: max abs %.3g", worst)
    return bundle
