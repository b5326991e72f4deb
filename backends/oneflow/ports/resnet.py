"""The ResNet-style example (irtrace/examples/resnet.py) in OneFlow, BatchNorm in train mode, as a porter
writes it (OneFlow's API mirrors torch's: the port reads like the original)."""
import oneflow.nn as nn
from oneflow.nn import functional


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = functional.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return functional.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = nn.Sequential(Block(8, 8, 1))
        self.layer2 = nn.Sequential(Block(8, 16, 2))
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        x = self.maxpool(functional.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        x = functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def resnet():
    return ResNet().train()
