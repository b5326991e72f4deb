"""The contract every framework backend under test keeps, one module for all of them (the data that
differs is in tests/backends/contracts.py): the op-case table in every mode against torch, with its
known-failure table as strict xfails; the modes each case has; the forward translations; the
padding matrix against float64; the example models to the end; known answers; its worker's
versions; what it says without its environment; `irtrace backends`. A backend whose environment is
missing is skipped with the command that builds it. Its own tests: tests/backends/test_<name>.py."""
import importlib
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from irtrace import compare
from irtrace.replay import backends
from irtrace.replay import ReplayOptions, run

from backends._runtime.declare import UNDER_TEST
from conftest import update_known
from contracts import (CONTRACTS, EXAMPLES, OK, TRANSLATION_GUARDS, agrees, case_run, described, observed,
                       unavailable_mark)

ROOT = Path(__file__).parents[2]
# backends under test that run a framework (all three modes); the native ONNX ones (onnxruntime, onnx's
# reference, forward only) are checked by tests/test_conformance.py and tests/test_padding_matrix.py
FRAMEWORKS = [n for n in backends.with_role(UNDER_TEST) if "vjp" in backends.get(n).modes]


def _params(names, slow=False):
    return [pytest.param(n, id=n, marks=[unavailable_mark(n)] + ([pytest.mark.slow] if slow else [])) for n in names]


def _known_params():
    """One test per known failure: (backend, case, mode, output), xfail carrying what was observed."""
    out = []
    for name in CONTRACTS:
        for (case, mode, output), (verdict, text) in sorted(CONTRACTS[name].known().items()):
            out.append(pytest.param(name, (case, mode, output), marks=[
                unavailable_mark(name), pytest.mark.xfail(strict=True, raises=StillFails, reason=f"{verdict}: {text}")],
                id=f"{name}-{case}-{mode}-{output}"))
    return out


class StillFails(Exception):
    """The known failure shows as recorded: the expected outcome of a strict xfail."""


@pytest.fixture
def case_results(request, tmp_path_factory):
    return case_run(request.node.callspec.params["name"], tmp_path_factory)


def test_every_framework_backend_has_a_contract():
    assert sorted(FRAMEWORKS) == sorted(CONTRACTS), "declare its contract in tests/backends/contracts.py"


@pytest.mark.parametrize("name", _params(CONTRACTS))
def test_op_table_known_findings_are_strict(name, case_results):
    """Every failing or unsupported result is in the backend's known-failure table (a case not in it must
    MATCH or be NOISE). IRTRACE_UPDATE_KNOWN=1 rewrites the table from what this run observed."""
    contract = CONTRACTS[name]
    seen = observed(contract, case_results.replay)
    if update_known(contract.known_module, "KNOWN", {k: (r.verdict, described(name, r)) for k, r in seen.items()}):
        return
    known = contract.known()
    new = {k: (r.verdict, described(name, r)) for k, r in seen.items() if k not in known}
    assert not new, f"new {name} findings (or a translation bug): {new}"


@pytest.mark.parametrize("name, key", _known_params())
def test_known_finding_still_shows(name, key, case_results):
    """Strict xfail: passes (and so fails the suite) once the backend or a translation fixes it; a
    failure whose message or numbers drifted from the table fails outright."""
    contract = CONTRACTS[name]
    verdict, text = contract.known()[key]
    r = observed(contract, case_results.replay).get(key)
    if r is None or r.verdict != verdict:
        return  # fixed, or another verdict: XPASS
    assert agrees(contract, r, text), (f"{key} still {verdict}, but now shows {described(name, r)!r}: "
                                       f"update tests/{contract.known_module}.py")
    raise StillFails(f"{key}: {verdict}: {described(name, r)}")


