"""Recurrent layers (ONNX LSTM, GRU and RNN: what torch.onnx emits for nn.LSTM, nn.GRU and nn.RNN, a node a
layer) with the call a porter writes: paddle.nn.LSTM, GRU and SimpleRNN, whose forward on CPU is Paddle's fused
rnn kernel. The node's W, R and B are the layer's weights, their gates in Paddle's order (torch's: _ops_common
RNN_GATES), handed to the layer in place of its own parameters (_all_weights, the list its forward gives the
kernel: all the weights, then all the biases), so that the gradients reach them."""
import paddle

from backends._ops_common import RNN_GATES, register_rnn, rnn_activation
from backends.paddle.ops import OPS

_LAYERS = {"LSTM": paddle.nn.LSTM, "GRU": paddle.nn.GRU, "RNN": paddle.nn.SimpleRNN}


def _gates(t, order, h):
    """`t`'s chunks of `h` rows (its first axis) in `order` (ONNX's gate indices, in Paddle's order)."""
    return paddle.concat([t[k * h:(k + 1) * h] for k in order], axis=0)


def _run(kind, x, w, r, b, states, attrs):
    """Y and the last states of Paddle's `kind` layer run on the node's inputs, in ONNX's layout."""
    layout, h = attrs.layout, attrs.hidden_size
    dirs, order = w.shape[0], RNN_GATES[kind]
    layer = _LAYERS[kind](x.shape[-1], h, direction="bidirect" if dirs == 2 else "forward", time_major=not layout,
                          **({"activation": rnn_activation(attrs.activations)} if kind == "RNN" else {}))
    n = len(order) * h
    if b is None:
        b = paddle.zeros([dirs, 2 * n], dtype=x.dtype)
    layer._all_weights = [_gates(m[d], order, h) for d in range(dirs) for m in (w, r)] + \
        [_gates(b[d][k * n:(k + 1) * n], order, h) for d in range(dirs) for k in (0, 1)]
    batch = x.shape[0] if layout else x.shape[1]
    states = [paddle.zeros([dirs, batch, h], dtype=x.dtype) if s is None else
              (paddle.transpose(s, [1, 0, 2]) if layout else s) for s in states]
    y, last = layer(x, tuple(states) if len(states) > 1 else states[0])
    last = list(last) if isinstance(last, (tuple, list)) else [last]
    y = paddle.reshape(y, list(y.shape[:2]) + [dirs, h])  # from [seq, batch, dirs * hidden] (or batch first)
    y = y if layout else paddle.transpose(y, [0, 2, 1, 3])
    return tuple([y] + [paddle.transpose(s, [1, 0, 2]) if layout else s for s in last])


register_rnn(OPS, _run, lambda kind: f"Paddle's {_LAYERS[kind].__name__}")
