from oneflow.nn import functional

from backends._torch_like import register_conv
from backends.oneflow.ops import OPS

register_conv(OPS, functional)
