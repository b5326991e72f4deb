"""What irtrace's trust in nothing costs (issue 27), on torchvision's ResNet-50 (the bundle of
benchmarks/fast_replay.py, 2x3x112x112, 537 MB of values), measured in one run:

- the bundle's content key: a SHA-256 of every byte of its value store, then the same key read from
  the remembered digest (the file's identity unchanged);
- verifying the cached answers byte for byte when torch's rows are judged again (each answer's HMAC
  over its arrays), the first time and once the verified answers are remembered by identity.

    .venv/bin/python benchmarks/trust_cost.py [--bundle PATH]   (exports ResNet-50 there when missing)
"""
import argparse
import glob
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from irtrace import store  # noqa: E402
from irtrace.envs import trust  # noqa: E402
from irtrace.replay import ReplayOptions  # noqa: E402
from irtrace.replay import cache, entry  # noqa: E402


def verify_seconds(bundle, out):
    """(wall s of a torch replay whose rows are judged again, s spent verifying answers' bytes)."""
    for f in glob.glob(str(bundle) + ".cache/*.json"):
        os.remove(f)  # torch's rows: judged again from the cached answers
    spent = [0.0]
    real = entry.signer

    def timed(*args):
        t = time.perf_counter()
        h = real(*args)
        spent[0] += time.perf_counter() - t
        return h
    entry.signer = timed
    try:
        t = time.perf_counter()
        replay_into(bundle, ReplayOptions.parse("torch", "fwd,vjp,vjp2"), out=out)
        return time.perf_counter() - t, spent[0]
    finally:
        entry.signer = real


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", default=str(Path(tempfile.gettempdir()) / "irtrace-bench-resnet50.irt"))
    bundle = Path(ap.parse_args().bundle)
    if not bundle.exists():
        import irtrace
        from fast_replay import resnet50
        model, inputs = resnet50()
        irtrace.export(model, inputs, bundle)
    values = bundle / store.VALUES
    print(f"value store: {values.stat().st_size / 1e6:.1f} MB")
    time.sleep(2.5)  # older than store._SETTLED_NS: its digest may be remembered
    for memo in (trust.cache_root() / store.DIGESTS).glob("*.json"):
        if str(values.stat().st_ino) in memo.read_text():
            memo.unlink()
    t = time.perf_counter()
    store.values_digest(values)
    cold = time.perf_counter() - t
    t = time.perf_counter()
    store.values_digest(values)
    print(f"content key: hashing every byte {cold:.3f} s; remembered {time.perf_counter() - t:.4f} s")
    out = Path(tempfile.mkdtemp()) / "out"
    if not any(Path(str(bundle) + ".cache").glob("*.safetensors")):
        t = time.perf_counter()
        replay_into(bundle, ReplayOptions.parse("torch", "fwd,vjp,vjp2"), out=out)
        print(f"first replay (fills the cache): {time.perf_counter() - t:.1f} s")
    for index in (trust.cache_root() / cache.VERIFIED).glob("*.json"):
        index.unlink()  # nothing verified yet
    time.sleep(2.5)  # the answers older than cache._SETTLED_NS: remembered once verified
    answers = sum(p.stat().st_size for p in Path(str(bundle) + ".cache").glob("*.safetensors"))
    print(f"cached answers: {answers / 1e9:.2f} GB")
    for which in ("first", "second", "third"):
        wall, spent = verify_seconds(bundle, out)
        print(f"torch rows judged again, {which} run: {wall:.2f} s, of which verifying answers {spent:.2f} s")


if __name__ == "__main__":
    main()
