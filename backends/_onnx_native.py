"""Shared by backends that execute ONNX itself (onnxruntime, onnx.reference, the oracle): one
adapter, NativeAdapter, parameterised by the backend's Runner (which ops it has, how it builds and
runs a model); a one-node model per node, cached per signature (node proto + input dtypes and shapes)."""
import base64
from collections import OrderedDict

import numpy as np
import onnx
from onnx import helper

from backends._runtime.adapter import Adapter
from backends._runtime.wire import dtype_of, is_float
from backends._table import OpTable, Unsupported

IRTRACE_DOMAIN = "ai.irtrace"


def node_parts(spec, inputs, out_dtypes=None, cast=None, rename=None):
    """(node, graph inputs, feeds, graph outputs) of the node `spec` on inputs shaped like `inputs`;
    `rename(kind, position, name)` gives the value names used in the graph ("in"/"out"), for several
    nodes in one graph (each reads its own copy of its inputs and writes outputs no other reads)."""
    node = onnx.NodeProto()
    node.ParseFromString(base64.b64decode(spec.proto))
    name_of = rename or (lambda kind, k, name: name)
    g_inputs, feeds = [], {}
    for k, (name, a) in enumerate(zip(spec.inputs, inputs)):
        if not name:
            continue
        name = name_of("in", k, name)
        if name in feeds:
            continue
        a = np.asarray(a)
        if cast is not None and is_float(a.dtype):
            a = a.astype(cast)
        feeds[name] = a
        g_inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)))
    outs = []
    for i, name in enumerate(spec.outputs):
        if not name:
            continue
        name = name_of("out", i, name)
        dt = out_dtypes[i] if out_dtypes and out_dtypes[i] else None
        if dt is not None and cast is not None and is_float(dtype_of(dt)):
            dt = cast
        outs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(dtype_of(dt)), None)
                    if dt is not None else helper.make_empty_tensor_value_info(name))
    if rename is not None:
        node.input[:] = [name_of("in", k, n) if n else "" for k, n in enumerate(node.input)]
        node.output[:] = [name_of("out", k, n) if n else "" for k, n in enumerate(node.output)]
    return node, g_inputs, feeds, outs


def model_of(nodes, g_inputs, outs, spec, name):
    """A model of `nodes` at the opset of `spec` (and its domain's)."""
    opsets = [helper.make_opsetid("", spec.opset if not spec.domain else 20)]
    if spec.domain:
        opsets.append(helper.make_opsetid(spec.domain, spec.opset))
    model = helper.make_model(helper.make_graph(nodes, name, g_inputs, outs), opset_imports=opsets)
    model.ir_version = min(model.ir_version, 10)
    return model


def one_node_model(spec, inputs, out_dtypes=None, cast=None):
    """A model of the single node `spec` (with its NodeProto) on inputs shaped like `inputs`.
    `cast` maps a float input dtype to the dtype the model declares (the oracle's float64)."""
    node, g_inputs, feeds, outs = node_parts(spec, inputs, out_dtypes, cast)
    return model_of([node], g_inputs, outs, spec, spec.name or "node"), feeds


def signature(spec, inputs):
    return (spec.proto, tuple((None if a is None else (np.asarray(a).dtype.str, np.asarray(a).shape)) for a in inputs))


def native_table(backend, op_types, fn):
    """An op table whose entries all run `fn` (the runtime executes the ONNX node itself)."""
    table = OpTable(backend)
    for domain, op_type, since in sorted(set(op_types)):
        try:
            table.register(op_type, since=since, domain=domain)(fn)
        except RuntimeError:
            pass  # the runtime lists some kernels once per provider/type: one entry is enough
    return table


class Runner:
    """How one runtime executes ONNX models: what a native backend's folder declares. `ops()` are the
    (domain, op type, since) it has kernels for; `session(model, spec)` builds what runs `model` (a
    runtime that cannot, raises Unsupported); `run(session, names, feeds)` gives the outputs `names`.
    `cast`: the dtype float inputs are cast to (None: as recorded); `out_dtypes`: whether the model
    declares its outputs' dtypes; `batches`: whether a batch of nodes may run as one model; `own_ops`:
    whether its table holds irtrace's own ops (otherwise they are Unsupported)."""
    name = "?"
    script_framework = "onnx"
    cast = None
    out_dtypes = False
    batches = False
    own_ops = False

    def ops(self):
        raise NotImplementedError

    def versions(self):
        return {}

    def session(self, model, spec):
        raise NotImplementedError

    def run(self, session, names, feeds):
        raise NotImplementedError


_BIT_EXACT = {"BitCast"}
# Sessions kept per worker (the last used): a node's session is built once per signature and holds
# ~0.1 MB in onnxruntime, so a 10,000-node replay would keep a GB of sessions it never runs again (a
# replay asks each node a few times in a row, then never again).
SESSIONS = 256


