"""The TensorFlow op table: each ONNX op written with the TensorFlow call a person porting the
model would write (tf.nn.conv2d with explicit paddings, tf.nn.max_pool2d, tf.image.resize, ...),
never a workaround that would hide what that call does. TensorFlow's CPU conv and pool kernels
are NHWC only: those ops transpose explicitly from ONNX's NCHW and back, and say so. Where the
API cannot express the ONNX semantics exactly, the op does what a careful porter would, and says
so in a one-line comment."""
from backends._table import OpTable

OPS = OpTable("tensorflow")

from backends.tensorflow.ops import conv, elementwise, linalg, loss, norm, pool, reduce, rnn, shape  # noqa: E402,F401
