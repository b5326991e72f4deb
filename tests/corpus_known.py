"""Findings on the real-model corpus (tests/test_corpus.py) on torch, onnxruntime and the oracle, as
observed: (model, mode) -> {(node, backend, mode, output): verdict}. Strict: each entry must still
show this verdict, so a fix shows up as a failure to update this table. Every entry has a reason.

Empty: the corpus gives 0 findings on those backends where it has run (see the README table).
"""

KNOWN = {}
