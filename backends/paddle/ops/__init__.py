"""The Paddle op table: each ONNX op written with the Paddle call a person porting the model
would write (paddle.nn.functional.conv2d with padding=[top, bottom, left, right] for asymmetric
pads, avg_pool2d(exclusive=...), batch_norm with Paddle's keep-fraction momentum, ...), never a
workaround that would hide what that call does. Where the API cannot express the ONNX semantics
exactly, the op does what a careful porter would, and says so in a one-line comment."""
from backends._table import OpTable

OPS = OpTable("paddle")

from backends.paddle.ops import conv, elementwise, linalg, loss, norm, pool, reduce, rnn, shape  # noqa: E402,F401
