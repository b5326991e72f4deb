"""torch nn.Module -> bundle, through torch.onnx.export(dynamo=True, optimize=False).

optimize=True would fold BatchNorm and Pad into Conv and hide exactly the ops users need
compared. Two translations are our own because torchlib's are wrong for replay:
- `_native_batch_norm_legit_functional` (train-mode BN): torchlib emits
  BatchNormalization(training_mode=0), which normalises with the running stats. Ours emits
  training_mode=1 with the running-stat outputs; canonicalization then names torch's
  unbiased running-variance estimator (ai.irtrace::TrainBatchNormalization).
- `irtrace::dropout` (see dropout.py): the recorded mask, not a fresh draw.
translations.py has those of aten ops torch.onnx cannot export (stable sort, adaptive max pooling of
any size). What still does not export is refused in one line naming the aten op (_export_failure).
"""
import ast
import contextlib
import functools
import io
import logging
import os
import platform
import re
import time
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import onnx

from backends._runtime.wire import is_float
from irtrace import store
from irtrace.errors import IrtraceError, interrupt_in, strip_ansi
from irtrace.export import dropout as dropout_mod
from irtrace.export import random as random_mod
from irtrace.export import translations
from irtrace.export.outputs import flatten, is_container, numpy_of, register_dataclasses
from irtrace.export.record import LOSSES, record
from irtrace.export.torch_check import check_gradients, check_outputs
from irtrace.ir import canonical
from irtrace.ir.graph import gradient_sources, trained_sources
from irtrace.store.manifest import SCHEMA, InputSpec, Loss, Manifest, Source
from irtrace.version import __version__

log = logging.getLogger(__name__)
UPDATED = ":updated"   # suffix of a running stat's new value, e.g. layer1.0.bn1.running_var:updated


def _translations():
    import torch
    from onnxscript import values

    from irtrace.ir import schemas
    schemas.register_schemas()
    bn = values.Op(values.Opset("", 20), "BatchNormalization", onnx.defs.get_schema("BatchNormalization", 20, ""))
    recorded = values.Op(values.Opset(schemas.DOMAIN, schemas.VERSION), "RecordedDropout", schemas.schema("RecordedDropout"))

    def batch_norm_functional(input, weight, bias, running_mean, running_var, training: bool, momentum: float,
                              eps: float):
        weight = weight if weight is not None else translations.per_channel(input, 1.0, "batch_norm_scale")
        bias = bias if bias is not None else translations.per_channel(input, 0.0, "batch_norm_bias")
        # torch: new = (1 - m) * old + m * batch; ONNX's momentum is the keep fraction 1 - m
        y, rm, rv = bn(input, weight, bias, running_mean, running_var, epsilon=eps,
                                          momentum=1.0 - momentum, training_mode=1 if training else 0,
                                          _outputs=3)
        return y, rm, rv, rm, rv  # save_mean/save_rstd feed only torch's backward, which is not exported

    def dropout(x, mask, p: float):
        return recorded(x, mask, ratio=p)

    return {torch.ops.aten._native_batch_norm_legit_functional.default: batch_norm_functional,
            torch.ops.irtrace.dropout.default: dropout, **translations.table()}


# torch's own package folder (not site-packages: a frame in torchvision, timm or transformers is the
# model's code, the one a finding should point at)
_TORCH_DIR = os.path.dirname(os.path.abspath(__import__("torch").__file__)) + os.sep


def _short(path):
    """A frame's file as a reader can find it: relative to the innermost sys.path entry or working
    folder that holds it (site-packages/torchvision/... -> torchvision/...; no absolute paths)."""
    import sys
    path = os.path.abspath(path)
    roots = sorted({os.path.abspath(p) for p in sys.path if p} | {os.getcwd()}, key=len, reverse=True)
    for root in roots:
        if path.startswith(root.rstrip(os.sep) + os.sep):
            return os.path.relpath(path, root)
    return path


