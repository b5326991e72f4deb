"""StyleGAN2-ADA's generator pieces (irtrace/examples/stylegan2.py) in MegEngine, as ../shared/seeds/000's
porter wrote them: func.pad in upfirdn2d, func.leaky_relu in bias_act. `synthesis()` is that port; under a
gradient penalty MegEngine cannot take the double backward of its leaky ReLU and silently zeroes func.pad's
ds/dg. `synthesis_workarounds()` writes both as irtrace's verified workarounds do (a leaky ReLU as a where,
the padding as a concatenation of zeros: backends/megengine/workarounds.py), and matches end to end;
`synthesis_where()` only the first."""
import numpy as np

import megengine as mge
import megengine.functional as func
import megengine.module as nn

SQRT2 = float(np.sqrt(2))


class Ops:
    """The two calls a porter writes either way; `workarounds`: those written as irtrace's workarounds."""

    def __init__(self, workarounds=()):
        self.workarounds = set(workarounds)

    def leaky_relu(self, x, alpha):
        return func.where(x >= 0, x, x * alpha) if "leaky_relu" in self.workarounds else func.leaky_relu(x, alpha)

    def pad(self, x, widths):
        """numpy-style (before, after) pairs, every axis."""
        if "pad" not in self.workarounds:
            return func.pad(x, widths)
        for axis, (before, after) in enumerate(widths):
            parts = []
            if before:
                shape = list(x.shape)
                shape[axis] = before
                parts.append(func.zeros(shape, dtype=x.dtype))
            parts.append(x)
            if after:
                shape = list(x.shape)
                shape[axis] = after
                parts.append(func.zeros(shape, dtype=x.dtype))
            if len(parts) > 1:
                x = func.concat(parts, axis=axis)
        return x


def normalize_2nd_moment(x, eps=1e-8):
    return x * (1.0 / func.sqrt((x ** 2).mean(axis=1, keepdims=True) + eps))


def bias_act(ops, x, b=None, act="linear", alpha=0.2, gain=None):
    if b is not None:
        x = x + b.reshape([-1 if i == 1 else 1 for i in range(x.ndim)])
    if act == "lrelu":
        x = ops.leaky_relu(x, alpha)
    gain = gain if gain is not None else (SQRT2 if act == "lrelu" else 1.0)
    return x * gain if gain != 1 else x


def setup_filter(f):
    f = np.asarray(f, np.float32)
    f = np.outer(f, f)
    return f / f.sum()


def upfirdn2d(ops, x, f, up=1, down=1, padding=(0, 0, 0, 0), gain=1):
    batch, channels, h, w = x.shape
    x = x.reshape(batch, channels, h, 1, w, 1)
    x = ops.pad(x, ((0, 0), (0, 0), (0, 0), (0, up - 1), (0, 0), (0, up - 1)))
    x = x.reshape(batch, channels, h * up, w * up)
    px0, px1, py0, py1 = padding
    x = ops.pad(x, ((0, 0), (0, 0), (max(py0, 0), max(py1, 0)), (max(px0, 0), max(px1, 0))))
    x = x[:, :, max(-py0, 0): x.shape[2] - max(-py1, 0), max(-px0, 0): x.shape[3] - max(-px1, 0)]
    f = f * (gain ** (f.ndim / 2))
    f = f[::-1, ::-1]  # the filter flipped (the reference's flip_filter=False)
    weight = mge.tensor(np.ascontiguousarray(np.broadcast_to(f, (channels, 1, 1) + f.shape)))
    x = func.conv2d(x, weight, groups=channels)
    return x[:, :, ::down, ::down]


