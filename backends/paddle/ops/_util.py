import numpy as np
import paddle

# ONNX TensorProto data type -> Paddle dtype name
ONNX_TO_PADDLE = {1: "float32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64", 9: "bool", 10: "float16",
                  11: "float64", 16: "bfloat16"}


def ints(t):
    """A shape-like input (tensor, array or list) as python ints."""
    if t is None:
        return None
    a = t.numpy() if isinstance(t, paddle.Tensor) else np.asarray(t)
    return [int(v) for v in np.asarray(a).reshape(-1)]


def axis(a, rank):
    return a + rank if a < 0 else a


def paired(pads):
    """ONNX [b1..bn, e1..en] -> Paddle's per-dimension [b1, e1, b2, e2, ...] (conv/pool padding lists)."""
    r = len(pads) // 2
    return [p for i in range(r) for p in (pads[i], pads[i + r])]
