"""Replay: scheduling nodes, talking to backend workers, crash/timeout isolation."""
