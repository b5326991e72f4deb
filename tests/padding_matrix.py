"""The padding test matrix, one table for every backend: Conv, ConvTranspose, MaxPool,
AveragePool (count_include_pad 0/1) and Pad (constant/reflect/edge) x pads symmetric /
begin-heavy / end-heavy x input sizes odd and even x stride 1, 2, 3 x dilation 1, 2 x
ceil_mode 0/1 (pools). Expected values come from the float64 oracle."""
import itertools

from op_cases import POS, C, X  # noqa: F401

PADS = {"sym": [1, 1, 1, 1], "begin": [1, 1, 0, 0], "end": [0, 0, 1, 1]}
SIZES = (7, 8)
STRIDES = (1, 2, 3)


def cases():
    out = []
    for (pk, pads), n, s, d in itertools.product(PADS.items(), SIZES, STRIDES, (1, 2)):
        out.append(C(f"conv_{pk}_n{n}_s{s}_d{d}", "Conv", X(1, 2, n, n), X(2, 2, 3, 3), pads=pads, strides=[s, s],
                     dilations=[d, d]))
        out.append(C(f"convt_{pk}_n{n}_s{s}_d{d}", "ConvTranspose", X(1, 2, n, n), X(2, 2, 3, 3), pads=pads,
                     strides=[s, s], dilations=[d, d]))
        for ceil in (0, 1):
            out.append(C(f"maxpool_{pk}_n{n}_s{s}_d{d}_c{ceil}", "MaxPool", X(1, 2, n, n), kernel_shape=[3, 3],
                         pads=pads, strides=[s, s], dilations=[d, d], ceil_mode=ceil))
    for (pk, pads), n, s, cip, ceil in itertools.product(PADS.items(), SIZES, STRIDES, (0, 1), (0, 1)):
        out.append(C(f"avgpool_{pk}_n{n}_s{s}_cip{cip}_c{ceil}", "AveragePool", X(1, 2, n, n), kernel_shape=[3, 3],
                     pads=pads, strides=[s, s], count_include_pad=cip, ceil_mode=ceil))
    for (pk, pads), n, mode in itertools.product(PADS.items(), SIZES, ("constant", "reflect", "edge")):
        full = [0, 0, pads[0], pads[1], 0, 0, pads[2], pads[3]]
        out.append(C(f"pad_{mode}_{pk}_n{n}", "Pad", X(1, 2, n, n), ("int", tuple(full)), mode=mode))
    return out


def auto_pad_cases():
    """auto_pad before canonicalization: the canonical pads must equal onnxruntime's own reading."""
    out = []
    for mode, n, s in itertools.product(("SAME_UPPER", "SAME_LOWER", "VALID"), SIZES, STRIDES):
        tag = f"{mode.lower()}_n{n}_s{s}"
        out.append(C(f"auto_conv_{tag}", "Conv", X(1, 2, n, n), X(2, 2, 3, 3), strides=[s, s], auto_pad=mode))
        out.append(C(f"auto_maxpool_{tag}", "MaxPool", X(1, 2, n, n), kernel_shape=[3, 3], strides=[s, s],
                     auto_pad=mode))
        out.append(C(f"auto_avgpool_{tag}", "AveragePool", X(1, 2, n, n), kernel_shape=[3, 3], strides=[s, s],
                     auto_pad=mode))
    return out
