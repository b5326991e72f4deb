"""OneFlow ports of tests/models_for_tests.py's same_pad_wrn and conv_bn_head: a correct one each, and the
mistakes porters make (tests/test_port.py names each at its module). Written in OneFlow's own API, which
mirrors torch's (nn.Conv2d pads symmetrically: TensorFlow's 'SAME' at stride 2 is F.pad, then an
unpadded conv)."""
import numpy as np

import oneflow as flow
import oneflow.nn as nn
import oneflow.nn.functional as F


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
        x = F.relu(self.bn1(x))
        y = F.pad(x, (0, 1, 0, 1)) if (self.same and self.stride == 2) else x
        y = self.conv2(F.relu(self.bn2(self.conv1(y))))
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
        return self.fc(x.mean(dim=(2, 3)))


def wrn_same():
    """Correct: TensorFlow's 'SAME' at stride 2 as F.pad (0, 1) then an unpadded conv."""
    return KerasWRN(same=True).eval()


def wrn_symmetric():
    """../shared/seeds/004's mistake: padding 1 on every side."""
    return KerasWRN(same=False).eval()


class Linear(nn.Module):
    """A Linear of one's own (as porters write them): y = x W^T + b, or, `untransposed`, x W + b."""

    def __init__(self, cin, cout, gain=1.0, untransposed=False):
        super().__init__()
        self.weight = nn.Parameter(flow.zeros(cout, cin))
        self.bias = nn.Parameter(flow.zeros(cout))
        self.gain, self.untransposed = gain, untransposed

    def forward(self, x):
        w = self.weight * self.gain if self.gain != 1.0 else self.weight
        return flow.matmul(x, w if self.untransposed else w.t()) + self.bias


class BiasedBatchNorm(nn.Module):
    """A BatchNorm of one's own that updates running_var with the biased variance (../shared/seeds/001:
    OneFlow's own BatchNorm did, before it was fixed)."""

    def __init__(self, c, eps=1e-5, momentum=0.1):
        super().__init__()
        self.weight = nn.Parameter(flow.ones(c))
        self.bias = nn.Parameter(flow.zeros(c))
        self.register_buffer("running_mean", flow.zeros(c))
        self.register_buffer("running_var", flow.ones(c))
        self.eps, self.momentum = eps, momentum

    def forward(self, x):
        mean = x.mean(dim=(0, 2, 3), keepdim=True)
        var = ((x - mean) * (x - mean)).mean(dim=(0, 2, 3), keepdim=True)  # biased, as the normalization uses
        with flow.no_grad():
            self.running_mean.copy_((1 - self.momentum) * self.running_mean + self.momentum * mean.reshape(-1))
            self.running_var.copy_((1 - self.momentum) * self.running_var + self.momentum * var.reshape(-1))
        c = (1, -1, 1, 1)
        return (x - mean) / flow.sqrt(var + self.eps) * self.weight.reshape(c) + self.bias.reshape(c)


class ConvBNHead(nn.Module):
    def __init__(self, biased_bn=False, untransposed=False, gain=True, detach_input=False):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = BiasedBatchNorm(8) if biased_bn else nn.BatchNorm2d(8)
        self.square = Linear(8, 8, untransposed=True) if untransposed else nn.Linear(8, 8)
        self.head = Linear(8, 3, gain=8 ** -0.5 if gain else 1.0)
        self.detach_input = detach_input

    def forward(self, x):
        if self.detach_input:
            x = x.detach()  # a step that cuts the penalty term's path: its gradient is lost
        y = F.relu(self.bn(self.conv(x)))
        return self.head(self.square(y.mean(dim=(2, 3))))


def head():
    return ConvBNHead().train()


def head_biased_bn():
    return ConvBNHead(biased_bn=True).train()


def head_untransposed():
    return ConvBNHead(untransposed=True).train()


def head_no_gain():
    return ConvBNHead(gain=False).train()


def head_detached():
    return ConvBNHead(detach_input=True).train()


def raises():
    raise RuntimeError("planted: the port cannot be built")


class Renamed(nn.Module):
    """conv_bn_head with its head called `classifier` (a name the bundle does not have)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.square = nn.Linear(8, 8)
        self.classifier = Linear(8, 3, gain=8 ** -0.5)

    def forward(self, x):
        y = F.relu(self.bn(self.conv(x)))
        return self.classifier(self.square(y.mean(dim=(2, 3))))


def wrong_names():
    return Renamed().train()


def wrong_output():
    class Two(ConvBNHead):
        def forward(self, x):
            return super().forward(x)[:, :2]
    return Two().train()


def not_a_module():
    return np.zeros(3)
