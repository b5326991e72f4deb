"""Ports of irtrace's example models (irtrace/examples/) written in Paddle's own API, as a porter writes
them: `irtrace port BUNDLE --port backends.paddle.ports.<example>:<factory> --backend paddle`."""
