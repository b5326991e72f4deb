"""Run in irtrace's TensorFlow environment: convert a TensorFlow/Keras model with tf2onnx and
record TensorFlow's own outputs (the export check compares them with the IR's).

    python tf_convert.py SOURCE OUT_DIR INPUTS.npz [OPSET]

SOURCE: a .keras/.h5 file, a SavedModel folder, or module:factory (a callable returning a
tf.keras.Model). INPUTS.npz: the inputs by model input name (or in order). Writes
OUT_DIR/model.onnx, OUT_DIR/tf_outputs.npz (output0, output1, ...), OUT_DIR/meta.json.
Exit 3 with one line on stderr when the model cannot be loaded or converted."""
import os
import sys

# Run as a script, this file's folder (irtrace/export) comes first on sys.path, where irtrace's own
# modules (random.py, ...) would shadow the standard library's inside TensorFlow's imports: drop it.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import importlib  # noqa: E402
import json  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


_KEEP = []


def fail(msg):
    print(msg.replace("\n", " ")[:500], file=sys.stderr)
    sys.exit(3)


def load(source):
    import tensorflow as tf
    if os.path.isdir(source):
        loaded = tf.saved_model.load(source)
        _KEEP.append(loaded)  # the signature's variables live as long as the loaded object
        return None, loaded.signatures["serving_default"]
    if source.endswith((".keras", ".h5")):
        return tf.keras.models.load_model(source, compile=False), None
    if ":" in source:
        mod, attr = source.split(":", 1)
        sys.path.insert(0, os.getcwd())
        obj = getattr(importlib.import_module(mod), attr)
        model = obj() if callable(obj) and not isinstance(obj, tf.keras.Model) else obj
        return model, None
    fail(f"{source}: not a SavedModel folder, a .keras/.h5 file or module:factory")


def main():
    source, out, inputs_path = sys.argv[1:4]
    opset = int(sys.argv[4]) if len(sys.argv) > 4 else 18
    import numpy as np
    import tensorflow as tf
    import tf2onnx
    try:
        model, fn = load(source)
    except SystemExit:
        raise
    except Exception as e:
        fail(f"cannot load {source}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    with np.load(inputs_path) as z:
        arrays = {k: z[k] for k in z.files}
    if model is not None:
        names = [i.name.split(":")[0] for i in model.inputs]
    else:
        names = [k for k in fn.structured_input_signature[1]]
    ordered = [arrays[n] if n in arrays else list(arrays.values())[i] for i, n in enumerate(names)]
    spec = tuple(tf.TensorSpec(a.shape, tf.as_dtype(a.dtype), name=n) for n, a in zip(names, ordered))
    try:
        if model is not None:
            proto, _ = tf2onnx.convert.from_keras(model, input_signature=spec, opset=opset)
            outs = model(*[tf.constant(a) for a in ordered], training=False)
        else:
            if len(names) != 1:  # tf2onnx wants the function's own positional parameters
                fail(f"{source}: a SavedModel signature with {len(names)} inputs; export it from module:factory")
            call = tf.function(lambda x: fn(**{names[0]: x}))  # signatures take keyword inputs
            proto, _ = tf2onnx.convert.from_function(call, input_signature=spec, opset=opset)
            outs = fn(**{n: tf.constant(a) for n, a in zip(names, ordered)})
    except Exception as e:
        fail(f"tf2onnx cannot convert {source}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    if isinstance(outs, dict):
        outs = [outs[k] for k in sorted(outs)]
    elif not isinstance(outs, (list, tuple)):
        outs = [outs]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "model.onnx"), "wb") as f:
        f.write(proto.SerializeToString())
    np.savez(os.path.join(out, "tf_outputs.npz"), **{f"output{i}": np.asarray(o) for i, o in enumerate(outs)})
    np.savez(os.path.join(out, "inputs.npz"), **dict(zip([i.name for i in proto.graph.input], ordered)))
    layers = [layer.name for layer in model.layers] if model is not None else []
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump({"tensorflow": tf.__version__, "tf2onnx": tf2onnx.__version__, "layers": layers}, f)


if __name__ == "__main__":
    main()
