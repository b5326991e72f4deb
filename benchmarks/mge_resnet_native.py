"""The ResNet-style example written directly in MegEngine; times forward + backward + double
backward (a gradient penalty on the input through nested GradManagers). Run in the MegEngine
environment: $(irtrace env megengine) benchmarks/mge_resnet_native.py — prints seconds."""
import os
import time

os.environ.setdefault("MEGENGINE_LOGGING_LEVEL", "ERROR")
import megengine as mge  # noqa: E402
from megengine import functional  # noqa: E402
from megengine import module  # noqa: E402
import numpy as np  # noqa: E402
from megengine.autodiff import GradManager  # noqa: E402


class Block(module.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = module.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = module.BatchNorm2d(cout)
        self.conv2 = module.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = module.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = module.Sequential(module.Conv2d(cin, cout, 1, stride, bias=False), module.BatchNorm2d(cout))

    def forward(self, x):
        out = functional.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return functional.relu(out + (x if self.down is None else self.down(x)))


class ResNet(module.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = module.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = module.BatchNorm2d(8)
        self.layer1 = Block(8, 8, 1)
        self.layer2 = Block(8, 16, 2)
        self.fc = module.Linear(16, 10)

    def forward(self, x):
        x = functional.max_pool2d(functional.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        x = self.layer2(self.layer1(x))
        return self.fc(functional.flatten(functional.adaptive_avg_pool2d(x, (1, 1)), 1))


def step(model, x, c):
    params = list(model.parameters())
    outer, inner = GradManager().attach(params + [x]), GradManager().attach([x])
    t = time.perf_counter()
    with outer:
        with inner:
            y = model(x)
            inner.backward((y * c).sum())
        gx = x.grad
        x.grad = None
        for p in params:
            p.grad = None
        outer.backward((y * c).sum() + (gx * gx).sum())
    _ = [p.grad.numpy() for p in params if p.grad is not None]
    return time.perf_counter() - t


if __name__ == "__main__":
    mge.config.async_level = 0
    rng = np.random.default_rng(0)
    model = ResNet()
    model.train()
    x = mge.tensor(rng.standard_normal((4, 3, 16, 16)).astype("float32"))
    c = mge.tensor(rng.standard_normal((4, 10)).astype("float32"))
    step(model, x, c)  # warm
    print(min(step(model, x, c) for _ in range(3)))
