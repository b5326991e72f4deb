"""Small models for the export tests, importable as models_for_tests:NAME."""
import torch
import torch.nn as nn
from torch.nn import functional


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, 2, 1)
        self.bn = nn.BatchNorm2d(3)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def tiny():
    torch.manual_seed(0)
    return Tiny()


def tiny_inputs():
    return (torch.randn(2, 2, 8, 8, generator=torch.Generator().manual_seed(0)),)


tiny_instance = tiny()


def raises():
    raise RuntimeError("factory exploded")


def not_a_module():
    return 42


class DataDependent(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # data-dependent control flow: torch.export cannot trace it
            return x * 2
        return x - 1


def data_dependent():
    return DataDependent()


class LyingLinear(nn.Linear):
    def forward(self, x):
        y = super().forward(x)
        return y + 1.0 if torch.compiler.is_exporting() else y


class Liar(nn.Module):
    """Computes something else while being exported: the export check must catch it."""
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(4, 4)
        self.inner = LyingLinear(4, 4)
        self.outer = nn.Linear(4, 2)

    def forward(self, x):
        return self.outer(torch.relu(self.inner(self.first(x))))


def liar():
    torch.manual_seed(0)
    return Liar()


def liar_inputs():
    return (torch.randn(3, 4, generator=torch.Generator().manual_seed(0)),)


class PlantedTarget(nn.Module):
    """Conv (symmetric pads) -> LeakyRelu -> Relu -> Sigmoid -> Tanh: one node per planted bug."""
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, 1, 1)
        self.head = nn.Conv2d(3, 2, 1)

    def forward(self, x):
        y = torch.nn.functional.leaky_relu(self.conv(x), 0.2)
        y = self.head(y)
        y = torch.relu(y * (y > 0.2).to(y.dtype))  # exact zeros reach Relu
        return torch.tanh(torch.sigmoid(y))


def planted_target():
    torch.manual_seed(0)
    return PlantedTarget()


def planted_target_inputs():
    return (torch.randn(1, 2, 5, 5, generator=torch.Generator().manual_seed(0)),)


class MidConv(nn.Module):
    """Elementwise ops, then a conv in the middle, then more: for chained-drift tests."""
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(6, 6)
        self.conv = nn.Conv2d(2, 2, 3, 1, 1)
        self.head = nn.Linear(18, 3)

    def forward(self, x):
        y = torch.tanh(self.stem(x)) * 1.5
        y = torch.sigmoid(y).reshape(2, 2, 3, 3) + 0.25
        y = torch.relu(self.conv(y))
        return self.head(torch.tanh(y).reshape(2, 18))


def mid_conv():
    torch.manual_seed(0)
    return MidConv()


def mid_conv_inputs():
    return (torch.randn(6, 6, generator=torch.Generator().manual_seed(0)),)


class KerasBlock(nn.Module):
    """tf_models.block in PyTorch: BN -> ReLU -> conv3x3 (padding=1), BN -> ReLU -> conv3x3, 1x1 shortcut.
    fixed=True pads like TensorFlow's 'SAME' at stride 2: F.pad (0, 1, 0, 1), then padding=0."""
    def __init__(self, cin, cout, stride, fixed=False):
        super().__init__()
        self.stride, self.fixed = stride, fixed
        self.bn1 = nn.BatchNorm2d(cin, eps=1e-3)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 0 if (fixed and stride == 2) else 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout, eps=1e-3)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.shortcut = nn.Conv2d(cin, cout, 1, stride, 0, bias=False)

    def forward(self, x):
        x = torch.relu(self.bn1(x))
        y = torch.nn.functional.pad(x, (0, 1, 0, 1)) if (self.fixed and self.stride == 2) else x
        y = self.conv2(torch.relu(self.bn2(self.conv1(y))))
        return self.shortcut(x) + y


class KerasWRN(nn.Module):
    def __init__(self, fixed=False):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, 1, 1, bias=False)
        self.block1 = KerasBlock(4, 8, 1, fixed)
        self.block2 = KerasBlock(8, 8, 2, fixed)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        x = self.block2(self.block1(self.conv1(x)))
        return self.fc(x.mean((2, 3)))


def keras_wrn(weights, fixed=False):
    """The port, with the Keras model's weights (name -> array, as tf_models saves them)."""
    import numpy as np
    m = KerasWRN(fixed).eval()
    conv = lambda k: torch.from_numpy(np.transpose(weights[k], (3, 2, 0, 1)).copy())  # noqa: E731  HWIO -> OIHW
    with torch.no_grad():
        m.conv1.weight.copy_(conv("conv1/kernel"))
        for name in ("block1", "block2"):
            blk = getattr(m, name)
            for c in ("conv1", "conv2", "shortcut"):
                getattr(blk, c).weight.copy_(conv(f"{name}_{c}/kernel"))
            for b in ("bn1", "bn2"):
                bn = getattr(blk, b)
                for t, k in (("weight", "gamma"), ("bias", "beta"), ("running_mean", "moving_mean"),
                             ("running_var", "moving_variance")):
                    getattr(bn, t).copy_(torch.from_numpy(weights[f"{name}_{b}/{k}"]))
        m.fc.weight.copy_(torch.from_numpy(weights["fc/kernel"].T.copy()))
        m.fc.bias.copy_(torch.from_numpy(weights["fc/bias"]))
    return m


