"""PaddlePaddle's own tests, beyond the contract every backend keeps (tests/backends/test_contract.py):
the biased running_var estimator, paddle.grad of intermediate tensors (and the copies that work around
it), penalties that raise rather than drop a term, chained runs, repros run by its env. The real
PaddlePaddle in its own environment, no mocks."""
import json
import os
import subprocess

import numpy as np
import pytest
from onnx import helper, numpy_helper

from irtrace import compare
from irtrace.ir.spec import node_specs
from irtrace.replay import backends

from contracts import (CONTRACTS, OK, cases_fixture, chained, low_precision_findings, small_bundle, unavailable_mark,
                       worker_fixture)

pytestmark = unavailable_mark("paddle")
cases = cases_fixture("paddle")
worker = worker_fixture("paddle")  # the op-case table replayed once per session (shared with the contract)


def test_most_cases_have_all_three_modes():
    """Beside the shape arithmetic, the integer and boolean cases and the piecewise-constant ones
    (tests/backends/contracts.py), at least 120 of Paddle's cases are judged in fwd, vjp and vjp2."""
    contract = CONTRACTS["paddle"]
    assert len(contract.cases()) - len(contract.shape_arithmetic) - len(contract.fwd_only) - \
        len(contract.partial_modes) >= 120


def test_running_var_is_the_biased_estimator(cases):
    """Paddle's batch_norm updates running_var with the population variance: the node that asks for
    the biased estimator matches torch's biased branch, the unbiased ones are off by exactly
    (1 - momentum) * (unbiased - biased variance), here with n = 4*3*3 = 36 values per channel."""
    paddle_replay, cases_bundle = cases.replay, cases.bundle
    v = {r.output: r for n in paddle_replay.nodes for r in n.results if r.backend == "paddle" and r.mode == "fwd"}
    assert all(v[f"batchnorm_train_biased.out{i}"].verdict in OK for i in range(3))
    r = v["batchnorm_train_m07.out2"]
    assert r.verdict == compare.DIVERGENT
    var_b = np.asarray(cases_bundle.values["batchnorm_train_m07.in0"], np.float64).var(axis=(0, 2, 3))
    gap = (1 - 0.7) * var_b * (36 / 35 - 1)
    assert r.metrics.max_abs == pytest.approx(gap.max(), rel=1e-3)


def test_chained_gradient_of_each_value_is_its_own(worker, tmp_path):
    """a = x * w, two views of it (Reshape, Unsqueeze) and a Split of it, all outputs, with
    cotangents 1, 10, 100 and 1000: each value's gradient is its own cotangent and a's is their sum.
    paddle.grad asked for these intermediate tensors gets them wrong (next test); chained() copies
    views and split outputs before asking."""
    x = np.arange(4, dtype=np.float32)
    w = np.full(4, 2.0, np.float32)
    shape, axes, sizes = np.array([2, 2], np.int64), np.array([0], np.int64), np.array([2, 2], np.int64)
    cots = [np.full((2, 2), 1.0, np.float32), np.full((1, 4), 10.0, np.float32), np.full(2, 100.0, np.float32),
            np.full(2, 1000.0, np.float32)]
    nodes = [helper.make_node("Mul", ["x", "w"], ["a"], name="mul"),
             helper.make_node("Reshape", ["a", "shape"], ["v1"], name="reshape"),
             helper.make_node("Unsqueeze", ["a", "axes"], ["v2"], name="unsqueeze"),
             helper.make_node("Split", ["a", "sizes"], ["s0", "s1"], name="split", axis=0)]
    inits = [numpy_helper.from_array(shape, "shape"), numpy_helper.from_array(axes, "axes"),
             numpy_helper.from_array(sizes, "sizes")]
    outputs = ["v1", "v2", "s0", "s1"]
    bundle = small_bundle(nodes, {"x": x, "w": w}, tmp_path / "views.irt", inits=inits, outputs=outputs)
    specs = [s.to_json() for s in node_specs(bundle.model)]
    reply, arrays = worker.call({"kind": "graph", "specs": specs, "feeds": ["x", "w", "shape", "axes", "sizes"],
                                 "outputs": outputs, "penalty": []}, [x, w, shape, axes, sizes] + cots, 60)
    assert reply["status"] == "ok", reply
    got = dict(zip(reply["values"] + [f"grad/{k}" for k in reply["grads"]], arrays))
    for name, c in zip(outputs, cots):
        np.testing.assert_array_equal(got[f"grad/{name}"], c)
        np.testing.assert_array_equal(got[name].reshape(-1), (x * w)[:c.size] if name != "s1" else (x * w)[2:])
    np.testing.assert_array_equal(got["grad/a"], [111.0, 111.0, 1011.0, 1011.0])
    np.testing.assert_array_equal(got["grad/x"], [222.0, 222.0, 2022.0, 2022.0])