def _source(node):
    """{module, class, fx_op, fx_node, file_line} from the exporter's metadata on `node`."""
    md = {p.key: p.value for p in node.metadata_props}
    src = {}
    scopes = md.get("pkg.torch.onnx.name_scopes")
    if scopes:
        try:
            parts = [p for p in ast.literal_eval(scopes) if p]
        except (ValueError, SyntaxError):
            parts = []
        src["module"] = _module_path(parts[:-1])
        src["fx_node"] = parts[-1] if parts else ""
    hier = md.get("pkg.torch.onnx.class_hierarchy")
    if hier:
        try:
            classes = ast.literal_eval(hier)
            src["class"] = classes[-2] if len(classes) > 1 else classes[-1]
        except (ValueError, SyntaxError):
            pass
    fx = md.get("pkg.torch.onnx.fx_node", "")
    m = re.search(r"target=torch\.ops\.([\w.]+)", fx) or re.search(r"target=([\w.<>]+)", fx)
    if m:
        src["fx_op"] = m.group(1)
    trace = md.get("pkg.torch.onnx.stack_trace", "")
    frames = re.findall(r'File "([^"]+)", line (\d+)', trace)
    user = [f for f in frames if not os.path.abspath(f[0]).startswith(_TORCH_DIR)]
    if user:
        src["file_line"] = f"{_short(user[-1][0])}:{user[-1][1]}"
    return src


# torch.onnx's metadata on a node irtrace reads (_source); the rest (e.g. pkg.torch.onnx.stack_trace's
# torch-internal frames) is dropped: it would be most of a graph.onnx's bytes (StyleGAN2's: 268 KB of 340 KB)
_READ_METADATA = ("pkg.torch.onnx.name_scopes", "pkg.torch.onnx.class_hierarchy", "pkg.torch.onnx.fx_node")
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)')


def _trim_metadata(node):
    """Keep on `node` only the metadata _source reads: the name scopes, the last two classes of the class
    hierarchy, the fx node's target and, of the stack trace, the last user-code frame (where file:line comes from). _source gives the same
    answer before and after (tests/test_export_metadata.py); the manifest holds that answer."""
    md = [(p.key, p.value) for p in node.metadata_props]
    kept = []
    for key, value in md:
        if key == "pkg.torch.onnx.class_hierarchy":  # _source reads the last two classes
            try:
                kept.append((key, repr(list(ast.literal_eval(value))[-2:])))
            except (ValueError, SyntaxError, TypeError):
                kept.append((key, value))
        elif key == "pkg.torch.onnx.fx_node":  # _source reads its target
            m = re.search(r"target=torch\.ops\.([\w.]+)", value) or re.search(r"target=([\w.<>]+)", value)
            if m:
                kept.append((key, m.group(0)))
        elif key in _READ_METADATA:
            kept.append((key, value))
        elif key == "pkg.torch.onnx.stack_trace":
            lines = value.splitlines()
            starts = [i for i, line in enumerate(lines) if (m := _FRAME.match(line))
                      and not os.path.abspath(m.group(1)).startswith(_TORCH_DIR)]
            if starts:
                i = starts[-1]
                end = next((j for j in range(i + 1, len(lines)) if _FRAME.match(lines[j])), len(lines))
                kept.append((key, "\n".join(lines[i:end])))
    del node.metadata_props[:]
    for key, value in kept:
        node.metadata_props.add(key=key, value=value)


def _module_path(scopes):
    """The exporter's scopes are either nested names ('block2', 'layer', '0') or qualified
    prefixes ('block2', 'block2.layer'); both give 'block2.layer.0'."""
    path = []
    for s in scopes:
        if path and s.startswith(".".join(path) + "."):
            path = s.split(".")
        else:
            path.append(s)
    return ".".join(path)


@contextlib.contextmanager
def _quiet():
    """torch.onnx prints progress and warnings; keep them off the user's terminal unless debugging."""
    if log.isEnabledFor(logging.DEBUG):
        yield
        return
    out = io.StringIO()
    tl = logging.getLogger("torch")
    level = tl.level
    tl.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            warnings.simplefilter("ignore")
            yield
    finally:
        tl.setLevel(level)


def _module_outputs(model, inputs, masks, draws):
    """Eager reference run: outputs and the state after the run (for train mode: updated running stats).
    The submodules' outputs are not kept: only a failing export check names the first that differs, and it
    runs the module again for them (torch_check.submodule_outputs)."""
    import torch
    with torch.no_grad(), dropout_mod.patched(masks, record=True), random_mod.recorded(draws, record=True):
        out = model(*inputs)
    flat = flatten(out)
    register_dataclasses(out)
    names = [p for p, _ in flat] if is_container(out) else None
    # the state after the run, for its running statistics: the parameters a forward does not change are
    # not copied (a copy would hold the weights once more)
    params = {k for k, _ in model.named_parameters()}
    return ([t.detach().clone() for _, t in flat],
            {k: v.detach().clone() for k, v in model.state_dict().items() if k not in params}, names)


