"""Known answers for chained runs: on small graphs, every chained backend's loss gradients (plain
loss and gradient penalty) equal values computed independently in float64 — by hand for y = x * w,
by central finite differences of a numpy float64 loss for a conv and for matmul + bias + tanh.

Planted-bug tests show a bug is found; only these show that a clean chained result is right (a
MegEngine chain that silently dropped the penalty term passed every planted-bug test)."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from irtrace.export.onnx_bundle import bundle_from_onnx
from irtrace.replay import backends as registry
from irtrace.replay.chained import chain_request, run_chain
from irtrace.replay.execute import WorkerPool
from irtrace.store import seed_name

RNG = np.random.default_rng(7)
# float32 arithmetic against a float64 answer: a few ULP of the largest term per element
RTOL, ATOL_SCALE = 2e-5, 2e-6


def _chained_backends():
    import planted_backend
    for bug in ("f64", "pad"):
        planted_backend.register(bug)
    return [n for n, i in registry.BACKENDS.items() if i.chained and i.role != registry.ORACLE
            and i.unavailable() is None]


BACKENDS = _chained_backends()


@pytest.fixture(scope="module")
def pool():
    p = WorkerPool()
    yield p
    p.close()


def _model(nodes, inputs, output, inits):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _fd_grad(loss, params, name, eps=1e-6):
    """Central finite differences in float64 of loss(params) with respect to params[name]."""
    p = {k: v.astype(np.float64).copy() for k, v in params.items()}
    g = np.zeros_like(p[name])
    for i in np.ndindex(g.shape):
        old = p[name][i]
        p[name][i] = old + eps
        up = loss(p)
        p[name][i] = old - eps
        down = loss(p)
        p[name][i] = old
        g[i] = (up - down) / (2 * eps)
    return g


def _assert_close(got, want, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    tol = RTOL * np.abs(want) + ATOL_SCALE * max(np.abs(want).max(), 1.0)
    bad = np.abs(got - want) > tol
    assert not bad.any(), f"{what}: got {got[bad][:4]} expected {want[bad][:4]} (max abs {np.abs(got - want).max():.3g})"


# --- y = x * w: by hand --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mul_bundle(tmp_path_factory):
    model = _model([helper.make_node("Mul", ["x", "w"], ["y"], name="mul")], [("x", [3])], "y",
                   {"w": np.array([0.5, -1.0, 2.0])})
    return bundle_from_onnx(model, {"x": np.array([1.0, 2.0, 3.0], np.float32)},
                            tmp_path_factory.mktemp("mul") / "mul.irt")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("loss", ["bundle", "grad-penalty"])
def test_mul_by_hand(mul_bundle, pool, backend, loss):
    request = chain_request(mul_bundle, loss)
    status, reply, values, grads = run_chain(pool, backend, request)
    assert status == "ok", reply.get("message")
    x, w = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    c = np.asarray(mul_bundle.values[seed_name("y")], np.float64)
    # L = <x*w, c> (+ ||dL/dx||^2 = ||w*c||^2 for the penalty)
    dw = x * c + (2 * w * c * c if loss == "grad-penalty" else 0)
    _assert_close(values["y"], x * w, f"{backend} y")
    _assert_close(grads["w"], dw, f"{backend} dL/dw ({loss})")
    _assert_close(grads["x"], w * c, f"{backend} dL/dx ({loss})")
    _assert_close(grads["y"], c, f"{backend} dL/dy ({loss})")


def test_mul_penalty_changes_the_weight_gradient(mul_bundle):
    """The penalty term is not negligible here, so a chain that drops it cannot pass the test above."""
    c = np.asarray(mul_bundle.values[seed_name("y")], np.float64)
    assert np.abs(2 * np.array([0.5, -1.0, 2.0]) * c * c).max() > 0.1


# --- conv: finite differences of a numpy float64 loss ---------------------------------------------
def _conv(x, w, b, pad):
    n, ci, h, wd = x.shape
    co, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    y = np.zeros((n, co, oh, ow))
    for i in range(oh):
        for j in range(ow):
            y[:, :, i, j] = np.einsum("nchw,ochw->no", xp[:, :, i:i + kh, j:j + kw], w)
    return y + b.reshape(1, -1, 1, 1)


def _conv_input_grad(c, w, x_shape, pad):
    """d<conv(x), c>/dx: the adjoint of _conv, written out (scatter every window back)."""
    n, ci, h, wd = x_shape
    _, _, kh, kw = w.shape
    g = np.zeros((n, ci, h + 2 * pad, wd + 2 * pad))
    for i in range(c.shape[2]):
        for j in range(c.shape[3]):
            g[:, :, i:i + kh, j:j + kw] += np.einsum("no,ochw->nchw", c[:, :, i, j], w)
    return g[:, :, pad:pad + h, pad:pad + wd]


@pytest.fixture(scope="module")
def conv_case(tmp_path_factory):
    params = {"x": RNG.standard_normal((1, 2, 5, 5)), "W": RNG.standard_normal((3, 2, 3, 3)) * 0.5,
              "B": RNG.standard_normal(3)}
    model = _model([helper.make_node("Conv", ["x", "W", "B"], ["y"], name="conv", pads=[1, 1, 1, 1])],
                   [("x", [1, 2, 5, 5])], "y", {"W": params["W"], "B": params["B"]})
    b = bundle_from_onnx(model, {"x": params["x"].astype(np.float32)}, tmp_path_factory.mktemp("conv") / "c.irt")
    return b, {k: v.astype(np.float32).astype(np.float64) for k, v in params.items()}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("loss", ["bundle", "grad-penalty"])
def test_conv_against_float64_finite_differences(conv_case, pool, backend, loss):
    bundle, params = conv_case
    c = np.asarray(bundle.values[seed_name("y")], np.float64)

    def total(p):
        d = np.sum(_conv(p["x"], p["W"], p["B"], 1) * c)
        return d + (np.sum(_conv_input_grad(c, p["W"], p["x"].shape, 1) ** 2) if loss == "grad-penalty" else 0)
    status, reply, values, grads = run_chain(pool, backend, chain_request(bundle, loss))
    assert status == "ok", reply.get("message")
    results = {name: np.allclose(grads[name], _fd_grad(total, params, name), rtol=1e-4,
                                 atol=1e-4 * np.abs(_fd_grad(total, params, name)).max())
               for name in ("W", "B", "x")}
    if backend == "planted-pad":  # its conv pads on the wrong side: the known answer must catch it
        assert not results["W"] and not results["x"], results
        return
    for name in ("W", "B", "x"):
        _assert_close(grads[name], _fd_grad(total, params, name), f"{backend} dL/d{name} ({loss})")


# --- matmul + bias + tanh ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mlp_case(tmp_path_factory):
    params = {"x": RNG.standard_normal((2, 4)), "W": RNG.standard_normal((4, 3)) * 0.7, "B": RNG.standard_normal(3)}
    nodes = [helper.make_node("MatMul", ["x", "W"], ["t"], name="mm"),
             helper.make_node("Add", ["t", "B"], ["u"], name="add"),
             helper.make_node("Tanh", ["u"], ["y"], name="tanh")]
    model = _model(nodes, [("x", [2, 4])], "y", {"W": params["W"], "B": params["B"]})
    b = bundle_from_onnx(model, {"x": params["x"].astype(np.float32)}, tmp_path_factory.mktemp("mlp") / "m.irt")
    return b, {k: v.astype(np.float32).astype(np.float64) for k, v in params.items()}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("loss", ["bundle", "grad-penalty"])
def test_matmul_bias_tanh_against_float64_finite_differences(mlp_case, pool, backend, loss):
    bundle, params = mlp_case
    c = np.asarray(bundle.values[seed_name("y")], np.float64)

    def total(p):
        y = np.tanh(p["x"] @ p["W"] + p["B"])
        d = np.sum(y * c)
        dx = ((1 - y * y) * c) @ p["W"].T
        return d + (np.sum(dx * dx) if loss == "grad-penalty" else 0)
    status, reply, values, grads = run_chain(pool, backend, chain_request(bundle, loss))
    assert status == "ok", reply.get("message")
    for name in ("W", "B", "x"):
        _assert_close(grads[name], _fd_grad(total, params, name), f"{backend} dL/d{name} ({loss})")


@pytest.mark.parametrize("loss", ["dot", "grad-penalty"])
def test_recorded_cotangents_by_hand(tmp_path, loss):
    """The bundle's own grad/<value> (what isolated vjp replays are fed) under each export loss:
    L = <x*w, c> (+ ||w*c||^2), so grad/y = c, grad/w = x*c (+ 2*w*c^2), grad/x = w*c. torch's
    retain_grad hooks also fire inside autograd.grad, which would double grad/y under the penalty."""
    model = _model([helper.make_node("Mul", ["x", "w"], ["y"], name="mul")], [("x", [3])], "y",
                   {"w": np.array([0.5, -1.0, 2.0])})
    b = bundle_from_onnx(model, {"x": np.array([1.0, 2.0, 3.0], np.float32)}, tmp_path / "m.irt", loss=loss)
    x, w = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    c = np.asarray(b.values[seed_name("y")], np.float64)
    _assert_close(b.values["grad/y"], c, "grad/y")
    _assert_close(b.values["grad/w"], x * c + (2 * w * c * c if loss == "grad-penalty" else 0), "grad/w")
    _assert_close(b.values["grad/x"], w * c, "grad/x")


# --- the float32 rounding estimate of a chain ------------------------------------------------------
def test_chain_rounding_estimate_has_the_size_of_float32_rounding(tmp_path, pool):
    """(x + 1e4) - 1e4 loses x's low digits in float32: about u * 1e4 per element (u = 2^-24). The
    oracle's Monte Carlo estimate of the whole chain (asked once, the first time a chained verdict
    would be DIVERGENT) has that size, and torch's float32 chain is off by no more than it."""
    from irtrace import compare
    from irtrace.replay.chained import ChainRounding
    x = RNG.standard_normal((1, 512)).astype(np.float32)
    model = _model([helper.make_node("Add", ["x", "big"], ["up"], name="up"),
                    helper.make_node("Sub", ["up", "big"], ["y"], name="down")], [("x", [1, 512])], "y",
                   {"big": np.array(1e4)})
    bundle = bundle_from_onnx(model, {"x": x}, tmp_path / "y.irt")
    request = chain_request(bundle, "bundle")
    _, _, ref, _ = run_chain(pool, "torch", request)
    _, _, exact, _ = run_chain(pool, "oracle", request)
    np.testing.assert_array_equal(exact["y"], x.astype(np.float64))  # float64 keeps every digit
    moved = ChainRounding(pool, request, 120).get("values", "y")
    u = 2.0 ** -24
    assert moved.shape == x.shape and 0.3 * u * 1e4 < moved.max() <= 2 * u * 1e4 * 1.001
    torch_err = np.abs(ref["y"] - exact["y"]).max()
    assert 0.3 * u * 1e4 < torch_err <= moved.max() * 1.5
    # judged: torch's own error is the yardstick here, so a backend 3x the estimate off is NOISE,
    # one 5% off is DIVERGENT
    assert compare.judge(ref["y"] + 3 * moved, ref["y"], exact["y"], spread=moved)[0] == compare.NOISE
    assert compare.judge(exact["y"] * 1.05, ref["y"], exact["y"], spread=moved)[0] == compare.DIVERGENT
