"""irtrace's onnxruntime forward replay against NVIDIA Polygraphy, the peer that compares every
intermediate output of an ONNX model, side by side in one run on torchvision's ResNet-50 (random
weights, eval mode, 2x3x112x112), each a fresh command as a user types it:

- first run: `irtrace replay B --backend onnxruntime --modes fwd` with no cache (every node alone in
  onnxruntime, in torch, the reference, and in the float64 oracle; each answer judged) against
  `polygraphy run graph.onnx --onnxrt --onnxrt --onnx-outputs mark all` (the whole model twice in
  onnxruntime, every output marked, compared). Target <= 0.5.
- cached: the same replay again (reference and oracle answers served from BUNDLE.cache, onnxruntime
  run again) against `polygraphy run graph.onnx --onnxrt --onnx-outputs mark all` (one mark-all run).
  Target <= 0.5. The second replay verifies every answer it reads (its whole bytes, against its signature);
  "cached again", a third, reads the answers verified before (the replays a user makes after each change of
  a port), also printed against the same Polygraphy run.

Polygraphy is not an irtrace dependency: `.venv/bin/pip install polygraphy==0.49.26` first (pure
Python; it uses the onnx and onnxruntime already there). Each command runs `--repeat` times (default
2), alternating, and the best of each is kept.

--baseline DIR: the irtrace commands also by the irtrace of another checkout (`git worktree add DIR <commit>`),
in the same turns (the two in the other order every other turn), the baseline's on a copy of the bundle (a
BUNDLE.cache of its own), with their ratio to this one's.

    .venv/bin/python benchmarks/polygraphy_compare.py [--repeat 2] [--baseline DIR]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fast_replay import MODELS, export_quietly  # benchmarks/fast_replay.py, beside this script


ROOT = Path(__file__).resolve().parents[1]


def seconds(cmd, cwd, code=None):
    """Seconds of the command `cmd` run in the folder `cwd`; an irtrace command by the irtrace in the checkout `code`
    (default this one). Not run from a checkout: `python -m` puts the working folder first on sys.path, so from this
    checkout's root the baseline's command imported this irtrace whatever PYTHONPATH said (the ratios to a baseline
    before this was mended compared this code with itself)."""
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(code or ROOT)),
                          cwd=cwd)
    took = time.perf_counter() - t
    if done.returncode not in (0, 1):  # irtrace replay exits 1 when it has findings
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return took


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--baseline", metavar="DIR", help="a checkout of another commit, its irtrace run side by side")
    args = p.parse_args()
    codes = {"": None, **({" (baseline)": Path(args.baseline).resolve()} if args.baseline else {})}
    polygraphy = shutil.which("polygraphy", path=str(Path(sys.executable).parent))
    if polygraphy is None:
        sys.exit("polygraphy is not installed: .venv/bin/pip install polygraphy==0.49.26")
    model, inputs = MODELS["resnet50"]()
    with tempfile.TemporaryDirectory() as d:
        bundle = export_quietly(model, inputs, Path(d) / "resnet50.irt")
        graph = str(Path(bundle.path) / "graph.onnx")  # its weights stay in values.safetensors (external data)
        paths = {tag: Path(bundle.path) if not tag else Path(d) / "baseline" / "resnet50.irt" for tag in codes}
        for tag, path in paths.items():  # a copy of the bundle for the baseline: a cache (BUNDLE.cache) of its own
            if not path.exists():
                shutil.copytree(bundle.path, path)

        def replay(tag):
            return [sys.executable, "-m", "irtrace", "replay", str(paths[tag]), "--backend", "onnxruntime",
                    "--modes", "fwd", "-o", str(Path(d) / f"out{tag.strip()}")]
        commands = {  # what: (command, the checkout whose irtrace runs it, the cache it starts without)
            **{f"irtrace first{tag}": (replay(tag), code, f"{paths[tag]}.cache") for tag, code in codes.items()},
            "polygraphy ORT vs ORT, mark all": ([polygraphy, "run", graph, "--onnxrt", "--onnxrt",
                                                 "--onnx-outputs", "mark", "all"], None, None),
            **{f"irtrace cached{tag}": (replay(tag), code, None) for tag, code in codes.items()},
            **{f"irtrace cached again{tag}": (replay(tag), code, None) for tag, code in codes.items()},
            "polygraphy ORT mark-all run": ([polygraphy, "run", graph, "--onnxrt", "--onnx-outputs", "mark", "all"],
                                            None, None),
        }
        best = {k: float("inf") for k in commands}
        for turn in range(args.repeat):
            order = list(commands.items())
            if turn % 2:  # this irtrace and the baseline's in the other order every other turn
                for first in (0, len(codes) + 1, 2 * len(codes) + 1):
                    order[first:first + len(codes)] = order[first:first + len(codes)][::-1]
            for what, (cmd, code, cache) in order:
                if cache is not None:
                    shutil.rmtree(cache, ignore_errors=True)
                best[what] = min(best[what], seconds(cmd, d, code))
    print(f"ResNet-50, {len(bundle.model.graph.node)} nodes; best of {args.repeat}, each a fresh command:")
    for what, s in best.items():
        print(f"  {what:34} {s:7.2f} s")
    for ours, theirs in (("irtrace first", "polygraphy ORT vs ORT, mark all"),
                         ("irtrace cached", "polygraphy ORT mark-all run"),
                         ("irtrace cached again", "polygraphy ORT mark-all run")):
        ratio = best[ours] / best[theirs]
        print(f"{ours} / {theirs}: {ratio:.2f}  target <= 0.5  "
              f"{'met' if ratio <= 0.5 else f'MISSED by {ratio / 0.5:.1f}x'}")
        if args.baseline:
            print(f"  {ours} / the baseline's: {best[ours] / best[ours + ' (baseline)']:.2f} "
                  f"(the baseline / {theirs}: {best[ours + ' (baseline)'] / best[theirs]:.2f})")


if __name__ == "__main__":
    main()
