"""The float32 rounding estimate (Monte Carlo arithmetic, backends/oracle/rounding.py) and the verdicts
it feeds: real float32 torch results with heavy cancellation are NOISE, real divergences stay
DIVERGENT. The exact answers are float64 torch on the same float32 inputs."""
from pathlib import Path

import numpy as np
import pytest
import torch

from backends.oracle.model import rounding_size
from backends.oracle.rounding import Float32Rounding, spread
from irtrace import compare


def _sigmoid_vjp2(x, g, u, dtype):
    t = torch.tensor(x, dtype=dtype, requires_grad=True)
    gt = torch.tensor(g, dtype=dtype, requires_grad=True)
    h, = torch.autograd.grad(torch.sigmoid(t), t, gt, create_graph=True)
    d = torch.autograd.grad((h * torch.tensor(u, dtype=dtype)).sum(), [t, gt])
    return [a.detach().numpy().astype(np.float64) for a in d]


@pytest.fixture(scope="module")
def sigmoid_case():
    rng = np.random.default_rng(0)
    # an SE gate of a freshly initialised EfficientNet (torchvision, seed 0): every pre-activation
    # within 2e-4 of 0, where 1 - 2 sigmoid(x) cancels, and cotangents of 1e-13
    x = (rng.standard_normal((2, 96, 1, 1)) * 1e-4).astype(np.float32)
    g = (rng.standard_normal(x.shape) * 1e-13).astype(np.float32)
    u = rng.standard_normal(x.shape).astype(np.float32)
    exact = _sigmoid_vjp2(x, g, u, torch.float64)
    f32 = _sigmoid_vjp2(x, g, u, torch.float32)
    est = spread(lambda: _sigmoid_vjp2(x, g, u, torch.float64))
    return exact, f32, est


def test_monte_carlo_estimate_has_the_size_of_real_float32_rounding(sigmoid_case):
    exact, f32, est = sigmoid_case
    ratios = [float(np.abs(a - e).max() / s.max()) for e, a, s in zip(exact, f32, est)]
    # the real worst error has the estimate's size where rounding dominates (d2x), and is below it
    # where the formula rounds a few times only (d2g = u sigmoid'(x))
    assert 0.2 < ratios[0] < 2.0 and ratios[1] < 1.0, ratios


def test_torch_float32_sigmoid_second_derivative_is_noise_not_divergent(sigmoid_case):
    exact, f32, est = sigmoid_case
    d2x, s = f32[0], est[0]
    plain, _, _ = compare.judge_reference(d2x, exact[0])
    # the ULP floor of the output's scale alone calls this float32 result divergent...
    assert plain == compare.DIVERGENT
    verdict, _, details = compare.judge_reference(d2x, exact[0], spread=s)
    assert verdict == compare.NOISE
    assert details["float32_rounding"] == pytest.approx(float(s.max()))
    assert details["allowed"] == pytest.approx(8 * float(s.max()))


def test_a_real_divergence_stays_divergent_beside_the_estimate(sigmoid_case):
    exact, f32, est = sigmoid_case
    d2x, s = f32[0], est[0]
    # float32 itself is off by ~1e-3 relative here (1 - 2 sigmoid(x) keeps 3 digits): what is beyond it
    for wrong in (d2x * 1.05,                                          # a scale off by 5%
                  np.where(np.arange(d2x.size).reshape(d2x.shape) == 7, 0.0, d2x),   # one element lost
                  -d2x):                                                # a sign
        assert compare.judge_reference(wrong, exact[0], spread=s)[0] == compare.DIVERGENT
        assert compare.judge(wrong, d2x, exact[0], spread=s)[0] == compare.DIVERGENT


def _batch_norm(x, dtype):
    t = torch.tensor(x, dtype=dtype)
    return [torch.nn.functional.batch_norm(t, None, None, training=True, eps=1e-5).numpy().astype(np.float64)]


def test_train_batch_norm_over_two_values_is_rounding_but_a_biased_variance_is_not():
    rng = np.random.default_rng(1)
    # two values per channel that agree to 4 digits: x - mean cancels
    base = rng.standard_normal((1, 8, 1, 1)).astype(np.float32) * 100
    x = np.concatenate([base, base + rng.standard_normal(base.shape).astype(np.float32) * 0.1])
    exact, f32 = _batch_norm(x, torch.float64)[0], _batch_norm(x, torch.float32)[0]
    est = spread(lambda: _batch_norm(x, torch.float64))[0]
    assert compare.judge_reference(f32, exact)[0] == compare.DIVERGENT
    assert compare.judge_reference(f32, exact, spread=est)[0] in (compare.MATCH, compare.NOISE)
    # the same op with the running (unbiased) variance in the normalization: sqrt(2) off, found
    t = torch.tensor(x)
    wrong = ((t - t.mean((0, 2, 3), keepdim=True)) / torch.sqrt(t.var((0, 2, 3), keepdim=True) + 1e-5)).numpy()
    assert compare.judge_reference(wrong, exact, spread=est)[0] == compare.DIVERGENT


