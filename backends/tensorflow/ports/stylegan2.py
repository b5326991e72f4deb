"""StyleGAN2-ADA's generator pieces (irtrace/examples/stylegan2.py) in TensorFlow, written as the official
TensorFlow StyleGAN2 is: tf.Module and tf.nn ops, NCHW between modules (TensorFlow's CPU convolutions take
NHWC only, so each convolution transposes in and out), so irtrace feeds it the bundle's NCHW tensors as they are.

`synthesis()` follows the torch reference literally: the modulated convolution as one grouped convolution over
the batch folded into channels (groups = batch; the official code's fused_modconv) and upfirdn2d's FIR filter as
a grouped (depthwise) convolution. TensorFlow computes those forward on CPU but refuses their gradients ("Gradients
for grouped convolutions are not supported on CPU"): the step fails, and `irtrace port` names the ops. The
`synthesis_workarounds()` port avoids grouped convolutions as the official code's other paths do: the styles
scale the activations instead of the weight (fused_modconv=False: the same product, one shared weight) and the
FIR filter runs with the channels folded into the batch (upfirdn2d_ref)."""
import numpy as np
import tensorflow as tf

SQRT2 = float(np.sqrt(2))


def conv2d(x, w_hwio, strides=1, padding=((0, 0), (0, 0))):
    """An NCHW conv with an HWIO filter, run NHWC (grouped where the filter's input channels divide x's)."""
    (py0, py1), (px0, px1) = padding
    x = tf.transpose(x, (0, 2, 3, 1))
    y = tf.nn.conv2d(x, w_hwio, strides=strides, padding=[[0, 0], [py0, py1], [px0, px1], [0, 0]])
    return tf.transpose(y, (0, 3, 1, 2))


def conv2d_transpose(x, w_hwoi, out_channels, stride, crop=(0, 0)):
    """An NCHW transposed conv (torch's conv_transpose2d with padding `crop`) with a (kh, kw, O, I) filter."""
    n, _, h, w = x.shape
    kh, kw = w_hwoi.shape[0], w_hwoi.shape[1]
    out = [n, (h - 1) * stride + kh, (w - 1) * stride + kw, out_channels]
    y = tf.nn.conv2d_transpose(tf.transpose(x, (0, 2, 3, 1)), w_hwoi, out, strides=stride, padding="VALID")
    cy, cx = crop
    y = y[:, cy: out[1] - cy, cx: out[2] - cx, :]
    return tf.transpose(y, (0, 3, 1, 2))


def normalize_2nd_moment(x, eps=1e-8):
    return x * tf.math.rsqrt(tf.reduce_mean(tf.square(x), axis=1, keepdims=True) + eps)


def bias_act(x, b=None, act="linear", alpha=0.2, gain=None):
    if b is not None:
        x = x + tf.reshape(b, [-1 if i == 1 else 1 for i in range(len(x.shape))])
    if act == "lrelu":
        x = tf.nn.leaky_relu(x, alpha)
    gain = gain if gain is not None else (SQRT2 if act == "lrelu" else 1.0)
    return x * gain if gain != 1 else x


def setup_filter(f):
    f = np.asarray(f, np.float32)
    f = np.outer(f, f)
    return f / f.sum()


def upfirdn2d(x, f, up=1, down=1, padding=(0, 0, 0, 0), gain=1, grouped=True):
    batch, channels, h, w = x.shape
    x = tf.reshape(x, [batch, channels, h, 1, w, 1])
    x = tf.pad(x, [[0, 0], [0, 0], [0, 0], [0, up - 1], [0, 0], [0, up - 1]])
    x = tf.reshape(x, [batch, channels, h * up, w * up])
    px0, px1, py0, py1 = padding
    x = tf.pad(x, [[0, 0], [0, 0], [max(py0, 0), max(py1, 0)], [max(px0, 0), max(px1, 0)]])
    x = x[:, :, max(-py0, 0): x.shape[2] - max(-py1, 0), max(-px0, 0): x.shape[3] - max(-px1, 0)]
    f = (f * (gain ** (f.ndim / 2)))[::-1, ::-1]  # flipped: the reference's flip_filter=False
    if grouped:  # one filter per channel: a grouped conv, groups = channels
        x = conv2d(x, np.ascontiguousarray(np.broadcast_to(f[:, :, None, None], f.shape + (1, channels))))
    else:  # the channels folded into the batch, one single-channel filter
        hh, ww = x.shape[2], x.shape[3]
        x = conv2d(tf.reshape(x, [batch * channels, 1, hh, ww]), np.ascontiguousarray(f[:, :, None, None]))
        x = tf.reshape(x, [batch, channels, x.shape[2], x.shape[3]])
    return x[:, :, ::down, ::down]