@pytest.mark.parametrize("name", _params(CONTRACTS))
def test_every_case_has_its_modes(name, case_results):
    """Every case has a forward result, and every case with a float output that depends on a float input
    has vjp and vjp2 results too: nothing is fwd-only by omission; what is not judged says why (shape
    arithmetic: a port computes it in Python)."""
    contract = CONTRACTS[name]
    full = set(backends.get(name).modes)
    rep = case_results.replay
    modes = {n.name: {r.mode for r in n.results if r.backend == name} for n in rep.nodes}
    skipped = {n.name: [s["reason"] for s in n.skipped if s.get("backend", name) == name] for n in rep.nodes}
    ids = [c.id for c in contract.cases() if c.id in case_results.answered]
    for case in ids:
        assert bool(modes[case]) != (case in contract.shape_arithmetic), (case, modes[case])
        assert bool(skipped[case]) == (case in contract.shape_arithmetic), (case, skipped[case])
        assert all("shape arithmetic" in r for r in skipped[case])
    assert sorted(c for c in ids if modes[c] == {"fwd"}) == sorted(contract.fwd_only)
    other = {c: modes[c] for c in ids if modes[c] not in (set(), {"fwd"}, full)}
    assert other == contract.partial_modes


@pytest.mark.parametrize("name", _params(CONTRACTS))
def test_translation_guards_forward(name, case_results):
    """Attribute translations (momentum, running-var estimator, count_include_pad, pads order, layouts,
    output_padding, align_corners, grouped weights, ...) checked in the forward pass, where a framework's
    own higher-order gaps cannot hide or fake them."""
    contract = CONTRACTS[name]
    known = contract.known()
    v = {(n.name, r.output): r.verdict for n in case_results.replay.nodes for r in n.results
         if r.backend == name and r.mode == "fwd"}
    for output in TRANSLATION_GUARDS:
        case = output.rsplit(".", 1)[0]
        if case in case_results.answered and not {(case, "fwd", output), (case, "fwd", "*")} & set(known):
            assert v[(case, output)] in OK, (case, output, v[(case, output)])
    assert {k: verdict for k, verdict in v.items() if verdict not in OK} == contract.fwd_findings


@pytest.mark.parametrize("name", _params(CONTRACTS))
def test_first_order_gradients_match(name, case_results):
    """Every first-order gradient matches but the backend's stated exceptions (statistics computed in the
    graph that its batch norm does not differentiate, its own bugs)."""
    contract = CONTRACTS[name]
    bad = sorted((n.name, r.output, r.verdict) for n in case_results.replay.nodes for r in n.results
                 if r.backend == name and r.mode == "vjp" and r.verdict not in OK
                 and (n.name, r.mode, r.output) not in contract.borderline)
    assert bad == sorted(contract.vjp_findings)


@pytest.mark.parametrize("name", _params([n for n, c in CONTRACTS.items() if c.padding]))
def test_padding_matrix_against_float64(name, tmp_path):
    """The 234 padding cases, forward, judged against float64: what fails is the backend's known table."""
    import op_cases
    import padding_matrix
    from irtrace.export.onnx_bundle import bundle_from_onnx
    contract = CONTRACTS[name]
    module, table = contract.padding.split(":")
    known = getattr(importlib.import_module(module), table)
    model, feeds, _ = op_cases.all_cases_model(padding_matrix.cases())
    b = bundle_from_onnx(model, feeds, tmp_path / "pad.irt", name="padding_matrix",
                         trained=op_cases.activations(model, feeds))
    rep = run(b, ReplayOptions([name], modes=["fwd"], verify_workarounds=False)).replay
    assert len(rep.nodes) == 234
    assert all(any(r.backend == name for r in n.results) for n in rep.nodes)
    if module == "padding_known":  # (case, backend) -> verdict
        seen = {(n.name, name): r.verdict for n in rep.nodes for r in n.results if r.backend == name and r.verdict not in OK}
        assert seen == {k: v for k, v in known.items() if k[1] == name}
    else:  # case -> (verdict, what was observed)
        seen = {n: (r.verdict, described(name, r)) for (n, _, _), r in observed(contract, rep).items()}
        assert seen == known


def _example_params():
    return [pytest.param(n, e, id=f"{n}-{e}", marks=[unavailable_mark(n)] + ([pytest.mark.slow] if c.examples_slow else []))
            for n, c in CONTRACTS.items() for e in EXAMPLES]


