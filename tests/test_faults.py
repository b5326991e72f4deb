"""Fault injection: each worker kind (the reference, the float64 oracle, a backend under
test) with a real segfault, a SIGKILL mid-call and while starting, a hang, a MemoryError, garbage on
its output stream and a failing import. The node and backend get CRASH / TIMEOUT / ERROR with the
reason, the worker is restarted (counted in report.json), every other node completes with its right
verdict, and no process is left behind. A worker that cannot start at all fails its calls; the rest
of the replay completes.
"""
import json
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from irtrace.export.onnx_bundle import bundle_from_onnx
from irtrace.replay import ReplayOptions
from irtrace.report.folder import replay_into
from irtrace.replay import backends

HERE = Path(__file__).parent
CHAIN = ["Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Softplus", "Sin"]
OP_FAULTS = {"Sigmoid": "segv", "Tanh": "kill", "Exp": "hang", "Neg": "memory", "Abs": "garbage",
             "Softplus": "import"}
EXPECTED = {"segv": ("CRASH", "killed by signal SIGSEGV"), "kill": ("CRASH", "killed by signal SIGKILL"),
            "hang": ("TIMEOUT", "no answer within 3 s"), "memory": ("ERROR", "MemoryError: planted"),
            "garbage": ("CRASH", "not a frame"),
            "import": ("ERROR", "No module named 'irtrace_planted_missing_module'")}
