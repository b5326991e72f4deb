"""How a repro script drives tf.GradientTape, straight-line (the fields: see
backends/megengine/repro.py). It does what backends/tensorflow/autodiff.py does for one op."""
RECIPE = {
    "imports": ["import tensorflow as tf", "tf.config.experimental.enable_op_determinism()  # as irtrace ran it"],
    "tensor": "tf.constant({})",
    "leaf": "tf.constant({})",
    "numpy": "{}.numpy()",
    # bfloat16: written as float32 literals (exact) and made bfloat16 by tf.constant (data.npz cannot hold
    # ml_dtypes' type: it is saved as raw bytes)
    "dtypes": {"bfloat16": "float32"},
    "by_dtype": {"bfloat16": {"tensor": "tf.constant({}, tf.bfloat16)", "leaf": "tf.constant({}, tf.bfloat16)",
                              "numpy": "tf.cast({}, tf.float32).numpy()"}},
    "none_is_zero": False,  # None: TensorFlow computes no gradient (irtrace reports it as such)
    "vjp": ["with tf.GradientTape() as tape:",
            "    tape.watch([{xs}])",
            "    {op}",
            "[{hs}] = tape.gradient([{ys}], [{xs}], output_gradients=[{gs}])"],
    "vjp2": ["with tf.GradientTape() as outer:",
             "    outer.watch([{xs}{and_gs}])",
             "    with tf.GradientTape() as inner:",
             "        inner.watch([{ps}])",
             "        {op}",
             "    [{hs}] = inner.gradient([{ys}], [{ps}], output_gradients=[{gs}])",
             "    s = {s}",
             "[{ds}] = outer.gradient(s, [{ws}])"],
    "term": "tf.reduce_sum({h} * {u})",
}
