"""Time of `irtrace export` vs `torch.onnx.export` alone, per example model, in one run, and how much of
irtrace's export is its gradient check (torch autograd on the module again, in float32 and on a float64
copy, to prove the recorded parameter gradients).

    .venv/bin/python benchmarks/export.py
"""
import contextlib
import io
import tempfile
import time
import warnings
from pathlib import Path

import torch

import irtrace
from irtrace.examples import EXAMPLES


def time_torch_onnx_export(model, inputs):
    """Seconds of torch.onnx.export alone (dynamo, unoptimized: what irtrace export runs), quietly."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        torch.onnx.export(model, inputs, dynamo=True, optimize=False)
        return time.perf_counter() - t


class Timed:
    """Wraps a function and adds up the seconds spent in it."""

    def __init__(self, fn):
        self.fn, self.seconds = fn, 0.0

    def __call__(self, *a, **k):
        t = time.perf_counter()
        try:
            return self.fn(*a, **k)
        finally:
            self.seconds += time.perf_counter() - t


def main():
    from irtrace.export import torch_export
    check = torch_export.check_gradients = Timed(torch_export.check_gradients)
    print(f"{'model':18} {'torch.onnx.export s':>20} {'irtrace export s':>17} {'ratio':>6} {'gradient check s':>17} "
          f"{'share':>6}")
    with tempfile.TemporaryDirectory() as d:
        warm = EXAMPLES["resnet"]  # first calls pay for imports and registry set-up: not measured
        irtrace.export(warm.build(), warm.inputs(), Path(d) / "warm.irt", train=True)
        for name, e in EXAMPLES.items():
            model, inputs = e.build().train(e.train), e.inputs()
            t_onnx = time_torch_onnx_export(model, inputs)
            check.seconds = 0.0
            t = time.perf_counter()
            irtrace.export(e.build(), inputs, Path(d) / f"{name}.irt", train=e.train)
            t_irt = time.perf_counter() - t
            print(f"{name:18} {t_onnx:20.2f} {t_irt:17.2f} {t_irt / t_onnx:6.2f} {check.seconds:17.2f} "
                  f"{check.seconds / t_irt:6.1%}")


if __name__ == "__main__":
    main()
