"""Replay a bundle: `irtrace.replay.run(bundle, ReplayOptions(...)) -> Report` (api.py) is the one way in."""


def __getattr__(name):  # imported on first use: the registry (replay/backends.py) loads without the engine
    if name in ("run", "ReplayOptions", "Report"):
        from irtrace.replay import api
        return getattr(api, name)
    raise AttributeError(f"module 'irtrace.replay' has no attribute {name!r}")
