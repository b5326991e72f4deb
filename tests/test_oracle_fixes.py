"""The float64 oracle is not weaker than the reference: where onnx.reference 1.23 raises on a valid
node torch runs (or is wrong), the oracle's own implementation (backends/oracle/reference_fixes.py)
gives the answer, checked here against answers computed element by element in plain Python; its
gradients (torch float64) pass its finite-difference check. The same cases run through replay from
tests/op_cases.py (tests/test_op_cases.py)."""
import base64
import itertools

import numpy as np
import pytest
from onnx import TensorProto, helper

RNG = np.random.default_rng(26)


def _spec(op, n_inputs, n_outputs=1, opset=20, absent=(), **attrs):
    from backends._runtime.spec import WorkerSpec
    from irtrace.ir.spec import decode_attrs
    names = ["" if k in absent else f"in{k}" for k in range(n_inputs)]
    outs = [f"out{k}" for k in range(n_outputs)]
    node = helper.make_node(op, names, outs, name=op.lower(), **attrs)
    return WorkerSpec(node.name, op, "", opset, tuple(names), tuple(outs), decode_attrs(node),
                      base64.b64encode(node.SerializeToString()).decode())


@pytest.fixture(scope="module")
def oracle():
    from backends.oracle.worker import OracleAdapter
    return OracleAdapter()


def _gather_by_hand(x, idx, axis):
    out = np.empty(idx.shape)
    for pos in itertools.product(*map(range, idx.shape)):
        src = list(pos)
        src[axis] = idx[pos] % x.shape[axis]
        out[pos] = x[tuple(src)]
    return out


def _scatter_add_by_hand(shape, idx, g, axis):
    out = np.zeros(shape)
    for pos in itertools.product(*map(range, idx.shape)):
        src = list(pos)
        src[axis] = idx[pos] % shape[axis]
        out[tuple(src)] += g[pos]
    return out


def test_gather_elements_smaller_indices_deberta(oracle):
    """DeBERTa-v2's relative attention: torch.gather(x, -1, idx), idx smaller than x on every axis.
    onnx.reference raised "Except for dimension -1, all dimensions of index and self should be the
    same size" (ERROR oracle GatherElements fwd, exit 1, with torch and onnxruntime right). fwd, vjp
    (a scatter-add) and vjp2 (GatherElements is linear: ds/dx = 0, ds/dg = the gather of u) against
    answers by hand, and the oracle's finite-difference check passes on both gradients."""
    x = RNG.standard_normal((2, 3, 5))
    idx = RNG.integers(-5, 5, (2, 2, 3))
    g, u = RNG.standard_normal((2, 2, 3)), RNG.standard_normal((2, 3, 5))
    spec = _spec("GatherElements", 2, axis=-1)
    entry = oracle.lookup(spec)
    (y,) = oracle.fwd(entry, [x, idx], spec)
    assert y.dtype == np.float64 and np.array_equal(y, _gather_by_hand(x, idx, 2))
    dx, didx = oracle.vjp(entry, [x, idx], spec, [g])
    assert didx is None and np.allclose(dx, _scatter_add_by_hand(x.shape, idx, g, 2), rtol=0, atol=1e-12)
    assert oracle.last_check["verified"] is True, oracle.last_check
    (d2x, d2idx), (d2g,) = oracle.vjp2(entry, [x, idx], spec, [g], [u, None])
    assert np.array_equal(d2x, np.zeros_like(x)) and d2idx is None
    assert np.allclose(d2g, _gather_by_hand(u, idx, 2), rtol=0, atol=1e-12)
    assert oracle.last_check["verified"] is True, oracle.last_check


@pytest.mark.parametrize("data_shape, idx_shape, axis", [
    ((2, 70), (2, 70), 1),     # np.choose picks among at most 32 (numpy 1) or 64 (numpy 2) positions
    ((300, 3), (5, 2), 0),     # and smaller on the other axis
    ((4, 6), (2, 3), -1),
    ((3, 4, 5), (1, 4, 2), -2),
    ((4, 3), (4, 7), 1),       # longer along the axis is allowed too
    ((2, 3), (2, 0), 1),       # empty
])
def test_gather_elements_shapes(oracle, data_shape, idx_shape, axis):
    x = RNG.standard_normal(data_shape)
    n = data_shape[axis]
    idx = RNG.integers(-n, n, idx_shape)
    spec = _spec("GatherElements", 2, axis=axis)
    (y,) = oracle.fwd(oracle.lookup(spec), [x, idx], spec)
    assert np.array_equal(y, _gather_by_hand(x, idx, axis % len(data_shape)))


