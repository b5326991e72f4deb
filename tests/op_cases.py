"""One table of op cases that drives every backend and every pass (fwd, vjp, vjp2), seeded.

Each case is one ONNX node; `all_cases_model()` puts them side by side in one graph so a
single replay per backend covers the table. Inputs: ("x", shape) a float N(0, 1) input,
("pos", shape) a positive float, ("stat", shape) / ("pstat", shape) a float / positive float the
model does not differentiate (running statistics: a buffer, not an activation), ("u", shape, lo, hi)
a float uniform in [lo, hi), ("near_eye", shape) square matrices near the identity, ("fixed", values)
a float input of these values, ("int", values) / ("f", values) / ("bool", values) a constant, ("i0",
(v,)) a 0-d int64 constant, ("idx", shape, high[, dtype]) random integers in [0, high). Scalars () and
empty shapes are among the samples. The first cases draw their inputs in turn from one seeded
generator; a case in OWN_SEED draws from a generator of its own (seeded with its id), so adding one
moves no other case's inputs, nor those of the cases a backend's tests append (and it adds no float
constant: the recorder draws each input's u in value order, initializers first)."""
from dataclasses import dataclass, field

import numpy as np
from onnx import TensorProto, helper, numpy_helper


@dataclass(frozen=True)
class Case:
    id: str
    op: str
    inputs: tuple
    attrs: dict = field(default_factory=dict)
    outputs: int = 1
    domain: str = ""


def C(id, op, *inputs, outputs=1, domain="", **attrs):
    return Case(id, op, tuple(inputs), attrs, outputs, domain)


X = lambda *s: ("x", s)  # noqa: E731
POS = lambda *s: ("pos", s)  # noqa: E731
STAT = lambda *s: ("stat", s)  # noqa: E731
PSTAT = lambda *s: ("pstat", s)  # noqa: E731
INT = lambda *v: ("int", v)  # noqa: E731
F = lambda *v: ("f", v)  # noqa: E731
U = lambda lo, hi, *s: ("u", s, lo, hi)  # noqa: E731
I0 = lambda v: ("i0", (v,))  # noqa: E731

