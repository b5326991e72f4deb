"""Ports of irtrace's example models (irtrace/examples/) written in TensorFlow's own API (Keras 3), as a porter
writes them: `irtrace port BUNDLE --port backends.tensorflow.ports.<example>:<factory> --backend tensorflow`."""