_NO_TRANSLATION = re.compile(r"No ONNX function found for <OpOverload\(op='([\w.]+)', overload='(\w+)'\)>")
_TRANSLATING = re.compile(r"Error when translating node %(\w+) : .*?target=(?:torch\.ops\.)?([\w.]+)")


def _export_failure(e):
    """Why torch.onnx.export failed, in one line. Its own message is a checklist ("step 3/3 ... Next
    steps:") with the cause further down the exception chain: an aten op without an ONNX translation,
    or the innermost error and the aten op being translated when it was raised."""
    chain, c = [], e
    while c is not None and not any(c is x for x in chain):
        chain.append(c)
        c = c.__cause__ or c.__context__
    text = strip_ansi("\n".join(str(x) for x in chain))
    m = _NO_TRANSLATION.search(text)
    if m:
        return (f"torch.onnx has no ONNX translation of {m.group(1)}.{m.group(2)}; compute it in the model with ops "
                f"torch.onnx exports, or add a translation to irtrace/export/translations.py")
    inner = chain[-1]
    lines = [line.strip() for line in strip_ansi(inner).splitlines() if line.strip()]
    node = _TRANSLATING.search(text)
    where = f" (translating {node.group(2)}, FX node %{node.group(1)})" if node else ""
    return f"{type(inner).__name__}{where}: {lines[0] if lines else 'no message'}"


def _node_text(name, op_type, src):
    """"node 'n3' (Atan, made by torch.onnx from aten.atan2.default at model.py:12)" from a node's source."""
    made = f", made by torch.onnx from {src['fx_op']}" if src.get("fx_op") else ""
    at = f" at {src['file_line']}" if src.get("fx_op") and src.get("file_line") else ""
    return f"node {name!r} ({op_type}{made}{at})"


def _refuse_control_flow(raw, sources):
    """If/Loop/Scan (torch.onnx's translation of e.g. EmbeddingBag) carry subgraphs; the IR is a
    straight-line graph of tensors: refused in one line, naming the aten op."""
    for n in raw.graph.node:
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute):
            raise IrtraceError(f"{_node_text(n.name, n.op_type, sources.get(n.name, {}))} is control flow with a "
                               f"subgraph, which irtrace's straight-line IR cannot hold: compute that part of the "
                               f"model without it (e.g. nn.Embedding and a reduction instead of nn.EmbeddingBag)")


def _check_reference_ops(graph, sources):
    """Every node must have a torch op-table entry (torch replays the graph to record the bundle): a
    missing one is refused in one line, naming the node, the aten op torch.onnx made it from and where."""
    from backends._table import Unsupported
    from backends.torch.ops import OPS
    from irtrace.ir.spec import node_specs
    for spec in node_specs(graph):
        try:
            OPS.lookup(spec.domain, spec.op_type, spec.opset)
        except Unsupported as e:
            raise IrtraceError(f"{_node_text(spec.name, spec.op_type, sources.get(spec.name, {}))}: {e}; irtrace's "
                               f"torch backend replays every node to record the bundle: compute that part of the "
                               f"model with other ops, or add {spec.op_type} to backends/torch/ops/") from None


@dataclass(frozen=True)
class ExportOptions:
    """How a torch model is exported: train=False eval mode (True: training mode, BatchNorm with batch
    statistics and running-stat updates, dropout with recorded masks); seed: torch's, the masks' and the
    cotangents' seed; loss: "dot" (random output cotangents) or "sum" (ones); force: replace an existing
    bundle; input_names: the graph inputs' names; model_name: the manifest's name for the model."""
    train: bool = False
    seed: int = 0
    loss: str = "dot"
    force: bool = False
    input_names: tuple = None
    model_name: str = None


def export(model, example_inputs, path, train=False, seed=0, loss=None, force=False, input_names=None,
           model_name=None):
    """Export `model` (torch.nn.Module) on `example_inputs` (tuple of tensors) to a bundle at `path`
    (the arguments after `path`: ExportOptions). Returns the opened Bundle.

    Four steps: the module runs on the inputs (its outputs, the random draws and dropout masks it
    makes); torch.onnx exports it, replaying those draws; the graph is made canonical and named; the
    values are recorded and written while the graph is checked against the module."""
    import torch
    if not isinstance(model, torch.nn.Module):
        raise IrtraceError(f"expected a torch.nn.Module, got {type(model).__name__}")
    options = ExportOptions(bool(train), seed, loss or "dot", force, input_names, model_name)
    if options.loss not in LOSSES:
        raise IrtraceError(f"unknown loss {options.loss!r}; choose one of {', '.join(LOSSES)}")
    store.check_destination(path, force)  # refused before the export's work, not after it
    _check_memory(model)
    run = _run(model, example_inputs, options)
    raw = _onnx_program(model, run, options)
    _padding_rows(raw, run.weights)
    _drop_zero_conv_bias(raw)
    traced = _canonical(raw, run)
    del raw  # torch.onnx's graph: the canonical graph is a copy of it
    return _write(model, path, run, traced, options)


