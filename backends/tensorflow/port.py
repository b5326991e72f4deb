"""A user's TensorFlow port under `irtrace port` (the protocol: backends/_runtime/port.py): a Keras 3 model
(subclassed, Sequential or functional) or a tf.Module, returned built by its factory (a Keras model has no
variables before its first call: the factory calls it once, `model(tf.zeros(shape))`, as a porter does
before loading weights).

Names. A variable is named by its path of attribute names, as torch's state_dict key is: `self.block2 =
...`, `self.layer = [...]` (or a Sequential: its position), `self.conv1 = Conv2D(...)` give
`block2.layer.0.conv1.<variable>`; a functional model's layers by their layer names. A variable is named by
the attribute that holds it (Dense's `_kernel` is `kernel`), else by its own name. Where the layer is one of
Keras's own and the correspondence with torch's module is unambiguous, the driver reports torch's name
(already mapped, so the host's match needs no map):
  Conv1D/2D/3D, Conv*Transpose  kernel -> weight (layout "hwio": torch's (O, I, kh, kw) filter stored
                                (kh, kw, I, O); a transposed conv's (I, O, kh, kw) as (kh, kw, O, I))
  Dense                         kernel -> weight (layout "transpose": torch's [out, in] stored [in, out])
  BatchNormalization            gamma, beta, moving_mean, moving_variance -> weight, bias, running_mean,
                                running_var
  LayerNormalization, GroupNormalization  gamma, beta -> weight, bias
  Embedding                     embeddings -> weight
Every other name (a layer of the porter's own) is its attribute's; --map renames the rest. A trainable
variable is a parameter, any other one (moving statistics, seed generators' state) a buffer.

Module attributes in ONNX's words, for the host to compare with the bundle's nodes: a Conv's strides,
dilations, group, kernel_shape and its padding ('valid' as pads 0; 'same' as auto_pad SAME_UPPER, which is
TensorFlow's SAME: the host resolves it at the bundle's input size); BatchNormalization's epsilon (Keras's
default 1e-3, torch's 1e-5), momentum (Keras's is the fraction of the running stat kept, as ONNX's: torch's
0.1 is 0.9 here; Keras's default is 0.99) and, for Keras's own call, running_var_estimator 'biased' (Keras
updates moving_variance with the batch's population variance, torch with the unbiased one).

Data layout. The bundle is torch's: NCHW. TensorFlow's CPU convolutions take only NHWC, so a Keras port is
channels-last inside. Its boundary is decided from the shape the model was built with (a functional model's
Input shapes, or the shape of its first call): where a 4-D input's built shape is the bundle's (N, C, H, W)
channels-last and not the bundle's own, the port is NHWC: every 4-D float input is fed transposed
(0, 2, 3, 1), every 4-D loss seed too, and every 4-D output transposed back (0, 3, 1, 2). Where the built
shape is the bundle's own, or says nothing (a tf.Module, no 4-D input, a square C = H = W), the port takes
the bundle's NCHW tensors as they are (a port that transposes inside). Each 4-D module output, and its
gradient, is transposed back where its layout is NHWC: a layer's own data_format (Conv, pooling, padding,
upsampling) or BatchNormalization axis (-1 or 3) says it; a layer without one (ReLU, Add, a block of the
porter's own) has the layout of its first 4-D input (a model input, or another layer's output); one whose
input is of no known layout (made by ops outside any layer) has the port's boundary layout. Other ranks
are compared as they are. The report's notes say what was transposed. Recorded random values (`recorded=`)
are handed over as the bundle has them (NCHW): the port transposes its dropout masks itself.

Capture, without changing the computation: each submodule's `call` is wrapped on the instance (a Keras
layer; a tf.Module's `__call__` through a per-instance subclass), the wrapper keeps the first tensor it
returns and, under the dot loss, watches it on the step's tape (a watched tensor's gradient is the tape's
own, no op is added); everything is unwrapped after the step. The step is one GradientTape (two nested,
the inner one differentiated inside the outer, for the gradient penalty), as a training step is written.
"""
import inspect

import numpy as np
import tensorflow as tf
import keras
from keras.src.models.functional import Functional  # what keras.Model(inputs, outputs) makes

