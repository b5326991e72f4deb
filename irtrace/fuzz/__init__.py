"""`irtrace fuzz`: single-op cases drawn from the ONNX schemas (generate.py), replayed in batches on the
backends under test and grouped into distinct bugs, each kept as a bundle in a corpus (run.py)."""
