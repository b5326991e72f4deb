"""Single-node ONNX cases drawn from the operator schemas (onnx.defs), seeded.

Case `index` of seed `seed` is drawn by its own generator, numpy's `default_rng([seed, index])`, so a case
is the same bytes whatever ran before it, and a fuzz run resumes from the next index. The schema gives
the op's opset, its inputs and their optionality, the types it takes and its attributes with their
defaults; what a schema only types (INTS, FLOAT, STRING) is drawn from a per-op domain (DOMAINS) or by
the op family's recipe (RECIPES), which knows how the shapes of inputs and attributes tie together.
Every case is checked with onnx.checker (full_check) and strict shape inference; a case that fails
them is discarded (`Case.problem` says why) and counted, never run."""
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import defs, helper, numpy_helper, shape_inference

from backends._runtime.wire import dtype_of

OPSET = 20


@dataclass
class Input:
    """One input of a case: `role` "x" (a float activation a training step differentiates), "stat" (a
    float input it does not: running statistics, clip bounds), "const" (an initializer: axes, pads,
    indices), or "none" (an optional input left out)."""
    role: str
    value: np.ndarray = None


@dataclass
class Case:
    """A drawn case: op, attributes, inputs (Input), number of outputs; `problem`: why the checker or
    shape inference refused it (None: valid)."""
    seed: int
    index: int
    op: str
    attrs: dict
    inputs: list
    outputs: int = 1
    problem: str = None
    cls: str = ""  # the attribute/shape class: the rank of the first input and the attributes set
    styles: tuple = ()  # the value styles of its float inputs (Draw.floats)

    @property
    def id(self):
        return f"c{self.index:06d}"

    def size(self):
        return sum(int(np.size(i.value)) for i in self.inputs if i.value is not None)

    @property
    def dtype(self):
        """The float dtype of its inputs ("float32", "float16", "bfloat16": ml_dtypes' numpy type, kind V)."""
        return next((i.value.dtype.name for i in self.inputs if i.value is not None and i.value.dtype.kind in "fV"),
                    "float32")

    def input_names(self):
        return [f"{self.id}.{'stat' if i.role == 'stat' else 'in'}{k}" if i.role != "none" else ""
                for k, i in enumerate(self.inputs)]

    def output_names(self):
        return [f"{self.id}.out{j}" for j in range(self.outputs)]

    def node(self):
        names = self.input_names()
        while names and not names[-1]:
            names.pop()
        return helper.make_node(self.op, names, self.output_names(), name=self.id, **self.attrs)

    def parts(self):
        """(graph inputs, initializers, feeds) of this case."""
        g_inputs, inits, feeds = [], [], {}
        for name, inp in zip(self.input_names(), self.inputs):
            if inp.role == "none":
                continue
            if inp.role == "const":
                inits.append(numpy_helper.from_array(inp.value, name))
                continue
            feeds[name] = inp.value
            g_inputs.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(inp.value.dtype), list(inp.value.shape)))
        return g_inputs, inits, feeds

    def trained(self):
        return [n for n, i in zip(self.input_names(), self.inputs) if i.role == "x"]


def model_of(cases, name="fuzz"):
    """(model, feeds, trained input names): the cases side by side as the nodes of one graph."""
    nodes, g_inputs, inits, outs, feeds, trained = [], [], [], [], {}, []
    for c in cases:
        gi, it, fd = c.parts()
        g_inputs += gi
        inits += it
        feeds.update(fd)
        trained += c.trained()
        nodes.append(c.node())
        outs += [helper.make_empty_tensor_value_info(o) for o in c.output_names()]
    model = helper.make_model(helper.make_graph(nodes, name, g_inputs, outs, inits),
                              opset_imports=[helper.make_opsetid("", OPSET)])
    return model, feeds, trained


def check(case):
    """The reason onnx.checker (full_check) or strict shape inference refuses the case's model, or None."""
    model, _, _ = model_of([case])
    try:
        # the outputs' types come from inference, and the checker then wants them all
        inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        onnx.checker.check_model(inferred, full_check=True)
    except Exception as e:  # noqa: BLE001 - onnx raises several kinds; each is a reason to discard
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200]}"
    return None


# --- drawing ---------------------------------------------------------------------------------------