from backends._runtime.port import check_outputs
from backends.tensorflow.adapter import readable

_CONV = (keras.layers.Conv1D, keras.layers.Conv2D, keras.layers.Conv3D)
_CONV_T = (keras.layers.Conv1DTranspose, keras.layers.Conv2DTranspose, keras.layers.Conv3DTranspose)
_NORM = (keras.layers.LayerNormalization, keras.layers.GroupNormalization)
# Keras's layer classes whose variables are torch's module's under another name (see the docstring)
_TORCH_NAMES = ((_CONV + _CONV_T, {"kernel": "weight"}), ((keras.layers.Dense,), {"kernel": "weight"}),
                ((keras.layers.BatchNormalization,), {"gamma": "weight", "beta": "bias", "moving_mean": "running_mean",
                                                      "moving_variance": "running_var"}),
                (_NORM, {"gamma": "weight", "beta": "bias"}), ((keras.layers.Embedding,), {"embeddings": "weight"}))
NCHW_TO_NHWC, NHWC_TO_NCHW = (0, 2, 3, 1), (0, 3, 1, 2)


def is_module(module):
    return isinstance(module, (keras.layers.Layer, tf.Module))


def not_ready(module):
    """Why the port cannot be described yet (None when it can): a Keras model that was never built."""
    unbuilt = [p or type(module).__name__ for p, m in [("", module)] + _walk(module)
               if isinstance(m, keras.layers.Layer) and not isinstance(m, keras.layers.InputLayer) and not m.built]
    if unbuilt:
        return (f"the port's Keras model is not built ({', '.join(unbuilt[:3])}{', ...' if len(unbuilt) > 3 else ''} "
                f"has no variables yet): call it once in the factory on inputs of the bundle's shape, "
                f"channels-last for an NHWC port: model(tf.zeros((N, H, W, C)))")
    return None


def _is_variable(v):
    return isinstance(v, (tf.Variable, keras.Variable))


def _is_module(v):
    return is_module(v) and not isinstance(v, keras.layers.InputLayer)


def _attributes(obj):
    """(name, value) of an object's own attributes: public ones, and private ones that hold a module or a
    variable directly (Dense's `_kernel`, as `kernel`); Keras's own bookkeeping (lists of `_layers`) is not
    a path."""
    for name, value in vars(obj).items():
        if name.startswith("__"):
            continue
        if name.startswith("_"):
            if _is_module(value) or _is_variable(value):
                yield name.lstrip("_"), value
            continue
        yield name, value


def _nested(name, value, accept):
    """(path, item) of the items of `value` that `accept`, inside lists, tuples and dicts (TrackedList too)."""
    if accept(value):
        yield name, value
    elif isinstance(value, (list, tuple)):
        for k, v in enumerate(value):
            yield from _nested(f"{name}.{k}", v, accept)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _nested(f"{name}.{k}", v, accept)


def _children(obj):
    """(name, submodule) in the order a reader sees them: a Sequential's layers by position, a functional
    model's by layer name, otherwise by attribute (then any tracked layer no attribute holds, by its name)."""
    if isinstance(obj, keras.Sequential):
        return [(str(k), m) for k, m in enumerate(obj.layers)]
    if isinstance(obj, Functional):  # a functional model: its graph's layers, by name
        return [(m.name, m) for m in obj.layers if _is_module(m)]
    out = [pair for name, value in _attributes(obj) for pair in _nested(name, value, _is_module)]
    held = {id(m) for _, m in out}
    for m in getattr(obj, "_layers", None) or []:
        if _is_module(m) and id(m) not in held:
            out.append((m.name, m))
    return out


def _walk(root):
    """(path, module) of every submodule, depth first, each once (a shared one under its first path)."""
    out, seen = [], {id(root)}

    def visit(obj, prefix):
        for name, child in _children(obj):
            if id(child) in seen:
                continue
            seen.add(id(child))
            path = f"{prefix}{name}"
            out.append((path, child))
            visit(child, path + ".")
    visit(root, "")
    return out


