from backends._runtime.declare import Backend

BACKEND = Backend("onnxref", "onnx.reference", "onnx.reference as shipped, float32, fwd only (a backend under test)",
                  module="onnx", modes=("fwd",), needs=("onnx",))
