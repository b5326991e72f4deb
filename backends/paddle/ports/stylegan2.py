"""StyleGAN2-ADA's generator pieces (irtrace/examples/stylegan2.py) in Paddle, as a porter writes them: the
reference (non-CUDA) code paths with paddle.nn.functional (pad, leaky_relu, conv2d, conv2d_transpose),
paddle.square and paddle.rsqrt; StyleGAN2's own layers keep torch's [out, in] weights, so they load as they
are. `synthesis()` is that port. Under a gradient penalty Paddle 3.3 cannot take the double backward of its
depthwise conv2d (upfirdn2d's FIR filter: "depthwise_conv2d_double_grad is not registered") nor of
conv2d_transpose: the port check names the op (the framework's fault); Paddle has no verified workaround."""
import numpy as np

import paddle
import paddle.nn as nn
from paddle.nn import functional

SQRT2 = float(np.sqrt(2))


def normalize_2nd_moment(x, eps=1e-8):
    return x * paddle.rsqrt(paddle.square(x).mean(axis=1, keepdim=True) + eps)


def bias_act(x, b=None, act="linear", alpha=0.2, gain=None):
    if b is not None:
        x = x + b.reshape([-1 if i == 1 else 1 for i in range(x.ndim)])
    if act == "lrelu":
        x = functional.leaky_relu(x, alpha)
    gain = gain if gain is not None else (SQRT2 if act == "lrelu" else 1.0)
    return x * gain if gain != 1 else x


def setup_filter(f):
    f = np.asarray(f, np.float32)
    f = np.outer(f, f)
    return f / f.sum()


