import tensorflow as tf

# ONNX TensorProto data type -> TensorFlow dtype
ONNX_TO_TF = {1: tf.float32, 2: tf.uint8, 3: tf.int8, 4: tf.uint16, 5: tf.int16, 6: tf.int32, 7: tf.int64,
              9: tf.bool, 10: tf.float16, 11: tf.float64, 12: tf.uint32, 13: tf.uint64, 16: tf.bfloat16}


def pad_pairs(pads):
    """ONNX [b1..bn, e1..en] -> tf.pad's [[b1, e1], ...]."""
    r = len(pads) // 2
    return [[pads[i], pads[i + r]] for i in range(r)]


def to_nhwc(x):
    """NC... -> N...C: TensorFlow's CPU conv and pool kernels take channels last only."""
    return tf.transpose(x, [0] + list(range(2, x.shape.rank)) + [1])


def to_nchw(x):
    return tf.transpose(x, [0, x.shape.rank - 1] + list(range(1, x.shape.rank - 1)))