def test_paddle_grad_of_intermediate_tensors_is_wrong():
    """The Paddle bugs the copies above work around, as observed (strict: a fix fails this test).
    a = x * 2; v1, v2 = reshape(a), reshape(a); loss = <v1, 1> + <v2, 10>: paddle.grad(loss,
    [v1, v2, a]) gives 11 for v1 (a's gradient) where the answer is 1 (asked without a: 1).
    s = split(a, 3); loss = <s0, 1> + <s1, 10> + <s2, 100>: paddle.grad(loss, [a, s0, s1, s2]) gives
    100 for s0 and s1 too; paddle.grad(loss, [s0]) raises a fatal "Invalid rank for GradTensorHolder"."""
    script = """
import warnings
warnings.filterwarnings("ignore")
import numpy as np
import paddle
x = paddle.to_tensor(np.arange(6, dtype=np.float32), stop_gradient=False)
a = x * 2
v1, v2 = paddle.reshape(a, [2, 3]), paddle.reshape(a, [2, 3])
loss = lambda: (v1 * 1.0).sum() + (v2 * 10.0).sum()
print(paddle.grad([loss()], [v1, v2, a])[0].numpy().tolist(), paddle.grad([loss()], [v1, v2])[0].numpy().tolist())
s = paddle.split(a, 3)
split_loss = lambda: (s[0] * 1.0).sum() + (s[1] * 10.0).sum() + (s[2] * 100.0).sum()
print([g.numpy().tolist() for g in paddle.grad([split_loss()], [a] + s)[1:]])
try:
    paddle.grad([split_loss()], [s[0]])
except SystemError as e:
    print(str(e).split(" which")[0])
"""
    env = {**os.environ, "GLOG_minloglevel": "2"}
    r = subprocess.run([backends.get("paddle").interpreter(), "-c", script], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["[[11.0, 11.0, 11.0], [11.0, 11.0, 11.0]] [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]",
                                     "[[100.0, 100.0], [100.0, 100.0], [100.0, 100.0]]",
                                     "(Fatal) Invalid rank for GradTensorHolder::add()"]


def test_chained_penalty_raises_rather_than_dropping_a_term(worker, tmp_path):
    """A gradient Paddle cannot compute (reciprocal has no double grad) is an ERROR naming the op,
    never a penalty term silently left out."""
    x = np.array([0.5, 1.25, 2.0], np.float32)
    bundle = small_bundle([helper.make_node("Reciprocal", ["x"], ["y"], name="rec")], {"x": x}, tmp_path / "r.irt")
    reply, _ = worker.call({"kind": "graph", "specs": [s.to_json() for s in node_specs(bundle.model)],
                            "feeds": ["x"], "outputs": ["y"], "penalty": ["x"]}, [x, np.ones(3, np.float32)], 60)
    assert reply["status"] == "error" and "reciprocal_grad doesn't have any grad op" in reply["message"]


@pytest.fixture(scope="module")
def mid_bundle(tmp_path_factory):
    import models_for_tests
    import irtrace
    return irtrace.export(models_for_tests.mid_conv(), models_for_tests.mid_conv_inputs(),
                          tmp_path_factory.mktemp("mid") / "mid.irt")


def test_chained_both_losses_agree_on_a_small_model(mid_bundle):
    """Linear, tanh, sigmoid, conv, relu: ops whose double grads Paddle has; chained with the
    bundle's loss and with a gradient penalty (one worker pool for both), every value, cotangent
    and parameter gradient agrees with torch."""
    from irtrace.replay.chained import chained_replay
    from irtrace.replay.execute import WorkerPool
    pool = WorkerPool()
    try:
        for loss in ("bundle", "grad-penalty"):
            (run,), used = chained_replay(mid_bundle, ["paddle"], pool, loss=loss)
            assert used == loss and run.status == "ok", (loss, run.message)
            assert run.values and all(e["verdict"] in OK for e in run.values + run.grads), loss
            names = {p["value"]: p["verdict"] for p in run.parameters}
            assert set(names) == {"stem.weight", "stem.bias", "conv.weight", "conv.bias", "head.weight", "head.bias"}
            assert set(names.values()) <= set(OK), (loss, names)
    finally:
        pool.close()


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["bundle", "grad-penalty"])
def test_chained_both_losses_on_wideresnet_train(example_bundle, tmp_path, loss):
    """Training-mode WideResNet chained on Paddle: the chains run, and the running_var of every
    BatchNorm is the finding (Paddle's biased estimator)."""
    run, _ = chained("paddle", example_bundle("wideresnet-train"), loss, tmp_path / loss)
    assert run["status"] == "ok", run.get("message")
    bad = {e["state_dict_key"] for e in run["state"] if e["verdict"] not in OK}
    assert bad == {e["state_dict_key"] for e in run["state"] if e["state_dict_key"].endswith("running_var")}
    assert len(bad) == 7 and len(run["parameters"]) == 25 and all(p["verdict"] in OK for p in run["parameters"])
    assert not [e for e in run["grads"] if e["verdict"] not in OK]  # every cotangent agrees