class Draw:
    """The drawing helpers one case uses, over its own seeded generator."""

    def __init__(self, rng):
        self.rng = rng
        self.styles = set()  # the value styles drawn: "ties" and "zeros" put values on kinks and ties

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def int(self, lo, hi):
        """An integer in [lo, hi]."""
        return int(self.rng.integers(lo, hi + 1))

    def flag(self, p=0.5):
        return bool(self.rng.random() < p)

    def dim(self, lo=1, hi=7):
        """A size: 1 and odd sizes come often (the edges of kernels and strides)."""
        return self.pick([1, 1, 2, 3, 3, 4, 5, 5, 6, 7, 7]) if (lo, hi) == (1, 7) else self.int(lo, hi)

    def shape(self, rank):
        return tuple(self.dim() for _ in range(rank))

    def axes(self, rank, k):
        """`k` distinct axes of a rank-`rank` tensor, each written negative half of the time."""
        chosen = self.rng.permutation(rank)[:k]
        return [int(a) - rank if self.flag() else int(a) for a in chosen]

    def floats(self, shape, domain="any", styles=("normal", "ties", "zeros", "scale")):
        """float32 values of `shape` in `domain` ("any", "pos": > 0, "away0": |x| >= 0.5, "unit": (-1, 1),
        "small": |x| <= 3, "tan": |x| < 1.4), in a style: N(0, 1); ties (few distinct values, for max, argmax,
        sort); exact zeros among them (the kinks of relu, abs, clip); tiny or large magnitudes."""
        style = self.pick(styles)
        self.styles.add(style)
        rng = self.rng
        if style == "ties":
            a = rng.integers(-3, 4, shape) * 0.5
        else:
            a = rng.standard_normal(shape)
            if style == "zeros":
                a[rng.random(shape) < 0.3] = 0.0
            if style == "scale" and domain in ("any", "pos", "away0"):
                a *= self.pick([1e-3, 1e-2, 30.0])
        if domain == "pos":
            a = np.abs(a) + (0.5 if style == "ties" else 0.05)
        elif domain == "away0":
            a = np.where(a >= 0, 1.0, -1.0) * (np.abs(a) + 0.5)
        elif domain == "unit":
            a = np.tanh(a) * 0.9
        elif domain == "small":
            a = np.clip(a, -3, 3)
        elif domain == "tan":
            a = np.clip(a, -1.3, 1.3)
        return np.asarray(a, np.float32)


def _x(d, shape, domain="any", styles=None):
    return Input("x", d.floats(shape, domain, *(() if styles is None else (styles,))))


def _const(values, dtype=np.int64, scalar=False):
    a = np.array(values, dtype)
    return Input("const", a.reshape(()) if scalar else a)


def _ints(values):
    return [int(v) for v in values]


# --- the per-op domains of what a schema only types --------------------------------------------------

# values: the input domain of ops defined only on part of the line (the rest stays N(0, 1))
VALUES = {"Log": "pos", "Sqrt": "pos", "Reciprocal": "away0", "Tan": "tan", "Exp": "small", "Softplus": "small",
          "Acos": "unit", "Asin": "unit", "Atanh": "unit", "Sinh": "small", "Cosh": "small"}

DOMAINS = {
    "Elu": {"alpha": [1.0, 0.5, 2.0]},
    "Selu": {"alpha": [1.67326319217681884765625, 1.5], "gamma": [1.05070102214813232421875, 2.0]},
    "LeakyRelu": {"alpha": [0.01, 0.2, 1.5]},
    "HardSigmoid": {"alpha": [0.2, 1 / 6, 0.5], "beta": [0.5, 0.25]},
    "Gelu": {"approximate": ["none", "tanh"]},
    "Celu": {"alpha": [1.0, 0.7]},
    "ThresholdedRelu": {"alpha": [1.0, 0.5]},
    "Shrink": {"lambd": [0.5, 1.0], "bias": [0.0, 0.3]},
}

# ops whose schema is x -> y of one float type: drawn by the unary recipe with these least ranks
UNARY_MIN_RANK = {"GlobalAveragePool": 3, "GlobalMaxPool": 3}


# --- recipes: an op family's inputs and attributes, whose shapes tie together --------------------------

RECIPES = {}


def recipe(*ops):
    def wrap(fn):
        for op in ops:
            if op in RECIPES:
                raise ValueError(f"two recipes for {op}")
            RECIPES[op] = fn
        return fn
    return wrap


