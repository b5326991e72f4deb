"""The GPT-style block (irtrace/examples/gpt.py) in Paddle, as a porter writes it: paddle.nn.Linear (its
weight is [in, out]: irtrace loads torch's transposed), Embedding and LayerNorm as torch's, the causal mask a
constant (torch's non-persistent `bias` buffer: not state), dropout taking the masks torch drew (`recorded=`:
the bundle's `<module>.dropout_mask` values)."""
import math

import numpy as np

import paddle
import paddle.nn as nn
from paddle.nn import functional


class Dropout(nn.Layer):
    """Dropout that applies the mask torch drew at its module path when irtrace hands it over."""

    def __init__(self, p, masks, path):
        super().__init__()
        self.p, self.mask = p, (masks or {}).get(f"{path}.dropout_mask")

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        if self.mask is None:
            return functional.dropout(x, self.p, training=True)
        return x * (paddle.to_tensor(np.asarray(self.mask, np.float32)) / (1 - self.p))


class CausalSelfAttention(nn.Layer):
    def __init__(self, d, heads, block, p, masks, path):
        super().__init__()
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.attn_dropout = Dropout(p, masks, f"{path}.attn_dropout")
        self.resid_dropout = Dropout(p, masks, f"{path}.resid_dropout")
        self.n_head = heads
        self.causal = np.tril(np.ones((block, block), bool)).reshape(1, 1, block, block)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = paddle.split(self.c_attn(x), 3, axis=2)
        q = q.reshape([B, T, self.n_head, C // self.n_head]).transpose([0, 2, 1, 3])
        k = k.reshape([B, T, self.n_head, C // self.n_head]).transpose([0, 2, 1, 3])
        v = v.reshape([B, T, self.n_head, C // self.n_head]).transpose([0, 2, 1, 3])
        att = paddle.matmul(q, k, transpose_y=True) * (1.0 / math.sqrt(k.shape[-1]))
        keep = paddle.to_tensor(np.ascontiguousarray(np.broadcast_to(self.causal[:, :, :T, :T], att.shape)))
        att = paddle.where(keep, att, paddle.full(att.shape, -np.inf, att.dtype))
        att = self.attn_dropout(functional.softmax(att, axis=-1))
        y = paddle.matmul(att, v).transpose([0, 2, 1, 3]).reshape([B, T, C])
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Layer):
    def __init__(self, d, p, masks, path):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_proj = nn.Linear(4 * d, d)
        self.dropout = Dropout(p, masks, f"{path}.dropout")

    def forward(self, x):
        return self.dropout(self.c_proj(functional.gelu(self.c_fc(x))))


class Block(nn.Layer):
    def __init__(self, d, heads, block, p, masks, path):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, block, p, masks, f"{path}.attn")
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = MLP(d, p, masks, f"{path}.mlp")

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Layer):
    def __init__(self, masks=None, vocab=32, block=8, d=16, heads=2, layers=1, p=0.1):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(block, d)
        self.drop = Dropout(p, masks, "drop")
        self.h = nn.LayerList([Block(d, heads, block, p, masks, f"h.{i}") for i in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias_attr=False)

    def forward(self, idx):
        pos = paddle.arange(0, idx.shape[1], dtype="int64")
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def gpt_block(recorded=None):
    m = GPT(masks=recorded)
    m.train()
    return m
