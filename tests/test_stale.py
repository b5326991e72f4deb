"""Nothing kept between runs can serve a stale or forged verdict.

The reference/oracle cache beside a bundle (BUNDLE.cache/) and `--resume`'s journal (OUT/journal.jsonl)
are not trusted as they are: keyed on the value store's size and modification time, a bundle edited in
place with its modification time put back (cp -p, tar x) would be served the old verdicts, and a cache
whose torch rows were flipped from DIVERGENT to MATCH, or shipped beside a bundle from elsewhere,
would turn findings into exit 0. The property: for each edit below, a replay served from the cache, a
resumed one and a --no-cache one give the same verdicts (the same report.json bytes); a resumed one
may instead refuse the journal of a bundle that changed (exit 2, one line), never reuse it.
"""
import contextlib
import io
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from irtrace import store
from irtrace.envs import trust
from irtrace.cli import main
from irtrace.export.onnx_bundle import bundle_from_onnx

ARGV = ["--backend", "torch", "--modes", "fwd"]


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in argv])
    return rc, err.getvalue()


def verdicts(out):
    """report.json of OUT without the bundle's path (each edit works on a copy of the base bundle)."""
    report = json.loads((Path(out) / "report.json").read_text())
    report["bundle"].pop("path")
    return report


def overwrite_value(bundle, name, change, keep_mtime=True):
    """Rewrite value `name` of the bundle's value store in place (same size), as `change(array)` says;
    with `keep_mtime`, the file's modification time is put back (what cp -p and tar x leave)."""
    path = Path(bundle) / store.VALUES
    st = path.stat()
    values = store.LazyValues(path)
    offset, length = values.extent(name)
    new = np.ascontiguousarray(change(np.array(values[name])), dtype=values.spec(name)[0])
    assert new.nbytes == length
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(new.tobytes())
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size


def make_base(path):
    """x @ w -> LeakyRelu(alpha 0.1) -> ReduceSum, with its recorded MatMul output bumped after export, so
    torch's own rows have findings (the recorded value is not what the recorded inputs give)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("LeakyRelu", ["m"], ["a"], name="lrelu", alpha=0.1),
             helper.make_node("ReduceSum", ["a"], ["y"], name="sum", keepdims=0)]
    m = helper.make_model(helper.make_graph(nodes, "g", [x, w], [y]), opset_imports=[helper.make_opsetid("", 17)])
    rng = np.random.default_rng(0)
    b = bundle_from_onnx(m, {"x": rng.standard_normal((2, 3)).astype(np.float32),
                             "w": rng.standard_normal((3, 4)).astype(np.float32)}, path)
    overwrite_value(b.path, "m", lambda a: a + np.float32(0.5) * (np.arange(a.size).reshape(a.shape) == 5))
    return Path(b.path)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """(the base bundle's folder, its cache, a replay's OUT with a complete journal) and its report."""
    d = tmp_path_factory.mktemp("base")
    bundle = make_base(d / "b.irt")
    rc, err = run("replay", bundle, *ARGV, "-o", d / "out")
    assert rc == 1, err
    # what a --no-cache replay of the unedited bundle says: the truth for every edit that leaves it as it is
    rc, err = run("replay", bundle, *ARGV, "-o", d / "nocache", "--no-cache")
    assert rc == 1 and (d / "nocache" / "report.json").read_bytes() == (d / "out" / "report.json").read_bytes()
    report = json.loads((d / "out" / "report.json").read_text())
    assert {(r["node"], r["verdict"]) for n in report["nodes"] for r in n["results"] if r["mode"] == "fwd"} >= \
        {("mm", "DIVERGENT")}
    cache = Path(str(bundle) + ".cache")
    assert list(cache.glob("*.json")) and list(cache.glob("*.safetensors"))
    return d


def flip_rows(cache, sign_with=None):
    """torch's kept rows, DIVERGENT made MATCH (signed again when `sign_with` says how, as the owner of
    another key would), in every judged file of `cache`; returns how many were flipped."""
    flipped = 0
    for p in Path(cache).glob("*.json"):
        sig, _, text = p.read_text().partition("\n")
        if '"DIVERGENT"' in text:
            text = text.replace('"DIVERGENT"', '"MATCH"')
            flipped += 1
            p.write_text(f"{sign_with(p.name, text) if sign_with else sig}\n{text}")
    return flipped


def edit_values(d):
    overwrite_value(d / "b.irt", "x", lambda a: a * np.float32(-1.5))


def edit_graph(d):
    """LeakyRelu's alpha 0.1 -> 0.3 (the same length in the protobuf), graph.onnx's mtime kept."""
    path = d / "b.irt" / store.GRAPH
    st = path.stat()
    import onnx
    g = onnx.load(str(path), load_external_data=False)
    next(a for n in g.graph.node if n.op_type == "LeakyRelu" for a in n.attribute if a.name == "alpha").f = 0.3
    path.write_bytes(g.SerializeToString())
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def edit_rows(d):
    assert flip_rows(d / "b.irt.cache")


def edit_answers(d):
    """Every answer of the cache with its arrays' bytes zeroed, its header and metadata kept."""
    for p in (d / "b.irt.cache").glob("*.safetensors"):
        raw = bytearray(p.read_bytes())
        n = int.from_bytes(raw[:8], "little")
        raw[8 + n:] = bytes(len(raw) - 8 - n)
        p.write_bytes(bytes(raw))


