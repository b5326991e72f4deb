"""OneFlow adapter: the op table and backends/oneflow/autodiff.py (oneflow.autograd.grad, eager)."""
import re

import numpy as np
import oneflow

from backends._runtime.adapter import AutodiffAdapter
from backends.oneflow import autodiff, repro
from backends.oneflow.ops import OPS


class OneFlowAdapter(AutodiffAdapter):
    name = framework = "oneflow"
    recipe = repro.RECIPE
    port = "backends.oneflow.port"  # runs a user's OneFlow port (irtrace port)
    table = OPS
    autodiff = autodiff
    # "Cannot find the kernel matching Current OperatorConf ... DataType_Name of x_0: kFloat16"
    missing_kernel = re.compile(r"Cannot find the kernel matching(?s:.*?)DataType_Name of \w+: k(Float16|BFloat16)\b")

    def versions(self):
        return {"oneflow": oneflow.__version__, "numpy": np.__version__}
