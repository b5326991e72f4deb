"""`irtrace port`: the user's own port (a MegEngine, Paddle, OneFlow or TensorFlow model written by hand)
loaded with a bundle's weights, fed its inputs and compared with it module by module: outputs, output
gradients, parameter gradients, running stats; the first module that diverges is then cross-referenced
with the isolated verdicts of the ops inside it: the framework's fault, or the port's.

    report = irtrace.port.check(bundle, "my_port:build", "megengine", path=["src"], loss="dot")

The port runs in its framework's worker (a crash or a hang there is a CRASH / TIMEOUT, not a dead
irtrace); its part of the work is backends/_runtime/port.py and its backend's port module. The
reference is torch's chained run of the bundle's graph with the same loss, judged with the float64
oracle's and the chain's rounding estimate, as `irtrace replay --chained` judges a backend.
"""
from irtrace.port.check import PortReport, check

__all__ = ["PortReport", "check"]
