import os

os.environ.setdefault("GLOG_minloglevel", "2")  # before the import: OneFlow logs through glog at import


def make_adapter():
    from backends.oneflow.adapter import OneFlowAdapter
    return OneFlowAdapter()
