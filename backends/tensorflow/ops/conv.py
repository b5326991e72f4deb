import tensorflow as tf

from backends._table import Unsupported
from backends.tensorflow.ops import OPS
from backends.tensorflow.ops._util import pad_pairs, to_nchw, to_nhwc


@OPS.register("Conv", since=11)
def conv(x, w, b=None, *, auto_pad="NOTSET", dilations, group=1, kernel_shape, pads, strides):
    """Keras's calls where tf.nn.conv2d's CPU gradient kernels refuse what its forward computes: a depthwise 2-D conv
    through tf.nn.depthwise_conv2d (DepthwiseConv2D's), a dilated one through tf.nn.convolution (Conv2D's). A grouped
    conv goes through tf.nn.conv2d's groups, as NVIDIA's TensorFlow StyleGAN2 writes it, and its gradients are ERROR
    on CPU in TensorFlow's words (Keras compiles a grouped conv with XLA for this reason)."""
    r = len(kernel_shape)
    # NHWC only on CPU: transpose in and out; OIHW weights become TF's HWIO (grouped: I/G in, as ONNX)
    xt, wt = to_nhwc(x), tf.transpose(w, list(range(2, 2 + r)) + [1, 0])
    paddings = [[0, 0]] + pad_pairs(pads) + [[0, 0]]
    # TensorFlow's dilated convolutions take no strides > 1 (nor do Keras's layers): a porter subsamples after
    step = [1] * r if any(d > 1 for d in dilations) else list(strides)
    if r == 2 and group > 1 and w.shape[1] == 1 and group == x.shape[1]:
        # depthwise, M outputs per input channel: ONNX's output channel c*M + m is TensorFlow's (channel c,
        # multiplier m), so the filter is (kh, kw, C, M)
        m = w.shape[0] // group
        wt = tf.transpose(tf.reshape(w, [group, m] + list(w.shape[2:])), [2, 3, 0, 1])
        y = tf.nn.depthwise_conv2d(xt, wt, strides=[1] + step + [1], padding=paddings, dilations=list(dilations))
    elif r == 2 and (group > 1 or all(d == 1 for d in dilations)):  # explicit (also asymmetric) paddings
        step = list(strides)  # tf.nn.conv2d's forward takes strides with dilations
        y = tf.nn.conv2d(xt, wt, strides=step, padding=paddings, dilations=list(dilations))
    else:  # tf.nn.convolution takes only 'SAME'/'VALID': pad first, as a porter would. Its data_format given, as
        # Keras gives it: left to its default, a 3-D conv's gradient raises "'NoneType' object has no attribute
        # 'decode'" (its Conv3D op has no data_format for the gradient to read)
        y = tf.nn.convolution(tf.pad(xt, paddings), wt, strides=step, padding="VALID", dilations=list(dilations),
                              data_format=("NWC", "NHWC", "NDHWC")[r - 1])
    if step != list(strides):
        y = y[(slice(None),) + tuple(slice(None, None, s) for s in strides) + (slice(None),)]
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