def test_pad_negative_widths_crop_and_0d(oracle):
    """F.pad with negative widths crops (torch and onnxruntime do the same); np.pad raised. A 0-d
    input with no pads is itself."""
    x = RNG.standard_normal((4, 6, 5))
    pads = np.array([0, -1, 1, 0, 2, -2])  # axis 1: drop 1 at the start, add 2 at the end; axis 2: +1, -2
    for mode in ("constant", "reflect", "edge"):
        spec = _spec("Pad", 3, mode=mode)
        (y,) = oracle.fwd(oracle.lookup(spec), [x, pads, np.array(0.5)], spec)
        crop = x[:, 1:, :3]
        want = {"constant": np.pad(crop, [(0, 0), (0, 2), (1, 0)], constant_values=0.5),
                "reflect": np.pad(crop, [(0, 0), (0, 2), (1, 0)], mode="reflect"),
                "edge": np.pad(crop, [(0, 0), (0, 2), (1, 0)], mode="edge")}[mode]
        assert y.shape == (4, 7, 4) and np.array_equal(y, want), mode
    spec = _spec("Pad", 4, mode="constant")  # axes (negative) as an input, opset 18 on
    (y,) = oracle.fwd(oracle.lookup(spec), [x, np.array([1, -1, 0, 2]), np.array(0.0), np.array([-1, 0])], spec)
    # axes [-1, 0]: axis 2 gets 1 at the start, axis 0 loses its first row and gets 2 at the end
    assert np.array_equal(y, np.pad(x[1:], [(0, 2), (0, 0), (1, 0)]))
    spec = _spec("Pad", 2, mode="constant")
    (y,) = oracle.fwd(oracle.lookup(spec), [np.array(2.5), np.zeros(0, np.int64)], spec)
    assert y.shape == () and y == 2.5


def test_resize_negative_axes(oracle):
    """Resize with axes=[-2, -1] is Resize with axes=[2, 3]; onnx.reference raised "axes don't match
    array"."""
    x = RNG.standard_normal((1, 2, 5, 7))
    got = {}
    for axes in ([2, 3], [-2, -1]):
        spec = _spec("Resize", 4, mode="linear", coordinate_transformation_mode="pytorch_half_pixel", axes=axes)
        entry = oracle.lookup(spec)
        got[axes[0]] = oracle.fwd(entry, [x, np.zeros(0, np.float32), np.zeros(0, np.float32), np.array([8, 11])],
                                  spec)[0]
    assert got[-2].shape == (1, 2, 8, 11) and np.array_equal(got[-2], got[2])


