"""Verified workarounds: MegEngine's alternative formulations (backends/megengine/workarounds.py)
on the real MegEngine through its worker, judged against torch with the float64 oracle: each one on the
op-case table in every mode, planted wrong ones reported as not matching, a known answer for Pad's
second derivative, the findings of the StyleGAN2 example with their workarounds in report.json, and its
chained gradient-penalty port with the verified workarounds applied. No mocks."""
import dataclasses
import functools
import json
import subprocess

import numpy as np
import pytest
from onnx import TensorProto, helper

from irtrace import compare
from irtrace.replay import backends

REASON = backends.get("megengine").unavailable()
needs_megengine = pytest.mark.skipif(REASON is not None, reason=f"megengine unavailable: {REASON}")
PASSING = (compare.MATCH, compare.NOISE)
# (case, alternative) where the alternative does not apply: F.conv3d's own second derivative is wrong whatever its
# pads, so conv_concat_pads (uneven pads by concatenation, a 1-D conv as 2-D) refuses 3-D convs
OUT_OF_SCOPE = {("conv3d_strided", "conv_concat_pads")}
KEYS = ["code", "description", "matches", "name", "verdicts"]
# the ops a porter's alternatives must cover, at least
ASKED = {"Pad", "LeakyRelu", "Gelu", "Softplus", "HardSwish", "HardSigmoid", "Softmax", "LogSoftmax",
         "LayerNormalization", "MatMul", "Conv"}


# --- the registry (numpy only: no framework needed) -------------------------------------------------

def _table():
    from backends._table import OpTable
    ops = OpTable("t")

    @ops.register("LeakyRelu", since=6)
    def leaky_relu(x, *, alpha=0.01):
        return np.where(x > 0, x, alpha * x)
    return ops


def test_an_alternative_is_registered_beside_the_op_it_stands_in_for():
    from backends._table import Alternatives, Unsupported
    alts = Alternatives(_table())

    @alts.register("LeakyRelu", since=6)
    def leaky_relu_max(x, *, alpha=0.01):
        """np.maximum(x, alpha * x) (alpha <= 1)."""
        return np.maximum(x, alpha * x)

    assert [(a.name, a.description) for a in alts.for_op("ai.onnx", "LeakyRelu", 20)] == \
        [("leaky_relu_max", "np.maximum(x, alpha * x) (alpha <= 1).")]
    assert alts.for_op("", "LeakyRelu", 5) == [] and alts.keys() == [("", "LeakyRelu", 6, "leaky_relu_max")]
    assert alts.entry("", "LeakyRelu", 20, "leaky_relu_max").fn is leaky_relu_max
    with pytest.raises(Unsupported, match="no alternative 'nope' of 'LeakyRelu'.*registered: leaky_relu_max"):
        alts.entry("", "LeakyRelu", 20, "nope")
    with pytest.raises(RuntimeError, match="registered twice"):
        alts.register("LeakyRelu", since=6)(leaky_relu_max)
    with pytest.raises(RuntimeError, match="signature .* must be the same"):
        @alts.register("LeakyRelu", since=6)
        def leaky_relu_positional(x, alpha=0.01):
            """alpha positional: not the table's signature."""
            return x
    with pytest.raises(RuntimeError, match="no docstring"):
        @alts.register("LeakyRelu", since=6)
        def leaky_relu_silent(x, *, alpha=0.01):
            return x
    with pytest.raises(Unsupported, match="no 'Gelu'"):  # beside an op the table has, or not at all
        alts.register("Gelu", since=20)(lambda x, *, approximate="none": x)


# --- MegEngine's alternatives on the op-case table -------------------------------------------------------

@pytest.fixture(scope="module")
def registered():
    """(domain, op type, since, name) of every alternative the MegEngine worker serves (its hello)."""
    from irtrace.replay.worker import WorkerProxy
    w = WorkerProxy(backends.get("megengine"))
    try:
        return [tuple(k) for k in w.start()["workarounds"]]
    finally:
        w.close()