CASES = [
    # convolution: groups (incl. groups = batch-style and depthwise), stride, dilation, asymmetric pads
    C("conv_basic", "Conv", X(2, 3, 7, 7), X(4, 3, 3, 3), X(4), pads=[1, 1, 1, 1]),
    C("conv_s2_same_upper_pads", "Conv", X(1, 2, 8, 8), X(3, 2, 3, 3), strides=[2, 2], pads=[0, 0, 1, 1]),
    C("conv_begin_heavy_pads", "Conv", X(1, 2, 7, 7), X(3, 2, 3, 3), strides=[2, 2], pads=[1, 1, 0, 0]),
    C("conv_dilation2", "Conv", X(1, 2, 9, 9), X(2, 2, 3, 3), dilations=[2, 2], pads=[2, 2, 2, 2]),
    C("conv_groups2", "Conv", X(2, 4, 6, 6), X(6, 2, 3, 3), X(6), group=2, pads=[1, 1, 1, 1]),
    C("conv_depthwise", "Conv", X(1, 4, 6, 6), X(4, 1, 4, 4), group=4, pads=[1, 2, 2, 1]),
    C("conv_groups_batch", "Conv", X(1, 8, 5, 5), X(12, 2, 3, 3), group=4, pads=[1, 1, 1, 1]),
    C("conv_1x1", "Conv", X(2, 3, 4, 4), X(5, 3, 1, 1)),
    C("convtranspose_basic", "ConvTranspose", X(1, 3, 4, 4), X(3, 2, 3, 3), X(2)),
    C("convtranspose_s2_outpad", "ConvTranspose", X(1, 2, 4, 4), X(2, 3, 3, 3), strides=[2, 2], output_padding=[1, 1],
      pads=[1, 1, 1, 1]),
    C("convtranspose_groups2", "ConvTranspose", X(1, 4, 4, 4), X(4, 3, 3, 3), group=2, strides=[2, 2]),
    C("convtranspose_asym_pads", "ConvTranspose", X(1, 2, 4, 4), X(2, 2, 3, 3), strides=[2, 2], pads=[0, 0, 1, 1]),
    # padding
    C("pad_constant_asym", "Pad", X(1, 2, 4, 5), INT(0, 0, 1, 0, 0, 0, 0, 2), F(1.5), mode="constant"),
    C("pad_reflect", "Pad", X(1, 2, 4, 5), INT(0, 0, 2, 1, 0, 0, 1, 2), mode="reflect"),
    C("pad_edge", "Pad", X(1, 2, 4, 5), INT(0, 0, 1, 1, 0, 0, 2, 0), mode="edge"),
    # normalization
    C("batchnorm_eval", "BatchNormalization", X(2, 3, 4, 4), X(3), X(3), STAT(3), PSTAT(3), epsilon=1e-3),
    C("batchnorm_train", "TrainBatchNormalization", X(4, 3, 3, 3), X(3), X(3), STAT(3), PSTAT(3), outputs=3,
      domain="ai.irtrace", epsilon=1e-5, momentum=0.9, running_var_estimator="unbiased"),
    C("batchnorm_train_m07", "TrainBatchNormalization", X(4, 2, 3, 3), X(2), X(2), STAT(2), PSTAT(2), outputs=3,
      domain="ai.irtrace", epsilon=1e-5, momentum=0.7, running_var_estimator="unbiased"),
    C("instancenorm", "InstanceNormalization", X(2, 3, 4, 4), X(3), X(3)),
    C("layernorm", "LayerNormalization", X(2, 5, 8), X(8), X(8), axis=-1, epsilon=1e-5),
    # linear algebra
    C("gemm_transB", "Gemm", X(3, 4), X(5, 4), X(5), transB=1, alpha=0.5, beta=2.0),
    C("matmul_2d", "MatMul", X(3, 4), X(4, 5)),
    C("matmul_batched", "MatMul", X(2, 3, 4), X(2, 4, 5)),
    C("matmul_nd_2d", "MatMul", X(2, 2, 3, 4), X(4, 5)),
    C("matmul_2d_nd", "MatMul", X(3, 4), X(2, 4, 5)),
    # elementwise, with () and empty shapes among the samples
    C("add_broadcast", "Add", X(2, 3, 4), X(4)),
    C("add_scalar", "Add", X(), X()),
    C("add_empty", "Add", X(0, 3), X(3)),
    C("sub", "Sub", X(2, 3), X(2, 3)),
    C("mul_broadcast", "Mul", X(2, 1, 4), X(3, 1)),
    C("div", "Div", X(2, 3), POS(2, 3)),
    C("pow", "Pow", POS(2, 3), X(2, 3)),
    C("sqrt", "Sqrt", POS(2, 3)),
    C("reciprocal", "Reciprocal", POS(2, 3)),
    C("neg", "Neg", X(2, 3)),
    C("abs", "Abs", X(2, 3)),
    C("exp", "Exp", X(2, 3)),
    C("log", "Log", POS(2, 3)),
    C("erf", "Erf", X(2, 3)),
    C("sin", "Sin", X(2, 3)),
    C("cos", "Cos", X(2, 3)),
    C("tanh", "Tanh", X(2, 3)),
    C("sigmoid", "Sigmoid", X(2, 3)),
    C("relu", "Relu", X(2, 3)),
    C("relu_scalar", "Relu", X()),
    C("relu_empty", "Relu", X(0, 4)),
    C("leakyrelu", "LeakyRelu", X(2, 3, 4), alpha=0.2),
    C("prelu", "PRelu", X(2, 3, 4, 4), X(3, 1, 1)),
    C("gelu", "Gelu", X(2, 3)),
    C("gelu_tanh", "Gelu", X(2, 3), approximate="tanh"),
    C("softplus", "Softplus", X(2, 3)),
    C("hardsigmoid", "HardSigmoid", X(2, 3)),
    C("hardswish", "HardSwish", X(2, 3)),
    C("clip", "Clip", X(2, 3), F(-0.5), F(0.5)),
    C("max", "Max", X(2, 3), X(2, 3)),
    C("min", "Min", X(2, 3), X(2, 3)),
    C("reducemean", "ReduceMean", X(2, 3, 4), INT(1, 2), keepdims=1),
    C("reducesum", "ReduceSum", X(2, 3, 4), INT(0), keepdims=0),
    C("reducemax", "ReduceMax", X(2, 3, 4), INT(2), keepdims=1),
    C("reducemin", "ReduceMin", X(2, 3, 4), INT(1), keepdims=0),
    C("softmax", "Softmax", X(2, 3, 5), axis=1),
    C("logsoftmax", "LogSoftmax", X(2, 5), axis=-1),
    # pooling
    C("maxpool_k3s2p1", "MaxPool", X(1, 2, 7, 7), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    C("maxpool_asym", "MaxPool", X(1, 2, 6, 6), kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1]),
    C("avgpool_exclude_pad", "AveragePool", X(1, 2, 5, 5), kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=0),
    C("avgpool_include_pad", "AveragePool", X(1, 2, 5, 5), kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
    C("avgpool_asym_exclude", "AveragePool", X(1, 1, 6, 6), kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1],
      count_include_pad=0),
    C("globalavgpool", "GlobalAveragePool", X(2, 3, 4, 5)),
    C("resize_linear_align_corners", "Resize", X(1, 2, 3, 4), ("none",), F(1, 1, 2, 2), mode="linear",
      coordinate_transformation_mode="align_corners"),
    C("resize_linear_half_pixel", "Resize", X(1, 2, 3, 4), ("none",), F(1, 1, 2, 2), mode="linear",
      coordinate_transformation_mode="half_pixel"),
    C("resize_nearest", "Resize", X(1, 2, 3, 4), ("none",), F(1, 1, 2, 2), mode="nearest",
      coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
    # indexing and shapes
    C("topk", "TopK", X(3, 6), INT(2), outputs=2, axis=-1),
    C("cumsum", "CumSum", X(3, 4), INT(1)),
    C("gather_axis0", "Gather", X(5, 3), ("idx", (2, 2), 5), axis=0),
    C("gather_axis1", "Gather", X(3, 5), ("idx", (4,), 5), axis=1),
    C("where", "Where", ("bool", (1, 0, 1)), X(2, 3), X(3)),
    C("equal", "Equal", ("idx", (2, 3), 3), ("idx", (2, 3), 3)),
    C("less", "Less", X(2, 3), X(2, 3)),
    C("greater", "Greater", X(2, 3), X(2, 3)),
    C("concat", "Concat", X(2, 3), X(2, 2), axis=1),
    C("split", "Split", X(2, 6), INT(2, 4), outputs=2, axis=1),
    C("slice", "Slice", X(4, 6), INT(1, 0), INT(3, 6), INT(0, 1), INT(1, 2)),
    C("slice_negative_step", "Slice", X(4, 4), INT(-1), INT(-9223372036854775808), INT(1), INT(-1)),
    C("reshape", "Reshape", X(2, 3, 4), INT(0, -1)),
    C("transpose", "Transpose", X(2, 3, 4), perm=[2, 0, 1]),
    C("expand", "Expand", X(3, 1), INT(2, 3, 4)),
    C("squeeze", "Squeeze", X(2, 1, 3), INT(1)),
    C("unsqueeze", "Unsqueeze", X(2, 3), INT(0, 3)),
    C("tile", "Tile", X(2, 3), INT(2, 1)),
    C("shape", "Shape", X(2, 3, 4)),
    C("cast_int", "Cast", X(2, 3), to=TensorProto.INT32),
    C("castlike", "CastLike", X(2, 3), X(4)),
    C("identity", "Identity", X(2, 3)),
    C("dropout_recorded", "RecordedDropout", X(3, 4), ("bool", (1, 0, 1, 1)), domain="ai.irtrace", ratio=0.25),
    C("range", "Range", ("int", (0,)), ("int", (7,)), ("int", (2,))),
    C("depthtospace_dcr", "DepthToSpace", X(1, 8, 2, 3), blocksize=2, mode="DCR"),
    C("depthtospace_crd", "DepthToSpace", X(1, 8, 2, 3), blocksize=2, mode="CRD"),
    C("einsum", "Einsum", X(2, 3), X(3, 4), equation="ij,jk->ik"),
    # where onnx.reference 1.23 raised or was wrong on valid nodes (the oracle's own implementations,
    # backends/oracle/reference_fixes.py): indices smaller than the data (DeBERTa-v2's relative
    # attention), more positions than np.choose takes, negative pads, negative axes, cubic sampling
    C("gatherelements_smaller_indices", "GatherElements", X(2, 3, 5), ("idx", (2, 2, 3), 5), axis=-1),
    C("gatherelements_long_axis", "GatherElements", X(2, 70), ("idx", (2, 9), 70), axis=1),
    # advanced indexing and index assignment as torch.onnx emits them (attention-bias tables, Swin's relative
    # position index and shifted-window mask): ONNX GatherND / ScatterND, negative indices among them
    C("gathernd_pairs", "GatherND", X(3, 4, 5), ("idx", (2, 3, 2), 3)),
    C("gathernd_rows", "GatherND", X(6, 4), ("idx", (3, 1), 6)),
    C("gathernd_batch1", "GatherND", X(2, 3, 4), ("idx", (2, 5, 1), 3), batch_dims=1),
    C("gathernd_negative", "GatherND", X(4, 3), INT((-1,), (0,), (-3,))),
    C("scatternd", "ScatterND", X(5, 3), INT((0,), (3,), (-1,)), X(3, 3)),
    C("scatternd_pairs", "ScatterND", X(3, 4, 2), INT((0, 1), (2, 3)), X(2, 2)),
    C("scatternd_add", "ScatterND", X(4, 3), INT((1,), (1,), (2,)), X(3, 3), reduction="add"),
    # torch.scatter / scatter_add (one-hot targets, a mixture of experts' routing): ONNX ScatterElements
    C("scatterelements", "ScatterElements", X(3, 4), INT((0, 2), (3, 1), (1, 0)), X(3, 2), axis=1),
    C("scatterelements_negative", "ScatterElements", X(3, 4), INT((-1,), (0,), (-4,)), X(3, 1), axis=-1),
    C("scatterelements_add", "ScatterElements", X(4, 3), INT((1, 0, 2), (1, 3, 2)), X(2, 3), axis=0,
      reduction="add"),
    C("pad_negative_crop", "Pad", X(2, 5, 4), INT(0, -1, 1, 0, 2, -2), ("fixed", (0.5,)), mode="constant"),
    C("cumsum_exclusive_reverse", "CumSum", X(3, 4), INT(-1), exclusive=1, reverse=1),
    C("resize_negative_axes", "Resize", X(1, 2, 3, 4), ("none",), ("none",), INT(5, 7), mode="linear",
      coordinate_transformation_mode="pytorch_half_pixel", axes=[-2, -1]),
    C("gridsample_linear", "GridSample", X(1, 2, 4, 5), U(-1.2, 1.2, 1, 3, 3, 2), mode="linear",
      padding_mode="zeros", align_corners=0),
    C("gridsample_cubic_border", "GridSample", X(1, 2, 4, 5), U(-1.2, 1.2, 1, 3, 3, 2), mode="cubic",
      padding_mode="border", align_corners=0),
    # ops torch.onnx emits (opset 20) for aten ops real models use that the torch table lacked
    C("atan", "Atan", X(2, 3)),
    C("asin", "Asin", U(-0.9, 0.9, 2, 3)),
    C("acos", "Acos", U(-0.9, 0.9, 2, 3)),
    C("sinh", "Sinh", X(2, 3)),
    C("cosh", "Cosh", X(2, 3)),
    C("asinh", "Asinh", X(2, 3)),
    C("acosh", "Acosh", U(1.2, 3.0, 2, 3)),
    C("atanh", "Atanh", U(-0.9, 0.9, 2, 3)),
    C("mish", "Mish", X(2, 3)),
    C("celu", "Celu", X(2, 3), alpha=0.7),
    C("bitwise_and", "BitwiseAnd", ("idx", (2, 3), 16), ("idx", (2, 3), 16)),
    C("bitwise_or", "BitwiseOr", ("idx", (2, 3), 16), ("idx", (2, 3), 16)),
    C("bitwise_xor", "BitwiseXor", ("idx", (2, 3), 16), ("idx", (2, 3), 16)),
    C("bitwise_not", "BitwiseNot", ("idx", (2, 3), 16)),
    C("bitshift_left", "BitShift", ("idx", (2, 3), 16, "uint8"), ("idx", (2, 3), 4, "uint8"), direction="LEFT"),
    # well-conditioned: the float32 error of det's double backward grows with the condition number,
    # which the Monte Carlo rounding estimate (one perturbation per LU solve) does not follow
    C("det", "Det", ("near_eye", (2, 3, 3))),
    C("eyelike", "EyeLike", X(3, 5), k=1),
    C("nonzero", "NonZero", ("fixed", (0.0, 1.5, 0.0, -2.0, 3.0))),
    C("unique", "Unique", ("fixed", (2.0, 1.0, 1.0, 3.0, 4.0, 3.0)), outputs=4, sorted=1),
    C("nll_loss", "NegativeLogLikelihoodLoss", X(3, 4), ("idx", (3,), 4), reduction="mean"),
    C("softmax_cross_entropy", "SoftmaxCrossEntropyLoss", X(3, 4), ("idx", (3,), 4), outputs=2, reduction="mean"),
    # F.cross_entropy(weight=, ignore_index=) over a spatial axis (segmentation), and F.nll_loss(weight=,
    # reduction="none"): the weighted mean divides by the weights of the classes not ignored
    C("softmax_cross_entropy_weighted", "SoftmaxCrossEntropyLoss", X(2, 4, 3), ("idx", (2, 3), 4), PSTAT(4), outputs=2,
      reduction="mean", ignore_index=1),
    C("nll_loss_weighted_none", "NegativeLogLikelihoodLoss", X(2, 5, 2), ("idx", (2, 2), 5), PSTAT(5),
      reduction="none"),
    C("col2im", "Col2Im", X(1, 4, 12), INT(3, 4), INT(2, 2), pads=[1, 0, 0, 1]),
    C("dft", "DFT", X(2, 8, 1)),
    C("stft", "STFT", X(1, 16, 1), I0(4), X(8), I0(8), onesided=1),
    C("hannwindow", "HannWindow", I0(8)),
    C("lstm", "LSTM", X(5, 2, 4), X(1, 12, 4), X(1, 12, 3), X(1, 24), ("none",), X(1, 2, 3), X(1, 2, 3), outputs=3,
      hidden_size=3),
    C("gru", "GRU", X(5, 2, 4), X(2, 9, 4), X(2, 9, 3), X(2, 18), outputs=2, hidden_size=3,
      direction="bidirectional", linear_before_reset=1),
    C("rnn", "RNN", X(4, 2, 3), X(2, 5, 3), X(2, 5, 5), X(2, 10), ("none",), X(2, 2, 5), outputs=2, hidden_size=5,
      direction="bidirectional", activations=["Tanh", "Relu"]),
    # as torch.onnx emits nn.RNN(nonlinearity="relu") and nn.LSTM(batch_first=True): a framework's fused layer has
    # one activation for both directions
    C("rnn_relu", "RNN", X(4, 2, 3), X(1, 5, 3), X(1, 5, 5), X(1, 10), ("none",), X(1, 2, 5), outputs=2, hidden_size=5,
      activations=["Relu"]),
    C("lstm_batch_first", "LSTM", X(2, 5, 4), X(2, 12, 4), X(2, 12, 3), X(2, 24), outputs=3, hidden_size=3,
      direction="bidirectional", layout=1),
    # tf2onnx's Keras GRU(reset_after=False, go_backwards=True): the reset gate before the recurrent matmul, reverse
    C("gru_reverse_reset_before", "GRU", X(4, 2, 3), X(1, 9, 3), X(1, 9, 3), X(1, 18), ("none",), X(1, 2, 3),
      outputs=2, hidden_size=3, direction="reverse", linear_before_reset=0),
    # ONNX TopK: of equal values the lower index first (torch.sort(stable=True) exports as it)
    C("topk_ties", "TopK", ("fixed", (1.0, 2.0, 1.0, 3.0, 2.0, 1.0)), INT(4), outputs=2, axis=-1),
    # statistics computed in the graph (weight standardisation): differentiated like the other inputs
    C("batchnorm_eval_stats", "BatchNormalization", X(2, 3, 4, 4), X(3), X(3), X(3), POS(3), epsilon=1e-3),
    # 1-D convolutions (audio: wav2vec2's grouped positional conv, an even kernel): grouped, and strided, dilated with
    # uneven pads
    C("conv1d_groups", "Conv", X(2, 8, 12), X(8, 2, 4), X(8), group=4, pads=[2, 2]),
    C("conv1d_strided_uneven", "Conv", X(2, 3, 11), X(4, 3, 3), strides=[2], dilations=[2], pads=[1, 0]),
    # HardSwish beyond its bends at -3 and 3, where its second derivative is 0 (MobileNetV3's activations reach it;
    # N(0, 1) inputs seldom do)
    C("hardswish_wide", "HardSwish", U(-6, 6, 3, 8)),
    # video and volume models (torchvision's r3d_18): a strided 3-D conv with uneven pads, a train-mode 3-D BatchNorm
    C("conv3d_strided", "Conv", X(1, 2, 4, 5, 5), X(3, 2, 2, 3, 3), strides=[1, 2, 2], pads=[0, 1, 1, 1, 1, 1]),
    C("batchnorm_train_3d", "TrainBatchNormalization", X(2, 3, 2, 3, 3), X(3), X(3), STAT(3), PSTAT(3), outputs=3,
      domain="ai.irtrace", epsilon=1e-5, momentum=0.9, running_var_estimator="unbiased"),
    # a depthwise conv with two outputs per channel, dilated and strided: TensorFlow's tf.nn.depthwise_conv2d
    # (its filter's channel-by-multiplier order, and a stride taken after the dilated conv)
    C("conv_depthwise_m2_dilated", "Conv", X(1, 2, 9, 9), X(4, 1, 3, 3), X(4), group=2, dilations=[2, 2],
      strides=[2, 2], pads=[2, 2, 2, 2]),
]


def _constant(kind, spec, rng):
    if kind == "int":
        return np.array(spec, np.int64)
    if kind == "f":
        return np.array(spec, np.float32).reshape(() if len(spec) == 1 else (len(spec),))
    if kind == "bool":
        return np.array(spec, bool)
    if kind == "i0":
        return np.array(spec[0], np.int64)
    raise ValueError(kind)


def all_cases_model(cases=CASES, seed=0):
    """(model, feeds, case of node name): every case a node of one graph."""
    import zlib
    shared = np.random.default_rng(seed)
    nodes, g_inputs, inits, outs, feeds, by_node = [], [], [], [], {}, {}
    for c in cases:
        rng = np.random.default_rng([seed, zlib.crc32(c.id.encode())]) if c.id in OWN_SEED else shared
        names = []
        for k, inp in enumerate(c.inputs):
            kind = inp[0]
            name = f"{c.id}.in{k}"
            if kind == "none":
                names.append("")
                continue
            names.append(name)
            if kind in ("x", "pos", "stat", "pstat"):
                if kind in ("stat", "pstat"):
                    name = f"{c.id}.stat{k}"  # activations() leaves it out: not differentiated
                    names[-1] = name
                a = rng.standard_normal(inp[1]).astype(np.float32)
                if kind in ("pos", "pstat"):
                    a = np.abs(a) + 0.5
                feeds[name] = a
                g_inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(a.shape)))
            elif kind == "fixed":  # given float values, as an input (a float initializer would move every
                a = _constant("f", inp[1], rng)  # input's recorded u: the recorder draws them in value order)
                feeds[name] = a
                g_inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(a.shape)))
            elif kind == "near_eye":  # identity + 0.3 N(0, 1): a well-conditioned batch of square matrices
                a = (np.eye(inp[1][-1]) + 0.3 * rng.standard_normal(inp[1])).astype(np.float32)
                feeds[name] = a
                g_inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(a.shape)))
            elif kind == "u":
                a = rng.uniform(inp[2], inp[3], inp[1]).astype(np.float32)
                feeds[name] = a
                g_inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(a.shape)))
            elif kind == "idx":
                a = rng.integers(0, inp[2], inp[1]).astype(inp[3] if len(inp) > 3 else np.int64)
                feeds[name] = a
                g_inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype),
                                                              list(a.shape)))
            else:
                a = _constant(kind, inp[1], rng)
                if c.op in ("Range", "CumSum") and kind == "int":
                    a = a.reshape(())  # these take scalars
                inits.append(numpy_helper.from_array(a, name))
        out_names = [f"{c.id}.out{j}" for j in range(c.outputs)]
        nodes.append(helper.make_node(c.op, names, out_names, name=c.id, domain=c.domain, **c.attrs))
        outs += [helper.make_empty_tensor_value_info(o) for o in out_names]
        by_node[c.id] = c
    opsets = [helper.make_opsetid("", 20), helper.make_opsetid("ai.irtrace", 1)]
    model = helper.make_model(helper.make_graph(nodes, "op_cases", g_inputs, outs, inits), opset_imports=opsets)
    return model, feeds, by_node


