"""Canonicalization: the exact-semantics form every backend receives.

- Constant nodes folded into initializers;
- unique, non-empty node names;
- auto_pad resolved into explicit pads = [begin_1..begin_n, end_1..end_n];
- every attribute with its default written out (conv/pool pads, strides, dilations,
  kernel_shape included, which the ONNX schemas leave without defaults);
- training-mode BatchNormalization rewritten to ai.irtrace::TrainBatchNormalization, which
  names its running-variance estimator (see irtrace/ir/schemas.py);
- value_info for every value (shape inference; recorded shapes fill the rest later).
"""
import copy
import json
import logging
import math
import re

import numpy as np
import onnx
from onnx import helper, numpy_helper

from irtrace.errors import IrtraceError
from irtrace.ir import schemas
from irtrace.ir.spec import decode_attrs, opset_of

CONV_LIKE = {"Conv", "ConvTranspose", "ConvInteger", "QLinearConv"}
POOL_LIKE = {"MaxPool", "AveragePool", "LpPool"}

log = logging.getLogger(__name__)


def fold_constants(model):
    """Move every Constant node's value into an initializer with the node's output name."""
    g = model.graph
    keep = []
    for n in g.node:
        if n.op_type != "Constant" or n.domain not in ("", "ai.onnx"):
            keep.append(n)
            continue
        attrs = decode_attrs(n)
        (key, v), = attrs.items()
        if key == "value":
            arr = v
        elif key in ("value_float", "value_floats"):
            arr = np.array(v, np.float32)
        elif key in ("value_int", "value_ints"):
            arr = np.array(v, np.int64)
        else:
            raise IrtraceError(f"Constant node {n.name!r} has attribute {key!r}, which irtrace cannot fold")
        g.initializer.append(numpy_helper.from_array(np.asarray(arr), n.output[0]))
    del g.node[:]
    g.node.extend(keep)


def uniquify_node_names(model):
    """Every node gets a unique, non-empty name. The names a graph gives keep their first node (so
    a report about "Relu_0" is about the node the user called that); only empty names and later
    duplicates are numbered, around every explicit name."""
    seen = set()
    taken = {n.name for n in model.graph.node if n.name}
    for i, n in enumerate(model.graph.node):
        if n.name and n.name not in seen:
            seen.add(n.name)
            continue
        base = n.name or f"{n.op_type}_{i}"
        name, k = base, 1
        while name in seen or (name != n.name and name in taken):
            k += 1
            name = f"{base}_{k}"
        n.name = name
        seen.add(name)


def rename_value(model, old, new):
    """Rename value `old` to `new` everywhere in the graph."""
    g = model.graph
    for n in g.node:
        for seq in (n.input, n.output):
            for i, v in enumerate(seq):
                if v == old:
                    seq[i] = new
    for seq in (g.input, g.output, g.value_info):
        for vi in seq:
            if vi.name == old:
                vi.name = new
    for t in g.initializer:
        if t.name == old:
            t.name = new


def _set_attr(node, name, value):
    for a in list(node.attribute):
        if a.name == name:
            node.attribute.remove(a)
    node.attribute.append(helper.make_attribute(name, value))


def auto_pad_pads(mode, in_sizes, kernel, strides, dilations):
    """Explicit [begins..., ends...] for Conv/pool auto_pad (ONNX spec): SAME_UPPER puts the
    odd pixel at the end (TensorFlow 'SAME'), SAME_LOWER at the beginning."""
    if mode == "VALID":
        return [0] * (2 * len(kernel))
    begins, ends = [], []
    for n, k, s, d in zip(in_sizes, kernel, strides, dilations):
        out = math.ceil(n / s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - n)
        small, big = total // 2, total - total // 2
        begins.append(small if mode == "SAME_UPPER" else big)
        ends.append(big if mode == "SAME_UPPER" else small)
    return begins + ends


