"""The export's checks against the module: the bundle's outputs (and the first submodule whose output
differs, when they do) and its recorded parameter gradients against torch autograd on the module
itself, float64 arbitrating where the module runs in float64."""
import contextlib
import logging

import numpy as np

from irtrace.compare import close, metrics
from irtrace.errors import IrtraceError
from irtrace.export import dropout as dropout_mod
from irtrace.export import random as random_mod
from irtrace.export.outputs import flatten
from irtrace.store import grad_name, seed_name

log = logging.getLogger(__name__)
GRAD_RTOL = 1e-3  # of the gradient's own scale: float32 rounding over a network is far below, a wrong formula far above
ROUNDING_FACTOR = 8  # the bundle's gradient may be this many times farther from float64 than torch's own float32
# ... or this fraction of its float64 scale: the graph's float32 path (ops one by one, SiLU as Sigmoid * x) rounds
# otherwise than the module's, and an ill-conditioned op amplifies it (a train-mode BatchNorm over 2 values per
# channel in timm rexnet_100's squeeze-excite: 2 % of fc1's gradient, 13x torch's own float32 error); a graph that
# differentiates something else is off by far more (weight standardisation's constant statistics: 83 %)
WRONG_FRACTION = 0.1

def _compare(a, b):
    """(max abs, max rel) of `a` against `b` as a replay reports them (compare.metrics); inf for a
    shape mismatch."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return float("inf"), float("inf")
    m = metrics(a, b)
    return m.max_abs, m.max_rel



def check_outputs(graph, values, outputs, ref_out, submodule_out, sources, state_outputs, state_after):
    """The graph replayed in torch must reproduce the module's outputs (and running stats)."""
    if len(ref_out) != len(outputs):
        raise IrtraceError(f"export check: the module returned {len(ref_out)} tensors, the graph has "
                           f"{len(outputs)} outputs")
    bad = [(o, r) for o, r in zip(outputs, ref_out) if not close(values[o], r.numpy())[0]]
    for key, value in state_outputs.items():
        if key in state_after and not close(values[value], state_after[key].numpy())[0]:
            bad.append((value, state_after[key]))
    worst = ", ".join(f"{o} (max abs {_compare(values[o], r.numpy())[0]:.3g}, max rel {_compare(values[o], r.numpy())[1]:.3g})"
                      for o, r in bad)
    if not bad:
        log.info("export check passed: %s", ", ".join(f"{o} max abs {_compare(values[o], r.numpy())[0]:.3g}"
                                                      for o, r in zip(outputs, ref_out)))
        return
    first = _first_bad_module(graph, values, submodule_out, sources)
    where = f"; the first value that disagrees is {first}" if first else ""
    raise IrtraceError(f"export check failed: the graph's outputs differ from the module's: {worst}{where}")



def check_gradients(model, inputs, masks, draws, values, outputs, loss, graph, graph_inputs):
    """The bundle's recorded parameter gradients must be torch's own autograd on the original module, on
    the same inputs, recorded masks and draws, and loss: a graph whose replay differentiates something
    other than what the module does (statistics treated as constants, a detached branch) records wrong
    gradients that every backend would then be judged against. IrtraceError naming the parameters.
    Where the module also runs in float64, float64 arbitrates: a gradient that is 0 but for rounding (a
    BatchNorm's bias before another train-mode BatchNorm, which takes the mean out) differs from torch's
    float32 by more than its own scale, and is wrong only if farther from float64 than both torch's own
    float32 rounding and the WRONG_FRACTION of its scale allow."""
    import copy

    import torch
    inits = {t.name for t in graph.graph.initializer}
    names = [k for k, p in model.named_parameters() if p.requires_grad and k in inits and grad_name(k) in values]
    if not names:
        return
    suspects, bad = {}, []  # k -> (torch's float32 gradient, err, scale)

    def judge(k, g):  # each gradient as the module's backward makes it (they are not all held at once)
        want = g.detach().cpu().numpy()
        got = values[grad_name(k)]
        if got.shape != want.shape:
            bad.append((float("inf"), k, float("inf"), 0.0))
        elif want.size:
            scale, err = _max_abs(want), _max_abs(got, want)
            if err > GRAD_RTOL * max(scale, 1e-30):
                suspects[k] = (np.array(want), err, scale)
        _let_go(values)
    if not _module_gradients(model, names, inputs, masks, draws, values, outputs, loss, None, judge):
        return
    # float64 arbitrates only where float32 disagrees: the module's float64 twin (twice its weights, and
    # its gradients) is made only then
    confirmed = set()

    def arbitrate(k, g64):
        want, _, _ = suspects[k]
        truth = g64.detach().cpu().numpy()
        own = _max_abs(want, truth)  # torch's own float32 rounding of this gradient
        off = _max_abs(values[grad_name(k)], truth)
        if off <= ROUNDING_FACTOR * own or off <= WRONG_FRACTION * _max_abs(truth):
            confirmed.add(k)
    if suspects:
        try:
            twin = copy.deepcopy(model).double()
        except Exception:  # noqa: BLE001 - a module that cannot be copied or cast: float32's rule alone
            twin = None
        if twin is not None:
            _module_gradients(twin, list(suspects), inputs, masks, draws, values, outputs, loss, torch.float64,
                              arbitrate)
    bad += [(err / max(scale, 1e-30), k, err, scale) for k, (_, err, scale) in suspects.items() if k not in confirmed]
    if bad:
        bad.sort(reverse=True)
        worst = "; ".join(f"{k}: max abs {err:.3g} of a gradient up to {scale:.3g} ({rel:.1%})"
                          for rel, k, err, scale in bad[:3])
        raise IrtraceError(f"export check failed: the bundle's gradients of {len(bad)} parameter(s) differ from "
                           f"torch autograd on the module (the graph does not differentiate what the module does): "
                           f"{worst}")