def activations(model, feeds):
    """bundle_from_onnx's `trained` for a graph of op cases: its inputs stand for activations, so a
    training step differentiates them (and its float initializers), not only the weights; the
    ("stat", ...) inputs stand for buffers."""
    return [n for n, a in feeds.items() if np.asarray(a).dtype.kind == "f" and ".stat" not in n] + \
        [t.name for t in model.graph.initializer if t.data_type in (1, 10, 11, 16)]


# Cases added after the table's first version (issue 26): each draws its inputs from its own generator
OWN_SEED = {"gatherelements_smaller_indices", "gatherelements_long_axis", "pad_negative_crop",
            "cumsum_exclusive_reverse", "resize_negative_axes", "topk_ties", "batchnorm_eval_stats", "conv1d_groups",
            "conv1d_strided_uneven", "hardswish_wide", "conv3d_strided", "batchnorm_train_3d",
            "conv_depthwise_m2_dilated"}


# The cases of ops the torch table gained for issue 26 (what torch.onnx emits for atan2, LSTM,
# grid_sample, cross_entropy, fft...): a backend whose table lacks the op is not asked; one that has it
# is checked like every other case. Every other case is every backend's (UNSUPPORTED must be known).
OPTIONAL = {"gridsample_linear", "gridsample_cubic_border", "atan", "asin", "acos", "sinh", "cosh", "asinh",
            "acosh", "atanh", "mish", "celu", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
            "bitshift_left", "det", "eyelike", "nonzero", "unique", "nll_loss", "softmax_cross_entropy",
            "softmax_cross_entropy_weighted", "nll_loss_weighted_none", "col2im",
            "dft", "stft", "hannwindow", "lstm", "gru", "rnn", "rnn_relu", "lstm_batch_first",
            "gru_reverse_reset_before", "gathernd_pairs",
            "gathernd_rows",
            "gathernd_batch1", "gathernd_negative", "scatternd", "scatternd_pairs", "scatternd_add", "scatterelements",
            "scatterelements_negative", "scatterelements_add"}


def claimed(backend):
    """The (domain, op type) pairs `backend`'s op table has, asked of its own worker."""
    from irtrace.replay import backends
    from irtrace.replay.worker import WorkerProxy
    w = WorkerProxy(backends.get(backend))
    try:
        return {(d, o) for d, o, _ in w.start()["ops"]}
    finally:
        w.close()


OWN_SEED |= OPTIONAL


def cases_of(backend, cases=CASES):
    """The ids of the cases `backend` answers: all but the OPTIONAL ones whose op its table lacks."""
    ops = claimed(backend)
    return {c.id for c in cases if c.id not in OPTIONAL or (c.domain, c.op) in ops}