# Beyond the module itself, an export needs at most about this many times its parameters: the module's
# float64 twin where float32 does not confirm a parameter's gradient (twice the parameters), and the
# gradients the recording and its check make, which pass through memory as they are made (written to
# the value store, compared, let go). Measured (benchmarks/scale.py's Llama, 16 tokens, no twin needed):
# 0.9 GB above the built module's resident memory at 0.70, 1.05 and 4.40 GB of parameters (1, 3 and 22
# layers: the largest weights' gradients in flight), i.e. 1.3x to 0.2x. The ONNX graphs refer to the
# module's weights instead of copying them, and no recorded value is held: it is in the value store.
EXPORT_HOLDS = 3


def _check_memory(model):
    """An IrtraceError, before any work, when the module's parameters alone make the export need more
    memory than this machine has available (it would be killed by the kernel midway)."""
    from irtrace.envs.machine import available_bytes, size_text
    tensors = {t.data_ptr(): (name, t) for name, t in [*model.named_parameters(), *model.named_buffers()]}
    nbytes = sum(t.numel() * t.element_size() for _, t in tensors.values())
    available = available_bytes()
    need = EXPORT_HOLDS * nbytes  # beyond what the process holds already (torch, the module)
    if available is None or need <= available or not tensors:
        return
    name, t = max(tensors.values(), key=lambda nt: nt[1].numel() * nt[1].element_size())
    raise IrtraceError(
        f"exporting {type(model).__name__} needs about {size_text(need)} of memory and {size_text(available)} is "
        f"available: its parameters and buffers ({size_text(nbytes)}; the largest {name}, "
        f"{'x'.join(map(str, t.shape))} {str(t.dtype).removeprefix('torch.')}, {size_text(t.numel() * t.element_size())}) "
        f"need about {EXPORT_HOLDS} times that again (a float64 copy of the module where float32 does not confirm a "
        f"gradient, the gradients the recording and its check make); export a part of the model, or on a machine "
        f"with more memory")


@dataclass
class _Run:
    """The module run on the example inputs: what the export replays and checks against."""
    inputs: tuple
    given: list          # the inputs as given (a module may update a tensor it is passed in place)
    state: dict          # the state dict before the run
    params: set
    masks: list          # dropout masks, in order
    draws: list          # random draws, in order
    ref_out: object
    state_after: dict
    out_names: list
    t0: float
    t_export: float = 0.0
    weights: dict = field(default_factory=dict)  # initializer -> the parameter it refers to (_refer_to_weights)