@pytest.mark.parametrize("name, example", _example_params())
def test_examples_run_to_the_end(name, example, example_bundle):
    """Every node of the example compared, or skipped with its reason (shape arithmetic), never
    UNSUPPORTED; the distinct findings (op type, mode, verdict) are the backend's EXAMPLES table."""
    from irtrace.report.findings import group
    contract = CONTRACTS[name]
    b = example_bundle(example)
    rep = run(b, ReplayOptions([name], verify_workarounds=False)).replay
    assert len(rep.nodes) == len(b.model.graph.node)
    if example in contract.example_nodes:
        assert len(rep.nodes) == contract.example_nodes[example]
    for n in rep.nodes:
        modes = {r.mode for r in n.results if r.backend == name}
        reasons = [s["reason"] for s in n.skipped if s.get("backend", name) == name and s["mode"] == "*"]
        assert ("fwd" in modes) != bool(reasons), (n.name, modes, reasons)
        assert all("shape arithmetic" in r for r in reasons), (n.name, reasons)
        assert not [r for r in n.results if r.backend == name and r.verdict == compare.UNSUPPORTED], n.name
    found = sorted({(f.op_type, f.mode, f.verdict) for f in group(rep)})
    assert found == importlib.import_module(contract.known_module).EXAMPLES[example]


# --- known answers, on the backend's own worker ------------------------------------------------------
@pytest.fixture(scope="module")
def workers():
    """One worker per backend for this module, spoken to directly (node and graph requests)."""
    from irtrace.replay.worker import WorkerProxy
    started = {}

    def get(name):
        if name not in started:
            started[name] = WorkerProxy(backends.get(name))
            started[name].start()
        return started[name]
    yield get
    for w in started.values():
        w.close()


@pytest.mark.parametrize("name", _params(CONTRACTS))
def test_vjp2_of_matmul_known_answer(name, workers, tmp_path):
    """vjp2 of y = a @ b with its answer written out in float64: h_a = g b^T, h_b = a^T g, so
    s = <g b^T, u_a> + <a^T g, u_b>; ds/da = g u_b^T, ds/db = u_a^T g, ds/dg = u_a b + a u_b."""
    from contracts import small_bundle
    from irtrace.ir.spec import node_specs
    rng = np.random.default_rng(7)
    a, b, g, ua, ub = (rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (4, 5), (3, 5), (3, 4), (4, 5)])
    bundle = small_bundle([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")], {"a": a, "b": b},
                          tmp_path / "mm.irt")
    (spec,) = node_specs(bundle.model)
    reply, arrays = workers(name).call({"kind": "run", "mode": "vjp2", "spec": spec.to_json()}, [a, b, g, ua, ub], 60)
    assert reply["status"] == "ok", reply
    a64, b64, g64, ua64, ub64 = (t.astype(np.float64) for t in (a, b, g, ua, ub))
    expected = [g64 @ ub64.T, ua64.T @ g64, ua64 @ b64 + a64 @ ub64]
    assert len(arrays) == 3
    for got, want in zip(arrays, expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", _params([n for n, c in CONTRACTS.items() if c.float64]))
def test_float64_is_computed_in_float64(name, workers, tmp_path):
    """Tanh on float64 inputs, every mode against its closed form in float64: y = tanh x,
    h = g (1 - y^2), ds/dx = -2 y (1 - y^2) g u, ds/dg = (1 - y^2) u -- to 1e-12, not float32."""
    from irtrace.export.onnx_bundle import bundle_from_onnx
    from irtrace.ir.spec import node_specs
    x, g, u = np.array([0.1, -2.0, 3.0]), np.array([0.5, 1.5, -2.0]), np.array([1.25, -0.5, 0.75])
    vi = [helper.make_tensor_value_info(n, TensorProto.DOUBLE, [3]) for n in "xy"]
    m = helper.make_model(helper.make_graph([helper.make_node("Tanh", ["x"], ["y"], name="t")], "g", vi[:1], vi[1:]),
                          opset_imports=[helper.make_opsetid("", 20)])
    (spec,) = node_specs(bundle_from_onnx(m, {"x": x}, tmp_path / "f64.irt").model)
    got = {mode: workers(name).call({"kind": "run", "mode": mode, "spec": spec.to_json()}, arrays, 60)
           for mode, arrays in (("fwd", [x]), ("vjp", [x, g]), ("vjp2", [x, g, u]))}
    assert all(reply["status"] == "ok" for reply, _ in got.values()), got
    y = np.tanh(x)
    expected = {"fwd": [y], "vjp": [g * (1 - y * y)], "vjp2": [-2 * y * (1 - y * y) * g * u, (1 - y * y) * u]}
    for mode, (_, arrays) in got.items():
        assert [a.dtype for a in arrays] == [np.float64] * len(expected[mode])
        for a, want in zip(arrays, expected[mode]):
            np.testing.assert_allclose(a, want, rtol=1e-12, atol=0)


@pytest.mark.parametrize("name", _params(CONTRACTS))
def test_chained_known_answer_x_times_w(name, tmp_path):
    """y = x * w, output seed c, penalty input x: L = <x*w, c> (+ ||w*c||^2 under the gradient penalty),
    so dL/dw = x*c (+ 2*w*c^2) and dL/dx = w*c, by hand in float64, for both losses."""
    from onnx import numpy_helper

    from irtrace.export.onnx_bundle import bundle_from_onnx
    from irtrace.replay.chained import chain_request, run_chain
    from irtrace.replay.execute import WorkerPool
    from irtrace.store import seed_name
    graph = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["y"], name="mul")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array([0.5, -1.0, 2.0], np.float32), "w")])
    b = bundle_from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                         {"x": np.array([1.0, 2.0, 3.0], np.float32)}, tmp_path / "mul.irt")
    x, w = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    c = np.asarray(b.values[seed_name("y")], np.float64)
    assert np.abs(2 * w * c * c).max() > 0.1  # the penalty term matters: a chain that dropped it would fail
    pool = WorkerPool()
    try:
        for loss in ("bundle", "grad-penalty"):
            status, reply, values, grads = run_chain(pool, name, chain_request(b, loss))
            assert status == "ok", reply.get("message")
            dw = x * c + (2 * w * c * c if loss == "grad-penalty" else 0)
            np.testing.assert_allclose(values["y"], x * w, rtol=1e-6)
            for value, want in (("w", dw), ("x", w * c), ("y", c)):
                np.testing.assert_allclose(grads[value], want, rtol=1e-6, atol=1e-6, err_msg=f"{loss} dL/d{value}")
    finally:
        pool.close()


