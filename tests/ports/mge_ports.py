"""MegEngine ports of tests/models_for_tests.py's same_pad_wrn and conv_bn_head: a correct one each, and
the mistakes porters make (tests/test_port.py names each at its module)."""
import numpy as np

import megengine as mge
import megengine.functional as func
import megengine.module as nn


class KerasBlock(nn.Module):
    def __init__(self, cin, cout, stride, same):
        super().__init__()
        self.stride, self.same = stride, same
        self.bn1 = nn.BatchNorm2d(cin, eps=1e-3)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 0 if (same and stride == 2) else 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout, eps=1e-3)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.shortcut = nn.Conv2d(cin, cout, 1, stride, 0, bias=False)

    def forward(self, x):
        x = func.relu(self.bn1(x))
        y = func.pad(x, ((0, 0), (0, 0), (0, 1), (0, 1))) if (self.same and self.stride == 2) else x
        y = self.conv2(func.relu(self.bn2(self.conv1(y))))
        return self.shortcut(x) + y


class KerasWRN(nn.Module):
    def __init__(self, same=True):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, 1, 1, bias=False)
        self.block1 = KerasBlock(4, 8, 1, same)
        self.block2 = KerasBlock(8, 8, 2, same)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        x = self.block2(self.block1(self.conv1(x)))
        return self.fc(x.mean(axis=(2, 3)))


def _eval(m):
    m.eval()
    return m


def wrn_same():
    """Correct: TensorFlow's 'SAME' at stride 2 as func.pad (0, 1) then an unpadded conv."""
    return _eval(KerasWRN(same=True))


def wrn_symmetric():
    """The seed's mistake: padding 1 on every side."""
    return _eval(KerasWRN(same=False))


class Linear(nn.Module):
    """A Linear of one's own (as porters write them): y = x W^T + b, or, `untransposed`, x W + b."""

    def __init__(self, cin, cout, gain=1.0, untransposed=False):
        super().__init__()
        self.weight = mge.Parameter(np.zeros((cout, cin), "float32"))
        self.bias = mge.Parameter(np.zeros((cout,), "float32"))
        self.gain, self.untransposed = gain, untransposed

    def forward(self, x):
        w = self.weight * self.gain if self.gain != 1.0 else self.weight
        return func.matmul(x, w if self.untransposed else w.transpose(1, 0)) + self.bias


class BiasedBatchNorm(nn.Module):
    """A BatchNorm of one's own that updates running_var with the biased variance (the OneFlow seed's bug)."""

    def __init__(self, c, eps=1e-5, momentum=0.9):
        super().__init__()
        self.weight = mge.Parameter(np.ones((1, c, 1, 1), "float32"))
        self.bias = mge.Parameter(np.zeros((1, c, 1, 1), "float32"))
        self.running_mean = mge.Tensor(np.zeros((1, c, 1, 1), "float32"))
        self.running_var = mge.Tensor(np.ones((1, c, 1, 1), "float32"))
        self.eps, self.momentum = eps, momentum

    def forward(self, x):
        mean = x.mean(axis=(0, 2, 3), keepdims=True)
        var = ((x - mean) ** 2).mean(axis=(0, 2, 3), keepdims=True)  # biased, as the normalization uses
        self.running_mean._reset(self.momentum * self.running_mean + (1 - self.momentum) * mean.detach())
        self.running_var._reset(self.momentum * self.running_var + (1 - self.momentum) * var.detach())
        return (x - mean) / func.sqrt(var + self.eps) * self.weight + self.bias


class ConvBNHead(nn.Module):
    def __init__(self, biased_bn=False, untransposed=False, gain=True, detach_input=False):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = BiasedBatchNorm(8) if biased_bn else nn.BatchNorm2d(8)
        self.square = Linear(8, 8, untransposed=untransposed)
        self.head = Linear(8, 3, gain=8 ** -0.5 if gain else 1.0)
        self.detach_input = detach_input
        self.raise_in_step = False

    def forward(self, x):
        if self.raise_in_step:
            raise ValueError("planted: the port's own call fails")  # the line the report names
        if self.detach_input:
            x = x.detach()  # a step that cuts the penalty term's path: its gradient is lost
        y = func.relu(self.bn(self.conv(x)))
        return self.head(self.square(y.mean(axis=(2, 3))))


def _train(m):
    m.train()
    return m


def head():
    return _train(ConvBNHead())


def head_biased_bn():
    return _train(ConvBNHead(biased_bn=True))


def head_untransposed():
    return _train(ConvBNHead(untransposed=True))


def head_no_gain():
    return _train(ConvBNHead(gain=False))


def head_detached():
    return _train(ConvBNHead(detach_input=True))


def head_raising():
    m = _train(ConvBNHead())
    m.raise_in_step = True
    return m


def raises():
    raise RuntimeError("planted: the port cannot be built")


class Renamed(nn.Module):
    """conv_bn_head with its head called `classifier` (a name the bundle does not have)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.square = Linear(8, 8)
        self.classifier = Linear(8, 3, gain=8 ** -0.5)

    def forward(self, x):
        y = func.relu(self.bn(self.conv(x)))
        return self.classifier(self.square(y.mean(axis=(2, 3))))


def wrong_names():
    return _train(Renamed())


def wrong_output():
    class Two(ConvBNHead):
        def forward(self, x):
            return super().forward(x)[:, :2]
    return _train(Two())
