"""The generic worker runtime shared by every out-of-process backend (numpy only)."""
