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
from irtrace.export.outputs import flatten, numpy_of
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



def check_outputs(graph, values, outputs, run, sources, state_outputs, model=None):
    """The graph replayed in torch must reproduce the module's outputs (and running stats) in `run`
    (torch_export's _Run). Where they differ, float64 arbitrates (`model`, the module run in float64 on
    the same inputs, masks and draws; _verdict): a graph no farther from float64 than ROUNDING_FACTOR times
    torch's own float32 is rounding, and one where torch's own float32 is no answer either cannot be
    judged (passed with a warning, and False: the gradients, which follow from them, cannot be either);
    otherwise IrtraceError, naming the first module whose output differs. True where checked."""
    ref_out, state_after = run.ref_out, run.state_after
    if len(ref_out) != len(outputs):
        raise IrtraceError(f"export check: the module returned {len(ref_out)} tensors, the graph has "
                           f"{len(outputs)} outputs")
    bad = [(o, r) for o, r in zip(outputs, ref_out) if not close(values[o], numpy_of(r))[0]]
    bad += [(value, state_after[key]) for key, value in state_outputs.items()
            if key in state_after and not close(values[value], numpy_of(state_after[key]))[0]]
    if not bad:
        log.info("export check passed: %s", ", ".join(f"{o} max abs {_compare(values[o], numpy_of(r))[0]:.3g}"
                                                      for o, r in zip(outputs, ref_out)))
        return True
    arbiter = _float64_outputs(model, run, outputs, state_outputs) if model is not None else None
    truth, moved = arbiter or ({}, {})
    verdicts = {o: _verdict(values[o], numpy_of(r), truth[o], rounding=moved[o]) if o in truth else WRONG
                for o, r in bad}
    if UNJUDGED in verdicts.values():
        # torch's own float32 is no answer for some of them: the rounding the model amplifies reaches the rest
        # too (a running mean off by 9x torch's own float32 rounding and 10 % of its scale, run after run)
        _warn_excused("outputs and running stats", {o: UNJUDGED for o in verdicts}, _listed(values, bad),
                      ", nor the parameter gradients, which follow from them")
        return False
    if WRONG not in verdicts.values():
        _warn_excused("outputs and running stats", verdicts, _listed(values, bad))
        return True
    first = _first_bad_module(graph, values, submodule_outputs(model, run) if model is not None else {}, sources)
    where = f"; the first value that disagrees is {first}" if first else ""
    raise IrtraceError(f"export check failed: the graph's outputs differ from the module's: "
                       f"{_listed(values, bad)}{where}")


def _listed(values, bad, most=3):
    """The `most` worst of `bad` ([(value name, torch tensor)]) with their differences, and how many more."""
    rows = sorted(((*_compare(values[o], numpy_of(r)), o) for o, r in bad), key=lambda t: -t[0])
    text = ", ".join(f"{o} (max abs {a:.3g}, max rel {r:.3g})" for a, r, o in rows[:most])
    return text + (f" and {len(rows) - most} more" if len(rows) > most else "")


ROUNDING, UNJUDGED, WRONG = "rounding", "unjudged", "wrong"


def _verdict(got, want, truth, share=0.0, rounding=0.0):
    """float64's verdict on the bundle's `got` where it differs from torch's own float32 `want`: UNJUDGED
    where `rounding` (how far float64 itself moves where its inputs and weights move by float32's rounding)
    is over WRONG_FRACTION of truth's scale: the model at these inputs amplifies rounding until float32
    determines nothing (regnet's 12 train-mode BatchNorms over 2 values per channel at a 1x1 stage, whose
    float32 runs differ from one another by as much as from float64). ROUNDING where `got` is no farther
    from float64's `truth` than ROUNDING_FACTOR times the farther of `want` and `rounding`, or than `share`
    of truth's scale; UNJUDGED again where `want` is off by more than WRONG_FRACTION; else WRONG."""
    if np.shape(got) != np.shape(truth):
        return WRONG
    own, off, scale = max(_max_abs(want, truth), rounding), _max_abs(got, truth), _max_abs(truth)
    if rounding > WRONG_FRACTION * scale:
        return UNJUDGED
    if off <= ROUNDING_FACTOR * own or off <= share * scale:
        return ROUNDING
    return UNJUDGED if own > WRONG_FRACTION * scale else WRONG