@pytest.mark.parametrize("x, axis, exclusive, reverse, want", [
    (np.array(2.5), np.array(0), 0, 0, np.array(2.5)),       # 0-d: onnx.reference gave shape (1,)
    (np.array(2.5), np.array(0), 1, 0, np.array(0.0)),
    (np.array([[1., 2, 3], [4, 5, 6]]), np.array([-1]), 0, 0, np.array([[1., 3, 6], [4, 9, 15]])),  # 1-element axis
    (np.array([[1., 2, 3], [4, 5, 6]]), np.array(1), 1, 1, np.array([[5., 3, 0], [11, 6, 0]])),
    (np.array([[1., 2, 3], [4, 5, 6]]), np.array(0), 1, 0, np.array([[0., 0, 0], [1, 2, 3]])),
    (np.zeros((0, 3)), np.array(0), 1, 1, np.zeros((0, 3))),
])
def test_cumsum(oracle, x, axis, exclusive, reverse, want):
    spec = _spec("CumSum", 2, exclusive=exclusive, reverse=reverse)
    (y,) = oracle.fwd(oracle.lookup(spec), [x, axis], spec)
    assert y.shape == want.shape and np.array_equal(y, want)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding_mode", ["border", "reflection", "zeros"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_float64_and_cubic_taps_are_clamped_not_the_location(oracle, mode, padding_mode, align_corners):
    """GridSample near and past the border: onnx.reference computed locations in float32 (errors of
    1e-7 in every mode) and, for cubic, clamped (reflected) the location before taking the taps (off
    by up to 14 % of the output's scale with border padding). The answer is torch's grid_sample, an
    implementation of its own, in float64 (onnxruntime agrees); 3-D for linear and nearest."""
    import torch
    x = RNG.standard_normal((2, 3, 4, 5))
    grid = RNG.uniform(-1.3, 1.3, (2, 6, 7, 2))
    if mode != "cubic":  # torch's 5-D grid_sample has no bicubic
        x, grid = RNG.standard_normal((2, 3, 4, 5, 3)), RNG.uniform(-1.3, 1.3, (2, 6, 7, 2, 3))
    spec = _spec("GridSample", 2, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    (y,) = oracle.fwd(oracle.lookup(spec), [x, grid], spec)
    torch_mode = {"linear": "bilinear", "cubic": "bicubic", "nearest": "nearest"}[mode]
    want = torch.nn.functional.grid_sample(torch.tensor(x), torch.tensor(grid), mode=torch_mode,
                                           padding_mode=padding_mode, align_corners=bool(align_corners)).numpy()
    assert np.allclose(y, want, rtol=0, atol=1e-12), float(np.abs(y - want).max())


def test_grid_sample_opset16_mode_names(oracle):
    x, grid = RNG.standard_normal((1, 2, 4, 5)), RNG.uniform(-1, 1, (1, 3, 3, 2))
    got = {}
    for opset, mode in ((16, "bilinear"), (20, "linear")):
        spec = _spec("GridSample", 2, opset=opset, mode=mode, padding_mode="zeros", align_corners=0)
        got[opset] = oracle.fwd(oracle.lookup(spec), [x, grid], spec)[0]
    assert np.array_equal(got[16], got[20])


@pytest.mark.parametrize("op, inputs, n_out", [
    ("Pad", [RNG.standard_normal((2, 5, 4)), np.array([0, -1, 1, 0, 2, -2]), np.array(0.5)], (2, 6, 3)),
    ("Clip", [RNG.standard_normal((3, 4)), np.array(-0.5), np.array(0.5)], (3, 4)),
])
def test_finite_differences_move_only_differentiable_inputs(oracle, op, inputs, n_out):
    """The oracle's gradient check moved Pad's value too, which the schema marks NonDifferentiable and
    torch's Pad reads as a number (no gradient): the check failed on a right gradient, the oracle did
    not arbitrate, and replay dropped torch's vjp row of every Pad without a word."""
    spec = _spec(op, len(inputs), mode="constant") if op == "Pad" else _spec(op, len(inputs))
    oracle.vjp(oracle.lookup(spec), inputs, spec, [RNG.standard_normal(n_out)])
    assert oracle.last_check["verified"] is True, oracle.last_check


def test_erf_is_float64_and_its_gradient_passes_the_check(oracle):
    """onnx.reference's Erf rounds to float32 (np.vectorize(math.erf, otypes=["f"])): the oracle's Erf had float32
    error, its gradient check's difference quotient was that error over a 1e-6 step, and torch's Erf (and GELU)
    gradients were never judged. Now math.erf of each element, in float64, and the check passes."""
    import math
    spec, x = _spec("Erf", 1, opset=13), RNG.standard_normal((3, 4)) * 2
    y = oracle.fwd(oracle.lookup(spec), [x], spec)[0]
    assert y.dtype == np.float64 and y.tolist() == [[math.erf(v) for v in row] for row in x.tolist()]
    oracle.vjp(oracle.lookup(spec), [x], spec, [RNG.standard_normal(x.shape)])
    assert oracle.last_check["verified"] is True, oracle.last_check


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_is_float64_and_its_gradient_passes_the_check(oracle, approximate):
    """Gelu is a function op: onnx.reference ran its body with its own float32 Erf (8e-9 off), and the check
    failed on torch's right gradient (a GPT's every GELU unjudged). Now ONNX's formula in float64."""
    import math
    spec, x = _spec("Gelu", 1, opset=20, approximate=approximate), RNG.standard_normal((3, 4)) * 2
    y = oracle.fwd(oracle.lookup(spec), [x], spec)[0]
    if approximate == "none":
        want = [[0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in row] for row in x.tolist()]
    else:
        want = [[0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))) for v in row]
                for row in x.tolist()]
    np.testing.assert_allclose(y, want, rtol=1e-13, atol=1e-15)  # float64 both: ulps, 1 + erf(x) cancels for x < 0
    oracle.vjp(oracle.lookup(spec), [x], spec, [RNG.standard_normal(x.shape)])
    assert oracle.last_check["verified"] is True, oracle.last_check


