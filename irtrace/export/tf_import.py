"""`irtrace export --from tensorflow SOURCE`: tf2onnx inside irtrace's TensorFlow environment,
then the ONNX import; the export check compares TensorFlow's own outputs with the IR's.
Node sources keep the TF layer names; the NHWC<->NCHW Transposes tf2onnx inserts stay in the
IR (they are real ops) but are marked layout-only."""
import json
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from irtrace import envs, store
from irtrace.store import manifest as manifest_schema
from irtrace.compare import close
from irtrace.errors import IrtraceError
from irtrace.export.onnx_import import export_onnx
from irtrace.export.inputs import make_inputs

CONVERTER = Path(__file__).resolve().parent / "tf_convert.py"  # run in the TensorFlow env, not imported
LAYOUT_PERMS = ([0, 3, 1, 2], [0, 2, 3, 1], [0, 4, 1, 2, 3], [0, 2, 3, 4, 1])


def _layer(node_name, layers):
    """'functional_1/conv1_1/convolution' -> 'conv1' when the model has a layer named so (or, for a
    SavedModel, whose layer list is unknown, the component after Keras' 'functional_N')."""
    parts = node_name.split("/")
    for part in parts[1:] if len(parts) > 1 else parts:
        base = re.sub(r"_\d+$", "", part)
        if base in layers or part in layers:
            return base if base in layers else part
    for k, part in enumerate(parts[:-1]):
        if re.fullmatch(r"functional(_\d+)?", part) and k + 1 < len(parts) - 1:
            return re.sub(r"_\d+$", "", parts[k + 1])
    return node_name.rsplit("/", 1)[0] if "/" in node_name else ""


def export_tf(source, out, specs=(), arrays=None, seed=0, loss="dot", force=False):
    store.check_destination(out, force)
    python = envs.get("tensorflow").python()
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        if arrays is None:
            if not specs:
                raise IrtraceError(f"{source}: pass --input NAME=DIMxDIM...[:DTYPE] (NHWC for TensorFlow) or --input-file")
            arrays = make_inputs(specs, seed)
        np.savez(d / "in.npz", **arrays)
        r = subprocess.run([python, str(CONVERTER), str(source), str(d / "conv"), str(d / "in.npz")],
                           capture_output=True, text=True, env={**__import__("os").environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
        if r.returncode != 0:
            last = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
            raise IrtraceError(last[-1] if r.returncode == 3 and last else
                               f"the TensorFlow converter failed (exit {r.returncode}): {last[-1] if last else ''}")
        meta = json.loads((d / "conv" / "meta.json").read_text())
        with np.load(d / "conv" / "inputs.npz") as z:
            feeds = {k: z[k] for k in z.files}
        with np.load(d / "conv" / "tf_outputs.npz") as z:
            tf_out = [z[f"output{i}"] for i in range(len(z.files))]
        try:
            bundle = export_onnx(d / "conv" / "model.onnx", out, arrays=feeds, seed=seed, loss=loss, force=force)
        except IrtraceError as e:
            text = str(e).replace(str(d / "conv" / "model.onnx") + ": ", "")
            if "onnx.checker" in text:  # tf2onnx left TensorFlow ops it could not convert in the graph
                raise IrtraceError(f"tf2onnx cannot convert {source}: the ONNX it wrote {text}") from e
            if "(Loop) has type GRAPH" in text and "while" in text:
                # tf2onnx writes Keras 3's GRU and SimpleRNN (and an LSTM it does not recognise) as a Loop
                # over the time steps; unrolled, the layer's steps are plain ops irtrace replays one by one
                text += ("; it is a Keras recurrent layer's time loop, which tf2onnx writes as a Loop: build the "
                         "layer with unroll=True (a fixed sequence length) to export its steps")
            raise IrtraceError(f"{source}: {text}") from e
    m = bundle.manifest
    for name, ref in zip(m["outputs"], tf_out):
        ok, d = close(bundle.values[name], ref, atol=1e-4)  # TF's kernels differ from torch's by more than ORT's
        if not ok:
            raise IrtraceError(f"export check failed: output {name!r} differs from TensorFlow's own (max abs {d:.3g})")
    m["source"] = manifest_schema.Source(framework="tensorflow", model=str(source))
    m["name"] = Path(str(source)).name
    m["versions"].update({"tensorflow": meta["tensorflow"], "tf2onnx": meta["tf2onnx"]})
    for n in bundle.model.graph.node:
        src = m["nodes"].setdefault(n.name, {})
        layer = _layer(n.name, set(meta["layers"]))
        if "/" not in n.name and len(n.input) > 1:  # tf2onnx renames folded nodes (Conv__29): ask the weight
            layer = _layer(n.input[1], set(meta["layers"])) or layer
        if layer:
            src["module"] = layer
        if n.op_type == "Transpose":
            from irtrace.ir.spec import decode_attrs
            if decode_attrs(n).get("perm") in LAYOUT_PERMS:
                src["layout_only"] = True
    (bundle.path / store.MANIFEST).write_text(manifest_schema.dumps(m))
    return store.load(bundle.path)