def _run(model, example_inputs, options):
    import torch
    inputs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    # the inputs as given: a module may update a tensor it is passed in place (F.batch_norm on running
    # stats passed as arguments), and the bundle records the graph from the values before the run
    given = [t.detach().clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    t0 = time.perf_counter()
    model.train(options.train)
    params = {k for k, _ in model.named_parameters()}
    # the buffers as before the run (a forward updates running statistics in place); the parameters as
    # they are, not copied (a forward does not change them; a copy would hold the weights once more)
    current = model.state_dict()
    state = OrderedDict((k, v.detach() if k in params else v.detach().clone()) for k, v in current.items())
    # with the modules' versions, which a module's own loading may require (torchvision's MNASNet raises
    # without its version 2)
    state._metadata = getattr(current, "_metadata", None)
    torch.manual_seed(options.seed)
    masks, draws = [], []
    try:
        ref_out, state_after, out_names = _module_outputs(model, inputs, masks, draws)
    except IrtraceError:
        raise
    except Exception as e:
        raise IrtraceError(f"the model raised on the example inputs: {type(e).__name__}: {strip_ansi(e)}") from e
    model.load_state_dict(state)
    return _Run(inputs, given, state, params, masks, draws, ref_out, state_after, out_names, t0)


def _torch_onnx_export(model, inputs, input_names):
    """torch.onnx.export(model, inputs, dynamo=True, optimize=False, input_names=..., custom_translation_table=
    irtrace's translations), with torch.onnx's registry of translations built once per process: torch.onnx.export
    builds it from torchlib on every call (0.76-0.84 s here, a fifth of a ResNet-50 export), and the pytest
    plugin, `irtrace demo` and a library user export many models in one process. It is the call
    torch.onnx.export makes (torch/onnx/_internal/exporter/_compat.py), with the registry it would build;
    torch.onnx.export itself where that exporter core takes no registry (another torch)."""
    import torch
    core = _exporter_core()
    if core is None:
        return torch.onnx.export(model, inputs, dynamo=True, optimize=False, input_names=input_names,
                                 custom_translation_table=_translations())
    from torch.onnx import _constants
    args, kwargs = (inputs, None) if not inputs or not isinstance(inputs[-1], dict) else (inputs[:-1], inputs[-1])
    return core.export(model, args, kwargs, registry=_registry(), input_names=input_names, optimize=False,
                       opset_version=_constants.ONNX_DEFAULT_OPSET)


def _exporter_core():
    """torch.onnx's exporter core when its export takes a registry (torch 2.6 and later), else None."""
    import inspect
    try:
        from torch.onnx._internal.exporter import _core
    except ImportError:
        return None
    return _core if "registry" in inspect.signature(_core.export).parameters else None


@functools.lru_cache(maxsize=1)
def _registry():
    """torch.onnx's registry as torch.onnx.export builds it for ONNX_DEFAULT_OPSET, with irtrace's translations
    (what they register depends on nothing but the code: the same every export)."""
    from torch.onnx import _constants as onnx_constants
    from torch.onnx._internal.exporter import _constants, _registration
    registry = _registration.ONNXRegistry.from_torchlib(opset_version=max(onnx_constants.ONNX_DEFAULT_OPSET,
                                                                          _constants.TORCHLIB_OPSET))
    for torch_op, onnx_op in _translations().items():
        registry.register_op(torch_op, onnx_op, is_complex=False)
    return registry


def _onnx_program(model, run, options):
    """torch.onnx's ModelProto of the module, which sees the run's dropout masks and random draws again."""
    import torch
    # the recorder hands the reference run's draws back in order; a model that drew nothing runs without
    # it (it would cost every traced op a Python call) and its graph is checked for draws instead
    replaying = random_mod.recorded(run.draws, record=False) if run.draws else contextlib.nullcontext()
    try:
        with _quiet(), dropout_mod.patched(run.masks, record=False), replaying as rec:
            program = _torch_onnx_export(model, run.inputs, options.input_names)
        if run.draws:
            random_mod.check_all_used(run.draws, rec)
    except IrtraceError:
        raise
    except Exception as e:
        # torch.export wraps a Ctrl-C in its own error: an interrupt stays one (the CLI exits 130)
        if interrupt_in(e) is not None:
            raise interrupt_in(e) from None
        raise IrtraceError(f"torch.onnx.export could not export {type(model).__name__}: {_export_failure(e)}") from e
    finally:
        model.load_state_dict(run.state)
    run.t_export = time.perf_counter() - run.t0
    _refer_to_weights(program.model, run)
    raw = program.model_proto
    if not run.draws:
        random_mod.check_no_draws(raw)
    return raw


def _refer_to_weights(ir_model, run):
    """The initializers of torch.onnx's graph that are the module's parameters become references to
    external data (values.safetensors, where the bundle stores them once): the ONNX graph does not copy
    the weights (its ModelProto would hold them once more, and its canonical copy again), and everything
    that reads them takes the module's own tensors (`run.weights`). Each is the parameter of its name: its
    own memory (torch.onnx wraps the module's tensors), or else equal to it bit for bit; one that is neither
    keeps its data."""
    import onnx_ir as ir
    for name, value in ir_model.graph.initializers.items():
        param, tensor = run.state.get(name), value.const_value
        if name not in run.params or param is None or tensor is None or not param.dtype.is_floating_point:
            continue
        if _same_tensor(getattr(tensor, "raw", None), param) or _equal_bits(tensor, param):
            value.const_value = ir.ExternalTensor(store.VALUES, 0, tensor.nbytes, tensor.dtype, shape=tensor.shape,
                                                  name=name)
            run.weights[name] = param


def _same_tensor(raw, param):
    """Whether torch tensor `raw` is `param` itself: the same memory, dtype, shape and strides."""
    import torch
    return isinstance(raw, torch.Tensor) and raw.data_ptr() == param.data_ptr() and raw.dtype == param.dtype \
        and raw.shape == param.shape and raw.stride() == param.stride()


def _equal_bits(tensor, param):
    """Whether the ONNX IR `tensor` holds `param`'s values bit for bit (its dtype, shape and bytes)."""
    from onnx import helper
    try:
        b = param.numpy()
        return helper.tensor_dtype_to_np_dtype(tensor.dtype.value) == b.dtype and store.same_bits(tensor.numpy(), b)
    except (TypeError, ValueError, RuntimeError):  # bfloat16 and types numpy cannot hold: kept as they are
        return False


@dataclass
class _Traced:
    """The canonical graph and what is known of its nodes."""
    graph: object
    original_attrs: dict
    sources: dict          # node name -> its module path, file and line
    n_returned: int        # the module's outputs (a running stat it returns among them)
    state_outputs: dict


def _canonical(raw, run):
    """torch.onnx's graph, canonical (docs/bundle.md), its nodes, dropout masks, draws and outputs named."""
    sources = {n.name: _source(n) for n in raw.graph.node}
    _refuse_control_flow(raw, sources)
    for n in raw.graph.node:
        _trim_metadata(n)
    _name_dropout_masks(raw, sources)
    random_mod.name_draws(raw, run.draws, sources)
    _name_outputs(raw, run.out_names)
    graph, original_attrs = canonical.canonicalize(raw, bn_estimator="unbiased")
    n_returned = len(graph.graph.output)
    state_outputs = _expose_running_stats(graph)
    sources = {n.name: sources.get(n.name, {}) for n in graph.graph.node}
    _check_reference_ops(graph, sources)
    return _Traced(graph, original_attrs, sources, n_returned, state_outputs)


def _write(model, path, run, traced, options):
    """Record every value of the graph on the example inputs straight into the bundle's value store, then
    check the graph's outputs and parameter gradients against the module's (store.write_streamed)."""
    graph, state_outputs = traced.graph, traced.state_outputs
    graph_inputs = [i.name for i in graph.graph.input]
    if len(graph_inputs) != len(run.inputs):
        raise IrtraceError(f"the exported graph has {len(graph_inputs)} inputs {graph_inputs} for {len(run.inputs)} "
                           f"example inputs")
    feeds = {}
    for name, t, before in zip(graph_inputs, run.inputs, run.given):
        feeds[name] = numpy_of(before)
        if name in state_outputs:  # a running stat passed as an argument: the module updated it in place
            run.state_after[name] = t.detach().clone()
    outputs = [o.name for o in graph.graph.output[:traced.n_returned]]
    # running stats passed as arguments (updated in place) are buffers, not inputs a training step or a
    # gradient penalty differentiates
    differentiable = gradient_sources(graph, [t.name for t in graph.graph.initializer if t.name in run.params]) - \
        {n for n in graph_inputs if n in state_outputs}
    specs = {}

    def write_values(file):  # every value, gradient and direction, straight into the bundle's value store
        opened = []

        def into(made):
            specs.update(made)
            opened.append(store.ValueWriter(file, made, {"schema": SCHEMA}))
            return opened[-1]
        try:
            record(graph, feeds, outputs, loss=options.loss, seed=options.seed, sources=differentiable,
                   weights=run.weights, into=into)
        finally:
            for writer in opened:
                writer.close()
    facts = _Facts(name=options.model_name or type(model).__name__,
                   model=options.model_name or type(model).__qualname__, train=options.train, seed=options.seed,
                   loss=options.loss, outputs=outputs, feeds=feeds, graph_inputs=graph_inputs,
                   state_outputs=state_outputs, params=run.params, state=run.state, differentiable=differentiable,
                   t_export=run.t_export, sources=traced.sources, original_attrs=traced.original_attrs)

    def finish(values):  # (graph, manifest): the export check (outputs, then parameter gradients), value info, IR check
        checked = check_outputs(graph, values, outputs, run, traced.sources, state_outputs, model)
        try:  # after the forward's check: a graph whose outputs differ is named for that first
            if checked:
                check_gradients(model, run.given, run.masks, run.draws, values, outputs, options.loss, graph,
                                graph_inputs)
        finally:
            model.load_state_dict(run.state)
        canonical.set_value_info(graph, specs)
        canonical.check(graph, folder=values.path.parent)
        return graph, _manifest(graph, facts)
    return store.write_streamed(path, write_values, finish, force=options.force)


@dataclass(frozen=True)
class _Facts:
    """What an export knows about the model that its manifest says (docs/bundle.md)."""
    name: str
    model: str
    train: bool
    seed: int
    loss: str
    outputs: list
    feeds: dict
    graph_inputs: list
    state_outputs: dict
    params: object
    state: dict
    differentiable: set
    t_export: float
    sources: dict
    original_attrs: dict


def _manifest(graph, f):
    """The manifest of an export: `f` (_Facts) on the canonical `graph`. Running stats passed as arguments
    (graph inputs the module updates in place) are buffers, neither trained nor penalised."""
    weights = [t.name for t in graph.graph.initializer if t.name in f.params]
    stat_inputs = [n for n in f.graph_inputs if n in f.state_outputs]
    return Manifest(
        schema=SCHEMA,
        name=f.name,
        source=Source(framework="torch", model=f.model),
        versions=_versions(),
        mode="train" if f.train else "eval",
        seed=f.seed,
        loss=Loss(kind=f.loss, definition=LOSSES[f.loss], outputs=f.outputs),
        inputs=[InputSpec(name=n, dtype=str(f.feeds[n].dtype), shape=list(f.feeds[n].shape)) for n in f.graph_inputs],
        outputs=f.outputs,
        state_outputs=f.state_outputs,
        parameters=weights,
        buffers=[t.name for t in graph.graph.initializer if t.name in f.state and t.name not in f.params] + stat_inputs,
        differentiable=sorted(f.differentiable),
        trained=trained_sources(weights, [n for n in f.graph_inputs
                                          if is_float(f.feeds[n].dtype) and n not in stat_inputs], f.loss),
        timings={"torch_onnx_export_s": round(f.t_export, 3)},
        nodes={n.name: {**f.sources.get(n.name, {}), **({"original_attrs": _jsonable(f.original_attrs[n.name])}
                                                        if n.name in f.original_attrs else {})}
               for n in graph.graph.node},
    )


def _jsonable(attrs):
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in attrs.items()}


