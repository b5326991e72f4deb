import contextlib
import ctypes
import os
import sys

os.environ.setdefault("MEGENGINE_LOGGING_LEVEL", "ERROR")  # before the import: MegEngine logs at import

# MegEngine's imperative runtime starts a thread at its first op ("CompNodeSync", imperative/src/impl/
# interpreter) that polls its events every 10 us for as long as the process lives, computing or waiting for
# the next call: 27-30 % of a core here, measured in /proc/<pid>/task/<tid>/stat (a four-framework replay's
# MegEngine worker spent 5.6 of its 15 CPU s there). A thread inherits its creator's timer slack: created under
# 1 ms, its 10-us waits end at most 1 ms late and it takes 3 % of a core; the kernels run in other threads,
# whose waits are untimed. The worker's own thread gets its slack back.
POLL_SLACK_NS = 1_000_000
PR_SET_TIMERSLACK, PR_GET_TIMERSLACK = 29, 30


@contextlib.contextmanager
def timer_slack(ns):
    """This thread's timer slack `ns` within (the threads it starts meanwhile keep it); Linux only."""
    prctl = ctypes.CDLL(None).prctl if sys.platform.startswith("linux") else None
    before = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0) if prctl else -1
    if before > 0:
        prctl(PR_SET_TIMERSLACK, ns, 0, 0, 0)
    try:
        yield
    finally:
        if before > 0:
            prctl(PR_SET_TIMERSLACK, before, 0, 0, 0)


def make_adapter():
    with timer_slack(POLL_SLACK_NS):
        import megengine as mge

        from backends.megengine.adapter import MegEngineAdapter
        adapter = MegEngineAdapter()
        (mge.tensor([0.0]) + 1).numpy()  # the first op: MegEngine's polling thread starts now, with the slack
    return adapter