class SafeStyleBlock(nn.Module):
    """A StyleGAN2-like block (modulated conv + bias + leaky ReLU + toRGB) written only with ops
    MegEngine 1.13 gets right in isolation, double backward included: leaky ReLU as a `where`,
    padding inside the conv (symmetric), no F.pad."""

    def __init__(self, cin=3, cmid=4, wdim=6):
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.affine = nn.Parameter(torch.randn(cin, wdim, generator=g) * 0.3)
        self.weight = nn.Parameter(torch.randn(cmid, cin, 3, 3, generator=g) * 0.3)
        self.bias = nn.Parameter(torch.randn(cmid, generator=g) * 0.1)
        self.rgb = nn.Parameter(torch.randn(3, cmid, 1, 1, generator=g) * 0.3)

    def forward(self, x, w):
        styles = w @ self.affine.t()                        # (N, cin)
        x = x * styles.reshape(1, -1, 1, 1)                 # modulate the input instead of the weight
        x = functional.conv2d(x, self.weight, self.bias, padding=1)
        x = torch.where(x >= 0, x, x * 0.2) * 1.4142135     # leaky ReLU as a where, times its gain
        return functional.conv2d(x, self.rgb)


def safe_style_block():
    return SafeStyleBlock()


def safe_style_block_inputs():
    g = torch.Generator().manual_seed(4)
    return torch.randn(1, 3, 6, 6, generator=g), torch.randn(1, 6, generator=g)


class WeightStandardised(nn.Module):
    """timm's ScaledStdConv2d: the weight standardised by F.batch_norm in training mode without running
    stats, which torch.onnx writes as ReduceMean statistics feeding an inference BatchNormalization."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.gain = nn.Parameter(torch.full((4, 1, 1, 1), 1.5))

    def forward(self, x):
        w = self.conv.weight
        w = functional.batch_norm(w.reshape(1, 4, -1), None, None, weight=(self.gain * 27 ** -0.5).view(-1),
                         training=True, momentum=0.0, eps=1e-6).reshape_as(w)
        return functional.relu(functional.conv2d(x, w, self.conv.bias, padding=1))


def weight_standardised():
    torch.manual_seed(0)
    return WeightStandardised()


def weight_standardised_inputs():
    return (torch.randn(2, 3, 5, 5, generator=torch.Generator().manual_seed(1)),)


def same_pad_wrn(fixed=True):
    """../shared/seeds/004's model: a WideResNet written for TensorFlow, whose stride-2 convolutions pad
    'SAME' (nothing before, one after), seeded; `fixed=False`: padding 1 on every side, as torch's WideResNet."""
    torch.manual_seed(0)
    m = KerasWRN(fixed=fixed)
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.weight.data.uniform_(0.5, 1.5)
            mod.bias.data.normal_(0, 0.1)
            mod.running_mean.normal_(0, 0.1)
            mod.running_var.uniform_(0.5, 1.5)
    return m.eval()


def same_pad_wrn_inputs():
    return (torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1)),)


class EqualLinear(nn.Module):
    """StyleGAN2's equalized learning rate: the weight times a constant gain in every forward."""

    def __init__(self, cin, cout):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(cout, cin))
        self.bias = nn.Parameter(torch.zeros(cout))
        self.gain = cin ** -0.5

    def forward(self, x):
        return functional.linear(x, self.weight * self.gain, self.bias)


class ConvBNHead(nn.Module):
    """conv -> BatchNorm (train) -> ReLU -> mean -> a square Linear -> an equalized-lr head."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.square = nn.Linear(8, 8)
        self.head = EqualLinear(8, 3)

    def forward(self, x):
        y = functional.relu(self.bn(self.conv(x)))
        return self.head(self.square(y.mean((2, 3))))


def conv_bn_head():
    torch.manual_seed(0)
    return ConvBNHead().train()


def conv_bn_head_inputs():
    return (torch.randn(4, 3, 6, 6, generator=torch.Generator().manual_seed(1)),)


class FailsWhileExported(nn.Module):
    """Raises only while torch.export traces it, the way torch wraps what it meets there: an error whose
    cause is a KeyboardInterrupt (Ctrl-C during the export), or one whose message is coloured."""
    def __init__(self, interrupt):
        super().__init__()
        self.interrupt = interrupt

    def forward(self, x):
        if torch.compiler.is_exporting():
            if self.interrupt:
                raise RuntimeError("\x1b[31mtracing stopped\x1b[0m") from KeyboardInterrupt()
            raise RuntimeError("\x1b[1;31mboom\x1b[0m while tracing")
        return torch.relu(x)


def interrupted_while_exported():
    return FailsWhileExported(interrupt=True)


def coloured_export_error():
    return FailsWhileExported(interrupt=False)
