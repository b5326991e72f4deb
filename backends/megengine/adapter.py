"""MegEngine adapter: the op table and backends/megengine/autodiff.py (GradManager)."""
import megengine as mge
import numpy as np

from backends._runtime.adapter import AutodiffAdapter
from backends.megengine import autodiff, repro
from backends.megengine.ops import OPS
from backends.megengine.workarounds import WORKAROUNDS

mge.config.async_level = 0  # MegEngine reports errors asynchronously otherwise


class MegEngineAdapter(AutodiffAdapter):
    name = framework = "megengine"
    recipe = repro.RECIPE
    workarounds = WORKAROUNDS  # alternative formulations a porter would write (backends/megengine/workarounds.py)
    port = "backends.megengine.port"  # runs a user's MegEngine port (irtrace port)
    table = OPS
    autodiff = autodiff

    def versions(self):
        return {"megengine": mge.__version__, "numpy": np.__version__}
