import torch

from backends._ops_common import gemm_sum
from backends.torch.ops import OPS


@OPS.register("MatMul", since=13)
def matmul(a, b):
    return torch.matmul(a, b)


@OPS.register("Gemm", since=13)
def gemm(a, b, c=None, *, alpha=1.0, beta=1.0, transA=0, transB=0):
    a = a.t() if transA else a
    b = b.t() if transB else b
    y = torch.matmul(a, b)
    return gemm_sum(y, c, alpha, beta)


@OPS.register("Einsum", since=12)
def einsum(*xs, equation):
    return torch.einsum(equation, *xs)


@OPS.register("Det", since=11)
def det(x):
    return torch.linalg.det(x)
