"""Recurrent layers (ONNX LSTM, GRU and RNN: what torch.onnx emits for nn.LSTM, nn.GRU and nn.RNN, a node a
layer) with what oneflow.nn.LSTM, GRU and RNN compute: their forward's fused call (oneflow._C.lstm, gru, rnn_tanh,
rnn_relu, torch's _VF signature), given the node's W, R and B as the layer's weights, their gates in OneFlow's
order (torch's: _ops_common RNN_GATES), per direction [weight_ih, weight_hh, bias_ih, bias_hh], so that the
gradients reach them (the module itself reads its own parameters at each forward)."""
import oneflow as flow

from backends._ops_common import RNN_GATES, register_rnn, rnn_activation
from backends.oneflow.ops import OPS


def _gates(t, order, h):
    return flow.cat([t[k * h:(k + 1) * h] for k in order], dim=0)


def _run(kind, x, w, r, b, states, attrs):
    """Y and the last states of OneFlow's fused `kind` call on the node's inputs, in ONNX's layout."""
    layout, h = attrs.layout, attrs.hidden_size
    dirs, order = w.shape[0], RNN_GATES[kind]
    n = len(order) * h
    if b is None:
        b = flow.zeros(dirs, 2 * n, dtype=x.dtype)
    weights = [_gates(t, order, h) for d in range(dirs) for t in (w[d], r[d], b[d][:n], b[d][n:])]
    batch = x.shape[0] if layout else x.shape[1]
    states = [flow.zeros(dirs, batch, h, dtype=x.dtype) if s is None else (s.transpose(0, 1) if layout else s)
              for s in states]
    fused = {"LSTM": flow._C.lstm, "GRU": flow._C.gru}.get(kind) or \
        (flow._C.rnn_relu if rnn_activation(attrs.activations) == "relu" else flow._C.rnn_tanh)
    out = fused(x, tuple(states) if len(states) > 1 else states[0], weights, True, 1, 0.0, False, dirs == 2,
                bool(layout))
    y = out[0].reshape(*out[0].shape[:2], dirs, h)  # from [seq, batch, dirs * hidden] (or batch first)
    y = y if layout else y.permute(0, 2, 1, 3)
    return tuple([y] + [s.transpose(0, 1) if layout else s for s in out[1:]])


register_rnn(OPS, _run, lambda kind: f"OneFlow's {kind}")
