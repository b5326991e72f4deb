"""The torch op table: ONNX ops written with torch's public API."""
from backends._table import OpTable

OPS = OpTable("torch")

from backends.torch.ops import (conv, elementwise, index, linalg, loss, norm, pool, reduce, rnn,  # noqa: E402,F401
                                sample, shape, spectral)