def _warn_excused(what, verdicts, listed, then=""):
    """The warning for a check passed where float32 alone would have refused it: `verdicts` {name:
    ROUNDING or UNJUDGED}; `then`, what follows for the rest of the check."""
    unjudged = sorted(k for k, v in verdicts.items() if v == UNJUDGED)
    if unjudged:
        log.warning("export check: %d of the %s (%s) could not be checked: rounding alone moves them by more than "
                    "%d %% of their scale (the model amplifies rounding at these inputs until float32 determines "
                    "nothing; a larger input or batch makes them checkable)%s; the bundle records the graph's "
                    "values, from which each node's replay starts", len(unjudged), what, listed,
                    round(100 * WRONG_FRACTION), then)
    elif verdicts:
        log.info("export check: the %s differ from the module's float32 (%s), but no more from float64 than "
                 "float32's rounding does", what, listed)


def _float64_outputs(model, run, outputs, state_outputs):
    """({graph value: float64 array}, {graph value: how far it moves}) of the module's outputs and updated
    running stats, run as a float64 copy from the state before the run on the same inputs, dropout masks
    and random draws, and how far each moves where every input and parameter moves by float32's rounding
    (a relative 2**-24, signs drawn): what rounding alone can do at these inputs. None where the module
    cannot be copied, cast or run in float64."""
    import copy

    import torch
    try:
        twin = copy.deepcopy(model)
        truth = _float64_run(twin, run, outputs, state_outputs, None)
        moved = _float64_run(twin, run, outputs, state_outputs, torch.Generator().manual_seed(0))
    except Exception as e:  # noqa: BLE001 - no float64 twin: float32's rule alone
        log.info("export check: no float64 arbitration of the outputs (%s: %s)", type(e).__name__, e)
        return None
    return truth, {k: _max_abs(moved[k], v) for k, v in truth.items()}


@contextlib.contextmanager
def _replaying(masks, draws):
    """The module runs again as the export's reference run ran it: its dropout masks and random draws handed
    back in order (a module that drew nothing runs without the recorder)."""
    drawn = random_mod.recorded(list(draws), record=False) if draws else contextlib.nullcontext()
    with dropout_mod.patched(masks, record=False, eager=True), drawn:
        yield


