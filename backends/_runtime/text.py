"""Text the host and the workers both clean: a framework's own message as irtrace says it."""
import re

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def strip_ansi(text):
    """`text` without terminal colour and control sequences (CSI, OSC): what a framework colours its own
    messages with (torch.export's, OneFlow's "Error") is not part of what irtrace says."""
    return _ANSI.sub("", str(text))
