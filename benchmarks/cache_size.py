"""BUNDLE.cache/ after one all-modes replay (fwd, vjp, vjp2 on torch: every reference and oracle answer
and every judged row kept), against the bundle's own size (issue 33's target: <= 1.5x), on ResNet-50
(torchvision, random weights, 2x3x112x112) and the StyleGAN2 example; then again after a second replay (torch and
onnxruntime), which reads the answers and packs the small ones it verified into one more file
(irtrace/replay/pack.py). Splits the cache into the
reference's answers (a result that is a recorded value bit for bit is kept as its name), the oracle's
float64 results (named where every element is the reference's float32 result, in float32 where every
element is a float32, else as the int32 differences of their bits from
the reference's, the elements whose difference does not fit kept in float64 apart), the rounding model's
sizes and the judged rows.

    .venv/bin/python benchmarks/cache_size.py [--models resnet50,stylegan2] [--baseline DIR]

--baseline DIR: the same replay by the irtrace of another checkout (`git worktree add DIR <commit>`) on the
same bundle, side by side: each code's cache from empty (its first replay, timed), its size, then a second
replay with the answers cached and torch's rows judged again (timed: what reading the answers back costs).
"""
import argparse
import contextlib
import io
import json
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import torch
from safetensors import safe_open

from fast_replay import MODELS, export_quietly  # benchmarks/fast_replay.py, beside this script
from four_backends import replay as cli_replay  # an `irtrace replay` in a fresh process, by a chosen checkout
from irtrace.replay import ReplayOptions
from irtrace.report.folder import replay_into


def _size(path):
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def _nbytes(arr):
    n = 1
    for d in arr.get_shape():
        n *= d
    return n * {"F64": 8, "I64": 8, "F16": 2, "BF16": 2, "BOOL": 1, "U8": 1, "I8": 1}.get(arr.get_dtype(), 4)


def _parts(cache):
    """bytes of the cache by what they hold: the reference's (torch's) answers, the oracle's results, its
    rounding model's sizes, judged rows, and the files' headers."""
    parts = Counter()
    for f in Path(cache).iterdir():
        if f.suffix == ".json":
            parts["judged rows, json"] += f.stat().st_size
        if f.suffix != ".safetensors":
            continue
        with safe_open(str(f), "np") as h:
            meta = json.loads(h.metadata()["irtrace"])
            sized = sum((meta["reply"].get("extra") or {}).get("magnitude", []))
            arrays = {int(k): h.get_slice(k) for k in h.keys()}
            oracle = meta["role"] != "torch"
            for k, arr in arrays.items():
                kind = "reference answers" if not oracle else "oracle: results apart" if k >= meta["n"] else \
                    "oracle: model sizes" if k >= meta["n"] - sized else \
                    "oracle: results as differences" if str(k) in meta.get("delta", {}) else "oracle: results"
                parts[kind] += _nbytes(arr)
                parts["headers"] -= _nbytes(arr)
        parts["headers"] += f.stat().st_size
    return parts


def _rows(report):
    """Every row of a report.json but its timings, in order."""
    nodes = json.loads(Path(report).read_text())["nodes"]
    return [{k: v for k, v in r.items() if k not in ("time_s", "ref_time_s")} for n in nodes for r in n["results"]]


def side_by_side(bundle, baseline, d):
    """Each code's cache from empty, its size and the seconds of its first replay and of one with the answers
    cached and torch's rows judged again, by `baseline`'s irtrace and this one; printed with their ratios."""
    cache, got = Path(f"{bundle.path}.cache"), {}
    for which, code in (("baseline", Path(baseline).resolve()), ("this", None)):
        shutil.rmtree(cache, ignore_errors=True)
        first = cli_replay(bundle.path, "torch", Path(d) / f"{which}-first", 1, code)[0]
        size = _size(cache)
        for rows in cache.glob("*.json"):
            rows.unlink()  # torch's rows: judged again from the cached answers, which are read
        again = cli_replay(bundle.path, "torch", Path(d) / f"{which}-again", 1, code)[0]
        got[which] = (size, first, again)
    rows = {out: _rows(Path(d) / out / "report.json") for out in ("baseline-first", "baseline-again", "this-first",
                                                                    "this-again")}
    same = all(r == rows["baseline-first"] for r in rows.values())
    print(f"  the same {len(rows['this-first'])} rows (verdicts, numbers, details) in all four replays: {same}")
    bundle_size = _size(bundle.path)
    print(f"  side by side ({baseline}):       baseline       this  this/baseline")
    for k, what in enumerate(("cache / bundle", "first replay, s", "cached, judged again, s")):
        b, t = (got[w][k] / (bundle_size if k == 0 else 1) for w in ("baseline", "this"))
        print(f"  {what:28} {b:10.2f} {t:10.2f} {t / b:14.2f}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="resnet50,stylegan2")
    p.add_argument("--baseline", metavar="DIR", help="a checkout of another commit, replayed side by side")
    args = p.parse_args()
    torch.set_num_threads(1)
    for name in args.models.split(","):
        model, inputs = MODELS[name]()
        with tempfile.TemporaryDirectory() as d:
            bundle = export_quietly(model, inputs, Path(d) / f"{name}.irt")
            if args.baseline:
                side_by_side(bundle, args.baseline, d)
            with contextlib.redirect_stdout(io.StringIO()):
                replay_into(bundle.path, ReplayOptions.parse("torch", "fwd,vjp,vjp2"), out=Path(d) / "r")
            size, cache = _size(bundle.path), _size(f"{bundle.path}.cache")
            print(f"\n{name}: bundle {size / 1e6:.1f} MB, cache {cache / 1e6:.1f} MB after fwd+vjp+vjp2 "
                  f"on torch: {cache / size:.2f}x the bundle (target <= 1.5x)")
            parts = _parts(f"{bundle.path}.cache")
            for kind, nbytes in sorted(parts.items(), key=lambda kv: -kv[1]):
                print(f"  {kind:22} {nbytes / 1e6:9.1f} MB  {nbytes / size:5.2f}x the bundle")
            answers = sum(n for kind, n in parts.items() if kind == "reference answers" or kind.startswith(
                "oracle: results"))
            print(f"  the reference's and the oracle's results alone: {answers / size:.2f}x the bundle")
            with contextlib.redirect_stdout(io.StringIO()):  # reads and verifies the answers, then packs the small
                # ones (a replay of torch alone reads only its judged rows)
                replay_into(bundle.path, ReplayOptions.parse("torch,onnxruntime", "fwd,vjp,vjp2"), out=Path(d) / "r2")
            packed = sum(f.stat().st_size for f in Path(f"{bundle.path}.cache").glob("*.pack"))
            cache = _size(f"{bundle.path}.cache")
            print(f"  after a second replay, of torch and onnxruntime: {cache / size:.2f}x the bundle, of which the "
                  f"pack of the small answers {packed / 1e6:.1f} MB ({packed / size:.3f}x; replay/pack.py)")


if __name__ == "__main__":
    main()