def upsample2d(ops, x, f, up=2):
    fw = f.shape[-1]
    p = [(fw + up - 1) // 2, (fw - up) // 2] * 2
    return upfirdn2d(ops, x, f, up=up, padding=p, gain=up * up)


def conv2d_resample(ops, x, w, f=None, up=1, padding=0, groups=1, flip_weight=True):
    out_channels, in_per_group, kh, kw = w.shape
    px0 = px1 = py0 = py1 = padding
    if up > 1:
        fw = f.shape[-1]
        px0 += (fw + up - 1) // 2
        px1 += (fw - up) // 2
        py0 += (fw + up - 1) // 2
        py1 += (fw - up) // 2
        # MegEngine's grouped transposed conv takes the weight as (G, I/G, O/G, kh, kw)
        w = w.reshape(groups, out_channels // groups, in_per_group, kh, kw).transpose(0, 2, 1, 3, 4)
        px0 -= kw - 1
        px1 -= kw - up
        py0 -= kh - 1
        py1 -= kh - up
        pxt, pyt = max(min(-px0, -px1), 0), max(min(-py0, -py1), 0)
        if flip_weight:
            w = w[:, :, :, ::-1, ::-1]
        x = func.conv_transpose2d(x, w, stride=up, padding=(pyt, pxt), groups=groups)
        return upfirdn2d(ops, x, f, padding=[px0 + pxt, px1 - pxt, py0 + pyt, py1 - pyt], gain=up * up)
    if not flip_weight:
        w = w[:, :, ::-1, ::-1]
    # MegEngine's grouped conv takes the weight as (G, O/G, I/G, kh, kw)
    w = w.reshape(groups, out_channels // groups, in_per_group, kh, kw)
    return func.conv2d(x, w, padding=(py0, px0), groups=groups)


def modulated_conv2d(ops, x, weight, styles, noise=None, up=1, padding=0, resample_filter=None, demodulate=True,
                     flip_weight=True):
    batch = x.shape[0]
    out_channels, in_channels, kh, kw = weight.shape
    w = func.expand_dims(weight, 0) * styles.reshape(batch, 1, -1, 1, 1)
    if demodulate:
        dcoefs = 1.0 / func.sqrt((w ** 2).sum(axis=[2, 3, 4]) + 1e-8)
        w = w * dcoefs.reshape(batch, -1, 1, 1, 1)
    x = x.reshape(1, -1, *x.shape[2:])
    w = w.reshape(-1, in_channels, kh, kw)
    x = conv2d_resample(ops, x, w, f=resample_filter, up=up, padding=padding, groups=batch, flip_weight=flip_weight)
    x = x.reshape(batch, -1, *x.shape[2:])
    if noise is not None:
        x = x + noise
    return x


class FullyConnectedLayer(nn.Module):
    def __init__(self, ops, in_features, out_features, activation="linear", lr_multiplier=1.0, bias_init=0.0):
        super().__init__()
        self.ops, self.activation = ops, activation
        self.weight = mge.Parameter(np.zeros((out_features, in_features), np.float32))
        self.bias = mge.Parameter(np.full((out_features,), float(bias_init), np.float32))
        self.weight_gain = float(lr_multiplier / np.sqrt(in_features))  # MegEngine refuses numpy float64 scalars
        self.bias_gain = float(lr_multiplier)

    def forward(self, x):
        w = self.weight * self.weight_gain
        b = self.bias * self.bias_gain
        if self.activation == "linear":
            return func.matmul(x, w.transpose(1, 0)) + func.expand_dims(b, 0)
        return bias_act(self.ops, func.matmul(x, w.transpose(1, 0)), b, act=self.activation)


class MappingNetwork(nn.Module):
    def __init__(self, ops, z_dim, w_dim, num_ws, num_layers=2, lr_multiplier=0.01):
        super().__init__()
        self.num_ws, self.num_layers = num_ws, num_layers
        for i in range(num_layers):
            setattr(self, f"fc{i}", FullyConnectedLayer(ops, z_dim if i == 0 else w_dim, w_dim, "lrelu", lr_multiplier))

    def forward(self, z):
        x = normalize_2nd_moment(z)
        for i in range(self.num_layers):
            x = getattr(self, f"fc{i}")(x)
        return func.repeat(func.expand_dims(x, 1), self.num_ws, axis=1)


class SynthesisLayer(nn.Module):
    def __init__(self, ops, in_channels, out_channels, w_dim, kernel_size=3, up=1):
        super().__init__()
        self.ops, self.up, self.padding = ops, up, kernel_size // 2
        self.resample_filter = setup_filter([1, 3, 3, 1])
        self.affine = FullyConnectedLayer(ops, w_dim, in_channels, bias_init=1)
        self.weight = mge.Parameter(np.zeros((out_channels, in_channels, kernel_size, kernel_size), np.float32))
        self.noise_strength = mge.Parameter(np.zeros((), np.float32))
        self.bias = mge.Parameter(np.zeros((out_channels,), np.float32))

    def forward(self, x, w, noise):
        styles = self.affine(w)
        x = modulated_conv2d(self.ops, x, self.weight, styles, noise * self.noise_strength, up=self.up,
                             padding=self.padding, resample_filter=self.resample_filter, flip_weight=(self.up == 1))
        return bias_act(self.ops, x, self.bias, act="lrelu")


class ToRGBLayer(nn.Module):
    def __init__(self, ops, in_channels, out_channels, w_dim, kernel_size=1):
        super().__init__()
        self.ops = ops
        self.affine = FullyConnectedLayer(ops, w_dim, in_channels, bias_init=1)
        self.weight = mge.Parameter(np.zeros((out_channels, in_channels, kernel_size, kernel_size), np.float32))
        self.bias = mge.Parameter(np.zeros((out_channels,), np.float32))
        self.weight_gain = float(1 / np.sqrt(in_channels * kernel_size * kernel_size))

    def forward(self, x, w):
        styles = self.affine(w) * self.weight_gain
        x = modulated_conv2d(self.ops, x, self.weight, styles, demodulate=False)
        return bias_act(self.ops, x, self.bias)


class SynthesisBlock(nn.Module):
    def __init__(self, ops, in_channels, out_channels, w_dim, resolution, img_channels=3):
        super().__init__()
        self.ops, self.in_channels = ops, in_channels
        self.resample_filter = setup_filter([1, 3, 3, 1])
        if in_channels == 0:
            self.const = mge.Parameter(np.zeros((out_channels, resolution, resolution), np.float32))
        else:
            self.conv0 = SynthesisLayer(ops, in_channels, out_channels, w_dim, up=2)
        self.conv1 = SynthesisLayer(ops, out_channels, out_channels, w_dim)
        self.torgb = ToRGBLayer(ops, out_channels, img_channels, w_dim)

    def forward(self, x, img, ws, noises):
        if self.in_channels == 0:
            x = func.repeat(func.expand_dims(self.const, 0), ws.shape[0], axis=0)
            x = self.conv1(x, ws[:, 0], noises[0])
        else:
            x = self.conv0(x, ws[:, 0], noises[0])
            x = self.conv1(x, ws[:, 1], noises[1])
        if img is not None:
            img = upsample2d(self.ops, img, self.resample_filter)
        y = self.torgb(x, ws[:, -1])
        return x, (y if img is None else img + y)


class SynthesisNetwork(nn.Module):
    def __init__(self, ops, w_dim=8, channels=8, img_channels=3):
        super().__init__()
        self.b4 = SynthesisBlock(ops, 0, channels, w_dim, 4, img_channels)
        self.b8 = SynthesisBlock(ops, channels, channels, w_dim, 8, img_channels)

    def forward(self, ws, noise_b4, noise_b8_0, noise_b8_1):
        x, img = self.b4(None, None, ws[:, 0:2], [noise_b4])
        x, img = self.b8(x, img, ws[:, 1:4], [noise_b8_0, noise_b8_1])
        return img


class Generator(nn.Module):
    def __init__(self, workarounds=(), z_dim=8, w_dim=8, channels=8):
        super().__init__()
        ops = Ops(workarounds)
        self.mapping = MappingNetwork(ops, z_dim, w_dim, num_ws=4)
        self.synthesis = SynthesisNetwork(ops, w_dim, channels)

    def forward(self, z, noise_b4, noise_b8_0, noise_b8_1):
        return self.synthesis(self.mapping(z), noise_b4, noise_b8_0, noise_b8_1)


def synthesis():
    m = Generator()
    m.train()
    return m


def synthesis_workarounds():
    m = Generator(workarounds=("leaky_relu", "pad"))
    m.train()
    return m


def synthesis_where():
    """The leaky ReLU as a where, func.pad kept: the penalty's gradients then diverge where func.pad's ds/dg is 0."""
    m = Generator(workarounds=("leaky_relu",))
    m.train()
    return m
