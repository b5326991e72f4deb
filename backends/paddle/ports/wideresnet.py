"""WideResNet (irtrace/examples/wideresnet.py) in Paddle, as a porter writes it: paddle.nn.Linear (its
weight is [in, out]: irtrace loads torch's transposed), BatchNorm2D with Paddle's momentum 0.9 (torch's
0.1: Paddle's momentum is the fraction kept). `wideresnet()` is the eval-mode model; `wideresnet_dropout()`
trains with dropout, using the masks torch drew where irtrace hands them over (`recorded=`). In train mode
Paddle's BatchNorm2D updates running_var with the biased variance, torch with the unbiased one: the port
check names Paddle's batch_norm for every running_var (the framework's fault, not the port's)."""
import paddle
import paddle.nn as nn
from paddle.nn import functional


class BasicBlock(nn.Layer):
    def __init__(self, in_planes, out_planes, stride, drop_rate=0.0, masks=None, name=""):
        super().__init__()
        self.bn1 = nn.BatchNorm2D(in_planes)
        self.relu1 = nn.ReLU()
        self.conv1 = nn.Conv2D(in_planes, out_planes, 3, stride, 1, bias_attr=False)
        self.bn2 = nn.BatchNorm2D(out_planes)
        self.relu2 = nn.ReLU()
        self.conv2 = nn.Conv2D(out_planes, out_planes, 3, 1, 1, bias_attr=False)
        self.drop_rate, self.masks, self.path = drop_rate, masks or {}, name
        self.equal_in_out = in_planes == out_planes
        self.convShortcut = None if self.equal_in_out else nn.Conv2D(in_planes, out_planes, 1, stride, 0,
                                                                     bias_attr=False)

    def forward(self, x):
        if not self.equal_in_out:
            x = self.relu1(self.bn1(x))
            out = x
        else:
            out = self.relu1(self.bn1(x))
        out = self.relu2(self.bn2(self.conv1(out)))
        if self.drop_rate > 0 and self.training:
            mask = self.masks.get(f"{self.path}.dropout_mask")  # the mask torch drew (irtrace hands it over)
            if mask is not None:
                out = out * paddle.to_tensor(mask).astype(out.dtype) / (1 - self.drop_rate)
            else:
                out = functional.dropout(out, self.drop_rate, training=True)
        out = self.conv2(out)
        return (x if self.equal_in_out else self.convShortcut(x)) + out


class NetworkBlock(nn.Layer):
    def __init__(self, nb_layers, in_planes, out_planes, stride, drop_rate=0.0, masks=None, name=""):
        super().__init__()
        self.layer = nn.Sequential(*[BasicBlock(in_planes if i == 0 else out_planes, out_planes,
                                                stride if i == 0 else 1, drop_rate, masks, f"{name}.layer.{i}")
                                     for i in range(nb_layers)])

    def forward(self, x):
        return self.layer(x)


class WideResNet(nn.Layer):
    def __init__(self, depth=10, num_classes=10, widen_factor=1, drop_rate=0.0, masks=None):
        super().__init__()
        ch = [8, 8 * widen_factor, 16 * widen_factor, 32 * widen_factor]
        n = (depth - 4) // 6
        self.conv1 = nn.Conv2D(3, ch[0], 3, 1, 1, bias_attr=False)
        self.block1 = NetworkBlock(n, ch[0], ch[1], 1, drop_rate, masks, "block1")
        self.block2 = NetworkBlock(n, ch[1], ch[2], 2, drop_rate, masks, "block2")
        self.block3 = NetworkBlock(n, ch[2], ch[3], 2, drop_rate, masks, "block3")
        self.bn1 = nn.BatchNorm2D(ch[3])
        self.relu = nn.ReLU()
        self.fc = nn.Linear(ch[3], num_classes)
        self.n_channels = ch[3]

    def forward(self, x):
        out = self.conv1(x)
        out = self.block1(out)
        out = self.block2(out)
        out = self.block3(out)
        out = self.relu(self.bn1(out))
        out = functional.avg_pool2d(out, out.shape[-1])
        return self.fc(out.reshape([-1, self.n_channels]))


def wideresnet(recorded=None):
    m = WideResNet(masks=recorded)
    m.eval()
    return m


def wideresnet_dropout(recorded=None):
    m = WideResNet(drop_rate=0.3, masks=recorded)
    m.train()
    return m
