"""The node graph of a canonical model (networkx)."""
import numpy as np

from irtrace.ir.semantics import nondifferentiable_inputs


def dag(specs):
    """A DiGraph of node names with an edge producer -> consumer for every value."""
    import networkx as nx  # here, not at the top: a replay (the CLI's every start) never builds the graph
    g = nx.DiGraph()
    made = {o: s.name for s in specs for o in s.outputs if o}
    for s in specs:
        g.add_node(s.name)
        for i in s.inputs:
            if i in made:
                g.add_edge(made[i], s.name)
    return g


FLOAT_TYPES = {1, 10, 11, 16}  # FLOAT, FLOAT16, DOUBLE, BFLOAT16


def gradient_sources(model, parameters=None):
    """What the model differentiates: its float graph inputs and `parameters` (None: every float
    initializer, for a bundle that did not record which initializers are parameters)."""
    inits = {t.name: t for t in model.graph.initializer}
    sources = {i.name for i in model.graph.input if i.name not in inits and i.type.tensor_type.elem_type in FLOAT_TYPES}
    if parameters is None:
        return sources | {n for n, t in inits.items() if t.data_type in FLOAT_TYPES}
    return sources | set(parameters)


def trained_sources(parameters, inputs, loss):
    """What a training step on the model differentiates: its parameters, and its float inputs too when
    the loss is a gradient penalty (which takes their gradient) or the model has no parameters (then its
    inputs are what is differentiated)."""
    return sorted(set(parameters) | (set(inputs) if loss == "grad-penalty" or not parameters else set()))


def gradient_path(model, sources):
    """Names of the values on a gradient path: the sources and every value computed from one of them
    through a differentiable input (nodes are in topological order in a canonical model). A gradient with respect to anything else
    — a gain, a filter tap, a folded exponent, a recorded mask — is one the model never takes."""
    on = set(sources)
    opsets = {o.domain: o.version for o in model.opset_import}
    for n in model.graph.node:
        # an input the schema marks NonDifferentiable (CastLike's target_type, Shape's data, Reshape's
        # shape, Where's condition) passes its type or shape on, never a derivative
        passive = nondifferentiable_inputs(n.op_type, n.domain, opsets.get(n.domain, opsets.get("", 1)), len(n.input))
        if any(i in on for k, i in enumerate(n.input) if i and k not in passive):
            on.update(o for o in n.output if o)
    return on


_SHAPE_ONLY = {"Shape", "Size"}  # read only their input's shape, never its values


def shape_arithmetic(model, state=()):
    """Names of the nodes that compute from shapes and constants only (no model data reaches them
    except through Shape/Size): the exporter's shape arithmetic (Shape → Gather → Concat → Reshape's
    target, Slice's INT64_MAX "to the end") and index tables built from sequence lengths (T5's
    relative-position buckets: Range, Sub, Abs, Log of a length ratio, Min, Where), which a port
    computes in Python or with whatever integer type its framework has, not as the model's data.
    Data: the graph's inputs, `state` (the model's parameters and buffers by name) and every float
    initializer of more than one element (weights, recorded random draws); int initializers and
    float scalars that are not state (the exporter's folded constants) are constants."""
    inits = {t.name: t for t in model.graph.initializer}
    data = {i.name for i in model.graph.input if i.name not in inits} | (set(state) & set(inits))
    data |= {n for n, t in inits.items() if t.data_type in FLOAT_TYPES and int(np.prod(t.dims)) != 1}
    out = set()
    for n in model.graph.node:
        if n.op_type in _SHAPE_ONLY and n.domain in ("", "ai.onnx"):
            out.add(n.name)
            continue
        if any(i in data for i in n.input if i):
            data.update(o for o in n.output if o)
        else:
            out.add(n.name)
    return out
