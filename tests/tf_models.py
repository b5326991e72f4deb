"""Keras models for the TensorFlow import tests (run in irtrace's TensorFlow environment)."""
import numpy as np
import tensorflow as tf


def block(x, cin, cout, stride, name):
    """A WideResNet basic block as in ../shared/seeds/004: BN -> ReLU -> conv3x3 'same' (stride),
    BN -> ReLU -> conv3x3, 1x1 shortcut conv."""
    x = tf.keras.layers.BatchNormalization(epsilon=1e-3, name=f"{name}_bn1")(x)
    x = tf.keras.layers.ReLU(name=f"{name}_relu1")(x)
    y = tf.keras.layers.Conv2D(cout, 3, strides=stride, padding="same", use_bias=False, name=f"{name}_conv1")(x)
    y = tf.keras.layers.BatchNormalization(epsilon=1e-3, name=f"{name}_bn2")(y)
    y = tf.keras.layers.ReLU(name=f"{name}_relu2")(y)
    y = tf.keras.layers.Conv2D(cout, 3, strides=1, padding="same", use_bias=False, name=f"{name}_conv2")(y)
    s = tf.keras.layers.Conv2D(cout, 1, strides=stride, padding="valid", use_bias=False, name=f"{name}_shortcut")(x)
    return tf.keras.layers.Add(name=f"{name}_add")([s, y])


def wideresnet():
    tf.keras.utils.set_random_seed(0)
    inp = tf.keras.Input((8, 8, 3), batch_size=2, name="x")
    x = tf.keras.layers.Conv2D(4, 3, padding="same", use_bias=False, name="conv1")(inp)
    x = block(x, 4, 8, 1, "block1")
    x = block(x, 8, 8, 2, "block2")
    x = tf.keras.layers.GlobalAveragePooling2D(name="gap")(x)
    out = tf.keras.layers.Dense(3, name="fc")(x)
    model = tf.keras.Model(inp, out)
    rng = np.random.default_rng(0)
    for layer in model.layers:  # non-trivial BatchNorm statistics, as after training
        if isinstance(layer, tf.keras.layers.BatchNormalization):
            c = layer.gamma.shape[0]
            layer.set_weights([rng.uniform(0.5, 1.5, c), rng.normal(0, 0.1, c), rng.normal(0, 0.1, c),
                               rng.uniform(0.5, 1.5, c)])
    return model


class Expm(tf.keras.layers.Layer):
    def call(self, t):
        return tf.linalg.expm(t)  # MatrixExponential: no ONNX conversion in tf2onnx


def unconvertible():
    """A model whose op tf2onnx cannot convert."""
    inp = tf.keras.Input((3, 3), batch_size=2, name="x")
    return tf.keras.Model(inp, Expm(name="expm")(inp))


def recurrent():
    """A Keras sequence model: LSTM (all steps) -> LSTM (all steps) -> GRU unrolled (last step) -> Dense,
    random weights. tf2onnx converts each LSTM layer to one ONNX LSTM node, the unrolled GRU to its
    steps' plain ops (a GRU that is not unrolled becomes a Loop: gru())."""
    tf.keras.utils.set_random_seed(0)
    inp = tf.keras.Input((6, 4), batch_size=2, name="x")
    x = tf.keras.layers.LSTM(5, return_sequences=True, name="lstm1")(inp)
    x = tf.keras.layers.LSTM(3, return_sequences=True, name="lstm2")(x)
    x = tf.keras.layers.GRU(4, unroll=True, name="gru")(x)
    return tf.keras.Model(inp, tf.keras.layers.Dense(2, name="fc")(x))


def gru(unroll=False):
    """A Keras GRU: tf2onnx writes it as a Loop over the time steps, unless unrolled."""
    tf.keras.utils.set_random_seed(0)
    inp = tf.keras.Input((6, 4), batch_size=2, name="x")
    x = tf.keras.layers.GRU(4, unroll=unroll, name="gru")(inp)
    return tf.keras.Model(inp, tf.keras.layers.Dense(2, name="fc")(x))
