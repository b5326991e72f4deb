"""The float32 rounding estimate (Monte Carlo arithmetic, backends/oracle/rounding.py) and the verdicts
it feeds: real float32 torch results with heavy cancellation are NOISE, real divergences stay
DIVERGENT. The exact answers are float64 torch on the same float32 inputs."""
import numpy as np
import pytest
import torch

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