def _unary(op, d, schema):
    rank = d.int(UNARY_MIN_RANK.get(op, 1), 5)
    shape = d.shape(rank)
    attrs = {}
    names = {a for a in schema.attributes}
    if "axis" in names:  # Softmax, LogSoftmax, Flatten, Hardmax: any axis, negative or not
        attrs["axis"] = d.int(-rank, rank if op == "Flatten" else rank - 1)  # Flatten's axis may be the rank
    return [_x(d, shape, VALUES.get(op, "any"))], attrs, 1


def _broadcast_shapes(d, n, rank):
    """`n` shapes that broadcast together: each a suffix of a common shape, some sizes set to 1."""
    full = d.shape(rank)
    shapes = []
    for _ in range(n):
        r = d.int(max(0, rank - 2), rank) if rank else 0
        s = [1 if d.flag(0.25) else full[rank - r + k] for k in range(r)]
        shapes.append(tuple(s))
    shapes[d.int(0, n - 1)] = full  # one carries the output's shape
    return shapes


@recipe("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Mod", "Equal", "Greater", "Less",
        "GreaterOrEqual", "LessOrEqual", "PRelu")
def binary(op, d, schema):
    n = d.int(1, 3) if op in ("Max", "Min", "Sum", "Mean") else 2
    rank = d.int(1, 4)
    shapes = _broadcast_shapes(d, n, rank)
    attrs = {}
    if op == "PRelu":  # the slope broadcasts to x one way only: a suffix of x's shape, some sizes 1
        x_shape = d.shape(rank)
        shapes = [x_shape, tuple(1 if d.flag() else s for s in x_shape[d.int(0, rank - 1):])]
    if op == "Mod":
        attrs["fmod"] = 1  # float Mod is fmod by the schema's rule
    if op in ("Max", "Min", "Equal", "GreaterOrEqual", "LessOrEqual", "Greater", "Less"):
        styles = ("ties", "ties", "normal")  # equal operands: which one gets the gradient
        ins = [_x(d, s, styles=styles) for s in shapes]
    elif op == "Pow":
        ins = [_x(d, shapes[0], "pos", ("normal", "ties")), _x(d, shapes[1], "small", ("normal", "ties", "zeros"))]
    elif op in ("Div", "Mod"):
        ins = [_x(d, shapes[0]), _x(d, shapes[1], "away0")]
    else:
        ins = [_x(d, s) for s in shapes]
    return ins, attrs, 1


@recipe("Clip")
def clip(op, d, schema):
    shape = d.shape(d.int(1, 4))
    lo, hi = sorted(d.pick([-1.0, -0.5, 0.0, 0.5, 1.0]) for _ in range(2))
    bounds = [Input("stat", np.array(lo, np.float32)) if d.flag(0.8) else Input("none"),
              Input("stat", np.array(hi, np.float32)) if d.flag(0.8) else Input("none")]
    return [_x(d, shape, styles=("ties", "normal", "zeros"))] + bounds, {}, 1  # ties: values at the bounds


@recipe("ReduceL1", "ReduceL2", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd",
        "ReduceSum", "ReduceSumSquare", "ReduceLogSum")
def reduce(op, d, schema):
    rank = d.int(1, 5)
    shape = d.shape(rank)
    attrs = {"keepdims": d.int(0, 1)}
    domain = {"ReduceL2": "away0", "ReduceL1": "away0", "ReduceLogSum": "pos", "ReduceProd": "small"}.get(op, "any")
    x = _x(d, shape, domain)
    if d.flag(0.2):
        return [x], attrs, 1  # no axes: every axis
    return [x, _const(d.axes(rank, d.int(1, rank)))], attrs, 1


@recipe("ArgMax", "ArgMin")
def arg(op, d, schema):
    rank = d.int(1, 4)
    shape = d.shape(rank)
    attrs = {"axis": d.int(-rank, rank - 1), "keepdims": d.int(0, 1), "select_last_index": d.int(0, 1)}
    return [_x(d, shape, styles=("ties", "ties", "normal"))], attrs, 1


@recipe("TopK")
def topk(op, d, schema):
    rank = d.int(1, 4)
    shape = d.shape(rank)
    axis = d.int(-rank, rank - 1)
    k = d.int(1, shape[axis])
    attrs = {"axis": axis, "largest": d.int(0, 1), "sorted": 1}
    return [_x(d, shape, styles=("ties", "normal")), _const([k])], attrs, 2


