"""Shrinking time per finding (median over the findings of the example models on MegEngine,
and of the planted-bug test backend when MegEngine is unavailable), in one run.

    .venv/bin/python benchmarks/shrink.py
"""
import json
import statistics
import sys
import tempfile
from pathlib import Path

import irtrace
from irtrace.replay import ReplayOptions
from irtrace.report.folder import replay_into
from irtrace.examples import EXAMPLES
from irtrace.replay import backends
from irtrace.repro.make import make_repros


def main():
    rows = []
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        if backends.get("megengine").unavailable() is None:
            targets = [(name, "megengine") for name in ("stylegan2", "resnet", "wideresnet", "gpt")]
        else:
            sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
            import planted_backend
            planted_backend.register("pad")
            targets = [("resnet", "planted-pad"), ("wideresnet", "planted-pad")]
        for name, backend in targets:
            e = EXAMPLES[name]
            bundle = irtrace.export(e.build(), e.inputs(), d / f"{name}.irt", train=e.train)
            replayed = replay_into(bundle.path, ReplayOptions.parse(backend, "fwd,vjp,vjp2"), out=d / f"{name}.replay")
            report, out = replayed.json, replayed.out
            for folder in make_repros(out / "report.json", d / f"{name}.repros"):
                f = json.loads((folder / "finding.json").read_text())
                rows.append((name, f["id"], f["shrink"]["seconds"], f["shrink"]["calls"],
                             f["original_shapes"][0], f["shrunk_shapes"][0]))
    print(f"{'model':11} {'finding':52} {'seconds':>8} {'steps':>6}  first input: original -> shrunk")
    for name, fid, s, calls, a, b in rows:
        print(f"{name:11} {fid:52} {s:8.2f} {calls:6d}  {a} -> {b}")
    secs = [r[2] for r in rows]
    print(f"median shrink time per finding: {statistics.median(secs):.2f} s over {len(secs)} findings "
          f"(max {max(secs):.2f} s)")


if __name__ == "__main__":
    main()