@pytest.fixture(scope="module")
def cases_replay(registered, tmp_path_factory):
    """The op cases of every op with an alternative, replayed on MegEngine, each alternative tried on
    every case of its op (not only the failing ones)."""
    import op_cases
    from irtrace.export.onnx_bundle import bundle_from_onnx
    from irtrace.replay import ReplayOptions, run
    from irtrace.replay.workarounds import verify
    ops = {op for _, op, _, _ in registered}
    cases = [c for c in op_cases.CASES if c.op in ops]
    model, feeds, _ = op_cases.all_cases_model(cases)
    bundle = bundle_from_onnx(model, feeds, tmp_path_factory.mktemp("wk") / "cases.irt", name="op_cases", trained=op_cases.activations(model, feeds))
    return cases, run(bundle, ReplayOptions(["megengine", "torch"], workarounds_everywhere=True)).replay


@needs_megengine
def test_every_registered_workaround_matches_torch_on_the_op_cases_in_every_mode(registered, cases_replay):
    cases, rep = cases_replay
    assert ASKED <= {op for _, op, _, _ in registered}, registered
    tried = rep.workarounds["megengine"]
    seen = set()
    for case in cases:
        names = [n for _, op, _, n in registered if op == case.op]
        got = {w["name"]: w for w in tried[case.id]}
        assert list(got) == names, (case.id, list(got), names)  # every alternative of the op, in order
        # where the table's own op cannot express the case (F.pad takes no negative widths), an alternative
        # may not either: UNSUPPORTED in every mode there, never a wrong number
        table = {r.verdict for n in rep.nodes if n.name == case.id for r in n.results if r.backend == "megengine"}
        for name, w in got.items():
            assert sorted(w) == KEYS
            assert list(w["verdicts"]) == ["fwd", "vjp", "vjp2"], (case.id, name, w["verdicts"])
            # so may one that does not apply to a case (OUT_OF_SCOPE): it says so, never a wrong number
            if (table == {compare.UNSUPPORTED} or (case.id, name) in OUT_OF_SCOPE) and \
                    set(w["verdicts"].values()) == {compare.UNSUPPORTED}:
                assert not w["matches"], (case.id, name)
                continue
            assert all(v in PASSING for v in w["verdicts"].values()) and w["matches"], (case.id, name, w["verdicts"])
            assert f"def {name}(" in w["code"] and w["description"]
            seen.add(name)
    assert seen == {n for *_, n in registered}  # each one tried on at least one case
    # on the cases where the op-table call itself fails, the replay's own verdicts say so (the reason
    # for the alternative): the table's F.pad, F.leaky_relu, F.gelu, ... in vjp2, gelu_tanh not at all
    failing = {n.name for n in rep.nodes for r in n.results
               if r.backend == "megengine" and r.verdict in compare.FAILING + (compare.UNSUPPORTED,)}
    assert {"pad_constant_asym", "pad_reflect", "pad_edge", "leakyrelu", "gelu", "gelu_tanh", "softplus",
            "hardswish", "softmax", "layernorm", "matmul_nd_2d", "conv1d_groups"} <= failing


PLANTED = '''import os

os.environ.setdefault("MEGENGINE_LOGGING_LEVEL", "ERROR")


def make_adapter():
    from megengine import functional

    from backends._table import Alternatives
    from backends.megengine.adapter import MegEngineAdapter
    from backends.megengine.ops import OPS

    planted = Alternatives(OPS)

    @planted.register("LeakyRelu", since=6)
    def leaky_relu_default_slope(x, *, alpha=0.01):
        """F.where with the slope 0.01 whatever alpha says (wrong in every mode)."""
        return functional.where(x > 0, x, x * 0.01)

    @planted.register("LeakyRelu", since=6)
    def leaky_relu_detached_branch(x, *, alpha=0.01):
        """F.where with the negative branch detached (right forward, wrong gradients: 0 for x < 0)."""
        return functional.where(x > 0, x, (x * alpha).detach())

    @planted.register("Pad", since=19)
    def pad_functional(x, pads, constant_value=None, axes=None, *, mode="constant"):
        """F.pad itself (its second derivative w.r.t. the incoming gradient is silently 0)."""
        r = x.ndim
        p = [int(v) for v in pads.numpy().reshape(-1)]
        value = float(constant_value.item()) if constant_value is not None else 0.0
        return functional.pad(x, tuple((p[i], p[i + r]) for i in range(r)), constant_value=value)

    adapter = MegEngineAdapter()
    adapter.name = "megengine-planted"
    adapter.workarounds = planted
    return adapter
'''