@recipe("CumSum")
def cumsum(op, d, schema):
    rank = d.int(1, 4)
    attrs = {"exclusive": d.int(0, 1), "reverse": d.int(0, 1)}
    return [_x(d, d.shape(rank)), _const(d.int(-rank, rank - 1), scalar=True)], attrs, 1


def _spatial(d, n, kernel, stride, dilation, with_pads=True, pad_below_kernel=False):
    """Spatial sizes of the input for `n` dims, and asymmetric pads (begin..., end...)."""
    pads = [0] * (2 * n)
    if with_pads:
        for k in range(2 * n):
            top = kernel[k % n] - 1 if pad_below_kernel else 2
            pads[k] = d.int(0, max(0, top))
    sizes = []
    for k in range(n):
        span = dilation[k] * (kernel[k] - 1) + 1
        sizes.append(max(1, span - pads[k] - pads[n + k]) + d.int(0, 4))
    return sizes, pads


@recipe("Conv")
def conv(op, d, schema):
    n = d.pick([1, 2, 2, 2, 3])
    group = d.pick([1, 1, 2, 3])
    cin, cout = group * d.int(1, 3), group * d.int(1, 3)
    kernel = [d.int(1, 3) for _ in range(n)]
    strides = [d.int(1, 3) for _ in range(n)]
    dilations = [d.pick([1, 1, 2]) for _ in range(n)]
    sizes, pads = _spatial(d, n, kernel, strides, dilations)
    x = _x(d, (d.int(1, 2), cin, *sizes))
    w = _x(d, (cout, cin // group, *kernel))
    ins = [x, w] + ([_x(d, (cout,))] if d.flag() else [])
    attrs = {"strides": strides, "pads": pads, "dilations": dilations, "group": group}
    if d.flag(0.5):
        attrs["kernel_shape"] = kernel
    return ins, attrs, 1


@recipe("ConvTranspose")
def conv_transpose(op, d, schema):
    n = d.pick([1, 2, 2, 2, 3])
    group = d.pick([1, 1, 2])
    cin, cout = group * d.int(1, 3), group * d.int(1, 3)
    kernel = [d.int(1, 3) for _ in range(n)]
    strides = [d.int(1, 3) for _ in range(n)]
    dilations = [d.pick([1, 1, 2]) for _ in range(n)]
    # output_padding below the stride: torch allows it below the dilation too, where several frameworks
    # and onnx.reference do not (an output_padding the stride does not cover has no input positions);
    # pads below the kernel's span
    out_pad = [d.int(0, s - 1) if d.flag(0.4) else 0 for s in strides]
    pads = [d.int(0, dilations[k % n] * (kernel[k % n] - 1)) if d.flag(0.6) else 0 for k in range(2 * n)]
    sizes = [d.int(1, 5) for _ in range(n)]
    x = _x(d, (d.int(1, 2), cin, *sizes))
    w = _x(d, (cin, cout // group, *kernel))
    ins = [x, w] + ([_x(d, (cout,))] if d.flag() else [])
    attrs = {"strides": strides, "pads": pads, "dilations": dilations, "group": group}
    if any(out_pad):
        attrs["output_padding"] = out_pad
    return ins, attrs, 1


@recipe("MaxPool", "AveragePool")
def pool(op, d, schema):
    n = d.pick([1, 2, 2, 3])
    kernel = [d.int(1, 4) for _ in range(n)]
    strides = [d.int(1, 3) for _ in range(n)]
    dilations = [d.pick([1, 1, 2]) for _ in range(n)]
    sizes, pads = _spatial(d, n, kernel, strides, dilations, with_pads=d.flag(0.7), pad_below_kernel=True)
    attrs = {"kernel_shape": kernel, "strides": strides, "pads": pads, "ceil_mode": d.int(0, 1)}
    if d.flag(0.3):
        attrs["dilations"] = dilations
    if op == "AveragePool":
        attrs["count_include_pad"] = d.int(0, 1)
    styles = ("ties", "normal") if op == "MaxPool" else ("normal", "scale")
    return [_x(d, (d.int(1, 2), d.int(1, 3), *sizes), styles=styles)], attrs, 1


@recipe("BatchNormalization")
def batch_norm(op, d, schema):
    rank = d.int(2, 5)
    shape = d.shape(rank)
    c = (shape[1],)
    stats = [Input("stat", d.floats(c)), Input("stat", d.floats(c, "pos"))]
    return [_x(d, shape), _x(d, c), _x(d, c)] + stats, {"epsilon": d.pick([1e-5, 1e-3])}, 1


@recipe("InstanceNormalization")
def instance_norm(op, d, schema):
    shape = d.shape(d.int(3, 5))
    shape = (shape[0], shape[1], *[max(2, s) for s in shape[2:]])  # one element has no variance to normalise
    c = (shape[1],)
    return [_x(d, shape), _x(d, c), _x(d, c)], {"epsilon": d.pick([1e-5, 1e-3])}, 1


@recipe("LayerNormalization")
def layer_norm(op, d, schema):
    rank = d.int(1, 4)
    shape = tuple(max(2, s) for s in d.shape(rank))
    axis = d.int(-rank, rank - 1)
    norm = shape[axis:] if axis >= 0 else shape[rank + axis:]
    ins = [_x(d, shape), _x(d, norm)] + ([_x(d, norm)] if d.flag() else [])
    return ins, {"axis": axis, "epsilon": d.pick([1e-5, 1e-3])}, 1


@recipe("Gemm")
def gemm(op, d, schema):
    m, k, n = d.dim(), d.dim(), d.dim()
    ta, tb = d.int(0, 1), d.int(0, 1)
    a = _x(d, (k, m) if ta else (m, k))
    b = _x(d, (n, k) if tb else (k, n))
    c = [_x(d, d.pick([(m, n), (n,), (1, n), (m, 1), ()]))] if d.flag(0.7) else []
    attrs = {"transA": ta, "transB": tb, "alpha": d.pick([1.0, 0.5, -2.0]), "beta": d.pick([1.0, 0.0, 2.0])}
    return [a, b] + c, attrs, 1


@recipe("MatMul")
def matmul(op, d, schema):
    m, k, n = d.dim(), d.dim(), d.dim()
    batch = d.shape(d.int(0, 2))
    a = (*batch, m, k) if d.flag(0.8) else (k,)
    b = (*[s if not d.flag(0.3) else 1 for s in batch][d.int(0, len(batch)):], k, n) if d.flag(0.8) else (k,)
    return [_x(d, a), _x(d, b)], {}, 1


@recipe("Transpose")
def transpose(op, d, schema):
    rank = d.int(1, 5)
    return [_x(d, d.shape(rank))], {"perm": _ints(d.rng.permutation(rank))}, 1


@recipe("Concat")
def concat(op, d, schema):
    rank = d.int(1, 4)
    shape = list(d.shape(rank))
    axis = d.int(-rank, rank - 1)
    ins = []
    for _ in range(d.int(1, 3)):
        shape[axis] = d.dim()
        ins.append(_x(d, tuple(shape)))
    return ins, {"axis": axis}, 1


@recipe("Split")
def split(op, d, schema):
    rank = d.int(1, 4)
    shape = list(d.shape(rank))
    axis = d.int(-rank, rank - 1)
    parts = d.int(1, 3)
    sizes = [d.int(1, 3) for _ in range(parts)]
    shape[axis] = sum(sizes)
    return [_x(d, tuple(shape)), _const(sizes)], {"axis": axis}, parts


@recipe("Slice")
def slice_(op, d, schema):
    rank = d.int(1, 4)
    shape = d.shape(rank)
    axes = d.axes(rank, d.int(1, rank))
    starts, ends, steps = [], [], []
    for a in axes:
        size = shape[a]
        step = d.pick([1, 1, 2, -1, -2])
        lo, hi = d.int(-size - 1, size), d.int(-size - 1, size + 1)
        starts.append(lo)
        ends.append(hi)
        steps.append(step)
    return [_x(d, shape), _const(starts), _const(ends), _const(axes), _const(steps)], {}, 1


@recipe("Gather", "GatherElements")
def gather(op, d, schema):
    rank = d.int(1, 4)
    shape = d.shape(rank)
    axis = d.int(-rank, rank - 1)
    size = shape[axis]
    if op == "Gather":
        idx = d.rng.integers(-size, size, d.shape(d.int(0, 2)))
    else:
        idx_shape = tuple(d.int(1, s) for s in shape)
        idx_shape = tuple(d.dim() if k == axis % rank else s for k, s in enumerate(idx_shape))
        idx = d.rng.integers(-size, size, idx_shape)
    return [_x(d, shape), _const(idx)], {"axis": axis}, 1


@recipe("Pad")
def pad(op, d, schema):
    rank = d.int(1, 5)
    shape = d.shape(rank)
    mode = d.pick(["constant", "constant", "reflect", "edge", "wrap"])
    top = [s - 1 if mode == "reflect" else (s if mode == "wrap" else 3) for s in shape]
    pads = [d.int(-1 if mode == "constant" and s > 1 else 0, t) for s, t in zip(shape * 2, top * 2)]
    ins = [_x(d, shape), _const(pads)]
    if mode == "constant" and d.flag():
        ins.append(Input("stat", np.array(d.pick([0.0, 1.5, -2.0]), np.float32)))
    return ins, {"mode": mode}, 1


@recipe("Reshape")
def reshape(op, d, schema):
    shape = d.shape(d.int(1, 4))
    target = list(d.rng.permutation(shape))
    if len(target) > 1 and d.flag():
        target = [target[0] * target[1]] + target[2:]
    if d.flag(0.4):
        target[d.int(0, len(target) - 1)] = -1
    return [_x(d, shape), _const(target)], {}, 1


@recipe("Squeeze", "Unsqueeze")
def squeeze(op, d, schema):
    rank = d.int(1, 4)
    shape = list(d.shape(rank))
    if op == "Squeeze":
        ones = d.axes(rank, d.int(1, rank))
        for a in ones:
            shape[a] = 1
        return [_x(d, tuple(shape)), _const(ones)], {}, 1
    out_rank = rank + d.int(1, 2)
    return [_x(d, tuple(shape)), _const(d.axes(out_rank, out_rank - rank))], {}, 1


@recipe("Expand")
def expand(op, d, schema):
    rank = d.int(1, 4)
    target = d.shape(rank)
    shape = tuple(1 if d.flag(0.5) else s for s in target[d.int(0, rank - 1):])
    return [_x(d, shape), _const(target)], {}, 1


@recipe("Tile")
def tile(op, d, schema):
    shape = d.shape(d.int(1, 4))
    return [_x(d, shape), _const([d.int(1, 3) for _ in shape])], {}, 1


@recipe("DepthToSpace", "SpaceToDepth")
def depth_space(op, d, schema):
    b = d.int(1, 3)
    n, c, h, w = d.int(1, 2), d.int(1, 3), d.int(1, 4), d.int(1, 4)
    attrs = {"blocksize": b}
    if op == "DepthToSpace":
        attrs["mode"] = d.pick(["DCR", "CRD"])
        return [_x(d, (n, c * b * b, h, w))], attrs, 1
    return [_x(d, (n, c, h * b, w * b))], attrs, 1


@recipe("Where")
def where(op, d, schema):
    shapes = _broadcast_shapes(d, 3, d.int(1, 4))
    cond = Input("const", d.rng.random(shapes[0]) < 0.5)
    return [cond, _x(d, shapes[1]), _x(d, shapes[2])], {}, 1


@recipe("Trilu")
def trilu(op, d, schema):
    shape = d.shape(d.int(2, 4))
    return [_x(d, shape), _const(d.int(-3, 3), scalar=True)], {"upper": d.int(0, 1)}, 1


@recipe("Resize")
def resize(op, d, schema):
    n = d.int(1, 3)
    x_shape = (d.int(1, 2), d.int(1, 3), *d.shape(n))
    mode = d.pick(["nearest", "linear", "cubic"] if n == 2 else ["nearest", "linear"])
    attrs = {"mode": mode, "coordinate_transformation_mode": d.pick(
        ["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"])}
    if mode == "nearest":
        attrs["nearest_mode"] = d.pick(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
    if mode == "cubic":
        attrs["cubic_coeff_a"] = d.pick([-0.75, -0.5])
    sizes = [max(1, s * d.pick([1, 2, 3]) + d.int(-1, 1)) for s in x_shape[2:]]
    ins = [_x(d, x_shape), Input("none"), Input("none"), _const(list(x_shape[:2]) + sizes)]
    return ins, attrs, 1


# --- the cases -------------------------------------------------------------------------------------

def schema_of(op):
    """The op's schema at OPSET, or None when onnx defines no such op."""
    try:
        return defs.get_schema(op, OPSET)
    except defs.SchemaError:
        return None


def _is_unary(schema):
    """x -> y, both of one type that includes float, every attribute optional: an elementwise-like op."""
    if len(schema.inputs) != 1 or len(schema.outputs) != 1 or schema.deprecated:
        return False
    if any(a.required for a in schema.attributes.values()):
        return False
    types = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
    allowed = types.get(schema.inputs[0].type_str, [schema.inputs[0].type_str])
    return schema.inputs[0].type_str == schema.outputs[0].type_str and "tensor(float)" in allowed


def fuzzable(op):
    """Whether the generator draws cases of `op`: a recipe of its own, or a schema of a unary float op."""
    if op in RECIPES:
        return True
    schema = schema_of(op)
    return schema is not None and _is_unary(schema)


def _domain_attrs(op, d, schema, attrs):
    """Attributes the recipe left to their defaults, drawn from DOMAINS (checked against the schema)."""
    for name, values in DOMAINS.get(op, {}).items():
        if name not in schema.attributes:
            raise ValueError(f"DOMAINS[{op!r}] names {name!r}, not an attribute of its schema")
        if name not in attrs and d.flag(0.7):
            attrs[name] = d.pick(values)
    return attrs


def _class(op, inputs, attrs):
    """A case's attribute/shape class: the first input's rank and the attributes set (a value only for
    the string-valued ones: modes)."""
    rank = np.ndim(inputs[0].value) if inputs and inputs[0].value is not None else 0
    parts = [f"rank{rank}"] + [f"{k}={v}" if isinstance(v, str) else k for k, v in sorted(attrs.items())]
    return " ".join(parts)


# what a run may ask for beyond the plain cases (`irtrace fuzz --values`): NaN and infinities among the
# differentiated inputs' values, and 0-size tensors (a leading axis of 0)
EXTRAS = ("nonfinite", "empty")
# the float dtypes a run may draw beyond float32 (`irtrace fuzz --dtypes`), where the backends declare them
LOW_PRECISION = ("float16", "bfloat16")


def draw_case(seed, index, op, extras=(), dtypes=()):
    """Case `index` of `seed`, of op `op` (one of those fuzzable()), checked (its `problem` set when the
    checker or shape inference refuses it). `dtypes` (of LOW_PRECISION) may cast its float inputs to one of
    them, and `extras` (of EXTRAS) turn it into a case with non-finite values or 0-size inputs, each drawn by
    a generator of its own: the plain case is the same either way."""
    schema = schema_of(op)
    d = Draw(np.random.default_rng([seed, index]))
    fn = RECIPES.get(op)
    inputs, attrs, outputs = fn(op, d, schema) if fn is not None else _unary(op, d, schema)
    attrs = _domain_attrs(op, d, schema, attrs)
    case = Case(seed, index, op, attrs, inputs, outputs, cls=_class(op, inputs, attrs),
                styles=tuple(sorted(d.styles)))
    case.problem = check(case)
    if dtypes and case.problem is None:
        case = _typed(case, dtypes, np.random.default_rng([seed, index, 4]))
    if extras and case.problem is None:
        case = _extra(case, extras, np.random.default_rng([seed, index, 3]))
    return case


def _typed(case, dtypes, rng):
    """`case` in float32 or one of `dtypes`, each as likely: every float input (activations, statistics,
    float constants) cast to it, the values drawn as float32 rounded to the nearest; a case whose schema does
    not take that type (onnx.checker or shape inference refuse it) stays float32."""
    dtype = ("float32", *dtypes)[int(rng.integers(len(dtypes) + 1))]
    if dtype == "float32":
        return case
    to = dtype_of(dtype)  # bfloat16: ml_dtypes' numpy type, as the wire names it
    inputs = [Input(i.role, i.value.astype(to)) if i.value is not None and i.value.dtype.kind == "f" else i
              for i in case.inputs]
    typed = _variant(case, inputs, dtype)
    if check(typed) is not None:
        return case
    # rounding may tie values apart in float32, or round tiny ones to zero: kinks and ties the fuzzer must know
    # of (a max's gradient among tied values is a convention, not a bug)
    made = set()
    for p, c in zip(case.inputs, inputs):
        if p.role == "x" and p.value.size:
            wide = c.value.astype(np.float32)
            made |= {"ties"} if np.unique(wide).size < np.unique(p.value).size else set()
            made |= {"zeros"} if np.count_nonzero(wide == 0) > np.count_nonzero(p.value == 0) else set()
    typed.styles = tuple(sorted({*typed.styles, *made}))
    return typed


def _extra(case, extras, rng):
    """`case` with its leading axis 0 ("empty", a third of the time, when the checker and shape inference
    take it) or NaN, +Inf and -Inf among its differentiated inputs' values ("nonfinite", half the time)."""
    if "empty" in extras and rng.random() < 1 / 3:
        empty = _emptied(case)
        if empty is not None:
            return empty
    if "nonfinite" in extras and rng.random() < 0.5:
        inputs = []
        for inp in case.inputs:
            if inp.role == "x" and inp.value.size:
                a = inp.value.copy()
                at = rng.random(a.shape) < 0.15
                at.flat[int(rng.integers(a.size))] = True
                a[at] = rng.choice(np.array([np.nan, np.inf, -np.inf], np.float32), int(at.sum()))
                inp = Input("x", a)
            inputs.append(inp)
        return _variant(case, inputs, "nonfinite")
    return case


def _emptied(case):
    """The case with axis 0 of size 0 on every float input whose axis 0 is the first input's (a batch of
    none), or None when the op does not take it (the checker or shape inference refuses it)."""
    first = next((i.value for i in case.inputs if i.role == "x" and np.ndim(i.value)), None)
    if first is None:
        return None
    n = first.shape[0]
    inputs = [Input(i.role, np.zeros((0, *i.value.shape[1:]), i.value.dtype))
              if i.role in ("x", "stat") and np.ndim(i.value) and i.value.shape[0] == n else i
              for i in case.inputs]
    empty = _variant(case, inputs, "empty")
    return empty if check(empty) is None else None


def _variant(case, inputs, style):
    return Case(case.seed, case.index, case.op, dict(case.attrs), inputs, case.outputs, None,
                f"{case.cls} {style}", tuple(sorted({*case.styles, style})))


def pick_op(seed, index, ops):
    """The op of case `index`: drawn from `ops` by the case's own generator (resumable as the cases are)."""
    rng = np.random.default_rng([seed, index, 1])
    return ops[int(rng.integers(len(ops)))]


def untied(case):
    """A copy of `case` whose float inputs have no ties and no exact zeros: each value moved by a distinct
    offset in [0.01, 0.21) (ties on a grid of 0.5 stay ordered apart, zeros become positive). In float16 or
    bfloat16 the offsets' values can round to one again (bfloat16's step at 1 is 0.0078, the offsets' 0.2 / size):
    those are moved on to the next value of the dtype that no input holds (_apart)."""
    rng = np.random.default_rng([case.seed, case.index, 2])
    inputs, seen = [], set()
    for inp in case.inputs:
        if inp.role == "x":
            a = inp.value
            offsets = 0.01 + 0.2 * rng.permutation(a.size).reshape(a.shape) / max(a.size, 1)
            moved = np.asarray(a.astype(np.float32) + offsets, np.float32).astype(a.dtype)
            inp = Input("x", _apart(moved, seen) if a.dtype.name in LOW_PRECISION else moved)
        inputs.append(inp)
    return Case(case.seed, case.index, case.op, dict(case.attrs), inputs, case.outputs, case.problem, case.cls,
                styles=("untied",))


def _apart(a, seen):
    """`a` (float16 or bfloat16) with each value that is zero or already in `seen` (the values of the inputs moved
    before it, and its own earlier elements) moved up by its dtype's step until it is neither; `seen` grows."""
    from irtrace.compare import eps_of
    eps, flat = eps_of(a.dtype), a.astype(np.float32).reshape(-1)
    for k, v in enumerate(flat):
        while v == 0 or float(v) in seen:  # v + its step is the next value of the dtype (a power of two's multiple)
            v = np.float32(v + 2.0 ** np.floor(np.log2(max(abs(float(v)), 2.0 ** -14))) * eps)
        flat[k] = v
        seen.add(float(v))
    return flat.reshape(a.shape).astype(a.dtype)


def case_bytes(case):
    """The serialized single-node model and its feeds, for comparing cases byte for byte."""
    model, feeds, _ = model_of([case])
    return model.SerializeToString() + b"".join(
        k.encode() + np.ascontiguousarray(v).tobytes() for k, v in sorted(feeds.items()))