def upfirdn2d(x, f, up=1, down=1, padding=(0, 0, 0, 0), gain=1):
    batch, channels, h, w = x.shape
    x = x.reshape([batch, channels, h, 1, w, 1])
    x = functional.pad(x, [0, 0, 0, 0, 0, 0, 0, up - 1, 0, 0, 0, up - 1])  # every axis, first to last
    x = x.reshape([batch, channels, h * up, w * up])
    px0, px1, py0, py1 = padding
    x = functional.pad(x, [max(px0, 0), max(px1, 0), max(py0, 0), max(py1, 0)])  # the last two axes: width, then height
    x = x[:, :, max(-py0, 0): x.shape[2] - max(-py1, 0), max(-px0, 0): x.shape[3] - max(-px1, 0)]
    f = f * (gain ** (f.ndim / 2))
    f = f[::-1, ::-1]  # the filter flipped (the reference's flip_filter=False)
    weight = paddle.to_tensor(np.ascontiguousarray(np.broadcast_to(f, (channels, 1) + f.shape)))
    x = functional.conv2d(x, weight, groups=channels)
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
        # Paddle's transposed conv takes the weight as (I, O/G, kh, kw), as torch's
        w = w.reshape([groups, out_channels // groups, in_per_group, kh, kw]).transpose([0, 2, 1, 3, 4])
        w = w.reshape([groups * in_per_group, out_channels // groups, kh, kw])
        px0 -= kw - 1
        px1 -= kw - up
        py0 -= kh - 1
        py1 -= kh - up
        pxt, pyt = max(min(-px0, -px1), 0), max(min(-py0, -py1), 0)
        if flip_weight:
            w = paddle.flip(w, [2, 3])
        x = functional.conv2d_transpose(x, w, stride=up, padding=[pyt, pxt], groups=groups)
        return upfirdn2d(x, f, padding=[px0 + pxt, px1 - pxt, py0 + pyt, py1 - pyt], gain=up * up)
    if not flip_weight:
        w = paddle.flip(w, [2, 3])
    return functional.conv2d(x, w, padding=[py0, px0], groups=groups)


def modulated_conv2d(x, weight, styles, noise=None, up=1, padding=0, resample_filter=None, demodulate=True,
                     flip_weight=True):
    batch = x.shape[0]
    out_channels, in_channels, kh, kw = weight.shape
    w = weight.unsqueeze(0) * styles.reshape([batch, 1, -1, 1, 1])
    if demodulate:
        dcoefs = paddle.rsqrt(paddle.square(w).sum(axis=[2, 3, 4]) + 1e-8)
        w = w * dcoefs.reshape([batch, -1, 1, 1, 1])
    x = x.reshape([1, -1, *x.shape[2:]])
    w = w.reshape([-1, in_channels, kh, kw])
    x = conv2d_resample(x, w, f=resample_filter, up=up, padding=padding, groups=batch, flip_weight=flip_weight)
    x = x.reshape([batch, -1, *x.shape[2:]])
    if noise is not None:
        x = x + noise
    return x


class FullyConnectedLayer(nn.Layer):
    def __init__(self, in_features, out_features, activation="linear", lr_multiplier=1.0, bias_init=0.0):
        super().__init__()
        self.activation = activation
        self.weight = self.create_parameter([out_features, in_features])  # StyleGAN2's [out, in], as torch's
        self.bias = self.create_parameter([out_features], default_initializer=nn.initializer.Constant(bias_init))
        self.weight_gain = float(lr_multiplier / np.sqrt(in_features))
        self.bias_gain = float(lr_multiplier)

    def forward(self, x):
        w = self.weight * self.weight_gain
        b = self.bias * self.bias_gain
        if self.activation == "linear":
            return paddle.matmul(x, w, transpose_y=True) + b.unsqueeze(0)
        return bias_act(paddle.matmul(x, w, transpose_y=True), b, act=self.activation)


class MappingNetwork(nn.Layer):
    def __init__(self, z_dim, w_dim, num_ws, num_layers=2, lr_multiplier=0.01):
        super().__init__()
        self.num_ws, self.num_layers = num_ws, num_layers
        for i in range(num_layers):
            setattr(self, f"fc{i}", FullyConnectedLayer(z_dim if i == 0 else w_dim, w_dim, "lrelu", lr_multiplier))

    def forward(self, z):
        x = normalize_2nd_moment(z)
        for i in range(self.num_layers):
            x = getattr(self, f"fc{i}")(x)
        return paddle.tile(x.unsqueeze(1), [1, self.num_ws, 1])


class SynthesisLayer(nn.Layer):
    def __init__(self, in_channels, out_channels, w_dim, kernel_size=3, up=1):
        super().__init__()
        self.up, self.padding = up, kernel_size // 2
        self.resample_filter = setup_filter([1, 3, 3, 1])
        self.affine = FullyConnectedLayer(w_dim, in_channels, bias_init=1)
        self.weight = self.create_parameter([out_channels, in_channels, kernel_size, kernel_size])
        self.noise_strength = self.create_parameter([])
        self.bias = self.create_parameter([out_channels], is_bias=True)

    def forward(self, x, w, noise):
        styles = self.affine(w)
        x = modulated_conv2d(x, self.weight, styles, noise * self.noise_strength, up=self.up, padding=self.padding,
                             resample_filter=self.resample_filter, flip_weight=(self.up == 1))
        return bias_act(x, self.bias, act="lrelu")


class ToRGBLayer(nn.Layer):
    def __init__(self, in_channels, out_channels, w_dim, kernel_size=1):
        super().__init__()
        self.affine = FullyConnectedLayer(w_dim, in_channels, bias_init=1)
        self.weight = self.create_parameter([out_channels, in_channels, kernel_size, kernel_size])
        self.bias = self.create_parameter([out_channels], is_bias=True)
        self.weight_gain = float(1 / np.sqrt(in_channels * kernel_size * kernel_size))

    def forward(self, x, w):
        styles = self.affine(w) * self.weight_gain
        x = modulated_conv2d(x, self.weight, styles, demodulate=False)
        return bias_act(x, self.bias)


class SynthesisBlock(nn.Layer):
    def __init__(self, in_channels, out_channels, w_dim, resolution, img_channels=3):
        super().__init__()
        self.in_channels = in_channels
        self.resample_filter = setup_filter([1, 3, 3, 1])
        if in_channels == 0:
            self.const = self.create_parameter([out_channels, resolution, resolution])
        else:
            self.conv0 = SynthesisLayer(in_channels, out_channels, w_dim, up=2)
        self.conv1 = SynthesisLayer(out_channels, out_channels, w_dim)
        self.torgb = ToRGBLayer(out_channels, img_channels, w_dim)

    def forward(self, x, img, ws, noises):
        if self.in_channels == 0:
            x = paddle.tile(self.const.unsqueeze(0), [ws.shape[0], 1, 1, 1])
            x = self.conv1(x, ws[:, 0], noises[0])
        else:
            x = self.conv0(x, ws[:, 0], noises[0])
            x = self.conv1(x, ws[:, 1], noises[1])
        if img is not None:
            img = upsample2d(img, self.resample_filter)
        y = self.torgb(x, ws[:, -1])
        return x, (y if img is None else img + y)


class SynthesisNetwork(nn.Layer):
    def __init__(self, w_dim=8, channels=8, img_channels=3):
        super().__init__()
        self.b4 = SynthesisBlock(0, channels, w_dim, 4, img_channels)
        self.b8 = SynthesisBlock(channels, channels, w_dim, 8, img_channels)

    def forward(self, ws, noise_b4, noise_b8_0, noise_b8_1):
        x, img = self.b4(None, None, ws[:, 0:2], [noise_b4])
        x, img = self.b8(x, img, ws[:, 1:4], [noise_b8_0, noise_b8_1])
        return img


class Generator(nn.Layer):
    def __init__(self, z_dim=8, w_dim=8, channels=8):
        super().__init__()
        self.mapping = MappingNetwork(z_dim, w_dim, num_ws=4)
        self.synthesis = SynthesisNetwork(w_dim, channels)

    def forward(self, z, noise_b4, noise_b8_0, noise_b8_1):
        return self.synthesis(self.mapping(z), noise_b4, noise_b8_0, noise_b8_1)


def synthesis():
    m = Generator()
    m.train()
    return m
