"""Known answers for the isolated modes on every backend: fwd, vjp and vjp2 of MatMul, Mul with a
broadcast scale, and Tanh, against formulas worked out by hand and evaluated in float64.

For y = f(x) with cotangent g and directions u, vjp is h_i = (df/dx_i)^T g, and vjp2 is
(ds/dx_i, ds/dg) with s = sum_i <h_i, u_i> (docs/report.md). Planted-bug tests show a bug is found;
these show a clean result is right, on each backend's own worker."""
import base64

import numpy as np
import pytest
from onnx import TensorProto, helper

from irtrace.ir.spec import node_specs
from irtrace.replay import backends as registry
from irtrace.replay.worker import WorkerProxy

RNG = np.random.default_rng(11)
A, B = RNG.standard_normal((2, 3)), RNG.standard_normal((3, 4))
G = RNG.standard_normal((2, 4))
UA, UB = RNG.standard_normal((2, 3)), RNG.standard_normal((3, 4))
X, S = RNG.standard_normal((2, 3)), RNG.standard_normal(3)
GX, UX, US = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3)), RNG.standard_normal(3)


def _cases():
    """(op, inputs, cotangents, directions, {mode: expected results}) with the answers by hand."""
    y = np.tanh(X)
    return {
        "MatMul": ((A, B), (G,), (UA, UB), {
            "fwd": [A @ B],
            "vjp": [G @ B.T, A.T @ G],
            # s = <G B^T, uA> + <A^T G, uB>: ds/dA = G uB^T, ds/dB = uA^T G, ds/dG = uA B + A uB
            "vjp2": [G @ UB.T, UA.T @ G, UA @ B + A @ UB]}),
        "Mul": ((X, S), (GX,), (UX, US), {
            "fwd": [X * S],
            "vjp": [GX * S, (GX * X).sum(axis=0)],                     # the scale's gradient sums the batch
            # s = <GX S, uX> + <sum_n GX X, uS>: ds/dX = GX uS, ds/dS = sum_n GX uX, ds/dG = uX S + X uS
            "vjp2": [GX * US, (GX * UX).sum(axis=0), UX * S + X * US]}),
        "Tanh": ((X,), (GX,), (UX,), {
            "fwd": [y],
            "vjp": [GX * (1 - y * y)],
            # s = <GX (1 - y^2), uX>: ds/dX = -2 y (1 - y^2) GX uX, ds/dG = (1 - y^2) uX
            "vjp2": [-2 * y * (1 - y * y) * GX * UX, (1 - y * y) * UX]}),
    }


def _spec(op, n_inputs):
    names = [f"in{i}" for i in range(n_inputs)]
    node = helper.make_node(op, names, ["out0"], name=op.lower())
    model = helper.make_model(helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names],
        [helper.make_tensor_value_info("out0", TensorProto.FLOAT, None)]), opset_imports=[helper.make_opsetid("", 17)])
    (spec,) = node_specs(model)
    return {**spec.to_json(), "proto": base64.b64encode(node.SerializeToString()).decode(), "out_dtypes": ["<f4"]}


def _backends():
    return [n for n, i in registry.BACKENDS.items() if i.modes and i.unavailable() is None
            and not n.startswith("planted")]


@pytest.fixture(scope="module")
def workers():
    started = {}
    yield started
    for w in started.values():
        w.close()


@pytest.mark.parametrize("backend", _backends())
def test_fwd_vjp_vjp2_by_hand(workers, backend):
    if backend not in workers:
        workers[backend] = WorkerProxy(registry.get(backend))
        workers[backend].start()
    w = workers[backend]
    f32 = lambda xs: [np.asarray(x, np.float32) for x in xs]  # noqa: E731
    checked = 0
    for op, (inputs, cots, us, expected) in _cases().items():
        for mode in w.hello["modes"]:
            arrays = f32(inputs) + (f32(cots) if mode != "fwd" else []) + (f32(us) if mode == "vjp2" else [])
            reply, out = w.call({"kind": "run", "mode": mode, "spec": _spec(op, len(inputs))}, arrays, 60.0)
            assert reply["status"] == "ok", (backend, op, mode, reply.get("message"))
            for k, want in enumerate(expected[mode]):
                got = np.asarray(out[k], np.float64)
                scale = max(float(np.abs(want).max()), 1.0)
                assert got.shape == want.shape, (backend, op, mode, k, got.shape)
                assert np.allclose(got, want, rtol=1e-5, atol=1e-5 * scale), \
                    (backend, op, mode, k, float(np.abs(got - want).max()))
                checked += 1
    # every result of every mode the backend computes: 3 forwards, and 21 with vjp and vjp2
    assert checked == sum(len(e[m]) for *_, e in _cases().values() for m in w.hello["modes"])
