"""The ResNet-style example (irtrace/examples/resnet.py) in TensorFlow, as a Keras 3 porter writes it, BatchNorm
in train mode: channels-last (TensorFlow's CPU convolutions take NHWC only), built on NHWC inputs, so irtrace
feeds it NHWC. What torch does that Keras does not by default, written out as in ports/wideresnet.py: a stride-2
conv or max pool pads 1 on every side (a ZeroPadding2D, then padding='valid': Keras's 'same' would pad [0, 1]
there), and BatchNorm is torch's (TorchBatchNorm: the unbiased variance in running_var, epsilon 1e-5, momentum
0.1). The stem's max pool pads with zeros where torch pads with -inf: its input is a ReLU's output (>= 0), so
every window's maximum is the same, and a zero it takes from the padding has a zero gradient behind it anyway
(the ReLU's, where its input was negative).
`resnet()` is that port; `resnet_workarounds()` the same with its BatchNorm's batch variance taken around the
batch mean itself (ExactMomentsBatchNorm): tf.nn.moments takes it around stop_gradient(mean), right in value
and in the first gradient, wrong in the second, which a gradient penalty's double backward takes (TensorFlow's
op, named by `irtrace port --loss grad-penalty` on `resnet()`)."""
import tensorflow as tf
import keras

from backends.tensorflow.ports.wideresnet import TorchBatchNorm


class ExactMomentsBatchNorm(TorchBatchNorm):
    """TorchBatchNorm with the batch variance as mean((x - mean)^2), the mean differentiated too: the same
    values and first gradients as tf.nn.moments, and the second gradients torch's (see the docstring)."""

    def call(self, x, training=None):
        if not training:
            return super().call(x, training=False)
        axes = list(range(len(x.shape) - 1))
        mean = tf.reduce_mean(x, axis=axes)
        var = tf.reduce_mean(tf.square(x - mean), axis=axes)
        n = x.shape.num_elements() // x.shape[-1]
        m = self.momentum
        self.moving_mean.assign(self.moving_mean * m + mean * (1 - m))
        self.moving_variance.assign(self.moving_variance * m + var * (n / (n - 1)) * (1 - m))
        return tf.nn.batch_normalization(x, mean, var, self.beta, self.gamma, self.epsilon)


def conv3x3(cout, stride):
    """torch's Conv2d(k=3, padding=1): 'same' at stride 1; at stride 2 after a ZeroPadding2D(1), 'valid'."""
    return keras.layers.Conv2D(cout, 3, strides=stride, padding="same" if stride == 1 else "valid", use_bias=False)


class Block(keras.layers.Layer):
    def __init__(self, cin, cout, stride, norm=TorchBatchNorm, **kw):
        super().__init__(**kw)
        self.pad1 = keras.layers.ZeroPadding2D(1) if stride != 1 else None
        self.conv1 = conv3x3(cout, stride)
        self.bn1 = norm()
        self.conv2 = conv3x3(cout, 1)
        self.bn2 = norm()
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = keras.Sequential([keras.layers.Conv2D(cout, 1, strides=stride, use_bias=False),
                                                norm()])

    def call(self, x, training=None):
        out = self.pad1(x) if self.pad1 is not None else x
        out = tf.nn.relu(self.bn1(self.conv1(out), training=training))
        out = self.bn2(self.conv2(out), training=training)
        return tf.nn.relu(out + (x if self.downsample is None else self.downsample(x, training=training)))


class ResNet(keras.Model):
    def __init__(self, num_classes=10, norm=TorchBatchNorm):
        super().__init__()
        self.conv1 = conv3x3(8, 1)
        self.bn1 = norm()
        self.pad = keras.layers.ZeroPadding2D(1)  # torch's MaxPool2d(3, 2, padding=1) (see the docstring)
        self.maxpool = keras.layers.MaxPooling2D(3, 2, padding="valid")
        self.layer1 = keras.Sequential([Block(8, 8, 1, norm)])
        self.layer2 = keras.Sequential([Block(8, 16, 2, norm)])
        self.fc = keras.layers.Dense(num_classes)

    def call(self, x, training=None):
        x = self.maxpool(self.pad(tf.nn.relu(self.bn1(self.conv1(x), training=training))))
        x = self.layer2(self.layer1(x, training=training), training=training)
        return self.fc(tf.reduce_mean(x, axis=(1, 2)))  # adaptive_avg_pool2d(x, 1).flatten(1)


def _built(m):
    m(tf.zeros((4, 16, 16, 3)))  # a Keras model makes its variables on its first call
    return m


def resnet(recorded=None):
    return _built(ResNet())


def resnet_workarounds(recorded=None):
    return _built(ResNet(norm=ExactMomentsBatchNorm))