def test_a_masked_softmax_passes_the_check(oracle):
    """A causal mask's -inf (masked_fill, then Softmax): the step was 1e-6 of the largest magnitude, infinite,
    and an output that stays -inf at both ends gave inf - inf: the check failed, torch's rows unjudged. Now the
    step comes from the finite magnitudes and an output that does not move contributes 0."""
    x = RNG.standard_normal((2, 4, 4))
    x[:, np.triu_indices(4, 1)[0], np.triu_indices(4, 1)[1]] = -np.inf
    spec = _spec("Softmax", 1, axis=-1)
    oracle.vjp(oracle.lookup(spec), [x], spec, [RNG.standard_normal(x.shape)])
    assert oracle.last_check["verified"] is True, oracle.last_check
    where = _spec("Where", 3)
    mask = np.tril(np.ones((4, 4), bool))
    oracle.vjp(oracle.lookup(where), [mask, RNG.standard_normal((4, 4)), np.array(-np.inf)], where,
               [RNG.standard_normal((4, 4))])
    assert oracle.last_check["verified"] is True, oracle.last_check


def _relu_at_zeros():
    x = RNG.standard_normal((4, 50))
    x[:, ::3] = 0.0  # a third of the elements exactly on Relu's kink
    return _spec("Relu", 1), [x]


def _max_pool_with_ties():
    x = np.maximum(RNG.standard_normal((2, 3, 8, 8)), 0.0)  # Relu's zeros: windows whose maxima tie at 0
    spec = _spec("MaxPool", 1, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], dilations=[1, 1], ceil_mode=0)
    return spec, [x]


@pytest.mark.parametrize("case", [_relu_at_zeros, _max_pool_with_ties])
def test_the_gradient_check_moves_no_input_on_a_kink(oracle, case):
    """Relu at exact zeros and MaxPool over windows tied at 0 (ResNet's stem: a Relu, then a MaxPool): a
    difference quotient across the kink measures no one-sided gradient, so the check failed on torch's right
    one at both steps, the oracle did not arbitrate, and replay dropped torch's vjp and vjp2 rows of the node
    without a word. The check leaves those elements where they are: verified, in vjp and in vjp2's J u."""
    spec, inputs = case()
    y = oracle.fwd(oracle.lookup(spec), inputs, spec)[0]
    g = RNG.standard_normal(np.shape(y))
    oracle.vjp(oracle.lookup(spec), inputs, spec, [g])
    assert oracle.last_check["verified"] is True, oracle.last_check
    oracle.vjp2(oracle.lookup(spec), inputs, spec, [g], [RNG.standard_normal(np.shape(inputs[0]))], part="g")
    assert oracle.last_check["verified"] is True, oracle.last_check


def test_the_gradient_check_is_the_same_whatever_was_asked_before(oracle):
    """Its random direction comes from the node, not from the worker's history: a replay with two worker
    sets (--jobs auto), another order or --nodes gives every node the same check (it dropped a different
    Relu's rows from run to run before)."""
    spec, (x,) = _relu_at_zeros()
    g = RNG.standard_normal(x.shape)
    oracle.vjp(oracle.lookup(spec), [x], spec, [g])
    first = dict(oracle.last_check)
    other, (z,) = _max_pool_with_ties()
    oracle.vjp(oracle.lookup(other), [z], other, [np.ones_like(oracle.fwd(oracle.lookup(other), [z], other)[0])])
    oracle.vjp(oracle.lookup(spec), [x], spec, [g])
    assert oracle.last_check == first and first["verified"] is True


