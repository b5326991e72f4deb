"""An ONNX model + inputs -> bundle: canonicalize, record with the torch op table, write.

Used for ONNX graphs that did not come from `irtrace export` of a torch module (the op-case
table of the tests, hand-built graphs)."""
import platform

import numpy as np
import onnx

from backends._runtime.wire import is_float
from irtrace import store
from irtrace.errors import IrtraceError
from irtrace.export.record import LOSSES, record
from irtrace.ir import canonical
from irtrace.ir.graph import gradient_sources, trained_sources
from irtrace.store.manifest import SCHEMA, InputSpec, Loss, Manifest, Source
from irtrace.version import __version__


def bundle_from_onnx(model, inputs, path, seed=0, loss="dot", name=None, bn_estimator="biased", force=False,
                     sources=None, trained=None):
    """`inputs`: graph input name -> array. `sources`: node name -> source dict for the manifest.
    `trained`: the graph inputs and initializers a training step on the model differentiates (None: its
    weights, and its float inputs too with a gradient-penalty loss or when it has no weights; a graph
    whose inputs stand for activations, as the op-case tables', names its inputs)."""
    store.check_destination(path, force)
    # the source's own float initializers are its weights; initializers that canonicalization makes
    # from Constant nodes are constants no gradient is taken of
    weights = [t.name for t in model.graph.initializer if t.data_type in (1, 10, 11, 16)]
    graph, original = canonical.canonicalize(model, bn_estimator=bn_estimator)
    inits = {t.name for t in graph.graph.initializer}
    names = [i.name for i in graph.graph.input if i.name not in inits]
    missing = [n for n in names if n not in inputs]
    if missing:
        raise IrtraceError(f"no value for graph input(s) {', '.join(missing)}")
    outputs = [o.name for o in graph.graph.output]
    values, specs, _ = record(graph, {n: np.asarray(inputs[n]) for n in names}, outputs, loss=loss, seed=seed,
                              sources=gradient_sources(graph, weights))
    canonical.set_value_info(graph, specs)
    canonical.check(graph)
    sources = sources or {}
    float_inputs = [n for n in names if is_float(np.asarray(inputs[n]).dtype)]
    manifest = Manifest(
        schema=SCHEMA, name=name or graph.graph.name,
        source=Source(framework="onnx", model=name or graph.graph.name),
        versions={"irtrace": __version__, "onnx": onnx.__version__, "numpy": np.__version__,
                  "python": platform.python_version(), "platform": platform.platform()},
        mode="eval", seed=seed, loss=Loss(kind=loss, definition=LOSSES[loss], outputs=outputs),
        inputs=[InputSpec(name=n, dtype=str(np.asarray(inputs[n]).dtype), shape=list(np.shape(inputs[n])))
                for n in names],
        outputs=outputs, state_outputs={}, parameters=weights, timings={},
        # the float inputs a named `trained` leaves out stand for buffers (an op case's running statistics)
        buffers=sorted(n for n in float_inputs if trained is not None and n not in trained),
        # named `trained` sources are all the graph differentiates (an op case's running statistics are
        # graph inputs that stand for buffers: no gradient penalty takes their gradient either)
        differentiable=sorted(gradient_sources(graph, weights)) if trained is None else sorted(trained),
        trained=sorted(trained) if trained is not None else trained_sources(weights, float_inputs, loss),
        nodes={n.name: {**sources.get(n.name, {}), **({"original_attrs": {
            k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in original[n.name].items()}}
            if n.name in original else {})} for n in graph.graph.node},
    )
    return store.write(path, graph, values, manifest, force=force)
