from torch.nn import functional

from backends._torch_like import register_conv
from backends.torch.ops import OPS

register_conv(OPS, functional)