def test_exact_ops_are_not_perturbed_and_the_estimate_is_deterministic():
    x = torch.tensor(np.arange(12.0).reshape(3, 4))
    with Float32Rounding(0):
        moved = torch.cat([x.t().reshape(-1), torch.nn.functional.pad(x, (1, 1)).amax(1), -x.abs()[0]])
        summed = (x * 3.0).sum()
    np.testing.assert_array_equal(moved.numpy(), np.concatenate([x.t().reshape(-1).numpy(), [3, 7, 11],
                                                                 -x[0].numpy()]))
    assert summed.item() != 198.0 and abs(summed.item() - 198.0) < 2 * 1.2e-7 * 198
    run = lambda: [np.asarray(x.numpy() * 1.7)]  # noqa: E731
    assert spread(lambda: [(x * 1.7).numpy()])[0].max() == spread(lambda: [(x * 1.7).numpy()])[0].max() > 0
    assert spread(run)[0].max() == 0.0  # numpy arithmetic never passes through torch: nothing to perturb


def test_a_sum_whose_first_term_dominates_rounds_once_per_term_added():
    """The rounding model by hand: b + t_1 + ... + t_4096 summed in float32 in that order (a
    bias first, as a convolution's accumulator starts), with |b| far above every t_k. M^2/Q counts ~1
    term, but each of the 4096 additions rounds at the scale of |y|: the error (float64 exact sum, numpy
    float32 scalar additions: no BLAS) exceeds the bound c eps sqrt(M^2/Q) max(|y|, sqrt Q) that counts terms by M^2/Q, and is
    within c eps sqrt(N) max(|y|, sqrt Q) with N = 4096 + 1 nonzero terms."""
    rng = np.random.default_rng(2)
    t = (rng.standard_normal(4096) * 1e-6).astype(np.float32)
    acc = b = np.float32(-0.75)
    for v in t:
        acc = np.float32(acc + v)
    terms = np.concatenate([[np.float64(b)], t.astype(np.float64)])
    exact = np.array([terms.sum()])
    err = abs(float(acc) - exact[0])
    m, q, n = np.array([np.abs(terms).sum()]), np.array([np.square(terms).sum()]), np.array([4097.0])
    assert err > float(compare.rounding_bound(rounding_size((m, q), exact))[0]) * 3  # counting terms by M^2/Q: 3.8x too tight
    assert err < float(compare.rounding_bound(rounding_size((m, q, n), exact))[0]) / 10


def test_ghostnet_conv_head_in_float32_torch_is_noise(tmp_path):
    """The rounding model on recorded data: timm GhostNet's conv_head (1x1 over 960 channels of small ReLU'd means,
    a bias that dominates; 8 of its 1280 output channels, those a bound counting terms by M^2/Q fails
    worst, at 1.05x that bound) in a correct float32 torch. Its fwd, vjp and vjp2 are MATCH or NOISE,
    and every row's error is within its allowance."""
    from onnx import TensorProto, helper, numpy_helper

    from irtrace.export.onnx_bundle import bundle_from_onnx
    from irtrace.replay import ReplayOptions
    from irtrace.report.folder import replay_into
    d = np.load(Path(__file__).parent / "fixtures" / "ghostnet_conv_head.npz")
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv_head", kernel_shape=[1, 1])
    graph = helper.make_graph([node], "conv_head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 960, 1, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(d["w"], "w"), numpy_helper.from_array(d["b"], "b")])
    b = bundle_from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), {"x": d["x"]},
                         tmp_path / "c.irt", trained=["x", "w", "b"])
    report = replay_into(b.path, ReplayOptions.parse("torch", "fwd,vjp,vjp2"), out=tmp_path / "r").json
    rows = [r for n in report["nodes"] for r in n["results"]]
    assert len(rows) >= 7 and {r["verdict"] for r in rows} <= {"MATCH", "NOISE"}, rows
    assert all(r["backend_oracle_abs"] <= r["allowed"] for r in rows if r["verdict"] == "NOISE")


