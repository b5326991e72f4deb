import oneflow

from backends._ops_common import gemm_sum
from backends.oneflow.ops import OPS


@OPS.register("MatMul", since=13)
def matmul(a, b):
    return oneflow.matmul(a, b)


@OPS.register("Gemm", since=13)
def gemm(a, b, c=None, *, alpha=1.0, beta=1.0, transA=0, transB=0):
    a = a.t() if transA else a
    b = b.t() if transB else b
    y = oneflow.matmul(a, b)
    return gemm_sum(y, c, alpha, beta)


@OPS.register("Einsum", since=12)
def einsum(*xs, equation):
    return oneflow.einsum(equation, *xs)
