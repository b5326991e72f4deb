"""Recurrent layers (ONNX LSTM and RNN: what torch.onnx emits for nn.LSTM and nn.RNN, a node a layer) with the
module a porter writes: megengine.module.LSTM and RNN, whose forward is MegEngine's fused kernel (builtin LSTM and
RNN ops). The node's W, R and B become the module's one weight tensor, _flatten_weights, as that kernel reads it
(dnn/src/naive/rnn: per direction, weight_ih, weight_hh, bias_ih and bias_hh one after another, each row-major;
its Python side only shapes the buffer [gates * hidden, ...]), their gates in torch's order (_ops_common
RNN_GATES), so that the gradients reach them. MegEngine has no GRU module."""
import megengine
from megengine import functional

from backends._ops_common import RNN_GATES, register_rnn, rnn_activation
from backends.megengine.ops import OPS


def _gates(t, order, h):
    return functional.concat([t[k * h:(k + 1) * h] for k in order], axis=0).flatten()


def _run(kind, x, w, r, b, states, attrs):
    """Y and the last states of MegEngine's `kind` module on the node's inputs, in ONNX's layout."""
    layout, h = attrs.get("layout", 0), attrs["hidden_size"]
    dirs, order = w.shape[0], RNN_GATES[kind]
    n = len(order) * h
    if b is None:
        b = functional.zeros((dirs, 2 * n), dtype=x.dtype)
    module = megengine.module.LSTM if kind == "LSTM" else megengine.module.RNN
    layer = module(x.shape[-1], h, bias=True, batch_first=bool(layout), bidirectional=dirs == 2,
                   **({"nonlinearity": rnn_activation(attrs.get("activations"))} if kind == "RNN" else {}))
    layer._flatten_weights = functional.concat(
        [_gates(t, order, h) for d in range(dirs) for t in (w[d], r[d], b[d][:n], b[d][n:])]).reshape(n, -1)
    batch = x.shape[0] if layout else x.shape[1]
    states = [functional.zeros((dirs, batch, h), dtype=x.dtype) if s is None else
              (s.transpose(1, 0, 2) if layout else s) for s in states]
    y, last = layer(x, tuple(states) if len(states) > 1 else states[0])
    last = list(last) if isinstance(last, (tuple, list)) else [last]
    y = y.reshape(*y.shape[:2], dirs, h)  # from [seq, batch, dirs * hidden] (or batch first)
    y = y if layout else y.transpose(0, 2, 1, 3)
    return tuple([y] + [s.transpose(1, 0, 2) if layout else s for s in last])


register_rnn(OPS, _run, lambda kind: f"MegEngine's {kind}", kinds=("LSTM", "RNN"))
