import tensorflow as tf

from backends._ops_common import gemm_sum
from backends.tensorflow.ops import OPS


@OPS.register("MatMul", since=13)
def matmul(a, b):
    # tf.linalg.matmul wants rank >= 2 (it broadcasts batch dims); ONNX 1-D operands follow numpy
    a2 = tf.expand_dims(a, 0) if a.shape.rank == 1 else a
    b2 = tf.expand_dims(b, -1) if b.shape.rank == 1 else b
    y = tf.linalg.matmul(a2, b2)
    if b.shape.rank == 1:
        y = tf.squeeze(y, -1)
    if a.shape.rank == 1:
        y = tf.squeeze(y, -2 if b.shape.rank > 1 else -1)
    return y


@OPS.register("Gemm", since=13)
def gemm(a, b, c=None, *, alpha=1.0, beta=1.0, transA=0, transB=0):
    y = tf.linalg.matmul(a, b, transpose_a=bool(transA), transpose_b=bool(transB))
    return gemm_sum(y, c, alpha, beta)


@OPS.register("Einsum", since=12)
def einsum(*xs, equation):
    return tf.einsum(equation, *xs)
