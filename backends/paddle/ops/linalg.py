import paddle

from backends._ops_common import gemm_sum
from backends.paddle.ops import OPS


@OPS.register("MatMul", since=13)
def matmul(a, b):
    return paddle.matmul(a, b)


@OPS.register("Gemm", since=13)
def gemm(a, b, c=None, *, alpha=1.0, beta=1.0, transA=0, transB=0):
    y = paddle.matmul(a, b, transpose_x=bool(transA), transpose_y=bool(transB))
    return gemm_sum(y, c, alpha, beta)


@OPS.register("Einsum", since=12)
def einsum(*xs, equation):
    return paddle.einsum(equation, *xs)