def _own_variables(obj):
    """(name, variable) of the variables a module holds itself (not its submodules')."""
    out = [pair for name, value in _attributes(obj) for pair in _nested(name, value, _is_variable)]
    if isinstance(obj, keras.layers.Layer):
        held = {id(v) for _, v in out}
        for v in list(obj._trainable_variables) + list(obj._non_trainable_variables):
            if id(v) not in held:
                out.append((v.name.split(":")[0], v))
    for classes, names in _TORCH_NAMES:
        if isinstance(obj, classes):
            out = [(names.get(n, n), v) for n, v in out]
    return out


def _named_variables(module):
    """[(name, variable, "parameter" | "buffer")] of the whole port, each variable once."""
    out, seen = [], set()
    for path, obj in [("", module)] + _walk(module):
        for name, v in _own_variables(obj):
            if id(v) in seen:
                continue
            seen.add(id(v))
            out.append((f"{path}.{name}" if path else name, v, "parameter" if v.trainable else "buffer"))
    return out


def parameters(module):
    return [(n, v.numpy(), k) for n, v, k in _named_variables(module)]


def layouts(module):
    """Keras's kernels: a Conv's HWIO (hwio), a Dense's [in, out] (transpose). Applied wherever they fit,
    also where the bundle's shape is the port's too (a square Dense, a 3x3x3x3 filter)."""
    out = {}
    for path, obj in _walk(module):
        if isinstance(obj, _CONV + _CONV_T + (keras.layers.Dense,)):
            out[f"{path}.weight"] = ["transpose" if isinstance(obj, keras.layers.Dense) else "hwio"]
    return out


def _padding(layer, rank):
    if layer.padding == "same":
        return {"auto_pad": "SAME_UPPER"}  # TensorFlow's SAME (the odd pixel at the end): pads once the step ran
    if layer.padding == "valid":
        return {"pads": [0] * (2 * rank)}
    return {}


_PADDED = _CONV + (keras.layers.MaxPooling1D, keras.layers.MaxPooling2D, keras.layers.MaxPooling3D,
                   keras.layers.AveragePooling1D, keras.layers.AveragePooling2D, keras.layers.AveragePooling3D)
_ZERO_PADDING = (keras.layers.ZeroPadding1D, keras.layers.ZeroPadding2D, keras.layers.ZeroPadding3D)


def _pairs(padding):
    return [tuple(p) if isinstance(p, (tuple, list)) else (p, p) for p in
            (padding if isinstance(padding, (tuple, list)) and isinstance(padding[0], (tuple, list)) else
             ([tuple(padding)] if isinstance(padding, (tuple, list)) else [(padding, padding)]))]


