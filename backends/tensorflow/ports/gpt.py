"""The GPT-style block (irtrace/examples/gpt.py) in TensorFlow, as a Keras 3 porter writes it, in train mode,
dropout taking the masks torch drew (`recorded=`: the bundle's `<module path>.dropout_mask` values; the
attention's (B, heads, T, T) mask is the layout this port computes in too, so none is transposed). Written
as torch's: LayerNormalization with torch's epsilon 1e-5 (Keras's default is 1e-3), GELU exact (erf, torch's
default; tf.nn.gelu's too, Keras's `approximate` off), the causal mask as -inf before the softmax."""
import math

import numpy as np
import tensorflow as tf
import keras


class Dropout(keras.layers.Layer):
    """torch's Dropout(p): in training, the mask torch drew at this module path when irtrace hands it over
    (kept values scaled by 1 / (1 - p)), else a fresh one."""

    def __init__(self, p, masks, path, **kw):
        super().__init__(**kw)
        self.p = p
        self.recorded = (masks or {}).get(f"{path}.dropout_mask")

    def call(self, x, training=None):
        if not training or self.p == 0:
            return x
        if self.recorded is None:
            return tf.nn.dropout(x, rate=self.p)
        return x * (tf.cast(self.recorded, x.dtype) / (1 - self.p))


def layer_norm():
    return keras.layers.LayerNormalization(epsilon=1e-5)


class CausalSelfAttention(keras.layers.Layer):
    def __init__(self, d, heads, block, p, masks, path, **kw):
        super().__init__(**kw)
        self.c_attn = keras.layers.Dense(3 * d)
        self.c_proj = keras.layers.Dense(d)
        self.attn_dropout = Dropout(p, masks, f"{path}.attn_dropout")
        self.resid_dropout = Dropout(p, masks, f"{path}.resid_dropout")
        self.n_head = heads
        self.causal = np.tril(np.ones((block, block), bool)).reshape(1, 1, block, block)

    def call(self, x, training=None):
        batch, steps, width = x.shape
        q, k, v = tf.split(self.c_attn(x), 3, axis=2)
        heads = [tf.transpose(tf.reshape(t, (batch, steps, self.n_head, width // self.n_head)), (0, 2, 1, 3))
                 for t in (q, k, v)]
        q, k, v = heads
        att = tf.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(k.shape[-1]))
        keep = tf.broadcast_to(tf.constant(self.causal[:, :, :steps, :steps]), tf.shape(att))
        att = tf.where(keep, att, tf.fill(tf.shape(att), tf.constant(-np.inf, att.dtype)))
        att = self.attn_dropout(tf.nn.softmax(att, axis=-1), training=training)
        y = tf.reshape(tf.transpose(tf.matmul(att, v), (0, 2, 1, 3)), (batch, steps, width))
        return self.resid_dropout(self.c_proj(y), training=training)


class MLP(keras.layers.Layer):
    def __init__(self, d, p, masks, path, **kw):
        super().__init__(**kw)
        self.c_fc = keras.layers.Dense(4 * d)
        self.c_proj = keras.layers.Dense(d)
        self.dropout = Dropout(p, masks, f"{path}.dropout")

    def call(self, x, training=None):
        return self.dropout(self.c_proj(tf.nn.gelu(self.c_fc(x), approximate=False)), training=training)


class Block(keras.layers.Layer):
    def __init__(self, d, heads, block, p, masks, path, **kw):
        super().__init__(**kw)
        self.ln_1 = layer_norm()
        self.attn = CausalSelfAttention(d, heads, block, p, masks, f"{path}.attn")
        self.ln_2 = layer_norm()
        self.mlp = MLP(d, p, masks, f"{path}.mlp")

    def call(self, x, training=None):
        x = x + self.attn(self.ln_1(x), training=training)
        return x + self.mlp(self.ln_2(x), training=training)


class GPT(keras.Model):
    def __init__(self, masks=None, vocab=32, block=8, d=16, heads=2, layers=1, p=0.1):
        super().__init__()
        self.wte = keras.layers.Embedding(vocab, d)
        self.wpe = keras.layers.Embedding(block, d)
        self.drop = Dropout(p, masks, "drop")
        self.h = [Block(d, heads, block, p, masks, f"h.{i}") for i in range(layers)]
        self.ln_f = layer_norm()
        self.lm_head = keras.layers.Dense(vocab, use_bias=False)

    def call(self, idx, training=None):
        pos = tf.range(idx.shape[1])
        x = self.drop(self.wte(idx) + self.wpe(pos), training=training)
        for block in self.h:
            x = block(x, training=training)
        return self.lm_head(self.ln_f(x))


def gpt_block(recorded=None):
    m = GPT(masks=recorded)
    m(tf.zeros((2, 8), tf.int64))  # a Keras model makes its variables on its first call
    return m
