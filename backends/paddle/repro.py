"""How a repro script drives paddle.grad, straight-line (the fields: see
backends/megengine/repro.py). It does what backends/paddle/autodiff.py does for one op."""
RECIPE = {
    "imports": ["import warnings", "warnings.filterwarnings(\"ignore\", message=\"No ccache found\")  # Paddle's import-time note",
                "import paddle", "paddle.set_device(\"cpu\")"],
    "tensor": "paddle.to_tensor({})",
    "leaf": "paddle.to_tensor({}, stop_gradient=False)",
    "numpy": "{}.numpy()",
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