def conv_transpose_pads(mode, in_sizes, kernel, strides, dilations, output_padding, output_shape=None):
    """Explicit pads for ConvTranspose auto_pad / output_shape (ONNX spec)."""
    begins, ends, extra = [], [], []
    for i, (n, k, s, d, op) in enumerate(zip(in_sizes, kernel, strides, dilations, output_padding)):
        out = output_shape[i] if output_shape else n * s
        total = s * (n - 1) + op + (k - 1) * d + 1 - out
        extra.append(max(0, -total))  # an output larger than the full transposed conv: output_padding grows
        total = max(0, total)
        small, big = total // 2, total - total // 2
        upper = mode != "SAME_LOWER"
        begins.append(small if upper else big)
        ends.append(big if upper else small)
    return begins + ends, [op + e for op, e in zip(output_padding, extra)]


def _shapes(model):
    """name -> shape tuple (None entries for unknown dims) from shape inference."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception:  # inference is best effort here; missing shapes are reported where needed
        inferred = model
    out = {}
    g = inferred.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        t = vi.type.tensor_type
        if t.HasField("shape"):
            out[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
    for t in g.initializer:
        out[t.name] = tuple(t.dims)
    return out


def write_defaults(model, original_attrs=None):
    """Write out defaults and explicit pads. `original_attrs` (name -> attrs) collects the
    attributes of every node changed here, as they were."""
    shapes = None
    for n in model.graph.node:
        before = decode_attrs(n)
        opset = opset_of(model, n.domain)
        try:
            s = onnx.defs.get_schema(n.op_type, opset, n.domain)
        except onnx.defs.SchemaError:
            s = None
        if s is not None:
            for name, a in s.attributes.items():
                if name not in before and a.default_value.name:
                    v = helper.get_attribute_value(a.default_value)
                    if isinstance(v, bytes):
                        v = v.decode()
                    n.attribute.append(helper.make_attribute(name, v))
        if n.domain in ("", "ai.onnx") and (n.op_type in CONV_LIKE or n.op_type in POOL_LIKE):
            if shapes is None:
                shapes = _shapes(model)
            _explicit_window(n, shapes)
        after = decode_attrs(n)
        if original_attrs is not None and _differ(after, before):
            if _finite(before):  # the manifest is strict JSON: a NaN attribute keeps its canonical form only
                original_attrs[n.name] = before
            else:
                log.warning("node %r: a non-finite attribute; --form original gives it its canonical form", n.name)


def _finite(attrs):
    return all(math.isfinite(v) for v in _floats(list(attrs.values())))


def _floats(v):
    if isinstance(v, float):
        yield v
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _floats(x)


def _differ(a, b):
    """Attribute dicts differ (a NaN attribute equals itself here: `nan != nan` would call every
    node with one changed)."""
    def plain(v):
        return v.tolist() if hasattr(v, "tolist") else repr(v)
    return json.dumps(a, sort_keys=True, default=plain) != json.dumps(b, sort_keys=True, default=plain)


def _explicit_window(n, shapes):
    attrs = decode_attrs(n)
    x_shape = shapes.get(n.input[0])
    if "kernel_shape" in attrs:
        kernel = attrs["kernel_shape"]
    else:
        w_shape = shapes.get(n.input[1]) if len(n.input) > 1 else None
        if not w_shape or None in w_shape[2:]:
            raise IrtraceError(f"node {n.name!r} ({n.op_type}): kernel_shape is not set and the weight shape is unknown")
        kernel = list(w_shape[2:])
        _set_attr(n, "kernel_shape", kernel)
    r = len(kernel)
    strides = attrs["strides"] if attrs.get("strides") is not None else [1] * r
    dilations = attrs["dilations"] if attrs.get("dilations") is not None else [1] * r
    _set_attr(n, "strides", strides)
    if n.op_type != "AveragePool" or "dilations" in attrs:
        _set_attr(n, "dilations", dilations)
    mode = attrs.get("auto_pad", "NOTSET")
    if n.op_type == "ConvTranspose":
        output_padding = attrs["output_padding"] if attrs.get("output_padding") is not None else [0] * r
        _set_attr(n, "output_padding", output_padding)
        out_shape = attrs.get("output_shape")
        if mode in ("SAME_UPPER", "SAME_LOWER") or out_shape:
            sizes = _spatial(n, x_shape, r)
            pads, output_padding = conv_transpose_pads(mode, sizes, kernel, strides, dilations, output_padding,
                                                       out_shape[-r:] if out_shape else None)
            _set_attr(n, "pads", pads)
            _set_attr(n, "output_padding", output_padding)
            for a in list(n.attribute):
                if a.name == "output_shape":
                    n.attribute.remove(a)
        elif mode == "VALID":
            _set_attr(n, "pads", [0] * 2 * r)
    elif mode in ("SAME_UPPER", "SAME_LOWER", "VALID"):
        sizes = _spatial(n, x_shape, r)
        _set_attr(n, "pads", auto_pad_pads(mode, sizes, kernel, strides, dilations))
    if "pads" not in {a.name for a in n.attribute}:
        _set_attr(n, "pads", [0] * 2 * r)
    _set_attr(n, "auto_pad", "NOTSET")


def _spatial(n, x_shape, r):
    if not x_shape or len(x_shape) < r + 2 or None in x_shape[-r:]:
        raise IrtraceError(f"node {n.name!r} ({n.op_type}): auto_pad needs the input's spatial shape, which is "
                           f"unknown ({x_shape}); pass --input with concrete shapes")
    return list(x_shape[-r:])


def rewrite_train_batchnorm(model, estimator):
    """BatchNormalization(training_mode=1) -> ai.irtrace::TrainBatchNormalization naming `estimator`."""
    for n in model.graph.node:
        if n.op_type == "BatchNormalization" and n.domain in ("", "ai.onnx") and decode_attrs(n).get("training_mode"):
            attrs = decode_attrs(n)
            n.domain = schemas.DOMAIN
            n.op_type = "TrainBatchNormalization"
            del n.attribute[:]
            n.attribute.extend([helper.make_attribute("epsilon", float(attrs.get("epsilon", 1e-5))),
                                helper.make_attribute("momentum", float(attrs.get("momentum", 0.9))),
                                helper.make_attribute("running_var_estimator", estimator)])
    _ensure_opset(model)


def _ensure_opset(model):
    if any(n.domain == schemas.DOMAIN for n in model.graph.node) and \
            not any(o.domain == schemas.DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(schemas.DOMAIN, schemas.VERSION))


def reject_random(model):
    for n in model.graph.node:
        if n.op_type in ("RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Bernoulli",
                         "Multinomial"):
            raise IrtraceError(f"node {n.name!r} draws random numbers ({n.op_type}); irtrace replays recorded "
                               f"values only. Use torch.nn.functional.dropout / nn.Dropout (recorded) or pass the "
                               f"random tensor as an input")


def set_value_info(model, specs):
    """value_info for every non-input, non-initializer value from `specs` (name -> (np dtype, shape))."""
    g = model.graph
    known = {i.name for i in g.input} | {t.name for t in g.initializer} | {o.name for o in g.output}
    del g.value_info[:]
    for n in g.node:
        for v in n.output:
            if v and v not in known and v in specs:
                dtype, shape = specs[v]
                g.value_info.append(helper.make_tensor_value_info(
                    v, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), list(shape)))
    for o in g.output:
        if o.name in specs:
            dtype, shape = specs[o.name]
            o.CopyFrom(helper.make_tensor_value_info(o.name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                                     list(shape)))


class _Decoded(dict):
    """name -> initializer TensorProto, read as its array (decoded on each read)."""

    def __getitem__(self, name):
        return numpy_helper.to_array(super().__getitem__(name))

    def get(self, name, default=None):
        return self[name] if name in self else default


def desequence(model):
    """SplitToSequence read only by SequenceAt at constant positions -> one Split with an
    output per piece: the IR has tensors only, so every backend and the bundle can hold them."""
    g = model.graph
    # the integer ones it reads (split sizes, positions), decoded as read: a float weight is not copied,
    # and an export's weights are external data the graph does not hold
    inits = _Decoded({t.name: t for t in g.initializer})
    consumers = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    shapes = None
    drop = set()
    for n in list(g.node):
        if n.op_type != "SplitToSequence":
            continue
        users = consumers.get(n.output[0], [])
        if not users or any(u.op_type != "SequenceAt" or u.input[1] not in inits for u in users):
            continue
        attrs = decode_attrs(n)
        axis_ = attrs.get("axis", 0)
        if len(n.input) > 1 and n.input[1]:
            split = np.asarray(inits.get(n.input[1])) if n.input[1] in inits else None
            if split is None:
                continue
            if split.ndim == 0:
                shapes = shapes or _shapes(model)
                dims = shapes.get(n.input[0])
                if not dims or dims[axis_] is None:
                    continue
                size, chunk = dims[axis_], int(split)
                split = np.array([chunk] * (size // chunk) + ([size % chunk] if size % chunk else []), np.int64)
        elif not attrs.get("keepdims", 1):
            continue
        else:
            shapes = shapes or _shapes(model)
            dims = shapes.get(n.input[0])
            if not dims or dims[axis_] is None:
                continue
            split = np.ones(dims[axis_], np.int64)
        split_name = n.output[0] + "/split"
        g.initializer.append(numpy_helper.from_array(split.astype(np.int64), split_name))
        outs = [f"{n.output[0]}/{k}" for k in range(len(split))]
        new = helper.make_node("Split", [n.input[0], split_name], outs, name=n.name, axis=axis_)
        new.metadata_props.extend(n.metadata_props)
        g.node.insert(list(g.node).index(n), new)
        g.node.remove(n)
        for u in users:
            k = int(inits[u.input[1]])
            k = k + len(split) if k < 0 else k
            drop.add(u.name)
            rename_value(model, u.output[0], outs[k])
    keep = [n for n in g.node if n.name not in drop]
    del g.node[:]
    g.node.extend(keep)


def canonicalize(model, bn_estimator="biased"):
    """Return (canonical copy of `model`, original attributes of the nodes it changed).

    bn_estimator: the running-variance estimator of training-mode BatchNormalization; "biased" is
    ONNX's own definition (the default, for ONNX models); torch exports pass "unbiased"."""
    schemas.register_schemas()
    model = copy.deepcopy(model)
    fold_constants(model)
    uniquify_node_names(model)
    desequence(model)
    reject_random(model)
    rewrite_train_batchnorm(model, bn_estimator)
    original = {}
    write_defaults(model, original)
    _ensure_opset(model)
    return model, original


