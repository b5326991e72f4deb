"""TensorFlow adapter: the op table and backends/tensorflow/autodiff.py (GradientTape), eager,
with TensorFlow's deterministic op mode on; versions() records the numerics settings in force."""
import os
import re

import numpy as np
import tensorflow as tf

from backends._runtime.adapter import AutodiffAdapter
from backends.tensorflow import autodiff, repro  # enables op determinism on import
from backends.tensorflow.ops import OPS


def readable(message):
    """TensorFlow's error text without the eager wrapper's function name and the NodeDef dump, with
    the op it names kept: `... not supported on CPU. [Op:Conv2DBackpropInput]`."""
    text = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", message.strip())
    first = text.splitlines()[0].strip() if text else ""
    first = re.sub(r"\s*name:\s*$", "", first)
    node = re.search(r"\{\{node (\w+)\}\}", text)
    return first + (f" [node {node.group(1)}]" if node and node.group(1) not in first else "")


class TensorFlowAdapter(AutodiffAdapter):
    name = framework = "tensorflow"
    recipe = repro.RECIPE
    table = OPS
    autodiff = autodiff
    port = "backends.tensorflow.port"  # runs a user's TensorFlow port (irtrace port)
    # "Could not find device for node: {{node MaxPool3D}} = MaxPool3D[T=DT_HALF, ...", or no OpKernel registered
    missing_kernel = re.compile(r"(Could not find device for node|No OpKernel was registered to support Op)"
                                r"(?s:.*?)\bT=DT_(HALF|BFLOAT16)\b")

    def _run(self, fn, *args, **kw):
        try:
            return super()._run(fn, *args, **kw)
        except tf.errors.OpError as e:  # the same error class, TensorFlow's own words, one line
            raise type(e)(e.node_def, e.op, readable(e.message)).with_traceback(e.__traceback__) from e

    def versions(self):
        """The framework and the settings that shape its numerics, as the report states them."""
        from tensorflow.python.framework import config  # the only reader of the determinism switch
        from tensorflow.python.util import _pywrap_util_port as port  # whether oneDNN kernels are in use
        onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS")
        return {"tensorflow": tf.__version__, "numpy": np.__version__, "eager": str(tf.executing_eagerly()),
                "op_determinism": str(config.is_op_determinism_enabled()),
                # TF turns oneDNN on by default only on CPUs it favours; TF_ENABLE_ONEDNN_OPTS=0/1 decides
                "onednn": f"{'on' if port.IsMklEnabled() else 'off'} (TF_ENABLE_ONEDNN_OPTS="
                          f"{onednn if onednn is not None else 'unset: TF decides by CPU'})",
                "threads": f"intra {tf.config.threading.get_intra_op_parallelism_threads() or 'default'}, "
                           f"inter {tf.config.threading.get_inter_op_parallelism_threads() or 'default'}"}
