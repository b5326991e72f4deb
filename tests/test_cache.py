"""The reference's and oracle's answers are computed once per bundle: a second replay
starts neither, reads BUNDLE.cache/, and writes the same report.json; anything that could change an
answer (the bundle's content, the worker that computes it) is another key; a torn entry is computed
again; --no-cache computes everything."""
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from irtrace.cli import main
from irtrace.export.onnx_bundle import bundle_from_onnx
from irtrace.replay import ReplayOptions
from irtrace.report.folder import replay_into
from irtrace.replay import backends
from irtrace.replay.worker import WorkerProxy
from test_faults import HERE


def small(path, seed=0):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Sigmoid", ["m"], ["s"], name="sig"),
             helper.make_node("ReduceSum", ["s"], ["y"], name="sum", keepdims=0)]  # a 0-d result
    m = helper.make_model(helper.make_graph(nodes, "g", [x, w], [y]), opset_imports=[helper.make_opsetid("", 17)])
    rng = np.random.default_rng(seed)
    return bundle_from_onnx(m, {"x": rng.standard_normal((2, 3)).astype(np.float32),
                                "w": rng.standard_normal((3, 4)).astype(np.float32)}, path, force=True)


@pytest.fixture
def started(monkeypatch, cold_workers):
    """The names of the workers started, in order (each replay's own: none kept warm)."""
    names, real = [], WorkerProxy.start

    def start(self):
        names.append(self.info.name)
        return real(self)
    monkeypatch.setattr(WorkerProxy, "start", start)
    return names


def replay(bundle, out, *extra):
    assert main(["replay", str(bundle.path), "--backend", "torch,onnxruntime", "-o", str(out), *extra]) == 0
    return (Path(out) / "report.json").read_bytes()


def test_second_replay_starts_no_reference_or_oracle_and_reports_the_same(tmp_path, started, capsys):
    b = small(tmp_path / "b.irt")
    cold = replay(b, tmp_path / "cold")
    assert sorted(started) == ["onnxruntime", "oracle", "torch"]
    cache = Path(str(b.path) + ".cache")
    entries = sorted(p.name for p in cache.glob("*.safetensors"))
    assert len(entries) == 2 * 3 * 4  # reference and oracle, three nodes, four calls (vjp2: ds/dx, ds/dg)
    started.clear()
    assert replay(b, tmp_path / "warm") == cold
    assert started == ["onnxruntime"]
    assert sorted(p.name for p in cache.glob("*.safetensors")) == entries

    # a torn entry is computed again, the report the same: the oracle's, or the reference's that an oracle entry is
    # kept against as differences (computed again, the same results: the oracle's entry still serves)
    from safetensors import safe_open
    roles = {}
    for name in entries:
        with safe_open(str(cache / name), "np") as f:
            meta = json.loads(f.metadata()["irtrace"])
        roles.setdefault((meta["role"], bool(meta.get("delta") or meta.get("digest"))), name)
    for role, torn_name in (("oracle", roles["oracle", True]), ("torch", roles["torch", True])):
        torn = cache / torn_name
        torn.write_bytes(torn.read_bytes()[:40])
        started.clear()
        assert replay(b, tmp_path / f"torn-{role}") == cold
        assert started == ["onnxruntime", role]  # and the one whose entry was torn

    # --no-cache: both start, nothing is read
    started.clear()
    assert replay(b, tmp_path / "nocache", "--no-cache") == cold
    assert sorted(started) == ["onnxruntime", "oracle", "torch"]


def test_another_bundle_or_another_reference_is_another_key(tmp_path, started):
    b = small(tmp_path / "b.irt")
    replay(b, tmp_path / "r0")
    b = small(tmp_path / "b.irt", seed=1)  # exported again at the same path: other values
    started.clear()
    replay(b, tmp_path / "r1")
    assert sorted(started) == ["onnxruntime", "oracle", "torch"]

    saved = dict(backends.BACKENDS)
    try:  # a reference that raises in Sigmoid's vjp: its answers must not come from the real one's entries
        info = backends.get("torch")
        backends.register(replace(info, worker="faulty_backend", extra_path=tuple(info.extra_path) + (HERE,),
                                  env={**info.env, "IRTRACE_FAULT_BASE": info.worker,
                                       "IRTRACE_FAULT": "memory:Sigmoid:vjp"}))
        report = replay_into(b.path, ReplayOptions.parse("torch,onnxruntime", "fwd,vjp"), out=tmp_path / "faulty").json
    finally:
        backends.BACKENDS.clear()
        backends.BACKENDS.update(saved)
    (failed,) = [r for n in report["nodes"] for r in n["results"] if r["verdict"] == "ERROR"]
    assert (failed["node"], failed["mode"]) == ("sig", "vjp") and "MemoryError" in failed["message"]


def test_a_replay_of_the_reference_alone_reads_the_rows_it_judged(tmp_path, started):
    """torch judged against float64 is a function of the two cached answers, the policy and the code:
    a second replay of torch alone starts no worker and reads its rows (one JSON file per call); a
    torn file is judged again from the cached answers; another policy is another key. Each report is
    the first one's."""
    b = small(tmp_path / "b.irt")

    def alone(out, *extra):
        assert main(["replay", str(b.path), "--backend", "torch", "-o", str(tmp_path / out), *extra]) == 0
        return (tmp_path / out / "report.json").read_bytes()
    cold = alone("cold")
    cache = Path(str(b.path) + ".cache")
    judged = sorted(cache.glob("*.json"))
    assert len(judged) == 3 * 4 and sorted(started) == ["oracle", "torch"]  # three nodes, four calls
    started.clear()
    assert alone("warm") == cold and started == []
    kept = judged[0].read_bytes()
    judged[0].write_text("[{\"node\": ")  # torn: judged again from the cached answers (no worker either)
    assert alone("torn") == cold and started == [] and judged[0].read_bytes() == kept
    fixed = alone("fixed", "--atol", "1e-3")
    assert len(list(cache.glob("*.json"))) == 2 * 3 * 4 and b'"fixed": true' in fixed