TIMEOUT = 3.0


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """x -> Relu -> Sigmoid -> ... -> Sin: one node per fault, and two that stay clean."""
    names = [f"v{k}" for k in range(len(CHAIN) + 1)]
    nodes = [helper.make_node(op, [names[k]], [names[k + 1]], name=f"{op.lower()}") for k, op in enumerate(CHAIN)]
    x = helper.make_tensor_value_info("v0", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info(names[-1], TensorProto.FLOAT, None)
    m = helper.make_model(helper.make_graph(nodes, "chain", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    x0 = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    return bundle_from_onnx(m, {"v0": x0}, tmp_path_factory.mktemp("chain") / "chain.irt")


@pytest.fixture
def faulty(tmp_path, cold_workers):
    """faulty(role_backend, faults, name=None): re-register a backend (by name) with its worker wrapped
    in tests/faulty_backend.py; every registration is restored afterwards. Workers are not kept warm: a
    replay leaves no worker behind (leftover_workers)."""
    saved = dict(backends.BACKENDS)

    def make(base, faults, name=None):
        info = backends.get(base)
        env = {**info.env, "IRTRACE_FAULT_BASE": info.worker, "IRTRACE_FAULT": faults,
               "IRTRACE_FAULT_ONCE": str(tmp_path / f"{name or base}.once"), "IRTRACE_FAULTS_TEST": str(tmp_path)}
        return backends.register(replace(info, name=name or base, worker="faulty_backend",
                                          extra_path=tuple(info.extra_path) + (HERE,), env=env))
    yield make
    backends.BACKENDS.clear()
    backends.BACKENDS.update(saved)


def leftover_workers(tag):
    """Processes still alive whose environment carries this test's tag."""
    alive = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if f"IRTRACE_FAULTS_TEST={tag}".encode() in Path(f"/proc/{pid}/environ").read_bytes():
                    alive.append(int(pid))
            except OSError:
                pass
    return alive


def rows(report):
    return {(n["op_type"], r["backend"], r["mode"], r["output"]): r for n in report["nodes"] for r in n["results"]}


def check_faults(report, backend, mode):
    got = rows(report)
    for op, kind in OP_FAULTS.items():
        verdict, words = EXPECTED[kind]
        r = got[(op, backend, mode, "*")]
        assert r["verdict"] == verdict and words in r["message"], (op, kind, r)


@pytest.mark.parametrize("role", ["under-test", "reference", "oracle"])
def test_every_fault_is_its_node_and_backend_only(role, chain, faulty, tmp_path):
    faults = ",".join(f"{k}:{op}:{'fwd' if role == 'under-test' else 'vjp'}" for op, k in OP_FAULTS.items())
    if role == "under-test":   # onnxruntime, wrapped: forward only
        faulty("onnxruntime", faults + ",startkill", name="faulty")
        names, modes, where = "torch,faulty", "fwd", ("faulty", "fwd")
    elif role == "reference":
        faulty("torch", faults + ",startkill")
        names, modes, where = "torch,onnxruntime", "fwd,vjp", ("torch", "vjp")
    else:
        faulty("oracle", faults + ",startkill")
        names, modes, where = "torch,onnxruntime", "fwd,vjp", ("oracle", "vjp")
    # nothing cached: the reference's and the oracle's calls go in batches (a faulty role's crashes, kills, hangs and
    # garbage come mid-batch), whichever test replayed the chain before
    replayed = replay_into(chain.path, ReplayOptions.parse(names, modes, timeout=TIMEOUT, cache=False),
                           out=tmp_path / "r")
    report, out = replayed.json, replayed.out
    check_faults(report, *where)
    if role == "reference":  # without the reference, nothing is compared for that node and mode
        assert all(r["message"].startswith("reference failed: ") for (op, b, m, o), r in rows(report).items()
                   if op in OP_FAULTS and m == "vjp")
    if role == "oracle":  # the dead oracle is a row; the backends are still judged (by fixed tolerances)
        got = rows(report)
        assert all("the float64 oracle failed: " in got[(op, "oracle", "vjp", "*")]["message"] for op in OP_FAULTS)
    # every other result is what a clean run gives: the clean nodes, and every fault-free mode
    clean = {k: v["verdict"] for k, v in rows(report).items() if k[0] not in OP_FAULTS or k[2] != where[1]}
    assert clean and set(clean.values()) <= {"MATCH", "NOISE"}, clean
    assert {n["name"] for n in report["nodes"]} == {op.lower() for op in CHAIN}
    # one restart per crash, kill, hang and garbage, and one for the start-up kill
    assert report["restarts"] == {**{b: 0 for b in ("torch", "oracle", "onnxruntime", "faulty")
                                     if b in report["restarts"]}, where[0]: 5}
    assert leftover_workers(str(tmp_path)) == []
    assert json.loads((out / "report.json").read_text())["summary"]["nodes"] == len(CHAIN)


@pytest.mark.parametrize("role", ["under-test", "reference", "oracle"])
def test_a_worker_that_cannot_start_fails_its_calls_and_the_rest_completes(role, chain, faulty, tmp_path):
    base = {"under-test": "onnxruntime", "reference": "torch", "oracle": "oracle"}[role]
    info = faulty(base, "startimport", name="faulty" if role == "under-test" else None)
    names = "torch,faulty" if role == "under-test" else "torch,onnxruntime"
    report = replay_into(chain.path, ReplayOptions.parse(names, "fwd", timeout=TIMEOUT), out=tmp_path / "r").json
    dead = [r for (op, b, m, o), r in rows(report).items() if b == info.name or r["message"].startswith("reference")]
    assert len(dead) == len(CHAIN) and {r["verdict"] for r in dead} == {"ERROR"}
    assert all(f"backend {info.name!r} failed to start: worker exited with code 1" in r["message"] and
               "No module named 'irtrace_planted_missing_framework'" in r["message"] and
               "(twice; not restarted again)" in r["message"] for r in dead), dead[0]["message"]
    others = [r["verdict"] for r in rows(report).values() if r not in dead]
    assert set(others) <= {"MATCH", "NOISE"} and (others or role == "reference")
    assert report["restarts"][info.name] == 1  # tried twice, then left dead
    assert leftover_workers(str(tmp_path)) == []


def test_a_batch_that_crashes_in_one_go_is_run_node_by_node(chain, faulty, tmp_path):
    """onnxruntime computes a batch's forward in one session (run_many); a segfault there loses the
    batch, not a verdict: every node is run alone, and judged as a clean run judges it."""
    faulty("onnxruntime", "segv:Sigmoid:many", name="faulty")
    report = replay_into(chain.path, ReplayOptions.parse("torch,faulty", "fwd", timeout=TIMEOUT), out=tmp_path / "r").json
    got = {op: r["verdict"] for (op, b, m, o), r in rows(report).items() if b == "faulty"}
    assert sorted(got) == sorted(CHAIN) and set(got.values()) <= {"MATCH", "NOISE"}, got
    assert report["restarts"]["faulty"] == 0  # the batch's crash is not a node's
    assert leftover_workers(str(tmp_path)) == []


@pytest.mark.parametrize("under_test", ["onnxruntime", "planted-crash"])
def test_batched_and_one_call_at_a_time_replays_write_the_same_report(chain, under_test):
    """The same verdicts, metrics and messages, whether the calls go one at a time or in batches: for
    onnxruntime's one-session forward, and for a backend computing fwd and vjp whose Sigmoid segfaults
    in the middle of a batch (the nodes after it are run alone)."""
    import planted_backend
    from irtrace import store
    from irtrace.replay import api
    if under_test.startswith("planted"):
        planted_backend.register("crash")
    bundle = store.load(chain.path)
    runs = [api.run(bundle, api.ReplayOptions(backends=["torch", under_test], modes=["fwd", "vjp"], batch=batch,
                                              timeout=TIMEOUT)) for batch in (False, True)]

    def verdicts(outcome):  # everything but the timings
        return [{k: v for k, v in r.to_json().items() if "time" not in k} for n in outcome.replay.nodes
                for r in n.results]
    one, many = (verdicts(r) for r in runs)
    tested = [r for r in one if r["backend"] == under_test]
    assert len(tested) == len(CHAIN) * (1 if under_test == "onnxruntime" else 2)
    if under_test.startswith("planted"):
        assert {r["verdict"] for r in tested if r["node"] == "sigmoid"} == {"CRASH"}
    assert one == many
    assert runs[0].replay.restarts == runs[1].replay.restarts


# a chain long enough for several batches, Sigmoid (the planted segfault) in the third
LONG = ["Relu", "Sin", "Tanh", "Neg", "Abs", "Cos", "Sin", "Tanh", "Neg", "Sigmoid", "Abs", "Relu", "Sin", "Cos",
        "Tanh", "Neg"]


@pytest.fixture(scope="module")
def long_chain(tmp_path_factory):
    names = [f"v{k}" for k in range(len(LONG) + 1)]
    nodes = [helper.make_node(op, [names[k]], [names[k + 1]], name=f"n{k}_{op.lower()}") for k, op in enumerate(LONG)]
    x = helper.make_tensor_value_info("v0", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info(names[-1], TensorProto.FLOAT, None)
    m = helper.make_model(helper.make_graph(nodes, "long", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    x0 = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    return bundle_from_onnx(m, {"v0": x0}, tmp_path_factory.mktemp("long") / "long.irt")


@pytest.mark.parametrize("batch", [True, False])
def test_a_worker_that_dies_with_batches_in_flight_fails_its_own_node_only(batch, long_chain, faulty, tmp_path,
                                                                          monkeypatch):
    """Batches of 4 calls; the backend under test (torch whose Sigmoid segfaults) races ahead
    while the reference is slowed down (an injected delay), so it dies with the batch behind it already
    sent, and the next batch goes to a restarted process. Every reply is matched to its request by id:
    exactly one CRASH (the Sigmoid node), every other verdict what a clean run gives, batched or not."""
    import planted_backend
    from irtrace import store
    from irtrace.replay import api, batch as batching
    monkeypatch.setattr(batching, "MAX_CALLS", 4)
    planted_backend.register("crash")
    faulty("torch", "slow:*")
    monkeypatch.setenv("IRTRACE_FAULT_DELAY", "0.1")
    outcome = api.run(store.load(long_chain.path), api.ReplayOptions(
        backends=["torch", "planted-crash"], modes=["fwd"], batch=batch, timeout=TIMEOUT, cache=False,
        verify_workarounds=False))
    got = {(n.name, r.backend): r for n in outcome.replay.nodes for r in n.results}
    crashed = {k: r.message for k, r in got.items() if r.verdict == "CRASH"}
    assert crashed.keys() == {("n9_sigmoid", "planted-crash")}, crashed
    assert "killed by signal SIGSEGV" in crashed[("n9_sigmoid", "planted-crash")]
    others = {k: r.verdict for k, r in got.items() if k not in crashed}
    assert len(others) == 2 * len(LONG) - 1 and set(others.values()) <= {"MATCH", "NOISE"}, others
    assert outcome.replay.restarts["planted-crash"] == 1
    assert leftover_workers(str(tmp_path)) == []


def test_a_worker_that_hangs_at_start_up_is_waited_on_as_the_timeout_says(chain, faulty, tmp_path, monkeypatch,
                                                                          capsys):
    """The wait for a worker's hello is --timeout (not a fixed time whatever --timeout says), but at least
    START_MIN_S (a framework's import; --help says so). With the minimum
    lowered, a worker hanging at start-up is killed after the 3 s timeout and started again."""
    from irtrace.cli import build_parser
    from irtrace.replay import worker
    assert worker.start_wait(5) == worker.START_MIN_S == 30.0 and worker.start_wait(100.0) == 100.0
    with pytest.raises(SystemExit):
        build_parser().parse_args(["replay", "--help"])
    assert "at least 30 s" in " ".join(capsys.readouterr().out.split())
    monkeypatch.setattr(worker, "START_MIN_S", 1.0)
    faulty("onnxruntime", "starthang", name="faulty")
    t = time.monotonic()
    report = replay_into(chain.path, ReplayOptions.parse("torch,faulty", "fwd", timeout=TIMEOUT), out=tmp_path / "r").json
    assert time.monotonic() - t < 60
    verdicts = {r["verdict"] for (op, b, m, o), r in rows(report).items() if b == "faulty"}
    assert verdicts and verdicts <= {"MATCH", "NOISE"} and report["restarts"]["faulty"] == 1
    assert leftover_workers(str(tmp_path)) == []


def test_an_error_says_what_it_was_raised_from_without_a_backtrace():
    """backends/_runtime/adapter.error_text by hand: "Type: message" without the C++ backtrace MegEngine
    appends, and, for an error raised from another (MegEngine's AsyncError holds the actual error as its
    __cause__), that one's type and first line; an error raised from nothing is as it was."""
    from backends._runtime.adapter import error_text
    try:
        try:
            raise RuntimeError("number of elements do not match in reshape\n\nbacktrace:\nlib.so(+0x1) [0x7f]")
        except RuntimeError as cause:
            raise ValueError("An async error is reported. See above for the actual cause.\nbacktrace:\nx") from cause
    except ValueError as e:
        assert error_text(e) == ("ValueError: An async error is reported. See above for the actual cause. "
                                 "(caused by RuntimeError: number of elements do not match in reshape)")
    assert error_text(KeyError("k")) == "KeyError: 'k'"
    # OneFlow colours "Error" in its messages: the escape bytes are left out
    coloured = NotImplementedError("\x1b[1m\x1b[38;2;255;000;000mError\x1b[0m: Only support floating types.")
    assert error_text(coloured) == "NotImplementedError: Error: Only support floating types."
    try:  # a cause that repeats the error's words (TensorFlow re-raises its own status so) adds nothing
        try:
            raise ValueError("Value for attr 'block_size' of 1 must be at least minimum 2")
        except ValueError as cause:
            raise ValueError(f"{cause} [Op:SpaceToDepth]") from cause
    except ValueError as e:
        assert error_text(e) == ("ValueError: Value for attr 'block_size' of 1 must be at least minimum 2 "
                                 "[Op:SpaceToDepth]")