class NativeAdapter(Adapter):
    """A backend that executes the ONNX node itself, forward only: a one-node model per node, built by
    its runner once per signature (node proto + input dtypes and shapes) and cached. Its repro scripts
    rebuild the node from its type and attributes by backends/_onnx_script.py (inlined verbatim)."""
    modes = ("fwd",)
    native = True  # executes the ONNX node itself: `--form original` gives it the original attributes

    def __init__(self, runner):
        self.runner = runner
        self.name = runner.name
        self.table = native_table(self.name, runner.ops(), self._run)
        self.cache = OrderedDict()  # signature -> session, the SESSIONS last used

    def versions(self):
        return self.runner.versions()

    def lookup(self, spec):
        """The runtime's own kernel list decides, except for ONNX function ops (e.g. CastLike),
        which runtimes expand into ops they do have."""
        if spec.domain == IRTRACE_DOMAIN:
            if self.runner.own_ops:
                return self.table.lookup(spec.domain, spec.op_type, spec.opset)
            raise Unsupported(f"{self.name} has no kernel for {spec.domain}::{spec.op_type} (irtrace's own op)")
        try:
            return self.table.lookup(spec.domain, spec.op_type, spec.opset)
        except Unsupported:
            try:
                schema = onnx.defs.get_schema(spec.op_type, spec.opset, spec.domain)
            except onnx.defs.SchemaError:
                raise Unsupported(f"{spec.op_type!r} is not an ONNX op (domain {spec.domain!r})") from None
            if schema.has_function or schema.has_context_dependent_function:
                return None
            raise

    def _run(self, *args, **kwargs):
        raise AssertionError(f"{self.name} executes the node itself")

    def session(self, spec, inputs):
        key = signature(spec, inputs)
        if key in self.cache:
            self.cache.move_to_end(key)
            return self.cache[key]
        out_dtypes = getattr(spec, "out_dtypes", None) if self.runner.out_dtypes else None
        model, _ = one_node_model(spec, inputs, out_dtypes, cast=self._cast(spec))
        self.cache[key] = session = self.runner.session(model, spec)
        while len(self.cache) > SESSIONS:
            self.cache.popitem(last=False)
        return session

    def _cast(self, spec):
        """The runner's cast, but for an op that reinterprets its input's bits (BitCast: a float64 copy
        of a float32 has other bits, and twice as many)."""
        return None if spec.op_type in _BIT_EXACT else self.runner.cast

    def fwd(self, entry, inputs, spec):
        sess = self.session(spec, inputs)
        cast = self._cast(spec)
        feeds = {}
        for n, a in zip(spec.inputs, inputs):
            if n:
                a = np.asarray(a)
                feeds[n] = a.astype(cast) if cast is not None and is_float(a.dtype) else a
        names = [o for o in spec.outputs if o]
        got = dict(zip(names, self.runner.run(sess, names, feeds)))
        return [got[o] if o else None for o in spec.outputs]

    def run_many(self, mode, items):
        """With a runner that `batches`: one model for the batch's plain ONNX nodes (those with a kernel
        here, no subgraph, the first node's opset), each reading its own recorded inputs and writing
        outputs no other node reads, so each still runs alone on the same kernel; the others, or all
        when the model cannot be built or run, one by one."""
        if not self.runner.batches:
            return {}
        from onnx import AttributeProto
        nodes, g_inputs, feeds, g_outputs, names, taken = [], [], {}, [], {}, []
        for k, (spec, inputs) in enumerate(items):
            if spec.domain or spec.opset != items[0][0].opset:
                continue
            try:
                self.lookup(spec)
            except Unsupported:
                continue
            node, gi, fd, go = node_parts(spec, inputs, spec.out_dtypes or None,
                                          rename=lambda kind, i, name, k=k: f"{kind}{k}.{i}")
            if any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in node.attribute):
                continue
            node.name = f"node{k}"
            nodes.append(node)
            g_inputs += gi
            feeds.update(fd)
            g_outputs += go
            names[k] = [f"out{k}.{i}" if o else None for i, o in enumerate(spec.outputs)]
            taken.append(k)
        if len(taken) < 2:
            return {}
        try:
            first = items[taken[0]][0]
            sess = self.runner.session(model_of(nodes, g_inputs, g_outputs, first, "batch"), first)
            wanted = [n for k in taken for n in names[k] if n]
            got = dict(zip(wanted, self.runner.run(sess, wanted, feeds)))
        except Exception:  # noqa: BLE001 - a kernel missing for these types, a node that raises: one by one
            return {}
        return {k: ([got[n] if n else None for n in names[k]], None) for k in taken}

    def script(self):
        """What a repro script needs to run the node without irtrace."""
        import inspect
        import platform

        from backends import _onnx_script
        return {"framework": self.runner.script_framework, "autodiff": inspect.getsource(_onnx_script),
                "python": platform.python_version(), "recipe": _onnx_script.RECIPES.get(self.name)}

    def op_block(self, spec):
        op = {"op_type": spec.op_type, "domain": spec.domain, "opset": spec.opset, "n_outputs": len(spec.outputs),
              "out_dtypes": list(spec.out_dtypes) or [""] * len(spec.outputs), "runtime": self.name}
        return f"op = {op!r}\n", []