def copy_cache_of_another_bundle(d):
    """Another bundle at the same size and modification time (its x edited in place, cp -p style): its
    cache, copied over this one's (what a tarball of both would leave)."""
    other = d / "other.irt"
    shutil.copytree(d / "b.irt", other)
    edit_values_of = other
    overwrite_value(edit_values_of, "x", lambda a: a * np.float32(2.0))
    rc, err = run("replay", other, *ARGV, "-o", d / "other-out")
    assert rc in (0, 1), err
    shutil.rmtree(d / "b.irt.cache")
    shutil.copytree(Path(str(other) + ".cache"), d / "b.irt.cache")
    shutil.rmtree(other)  # only its cache stays, beside this bundle


def cache_of_another_user(d, monkeypatch):
    """A cache written with another key (another user, another machine), whose owner flipped its rows
    and signed them again: it must change nothing for this user."""
    other = (b"another user's key on another machine")[:trust.KEY_BYTES].ljust(trust.KEY_BYTES, b"!")
    shutil.rmtree(d / "b.irt.cache")
    with monkeypatch.context() as m:
        m.setattr(trust, "key", lambda: (other, None))
        trust.fingerprint.cache_clear()
        rc, err = run("replay", d / "b.irt", *ARGV, "-o", d / "other-out")
        assert rc == 1, err
        assert flip_rows(d / "b.irt.cache", sign_with=lambda name, text: trust.sign("cache file", name, text))
        rc, err = run("replay", d / "b.irt", *ARGV, "-o", d / "other-out2")
        assert rc == 0, err  # the flip works for the key that signed it...
    trust.fingerprint.cache_clear()  # ...and for no one else (below)


def edit_journal(d):
    """A node's line in the journal with its DIVERGENT results made MATCH (its signature kept)."""
    path = d / "out" / "journal.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    k = next(i for i, ln in enumerate(lines) if '"DIVERGENT"' in ln)
    lines[k] = lines[k].replace('"DIVERGENT"', '"MATCH"')
    path.write_text("".join(lines))


EDITS = {"values in place, mtime kept": edit_values, "graph attribute, mtime kept": edit_graph,
         "cache rows flipped": edit_rows, "cache answers zeroed": edit_answers,
         "cache of another bundle": copy_cache_of_another_bundle, "cache of another user": cache_of_another_user,
         "journal edited": edit_journal}
BUNDLE_CHANGED = {"values in place, mtime kept", "graph attribute, mtime kept"}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_cached_resumed_and_uncached_replays_agree_after_any_edit(edit, base, tmp_path, monkeypatch):
    d = tmp_path / "d"
    shutil.copytree(base, d, symlinks=True)
    fn = EDITS[edit]
    fn(d, monkeypatch) if fn is cache_of_another_user else fn(d)

    if edit in BUNDLE_CHANGED:  # else the bundle is as it was: its --no-cache report is base's (above)
        shutil.rmtree(d / "nocache")
        rc_none, err = run("replay", d / "b.irt", *ARGV, "-o", d / "nocache", "--no-cache")
        assert rc_none in (0, 1), err
    else:
        rc_none = 1
    truth = verdicts(d / "nocache")
    rc, err = run("replay", d / "b.irt", *ARGV, "-o", d / "cached")
    assert rc == rc_none and verdicts(d / "cached") == truth, (edit, err)

    rc, err = run("replay", d / "b.irt", *ARGV, "-o", d / "out", "--resume")
    if edit in BUNDLE_CHANGED:  # the journal of the bundle as it was: refused, not reused
        assert rc == 2 and "written by another replay (bundle differ)" in err and len(err.splitlines()) == 1, err
        assert not (d / "out" / "report.json").exists()
    else:
        assert rc == rc_none and verdicts(d / "out") == truth, (edit, err)
    if edit == "journal edited":
        assert "1 line(s) of" in err and "their nodes run again" in err
    if edit in BUNDLE_CHANGED:
        assert truth["nodes"] != verdicts(base / "out")["nodes"]  # the edit did change the verdicts


