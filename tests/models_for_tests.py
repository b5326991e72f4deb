"""Small models for the export tests, importable as models_for_tests:NAME."""
import torch
import torch.nn as nn


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