@pytest.mark.parametrize("n", [12, 1 << 13])  # judged whole, and by the block sweep
@pytest.mark.parametrize("who", ["backend", "reference"])
def test_a_divergent_verdict_never_shows_an_allowance_above_its_error(n, who):
    """The rounding bound is per element; a DIVERGENT result must not show the largest bound as its
    allowance, above the error it prints. Element 0 has a large bound and a small error, element 1 a
    small bound and an error above it (below element 0's bound): the allowance shown is element 1's."""
    o = np.linspace(1.0, 2.0, n)
    m, q = np.abs(o) * 1.0, np.square(o)
    m[0] = 1e4 * abs(o[0])  # many cancelling terms at element 0: a large bound there
    size = rounding_size((m, q), o)
    bound = compare.rounding_bound(size)
    a = o.copy()
    a[1] += 3 * bound[1]
    a = a.astype(np.float32)
    if who == "backend":
        verdict, met, details = compare.judge(a, o.astype(np.float32), o, model=size, full=False)
        err = details["backend_oracle_abs"]
    else:
        verdict, met, details = compare.judge_reference(a, o, model=size, full=False)
        err = details["oracle_abs"]
    assert verdict == compare.DIVERGENT and err > details["allowed"], details
    assert details["allowed"] < float(np.max(bound)) / 100


def test_the_oracle_answers_one_size_per_result_rounded_up_to_float32():
    """backends/oracle/model.py by hand: size = sqrt(max(N, M^2/Q, 1)) max(|y|, sqrt(Q)), 0 where not
    finite; kept in float32 rounded up (never narrower, at most one float32 ULP wider), in float64 where
    a size does not fit float32."""
    from backends.oracle.model import rounded_up
    m, q, n = np.array([4.0, 3.0, 0.0, np.inf]), np.array([4.0, 1.0, 0.0, 1.0]), np.array([1.0, 2.0, 0.0, 1.0])
    y = np.array([2.0, -0.5, 0.0, 1.0])
    size = rounding_size((m, q, n), y)
    assert size.tolist() == [2.0 * 2.0, 3.0 * 1.0, 0.0, 0.0]  # n = M^2/Q = 4; n = 9 > N; empty; M infinite
    assert rounding_size((m, q), y).tolist() == size.tolist()
    assert rounding_size((m[:2], q[:2]), y) is None  # not shaped like the result: no model
    third, tiny = np.array([1.0 / 3.0, 1e-300, 0.0, 2.0 ** -10]), np.float32(2.0 ** -149)
    up = rounded_up(third)
    assert up.dtype == np.float32 and up[0] > third[0] and up[0] - third[0] < 2.0 ** -24
    assert up[1] == tiny and up[2] == 0.0 and up[3] == 2.0 ** -10  # subnormal up; exact values kept
    assert rounded_up(np.array([1e39, 1.0])).dtype == np.float64


def _oracle_size(tmp_path, node, feeds):
    """(the reply, the arrays) of the oracle's worker asked for the rounding model alone of `node`'s
    forward on `feeds` ({name: float32 array})."""
    import base64

    from onnx import TensorProto, helper

    from irtrace.export.onnx_bundle import bundle_from_onnx
    from irtrace.ir.spec import node_specs
    from irtrace.replay import backends
    from irtrace.replay.call import bundle_paths
    from irtrace.replay.judge import model_call
    from irtrace.replay.plan import mode_calls
    from irtrace.replay.worker import WorkerProxy
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape))
                                            for k, v in feeds.items()],
                              [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)])
    tmp_path.mkdir(parents=True, exist_ok=True)
    b = bundle_from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), feeds,
                         tmp_path / "g.irt")
    (spec,) = node_specs(b.model)
    proto = base64.b64encode(b.model.graph.node[0].SerializeToString()).decode()
    (call,), _ = mode_calls(b, spec, ("fwd",), bundle_paths(b), proto)
    worker = WorkerProxy(backends.get("oracle"))
    worker.start()
    try:
        return worker.call(model_call(call).message(), model_call(call).arrays(), 60)
    finally:
        worker.close()


def _up(v):
    """`v` in float32, rounded up."""
    f = np.float32(v)
    return f if float(f) >= v else np.nextafter(f, np.float32(np.inf))