@pytest.mark.slow
def test_repros_run_in_the_paddle_env(cases, tmp_path):
    """Paddle's pad double grad fills the padded border of ds/dg with the pad value, and gelu has no
    double grad: each repro script, run by the Paddle env's own interpreter, shows it and exits 1."""
    from irtrace.repro.make import make_repros
    report, path = cases.report, cases.path
    ids = [f["id"] for f in report["findings"] if f["mode"] == "vjp2" and f["first_node"] in ("pad_constant_asym", "gelu")]
    assert len(ids) == 2, ids
    folders = {f.name.split("-")[1]: f for f in make_repros(path, tmp_path / "repros", finding_ids=ids, shrink_budget=20)}
    assert sorted(folders) == ["Gelu", "Pad"]
    printed = {}
    for op, folder in folders.items():
        assert json.loads((folder / "finding.json").read_text())["backend"] == "paddle"
        r = subprocess.run([backends.get("paddle").interpreter(), "repro.py"], capture_output=True, text=True,
                           cwd=folder, timeout=300)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "ccache" not in r.stdout + r.stderr and "import torch" not in r.stdout
        assert (folder / "issue.md").read_text().startswith(f"# [PaddlePaddle] {op}")
        printed[op] = r.stdout.splitlines()
    assert printed["Pad"][0].startswith("max abs difference")
    assert "gelu_grad doesn't have any grad op" in printed["Gelu"][-1]
    with np.load(folders["Pad"] / "case.npz") as d:  # ds/dg: u inside, the pad value (not 0) on the border
        got, want, value = d["backend_result"], d["reference"], float(d["input2"])
    border = want == 0
    assert border.any() and np.all(got[border] == value) and np.array_equal(got[~border], want[~border])
    assert "paddle.nn.functional" in (folders["Pad"] / "repro.py").read_text()