def test_max_pool_indices(oracle):
    """MaxPool's Indices: onnx.reference gave 0 where a 1x1 window's index is (n C + c) H W + h W + w
    (torch.onnx's max_pool2d_with_indices uses such a node for each plane's offset). By hand: kernel 1,
    and 2x2 windows, row-major and column-major (storage_order=1)."""
    x = RNG.standard_normal((2, 3, 4, 6))
    spec = _spec("MaxPool", 1, 2, kernel_shape=[1, 1], strides=[1, 1], pads=[0, 0, 0, 0], dilations=[1, 1],
                 ceil_mode=0, storage_order=0)
    y, i = oracle.fwd(oracle.lookup(spec), [x], spec)
    assert np.array_equal(y, x) and np.array_equal(i, np.arange(x.size).reshape(x.shape))
    win = x.reshape(2, 3, 2, 2, 3, 2).transpose(0, 1, 2, 4, 3, 5).reshape(2, 3, 2, 3, 4)
    k = win.argmax(-1)
    rows, cols = np.arange(2)[:, None] * 2 + k // 2, np.arange(3)[None, :] * 2 + k % 2
    plane = (np.arange(6) * 24).reshape(2, 3, 1, 1)
    for order, flat in ((0, rows * 6 + cols), (1, cols * 4 + rows)):
        spec = _spec("MaxPool", 1, 2, kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 0, 0], dilations=[1, 1],
                     ceil_mode=0, storage_order=order)
        y, i = oracle.fwd(oracle.lookup(spec), [x], spec)
        assert np.array_equal(y, win.max(-1)) and np.array_equal(i, flat + plane), order


def test_fixes_stand_in_only_where_written_for(oracle):
    """An older opset keeps onnx.reference's own versioned op (Pad-2 takes pads as an attribute)."""
    assert [c.__name__ for c in oracle.runner.new_ops(_spec("Pad", 3))] == ["Pad"]
    assert oracle.runner.new_ops(_spec("Pad", 1, opset=10)) == []
    x = RNG.standard_normal((2, 3))
    spec = _spec("Pad", 1, opset=10, pads=[0, 1, 0, 2], mode="constant")
    (y,) = oracle.fwd(oracle.lookup(spec), [x], spec)
    assert np.array_equal(y, np.pad(x, [(0, 0), (1, 2)]))


def test_pow_double_backward_at_an_exponent_of_zero_keeps_its_derivative_in_the_exponent():
    """torch's Pow backward masks d/dx = y x^(y-1) to a constant 0 where y == 0, losing its derivative
    in y, x^(y-1) (1 + y ln x) = 1/x there; the oracle's table differentiates the exact formula. By
    hand: x = 2, 3 at y = 0 give 1/2, 1/3; x = 0.5 at y = 2 gives 0.5 + 2 * 0.5 * ln 0.5."""
    import torch

    from backends.oracle.gradients import TABLE
    x = torch.tensor([2.0, 3.0, 0.5], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0.0, 0.0, 2.0], dtype=torch.float64, requires_grad=True)
    out = TABLE.lookup("", "Pow", 15).fn(x, y)
    dx, dy = torch.autograd.grad(out, (x, y), torch.ones_like(out), create_graph=True)
    assert dx.tolist() == [0.0, 0.0, 1.0] and dy.tolist() == pytest.approx([np.log(2), np.log(3), 0.25 * np.log(0.5)])
    d2, = torch.autograd.grad(dx.sum(), y)
    assert d2.tolist() == pytest.approx([1 / 2, 1 / 3, 0.5 + 2 * 0.5 * np.log(0.5)], rel=1e-15)


def _keys(d, a):
    d = abs(d)
    return (a + 2) * d ** 3 - (a + 3) * d ** 2 + 1 if d <= 1 else a * d ** 3 - 5 * a * d ** 2 + 8 * a * d - 4 * a \
        if d < 2 else 0.0


def _resize_matrix(n_in, scale, how):
    """One axis of a Resize as an [n_out, n_in] matrix and the rows that take the extrapolation value,
    element by element from the ONNX spec's formulas: "cubic": half_pixel, Keys with a = -0.5,
    exclude_outside (weights of the 4 nearest inputs inside, renormalised); "crop": linear,
    tf_crop_and_resize on roi (0.2, 1.3)."""
    n_out = int(np.floor(n_in * scale))
    m, outside = np.zeros((n_out, n_in)), np.zeros(n_out, bool)
    for i in range(n_out):
        if how == "cubic":
            x = (i + 0.5) / scale - 0.5
            w = {j: _keys(x - j, -0.5) for j in range(int(np.floor(x)) - 1, int(np.floor(x)) + 3) if 0 <= j < n_in}
            for j, v in w.items():
                m[i, j] = v / sum(w.values())
        else:
            lo, hi = float(np.float32(0.2)), float(np.float32(1.3))  # the roi input is float32
            x = lo * (n_in - 1) + i * (hi - lo) * (n_in - 1) / (n_in * scale - 1)
            if x < 0 or x > n_in - 1:
                outside[i] = True
                continue
            j = int(np.floor(x))
            m[i, j] += 1 - (x - j)
            m[i, min(j + 1, n_in - 1)] += x - j
    return m, outside


