"""TensorFlow adapter: the op table and backends/tensorflow/autodiff.py (GradientTape), eager,
with TensorFlow's deterministic op mode on; versions() records the numerics settings in force."""
import os

import numpy as np
import tensorflow as tf

from backends._runtime.adapter import AutodiffAdapter
from backends.tensorflow import autodiff  # enables op determinism on import
from backends.tensorflow.ops import OPS


class TensorFlowAdapter(AutodiffAdapter):
    name = framework = "tensorflow"
    table = OPS
    autodiff = autodiff

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
