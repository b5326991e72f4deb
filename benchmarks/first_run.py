"""The first (uncached) replay (default: torch in fwd+vjp+vjp2) with --jobs 1 and --jobs 2, side by side in one run,
on ResNet-50 (torchvision, random weights, 2x3x112x112) and the StyleGAN2 example: the float64
oracle's compute, spread over one or two worker sets; and what --jobs auto picks for each. Also the
same first run with --no-cache: what keeping the answers costs it (written behind, by a thread of
the cache's own); and the model's own forward + backward + double backward in float32 and in float64
(the oracle's precision; this machine's threads), the floor issue 33's "<= 10x" is measured against.

    .venv/bin/python benchmarks/first_run.py [--models resnet50,stylegan2] [--backend torch] [--modes fwd,vjp,vjp2]
"""
import argparse
import shutil
import tempfile
import time
from pathlib import Path

import torch

from fast_replay import MODELS, export_quietly, own_double_backward  # benchmarks/fast_replay.py, beside this script
from irtrace.replay import ReplayOptions
from irtrace.replay.api import auto_jobs
from irtrace.report.folder import replay_into


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="resnet50,stylegan2")
    p.add_argument("--backend", default="torch")
    p.add_argument("--modes", default="fwd,vjp,vjp2")
    args = p.parse_args()
    print(f"--backend {args.backend} --modes {args.modes}, nothing cached:")
    threads = torch.get_num_threads()
    print(f"{'model':10} {'--jobs 1 s':>11} {'--jobs 2 s':>11} {'ratio':>6} {'auto picks':>11} "
          f"{'--no-cache s':>13} {'cache costs':>12} {'own f32 s':>10} {'own f64 s':>10} {'best/own f32':>13}")
    for name in args.models.split(","):
        model, inputs = MODELS[name]()
        torch.set_num_threads(threads)
        own32 = own_double_backward(model, inputs)
        own64 = own_double_backward(model.double(), tuple(x.double() if x.is_floating_point() else x for x in inputs))
        model.float()
        torch.set_num_threads(1)
        with tempfile.TemporaryDirectory() as d:
            bundle = export_quietly(model, inputs, Path(d) / f"{name}.irt")
            times = []
            for jobs in (1, 2):
                shutil.rmtree(f"{bundle.path}.cache", ignore_errors=True)  # uncached: a first run
                t = time.perf_counter()
                replay_into(bundle.path, ReplayOptions.parse(args.backend, args.modes, jobs=jobs),
                            out=Path(d) / f"jobs{jobs}")
                times.append(time.perf_counter() - t)
            auto = auto_jobs(bundle, (args.backend,), cache=False, modes=args.modes.split(","))  # for this first run
            t = time.perf_counter()
            replay_into(bundle.path, ReplayOptions.parse(args.backend, args.modes, cache=False, jobs=1),
                        out=Path(d) / "nocache")
            bare = time.perf_counter() - t
        print(f"{name:10} {times[0]:11.2f} {times[1]:11.2f} {times[1] / times[0]:6.2f} {auto:11d} "
              f"{bare:13.2f} {times[0] / bare:11.2f}x {own32:10.3f} {own64:10.3f} {min(times) / own32:13.1f}")


if __name__ == "__main__":
    main()
