import tensorflow as tf

from backends._table import Unsupported
from backends.tensorflow.ops import OPS
from backends.tensorflow.ops._util import pad_pairs, to_nchw, to_nhwc


@OPS.register("Conv", since=11)
def conv(x, w, b=None, *, auto_pad="NOTSET", dilations, group=1, kernel_shape, pads, strides):
    r = len(kernel_shape)
    # NHWC only on CPU: transpose in and out; OIHW weights become TF's HWIO (grouped: I/G in, as ONNX)
    xt, wt = to_nhwc(x), tf.transpose(w, list(range(2, 2 + r)) + [1, 0])
    if r == 2:  # tf.nn.conv2d takes explicit (also asymmetric) paddings
        y = tf.nn.conv2d(xt, wt, strides=list(strides), padding=[[0, 0]] + pad_pairs(pads) + [[0, 0]],
                         dilations=list(dilations))
    else:  # tf.nn.convolution takes only 'SAME'/'VALID': pad first, as a porter would
        y = tf.nn.convolution(tf.pad(xt, [[0, 0]] + pad_pairs(pads) + [[0, 0]]), wt, strides=list(strides),
                              padding="VALID", dilations=list(dilations))
    if b is not None:
        y = tf.nn.bias_add(y, b)  # channels last: the bias adds along the last axis
    return to_nchw(y)


def _dilate(w, dilations):
    """A kernel with zeros between its taps: TF's CPU conv2d_transpose has no dilation > 1."""
    for i, d in enumerate(dilations):
        if d > 1:
            k = w.shape[i]
            w = tf.stack([w] + [tf.zeros_like(w)] * (d - 1), axis=i + 1)  # each tap, then d-1 zero taps
            shape = list(w.shape[:i]) + [k * d] + list(w.shape[i + 2:])
            w = tf.reshape(w, shape)
            w = tf.gather(w, tf.range((k - 1) * d + 1), axis=i)
    return w


@OPS.register("ConvTranspose", since=11)
def conv_transpose(x, w, b=None, *, auto_pad="NOTSET", dilations, group=1, kernel_shape, output_padding,
                   pads, strides, output_shape=None):
    r = len(kernel_shape)
    if r != 2:
        raise Unsupported(f"ConvTranspose with {r}-D kernels: only tf.nn.conv2d_transpose is written here")
    n, cin, h, wd = x.shape
    cout = w.shape[1] * group
    # ONNX (I, O/G, kh, kw) -> TF's (kh, kw, O/G, I); the CPU kernel has no dilation: zero-stuff the kernel
    wt = _dilate(tf.transpose(w, [2, 3, 1, 0]), dilations)
    kh, kw = wt.shape[0], wt.shape[1]
    out = [strides[0] * (h - 1) + output_padding[0] + kh - pads[0] - pads[2],
           strides[1] * (wd - 1) + output_padding[1] + kw - pads[1] - pads[3]]
    xt = to_nhwc(x)
    padding = [[0, 0], [pads[0], pads[2]], [pads[1], pads[3]], [0, 0]]
    # conv2d_transpose has no groups: one call per group, concatenated, as a porter would
    xs = tf.split(xt, group, axis=3) if group > 1 else [xt]
    ws = tf.split(wt, group, axis=3) if group > 1 else [wt]
    ys = [tf.nn.conv2d_transpose(xg, wg, [n] + out + [cout // group], strides=list(strides), padding=padding)
          for xg, wg in zip(xs, ws)]
    y = tf.concat(ys, axis=3) if group > 1 else ys[0]
    if b is not None:
        y = tf.nn.bias_add(y, b)
    return to_nchw(y)
