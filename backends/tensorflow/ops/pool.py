import tensorflow as tf

from backends.tensorflow.ops import OPS
from backends.tensorflow.ops._util import to_nchw, to_nhwc


def _ceil_extra(n, k, d, s, begin, end, ceil_mode):
    """Cells to add at the end so that 'VALID' pooling yields ONNX's ceil_mode output size (a
    last window must start inside the input or the begin padding, as in torch)."""
    if not ceil_mode:
        return 0
    span = (k - 1) * d + 1
    out = -(-(n + begin + end - span) // s) + 1
    if (out - 1) * s >= n + begin:
        out -= 1
    return max(0, (out - 1) * s + span - (n + begin + end))


def _padding(x, kernel_shape, dilations, strides, pads, ceil_mode):
    """[[b, e + ceil extra] per spatial axis], NHWC order with the batch and channel pairs."""
    r = len(kernel_shape)
    spatial = [[pads[i], pads[i + r] + _ceil_extra(x.shape[2 + i], kernel_shape[i], dilations[i], strides[i],
                                                   pads[i], pads[i + r], ceil_mode)] for i in range(r)]
    return [[0, 0]] + spatial + [[0, 0]]


def _dilated(xt, kind, kernel_shape, dilations, strides):
    # tf.nn.pool refuses strides > 1 with dilations > 1: pool at stride 1, then keep every s-th window
    y = tf.nn.pool(xt, list(kernel_shape), kind, strides=None, padding="VALID", dilations=list(dilations))
    return y[(slice(None),) + tuple(slice(None, None, s) for s in strides) + (slice(None),)]


@OPS.register("MaxPool", since=12)
def max_pool(x, *, auto_pad="NOTSET", ceil_mode=0, dilations=None, kernel_shape, pads, storage_order=0, strides):
    r = len(kernel_shape)
    dilations = dilations if dilations is not None else [1] * r
    padding = _padding(x, kernel_shape, dilations, strides, pads, ceil_mode)
    xt = to_nhwc(x)  # NHWC only on CPU
    if all(d == 1 for d in dilations):
        if r == 2:  # tf.nn.max_pool2d takes explicit paddings (ceil_mode as extra end padding)
            return to_nchw(tf.nn.max_pool2d(xt, list(kernel_shape), list(strides), padding))
        return to_nchw(tf.nn.max_pool(tf.pad(xt, padding, constant_values=float("-inf")), list(kernel_shape),
                                      list(strides), "VALID"))
    return to_nchw(_dilated(tf.pad(xt, padding, constant_values=float("-inf")), "MAX", kernel_shape, dilations,
                            strides))


@OPS.register("AveragePool", since=19)
def average_pool(x, *, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0, dilations=None, kernel_shape, pads,
                 strides):
    r = len(kernel_shape)
    dilations = dilations if dilations is not None else [1] * r
    padding = _padding(x, kernel_shape, dilations, strides, pads, ceil_mode)
    xt = to_nhwc(x)  # NHWC only on CPU
    # tf's avg_pool pads only as 'SAME' (and then excludes the pads): pad explicitly with zeros, and
    # divide by the share of window cells ONNX counts (pads too when count_include_pad=1, never
    # ceil_mode's extra cells), the average of that mask over the same windows
    y = _avg(tf.pad(xt, padding), kernel_shape, dilations, strides)
    extra = any(e != pads[i + r] for i, (_, e) in enumerate(padding[1:-1]))
    if count_include_pad and not extra:
        return to_nchw(y)
    ones = tf.ones([1] + list(x.shape[2:]) + [1], x.dtype)
    counted = tf.pad(ones, [[0, 0]] + [[pads[i], pads[i + r]] for i in range(r)] + [[0, 0]],
                     constant_values=1.0 if count_include_pad else 0.0)
    counted = tf.pad(counted, [[0, 0]] + [[0, e - pads[i + r]] for i, (_, e) in enumerate(padding[1:-1])] + [[0, 0]])
    return to_nchw(y / _avg(counted, kernel_shape, dilations, strides))


def _avg(t, kernel_shape, dilations, strides):
    """Average pooling of NHWC `t` over 'VALID' windows (a module-level helper, not a closure: a repro script
    can carry it, written straight-line)."""
    if all(d == 1 for d in dilations):
        return tf.nn.avg_pool(t, list(kernel_shape), list(strides), "VALID")
    return _dilated(t, "AVG", kernel_shape, dilations, strides)


@OPS.register("GlobalAveragePool", since=1)
def global_average_pool(x):
    return tf.reduce_mean(x, axis=list(range(2, x.shape.rank)), keepdims=True)


@OPS.register("GlobalMaxPool", since=1)
def global_max_pool(x):
    return tf.reduce_max(x, axis=list(range(2, x.shape.rank)), keepdims=True)
