"""The OneFlow op table: each ONNX op written with the call a person porting the model would
write (oneflow.nn.functional.*, torch-like), never a workaround that would hide what that call
does. Where the API cannot express the ONNX semantics at all, the op does what a careful porter
would, and says so in a one-line comment."""
from backends._table import OpTable

OPS = OpTable("oneflow")

from backends.oneflow.ops import conv, elementwise, linalg, loss, norm, pool, reduce, rnn, shape  # noqa: E402,F401