@pytest.mark.slow
@pytest.mark.parametrize("name, example", [pytest.param(n, e, id=f"{n}-{e}", marks=unavailable_mark(n))
                                           for n, c in CONTRACTS.items() for e in c.penalty_gaps])
def test_gradient_penalty_chain_names_the_missing_double_grad(name, example, example_bundle, tmp_path):
    """A gradient penalty through an op the framework has no double grad for: the chain is an ERROR
    naming it, never a penalty term silently left out."""
    from contracts import chained
    chain, _ = chained(name, example_bundle(example), "grad-penalty", tmp_path / example)
    assert chain["status"] == "ERROR" and CONTRACTS[name].penalty_gaps[example] in chain["message"]


# --- its environment ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", _params(CONTRACTS))
def test_worker_is_quiet_and_versions_are_pinned(name, workers):
    """The worker states its pinned versions and its op table, its framework logs nothing at start, and
    it runs on the Python its environment declares."""
    from irtrace import envs
    contract = CONTRACTS[name]
    w = workers(name)
    versions = w.hello["versions"]
    for package, version in contract.versions.items():
        assert (versions[package].startswith(version) if version.endswith(".") else versions[package] == version), \
            (package, versions[package])
    if contract.ops:
        assert len(w.hello["ops"]) == contract.ops
    assert not [q for q in contract.quiet if q in w.stderr_tail()], w.stderr_tail()
    r = subprocess.run([backends.get(name).interpreter(), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                       capture_output=True, text=True)
    assert r.stdout.strip() == envs.get(name).python_version


@pytest.mark.parametrize("name", CONTRACTS)
def test_without_its_env_it_says_how_to_get_it(name, monkeypatch, tmp_path):
    monkeypatch.setenv("IRTRACE_CACHE", str(tmp_path))
    assert backends.get(name).unavailable() == f"the {name} environment is not set up — run: irtrace setup {name}"


@pytest.mark.parametrize("name", _params(CONTRACTS, slow=True))
def test_backends_command_lists_it_with_its_op_count(name, workers):
    """`irtrace backends` counts the ops a table has (domain and op type), the worker's hello each registration
    (an op registered for two opset versions twice: OneFlow's table has one)."""
    r = subprocess.run([sys.executable, "-m", "irtrace", "backends"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0
    line = re.search(rf"^{name} +fwd,vjp,vjp2 +ops +(\d+) +available$", r.stdout, re.M)
    assert line, r.stdout
    assert int(line.group(1)) == len({(d, o) for d, o, _ in workers(name).hello["ops"]})
