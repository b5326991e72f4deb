import os

os.environ.setdefault("MEGENGINE_LOGGING_LEVEL", "ERROR")  # before the import: MegEngine logs at import


def make_adapter():
    from backends.megengine.adapter import MegEngineAdapter
    return MegEngineAdapter()
