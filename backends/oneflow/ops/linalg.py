import oneflow

from backends._torch_like import register_linalg
from backends.oneflow.ops import OPS


register_linalg(OPS, oneflow)