@needs_megengine
def test_a_wrong_workaround_is_reported_as_not_matching_in_the_mode_where_it_is_wrong(tmp_path):
    """Planted alternatives on a MegEngine worker, wrong from fwd on, from vjp on, and in vjp2 only: the
    verification must call none of them a match, and name the modes where each is wrong."""
    import op_cases
    from irtrace.export.onnx_bundle import bundle_from_onnx
    from irtrace.replay import ReplayOptions, run
    from irtrace.replay.workarounds import verify
    (tmp_path / "planted_workaround.py").write_text(PLANTED)
    real = backends.get("megengine")
    backends.register(dataclasses.replace(real, name="megengine-planted", worker="planted_workaround",
                                          extra_path=tuple(real.extra_path) + (tmp_path,)))
    try:
        cases = [c for c in op_cases.CASES if c.id in ("leakyrelu", "pad_constant_asym")]
        model, feeds, _ = op_cases.all_cases_model(cases)
        bundle = bundle_from_onnx(model, feeds, tmp_path / "b.irt", name="planted", trained=op_cases.activations(model, feeds))
        rep = run(bundle, ReplayOptions(["megengine-planted", "torch"], workarounds_everywhere=True)).replay
    finally:
        backends.BACKENDS.pop("megengine-planted")
    got = {(node, w["name"]): (w["verdicts"], w["matches"]) for node, ws in rep.workarounds["megengine-planted"].items()
           for w in ws}
    assert got == {
        ("leakyrelu", "leaky_relu_default_slope"): ({"fwd": "DIVERGENT", "vjp": "DIVERGENT", "vjp2": "DIVERGENT"}, False),
        ("leakyrelu", "leaky_relu_detached_branch"): ({"fwd": "MATCH", "vjp": "DIVERGENT", "vjp2": "DIVERGENT"}, False),
        ("pad_constant_asym", "pad_functional"): ({"fwd": "MATCH", "vjp": "MATCH", "vjp2": "DIVERGENT"}, False)}, got


@needs_megengine
def test_pad_via_concat_second_derivative_is_pad_of_u_by_hand():
    """Known answer: y = pad(x) is linear, so h = vjp(g) = g cropped, s = <h, u>, ds/dx = 0 and
    ds/dg = pad(u) with zeros (the constant does not enter). F.pad's ds/dg is 0 (the finding); the
    alternative's is pad(u)."""
    from irtrace.ir.spec import node_specs
    from irtrace.replay.call import NodeCall, proto_text
    from irtrace.replay.worker import WorkerProxy
    x = np.arange(1, 5, dtype=np.float32).reshape(1, 1, 2, 2)
    pads = np.array([0, 0, 1, 0, 0, 0, 0, 2], np.int64)   # begin (1 row) and end (2 columns) differ
    value = np.array(1.5, np.float32)
    g = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4) - 5
    u = np.array([[[[0.5, -2.0], [3.0, 0.25]]]], np.float32)
    node = helper.make_node("Pad", ["x", "pads", "value"], ["y"], name="pad", mode="constant")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 3, 4])])
    spec = node_specs(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))[0]
    proto = proto_text(node)
    call = NodeCall(spec, "vjp2", proto, (x, pads, value), (g,), (u, None, None))
    w = WorkerProxy(backends.get("megengine"))
    w.start()
    try:
        def run(mode, **extra):
            reply, out = w.call(dataclasses.replace(call, mode=mode).with_extra(**extra).message(),
                                dataclasses.replace(call, mode=mode).arrays(), 60)
            assert reply["status"] == "ok", reply
            return out
        fwd = run("fwd", workaround="pad_concat")
        vjp = run("vjp", workaround="pad_concat")
        d2x, _, _, d2g = run("vjp2", workaround="pad_concat")
        table_d2g = run("vjp2")[3]
    finally:
        w.close()
    want_y = np.full((1, 1, 3, 4), 1.5, np.float32)
    want_y[0, 0, 1:, :2] = x[0, 0]
    np.testing.assert_array_equal(fwd[0], want_y)
    np.testing.assert_array_equal(vjp[0], np.array([[[[-1.0, 0.0], [3.0, 4.0]]]], np.float32))  # g[1:, :2]
    want_d2g = np.zeros((1, 1, 3, 4), np.float32)
    want_d2g[0, 0, 1:, :2] = u[0, 0]   # pad(u): u placed where x sits, 0 in the padding
    np.testing.assert_array_equal(d2g, want_d2g)
    np.testing.assert_array_equal(d2x, np.zeros_like(x))
    np.testing.assert_array_equal(table_d2g, np.zeros_like(want_d2g))  # F.pad: silently 0, the finding


