from backends._runtime.declare import ORACLE, Backend

BACKEND = Backend("oracle", "float64 oracle",
                  "float64: onnx.reference forward (fixed where it is wrong), torch float64 gradients "
                  "cross-checked by finite differences", module="onnx", modes=("fwd", "vjp", "vjp2"), chained=True,
                  role=ORACLE, needs=("torch", "onnx"))