_CHUNK = 1 << 20  # elements compared at a time: a float64 copy of a whole weight (an LLM's embedding: 1 GB) is not made


def _max_abs(a, b=None):
    """max |a - b| (max |a| without `b`; NaN if any is) in float64, a chunk of the flattened arrays at a time."""
    a = np.asarray(a).reshape(-1)
    b = None if b is None else np.asarray(b).reshape(-1)
    worst = 0.0
    for i in range(0, a.size, _CHUNK):
        x = a[i:i + _CHUNK].astype(np.float64)
        if b is not None:
            x -= b[i:i + _CHUNK]
        m = float(np.max(np.abs(x)))
        if m != m:  # NaN, as np.max over the whole would give
            return m
        worst = max(worst, m)
    return worst


def _let_go(values):
    """The pages of the bundle's value store read so far leave this process's memory (they are the
    file's; see LazyValues.release), where `values` is one."""
    release = getattr(values, "release", None)
    if release is not None:
        release()


def _module_gradients(model, names, inputs, masks, draws, values, outputs, loss, dtype, each):
    """torch autograd's gradients of the bundle's loss with respect to the parameters `names` of `model`,
    run on the bundle's inputs (cast to `dtype` when given: the float64 twin), recorded masks and draws:
    each(name, gradient) is called as the backward makes each one, which is let go after (a parameter the
    loss does not reach: zeros). False where the module's own forward or backward raises (in float64:
    an op without a double kernel)."""
    import torch
    params = dict(model.named_parameters())
    xs = [(t.detach().clone().to(dtype) if dtype is not None and t.dtype.is_floating_point else t.detach().clone())
          .requires_grad_(loss == "grad-penalty" and t.dtype.is_floating_point)
          if isinstance(t, torch.Tensor) else t for t in inputs]
    replaying = random_mod.recorded(list(draws), record=False) if draws else contextlib.nullcontext()
    try:
        with torch.enable_grad(), dropout_mod.patched(masks, record=False, eager=True), replaying:
            flat = [t for _, t in flatten(model(*xs))]
            terms = [(y * torch.from_numpy(np.array(values[seed_name(o)])).to(y.dtype)).sum()
                     for o, y in zip(outputs, flat) if seed_name(o) in values and y.requires_grad]
            if not terms:
                return False
            total = sum(terms[1:], terms[0])
            penalised = [x for x in xs if isinstance(x, torch.Tensor) and x.requires_grad]
            if loss == "grad-penalty" and penalised:
                gs = torch.autograd.grad(total, penalised, create_graph=True, allow_unused=True, materialize_grads=True)
                total = total + sum((g * g).sum() for g in gs)
            _backward_each(total, [(k, params[k]) for k in names], each)
            return True
    except Exception as e:  # noqa: BLE001 - the module's own backward failed: there is nothing to check against
        if dtype is None:
            log.warning("gradient check skipped: torch autograd on the module raised %s: %s", type(e).__name__, e)
        return False


def _backward_each(total, named, each):
    """Backpropagate `total` to the parameters `named` ([(name, parameter)]), each(name, gradient) called
    as each is accumulated and the .grad let go then (torch.autograd.grad would hold them all, the model's
    size once more); the parameters' own .grad are as they were after."""
    import torch
    seen, saved, hooks = set(), [p.grad for _, p in named], []

    def hook(p, k):
        each(k, p.grad)
        seen.add(k)
        p.grad = None
    try:
        for k, p in named:
            p.grad = None
            hooks.append(p.register_post_accumulate_grad_hook(lambda p, k=k: hook(p, k)))
        if total.requires_grad:
            torch.autograd.backward(total, inputs=[p for _, p in named])
    finally:
        for h in hooks:
            h.remove()
        for (_, p), g in zip(named, saved):
            p.grad = g
    for k, p in named:
        if k not in seen:
            each(k, torch.zeros_like(p))


def _first_bad_module(graph, values, submodule_out, sources):
    """The value made by the last node of each module scope, compared in graph order."""
    last = {}
    for n in graph.graph.node:
        m = sources.get(n.name, {}).get("module")
        if m:
            for o in n.output:
                if o in values:
                    last.setdefault(m, [])
                    last[m].append(o)
    for n in graph.graph.node:
        m = sources.get(n.name, {}).get("module")
        if m in submodule_out and last.get(m) and last[m][-1] in n.output:
            v, ref = values[last[m][-1]], submodule_out[m].numpy()
            if v.shape == ref.shape and not close(v, ref)[0]:
                a, r = _compare(v, ref)
                return f"{last[m][-1]!r} (module {m}, node {n.name}): max abs {a:.3g}, max rel {r:.3g}"
    return None
