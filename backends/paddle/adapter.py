"""Paddle adapter: the op table and backends/paddle/autodiff.py (paddle.grad, dynamic graph)."""
import re

import numpy as np
import paddle

from backends._runtime.adapter import AutodiffAdapter
from backends.paddle import autodiff, repro
from backends.paddle.ops import OPS

paddle.set_device("cpu")


class PaddleAdapter(AutodiffAdapter):
    name = framework = "paddle"
    recipe = repro.RECIPE
    port = "backends.paddle.port"  # runs a user's Paddle port (irtrace port)
    table = OPS
    autodiff = autodiff
    # "(NotFound) The kernel with key (CPU, Undefined(AnyLayout), float16) of kernel `add` is not registered"
    missing_kernel = re.compile(r"kernel with key \(.*?\b(float16|bfloat16)\) of kernel `\w+` is not registered")

    def versions(self):
        return {"paddle": paddle.__version__, "numpy": np.__version__}
