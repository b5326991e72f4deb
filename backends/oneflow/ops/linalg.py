import oneflow

from backends.oneflow.ops import OPS


@OPS.register("MatMul", since=13)
def matmul(a, b):
    return oneflow.matmul(a, b)


@OPS.register("Gemm", since=13)
def gemm(a, b, c=None, *, alpha=1.0, beta=1.0, transA=0, transB=0):
    a = a.t() if transA else a
    b = b.t() if transB else b
    y = oneflow.matmul(a, b)
    if alpha != 1.0:
        y = alpha * y
    if c is not None:
        y = y + (beta * c if beta != 1.0 else c)
    return y


@OPS.register("Einsum", since=12)
def einsum(*xs, equation):
    return oneflow.einsum(equation, *xs)