def test_the_value_stores_digest_is_remembered_only_while_the_file_is_unchanged(tmp_path, monkeypatch):
    """values_digest hashes every byte once, then remembers the digest (signed) under the file's identity:
    an edit that puts the modification time back still changes the change time, and the digest is
    computed again; a remembered digest edited by hand does not verify and is computed again."""
    monkeypatch.setattr(store, "_SETTLED_NS", 0)  # remember even a file changed a moment ago
    b = make_base(tmp_path / "b.irt")
    path = b / store.VALUES
    first = store.values_digest(path)
    memo = trust.cache_root() / store.DIGESTS / next(p.name for p in (trust.cache_root() / store.DIGESTS).iterdir()
                                                     if json.loads(p.read_text())["identity"][1] == path.stat().st_ino)
    assert json.loads(memo.read_text())["sha256"] == first
    calls = []
    monkeypatch.setattr(store, "open", lambda *a, **k: calls.append(a[0]) or open(*a, **k), raising=False)
    assert store.values_digest(path) == first and calls == []  # remembered: not read again
    time.sleep(0.05)
    overwrite_value(b, "x", lambda a: a + np.float32(1.0))
    second = store.values_digest(path)
    assert second != first and calls  # the same size and mtime, another digest
    forged = json.loads(memo.read_text())
    forged["sha256"] = first
    memo.write_text(json.dumps(forged))
    assert store.values_digest(path) == second


@pytest.mark.parametrize("n", [512, 16])
def test_an_answer_verified_once_is_verified_again_after_any_edit(tmp_path, monkeypatch, n):
    """An answer, memory-mapped (over 1 MB) or read whole, is verified byte for byte once, then known by its
    identity (cache.py, `verified/`); an edit in place that puts its modification time back changes its
    change time: it is verified again, fails, and is computed again, so the verdicts stay the --no-cache ones."""
    from irtrace.replay import cache, entry
    monkeypatch.setattr(cache, "_SETTLED_NS", 0)  # index even an answer written a moment ago
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, 8])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [8, n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    m = helper.make_model(helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g", [x, w],
                                            [y]), opset_imports=[helper.make_opsetid("", 17)])
    rng = np.random.default_rng(0)
    b = bundle_from_onnx(m, {"x": rng.standard_normal((n, 8)).astype(np.float32),
                             "w": rng.standard_normal((8, n)).astype(np.float32)}, tmp_path / "b.irt")
    argv = ["replay", b.path, "--backend", "torch", "--modes", "fwd", "--atol", "1e-5"]
    assert run(*argv, "-o", tmp_path / "none", "--no-cache")[0] == 0
    cache_dir = Path(str(b.path) + ".cache")
    for out in ("cold", "warm"):  # the second verifies the oracle's 1 MB answer and remembers it
        for p in cache_dir.glob("*.json"):
            p.unlink()  # torch's rows: judged again from the answers, which are read
        assert run(*argv, "-o", tmp_path / out)[0] == 0
    # the oracle's float64 answer, kept as the int32 differences of its bits from torch's result
    large = max(cache_dir.glob("*.safetensors"), key=lambda p: p.stat().st_size)
    assert (large.stat().st_size > entry.SMALL) == (n == 512)
    assert any(large.name in p.read_text() for p in (trust.cache_root() / cache.VERIFIED).glob("*.json"))
    for p in cache_dir.glob("*.json"):
        p.unlink()  # torch's rows: judged again from the answers
    st = large.stat()
    raw = bytearray(large.read_bytes())
    n = int.from_bytes(raw[:8], "little")
    raw[8 + n:] = bytes(len(raw) - 8 - n)  # no differences: float64 would be torch's result, its error 0
    time.sleep(0.05)
    large.write_bytes(bytes(raw))
    os.utime(large, ns=(st.st_atime_ns, st.st_mtime_ns))
    rc, err = run(*argv, "-o", tmp_path / "edited")
    assert rc == 0 and verdicts(tmp_path / "edited") == verdicts(tmp_path / "none"), err


def test_a_key_others_can_read_signs_nothing(tmp_path, monkeypatch):
    """The key is the user's alone: one that others can read (or that is not a file of this user's) is
    not used. The replay runs, keeps nothing beside the bundle, says why once; --resume is refused."""
    root = tmp_path / "cache-root"
    root.mkdir()
    (root / trust.KEY_NAME).write_bytes(os.urandom(trust.KEY_BYTES))
    os.chmod(root / trust.KEY_NAME, 0o644)
    monkeypatch.setenv("IRTRACE_CACHE", str(root))
    for fn in (trust.key, trust.fingerprint, trust._warn_once):
        fn.cache_clear()
    try:
        assert trust.key()[0] is None and "can be read or written by others (mode 644)" in trust.key()[1]
        b = make_base(tmp_path / "b.irt")
        rc, err = run("replay", b, *ARGV, "-o", tmp_path / "out")
        assert rc == 1, err
        assert not Path(str(b) + ".cache").exists()
        rc, err = run("replay", b, *ARGV, "-o", tmp_path / "out", "--resume")
        assert rc == 2 and "cannot resume without the signing key" in err, err
    finally:
        monkeypatch.delenv("IRTRACE_CACHE")
        for fn in (trust.key, trust.fingerprint, trust._warn_once):
            fn.cache_clear()