def _versions():
    import onnxscript
    import torch
    return {"irtrace": __version__, "torch": torch.__version__, "onnx": onnx.__version__,
            "onnxscript": onnxscript.__version__, "numpy": np.__version__,
            "python": platform.python_version(), "platform": platform.platform()}


def _name_outputs(model, names):
    """A container's tensors become graph outputs named by their path in it (`logits`,
    `past_key_values.layers.0.keys`), where the graph's outputs map one to one onto them."""
    if not names:
        return
    outs = [o.name for o in model.graph.output]
    taken = {i.name for i in model.graph.input} | {t.name for t in model.graph.initializer}
    produced = {v for n in model.graph.node for v in n.output}
    if len(outs) != len(names) or len(set(outs)) != len(outs) or len(set(names)) != len(names) \
            or any(o in taken or o not in produced for o in outs):
        return
    existing = produced | taken
    for old, new in zip(outs, names):
        if old != new and new not in existing:
            canonical.rename_value(model, old, new)


def _padding_rows(raw, weights):
    """An embedding with a padding_idx p (nn.Embedding's or F.embedding's): torch's backward gives row p of
    the weight no gradient, and torch.onnx drops padding_idx (ONNX's Gather has none), so the graph would
    train that row where the module does not. Each such Gather (its aten.embedding call, with p, is in the
    node's metadata) becomes Where(indices == p, row p as a constant, Gather(...)): the same values, and
    the positions holding p send their gradient to the constant, not to the weight. A weight that is not
    an initializer is left as it is: the export's gradient check then names it."""
    from onnx import helper, numpy_helper
    inits = {t.name: t for t in raw.graph.initializer}
    nodes = list(raw.graph.node)
    for k in reversed(range(len(nodes))):
        n = nodes[k]
        p = _padding_idx(n)
        if p is None or n.input[0] not in inits:
            continue
        row = np.array(store.initializer_array(inits[n.input[0]], weights)[p])
        base, out = n.name, n.output[0]
        gathered = f"{out}__gathered"
        n.output[0] = gathered
        extra = [helper.make_node("Constant", [], [f"{base}__padding_idx"], name=f"{base}__padding_idx",
                                  value=numpy_helper.from_array(np.array(p, np.int64))),
                 helper.make_node("Equal", [n.input[1], f"{base}__padding_idx"], [f"{base}__is_padding"],
                                  name=f"{base}__is_padding"),
                 helper.make_node("Constant", [], [f"{base}__last_axis"], name=f"{base}__last_axis",
                                  value=numpy_helper.from_array(np.array([-1], np.int64))),
                 helper.make_node("Unsqueeze", [f"{base}__is_padding", f"{base}__last_axis"],
                                  [f"{base}__is_padding_row"], name=f"{base}__is_padding_row"),
                 helper.make_node("Constant", [], [f"{base}__padding_row"], name=f"{base}__padding_row",
                                  value=numpy_helper.from_array(row)),
                 helper.make_node("Where", [f"{base}__is_padding_row", f"{base}__padding_row", gathered], [out],
                                  name=f"{base}__padding")]
        for e in extra:
            e.metadata_props.extend(n.metadata_props)  # the embedding module's source, for the report
        for j, e in enumerate(extra):
            raw.graph.node.insert(k + 1 + j, e)


