"""Op facts the replay needs, as tables (the replay loop never branches on an op name)."""
import functools

import numpy as np

# Where an op is not differentiable (KINKS), frameworks pick different subgradients. A gradient
# divergence at such a point is a convention, not necessarily a bug: tag it (the table is the workers' too:
# the oracle's finite-difference check moves no input on such a point).
from backends._runtime.kinks import KINKS, kinked
from backends._runtime.wire import is_float


# Ops whose outputs are sums of many terms: their float32 result depends on the summation order,
# so two correct frameworks legitimately differ by up to the rounding-error model of compare.py,
# computed from the op on absolute values (the oracle's "magnitude").
ACCUMULATING = frozenset({
    "Conv", "ConvTranspose", "MatMul", "Gemm", "Einsum", "ReduceSum", "ReduceMean", "ReduceSumSquare", "ReduceL1",
    "ReduceL2", "ReduceLogSumExp", "ReduceProd", "GlobalAveragePool", "AveragePool", "LpPool", "GlobalLpPool",
    "BatchNormalization", "TrainBatchNormalization", "InstanceNormalization", "LayerNormalization",
    "GroupNormalization", "MeanVarianceNormalization", "LpNormalization", "Softmax", "LogSoftmax", "CumSum",
    "Resize", "Sum", "Mean", "Attention"})
# Ops whose inputs broadcast: their gradients sum over the broadcast dimensions (a bias, a scale).
BROADCASTING = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Where", "Max", "Min", "PRelu", "Expand", "Tile",
                          "Mod", "BitShift"})


def accumulates(op_type, mode, input_sizes, output_sizes):
    """Whether this op in this mode sums many terms into one result element (see ACCUMULATING):
    always for the ops listed, and for the gradients of broadcasting ops when an input is smaller
    than an output."""
    if op_type in ACCUMULATING:
        return True
    return mode != "fwd" and op_type in BROADCASTING and bool(output_sizes) and \
        any(n < max(output_sizes) for n in input_sizes)


def kink_tag(op_type, inputs):
    """A short description of the non-differentiable points in `inputs` (backends/_runtime/kinks.kinked), or None."""
    x = None if not inputs or inputs[0] is None else np.asarray(inputs[0])
    if x is None or not is_float(x.dtype):
        return None
    masks = kinked(op_type, inputs)
    if masks is None or masks[0] is None or not masks[0].any():
        return None
    n, kind = int(np.sum(masks[0])), KINKS[op_type]
    if kind == "zero":
        return f"non-differentiable point: {n} exact zeros in input 0"
    if kind == "bounds":
        return f"non-differentiable point: {n} elements exactly at a clip bound"
    if op_type in ("Max", "Min"):
        return f"non-differentiable point: {n} elements of input 0 tie another input"
    return f"non-differentiable point: {n - np.unique(x[masks[0]]).size} repeated values in input 0 (possible ties)"


@functools.lru_cache(maxsize=None)  # asked once per node, mode and backend: the schema lookup is cached
def nondifferentiable_inputs(op_type, domain, opset, n_inputs):
    """Input positions the ONNX schema marks NonDifferentiable (shapes, indices, clip bounds, pad
    values...): their gradients are not compared, whatever a framework returns for them."""
    import onnx
    try:
        schema = onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return frozenset()
    formal = list(schema.inputs)
    if not formal:
        return frozenset()
    nd = onnx.defs.OpSchema.DifferentiationCategory.NonDifferentiable
    out = set()
    for i in range(n_inputs):
        p = formal[min(i, len(formal) - 1)]  # variadic: the last formal parameter repeats
        if p.differentiation_category == nd:
            out.add(i)
    return frozenset(out)


_ROLE_WORDS = {"x": "input", "input": "input", "data": "input", "w": "weight", "weight": "weight", "b": "bias",
               "bias": "bias", "scale": "scale", "a": "first operand", "slope": "slope", "mean": "mean",
               "var": "variance", "input_mean": "running mean", "input_var": "running variance"}
_FILTERS = {"Conv", "ConvTranspose", "ConvInteger", "DeformConv"}


@functools.lru_cache(maxsize=None)
def input_role(op_type, domain, opset, index):
    """What input `index` is to the op, in words a maintainer uses: "filter" for a Conv's W, "bias"
    for its B, "second operand" for MatMul's B; the schema's own name when there is no usual word."""
    import onnx
    try:
        formal = list(onnx.defs.get_schema(op_type, opset, domain).inputs)
    except onnx.defs.SchemaError:
        return "input" if index == 0 else f"input {index}"
    if not formal:
        return f"input {index}"
    name = formal[min(index, len(formal) - 1)].name
    if op_type in _FILTERS and name == "W":
        return "filter"
    if name == "B" and formal[0].name == "A":  # MatMul, Gemm, Add, Mul, ...: operands, not a bias
        return "second operand"
    return _ROLE_WORDS.get(name.lower(), name)
