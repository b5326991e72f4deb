"""The ResNet-style example (irtrace/examples/resnet.py) in Paddle, BatchNorm in train mode, as a porter
writes it: Conv2D with bias_attr=False, BatchNorm2D with Paddle's default momentum 0.9 (torch's 0.1: Paddle's
momentum is the fraction kept), paddle.nn.Linear (its weight is [in, out]: irtrace loads torch's transposed).
In train mode Paddle's BatchNorm2D updates running_var with the biased variance, torch with the unbiased one:
the port check names Paddle's batch_norm for every running_var (the framework's fault, not the port's). Under
a gradient penalty Paddle 3.3 cannot take the double backward of max_pool2d ("Pool op grad grad only supports
avgpool"): the port check names MaxPool (the framework's fault). The port flattens with reshape: paddle.flatten
has no double backward either ("The Op flatten_grad doesn't have any grad op"), and there irtrace cannot name
the op (the bundle holds torch's flatten as a Reshape, which Paddle differentiates twice), so it would blame
the port's own code."""
import paddle.nn as nn
from paddle.nn import functional


class Block(nn.Layer):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2D(cin, cout, 3, stride, 1, bias_attr=False)
        self.bn1 = nn.BatchNorm2D(cout)
        self.conv2 = nn.Conv2D(cout, cout, 3, 1, 1, bias_attr=False)
        self.bn2 = nn.BatchNorm2D(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2D(cin, cout, 1, stride, bias_attr=False), nn.BatchNorm2D(cout))

    def forward(self, x):
        out = functional.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return functional.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet(nn.Layer):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2D(3, 8, 3, 1, 1, bias_attr=False)
        self.bn1 = nn.BatchNorm2D(8)
        self.maxpool = nn.MaxPool2D(3, 2, 1)
        self.layer1 = nn.Sequential(Block(8, 8, 1))
        self.layer2 = nn.Sequential(Block(8, 16, 2))
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        x = self.maxpool(functional.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        x = functional.adaptive_avg_pool2d(x, 1)
        x = x.reshape([x.shape[0], -1])  # torch's flatten(1); paddle.flatten has no double backward
        return self.fc(x)


def resnet():
    m = ResNet()
    m.train()
    return m
