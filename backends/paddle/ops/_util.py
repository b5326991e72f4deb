# ONNX TensorProto data type -> Paddle dtype name
ONNX_TO_PADDLE = {1: "float32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64", 9: "bool", 10: "float16",
                  11: "float64", 16: "bfloat16"}


def paired(pads):
    """ONNX [b1..bn, e1..en] -> Paddle's per-dimension [b1, e1, b2, e2, ...] (conv/pool padding lists)."""
    r = len(pads) // 2
    return [p for i in range(r) for p in (pads[i], pads[i + r])]