def _float64_run(twin, run, outputs, state_outputs, jitter):
    """{graph value: float64 array} of `twin` (the module's copy) in float64, its state as before the run;
    every floating input and parameter times 1 + 2**-24 * (+-1) drawn from the generator `jitter` if any."""
    import torch
    twin.load_state_dict(run.state)
    twin.double()

    def moved(t):
        t = t.detach().clone().double()
        if jitter is not None:
            t *= 1 + 2.0 ** -24 * (torch.randint(0, 2, t.shape, generator=jitter, dtype=t.dtype) * 2 - 1)
        return t
    xs = [moved(t) if isinstance(t, torch.Tensor) and t.dtype.is_floating_point else t for t in run.given]
    with torch.no_grad():
        for p in twin.parameters() if jitter is not None else ():  # load_state_dict put them back as they were
            p.copy_(moved(p))
        with _replaying(run.masks, run.draws):
            flat = [t for _, t in flatten(twin(*xs))]
    after = twin.state_dict()
    truth = {o: numpy_of(t) for o, t in zip(outputs, flat)}
    truth.update({v: numpy_of(after[k]).copy() for k, v in state_outputs.items() if k in after})
    return truth



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
        want = numpy_of(g)
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
    verdicts = {}

    def arbitrate(k, g64):
        verdicts[k] = _verdict(values[grad_name(k)], suspects[k][0], numpy_of(g64), WRONG_FRACTION)
    if suspects:
        try:
            twin = copy.deepcopy(model).double()
        except Exception:  # noqa: BLE001 - a module that cannot be copied or cast: float32's rule alone
            twin = None
        if twin is not None:
            _module_gradients(twin, list(suspects), inputs, masks, draws, values, outputs, loss, torch.float64,
                              arbitrate)
    confirmed = {k for k, v in verdicts.items() if v != WRONG}
    _warn_excused("parameter gradients", {k: verdicts[k] for k in confirmed},
                  ", ".join(sorted(k for k in confirmed if verdicts[k] == UNJUDGED)[:3]) + ", ...")
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
    """max |a - b| (max |a| without `b`; NaN if any is), a chunk of the flattened arrays at a time: in float32
    where both are (the difference rounded to a relative 2**-24 of itself; the checks' thresholds are 1e-3 and
    wider), in float64 where either is not or float32's difference overflows."""
    a = np.asarray(a).reshape(-1)
    b = None if b is None else np.asarray(b).reshape(-1)
    if a.dtype == np.float32 and (b is None or b.dtype == np.float32):
        with np.errstate(over="ignore"):  # an overflow is measured again in float64
            worst = _max_abs_in(a, b, np.float32)
        if worst != float("inf") or not _finite(a) or (b is not None and not _finite(b)):
            return worst
    return _max_abs_in(a, b, np.float64)


def _finite(a):
    """Whether every element of the flat array `a` is finite, a chunk at a time."""
    return all(np.isfinite(a[i:i + _CHUNK]).all() for i in range(0, a.size, _CHUNK))


def _max_abs_in(a, b, dtype):
    worst = 0.0
    for i in range(0, a.size, _CHUNK):
        x = a[i:i + _CHUNK].astype(dtype)
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
    try:
        with torch.enable_grad(), _replaying(masks, draws):
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


def submodule_outputs(model, run):
    """{module path: its first tensor output, in call order} of `model` run again as the export's reference
    run ran it (its state before the run, the same inputs, dropout masks and random draws); the state put
    back after. {} where the module cannot run again."""
    import torch
    captured, hooks = {}, []
    for path, mod in model.named_modules():
        if path:
            def hook(m, args, out, path=path):
                if isinstance(out, torch.Tensor):  # a copy: a later in-place op (ReLU(inplace=True)) changes it
                    captured.setdefault(path, out.detach().clone())
            hooks.append(mod.register_forward_hook(hook))
    xs = [t.detach().clone() if isinstance(t, torch.Tensor) else t for t in run.given]
    try:
        model.load_state_dict(run.state)
        with torch.no_grad(), _replaying(run.masks, run.draws):
            model(*xs)
    except Exception as e:  # noqa: BLE001 - the diagnosis is the extra: the check's own error is raised anyway
        log.info("export check: the module did not run again to name the first differing module (%s: %s)",
                 type(e).__name__, e)
        return {}
    finally:
        for h in hooks:
            h.remove()
        model.load_state_dict(run.state)
    return captured


def _first_bad_module(graph, values, submodule_out, sources):
    """The value made by the last node of each module scope, compared in graph order."""
    last = {}  # module -> the last value made inside it or a module within it (its activation's ReLU)
    for n in graph.graph.node:
        m = sources.get(n.name, {}).get("module")
        outs = [o for o in n.output if o in values]
        while m and outs:
            last[m] = outs[-1]
            m = m.rpartition(".")[0]
    for n in graph.graph.node:
        for m in [m for m in submodule_out if last.get(m) in n.output]:
            v, ref = values[last[m]], numpy_of(submodule_out[m])
            if v.shape == ref.shape and not close(v, ref)[0]:
                a, r = _compare(v, ref)
                return f"{last[m]!r} (module {m}, node {n.name}): max abs {a:.3g}, max rel {r:.3g}"
    return None