def _check_in(model, folder, full_check=False):
    if folder is None:
        onnx.checker.check_model(model, full_check=full_check)
        return
    # onnx.checker looks for a graph's external data beside the model file, and for a model in memory
    # beside the working folder: so the graph (small: its weights are outside) is checked as a file there
    import tempfile
    with tempfile.NamedTemporaryFile(dir=folder, prefix=".check.", suffix=".onnx") as f:
        f.write(model.SerializeToString())
        f.flush()
        onnx.checker.check_model(f.name, full_check=full_check)


def check(model, folder=None):
    """onnx's full check (schemas, types, shape inference) or a clear error. `folder`: where the files
    the graph's external data refers to are (an export's value store; onnx.checker checks that they are
    files), checked there by path; None: the graph holds all its data.

    One exception, logged: onnx's C++ shape inference (1.23) keeps a pooling window that starts in
    the end padding when ceil_mode=1, while onnx's own reference and its backend tests
    (test_averagepool_2d_ceil_last_window_starts_on_pad) drop it; the recorded shapes follow the
    reference, so that one disagreement is not an error."""
    import logging
    schemas.register_schemas()
    try:
        _check_in(model, folder, full_check=True)
    except onnx.shape_inference.InferenceError as e:
        text = str(e)
        ceil_nodes = {n.name for n in model.graph.node if n.op_type in POOL_LIKE and decode_attrs(n).get("ceil_mode")}
        named = set(re.findall(r"node name: ([^)]+)\)", text))
        if named and named <= ceil_nodes and "Inferred shape and existing shape differ" in text:
            logging.getLogger(__name__).warning("onnx shape inference disagrees with onnx's reference on ceil_mode "
                                                "pooling at %s; keeping the reference's shapes", sorted(named))
            _check_in(model, folder)
            return
        raise IrtraceError(f"the canonical graph fails onnx.checker: {text.splitlines()[0]}") from e
    except onnx.checker.ValidationError as e:
        raise IrtraceError(f"the canonical graph fails onnx.checker: {str(e).splitlines()[0]}") from e