def _step_pads(layer, x, before):
    """The pads (ONNX's [begins..., ends...]) a Conv or pooling layer applied to `x` in the step: 'same'
    resolved at x's size as TensorFlow does (the odd pixel at the end), plus those of a ZeroPadding layer
    `before` it (the padding a porter writes as its own layer is the conv's to torch)."""
    kernel = list(getattr(layer, "kernel_size", None) or layer.pool_size)
    strides = list(layer.strides)
    dilations = list(getattr(layer, "dilation_rate", None) or [1] * len(kernel))
    sizes = list(x.shape[1:-1] if layer.data_format == "channels_last" else x.shape[2:])
    if layer.padding == "same":
        begins, ends = [], []
        for n, k, st, d in zip(sizes, kernel, strides, dilations):
            total = max(0, (-(-n // st) - 1) * st + (k - 1) * d + 1 - n)
            begins.append(total // 2)
            ends.append(total - total // 2)
    elif layer.padding == "valid":
        begins, ends = [0] * len(kernel), [0] * len(kernel)
    else:
        return None
    if isinstance(before, _ZERO_PADDING):
        pairs = _pairs(before.padding)
        if len(pairs) == len(kernel):
            begins = [b + p[0] for b, p in zip(begins, pairs)]
            ends = [e + p[1] for e, p in zip(ends, pairs)]
    return [int(v) for v in begins + ends]


def modules(module):
    """(path, class, attributes in ONNX's words) of every submodule."""
    out = []
    for path, m in _walk(module):
        attrs = {}
        if isinstance(m, _CONV):
            rank = len(m.kernel_size)
            attrs = {"strides": list(m.strides), "dilations": list(m.dilation_rate), "group": int(m.groups),
                     "kernel_shape": list(m.kernel_size), **_padding(m, rank)}
        elif isinstance(m, _CONV_T):
            attrs = {"strides": list(m.strides), "dilations": list(m.dilation_rate)}
        elif isinstance(m, (keras.layers.MaxPooling2D, keras.layers.AveragePooling2D)):
            attrs = {"strides": list(m.strides), "kernel_shape": list(m.pool_size), **_padding(m, 2)}
        elif isinstance(m, keras.layers.BatchNormalization):
            attrs = {"epsilon": float(m.epsilon), "momentum": float(m.momentum)}
            if type(m).call is keras.layers.BatchNormalization.call and not m.renorm:
                attrs["running_var_estimator"] = "biased"  # moving_variance from ops.moments' population variance
        elif isinstance(m, _NORM):
            attrs = {"epsilon": float(m.epsilon)}
        out.append((path, type(m).__name__, attrs))
    return out


def load(module, weights):
    """The bundle's values (already in the port's layout) into the port's variables, by name."""
    by_name = {n: v for n, v, _ in _named_variables(module)}
    for name, value in weights.items():
        v = by_name[name]
        v.assign(np.asarray(value).astype(tf.as_dtype(v.dtype).as_numpy_dtype))


# ---- data layout ----

def _declared_shapes(module):
    """Input position -> the shape the model was built with, where Keras knows it."""
    if isinstance(module, Functional) and getattr(module, "inputs", None):
        return {k: tuple(t.shape) for k, t in enumerate(module.inputs)}
    shapes = getattr(module, "_build_shapes_dict", None) or {}
    if isinstance(shapes, dict) and len(shapes) == 1:
        (shape,) = shapes.values()
        if isinstance(shape, (tuple, list)) and all(d is None or isinstance(d, int) for d in shape):
            return {0: tuple(shape)}
    return {}


def _fits(declared, shape):
    return len(declared) == len(shape) and all(d is None or d == s for d, s in zip(declared[1:], shape[1:]))


def boundary(module, inputs):
    """("NHWC" | "NCHW", why): the layout of the port's 4-D inputs and outputs (see the docstring)."""
    for k, shape in _declared_shapes(module).items():
        if k >= len(inputs) or np.ndim(inputs[k]) != 4 or np.asarray(inputs[k]).dtype.kind != "f":
            continue
        nchw = tuple(np.shape(inputs[k]))
        nhwc = tuple(nchw[i] for i in NCHW_TO_NHWC)
        as_nchw, as_nhwc = _fits(shape, nchw), _fits(shape, nhwc)
        if as_nhwc != as_nchw:
            return ("NHWC" if as_nhwc else "NCHW"), (f"built with input {k} of shape {list(shape)}, the bundle's "
                                                     f"{list(nchw)} {'channels-last' if as_nhwc else 'as it is'}")
    return "NCHW", "no shape it was built with tells a 4-D input's layout"


def _own_layout(layer, inputs):
    """A layer's output layout where the layer says it (data_format, BatchNormalization's axis), else None."""
    fmt = getattr(layer, "data_format", None)
    if fmt in ("channels_last", "channels_first"):
        return "NHWC" if fmt == "channels_last" else "NCHW"
    if isinstance(layer, keras.layers.BatchNormalization) and inputs and len(inputs[0].shape) == 4:
        axis = layer.axis[0] if isinstance(layer.axis, (list, tuple)) and len(layer.axis) == 1 else layer.axis
        return {-1: "NHWC", 3: "NHWC", 1: "NCHW", -3: "NCHW"}.get(axis)
    return None


def _tensors(out):
    if isinstance(out, tf.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in _tensors(v)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in _tensors(v)]
    return []


def _port(a, layout):
    """A bundle array in the port's layout."""
    a = np.asarray(a)
    return np.ascontiguousarray(np.transpose(a, NCHW_TO_NHWC)) if layout == "NHWC" and a.ndim == 4 else a


def _bundle(a, layout):
    """A port array in the bundle's layout."""
    a = np.asarray(a)
    return np.ascontiguousarray(np.transpose(a, NHWC_TO_NCHW)) if layout == "NHWC" and a.ndim == 4 else a


# ---- capture ----

class _Capture:
    """Wraps every submodule's call for one step: the first tensor each returns, its layout, and (dot loss) a
    watch on the step's tape."""

    def __init__(self, module, outer_layout):
        self.module, self.outer = module, outer_layout
        self.seen, self.layout, self.how = {}, {}, {}
        self.known = {}   # id(tensor) -> (tensor, layout, the module that made it): inputs and module outputs
        self.attributes = {}  # path -> what the step showed of the module (its pads)
        self.tape = None
        self.undo = []

    def track(self, tensors, layout, maker=None):
        for t in tensors:
            self.known[id(t)] = (t, layout, maker)

    def _maker(self, t):
        got = self.known.get(id(t))
        return got[2] if got is not None and got[0] is t else None

    def _decide(self, layer, args):
        ins = [t for t in _tensors(list(args)) if len(t.shape) == 4]
        own = _own_layout(layer, ins)
        if own is not None:
            return own, "its own"
        for t in ins:
            if id(t) in self.known and self.known[id(t)][0] is t:
                return self.known[id(t)][1], "its input's"
        return self.outer, "the port's"

    def _wrapper(self, path, layer, original):
        def call(*args, **kwargs):
            out = original(*args, **kwargs)
            outs = _tensors(out)
            layout, how = self._decide(layer, args)
            if isinstance(out, tf.Tensor) and path not in self.seen:
                self.seen[path], self.layout[path], self.how[path] = out, layout, how
                x = next(iter(_tensors(list(args))), None)
                if isinstance(layer, _PADDED) and x is not None:
                    pads = _step_pads(layer, x, self._maker(x))
                    if pads is not None:
                        self.attributes[path] = {"pads": pads}
                if self.tape is not None:
                    self.tape.watch(out)  # its gradient is then the tape's own: nothing is added to the graph
            self.track(outs, layout, layer)
            return out
        return call

    def __enter__(self):
        for path, m in _walk(self.module):
            if isinstance(m, keras.layers.Layer):
                before = m.__dict__.get("call")
                object.__setattr__(m, "call", self._wrapper(path, m, m.call))
                self.undo.append((m, before))
            elif callable(getattr(type(m), "__call__", None)) and type(m).__call__ is not object.__call__:
                cls = type(m)
                wrapped = self._wrapper(path, m, lambda *a, _m=m, _c=cls, **k: _c.__call__(_m, *a, **k))
                sub = type(cls.__name__, (cls,), {"__call__": lambda self_, *a, _w=wrapped, **k: _w(*a, **k),
                                                  "__module__": cls.__module__, "__qualname__": cls.__qualname__})
                object.__setattr__(m, "__class__", sub)
                self.undo.append((m, cls))
        return self

    def __exit__(self, *exc):
        for m, before in reversed(self.undo):
            if isinstance(before, type):
                object.__setattr__(m, "__class__", before)
            elif before is None:
                object.__delattr__(m, "call")
            else:
                object.__setattr__(m, "call", before)
        self.undo = []
        return False


def _call(module, xs, train):
    if isinstance(module, Functional) and len(getattr(module, "inputs", None) or []) > 1:
        return module(list(xs), training=train)  # a functional model takes its inputs as one list
    if isinstance(module, keras.layers.Layer):
        return module(*xs, training=train)
    try:
        takes = inspect.signature(module.__call__).parameters
    except (TypeError, ValueError):
        takes = {}
    return module(*xs, training=train) if "training" in takes else module(*xs)


def run(module, inputs, seeds, loss, train, capture=True):
    """One step: outputs, every submodule's first output, d loss / d each (the dot loss only), d loss /
    d each parameter, and the buffers after it; all in the bundle's layout but the parameter gradients
    (the host puts those back). TensorFlow's errors in TensorFlow's words, as the replay quotes them (one
    line, the op named), so the host can find the isolated findings that fail the same way."""
    try:
        return _run(module, inputs, seeds, loss, train, capture)
    except tf.errors.OpError as e:
        raise type(e)(e.node_def, e.op, readable(e.message)).with_traceback(e.__traceback__) from None


def _run(module, inputs, seeds, loss, train, capture):
    layout, why = boundary(module, inputs)
    xs = [tf.constant(_port(a, layout)) for a in inputs]
    floats = [x for x in xs if x.dtype.is_floating]
    named = _named_variables(module)
    params = [v for _, v, k in named if k == "parameter"]
    penalty = loss == "grad-penalty"
    cap = _Capture(module, layout) if capture else None
    if cap is not None:
        cap.track(xs, layout)
        cap.__enter__()
    inner = None
    try:
        with tf.GradientTape() as outer:
            if cap is not None and not penalty:
                cap.tape = outer
            if penalty:
                inner = tf.GradientTape()
                inner.__enter__()
                inner.watch(floats)
            ys = _tensors(_call(module, xs, train))
            check_outputs([_bundle_shape(y.shape, layout) for y in ys], seeds)
            terms = [tf.reduce_sum(y * tf.constant(_port(c, layout), dtype=y.dtype))
                     for y, c in zip(ys, seeds) if c is not None]
            total = terms[0]
            for t in terms[1:]:
                total = total + t
            if penalty:
                inner.__exit__(None, None, None)
                tape, inner = inner, None
                for g in tape.gradient(total, floats):
                    if g is not None:
                        total = total + tf.reduce_sum(g * g)
    finally:
        if inner is not None:
            inner.__exit__(None, None, None)
        if cap is not None:
            cap.tape = None
            cap.__exit__(None, None, None)
    seen = list(cap.seen.items()) if cap is not None and not penalty else []
    got = outer.gradient(total, params + [t for _, t in seen], unconnected_gradients=tf.UnconnectedGradients.ZERO)
    got = [_numpy(g) for g in got]
    out = {"outputs": [_bundle(y.numpy(), layout) for y in ys],
           "params": dict(zip([n for n, _, k in named if k == "parameter"], got[:len(params)])),
           "buffers": {n: v.numpy() for n, v, k in named if k == "buffer"}, "notes": []}
    if cap is not None:
        out["modules"] = {p: _bundle(t.numpy(), cap.layout[p]) for p, t in cap.seen.items()}
        out["grads"] = {p: _bundle(g, cap.layout[p]) for (p, _), g in zip(seen, got[len(params):])}
        out["notes"] = _notes(layout, why, inputs, ys, cap)
        out["attributes"] = cap.attributes
    return out


def _numpy(g):
    return tf.convert_to_tensor(g).numpy()  # an IndexedSlices (a gather's gradient) made dense


def _bundle_shape(shape, layout):
    shape = tuple(shape)
    return tuple(shape[i] for i in NHWC_TO_NCHW) if layout == "NHWC" and len(shape) == 4 else shape


def _notes(layout, why, inputs, ys, cap):
    """What was transposed, exactly."""
    four = [k for k, a in enumerate(inputs) if np.ndim(a) == 4 and np.asarray(a).dtype.kind == "f"]
    outs = [k for k, y in enumerate(ys) if len(y.shape) == 4]
    if layout == "NHWC":
        text = (f"NHWC port ({why}): the bundle's NCHW input(s) {four} fed transposed (0, 2, 3, 1)"
                + (f", its 4-D output(s) {outs} transposed back (0, 3, 1, 2)" if outs else ""))
    else:
        text = f"the port takes the bundle's NCHW inputs as they are ({why})"
    moved = [p for p, t in cap.seen.items() if cap.layout[p] == "NHWC" and len(t.shape) == 4]
    if moved:
        words = {"its own": "their layer's data_format or BatchNormalization axis", "its input's": "their input's layout",
                 "the port's": "the port's layout, their input's being unknown"}
        by = {h: [p for p in moved if cap.how[p] == h] for h in words}
        text += (f"; {len(moved)} NHWC module output(s) and their gradients transposed back (0, 3, 1, 2) ("
                 + ", ".join(f"{len(v)} by {words[h]}" + (f": {', '.join(v[:4])}{', ...' if len(v) > 4 else ''}"
                                                          if h == "the port's" else "")
                             for h, v in by.items() if v) + ")")
    return [text]