def _drop_zero_conv_bias(raw):
    """torch.onnx (torch 2.13) gives a Conv3d without bias a bias of zeros expanded to (out_channels, 2), not the
    1-D bias ONNX defines: onnxruntime refuses the node ("bias must be a 1D tensor of size output_channels") and
    torch's conv3d raises on it, so no such model could be recorded (torchvision's r3d_18). A bias that is the
    expansion of a constant 0 adds nothing, whatever its shape: where it is expanded to more than one axis (a
    Concat of shapes), the Conv (or ConvTranspose) drops it, as the module has none, and the nodes that made it,
    read by nothing else, go with it. A 1-D zero bias (what 1-D and 2-D convs get) is ONNX's and stays."""
    from onnx import numpy_helper
    g = raw.graph
    made = {o: n for n in g.node for o in n.output}

    def zero(name):  # a Constant of zeros, or a CastLike of one
        n = made.get(name)
        if n is not None and n.op_type == "CastLike":
            return zero(n.input[0])
        if n is None or n.op_type != "Constant" or [a.name for a in n.attribute] != ["value"]:
            return False
        return not np.any(numpy_helper.to_array(n.attribute[0].t))
    chain = []
    for n in g.node:
        bias = made.get(n.input[2]) if n.op_type in ("Conv", "ConvTranspose") and len(n.input) == 3 else None
        shape = made.get(bias.input[1]) if bias is not None and bias.op_type == "Expand" else None
        if shape is not None and shape.op_type == "Concat" and len(shape.input) > 1 and zero(bias.input[0]):
            del n.input[2]
            chain.append(bias)
    while chain:  # what made a dropped bias, once nothing reads it (a node is known by its first output)
        read = {i for n in g.node for i in n.input} | {o.name for o in g.output}
        first = chain.pop().output[0]
        at = next((k for k, m in enumerate(g.node) if m.output and m.output[0] == first), None)
        if at is not None and not read.intersection(g.node[at].output):
            chain += [made[i] for i in g.node[at].input if i in made]
            del g.node[at]


