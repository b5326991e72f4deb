import numpy as np
import torch

# ONNX TensorProto data type -> torch dtype
ONNX_TO_TORCH = {1: torch.float32, 2: torch.uint8, 3: torch.int8, 5: torch.int16, 6: torch.int32, 7: torch.int64,
                 9: torch.bool, 10: torch.float16, 11: torch.float64, 12: torch.uint32, 13: torch.uint64,
                 16: torch.bfloat16}


def ints(t):
    """A shape-like input (tensor or list) as a list of python ints."""
    if t is None:
        return None
    if isinstance(t, torch.Tensor):
        return [int(v) for v in t.reshape(-1).tolist()]
    return [int(v) for v in np.asarray(t).reshape(-1)]