@pytest.mark.parametrize("how", ["cubic", "crop"])
def test_resize_modes_torch_has_no_kernel_for(oracle, how):
    """Resize modes functional.interpolate lacks (cubic A = -0.5 with exclude_outside; tf_crop_and_resize
    with an extrapolation value), which torch's table computes by ONNX's separable definition
    (backends/_ops_common.resize_plan): the oracle's forward (onnx.reference) and its gradients (that
    torch table in float64) against matrices built by hand. Resize is linear in x: y = H x W^T,
    vjp H^T g W, and vjp2's ds/dx = 0, ds/dg = H u W^T; rows outside the crop are the constant."""
    x, g_shape = RNG.standard_normal((1, 2, 5, 4)), None
    scales = np.array([1, 1, 0.8, 1.75] if how == "cubic" else [1, 1, 1.2, 1.5], np.float32)
    (h, h_out), (w, w_out) = _resize_matrix(5, float(scales[2]), how), _resize_matrix(4, float(scales[3]), how)
    ev = 7.5
    want = np.einsum("ij,ncjk,lk->ncil", h, x, w)
    if how == "crop":
        want[:, :, h_out, :] = ev
        want[:, :, :, w_out] = ev
        attrs = dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=ev)
        roi = np.array([0, 0, 0.2, 0.2, 1, 1, 1.3, 1.3], np.float32)
    else:
        attrs = dict(mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1)
        roi = None
    spec = _spec("Resize", 3, absent=() if roi is not None else (1,), **attrs)
    entry = oracle.lookup(spec)
    (y,) = oracle.fwd(entry, [x, roi, scales], spec)
    assert y.shape == want.shape and np.allclose(y, want, rtol=0, atol=1e-12)
    g, u = RNG.standard_normal(want.shape), RNG.standard_normal(x.shape)
    keep = np.ones(want.shape)
    if how == "crop":
        keep[:, :, h_out, :] = 0
        keep[:, :, :, w_out] = 0
    dx = oracle.vjp(entry, [x, roi, scales], spec, [g])[0]
    assert np.allclose(dx, np.einsum("ij,ncil,lk->ncjk", h, g * keep, w), rtol=0, atol=1e-12)
    assert oracle.last_check["verified"] is True, oracle.last_check
    (d2x, *_), (d2g,) = oracle.vjp2(entry, [x, roi, scales], spec, [g], [u, None, None])
    assert np.allclose(d2x, 0, atol=1e-12)
    assert np.allclose(d2g, np.einsum("ij,ncjk,lk->ncil", h, u, w) * keep, rtol=0, atol=1e-12)
    assert oracle.last_check["verified"] is True, oracle.last_check


def test_torch_resize_takes_an_empty_roi_that_requires_grad():
    """tf2onnx writes Resize with an empty roi; recording differentiates every float input, so the torch
    table got roi as an empty tensor that requires grad, whose np.size is its bound .size method (truthy):
    the crop path indexed an empty list (an internal error on a Keras Resizing(bicubic) model). Against
    the matrices by hand, in float64."""
    import torch
    from backends.torch.ops.shape import resize
    x = RNG.standard_normal((1, 2, 5, 4))
    scales = torch.tensor([1, 1, 0.8, 1.75], dtype=torch.float64, requires_grad=True)
    y = resize(torch.from_numpy(x), torch.zeros(0, dtype=torch.float64, requires_grad=True), scales, mode="cubic",
               cubic_coeff_a=-0.5, exclude_outside=1)
    (h, _), (w, _) = _resize_matrix(5, 0.8, "cubic"), _resize_matrix(4, 1.75, "cubic")
    assert np.allclose(y.detach().numpy(), np.einsum("ij,ncjk,lk->ncil", h, x, w), rtol=0, atol=1e-12)



