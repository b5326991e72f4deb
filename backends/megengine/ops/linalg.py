from megengine import functional

from backends._ops_common import gemm_sum
from backends.megengine.ops import OPS


@OPS.register("MatMul", since=13)
def matmul(a, b):
    return functional.matmul(a, b)


@OPS.register("Gemm", since=13)
def gemm(a, b, c=None, *, alpha=1.0, beta=1.0, transA=0, transB=0):
    y = functional.matmul(a, b, transpose_a=bool(transA), transpose_b=bool(transB))
    return gemm_sum(y, c, alpha, beta)


# Not registered: Einsum (MegEngine's public functional API has no einsum).