def test_judged_rows_come_back_as_they_were_and_a_finding_needs_its_rounding_estimate(tmp_path):
    """Rows read back equal the rows kept (an infinity, a NaN, numpy scalars); they are tied to the
    answer files they were judged from (an answer computed again is judged again); a DIVERGENT row was
    judged again with the oracle's Monte Carlo rounding estimate (engine.judge_node), so a replay of
    the reference alone uses the kept rows only once those are kept too."""
    import base64
    import os

    from irtrace import compare
    from irtrace.ir.spec import node_specs
    from irtrace.replay.cache import ResultCache
    from irtrace.replay.call import bundle_paths
    from backends._runtime.wire import Status
    from irtrace.replay.execute import Answer
    from irtrace.replay.judge import _basis, judged_before, model_call, rounding_call
    from irtrace.replay.plan import ORACLE, REFERENCE, mode_calls
    b = small(tmp_path / "b.irt")
    assert main(["replay", str(b.path), "--backend", "torch", "--modes", "vjp", "-o", str(tmp_path / "r")]) == 0
    spec = node_specs(b.model)[0]
    proto = base64.b64encode(b.model.graph.node[0].SerializeToString()).decode()
    calls, _ = mode_calls(b, spec, ("vjp",), bundle_paths(b), proto)
    call = calls[0]
    off = call.off()
    cache = ResultCache(b, [REFERENCE, ORACLE])
    policy = compare.Policy()
    metrics = compare.Metrics(float("inf"), np.float32(0.5), None, None, None, None, None, None, np.float64(2.0), 0.0)
    rows = [compare.Result("mm", "MatMul", "torch", "vjp", "d_x", compare.DIVERGENT, metrics, oracle_abs=float("nan"),
                           allowed=np.float32(1e-6), tags=("kink",), time_s=0.25)]
    basis = _basis(call, off, False, False, False)
    assert judged_before(call, ["torch"], cache, policy, off, True)[0].verdict is compare.MATCH  # the replay's own
    cache.keep_judged(call, policy, basis, rows)
    back = cache.judged(call, policy, basis)
    assert len(back) == 1 and back[0].verdict is compare.DIVERGENT and back[0].tags == ("kink",)
    assert back[0].metrics.max_abs == float("inf") and back[0].metrics.max_rel == 0.5 and np.isnan(back[0].oracle_abs)
    assert back[0].allowed == float(np.float32(1e-6)) and back[0].time_s == 0.25
    assert judged_before(call, ["torch"], cache, policy, off, True) is None  # no rounding model is cached
    # DIVERGENT without it: judged again with the rounding model (MatMul accumulates), still DIVERGENT
    cache.put(model_call(call), ORACLE, Answer(Status.OK, {"status": "ok", "extra": {"magnitude": [1]}}, [],
                                               {"magnitude": [[np.ones(1, np.float32)]]}))
    cache.keep_judged(call, policy, _basis(call, off, False, False, True), rows)
    assert judged_before(call, ["torch"], cache, policy, off, True) is None  # no rounding estimate is cached
    asked = rounding_call(call)
    cache.put(asked, ORACLE, Answer(Status.OK, {"status": "ok", "extra": {"rounding": [1]}}, [], {"rounding": [[np.zeros(1)]]}))
    noise = [replace(rows[0], verdict=compare.NOISE, float32_rounding=3e-7)]
    cache.keep_judged(call, policy, _basis(call, off, False, True, True), noise)
    assert judged_before(call, ["torch"], cache, policy, off, True)[0].verdict is compare.NOISE
    assert judged_before(call, ["torch", "onnxruntime"], cache, policy, off, True) is None  # another backend: run it
    assert judged_before(call, ["torch"], cache, replace(policy, match_ulps=2.0), off, True) is None
    assert off == [] and judged_before(call, ["torch"], cache, policy, [0], True) is None  # x not judged: another key
    # the reference's answer computed again (a torn entry): its rows are judged again
    answer = cache._path(call, REFERENCE)
    st = answer.stat()
    os.utime(answer, ns=(st.st_atime_ns, st.st_mtime_ns + 1000))
    assert cache.judged(call, policy, basis) is None


def test_an_oracle_gradient_that_fails_its_check_is_listed_as_skipped_and_nothing_is_kept(tmp_path):
    """The float64 oracle's vjp failing its finite-difference check used to leave the reference's rows out
    without a word (judge._judge_backend has nothing to judge them against; onnx.reference's float32 Erf did
    it to every Erf and GELU): the node's skipped entries say so now, with the check's numbers (not a finding:
    no backend is at fault), and no judged rows are kept for a replay to read back."""
    import base64

    from backends._runtime.wire import Status
    from irtrace import compare
    from irtrace.ir.spec import node_specs
    from irtrace.replay.cache import ResultCache
    from irtrace.replay.call import bundle_paths
    from irtrace.replay.execute import Answer
    from irtrace.replay.judge import Gathered, _basis, judge_all, unjudged
    from irtrace.replay.plan import ORACLE, REFERENCE, mode_calls
    b = small(tmp_path / "b.irt")
    spec = node_specs(b.model)[0]
    proto = base64.b64encode(b.model.graph.node[0].SerializeToString()).decode()
    call = mode_calls(b, spec, ("vjp",), bundle_paths(b), proto)[0][0]
    ref = Answer(Status.OK, {"status": "ok", "time_s": 0.1}, [np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)])
    got = Gathered(ref, ref.results, None, {REFERENCE: ref}, unverified={"verified": False, "fd": 1.5, "autograd": 2.0})
    cache = ResultCache(b, [REFERENCE, ORACLE])
    assert judge_all(call, got, compare.Policy(), call.off(), cache) == []
    assert unjudged(call, got) == {
        "mode": "vjp", "output": "*", "backend": REFERENCE,
        "reason": "not judged: the float64 oracle's vjp failed its finite-difference check at two step sizes (along "
                  "a random direction, autograd 2, finite differences 1.5); the other backends' vjp results are "
                  "judged against torch's alone"}
    assert unjudged(call, Gathered(ref, ref.results, ref.results, {REFERENCE: ref})) is None
    cache.drain()
    assert cache.judged(call, compare.Policy(), _basis(call, call.off(), False, False, False)) is None


