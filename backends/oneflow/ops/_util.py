import numpy as np
import oneflow

# ONNX TensorProto data type -> OneFlow dtype
ONNX_TO_FLOW = {1: oneflow.float32, 2: oneflow.uint8, 3: oneflow.int8, 6: oneflow.int32, 7: oneflow.int64,
                9: oneflow.bool, 10: oneflow.float16, 11: oneflow.float64, 16: oneflow.bfloat16}


def ints(t):
    """A shape-like input (tensor, array or list) as a list of python ints."""
    if t is None:
        return None
    a = t.numpy() if isinstance(t, oneflow.Tensor) else np.asarray(t)
    return [int(v) for v in np.asarray(a).reshape(-1)]


def axis(a, rank):
    return a + rank if a < 0 else a


def flow_pad_list(pads):
    """ONNX [b1..bn, e1..en] -> functional.pad's (last dim first) [b_n, e_n, ..., b_1, e_1]."""
    r = len(pads) // 2
    out = []
    for i in reversed(range(r)):
        out += [pads[i], pads[i + r]]
    return out
