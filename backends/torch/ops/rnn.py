"""Recurrent layers as torch.onnx emits them for nn.LSTM and nn.GRU (one node per layer): the ONNX
equations step by step, so autograd differentiates exactly them. ONNX orders the gates i, o, f, c
(LSTM) and z, r, h (GRU); torch's own weights are i, f, g, o and r, z, n (the exporter reorders them)."""
import torch

from backends._table import Unsupported
from backends.torch.ops import OPS


def _directions(direction):
    return {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[direction]


def _check(kind, activations, defaults, sequence_lens, seq_len, extra=()):
    if activations is not None and [a.lower() for a in activations] != defaults * (len(activations) // len(defaults)):
        raise Unsupported(f"{kind} with activations {activations} (only the defaults {defaults})")
    if sequence_lens is not None and bool((sequence_lens != seq_len).any()):
        raise Unsupported(f"{kind} with sequences shorter than the input (sequence_lens {sequence_lens.tolist()})")
    for what, bad in extra:
        if bad:
            raise Unsupported(f"{kind} with {what}")


def _run(cell, x, layout, directions, n_state, state0, step_args):
    """Run `cell(x_t, states, d) -> states` over time per direction; returns Y and the last states in
    ONNX's layout (layout 0: [seq, dirs, batch, hidden]; 1: [batch, seq, dirs, hidden])."""
    if layout:
        x = x.transpose(0, 1)  # [seq, batch, input]
    ys, finals = [], [[] for _ in range(n_state)]
    for d, backwards in enumerate(directions):
        states = [s[d] for s in state0]
        out = [None] * x.shape[0]
        for t in (reversed(range(x.shape[0])) if backwards else range(x.shape[0])):
            states = cell(x[t], states, *[a[d] if a is not None else None for a in step_args])
            out[t] = states[0]
        ys.append(torch.stack(out))
        for k in range(n_state):
            finals[k].append(states[k])
    y = torch.stack(ys, dim=1)  # [seq, dirs, batch, hidden]
    finals = [torch.stack(f) for f in finals]  # [dirs, batch, hidden]
    if layout:
        return [y.permute(2, 0, 1, 3)] + [f.transpose(0, 1) for f in finals]
    return [y] + finals


def _clipped(clip):
    return (lambda v: v) if clip is None else (lambda v: torch.clamp(v, -clip, clip))


@OPS.register("LSTM", since=7)
def lstm(x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None, *, activation_alpha=None,
         activation_beta=None, activations=None, clip=None, direction="forward", hidden_size, input_forget=0,
         layout=0):
    _check("LSTM", activations, ["sigmoid", "tanh", "tanh"], sequence_lens, x.shape[1] if layout else x.shape[0],
           [("input_forget=1", input_forget)])
    dirs = _directions(direction)
    h = hidden_size
    batch = x.shape[0] if layout else x.shape[1]

    def zeros():
        return torch.zeros(len(dirs), batch, h, dtype=x.dtype)
    h0 = (initial_h.transpose(0, 1) if layout else initial_h) if initial_h is not None else zeros()
    c0 = (initial_c.transpose(0, 1) if layout else initial_c) if initial_c is not None else zeros()
    clamp = _clipped(clip)

    def cell(xt, states, wd, rd, bd, pd):
        hp, cp = states
        gates = xt @ wd.t() + hp @ rd.t() + (bd[:4 * h] + bd[4 * h:] if bd is not None else 0)
        i, o, f, c = gates.split(h, dim=-1)
        if pd is not None:
            i, f = i + pd[:h] * cp, f + pd[2 * h:] * cp
        i, f, c = torch.sigmoid(clamp(i)), torch.sigmoid(clamp(f)), torch.tanh(clamp(c))
        cn = f * cp + i * c
        if pd is not None:
            o = o + pd[h:2 * h] * cn
        return [torch.sigmoid(clamp(o)) * torch.tanh(cn), cn]
    return tuple(_run(cell, x, layout, dirs, 2, [h0, c0], [w, r, b, p]))


@OPS.register("GRU", since=7)
def gru(x, w, r, b=None, sequence_lens=None, initial_h=None, *, activation_alpha=None, activation_beta=None,
        activations=None, clip=None, direction="forward", hidden_size, layout=0, linear_before_reset=0):
    _check("GRU", activations, ["sigmoid", "tanh"], sequence_lens, x.shape[1] if layout else x.shape[0])
    dirs = _directions(direction)
    h = hidden_size
    batch = x.shape[0] if layout else x.shape[1]
    h0 = (initial_h.transpose(0, 1) if layout else initial_h) if initial_h is not None else \
        torch.zeros(len(dirs), batch, h, dtype=x.dtype)
    clamp = _clipped(clip)

    def cell(xt, states, wd, rd, bd):
        (hp,) = states
        wb, rb = (bd[:3 * h], bd[3 * h:]) if bd is not None else (0, 0)
        xz, xr, xh = (xt @ wd.t() + wb).split(h, dim=-1)
        rz, rr, rh = rd.split(h, dim=0)
        rbz, rbr, rbh = rb.split(h) if bd is not None else (0, 0, 0)
        z = torch.sigmoid(clamp(xz + hp @ rz.t() + rbz))
        rt = torch.sigmoid(clamp(xr + hp @ rr.t() + rbr))
        if linear_before_reset:
            n = torch.tanh(clamp(xh + rt * (hp @ rh.t() + rbh)))
        else:
            n = torch.tanh(clamp(xh + (rt * hp) @ rh.t() + rbh))
        return [(1 - z) * n + z * hp]
    return tuple(_run(cell, x, layout, dirs, 1, [h0], [w, r, b]))


_ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu, "sigmoid": torch.sigmoid}


@OPS.register("RNN", since=7)
def rnn(x, w, r, b=None, sequence_lens=None, initial_h=None, *, activation_alpha=None, activation_beta=None,
        activations=None, clip=None, direction="forward", hidden_size, layout=0):
    """ONNX's simple RNN (Keras SimpleRNN through tf2onnx; torch.onnx emits nn.RNN as it): H_t = f(X_t W^T +
    H_{t-1} R^T + Wb + Rb), f per direction (Tanh by default; Relu and Sigmoid too)."""
    dirs = _directions(direction)
    names = [a.lower() for a in activations] if activations is not None else ["tanh"] * len(dirs)
    if any(n not in _ACTIVATIONS for n in names) or activation_alpha is not None or activation_beta is not None:
        raise Unsupported(f"RNN with activations {activations} (Tanh, Relu and Sigmoid only)")
    _check("RNN", None, ["tanh"], sequence_lens, x.shape[1] if layout else x.shape[0])
    h = hidden_size
    batch = x.shape[0] if layout else x.shape[1]
    h0 = (initial_h.transpose(0, 1) if layout else initial_h) if initial_h is not None else \
        torch.zeros(len(dirs), batch, h, dtype=x.dtype)
    clamp = _clipped(clip)
    fns = [_ACTIVATIONS[names[d if len(names) > d else 0]] for d in range(len(dirs))]

    def cell(xt, states, wd, rd, bd, f):
        (hp,) = states
        bias = bd[:h] + bd[h:] if bd is not None else 0
        return [f(clamp(xt @ wd.t() + hp @ rd.t() + bias))]
    return tuple(_run(cell, x, layout, dirs, 1, [h0], [w, r, b, fns]))
