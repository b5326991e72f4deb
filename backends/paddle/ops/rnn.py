"""Recurrent layers (ONNX LSTM, GRU and RNN: what torch.onnx emits for nn.LSTM, nn.GRU and nn.RNN, a node a
layer) with the call a porter writes: paddle.nn.LSTM, GRU and SimpleRNN, whose forward on CPU is Paddle's fused
rnn kernel. The node's W, R and B are the layer's weights, their gates in Paddle's order (torch's: _ops_common
RNN_GATES), handed to the layer in place of its own parameters (_all_weights, the list its forward gives the
kernel: all the weights, then all the biases), so that the gradients reach them."""
import paddle

from backends._ops_common import RNN_GATES, rnn_activation, rnn_unsupported
from backends._table import Unsupported
from backends.paddle.ops import OPS

_LAYERS = {"LSTM": paddle.nn.LSTM, "GRU": paddle.nn.GRU, "RNN": paddle.nn.SimpleRNN}


def _gates(t, order, h):
    """`t`'s chunks of `h` rows (its first axis) in `order` (ONNX's gate indices, in Paddle's order)."""
    return paddle.concat([t[k * h:(k + 1) * h] for k in order], axis=0)


def _run(kind, x, w, r, b, sequence_lens, states, attrs, cannot=(), **layer_kw):
    """Y and the last states of Paddle's `kind` layer run on the node's inputs, in ONNX's layout."""
    layout, h = attrs.get("layout", 0), attrs["hidden_size"]
    why = rnn_unsupported(f"Paddle's {_LAYERS[kind].__name__}", kind,
                          None if sequence_lens is None else sequence_lens.numpy(), x.shape[1 if layout else 0],
                          attrs, cannot)
    if why:
        raise Unsupported(why)
    dirs, order = w.shape[0], RNN_GATES[kind]
    layer = _LAYERS[kind](x.shape[-1], h, direction="bidirect" if dirs == 2 else "forward", time_major=not layout,
                          **layer_kw)
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


@OPS.register("LSTM", since=7)
def lstm(x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None, *, activation_alpha=None,
         activation_beta=None, activations=None, clip=None, direction="forward", hidden_size, input_forget=0,
         layout=0):
    return _run("LSTM", x, w, r, b, sequence_lens, [initial_h, initial_c], locals(),
                [("peepholes", p is not None), ("coupled input and forget gate", input_forget)])


@OPS.register("GRU", since=7)
def gru(x, w, r, b=None, sequence_lens=None, initial_h=None, *, activation_alpha=None, activation_beta=None,
        activations=None, clip=None, direction="forward", hidden_size, layout=0, linear_before_reset=0):
    return _run("GRU", x, w, r, b, sequence_lens, [initial_h], locals())


@OPS.register("RNN", since=7)
def rnn(x, w, r, b=None, sequence_lens=None, initial_h=None, *, activation_alpha=None, activation_beta=None,
        activations=None, clip=None, direction="forward", hidden_size, layout=0):
    return _run("RNN", x, w, r, b, sequence_lens, [initial_h], locals(), activation=rnn_activation(activations))