_EMBEDDING = re.compile(r"target=torch\.ops\.aten\.embedding\.default\]\(args = \(%\w+, %\w+, (-?\d+)")


def _padding_idx(node):
    """The padding_idx of the aten.embedding call a Gather node was made from (F.embedding passes it
    non-negative; aten's -1 is none), or None."""
    if node.op_type != "Gather" or node.domain not in ("", "ai.onnx"):
        return None
    for prop in node.metadata_props:
        if prop.key == "pkg.torch.onnx.fx_node":
            m = _EMBEDDING.search(prop.value)
            return int(m.group(1)) if m and int(m.group(1)) >= 0 else None
    return None


def _name_dropout_masks(model, sources):
    """The lifted mask constants become `<module path>.dropout_mask` initializers."""
    used = {t.name for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "RecordedDropout" and n.domain == "ai.irtrace":
            module = sources.get(n.name, {}).get("module") or "model"
            name, k = f"{module}.dropout_mask", 1
            while name in used:
                k += 1
                name = f"{module}.dropout_mask_{k}"
            used.add(name)
            canonical.rename_value(model, n.input[1], name)


def _expose_running_stats(graph):
    """Name the running-stat outputs of train-mode BN after their state_dict keys and make
    them graph outputs. Returns state_dict key -> value name."""
    from onnx import helper
    out = {}
    for n in graph.graph.node:
        if n.op_type == "TrainBatchNormalization" and n.domain == "ai.irtrace":
            for i, key in ((1, n.input[3]), (2, n.input[4])):
                new = key + UPDATED
                canonical.rename_value(graph, n.output[i], new)
                out[key] = new
                if new not in {o.name for o in graph.graph.output}:
                    graph.graph.output.append(helper.make_empty_tensor_value_info(new))
    return out


