"""WideResNet (irtrace/examples/wideresnet.py) in MegEngine. `wideresnet()` is a correct port;
`wideresnet_symmetric()` is ../shared/seeds/004's mistake in MegEngine: the TensorFlow original pads
'SAME' (asymmetrically, [0, 0, 1, 1] at stride 2), the port pads 1 on every side."""
import megengine.functional as func
import megengine.module as nn


class BasicBlock(nn.Module):
    def __init__(self, in_planes, out_planes, stride, drop_rate=0.0, masks=None, name="", symmetric=True):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.relu1 = nn.ReLU()
        self.conv1 = nn.Conv2d(in_planes, out_planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_planes)
        self.relu2 = nn.ReLU()
        self.conv2 = nn.Conv2d(out_planes, out_planes, 3, 1, 1, bias=False)
        self.drop_rate, self.masks, self.name = drop_rate, masks or {}, name
        self.equal_in_out = in_planes == out_planes
        self.convShortcut = None if self.equal_in_out else nn.Conv2d(in_planes, out_planes, 1, stride, 0, bias=False)

    def forward(self, x):
        if not self.equal_in_out:
            x = self.relu1(self.bn1(x))
            out = x
        else:
            out = self.relu1(self.bn1(x))
        out = self.relu2(self.bn2(self.conv1(out)))
        if self.drop_rate > 0 and self.training:
            mask = self.masks.get(f"{self.name}.dropout_mask")  # the mask torch drew (irtrace hands it over)
            out = out * mask / (1 - self.drop_rate) if mask is not None else func.dropout(out, self.drop_rate)
        out = self.conv2(out)
        return (x if self.equal_in_out else self.convShortcut(x)) + out


class NetworkBlock(nn.Module):
    def __init__(self, nb_layers, in_planes, out_planes, stride, drop_rate=0.0, masks=None, name=""):
        super().__init__()
        self.layer = nn.Sequential(*[BasicBlock(in_planes if i == 0 else out_planes, out_planes, stride if i == 0 else 1,
                                               drop_rate, masks, f"{name}.layer.{i}") for i in range(nb_layers)])

    def forward(self, x):
        return self.layer(x)


class WideResNet(nn.Module):
    def __init__(self, depth=10, num_classes=10, widen_factor=1, drop_rate=0.0, masks=None):
        super().__init__()
        ch = [8, 8 * widen_factor, 16 * widen_factor, 32 * widen_factor]
        n = (depth - 4) // 6
        self.conv1 = nn.Conv2d(3, ch[0], 3, 1, 1, bias=False)
        self.block1 = NetworkBlock(n, ch[0], ch[1], 1, drop_rate, masks, "block1")
        self.block2 = NetworkBlock(n, ch[1], ch[2], 2, drop_rate, masks, "block2")
        self.block3 = NetworkBlock(n, ch[2], ch[3], 2, drop_rate, masks, "block3")
        self.bn1 = nn.BatchNorm2d(ch[3])
        self.relu = nn.ReLU()
        self.fc = nn.Linear(ch[3], num_classes)
        self.n_channels = ch[3]

    def forward(self, x):
        out = self.conv1(x)
        out = self.block1(out)
        out = self.block2(out)
        out = self.block3(out)
        out = self.relu(self.bn1(out))
        out = func.avg_pool2d(out, out.shape[-1])
        return self.fc(out.reshape(-1, self.n_channels))


class SamePad(nn.Module):
    """TensorFlow's 'SAME' at stride 2 on an even size: nothing before, one after (what the bundle has)."""

    def forward(self, x):
        return func.pad(x, ((0, 0), (0, 0), (0, 1), (0, 1)))


def wideresnet(recorded=None):
    m = WideResNet(masks=recorded)
    m.eval()
    return m


def wideresnet_dropout(recorded=None):
    m = WideResNet(drop_rate=0.3, masks=recorded)
    m.train()
    return m
