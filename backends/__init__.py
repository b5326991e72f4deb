"""One folder per framework. Each holds an op table (one small function per ONNX op, written
with that framework's public API), an adapter (forward / vjp / vjp2 through the framework's
own autograd) and its environment. The shared pieces are `_table` and `_runtime`.

This package imports numpy and the standard library only: worker processes in other
environments (e.g. MegEngine's Python 3.10) import it without the host package.
"""
