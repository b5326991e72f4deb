import os
import warnings

os.environ.setdefault("GLOG_minloglevel", "2")  # before the import: Paddle logs through glog at import
warnings.filterwarnings("ignore", message="No ccache found")  # paddle.utils.cpp_extension warns at import


def make_adapter():
    from backends.paddle.adapter import PaddleAdapter
    return PaddleAdapter()