# --- the StyleGAN2 example: findings with their workarounds, and the chained port with them applied ---

@pytest.fixture(scope="module")
def stylegan2(tmp_path_factory):
    """`irtrace replay sg.irt --backend megengine --chained --loss grad-penalty --workarounds`, as
    `irtrace demo` runs it: (report dict, out folder)."""
    import irtrace
    from irtrace.examples import EXAMPLES
    from irtrace.replay import ReplayOptions
    from irtrace.report.folder import replay_into
    e = EXAMPLES["stylegan2"]
    root = tmp_path_factory.mktemp("sg")
    bundle = irtrace.export(e.build(), e.inputs(), root / "sg.irt", train=e.train)
    replayed = replay_into(bundle.path, ReplayOptions.parse("megengine", "fwd,vjp,vjp2", chained=True, loss="grad-penalty",
                                                    workarounds=True), out=root / "out")
    return replayed.json, replayed.out


@needs_megengine
def test_stylegan2_findings_list_the_workarounds_that_match_in_report_json(stylegan2):
    from irtrace.report.html import render
    from irtrace.report.terminal import finding_lines
    report, out = stylegan2
    on_disk = json.loads((out / "report.json").read_text())
    found = {(f["op_type"], f["mode"], f["verdict"]): f for f in on_disk["findings"]}
    assert set(found) == {("LeakyRelu", "vjp2", "ERROR"), ("Pad", "vjp2", "DIVERGENT")}
    for (op, _, _), f in found.items():
        want = {"LeakyRelu": ["leaky_relu_where", "leaky_relu_mask"], "Pad": ["pad_concat"]}[op]
        assert [w["name"] for w in f["workarounds"]] == want
        for w in f["workarounds"]:
            assert sorted(w) == KEYS
            assert w["verdicts"] == {"fwd": "MATCH", "vjp": "MATCH", "vjp2": "MATCH"} and w["matches"] is True
            assert f"def {w['name']}(" in w["code"] and not w["code"][0].isspace()
            assert ("functional." not in w["code"]) or "import megengine.functional as functional\n" in w["code"]
    lines = finding_lines(on_disk)
    assert "workaround that matches: leaky_relu_where, leaky_relu_mask" in [ln.strip() for ln in lines]
    assert "workaround that matches: pad_concat" in [ln.strip() for ln in lines]
    page = render(on_disk)
    assert "Workarounds tried" in page and "def pad_concat(" in page
    assert "time_s" not in json.dumps(on_disk["chained"])  # timings.json has them: report.json stays the same bytes
    assert [c["workarounds"] for c in json.loads((out / "timings.json").read_text())["chained"]] == [False, True]


