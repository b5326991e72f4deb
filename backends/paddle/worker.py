import os

os.environ.setdefault("GLOG_minloglevel", "2")  # before the import: Paddle logs through glog at import


def make_adapter():
    from backends.paddle.adapter import PaddleAdapter
    return PaddleAdapter()
