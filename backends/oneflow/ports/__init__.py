"""Ports of irtrace's example models (irtrace/examples/) written in OneFlow's own API, as a porter writes
them: `irtrace port BUNDLE --port backends.oneflow.ports.<example>:<factory> --backend oneflow`."""
