"""Recurrent layers (ONNX LSTM, GRU and RNN: what torch.onnx emits for nn.LSTM, nn.GRU and nn.RNN, and tf2onnx
for Keras's) with the layers a porter writes: keras.layers.LSTM, GRU and SimpleRNN, run by Layer.stateless_call
with the node's weights as the layer's, so that the gradients reach them. Keras keeps a kernel transposed
([input, gates * hidden]), its gates LSTM i, f, c, o (ONNX's i, o, f, c reordered) and GRU z, r, h (ONNX's
order), and one bias where ONNX has two (their sum), but for a GRU that resets after the recurrent matmul
(reset_after=True: its input and recurrent biases). A direction is a layer of its own; the reverse one runs with
go_backwards=True and its output is turned back in time, as keras.layers.Bidirectional does."""
import tensorflow as tf

from backends._ops_common import register_rnn, rnn_activation
from backends.tensorflow.ops import OPS

_GATES = {"LSTM": (0, 2, 3, 1), "GRU": (0, 1, 2), "RNN": (0,)}


def _gates(t, order, h):
    return tf.concat([t[k * h:(k + 1) * h] for k in order], axis=0)


def _layer(kind, h, backwards, dtype, attrs, d):
    import keras  # Keras 3, imported by the first recurrent node (a worker that replays none does not pay for it)
    common = dict(return_sequences=True, return_state=True, go_backwards=backwards, dtype=dtype)
    if kind == "LSTM":
        return keras.layers.LSTM(h, use_cudnn=False, **common)
    if kind == "GRU":
        return keras.layers.GRU(h, use_cudnn=False, reset_after=bool(attrs.linear_before_reset), **common)
    return keras.layers.SimpleRNN(h, activation=rnn_activation(attrs.activations, d), **common)


def _run(kind, x, w, r, b, states, attrs):
    """Y and the last states of Keras's `kind` layer, a direction each, on the node's inputs, in ONNX's layout."""
    layout, h, direction = attrs.layout, attrs.hidden_size, attrs.direction
    dirs, order = w.shape[0], _GATES[kind]
    n = len(order) * h
    if b is None:
        b = tf.zeros([dirs, 2 * n], dtype=x.dtype)
    xb = x if layout else tf.transpose(x, [1, 0, 2])  # Keras's sequences are batch first
    ys, lasts = [], [[] for _ in states]
    for d in range(dirs):
        backwards = direction == "reverse" or d == 1
        layer = _layer(kind, h, backwards, x.dtype.name, attrs, d)
        layer.build(xb.shape)
        wb, rb = _gates(b[d][:n], order, h), _gates(b[d][n:], order, h)
        bias = tf.stack([wb, rb]) if kind == "GRU" and attrs.linear_before_reset else wb + rb
        weights = [tf.transpose(_gates(w[d], order, h)), tf.transpose(_gates(r[d], order, h)), bias]
        initial = None if all(s is None for s in states) else \
            [tf.zeros([xb.shape[0], h], x.dtype) if s is None else (s[:, d] if layout else s[d]) for s in states]
        out, _ = layer.stateless_call(weights, [v.value for v in layer.non_trainable_variables], xb,
                                      initial_state=initial)
        ys.append(tf.reverse(out[0], [1]) if backwards else out[0])
        for k, s in enumerate(out[1:]):
            lasts[k].append(s)
    y = tf.stack(ys, axis=2)  # [batch, seq, dirs, hidden]
    y = y if layout else tf.transpose(y, [1, 2, 0, 3])
    return tuple([y] + [tf.stack(s, axis=1 if layout else 0) for s in lasts])


register_rnn(OPS, _run, lambda kind: f"Keras's {kind}", per_direction=True)
