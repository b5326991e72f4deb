"""StyleGAN2-ADA's generator pieces (irtrace/examples/stylegan2.py) in OneFlow, as a porter writes them:
OneFlow's API mirrors torch's, so the reference (non-CUDA) code paths read as in the original, with
oneflow.nn.functional's pad, leaky_relu, conv2d and conv_transpose2d. `synthesis()` is that port; OneFlow
computes its gradient penalty (every op's double backward) as torch does."""
import numpy as np

import oneflow as flow
import oneflow.nn as nn
from oneflow.nn import functional

SQRT2 = float(np.sqrt(2))


def normalize_2nd_moment(x, dim=1, eps=1e-8):
    return x * (x.square().mean(dim=dim, keepdim=True) + eps).rsqrt()


def bias_act(x, b=None, dim=1, act="linear", alpha=0.2, gain=None):
    if b is not None:
        x = x + b.reshape([-1 if i == dim else 1 for i in range(x.ndim)])
    if act == "lrelu":
        x = functional.leaky_relu(x, alpha)
    gain = gain if gain is not None else (SQRT2 if act == "lrelu" else 1.0)
    if gain != 1:
        x = x * gain
    return x


def setup_filter(f):
    f = flow.tensor(f, dtype=flow.float32)
    f = f.unsqueeze(1) * f.unsqueeze(0)  # torch.ger; OneFlow 0.9 has no outer
    return f / f.sum()


def upfirdn2d(x, f, up=1, down=1, padding=(0, 0, 0, 0), flip_filter=False, gain=1):
    batch, channels, h, w = x.shape
    x = x.reshape([batch, channels, h, 1, w, 1])
    x = functional.pad(x, [0, up - 1, 0, 0, 0, up - 1])
    x = x.reshape([batch, channels, h * up, w * up])
    px0, px1, py0, py1 = padding
    x = functional.pad(x, [max(px0, 0), max(px1, 0), max(py0, 0), max(py1, 0)])
    x = x[:, :, max(-py0, 0): x.shape[2] - max(-py1, 0), max(-px0, 0): x.shape[3] - max(-px1, 0)]
    f = f * (gain ** (f.ndim / 2))
    if not flip_filter:
        f = f.flip(list(range(f.ndim)))
    f = f[np.newaxis, np.newaxis].repeat([channels, 1] + [1] * f.ndim)
    x = functional.conv2d(x, f, groups=channels)
    return x[:, :, ::down, ::down]


