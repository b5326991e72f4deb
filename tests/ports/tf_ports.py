"""TensorFlow (Keras 3) ports of tests/models_for_tests.py's conv_bn_head and KerasWRN (its stride-2 conv padded
symmetrically, or TensorFlow-'SAME'), as porters write them, channels-last (TensorFlow's CPU convolutions take
NHWC only) and built on NHWC inputs, so irtrace feeds them NHWC: a correct one each, and the mistakes porters
make (tests/test_port.py names each at its module). The same factory names as tests/ports/mge_ports.py."""
import tensorflow as tf
import keras


class TorchBatchNorm(keras.layers.BatchNormalization):
    """Keras's BatchNormalization with torch's running_var: updated with the unbiased batch variance (Keras's
    own keeps the population one, n/(n-1) smaller), normalizing with the biased one as both do."""

    def call(self, x, training=None):
        if not training:
            return super().call(x, training=False)
        mean, var = tf.nn.moments(x, axes=list(range(len(x.shape) - 1)))
        n = x.shape.num_elements() // x.shape[-1]
        m = self.momentum
        self.moving_mean.assign(self.moving_mean * m + mean * (1 - m))
        self.moving_variance.assign(self.moving_variance * m + var * (n / (n - 1)) * (1 - m))
        return tf.nn.batch_normalization(x, mean, var, self.beta, self.gamma, self.epsilon)


class Linear(keras.layers.Layer):
    """A Linear of one's own, weight in torch's [out, in]: y = x W^T + b, or, `untransposed`, x W + b."""

    def __init__(self, cin, cout, gain=1.0, untransposed=False, **kw):
        super().__init__(**kw)
        self.weight = self.add_weight(shape=(cout, cin), name="weight")
        self.bias = self.add_weight(shape=(cout,), initializer="zeros", name="bias")
        self.gain, self.untransposed = gain, untransposed

    def call(self, x):
        w = self.weight * self.gain if self.gain != 1.0 else self.weight
        return tf.matmul(x, w, transpose_b=not self.untransposed) + self.bias


class ConvBNHead(keras.Model):
    """conv -> BatchNorm (train) -> ReLU -> mean -> a square Linear (Keras's Dense) -> an equalized-lr head."""

    def __init__(self, bn="torch", untransposed=False, gain=True, detach_input=False, head="head"):
        super().__init__()
        self.conv = keras.layers.Conv2D(8, 3, padding="same")
        self.bn = {"torch": lambda: TorchBatchNorm(epsilon=1e-5, momentum=0.9),
                   "keras": lambda: keras.layers.BatchNormalization(epsilon=1e-5, momentum=0.9),
                   "keras defaults": keras.layers.BatchNormalization}[bn]()
        self.square = Linear(8, 8, untransposed=True) if untransposed else keras.layers.Dense(8)
        setattr(self, head, Linear(8, 3, gain=8 ** -0.5 if gain else 1.0))
        self.head_name, self.detach_input = head, detach_input

    def call(self, x, training=None):
        if self.detach_input:
            x = tf.stop_gradient(x)  # a step that cuts the penalty term's path: its gradient is lost
        y = tf.nn.relu(self.bn(self.conv(x), training=training))
        return getattr(self, self.head_name)(self.square(tf.reduce_mean(y, axis=(1, 2))))


def _built(m, shape=(4, 6, 6, 3)):
    m(tf.zeros(shape))  # a Keras model makes its variables on its first call
    return m


def head():
    """Correct: torch's running_var estimator, epsilon and momentum; the Dense's kernel transposed by irtrace."""
    return _built(ConvBNHead())


def head_biased_bn():
    """Keras's own BatchNormalization (epsilon and momentum set as torch's): running_var with the biased variance."""
    return _built(ConvBNHead(bn="keras"))


def head_keras_defaults():
    """Keras's BatchNormalization with its defaults: epsilon 1e-3 (torch 1e-5), momentum 0.99 (torch 0.9 kept)."""
    return _built(ConvBNHead(bn="keras defaults"))


def head_untransposed():
    return _built(ConvBNHead(untransposed=True))


def head_no_gain():
    return _built(ConvBNHead(gain=False))


def head_detached():
    return _built(ConvBNHead(detach_input=True))


def raises():
    raise RuntimeError("planted: the port cannot be built")


def wrong_names():
    """conv_bn_head with its head called `classifier` (a name the bundle does not have)."""
    return _built(ConvBNHead(head="classifier"))


def wrong_output():
    class Two(ConvBNHead):
        def call(self, x, training=None):
            return super().call(x, training=training)[:, :2]
    return _built(Two())


def not_built():
    return ConvBNHead()


class Block(keras.layers.Layer):
    """tests/models_for_tests.py's KerasBlock: BN -> ReLU -> conv3x3 (stride), BN -> ReLU -> conv3x3, 1x1 shortcut.
    `same`: the stride-2 conv pads TensorFlow's 'SAME' (padding='same'), else symmetrically (a ZeroPadding2D, then
    padding='valid'), as torch's padding=1."""

    def __init__(self, cout, stride, same, **kw):
        super().__init__(**kw)
        self.bn1 = keras.layers.BatchNormalization(epsilon=1e-3, momentum=0.9)
        self.pad = keras.layers.ZeroPadding2D(1) if stride == 2 and not same else None
        self.conv1 = keras.layers.Conv2D(cout, 3, strides=stride, padding="valid" if self.pad else "same",
                                         use_bias=False)
        self.bn2 = keras.layers.BatchNormalization(epsilon=1e-3, momentum=0.9)
        self.conv2 = keras.layers.Conv2D(cout, 3, padding="same", use_bias=False)
        self.shortcut = keras.layers.Conv2D(cout, 1, strides=stride, use_bias=False)

    def call(self, x, training=None):
        x = tf.nn.relu(self.bn1(x, training=training))
        y = self.pad(x) if self.pad is not None else x
        y = self.conv2(tf.nn.relu(self.bn2(self.conv1(y), training=training)))
        return self.shortcut(x) + y


class WRN(keras.Model):
    def __init__(self, same):
        super().__init__()
        self.conv1 = keras.layers.Conv2D(4, 3, padding="same", use_bias=False)
        self.block1 = Block(8, 1, same)
        self.block2 = Block(8, 2, same)
        self.fc = keras.layers.Dense(3)

    def call(self, x, training=None):
        x = self.block2(self.block1(self.conv1(x), training=training), training=training)
        return self.fc(tf.reduce_mean(x, axis=(1, 2)))


def wrn_same():
    """padding='same' at stride 2: right for models_for_tests.same_pad_wrn, ../shared/seeds/004's mistake for a
    torch model that pads 1 on every side."""
    return _built(WRN(same=True), (2, 8, 8, 3))


def wrn_symmetric():
    """Symmetric padding at stride 2 (ZeroPadding2D(1), then 'valid'): right for a torch model with padding=1."""
    return _built(WRN(same=False), (2, 8, 8, 3))
