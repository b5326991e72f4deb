"""Recurrent layers (ONNX LSTM and RNN: what torch.onnx emits for nn.LSTM and nn.RNN, a node a layer) with the
module a porter writes: megengine.module.LSTM and RNN, whose forward is MegEngine's fused kernel (builtin LSTM and
RNN ops). The node's W, R and B become the module's one weight tensor, _flatten_weights, as that kernel reads it
(dnn/src/naive/rnn: per direction, weight_ih, weight_hh, bias_ih and bias_hh one after another, each row-major;
its Python side only shapes the buffer [gates * hidden, ...]), their gates in torch's order (_ops_common
RNN_GATES), so that the gradients reach them. MegEngine has no GRU module: a GRU is its formula in MegEngine's
ops, ONNX's equations step by step (what a porter writes without one), either reset, either direction."""
import megengine
from megengine import functional

from backends._ops_common import RNN_GATES, register_rnn, rnn_activation
from backends.megengine.ops import OPS


def _gates(t, order, h):
    return functional.concat([t[k * h:(k + 1) * h] for k in order], axis=0).flatten()


def _run(kind, x, w, r, b, states, attrs):
    """Y and the last states of MegEngine's `kind` module on the node's inputs, in ONNX's layout."""
    if kind == "GRU":
        return _gru(x, w, r, b, states[0], attrs)
    layout, h = attrs.layout, attrs.hidden_size
    dirs, order = w.shape[0], RNN_GATES[kind]
    n = len(order) * h
    if b is None:
        b = functional.zeros((dirs, 2 * n), dtype=x.dtype)
    module = megengine.module.LSTM if kind == "LSTM" else megengine.module.RNN
    layer = module(x.shape[-1], h, bias=True, batch_first=bool(layout), bidirectional=dirs == 2,
                   **({"nonlinearity": rnn_activation(attrs.activations)} if kind == "RNN" else {}))
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


def _gru(x, w, r, b, h0, attrs):
    """ONNX's GRU, step by step: z = sigmoid(x Wz + h Rz + Wbz + Rbz), r likewise, the candidate tanh(x Wh + r * (h Rh
    + Rbh) + Wbh) (linear_before_reset) or tanh(x Wh + (r * h) Rh + Rbh + Wbh), h = (1 - z) * candidate + z * h."""
    layout, h, direction = attrs.layout, attrs.hidden_size, attrs.direction
    xs = x.transpose(1, 0, 2) if layout else x  # [seq, batch, input]
    dirs, seq, batch = w.shape[0], xs.shape[0], xs.shape[1]
    if h0 is not None and layout:
        h0 = h0.transpose(1, 0, 2)
    ys, lasts = [], []
    for d in range(dirs):
        wz, wr, wh = (w[d][k * h:(k + 1) * h] for k in range(3))
        rz, rr, rh = (r[d][k * h:(k + 1) * h] for k in range(3))
        bias = [b[d][k * h:(k + 1) * h] for k in range(6)] if b is not None else [0] * 6
        ht = h0[d] if h0 is not None else functional.zeros((batch, h), dtype=x.dtype)
        out = [None] * seq
        for t in (reversed(range(seq)) if direction == "reverse" or d == 1 else range(seq)):
            xt = xs[t]
            z = functional.sigmoid(functional.matmul(xt, wz.T) + functional.matmul(ht, rz.T) + bias[0] + bias[3])
            rt = functional.sigmoid(functional.matmul(xt, wr.T) + functional.matmul(ht, rr.T) + bias[1] + bias[4])
            if attrs.linear_before_reset:
                recurrent = rt * (functional.matmul(ht, rh.T) + bias[5])
            else:
                recurrent = functional.matmul(rt * ht, rh.T) + bias[5]
            candidate = functional.tanh(functional.matmul(xt, wh.T) + recurrent + bias[2])
            ht = (1 - z) * candidate + z * ht
            out[t] = ht
        ys.append(functional.stack(out, axis=1))  # [batch, seq, hidden]
        lasts.append(ht)
    y = functional.stack(ys, axis=2)  # [batch, seq, dirs, hidden]
    return (y if layout else y.transpose(1, 2, 0, 3)), functional.stack(lasts, axis=1 if layout else 0)


register_rnn(OPS, _run, lambda kind: f"MegEngine's {kind}", per_direction=("GRU",))