@needs_megengine
def test_pad_concat_code_runs_standalone_in_the_megengine_env(stylegan2, tmp_path):
    """The code a finding carries is the whole alternative: run alone (no irtrace), it pads."""
    report, _ = stylegan2
    code = next(w["code"] for f in report["findings"] for w in f.get("workarounds", []) if w["name"] == "pad_concat")
    script = tmp_path / "wk.py"
    script.write_text(code + '''

import megengine
x = megengine.tensor(np.arange(6, dtype="float32").reshape(1, 2, 3))
y = pad_concat(x, np.array([0, 1, 0, 0, 0, 2]), np.array(7.0, "float32"))
assert np.array_equal(y.numpy(), np.pad(x.numpy(), ((0, 0), (1, 0), (0, 2)), constant_values=7)), y.numpy()
print("ok")
''')
    r = subprocess.run([backends.get("megengine").interpreter(), str(script)], capture_output=True, text=True,
                       env={"MEGENGINE_LOGGING_LEVEL": "ERROR", "PATH": "/usr/bin:/bin"}, cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


@needs_megengine
def test_stylegan2_chained_grad_penalty_port_with_workarounds_matches_torch(stylegan2):
    """The porter's goal: MegEngine's own chained gradient-penalty run fails (F.leaky_relu has no double
    backward); with the verified workarounds for LeakyRelu and Pad in place, every parameter gradient
    matches torch's."""
    from irtrace.report.chained import lines
    report, out = stylegan2
    plain, fixed = report["chained"]["runs"]
    assert (plain["backend"], plain["status"], plain["workarounds"]) == ("megengine", "ERROR", [])
    assert "PRELU_GRAD unimplemented" in plain["message"]
    assert fixed["backend"] == "megengine" and fixed["status"] == "ok", fixed["message"]
    applied = [(w["op_type"], w["name"]) for w in fixed["workarounds"]]
    assert applied.count(("LeakyRelu", "leaky_relu_where")) == 5 and applied.count(("Pad", "pad_concat")) == 4
    assert len(applied) == 9
    assert len(fixed["parameters"]) == 28
    assert all(p["verdict"] in PASSING for p in fixed["parameters"]), \
        [(p["value"], p["verdict"], p["max_abs"]) for p in fixed["parameters"] if p["verdict"] not in PASSING]
    assert all(v["verdict"] in PASSING for v in fixed["values"])
    text = lines(report["chained"])
    assert "chained megengine with workarounds (grad-penalty loss): 183 values, 0 diverge forward; " \
           "0 cotangents, 0 diverge backward" in text
    assert "  applied: leaky_relu_where at 5 LeakyRelu nodes, pad_concat at 4 Pad nodes" in text
    assert "  all 28 parameter gradients MATCH or NOISE: the port matches end to end" in text


@needs_megengine
def test_report_with_workarounds_is_the_same_bytes_when_resumed(tmp_path):
    """Workarounds are tried again after a resume (they are not in the journal): report.json is the same
    bytes as the uninterrupted run's, with the cache serving torch's and the oracle's answers."""
    import op_cases
    from irtrace.export.onnx_bundle import bundle_from_onnx
    from irtrace.replay import ReplayOptions
    from irtrace.report.folder import replay_into
    cases = [c for c in op_cases.CASES if c.id in ("leakyrelu", "pad_edge", "relu")]
    model, feeds, _ = op_cases.all_cases_model(cases)
    bundle = bundle_from_onnx(model, feeds, tmp_path / "b.irt", name="small", trained=op_cases.activations(model, feeds))
    first = replay_into(bundle.path, ReplayOptions.parse("megengine", "fwd,vjp,vjp2"), out=tmp_path / "out").json
    before = (tmp_path / "out" / "report.json").read_bytes()
    again = replay_into(bundle.path, ReplayOptions.parse("megengine", "fwd,vjp,vjp2"), out=tmp_path / "out", resume=True).json
    assert (tmp_path / "out" / "report.json").read_bytes() == before
    assert {f["op_type"]: [w["name"] for w in f["workarounds"] if w["matches"]] for f in first["findings"]} == \
        {"LeakyRelu": ["leaky_relu_where", "leaky_relu_mask"], "Pad": ["pad_concat"]}
