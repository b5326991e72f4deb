import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # before the import: TensorFlow logs at import


def make_adapter():
    from backends.tensorflow.adapter import TensorFlowAdapter
    return TensorFlowAdapter()
