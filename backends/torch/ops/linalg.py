import torch

from backends._torch_like import register_linalg
from backends.torch.ops import OPS


@OPS.register("Det", since=11)
def det(x):
    return torch.linalg.det(x)


register_linalg(OPS, torch)