def upsample2d(x, f, up=2, grouped=True):
    fw = f.shape[-1]
    p = [(fw + up - 1) // 2, (fw - up) // 2] * 2
    return upfirdn2d(x, f, up=up, padding=p, gain=up * up, grouped=grouped)


def _resample_pads(fw, kw, up, padding):
    p0, p1 = padding + (fw + up - 1) // 2 - (kw - 1), padding + (fw - up) // 2 - (kw - up)
    t = max(min(-p0, -p1), 0)
    return p0, p1, t


def modulated_conv2d(x, weight, styles, noise=None, up=1, padding=0, resample_filter=None, demodulate=True,
                     flip_weight=True, fused=True):
    """weight: torch's (O, I, kh, kw); styles: (N, I)."""
    batch = x.shape[0]
    out_channels, in_channels, kh, kw = weight.shape
    w = weight[None] * tf.reshape(styles, [batch, 1, -1, 1, 1])          # (N, O, I, kh, kw)
    dcoefs = tf.math.rsqrt(tf.reduce_sum(tf.square(w), axis=[2, 3, 4]) + 1e-8) if demodulate else None
    if fused:  # the batch as conv groups, as the reference
        if demodulate:
            w = w * tf.reshape(dcoefs, [batch, -1, 1, 1, 1])
        x = tf.reshape(x, [1, batch * in_channels, x.shape[2], x.shape[3]])
        if up > 1:
            p0, p1, t = _resample_pads(resample_filter.shape[-1], kw, up, padding)
            if flip_weight:
                w = w[..., ::-1, ::-1]
            # a grouped transposed conv's filter: (kh, kw, O per group, N * I)
            w = tf.transpose(w, (3, 4, 1, 0, 2))
            w = tf.reshape(w, [kh, kw, out_channels, batch * in_channels])
            x = conv2d_transpose(x, w, batch * out_channels, up, crop=(t, t))
            x = upfirdn2d(x, resample_filter, padding=[p0 + t, p1 - t, p0 + t, p1 - t], gain=up * up)
        else:
            w = w if flip_weight else w[..., ::-1, ::-1]
            w = tf.transpose(tf.reshape(w, [batch * out_channels, in_channels, kh, kw]), (2, 3, 1, 0))
            x = conv2d(x, w, padding=((padding, padding), (padding, padding)))
        x = tf.reshape(x, [batch, -1, x.shape[2], x.shape[3]])
    else:  # the styles scale the activations, one weight for the batch (fused_modconv=False)
        x = x * tf.reshape(styles, [batch, -1, 1, 1])
        if up > 1:
            p0, p1, t = _resample_pads(resample_filter.shape[-1], kw, up, padding)
            x = conv2d_transpose(x, tf.transpose(weight, (2, 3, 0, 1)), out_channels, up, crop=(t, t))
            x = upfirdn2d(x, resample_filter, padding=[p0 + t, p1 - t, p0 + t, p1 - t], gain=up * up, grouped=False)
        else:
            w = weight if flip_weight else weight[..., ::-1, ::-1]
            x = conv2d(x, tf.transpose(w, (2, 3, 1, 0)), padding=((padding, padding), (padding, padding)))
        if demodulate:
            x = x * tf.reshape(dcoefs, [batch, -1, 1, 1])
    if noise is not None:
        x = x + noise
    return x


class FullyConnectedLayer(tf.Module):
    def __init__(self, in_features, out_features, activation="linear", lr_multiplier=1.0, bias_init=0.0):
        super().__init__()
        self.activation = activation
        self.weight = tf.Variable(tf.zeros([out_features, in_features]))
        self.bias = tf.Variable(tf.fill([out_features], float(bias_init)))
        self.weight_gain = float(lr_multiplier / np.sqrt(in_features))
        self.bias_gain = float(lr_multiplier)

    def __call__(self, x):
        w = self.weight * self.weight_gain
        b = self.bias * self.bias_gain
        if self.activation == "linear":
            return tf.matmul(x, w, transpose_b=True) + b[None]
        return bias_act(tf.matmul(x, w, transpose_b=True), b, act=self.activation)


class MappingNetwork(tf.Module):
    def __init__(self, z_dim, w_dim, num_ws, num_layers=2, lr_multiplier=0.01):
        super().__init__()
        self.num_ws, self.num_layers = num_ws, num_layers
        for i in range(num_layers):
            setattr(self, f"fc{i}", FullyConnectedLayer(z_dim if i == 0 else w_dim, w_dim, "lrelu", lr_multiplier))

    def __call__(self, z):
        x = normalize_2nd_moment(z)
        for i in range(self.num_layers):
            x = getattr(self, f"fc{i}")(x)
        return tf.tile(x[:, None], [1, self.num_ws, 1])


class SynthesisLayer(tf.Module):
    def __init__(self, in_channels, out_channels, w_dim, kernel_size=3, up=1, fused=True):
        super().__init__()
        self.up, self.padding, self.fused = up, kernel_size // 2, fused
        self.resample_filter = setup_filter([1, 3, 3, 1])
        self.affine = FullyConnectedLayer(w_dim, in_channels, bias_init=1)
        self.weight = tf.Variable(tf.zeros([out_channels, in_channels, kernel_size, kernel_size]))
        self.noise_strength = tf.Variable(tf.zeros([]))
        self.bias = tf.Variable(tf.zeros([out_channels]))

    def __call__(self, x, w, noise):
        styles = self.affine(w)
        x = modulated_conv2d(x, self.weight, styles, noise * self.noise_strength, up=self.up, padding=self.padding,
                             resample_filter=self.resample_filter, flip_weight=(self.up == 1), fused=self.fused)
        return bias_act(x, self.bias, act="lrelu")


class ToRGBLayer(tf.Module):
    def __init__(self, in_channels, out_channels, w_dim, kernel_size=1, fused=True):
        super().__init__()
        self.fused = fused
        self.affine = FullyConnectedLayer(w_dim, in_channels, bias_init=1)
        self.weight = tf.Variable(tf.zeros([out_channels, in_channels, kernel_size, kernel_size]))
        self.bias = tf.Variable(tf.zeros([out_channels]))
        self.weight_gain = float(1 / np.sqrt(in_channels * kernel_size * kernel_size))

    def __call__(self, x, w):
        styles = self.affine(w) * self.weight_gain
        x = modulated_conv2d(x, self.weight, styles, demodulate=False, fused=self.fused)
        return bias_act(x, self.bias)


class SynthesisBlock(tf.Module):
    def __init__(self, in_channels, out_channels, w_dim, resolution, img_channels=3, fused=True):
        super().__init__()
        self.in_channels, self.fused = in_channels, fused
        self.resample_filter = setup_filter([1, 3, 3, 1])
        if in_channels == 0:
            self.const = tf.Variable(tf.zeros([out_channels, resolution, resolution]))
        else:
            self.conv0 = SynthesisLayer(in_channels, out_channels, w_dim, up=2, fused=fused)
        self.conv1 = SynthesisLayer(out_channels, out_channels, w_dim, fused=fused)
        self.torgb = ToRGBLayer(out_channels, img_channels, w_dim, fused=fused)

    def __call__(self, x, img, ws, noises):
        if self.in_channels == 0:
            x = tf.tile(self.const[None], [ws.shape[0], 1, 1, 1])
            x = self.conv1(x, ws[:, 0], noises[0])
        else:
            x = self.conv0(x, ws[:, 0], noises[0])
            x = self.conv1(x, ws[:, 1], noises[1])
        if img is not None:
            img = upsample2d(img, self.resample_filter, grouped=self.fused)
        y = self.torgb(x, ws[:, -1])
        return x, (y if img is None else img + y)


class SynthesisNetwork(tf.Module):
    def __init__(self, w_dim=8, channels=8, img_channels=3, fused=True):
        super().__init__()
        self.b4 = SynthesisBlock(0, channels, w_dim, 4, img_channels, fused)
        self.b8 = SynthesisBlock(channels, channels, w_dim, 8, img_channels, fused)

    def __call__(self, ws, noise_b4, noise_b8_0, noise_b8_1):
        x, img = self.b4(None, None, ws[:, 0:2], [noise_b4])
        x, img = self.b8(x, img, ws[:, 1:4], [noise_b8_0, noise_b8_1])
        return img


class Generator(tf.Module):
    def __init__(self, z_dim=8, w_dim=8, channels=8, fused=True):
        super().__init__()
        self.mapping = MappingNetwork(z_dim, w_dim, num_ws=4)
        self.synthesis = SynthesisNetwork(w_dim, channels, fused=fused)

    def __call__(self, z, noise_b4, noise_b8_0, noise_b8_1):
        return self.synthesis(self.mapping(z), noise_b4, noise_b8_0, noise_b8_1)


def synthesis():
    return Generator()


def synthesis_workarounds():
    return Generator(fused=False)
