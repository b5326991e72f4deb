"""A Llama-style causal LM of 1.1B parameters with random weights (seeded; no download): TinyLlama's
shape (hidden 2048, MLP 5632, 32 heads, 4 key/value heads, vocabulary 32000, 22 layers), called with
use_cache=False on 16 tokens. $LLAMA_LAYERS sets another depth (benchmarks/scale.py fits time in depth).

    irtrace export llama_1b:build --input-file tokens.npz -o llama.irt     (run in benchmarks/)
"""
import os
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from corpus import NoCache  # noqa: E402 - tests/corpus.py: a causal LM called with use_cache=False

TOKENS = 16
LAYERS = 22


def config(layers=None):
    from irtrace.export.thirdparty import make_torchvision_importable
    make_torchvision_importable()  # transformers imports torchvision (see irtrace/export/thirdparty.py)
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632,
                       num_hidden_layers=layers or int(os.environ.get("LLAMA_LAYERS", LAYERS)),
                       num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048)


def build():
    cfg = config()
    from transformers import LlamaForCausalLM
    torch.manual_seed(0)
    return NoCache(LlamaForCausalLM(cfg)).eval()


def parameters(layers):
    """The parameter count of the model at `layers` layers (from its shape; nothing is built)."""
    c = config(layers)
    h, m, v, kv = c.hidden_size, c.intermediate_size, c.vocab_size, c.hidden_size // c.num_attention_heads * 4
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * m + 2 * h
    return 2 * v * h + layers * per_layer + h


def save_tokens(path):
    np.savez(path, input_ids=np.random.default_rng(0).integers(0, 32000, (1, TOKENS), dtype=np.int64))