def test_a_worker_an_error_breaks_ends_and_the_nodes_after_it_are_judged_by_a_fresh_one(tmp_path, caplog):
    """Paddle 3.3's MatMul double backward of a 1-D operand against a 3-D one raises, and leaves its
    eager engine answering every later gradient with zeros: a fuzz batch of it and the cases after it
    showed Tile, Cos, Exp, Unsqueeze ... vjp DIVERGENT (max rel 1), none of which shows alone. The
    worker checks a Mul's gradient after every error (a*b: d/da = g b, d/db = g a) and ends when it comes
    out wrong; the calls after it go to a new process. Seeded cases 2409 (MatMul, x 6, w 2x6x1) and 2411
    (Tile of a 7x5 tensor), as irtrace fuzz --seed 7 drew them (the op a case index picks moves with Paddle's op
    table; the case an op and index draw does not)."""
    from irtrace.fuzz import generate
    from irtrace.fuzz import run as fuzz_run
    cases = [generate.draw_case(7, i, op, ()) for i, op in ((2409, "MatMul"), (2411, "Tile"))]
    assert [[a.value.shape for a in c.inputs] for c in cases] == [[(6,), (2, 6, 1)], [(7, 5), (2,)]]
    bundle, kept, dropped = fuzz_run._record(tmp_path, cases, 7)
    assert len(kept) == 2 and not dropped
    with caplog.at_level("WARNING", logger="irtrace.replay.worker"):
        findings = fuzz_run._replay(bundle, ("paddle",), ("fwd", "vjp", "vjp2"), 60)
    assert {f.op_type for f in findings} == {"MatMul"}, [(f.op_type, f.mode, f.verdict) for f in findings]
    assert any("paddle: the worker ends after the error" in r.getMessage() and
               "a Mul's gradient comes out wrong in this process (d/da [0.0, 0.0], d/db [0.0, 0.0]" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_a_chained_float16_run_names_the_kernel_paddle_lacks_unsupported_and_judges_the_rest(tmp_path):
    """Chained, a float16 node whose kernel Paddle's CPU build lacks (`add`) is UNSUPPORTED with Paddle's words,
    as it is replayed alone, not an ERROR; its recorded value is fed downstream and the rest of the chain is
    judged: Cast and Mul in float32 of the same numbers as torch's chain, bit for bit (max abs 0); the
    parameter whose gradient passes only through it is UNSUPPORTED too."""
    from onnx import TensorProto
    from irtrace.export.onnx_bundle import bundle_from_onnx
    x = np.array([[0.5, -1.25, 2.0], [3.0, -0.75, 0.125]], np.float16)
    w = np.array([[1.0, 2.0, -3.0], [0.25, 0.5, 4.0]], np.float16)
    nodes = [helper.make_node("Cast", ["x"], ["c"], name="widen_x", to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "w"], ["s"], name="add"),
             helper.make_node("Cast", ["s"], ["cs"], name="widen_s", to=TensorProto.FLOAT),
             helper.make_node("Mul", ["c", "cs"], ["y"], name="mul")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 3])],
                              [helper.make_empty_tensor_value_info("y")], [numpy_helper.from_array(w, "w")])
    bundle = bundle_from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), {"x": x},
                              tmp_path / "b.irt")
    chain, _ = chained("paddle", bundle, "bundle", tmp_path / "out")
    assert chain["status"] == "ok", chain["message"]
    said = ("paddle has no kernel of this op for these dtypes on this device (RuntimeError: (NotFound) The kernel "
            "with key (CPU, Undefined(AnyLayout), float16) of kernel `add` is not registered")
    assert [(s["node"], s["verdict"]) for s in chain["substituted"]] == [("add", "UNSUPPORTED")]
    assert chain["substituted"][0]["message"].startswith(said)
    values = {v["value"]: v for v in chain["values"]}
    assert values["s"]["verdict"] == "UNSUPPORTED" and values["s"]["message"].startswith(said)
    assert values["s"]["message"].endswith("(its recorded value was fed downstream)")
    assert [(values[k]["verdict"], values[k]["max_abs"]) for k in ("c", "cs", "y")] == [("MATCH", 0.0)] * 3
    assert [(p["value"], p["verdict"]) for p in chain["parameters"]] == [("w", "UNSUPPORTED")]


def test_bfloat16_crosses_to_paddle_as_its_own_and_a_kernel_it_lacks_is_unsupported(tmp_path):
    """bfloat16 reaches Paddle as its bfloat16 (Paddle takes numpy uint16 bits for it; irtrace's wire carries
    ml_dtypes' type) and comes back so: its bfloat16 Neg is -x exactly in fwd and vjp and its vjp2 zero (no
    finding); its CPU build has no bfloat16 `add` (its words), UNSUPPORTED, not a bug."""
    from low_precision import recorded_add
    from irtrace.fuzz import run as fuzz_run
    neg, findings = low_precision_findings(tmp_path / "neg", "paddle", "Neg", dtype="bfloat16", modes=("fwd", "vjp", "vjp2"))
    assert neg.dtype == "bfloat16" and findings == []
    bundle, add = recorded_add(tmp_path / "add", "bfloat16")
    findings = fuzz_run._replay(bundle, ("paddle",), ("fwd", "vjp"), 60)
    assert [(f.op_type, f.mode, f.verdict) for f in findings] == [("Add", "fwd", compare.UNSUPPORTED),
                                                                 ("Add", "vjp", compare.UNSUPPORTED)]
    assert "(CPU, Undefined(AnyLayout), bfloat16) of kernel `add` is not registered" in findings[0].message


def test_a_kernel_paddle_lacks_for_float16_on_the_cpu_is_unsupported_not_an_error(tmp_path):
    """Paddle 3.3's CPU build registers no float16 `add` (its words: "The kernel with key (CPU,
    Undefined(AnyLayout), float16) of kernel `add` is not registered", a coverage it documents): the call is
    UNSUPPORTED with those words, counted apart by irtrace fuzz, not a bug; the same op in float32 is judged
    (MATCH: no finding)."""
    half, findings = low_precision_findings(tmp_path, "paddle", "Add")
    assert [(f.op_type, f.mode, f.verdict, f.nodes) for f in findings] == [
        ("Add", "fwd", compare.UNSUPPORTED, [half.id]), ("Add", "vjp", compare.UNSUPPORTED, [half.id])]
    assert findings[0].message.startswith("paddle has no kernel of this op for these dtypes on this device "
                                          "(RuntimeError: (NotFound) The kernel with key (CPU, Undefined(AnyLayout), "
                                          "float16) of kernel `add` is not registered"), findings[0].message
