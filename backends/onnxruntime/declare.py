from backends._runtime.declare import Backend

BACKEND = Backend("onnxruntime", "onnxruntime",
                  "onnxruntime CPU, one-node sessions, graph optimizations off, fwd only",
                  module="onnxruntime", modes=("fwd",), needs=("onnxruntime", "onnx"))
