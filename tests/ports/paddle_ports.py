"""Paddle ports of tests/models_for_tests.py's same_pad_wrn and conv_bn_head: a correct one each, and the
mistakes porters make (tests/test_port.py names each at its module). Written in Paddle's own API:
paddle.nn.Linear (weight [in, out]), BatchNorm2D (momentum 0.9 is torch's 0.1), Conv2D's asymmetric
padding as [[0, 0], [0, 0], [top, bottom], [left, right]]."""
import numpy as np

import paddle
import paddle.nn as nn
import paddle.nn.functional as F


class KerasBlock(nn.Layer):
    def __init__(self, cin, cout, stride, same):
        super().__init__()
        self.stride, self.same = stride, same
        self.bn1 = nn.BatchNorm2D(cin, epsilon=1e-3)
        # TensorFlow's 'SAME' at stride 2 on an even size: nothing before, one after
        pad = [[0, 0], [0, 0], [0, 1], [0, 1]] if (same and stride == 2) else 1
        self.conv1 = nn.Conv2D(cin, cout, 3, stride, pad, bias_attr=False)
        self.bn2 = nn.BatchNorm2D(cout, epsilon=1e-3)
        self.conv2 = nn.Conv2D(cout, cout, 3, 1, 1, bias_attr=False)
        self.shortcut = nn.Conv2D(cin, cout, 1, stride, 0, bias_attr=False)

    def forward(self, x):
        x = F.relu(self.bn1(x))
        y = self.conv2(F.relu(self.bn2(self.conv1(x))))
        return self.shortcut(x) + y


class KerasWRN(nn.Layer):
    def __init__(self, same=True):
        super().__init__()
        self.conv1 = nn.Conv2D(3, 4, 3, 1, 1, bias_attr=False)
        self.block1 = KerasBlock(4, 8, 1, same)
        self.block2 = KerasBlock(8, 8, 2, same)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        x = self.block2(self.block1(self.conv1(x)))
        return self.fc(x.mean(axis=[2, 3]))


def _eval(m):
    m.eval()
    return m


def wrn_same():
    """Correct: TensorFlow's 'SAME' at stride 2 as Conv2D's asymmetric padding."""
    return _eval(KerasWRN(same=True))


def wrn_symmetric():
    """../shared/seeds/004's mistake: padding 1 on every side."""
    return _eval(KerasWRN(same=False))


class Linear(nn.Layer):
    """A Linear of one's own kept in torch's layout [out, in] (as porters write them to load torch weights
    unchanged): y = x W^T + b, or, `untransposed`, x W + b."""

    def __init__(self, cin, cout, gain=1.0, untransposed=False):
        super().__init__()
        self.weight = self.create_parameter([cout, cin])
        self.bias = self.create_parameter([cout], is_bias=True)
        self.gain, self.untransposed = gain, untransposed

    def forward(self, x):
        w = self.weight * self.gain if self.gain != 1.0 else self.weight
        return paddle.matmul(x, w, transpose_y=not self.untransposed) + self.bias


class BiasedBatchNorm(nn.Layer):
    """A BatchNorm of one's own that updates running_var with the biased variance (the OneFlow seed's bug,
    which Paddle's own BatchNorm2D shares)."""

    def __init__(self, c, eps=1e-5, momentum=0.9):
        super().__init__()
        self.weight = self.create_parameter([c], default_initializer=nn.initializer.Constant(1.0))
        self.bias = self.create_parameter([c], is_bias=True)
        self.register_buffer("running_mean", paddle.zeros([c]))
        self.register_buffer("running_var", paddle.ones([c]))
        self.eps, self.momentum = eps, momentum

    def forward(self, x):
        mean = x.mean(axis=[0, 2, 3], keepdim=True)
        var = paddle.square(x - mean).mean(axis=[0, 2, 3], keepdim=True)  # biased, as the normalization uses
        with paddle.no_grad():
            self.running_mean.set_value(self.momentum * self.running_mean + (1 - self.momentum) * mean.reshape([-1]))
            self.running_var.set_value(self.momentum * self.running_var + (1 - self.momentum) * var.reshape([-1]))
        c = [1, -1, 1, 1]
        return (x - mean) / paddle.sqrt(var + self.eps) * self.weight.reshape(c) + self.bias.reshape(c)


