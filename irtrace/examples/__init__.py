"""Example models shipped with irtrace (demo, tests, benchmarks), in plain torch, small
enough for CPU, faithful to the originals they stand for.

Each entry: factory (seeded module), example inputs, and the train flag it is meant for.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Example:
    name: str
    factory: str      # "module:callable" as `irtrace export` takes it
    train: bool
    doc: str

    def build(self):
        import importlib
        mod, fn = self.factory.split(":")
        return getattr(importlib.import_module(mod), fn)()

    def inputs(self):
        import importlib
        mod, fn = self.factory.split(":")
        return getattr(importlib.import_module(mod), fn + "_inputs")()


EXAMPLES = {e.name: e for e in [
    Example("stylegan2", "irtrace.examples.stylegan2:synthesis", True,
            "StyleGAN2-ADA mapping + synthesis block: modulated grouped conv (groups = batch), upfirdn2d, "
            "bias_act, noise inputs, ToRGB"),
    Example("wideresnet", "irtrace.examples.wideresnet:wideresnet", False,
            "WideResNet blocks, stride 2, eval mode"),
    Example("wideresnet-train", "irtrace.examples.wideresnet:wideresnet_dropout", True,
            "WideResNet blocks, stride 2, train mode with dropout"),
    Example("resnet", "irtrace.examples.resnet:resnet", True,
            "ResNet-style net, BatchNorm in train mode"),
    Example("gpt", "irtrace.examples.gpt:gpt_block", True,
            "GPT-style block: embedding, LayerNorm, causal attention, GELU MLP, dropout"),
]}