def test_an_entry_is_named_by_its_role_message_and_directions_and_a_changed_call_by_its_own(tmp_path):
    """The entry's name: a hash of the role's key, then the call's message (sorted keys), then which of its
    directions are absent, as entries written by earlier irtrace versions are named (made once per call now);
    a call changed by dataclasses.replace is another call, with its own name."""
    import base64
    import hashlib

    from irtrace.ir.spec import node_specs
    from irtrace.replay.cache import ResultCache
    from irtrace.replay.call import bundle_paths
    from irtrace.replay.plan import ORACLE, REFERENCE, mode_calls
    b = small(tmp_path / "b.irt")
    spec = node_specs(b.model)[0]
    proto = base64.b64encode(b.model.graph.node[0].SerializeToString()).decode()
    call = mode_calls(b, spec, ("vjp2",), bundle_paths(b), proto)[0][0]
    cache = ResultCache(b, [REFERENCE, ORACLE])
    for role in (REFERENCE, ORACLE):
        h = cache.keys[role].copy()
        h.update(json.dumps(call.message(), sort_keys=True, default=str).encode())
        h.update(repr([u is None for u in call.us]).encode())
        assert cache._path(call, role).name == f"{h.hexdigest()[:40]}.safetensors" == cache._path(call, role).name
    assert cache._path(call, REFERENCE) != cache._path(call, ORACLE)
    part = replace(call, part="g" if call.part != "g" else "x")
    assert cache._path(part, REFERENCE) != cache._path(call, REFERENCE)
    assert cache._path(call.with_extra(magnitude=True), ORACLE) != cache._path(call, ORACLE)
    assert hashlib.sha256(part.key_text.encode()).digest() != hashlib.sha256(call.key_text.encode()).digest()


@pytest.mark.parametrize("names", ["torch,oracle", "onnxruntime,oracle", "torch,onnxruntime,oracle"])
def test_a_cached_replay_is_the_computed_one_byte_for_byte(names, tmp_path):
    """Deterministic reports for every backend list, the oracle named in --backend included (whose
    versions must come back from the cache with their keys in the same order). A replay that computes
    everything (--no-cache), one that fills the cache and one served from it write the same bytes."""
    b = small(tmp_path / "b.irt")
    got = {}
    for run, extra in (("computed", ["--no-cache"]), ("cold", []), ("warm", [])):
        assert main(["replay", str(b.path), "--backend", names, "--modes", "fwd", "-o", str(tmp_path / run),
                     *extra]) == 0
        got[run] = (tmp_path / run / "report.json").read_bytes()
    assert got["cold"] == got["computed"] and got["warm"] == got["computed"]


def folder_bytes(folder):
    return sum(p.stat().st_size for p in Path(folder).iterdir())


def test_a_cache_size_keeps_the_folder_under_it_and_the_reports_the_same(tmp_path):
    """--cache-size 1.5x: after each replay BUNDLE.cache/ holds at most 1.5 times the bundle's bytes; a
    replay that finds entries gone computes them again and reports the same bytes."""
    b = small(tmp_path / "b.irt")
    bundle_bytes = folder_bytes(b.path)
    replay_into(b.path, ReplayOptions(backends=("torch",)), tmp_path / "full")
    unlimited = folder_bytes(str(b.path) + ".cache")
    assert unlimited > 1.5 * bundle_bytes  # the limit has work to do (the oracle's float64 answers)
    for k in range(2):
        replay_into(b.path, ReplayOptions(backends=("torch",), cache_size="1.5x"), tmp_path / f"r{k}")
        assert folder_bytes(str(b.path) + ".cache") <= 1.5 * bundle_bytes
        assert (tmp_path / f"r{k}" / "report.json").read_bytes() == (tmp_path / "full" / "report.json").read_bytes()


def test_the_entries_least_recently_used_go_first(tmp_path):
    """trim by hand: an entry unused for the longest goes before a newer one, the largest first among
    equals, what this replay used last; the marker and the use counts stay, and count."""
    import json

    from irtrace.replay.cache import USES, ResultCache
    cache = ResultCache(small(tmp_path / "b.irt"), ("torch",))
    cache.dir.mkdir()
    sizes = {"old-big.safetensors": 400, "old-small.json": 100, "newer.safetensors": 300, "now.safetensors": 500}
    for name, n in sizes.items():
        (cache.dir / name).write_bytes(b"\0" * n)
    (cache.dir / "m.replayed").write_bytes(b"\0" * 50)
    (cache.dir / USES).write_text(json.dumps({"old-big.safetensors": 1, "old-small.json": 1, "newer.safetensors": 2}))
    cache.used = {"now.safetensors"}
    cache.trim(1000)  # 1350 + USES: old-big goes first, then old-small (both replay 1), and that is enough
    left = sorted(p.name for p in cache.dir.iterdir())
    assert left == sorted(["newer.safetensors", "now.safetensors", "m.replayed", USES])
    assert json.loads((cache.dir / USES).read_text()) == {"newer.safetensors": 2, "now.safetensors": 3}
    cache.used = set()
    cache.trim(0)  # nothing else fits: every entry goes, the marker stays
    assert sorted(p.name for p in cache.dir.iterdir()) == sorted(["m.replayed", USES])