def upsample2d(x, f, up=2):
    fw = f.shape[-1]
    p = [(fw + up - 1) // 2, (fw - up) // 2] * 2
    return upfirdn2d(x, f, up=up, padding=p, gain=up * up)


def conv2d_resample(x, w, f=None, up=1, padding=0, groups=1, flip_weight=True):
    out_channels, in_per_group, kh, kw = w.shape
    px0 = px1 = py0 = py1 = padding
    if up > 1:
        fw = f.shape[-1]
        px0 += (fw + up - 1) // 2
        px1 += (fw - up) // 2
        py0 += (fw + up - 1) // 2
        py1 += (fw - up) // 2
        w = w.reshape(groups, out_channels // groups, in_per_group, kh, kw).transpose(1, 2)
        w = w.reshape(groups * in_per_group, out_channels // groups, kh, kw)
        px0 -= kw - 1
        px1 -= kw - up
        py0 -= kh - 1
        py1 -= kh - up
        pxt, pyt = max(min(-px0, -px1), 0), max(min(-py0, -py1), 0)
        if flip_weight:
            w = w.flip([2, 3])
        x = functional.conv_transpose2d(x, w, stride=up, padding=[pyt, pxt], groups=groups)
        return upfirdn2d(x, f, padding=[px0 + pxt, px1 - pxt, py0 + pyt, py1 - pyt], gain=up * up)
    if not flip_weight:
        w = w.flip([2, 3])
    return functional.conv2d(x, w, padding=[py0, px0], groups=groups)


def modulated_conv2d(x, weight, styles, noise=None, up=1, padding=0, resample_filter=None, demodulate=True,
                     flip_weight=True):
    batch = x.shape[0]
    out_channels, in_channels, kh, kw = weight.shape
    w = weight.unsqueeze(0) * styles.reshape(batch, 1, -1, 1, 1)
    if demodulate:
        dcoefs = (w.square().sum(dim=[2, 3, 4]) + 1e-8).rsqrt()
        w = w * dcoefs.reshape(batch, -1, 1, 1, 1)
    x = x.reshape(1, -1, *x.shape[2:])
    w = w.reshape(-1, in_channels, kh, kw)
    x = conv2d_resample(x, w, f=resample_filter, up=up, padding=padding, groups=batch, flip_weight=flip_weight)
    x = x.reshape(batch, -1, *x.shape[2:])
    if noise is not None:
        x = x + noise
    return x


class FullyConnectedLayer(nn.Module):
    def __init__(self, in_features, out_features, activation="linear", lr_multiplier=1.0, bias_init=0.0):
        super().__init__()
        self.activation = activation
        self.weight = nn.Parameter(flow.randn([out_features, in_features]) / lr_multiplier)
        self.bias = nn.Parameter(flow.full([out_features], float(bias_init)))
        self.weight_gain = lr_multiplier / np.sqrt(in_features)
        self.bias_gain = lr_multiplier

    def forward(self, x):
        w = self.weight * self.weight_gain
        b = self.bias * self.bias_gain
        if self.activation == "linear":
            return flow.addmm(b.unsqueeze(0), x, w.t())
        return bias_act(x.matmul(w.t()), b, act=self.activation)


class MappingNetwork(nn.Module):
    def __init__(self, z_dim, w_dim, num_ws, num_layers=2, lr_multiplier=0.01):
        super().__init__()
        self.num_ws = num_ws
        for i in range(num_layers):
            setattr(self, f"fc{i}", FullyConnectedLayer(z_dim if i == 0 else w_dim, w_dim, "lrelu", lr_multiplier))
        self.num_layers = num_layers

    def forward(self, z):
        x = normalize_2nd_moment(z)
        for i in range(self.num_layers):
            x = getattr(self, f"fc{i}")(x)
        return x.unsqueeze(1).repeat([1, self.num_ws, 1])


class SynthesisLayer(nn.Module):
    def __init__(self, in_channels, out_channels, w_dim, kernel_size=3, up=1):
        super().__init__()
        self.up = up
        self.padding = kernel_size // 2
        self.register_buffer("resample_filter", setup_filter([1, 3, 3, 1]))
        self.affine = FullyConnectedLayer(w_dim, in_channels, bias_init=1)
        self.weight = nn.Parameter(flow.randn([out_channels, in_channels, kernel_size, kernel_size]))
        self.noise_strength = nn.Parameter(flow.tensor(0.1))
        self.bias = nn.Parameter(flow.randn([out_channels]) * 0.1)

    def forward(self, x, w, noise):
        styles = self.affine(w)
        x = modulated_conv2d(x, self.weight, styles, noise * self.noise_strength, up=self.up, padding=self.padding,
                             resample_filter=self.resample_filter, flip_weight=(self.up == 1))
        return bias_act(x, self.bias, act="lrelu")


class ToRGBLayer(nn.Module):
    def __init__(self, in_channels, out_channels, w_dim, kernel_size=1):
        super().__init__()
        self.affine = FullyConnectedLayer(w_dim, in_channels, bias_init=1)
        self.weight = nn.Parameter(flow.randn([out_channels, in_channels, kernel_size, kernel_size]))
        self.bias = nn.Parameter(flow.randn([out_channels]) * 0.1)
        self.weight_gain = 1 / np.sqrt(in_channels * kernel_size * kernel_size)

    def forward(self, x, w):
        styles = self.affine(w) * self.weight_gain
        x = modulated_conv2d(x, self.weight, styles, demodulate=False)
        return bias_act(x, self.bias)


class SynthesisBlock(nn.Module):
    def __init__(self, in_channels, out_channels, w_dim, resolution, img_channels=3):
        super().__init__()
        self.resolution = resolution
        self.register_buffer("resample_filter", setup_filter([1, 3, 3, 1]))
        if in_channels == 0:
            self.const = nn.Parameter(flow.randn([out_channels, resolution, resolution]))
        else:
            self.conv0 = SynthesisLayer(in_channels, out_channels, w_dim, up=2)
        self.conv1 = SynthesisLayer(out_channels, out_channels, w_dim)
        self.torgb = ToRGBLayer(out_channels, img_channels, w_dim)
        self.in_channels = in_channels

    def forward(self, x, img, ws, noises):
        if self.in_channels == 0:
            x = self.const.unsqueeze(0).repeat([ws.shape[0], 1, 1, 1])
            x = self.conv1(x, ws[:, 0], noises[0])
        else:
            x = self.conv0(x, ws[:, 0], noises[0])
            x = self.conv1(x, ws[:, 1], noises[1])
        if img is not None:
            img = upsample2d(img, self.resample_filter)
        y = self.torgb(x, ws[:, -1])
        return x, (y if img is None else img + y)


class SynthesisNetwork(nn.Module):
    def __init__(self, w_dim=8, channels=8, img_channels=3):
        super().__init__()
        self.b4 = SynthesisBlock(0, channels, w_dim, 4, img_channels)
        self.b8 = SynthesisBlock(channels, channels, w_dim, 8, img_channels)

    def forward(self, ws, noise_b4, noise_b8_0, noise_b8_1):
        x, img = self.b4(None, None, ws[:, 0:2], [noise_b4])
        x, img = self.b8(x, img, ws[:, 1:4], [noise_b8_0, noise_b8_1])
        return img


class Generator(nn.Module):
    """mapping + synthesis, with the noise inputs as graph inputs."""

    def __init__(self, z_dim=8, w_dim=8, channels=8):
        super().__init__()
        self.mapping = MappingNetwork(z_dim, w_dim, num_ws=4)
        self.synthesis = SynthesisNetwork(w_dim, channels)

    def forward(self, z, noise_b4, noise_b8_0, noise_b8_1):
        return self.synthesis(self.mapping(z), noise_b4, noise_b8_0, noise_b8_1)


def synthesis():
    return Generator().train()
