"""Ports of irtrace's example models (irtrace/examples/) written in MegEngine's own API, as a porter writes
them: `irtrace port BUNDLE --port backends.megengine.ports.<example>:<factory> --backend megengine`."""