def test_a_cache_size_that_is_not_a_size_is_one_line(tmp_path, capsys):
    b = small(tmp_path / "b.irt")
    assert main(["replay", str(b.path), "--backend", "torch", "--cache-size", "lots", "-o", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip() == ("irtrace: error: --cache-size 'lots': give bytes (e.g. 500MB, 2GB) "
                                                "or a multiple of the bundle's size (e.g. 1.5x)")
    assert main(["replay", str(b.path), "--backend", "torch", "--cache-size", "2GB", "--no-cache", "-o",
                 str(tmp_path / "o")]) == 2
    assert "--cache-size goes with the cache" in capsys.readouterr().err


def test_a_replay_keeps_no_answers_past_half_the_free_disk(tmp_path, monkeypatch, caplog):
    """Answers stop being kept once they would take more than half of the disk's free space (as it was at
    the first): logged once, the report the same, the next replay computes what is missing. The cache's
    writer thread lags here (as behind a busy replay): an answer put before the one that did not fit, and
    written after it, is not kept either."""
    import logging
    import os
    import time
    from types import SimpleNamespace

    from irtrace.replay import cache as cache_mod
    b = small(tmp_path / "b.irt")
    replay_into(b.path, ReplayOptions(backends=("torch",), cache=False), tmp_path / "uncached")
    monkeypatch.setattr(cache_mod.os, "statvfs", lambda p: SimpleNamespace(f_bavail=200, f_frsize=1))  # 100 B
    write = cache_mod.ResultCache._write
    monkeypatch.setattr(cache_mod.ResultCache, "_write", lambda self, *a: time.sleep(0.2) or write(self, *a))
    with caplog.at_level(logging.WARNING, logger="irtrace.replay.cache"):
        replay_into(b.path, ReplayOptions(backends=("torch",)), tmp_path / "full-disk")
    said = [r.getMessage() for r in caplog.records if "keeping no more answers" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(f"{b.path}.cache: keeping no more answers in this replay: the next "
                                                 f"is ") and said[0].endswith(
        "bytes and half of the disk's free space is 60 bytes (--cache-size, or --no-cache)")  # 100 less 40 kept
    answers = list(Path(f"{b.path}.cache").glob("*.safetensors"))
    # MatMul's float64 answer fit, as the int32 differences of its bits from torch's (8 of them, 32 bytes) and
    # the one element whose difference does not fit 32 bits in float64 (8 bytes), and torch's answers that
    # are recorded values bit for bit (named: no bytes); no array after the one that did not
    from safetensors import safe_open
    held = []
    for p in answers:
        with safe_open(str(p), "np") as f:
            held += [f.get_tensor(k).nbytes for k in f.keys()]
    assert held == [32, 8], held
    assert (tmp_path / "full-disk" / "report.json").read_bytes() == (tmp_path / "uncached" / "report.json").read_bytes()
    monkeypatch.setattr(cache_mod.os, "statvfs", os.statvfs)
    monkeypatch.setattr(cache_mod.ResultCache, "_write", write)
    replay_into(b.path, ReplayOptions(backends=("torch",)), tmp_path / "again")
    assert (tmp_path / "again" / "report.json").read_bytes() == (tmp_path / "uncached" / "report.json").read_bytes()


def test_an_answer_is_read_back_bit_for_bit_whatever_it_was_kept_as(tmp_path):
    """By hand: MatMul's fwd answer holding its recorded output (kept as the value's name), a float64
    result whose elements are float32s (kept in float32), one that is not, one with a NaN, a -0.0 and an
    infinity among float32s, and None: read back as the same dtypes, shapes and bits."""
    import base64

    from backends._runtime.wire import Status
    from irtrace.ir.spec import node_specs
    from irtrace.replay.cache import ResultCache
    from irtrace.replay.call import bundle_paths
    from irtrace.replay.execute import Answer
    from irtrace.replay.plan import ORACLE, REFERENCE, mode_calls
    from safetensors import safe_open
    b = small(tmp_path / "b.irt")
    spec = node_specs(b.model)[0]
    proto = base64.b64encode(b.model.graph.node[0].SerializeToString()).decode()
    calls, _ = mode_calls(b, spec, ("fwd",), bundle_paths(b), proto)
    recorded = np.array(b.values["m"])
    f32s = np.array([[1.5, -0.0, np.inf, 2.0 ** -149]], np.float64)
    wide = np.array([1.0 / 3.0])
    nan = np.array([np.nan, 1.0])
    cache = ResultCache(b, [REFERENCE, ORACLE])
    cache.put(calls[0], REFERENCE, Answer(Status.OK, {"status": "ok"}, [recorded.copy()]))
    cache.put(calls[0], ORACLE, Answer(Status.OK, {"status": "ok", "extra": {"magnitude": [4]}}, [f32s],
                                       {"magnitude": [[wide, nan, None, np.float64(0.25)]]}))
    stored = {}
    for p in Path(f"{b.path}.cache").glob("*.safetensors"):
        with safe_open(str(p), "np") as f:
            stored.update({f"{p.name}:{k}": f.get_tensor(k).dtype for k in f.keys()})
    assert sorted(str(d) for d in stored.values()) == ["float32", "float32", "float64", "float64"]  # no 'm' copy
    ref, oracle = ResultCache(b, [REFERENCE, ORACLE]).get(calls[0], REFERENCE), \
        ResultCache(b, [REFERENCE, ORACLE]).get(calls[0], ORACLE)
    assert ref.results[0].dtype == np.float32 and ref.results[0].tobytes() == recorded.tobytes()
    got = oracle.results + oracle.extra["magnitude"][0]
    for want, have in zip([f32s, wide, nan, None, np.float64(0.25)], got):
        if want is None:
            assert have is None
            continue
        assert have.dtype == np.float64 and have.shape == np.shape(want) and have.tobytes() == np.asarray(want).tobytes()


def test_an_entry_verified_before_is_read_in_one_go_the_same_bits_and_an_edit_is_verified_again(tmp_path, monkeypatch):
    """An entry whose every byte a replay verified (and whose identity it remembered) is read whole and parsed
    without safetensors' checks: the same dtypes, shapes and bits as the verifying read (a NaN, -0.0, a 0-d and
    an empty result, a bfloat16 extra); edited in place with its modification time put back, its change time
    moved: read the slow way, its signature fails, it is computed again (None)."""
    import base64
    import os

    import ml_dtypes

    from backends._runtime.wire import Status
    from irtrace.ir.spec import node_specs
    from irtrace.replay import cache as cache_module
    from irtrace.replay.cache import ResultCache
    from irtrace.replay.call import bundle_paths
    from irtrace.replay.execute import Answer
    from irtrace.replay.plan import ORACLE, REFERENCE, mode_calls
    monkeypatch.setattr(cache_module, "_SETTLED_NS", 0)  # an entry just written counts as settled
    b = small(tmp_path / "b.irt")
    spec = node_specs(b.model)[0]
    proto = base64.b64encode(b.model.graph.node[0].SerializeToString()).decode()
    call = mode_calls(b, spec, ("fwd",), bundle_paths(b), proto)[0][0]
    results = [np.array([[np.nan, -0.0, 1.0 / 3.0, np.inf]])]
    extra = [np.float64(0.25), np.zeros((0, 3), np.float32), np.array([1.5, -2.0], ml_dtypes.bfloat16)]
    ResultCache(b, [REFERENCE, ORACLE]).put(call, ORACLE, Answer(Status.OK, {"status": "ok", "extra": {"m": [3]}},
                                                                 results, {"m": [extra]}))
    fast = []
    from irtrace.replay import entry
    read_known = entry.read_known
    monkeypatch.setattr(entry, "read_known", lambda *a: fast.append(read_known(*a)) or fast[-1])
    first = ResultCache(b, [REFERENCE, ORACLE])
    slow = first.get(call, ORACLE)
    first._keep_index()  # as a replay's end does: this entry verified, by its identity
    again = ResultCache(b, [REFERENCE, ORACLE]).get(call, ORACLE)
    assert [k is not None for k in fast] == [False, True]  # verified the first time, read in one go the second
    for want, a, c in zip(results + extra, slow.results + slow.extra["m"][0], again.results + again.extra["m"][0]):
        want = np.asarray(want)
        assert a.dtype == c.dtype == want.dtype and a.shape == c.shape == want.shape
        assert a.tobytes() == c.tobytes() == want.tobytes()
    entry = next(Path(f"{b.path}.cache").glob("*.safetensors"))
    import time
    time.sleep(0.05)  # past the clock tick it was written in (the 2 s a real replay waits, _SETTLED_NS, is 0 here)
    st, data = entry.stat(), bytearray(entry.read_bytes())
    data[-1] ^= 1
    entry.write_bytes(bytes(data))
    os.utime(entry, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert entry.stat().st_size == st.st_size and entry.stat().st_mtime_ns == st.st_mtime_ns
    assert ResultCache(b, [REFERENCE, ORACLE]).get(call, ORACLE) is None and fast[-1] is None


def _vjp_call(b):
    """The vjp call of bundle `b`'s first node."""
    import base64

    from irtrace.ir.spec import node_specs
    from irtrace.replay.call import bundle_paths
    from irtrace.replay.plan import mode_calls
    spec = node_specs(b.model)[0]
    proto = base64.b64encode(b.model.graph.node[0].SerializeToString()).decode()
    return mode_calls(b, spec, ("vjp",), bundle_paths(b), proto)[0][0]


def test_the_oracle_is_kept_as_its_bits_less_the_reference_and_read_back_bit_for_bit(tmp_path):
    """By hand: float64 results within 2^31 float64 steps of torch's float32 results are kept as the int32
    differences of their bits (half the bytes), the elements past that (a NaN where torch has a number, an
    infinity, a sign, 1.0 against 1e-30) in float64 beside them, and read back as the same bits, a 0-d result
    too; a result with half of its elements past that or more is kept in float64 whole. The oracle's
    entry names the reference's results by a digest of them: torch's entry written again with the same results
    (computed again after it was torn: another reply, its timings) still serves it; written with another
    answer (another torch), the oracle's is left unread (computed again), never decoded against it."""
    from backends._runtime.wire import Status
    from irtrace.replay.cache import ResultCache
    from irtrace.replay.execute import Answer
    from irtrace.replay.plan import ORACLE, REFERENCE
    from safetensors import safe_open
    b = small(tmp_path / "b.irt")
    call = _vjp_call(b)
    r = np.concatenate([[1.0, -2.5, 3.0, 0.0, 1e-30], np.arange(27.0) + 7]).astype(np.float32)
    o = r.astype(np.float64) * (1 + 2.0 ** -30)  # torch within a float32 ULP: 2^22 float64 steps
    o[[1, 3, 4]] = [np.nan, -0.0, 1.0]  # apart: a NaN for a number, -0.0 for 0.0 (the sign bit), 1.0 for 1e-30
    o[5] = -o[5]  # apart: the sign
    scalar_r, scalar_o = np.array(0.1, np.float32), np.array(0.1)
    most = np.full(8, 5.0 + 1e-12)  # all apart: float64 whole
    r2 = np.full(8, 1e-20, np.float32)
    cache = ResultCache(b, [REFERENCE, ORACLE])
    cache.put(call, REFERENCE, Answer(Status.OK, {"status": "ok"}, [r, scalar_r, r2]))
    cache.put(call, ORACLE, Answer(Status.OK, {"status": "ok"}, [o, scalar_o, most]))
    (entry,) = [p for p in Path(f"{b.path}.cache").glob("*.safetensors") if "oracle" in p.read_bytes()[:4096].decode(
        "latin-1")]
    with safe_open(str(entry), "np") as f:
        kept = {k: (str(f.get_tensor(k).dtype), f.get_tensor(k).shape) for k in f.keys()}
    # o's 32 differences, the scalar's, `most` whole, then o's four elements apart
    assert kept == {"0": ("int32", (32,)), "1": ("int32", ()), "2": ("float64", (8,)), "3": ("float64", (4,))}, kept
    got = ResultCache(b, [REFERENCE, ORACLE])
    assert got.get(call, REFERENCE) is not None
    back = got.get(call, ORACLE).results
    for want, have in zip([o, scalar_o, most], back):
        assert have.dtype == np.float64 and have.shape == want.shape and have.tobytes() == want.tobytes()
    fresh = ResultCache(b, [REFERENCE, ORACLE])  # the oracle read first: the reference is read for it
    assert fresh.get(call, ORACLE).results[0].tobytes() == o.tobytes()
    again = ResultCache(b, [REFERENCE, ORACLE])
    again.put(call, REFERENCE, Answer(Status.OK, {"status": "ok", "time_s": 0.5}, [r.copy(), scalar_r, r2]))
    assert ResultCache(b, [REFERENCE, ORACLE]).get(call, ORACLE).results[0].tobytes() == o.tobytes()
    other = ResultCache(b, [REFERENCE, ORACLE])
    other.put(call, REFERENCE, Answer(Status.OK, {"status": "ok"}, [r * 2, scalar_r, r2]))
    assert ResultCache(b, [REFERENCE, ORACLE]).get(call, ORACLE) is None


def test_an_oracle_result_that_is_the_references_is_named_and_read_back_bit_for_bit(tmp_path):
    """By hand: an oracle result whose every element is the reference's float32 result (a Relu's, a MaxPool's,
    their gradients') is not written at all, only named ("same"); one that is a float32 but not the
    reference's is written in float32, and one beside them as differences. Read back: the same bits
    (-0.0, infinities, a subnormal, a 0-d result), the reference read for it when the oracle is read first;
    with the reference's entry written with another answer the oracle's is computed again, never widened from it."""
    from backends._runtime.wire import Status
    from irtrace.replay.cache import ResultCache
    from irtrace.replay.execute import Answer
    from irtrace.replay.plan import ORACLE, REFERENCE
    from safetensors import safe_open
    b = small(tmp_path / "b.irt")
    call = _vjp_call(b)
    r = np.array([1.0, -0.0, np.inf, -np.inf, 3.5e-42, 2.0 ** 100], np.float32)  # a subnormal too
    o = r.astype(np.float64)                                   # the same numbers: named
    scalar_r, scalar_o = np.array(0.25, np.float32), np.array(0.25)  # 0-d: named
    r2, o2 = np.full(3, 1.5, np.float32), np.full(3, 2.5)      # a float32, not the reference's: float32
    r3 = np.full(4, 0.1, np.float32)
    o3 = r3.astype(np.float64) * (1 + 2.0 ** -30)              # not a float32: differences
    cache = ResultCache(b, [REFERENCE, ORACLE])
    cache.put(call, REFERENCE, Answer(Status.OK, {"status": "ok"}, [r, scalar_r, r2, r3]))
    cache.put(call, ORACLE, Answer(Status.OK, {"status": "ok"}, [o, scalar_o, o2, o3]))
    (entry,) = [p for p in Path(f"{b.path}.cache").glob("*.safetensors") if "oracle" in p.read_bytes()[:4096].decode(
        "latin-1")]
    with safe_open(str(entry), "np") as f:
        kept = {k: (str(f.get_tensor(k).dtype), f.get_tensor(k).shape) for k in f.keys()}
        meta = json.loads(f.metadata()["irtrace"])
    assert kept == {"2": ("float32", (3,)), "3": ("int32", (4,))}, kept
    assert meta["same"] == [0, 1] and meta["narrowed"] == [2] and list(meta["delta"]) == ["3"]
    for fresh in (True, False):  # the oracle read first (the reference read for it), or after the reference
        got = ResultCache(b, [REFERENCE, ORACLE])
        if not fresh:
            assert got.get(call, REFERENCE) is not None
        back = got.get(call, ORACLE).results
        for want, have in zip([o, scalar_o, o2, o3], back):
            assert have.dtype == np.float64 and have.shape == want.shape and have.tobytes() == want.tobytes()
    other = ResultCache(b, [REFERENCE, ORACLE])
    other.put(call, REFERENCE, Answer(Status.OK, {"status": "ok"}, [r * 2, scalar_r, r2, r3]))
    assert ResultCache(b, [REFERENCE, ORACLE]).get(call, ORACLE) is None


def test_entries_written_behind_are_served_while_pending_and_bounded(tmp_path, monkeypatch):
    """behind=True (a replay's cache): put returns before the entry is written; get serves the answer
    put meanwhile; at most BEHIND bytes wait to be written (the next put waits); drain and close leave
    every entry on disk, read back as put."""
    import base64
    import threading

    from backends._runtime.wire import Status
    from irtrace.ir.spec import node_specs
    from irtrace.replay import cache as cache_mod
    from irtrace.replay.cache import ResultCache
    from irtrace.replay.call import bundle_paths
    from irtrace.replay.execute import Answer
    from irtrace.replay.plan import ORACLE, REFERENCE, mode_calls
    b = small(tmp_path / "b.irt")
    spec = node_specs(b.model)[0]
    proto = base64.b64encode(b.model.graph.node[0].SerializeToString()).decode()
    (fwd,), _ = mode_calls(b, spec, ("fwd",), bundle_paths(b), proto)
    (vjp,), _ = mode_calls(b, spec, ("vjp",), bundle_paths(b), proto)
    gate, real = threading.Event(), ResultCache._put
    monkeypatch.setattr(ResultCache, "_put", lambda self, *a: (gate.wait(10), real(self, *a)))
    monkeypatch.setattr(cache_mod, "BEHIND", 100)  # bytes: one 64-byte answer waits, a second must wait for it
    cache = ResultCache(b, [REFERENCE, ORACLE], behind=True)
    first = Answer(Status.OK, {"status": "ok"}, [np.arange(8, dtype=np.float64).reshape(2, 4) / 3])
    cache.put(fwd, ORACLE, first)
    assert cache.get(fwd, ORACLE) is first and not list(Path(f"{b.path}.cache").glob("*.safetensors"))
    second = Answer(Status.OK, {"status": "ok"}, [np.ones((2, 3)) / 3, np.ones((3, 4)) / 7])
    done = threading.Event()
    threading.Thread(target=lambda: (cache.put(vjp, ORACLE, second), done.set()), daemon=True).start()
    assert not done.wait(0.5)  # 64 + 96 bytes > 100: it waits for the first to be written
    gate.set()
    assert done.wait(10)
    cache.close()
    again = ResultCache(b, [REFERENCE, ORACLE])
    for call, answer in ((fwd, first), (vjp, second)):
        got = again.get(call, ORACLE)
        assert got is not answer and [a.tobytes() for a in got.results] == [a.tobytes() for a in answer.results]


def test_entries_kept_against_an_older_irtraces_digest_still_serve(tmp_path, started, monkeypatch):
    """An oracle entry kept as differences from the reference's results names their digest; irtrace's digest was
    blake2b and is SHA-256 now. A cache written with the old digest serves a replay whole, and where the reference
    is computed again (a torn entry) the oracle's entry kept against the old digest is computed again, the
    report the same."""
    import hashlib

    from irtrace.replay import entry

    digest = entry.digest

    def blake2b_digest(results):  # the digest as irtrace wrote it before
        return digest(results, hashlib.blake2b(digest_size=16))
    b = small(tmp_path / "b.irt")
    with monkeypatch.context() as m:
        m.setattr(entry, "digest", blake2b_digest)
        cold = replay(b, tmp_path / "cold")
    assert entry.digest([np.zeros(2, np.float32)]) != blake2b_digest([np.zeros(2, np.float32)])
    started.clear()
    assert replay(b, tmp_path / "warm") == cold
    assert started == ["onnxruntime"]
    from safetensors import safe_open
    cache = Path(str(b.path) + ".cache")
    metas = {}
    for p in cache.glob("*.safetensors"):
        with safe_open(str(p), "np") as f:
            metas[p] = json.loads(f.metadata()["irtrace"])
    bases = {meta["base"] for meta in metas.values() if meta.get("base")}
    torn = next(p for p, meta in metas.items() if meta.get("digest") in bases)
    torn.write_bytes(torn.read_bytes()[:40])
    started.clear()
    assert replay(b, tmp_path / "torn") == cold
    assert sorted(started) == ["onnxruntime", "oracle", "torch"]


def test_small_answers_are_packed_and_served_bit_for_bit_only_while_their_files_are_unchanged(tmp_path, monkeypatch):
    """A replay's end packs the small answers it verified (replay/pack.py); the next replay reads them from the
    pack, no entry file read: the same dtypes, shapes and bits (a NaN, -0.0, a 0-d and an empty result, a
    bfloat16 extra) and the same report, byte for byte, as a replay that computed everything. A pack that does
    not verify is not read (the files serve). An entry edited in place (its modification time put back) is
    not served from the pack: read the slow way, its signature fails, it is computed again. With --cache-size
    there is no pack."""
    import base64
    import os

    import ml_dtypes

    from backends._runtime.wire import Status
    from irtrace.ir.spec import node_specs
    from irtrace.replay import cache as cache_module
    from irtrace.replay.cache import ResultCache
    from irtrace.replay.call import bundle_paths
    from irtrace.replay.execute import Answer
    from irtrace.replay.plan import ORACLE, REFERENCE, mode_calls
    monkeypatch.setattr(cache_module, "_SETTLED_NS", 0)  # an entry just written counts as settled
    reads = []
    from irtrace.replay import entry
    read_known = entry.read_known
    monkeypatch.setattr(entry, "read_known", lambda *a: reads.append(a[0]) or read_known(*a))
    indexed = []  # the index of verified answers, read: only where an answer is not served by the pack
    read_index = ResultCache._read_index
    monkeypatch.setattr(ResultCache, "_read_index", lambda self: indexed.append(1) or read_index(self))
    b = small(tmp_path / "b.irt")
    reports = {}
    for run, extra in (("computed", ["--no-cache"]), ("cold", []), ("verified", []), ("packed", [])):
        reads.clear()
        indexed.clear()
        assert main(["replay", str(b.path), "--backend", "torch,onnxruntime", "-o", str(tmp_path / run), *extra]) == 0
        reports[run] = (tmp_path / run / "report.json").read_bytes()
        packs = list(Path(f"{b.path}.cache").glob("*.pack"))
        assert len(packs) == (run in ("verified", "packed"))  # packed at the end of the replay that verified them
        # read by the replay that verified entry files, not by the one the pack serves
        if run in ("verified", "packed"):
            assert bool(indexed) == (run == "verified"), run
    assert reads == []  # served from the pack: not one entry read from its file
    assert len(set(reports.values())) == 1
    assert main(["replay", str(b.path), "--backend", "torch", "-o", str(tmp_path / "sized"), "--cache-size",
                 "100MB"]) == 0
    assert not list(Path(f"{b.path}.cache").glob("*.pack"))

    spec = node_specs(b.model)[0]
    proto = base64.b64encode(b.model.graph.node[0].SerializeToString()).decode()
    # an entry of its own
    call = replace(mode_calls(b, spec, ("fwd",), bundle_paths(b), proto)[0][0], extra={"pack_test": True})
    results = [np.array([[np.nan, -0.0, 1.0 / 3.0, np.inf]])]
    extra = [np.float64(0.25), np.zeros((0, 3), np.float32), np.array([1.5, -2.0], ml_dtypes.bfloat16)]
    ResultCache(b, [REFERENCE, ORACLE]).put(call, ORACLE, Answer(Status.OK, {"status": "ok", "extra": {"m": [3]}},
                                                                 results, {"m": [extra]}))
    first = ResultCache(b, [REFERENCE, ORACLE])
    slow = first.get(call, ORACLE)
    first.replayed({})
    reads.clear()
    again = ResultCache(b, [REFERENCE, ORACLE]).get(call, ORACLE)
    assert reads == []
    for want, a, c in zip(results + extra, slow.results + slow.extra["m"][0], again.results + again.extra["m"][0]):
        want = np.asarray(want)
        assert a.dtype == c.dtype == want.dtype and a.shape == c.shape == want.shape
        assert a.tobytes() == c.tobytes() == want.tobytes()
    pack = next(Path(f"{b.path}.cache").glob("*.pack"))
    good = pack.read_bytes()
    pack.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))  # its data changed: the pack is not read
    assert ResultCache(b, [REFERENCE, ORACLE]).get(call, ORACLE) is not None and len(reads) == 1
    pack.write_bytes(good)
    entry = Path(reads[0])
    import time
    time.sleep(0.05)  # past the clock tick it was written in
    st, data = entry.stat(), bytearray(entry.read_bytes())
    data[-1] ^= 1
    entry.write_bytes(bytes(data))
    os.utime(entry, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert ResultCache(b, [REFERENCE, ORACLE]).get(call, ORACLE) is None


def test_a_replay_that_writes_removes_the_entries_of_codes_before_the_last_two(tmp_path, started, monkeypatch):
    """Each irtrace, torch or numpy version (each edit of backends/) is a code of its own, whose entries no other
    reads: a replay that writes entries keeps its code's and the one replayed last before it, and removes those of
    every code before (a fourth version no longer leaves the folder three all-modes replays larger). A code whose
    marker has no listing (an older irtrace's), a file that is no entry, and a name a listing was edited to hold
    stay. The reports are the same bytes throughout, and the code kept answers its replay from the cache."""
    import json
    import time

    from irtrace.replay import cache as cache_module
    b = small(tmp_path / "b.irt")
    folder = Path(f"{b.path}.cache")
    files = {}

    def replay_as(code, out):
        monkeypatch.setattr(cache_module, "_code_key", lambda: code)
        report = replay(b, tmp_path / out)
        time.sleep(0.02)  # the next code's marker is newer
        return report
    monkeypatch.setattr(cache_module, "_SETTLED_NS", 0)  # an entry just written counts as settled
    first = replay_as("A", "a")
    listing = next(folder.glob("*.entries"))
    listed = json.loads(listing.read_text())
    listing.write_text(json.dumps(listed[1:]))  # as an interrupted replay leaves it: an entry it wrote not listed
    assert replay_as("A", "a2") == first  # verifies the entries it reads from their files: lists them
    assert json.loads(listing.read_text()) == listed
    files["A"] = {p.name for p in folder.iterdir()}
    old = folder / "0123456789abcdef0123456789abcdef01234567.replayed"  # an older irtrace's marker: no listing
    old.write_text("x")
    theirs = folder / ("e" * 40 + ".replayed")  # another user's code: its marker is not signed by this key
    theirs.write_text("x")
    theirs.with_suffix(".entries").write_text(json.dumps(["e" * 40 + ".safetensors"]))
    (folder / ("e" * 40 + ".safetensors")).write_bytes(b"theirs")
    (folder / "notes.txt").write_text("mine")
    json.dump(sorted(json.loads(listing.read_text())) + ["notes.txt", "../b.irt/graph.onnx"], listing.open("w"))
    assert replay_as("B", "b") == first
    files["B"] = {p.name for p in folder.iterdir()} - files["A"]
    assert files["A"] <= {p.name for p in folder.iterdir()}  # A is the code before B: kept
    assert replay_as("C", "c") == first
    left = {p.name for p in folder.iterdir()}
    assert not left & files["A"]  # its answers, judged rows, marker and listing
    assert files["B"] <= left and {"notes.txt", old.name} <= left and (b.path / "graph.onnx").exists()
    assert {theirs.name, "e" * 40 + ".entries", "e" * 40 + ".safetensors"} <= left
    started.clear()
    assert replay_as("B", "b2") == first  # the code kept: its answers still serve
    assert started == ["onnxruntime"]
    assert {p.name for p in folder.iterdir()} >= files["B"]


def test_an_older_code_that_cannot_be_removed_stays_whole_and_the_replay_ends(tmp_path, monkeypatch):
    """A file of an older code this user may not remove: that code stays (its listing too, for a later replay
    to finish), the replay's end goes on; once it can be removed, it goes."""
    import json
    import os

    from irtrace.replay.cache import ResultCache, _signed
    cache = ResultCache(small(tmp_path / "b.irt"), ("torch",))
    cache.dir.mkdir()
    for k, (code, name) in enumerate((("1" * 40, "a" * 40), ("2" * 40, "b" * 40))):  # "1" replayed before "2"
        marker = cache.dir / f"{code}.replayed"
        marker.write_text(_signed(marker.name, "{}"))
        os.utime(marker, ns=(10**9 * (k + 1), 10**9 * (k + 1)))
        (cache.dir / f"{code}.entries").write_text(json.dumps([f"{name}.safetensors"]))
        (cache.dir / f"{name}.safetensors").write_bytes(b"x")
    (cache.dir / ("c" * 40 + ".safetensors")).write_bytes(b"mine")
    cache.used = {"c" * 40 + ".safetensors"}
    real = Path.unlink

    def unlink(self, missing_ok=False):
        if self.name == "a" * 40 + ".safetensors":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, missing_ok=missing_ok)
    monkeypatch.setattr(Path, "unlink", unlink)
    cache._list_and_evict()
    everything = {"1" * 40 + ".replayed", "1" * 40 + ".entries", "a" * 40 + ".safetensors",
                  "2" * 40 + ".replayed", "2" * 40 + ".entries", "b" * 40 + ".safetensors",
                  "c" * 40 + ".safetensors", cache.listing.name}
    assert {p.name for p in cache.dir.iterdir()} == everything
    monkeypatch.setattr(Path, "unlink", real)
    cache._list_and_evict()
    assert {p.name for p in cache.dir.iterdir()} == everything - {"1" * 40 + ".replayed", "1" * 40 + ".entries",
                                                                  "a" * 40 + ".safetensors"}
