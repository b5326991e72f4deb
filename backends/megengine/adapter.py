"""MegEngine adapter: the op table and backends/megengine/autodiff.py (GradManager)."""
import re

import megengine as mge
from megengine.core._imperative_rt.common import CompNode
import numpy as np

from backends._runtime.adapter import AutodiffAdapter
from backends.megengine import autodiff, repro
from backends.megengine.ops import OPS
from backends.megengine.workarounds import WORKAROUNDS

mge.config.async_level = 0  # MegEngine reports errors asynchronously otherwise
# Kernels run in the calling thread ("cpu:default", MegEngine's in-place CPU comp node), not queued to the
# "cpu0" comp node's worker thread and synchronised back: the same kernels, and a node's replay takes about
# half the CPU (benchmarks/four_backends.py). set_default_device's name check admits only cpuN/cpux/gpuN
# names, so the comp node's own setter it calls is called directly.
CompNode._set_default_device("cpu:default")


class MegEngineAdapter(AutodiffAdapter):
    name = framework = "megengine"
    recipe = repro.RECIPE
    workarounds = WORKAROUNDS  # alternative formulations a porter would write (backends/megengine/workarounds.py)
    port = "backends.megengine.port"  # runs a user's MegEngine port (irtrace port)
    table = OPS
    autodiff = autodiff
    # "matmul not support data type of BFloat16 * BFloat16 -> BFloat16" (raised from its AsyncError)
    missing_kernel = re.compile(r"not support data type of (\w+ \* )?(Float16|BFloat16)\b")

    def versions(self):
        return {"megengine": mge.__version__, "numpy": np.__version__}
