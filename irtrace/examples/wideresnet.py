"""WideResNet (Zagoruyko & Komodakis), the model of ../shared/seeds/004: BN -> ReLU ->
conv3x3 (stride 2 in the first layer of blocks 2, 3), 1x1 shortcut conv; small widths."""
import math

import torch
import torch.nn as nn
from torch.nn import functional


class BasicBlock(nn.Module):
    def __init__(self, in_planes, out_planes, stride, drop_rate=0.0):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(in_planes, out_planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_planes)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(out_planes, out_planes, 3, 1, 1, bias=False)
        self.drop_rate = drop_rate
        self.equal_in_out = in_planes == out_planes
        self.convShortcut = None if self.equal_in_out else nn.Conv2d(in_planes, out_planes, 1, stride, 0, bias=False)

    def forward(self, x):
        if not self.equal_in_out:
            x = self.relu1(self.bn1(x))
            out = x
        else:
            out = self.relu1(self.bn1(x))
        out = self.relu2(self.bn2(self.conv1(out)))
        if self.drop_rate > 0:
            out = functional.dropout(out, p=self.drop_rate, training=self.training)
        out = self.conv2(out)
        return torch.add(x if self.equal_in_out else self.convShortcut(x), out)


class NetworkBlock(nn.Module):
    def __init__(self, nb_layers, in_planes, out_planes, stride, drop_rate=0.0):
        super().__init__()
        self.layer = nn.Sequential(*[BasicBlock(in_planes if i == 0 else out_planes, out_planes,
                                                stride if i == 0 else 1, drop_rate) for i in range(nb_layers)])

    def forward(self, x):
        return self.layer(x)


class WideResNet(nn.Module):
    def __init__(self, depth=10, num_classes=10, widen_factor=1, drop_rate=0.0):
        super().__init__()
        ch = [8, 8 * widen_factor, 16 * widen_factor, 32 * widen_factor]
        n = (depth - 4) // 6
        self.conv1 = nn.Conv2d(3, ch[0], 3, 1, 1, bias=False)
        self.block1 = NetworkBlock(n, ch[0], ch[1], 1, drop_rate)
        self.block2 = NetworkBlock(n, ch[1], ch[2], 2, drop_rate)
        self.block3 = NetworkBlock(n, ch[2], ch[3], 2, drop_rate)
        self.bn1 = nn.BatchNorm2d(ch[3])
        self.relu = nn.ReLU(inplace=True)
        self.fc = nn.Linear(ch[3], num_classes)
        self.n_channels = ch[3]
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                k = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                m.weight.data.normal_(0, math.sqrt(2.0 / k))
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.normal_(0, 0.1)
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
            elif isinstance(m, nn.Linear):
                m.bias.data.zero_()

    def forward(self, x):
        out = self.conv1(x)
        out = self.block1(out)
        out = self.block2(out)
        out = self.block3(out)
        out = self.relu(self.bn1(out))
        out = functional.avg_pool2d(out, out.shape[-1])
        out = out.view(-1, self.n_channels)
        return self.fc(out)


def wideresnet():
    torch.manual_seed(0)
    return WideResNet().eval()


def wideresnet_inputs():
    return (torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(1)),)


def wideresnet_dropout():
    torch.manual_seed(0)
    return WideResNet(drop_rate=0.3).train()


wideresnet_dropout_inputs = wideresnet_inputs
