from backends._table import Unsupported

# ONNX TensorProto data type -> MegEngine dtype name (MegEngine has no 64-bit types)
ONNX_TO_MGE = {1: "float32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 9: "bool", 10: "float16"}


def pad_width(pads):
    """ONNX [b1..bn, e1..en] -> MegEngine F.pad's ((b1, e1), ...)."""
    r = len(pads) // 2
    return tuple((pads[i], pads[i + r]) for i in range(r))


def spatial_only(pads, r):
    """(b, e) pairs for an NC... tensor whose spatial pads are `pads`."""
    return ((0, 0), (0, 0)) + pad_width(pads)


def need_2d(op, kernel_shape):
    if len(kernel_shape) != 2:
        raise Unsupported(f"MegEngine's {op} is 2-D only (kernel_shape {list(kernel_shape)})")