def test_the_oracle_worker_sizes_a_matmul_by_hand_and_sends_its_extra_alone(tmp_path):
    """The oracle's worker, asked for the rounding model alone (magnitude, extra_only): no results, one
    size per result. MatMul of [1.5, -2, 0] and [2, 0.5, 4]: terms 3, -1, 0, so y = 2, M = 4, Q = 10,
    N = 2 nonzero terms, n = max(N, M^2/Q = 1.6) = 2, size = sqrt(2) max(|y|, sqrt(10)) = sqrt(20), in
    float32 rounded up."""
    from onnx import helper
    x, w = np.array([[1.5, -2.0, 0.0]], np.float32), np.array([[2.0], [0.5], [4.0]], np.float32)
    reply, arrays = _oracle_size(tmp_path, helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"), {"x": x, "w": w})
    assert reply["status"] == "ok" and reply["extra"] == {"magnitude": [1]}, reply
    (size,) = arrays  # the size alone: the results are not sent again
    assert size.dtype == np.float32 and size.shape == (1, 1) and size[0, 0] == _up(np.sqrt(20.0))


def test_an_average_is_sized_as_the_sum_of_its_terms_x_over_count(tmp_path):
    """An average's terms are x_k / count: ReduceMean of [1, 2, 3, 4] sums 1/4, 2/4, 3/4, 4/4, so y = 2.5,
    M = 2.5, Q = 30/16, N = 4, n = max(4, M^2/Q = 3.33) = 4, size = 2 max(2.5, sqrt(30/16)) = 5. (The
    op run on the squares and the indicators gives 30/4 and 1: size max(2.5, sqrt(7.5)) = 2.74 without the
    count, and Paddle's sequential float32 mean of a timm nf_resnet26 weight, 2,304 terms, was called
    DIVERGENT at 1.2x a bound 48x too tight.) A 2x2 AveragePool of [[1, 2], [3, 4]] the same."""
    from onnx import helper
    x = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
    reply, (size,) = _oracle_size(tmp_path / "mean", helper.make_node("ReduceMean", ["x"], ["y"], name="mean",
                                                                      keepdims=0), {"x": x})
    assert reply["status"] == "ok" and size.shape == () and size == _up(5.0), (reply, size)
    reply, (size,) = _oracle_size(tmp_path / "pool", helper.make_node("AveragePool", ["x"], ["y"], name="pool",
                                                                      kernel_shape=[2, 2]),
                                  {"x": x.reshape(1, 1, 2, 2)})
    assert reply["status"] == "ok" and size.shape == (1, 1, 1, 1) and size[0, 0, 0, 0] == _up(5.0), (reply, size)


def _prod_vjp2(prod, x, g, u, dtype):
    """ds/dx of s = <d prod(x)/dx^T g, u>, prod over axis 0 of a one-element x."""
    t = torch.tensor(x, dtype=dtype, requires_grad=True)
    h, = torch.autograd.grad(prod(t, (0,), False), t, torch.tensor(g, dtype=dtype), create_graph=True)
    if not h.requires_grad:  # torch's formula for an axis of length 1: grad as it is, no second derivative
        return np.zeros(np.shape(x))
    d, = torch.autograd.grad((h * torch.tensor(u, dtype=dtype)).sum(), t)
    return d.detach().numpy().astype(np.float64)


def test_a_prod_over_one_element_rounds_as_a_division_does_in_double_backward():
    """prod over an axis of length 1: torch's gradient is grad itself (no second derivative: exactly 0), but
    the formula frameworks also use, grad * y / x, has the second derivative g u (1/x - x/x^2), 0 in float64
    and a rounding in float32 (OneFlow 0.9: 5.96e-8 at x = 1.948, g = 1, u = 2.04, which irtrace fuzz called
    DIVERGENT against an allowance of 1e-38). The estimate is the larger formula's: eps/2 |g u / x| per
    rounding, so that float32 result is NOISE; a gradient off by a term of its size stays DIVERGENT."""
    from backends.oracle.rounding import _prod_by_division
    from backends.torch.ops.reduce import _prod
    x, g, u = np.array([1.9484059], np.float32), np.float32(1.0), np.array([2.040919], np.float32)
    assert _prod_vjp2(_prod, x, g, u, torch.float64).tolist() == [0.0]
    assert spread(lambda: [_prod_vjp2(_prod, x, g, u, torch.float64)])[0].tolist() == [0.0]
    exact = _prod_vjp2(_prod_by_division, x, g, u, torch.float64)
    assert abs(exact[0]) < 1e-15  # the same derivative in float64: 0 but for float64's own rounding
    est = spread(lambda: [_prod_vjp2(_prod_by_division, x, g, u, torch.float64)], exact=[np.zeros(1)])[0]
    scale = float(g * u[0] / x[0])
    assert scale * 2.0 ** -26 < est[0] < 4 * scale * 2.0 ** -24, est
    f32 = _prod_vjp2(_prod_by_division, x, g, u, torch.float32)
    oneflow = np.array([5.960464477539063e-08])
    for got in (f32, oneflow):
        assert compare.judge(got, np.zeros(1), np.zeros(1), spread=est)[0] in (compare.MATCH, compare.NOISE), got
    assert compare.judge(oneflow, np.zeros(1), np.zeros(1))[0] == compare.DIVERGENT  # without the estimate
    assert compare.judge(np.array([scale]), np.zeros(1), np.zeros(1), spread=est)[0] == compare.DIVERGENT
