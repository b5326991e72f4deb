"""How a repro script drives paddle.grad, straight-line (the fields: see
backends/megengine/repro.py). It does what backends/paddle/autodiff.py does for one op."""
RECIPE = {
    "imports": ["import warnings", "warnings.filterwarnings(\"ignore\", message=\"No ccache found\")  # Paddle's import-time note",
                "import paddle", "paddle.set_device(\"cpu\")"],
    "tensor": "paddle.to_tensor({})",
    "leaf": "paddle.to_tensor({}, stop_gradient=False)",
    "numpy": "{}.numpy()",
    # bfloat16: written as float32 literals (exact) and cast by Paddle (numpy has no bfloat16)
    "dtypes": {"bfloat16": "float32"},
    "by_dtype": {"bfloat16": {"tensor": "paddle.to_tensor({}, dtype='bfloat16')",
                              "leaf": "paddle.to_tensor({}, dtype='bfloat16', stop_gradient=False)",
                              "numpy": "{}.astype('float32').numpy()"}},
    "shape_type": "list",   # Tensor.shape is a list
    "none_is_zero": True,   # allow_unused=True: None is Paddle's "no path", a zero gradient
    "vjp": ["{op}",
            "[{hs}] = paddle.grad([{ys}], [{xs}], [{gs}], allow_unused=True)"],
    "vjp2": ["{op}",
             "[{hs}] = paddle.grad([{ys}], [{ps}], [{gs}], create_graph=True, allow_unused=True)",
             "s = {s}",
             "[{ds}] = paddle.grad([s], [{ws}], allow_unused=True)"],
    "term": "({h} * {u}).sum()",
}