def _conv_by_hand(x, w, b, group, dilations, pads, strides):
    """ONNX Conv element by element: y[n, m, o...] = b[m] + sum over c in m's group and the window of x * w."""
    r = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + r]) for i in range(r)])
    out = [(xp.shape[2 + i] - (w.shape[2 + i] - 1) * dilations[i] - 1) // strides[i] + 1 for i in range(r)]
    m_per, c_per = w.shape[0] // group, w.shape[1]
    y = np.zeros((x.shape[0], w.shape[0], *out))
    for n, m, *o in itertools.product(range(x.shape[0]), range(w.shape[0]), *map(range, out)):
        g, total = m // m_per, b[m]
        for c, *k in itertools.product(range(c_per), *map(range, w.shape[2:])):
            at = tuple(o[i] * strides[i] + k[i] * dilations[i] for i in range(r))
            total += xp[(n, g * c_per + c) + at] * w[(m, c) + tuple(k)]
        y[(n, m) + tuple(o)] = total
    return y


@pytest.mark.parametrize("x_shape, w_shape, group, dilations, pads, strides", [
    ((2, 3, 6, 7), (4, 3, 3, 3), 1, [1, 1], [1, 1, 1, 1], [1, 1]),
    ((1, 6, 9, 11), (4, 3, 2, 3), 2, [2, 1], [0, 2, 1, 0], [1, 2]),
    ((2, 4, 5, 5), (4, 1, 3, 3), 4, [1, 1], [1, 1, 1, 1], [2, 2]),   # depthwise
    ((2, 4, 17), (6, 2, 3), 2, [3], [2, 1], [2]),                    # 1-D
    ((1, 2, 4, 5, 6), (3, 2, 2, 3, 2), 1, [1, 2, 1], [1, 0, 1, 0, 2, 1], [2, 1, 3]),  # 3-D
    ((1, 2, 3, 3), (2, 2, 3, 3), 1, [1, 1], [0, 0, 0, 0], [1, 1]),   # one output position
])
def test_conv_is_the_sum_by_hand(oracle, x_shape, w_shape, group, dilations, pads, strides):
    """The oracle's Conv (a matmul over the windows of the padded input, in place of onnx.reference's slower
    im2col) is the float64 sum element by element, with groups, dilations, strides and uneven pads; with
    auto_pad it is onnx.reference's own, the same numbers."""
    x, w, b = RNG.standard_normal(x_shape), RNG.standard_normal(w_shape), RNG.standard_normal(w_shape[0])
    r = len(x_shape) - 2
    spec = _spec("Conv", 3, opset=17, group=group, dilations=dilations, pads=pads, strides=strides,
                 kernel_shape=list(w_shape[2:]))
    (y,) = oracle.fwd(oracle.lookup(spec), [x, w, b], spec)
    want = _conv_by_hand(x, w, b, group, dilations, pads, strides)
    assert y.dtype == np.float64 and y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)
    if pads == [1] * (2 * r) and strides == [1] * r and dilations == [1] * r:  # SAME: the library's own path
        same = _spec("Conv", 3, opset=17, group=group, auto_pad="SAME_UPPER", strides=strides,
                     kernel_shape=list(w_shape[2:]))
        (y2,) = oracle.fwd(oracle.lookup(same), [x, w, b], same)
        np.testing.assert_allclose(y2, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape, index_shape, batch_dims", [((3, 4, 5), (2, 3, 2), 0), ((6, 4), (3, 1), 0),
                                                            ((2, 3, 4), (2, 5, 1), 1), ((2, 3, 4, 5), (2, 3, 2, 2), 2)])
def test_nd_index_gathers_what_onnx_reference_gathers(shape, index_shape, batch_dims):
    """backends/_ops_common.nd_index, the full coordinates every framework's GatherND/ScatterND indexes with (negative
    indices wrapped, each index's batch position first), against onnx.reference's GatherND, element for element."""
    from onnx.reference import ReferenceEvaluator

    from backends._ops_common import nd_index
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape)
    limit = np.array(shape[batch_dims:batch_dims + index_shape[-1]])
    idx = rng.integers(0, 1000, index_shape) % limit - limit * rng.integers(0, 2, index_shape)  # half negative
    node = helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=batch_dims)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, None),
                                            helper.make_tensor_value_info("i", TensorProto.INT64, None)],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    (want,) = ReferenceEvaluator(model).run(None, {"x": x, "i": idx})
    at = nd_index(idx, shape, batch_dims)
    assert at.shape == index_shape[:-1] + (batch_dims + index_shape[-1],) and (at >= 0).all()
    assert np.array_equal(x[tuple(np.moveaxis(at, -1, 0))], want)