class UnbiasedBatchNorm(BiasedBatchNorm):
    """BatchNorm with torch's unbiased running_var: what a Paddle port writes, as Paddle's BatchNorm2D
    updates it with the biased variance."""

    def forward(self, x):
        n = x.numel() // x.shape[1]
        mean = x.mean(axis=[0, 2, 3], keepdim=True)
        var = paddle.square(x - mean).mean(axis=[0, 2, 3], keepdim=True)
        with paddle.no_grad():
            self.running_mean.set_value(self.momentum * self.running_mean + (1 - self.momentum) * mean.reshape([-1]))
            unbiased = var.reshape([-1]) * (float(n) / float(n - 1))
            self.running_var.set_value(self.momentum * self.running_var + (1 - self.momentum) * unbiased)
        c = [1, -1, 1, 1]
        return (x - mean) / paddle.sqrt(var + self.eps) * self.weight.reshape(c) + self.bias.reshape(c)


class ConvBNHead(nn.Layer):
    def __init__(self, bn=None, untransposed=False, gain=True, detach_input=False):
        super().__init__()
        self.conv = nn.Conv2D(3, 8, 3, padding=1)
        self.bn = bn if bn is not None else UnbiasedBatchNorm(8)
        self.square = Linear(8, 8, untransposed=untransposed) if untransposed else nn.Linear(8, 8)
        self.head = Linear(8, 3, gain=8 ** -0.5 if gain else 1.0)
        self.detach_input = detach_input

    def forward(self, x):
        if self.detach_input:
            x = x.detach()  # a step that cuts the penalty term's path: its gradient is lost
        y = F.relu(self.bn(self.conv(x)))
        return self.head(self.square(y.mean(axis=[2, 3])))


def _train(m):
    m.train()
    return m


def head():
    """Correct: the BatchNorm written with torch's unbiased running_var."""
    return _train(ConvBNHead())


def head_paddle_bn():
    """As a porter first writes it: paddle.nn.BatchNorm2D, whose running_var is Paddle's biased one."""
    return _train(ConvBNHead(bn=nn.BatchNorm2D(8)))


def head_torch_momentum():
    """paddle.nn.BatchNorm2D with torch's momentum 0.1 copied over (Paddle's momentum is the fraction kept:
    torch's 0.1 is Paddle's 0.9)."""
    return _train(ConvBNHead(bn=nn.BatchNorm2D(8, momentum=0.1)))


def head_biased_bn():
    return _train(ConvBNHead(bn=BiasedBatchNorm(8)))


def head_untransposed():
    return _train(ConvBNHead(untransposed=True))


def head_no_gain():
    return _train(ConvBNHead(gain=False))


def head_detached():
    return _train(ConvBNHead(detach_input=True))


def raises():
    raise RuntimeError("planted: the port cannot be built")


class Renamed(nn.Layer):
    """conv_bn_head with its head called `classifier` (a name the bundle does not have)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(3, 8, 3, padding=1)
        self.bn = UnbiasedBatchNorm(8)
        self.square = nn.Linear(8, 8)
        self.classifier = Linear(8, 3, gain=8 ** -0.5)

    def forward(self, x):
        y = F.relu(self.bn(self.conv(x)))
        return self.classifier(self.square(y.mean(axis=[2, 3])))


def wrong_names():
    return _train(Renamed())


def wrong_output():
    class Two(ConvBNHead):
        def forward(self, x):
            return super().forward(x)[:, :2]
    return _train(Two())


def not_a_layer():
    return np.zeros(3)


def head_frozen_head():
    """The head's weight made a constant (stop_gradient): torch trains it."""
    m = _train(ConvBNHead())
    m.head.weight.stop_gradient = True
    return m
