"""WideResNet (irtrace/examples/wideresnet.py) in TensorFlow, as a Keras 3 porter writes it: channels-last
(TensorFlow's CPU convolutions take NHWC only), built on NHWC inputs, so irtrace feeds it NHWC. Two things
torch does that Keras does not by default, written out: a stride-2 conv pads 1 on every side (a
ZeroPadding2D, then padding='valid': Keras's padding='same' would pad [0, 1] there, ../shared/seeds/004), and
BatchNorm keeps the unbiased batch variance in its running_var (TorchBatchNorm; Keras's own keeps the
population one), with torch's epsilon 1e-5 and momentum 0.1 (0.9 kept, in Keras's words).
`wideresnet()` is the eval model; `wideresnet_dropout(recorded=...)` the train one, which drops what torch
dropped (the bundle's masks, NCHW, transposed here)."""
import tensorflow as tf
import keras


class TorchBatchNorm(keras.layers.BatchNormalization):
    """torch's BatchNorm2d: running_var updated with the unbiased batch variance (n/(n-1) times the population
    one Keras keeps), the output normalized with the population one, as both do."""

    def __init__(self, **kw):
        super().__init__(epsilon=1e-5, momentum=0.9, **kw)

    def call(self, x, training=None):
        if not training:
            return super().call(x, training=False)
        mean, var = tf.nn.moments(x, axes=list(range(len(x.shape) - 1)))
        n = x.shape.num_elements() // x.shape[-1]
        m = self.momentum
        self.moving_mean.assign(self.moving_mean * m + mean * (1 - m))
        self.moving_variance.assign(self.moving_variance * m + var * (n / (n - 1)) * (1 - m))
        return tf.nn.batch_normalization(x, mean, var, self.beta, self.gamma, self.epsilon)


def conv3x3(out_planes, stride):
    """torch's Conv2d(k=3, padding=1): 'same' is that at stride 1; at stride 2 it is not (see the docstring)."""
    return keras.layers.Conv2D(out_planes, 3, strides=stride, padding="same" if stride == 1 else "valid",
                               use_bias=False)


class BasicBlock(keras.layers.Layer):
    def __init__(self, in_planes, out_planes, stride, drop_rate=0.0, masks=None, name="", **kw):
        super().__init__(**kw)
        self.bn1 = TorchBatchNorm()
        self.relu1 = keras.layers.ReLU()
        self.pad1 = keras.layers.ZeroPadding2D(1) if stride != 1 else None
        self.conv1 = conv3x3(out_planes, stride)
        self.bn2 = TorchBatchNorm()
        self.relu2 = keras.layers.ReLU()
        self.conv2 = conv3x3(out_planes, 1)
        self.drop_rate, self.masks, self.where = drop_rate, masks or {}, name
        self.dropout = keras.layers.Dropout(drop_rate) if drop_rate > 0 else None
        self.equal_in_out = in_planes == out_planes
        self.convShortcut = None if self.equal_in_out else \
            keras.layers.Conv2D(out_planes, 1, strides=stride, use_bias=False)

    def call(self, x, training=None):
        if not self.equal_in_out:
            x = self.relu1(self.bn1(x, training=training))
            out = x
        else:
            out = self.relu1(self.bn1(x, training=training))
        out = self.pad1(out) if self.pad1 is not None else out
        out = self.relu2(self.bn2(self.conv1(out), training=training))
        if self.dropout is not None and training:
            mask = self.masks.get(f"{self.where}.dropout_mask")  # the mask torch drew (irtrace hands it over)
            out = out * tf.transpose(tf.cast(mask, out.dtype), (0, 2, 3, 1)) / (1 - self.drop_rate) \
                if mask is not None else self.dropout(out, training=True)
        out = self.conv2(out)
        return (x if self.equal_in_out else self.convShortcut(x)) + out


class NetworkBlock(keras.layers.Layer):
    def __init__(self, nb_layers, in_planes, out_planes, stride, drop_rate=0.0, masks=None, name="", **kw):
        super().__init__(**kw)
        self.layer = keras.Sequential([BasicBlock(in_planes if i == 0 else out_planes, out_planes,
                                                  stride if i == 0 else 1, drop_rate, masks, f"{name}.layer.{i}")
                                       for i in range(nb_layers)])

    def call(self, x, training=None):
        return self.layer(x, training=training)


class WideResNet(keras.Model):
    def __init__(self, depth=10, num_classes=10, widen_factor=1, drop_rate=0.0, masks=None):
        super().__init__()
        ch = [8, 8 * widen_factor, 16 * widen_factor, 32 * widen_factor]
        n = (depth - 4) // 6
        self.conv1 = conv3x3(ch[0], 1)
        self.block1 = NetworkBlock(n, ch[0], ch[1], 1, drop_rate, masks, "block1")
        self.block2 = NetworkBlock(n, ch[1], ch[2], 2, drop_rate, masks, "block2")
        self.block3 = NetworkBlock(n, ch[2], ch[3], 2, drop_rate, masks, "block3")
        self.bn1 = TorchBatchNorm()
        self.relu = keras.layers.ReLU()
        self.fc = keras.layers.Dense(num_classes)

    def call(self, x, training=None):
        out = self.conv1(x)
        out = self.block1(out, training=training)
        out = self.block2(out, training=training)
        out = self.block3(out, training=training)
        out = self.relu(self.bn1(out, training=training))
        out = tf.reduce_mean(out, axis=(1, 2))  # torch's avg_pool2d over the whole map, then the view
        return self.fc(out)


def _built(m):
    m(tf.zeros((2, 16, 16, 3)))  # a Keras model makes its variables on its first call
    return m


def wideresnet(recorded=None):
    return _built(WideResNet(masks=recorded))


def wideresnet_dropout(recorded=None):
    return _built(WideResNet(drop_rate=0.3, masks=recorded))
