"""Third-party packages a user's model module imports, made importable where an installed wheel breaks
them: applied before `irtrace export` imports the module, only where the breakage is seen, with a warning.

torchvision: a torchvision wheel whose C extension does not load next to this torch (on this machine the
only torchvision 0.28.0 wheel is a CUDA build, torch is the CPU build) fails at `import torchvision` with
"operator torchvision::nms does not exist": torchvision/_meta_registrations.py registers fake kernels for
`torchvision::nms` and `torchvision::qnms` unconditionally, and the extension that defines them did not
load. transformers and timm import torchvision, so their model classes fail too. Defining the two op
schemas (no kernel) lets the import succeed; the model definitions are pure Python, and calling
torchvision.ops.nms still fails loudly, as it would have."""
import glob
import importlib.util
import logging
import os

log = logging.getLogger(__name__)

_TORCHVISION_LIB = None  # the Library defining the schemas: a collected Library deregisters its definitions


def torchvision_extension_problem():
    """None when torchvision is not installed or its C extension loads; else why it does not load."""
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return None
    import torch
    if _TORCHVISION_LIB is not None or hasattr(torch.ops.torchvision, "nms"):
        return None
    libs = sorted(glob.glob(os.path.join(os.path.dirname(spec.origin), "_C*.so")))
    if not libs:
        return "torchvision has no C extension (_C*.so)"
    try:
        torch.ops.load_library(libs[0])  # what `import torchvision` does first
    except OSError as e:
        return str(e).strip().splitlines()[0]
    return None


def make_torchvision_importable():
    """Where torchvision's C extension does not load, define the op schemas its import needs (see the
    module docstring) and warn once; True when it did."""
    global _TORCHVISION_LIB
    problem = torchvision_extension_problem()
    if problem is None:
        return False
    import torch
    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _TORCHVISION_LIB = lib
    log.warning("torchvision's C extension does not load with torch %s (%s): its nms/qnms op schemas are defined "
                "without kernels so that `import torchvision` (and transformers, timm) works; torchvision.ops.nms "
                "still fails", torch.__version__, problem[:160])
    return True
