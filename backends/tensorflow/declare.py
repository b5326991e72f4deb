from backends._runtime.declare import Backend, Environment

# One environment for the replay backend and the importer (`irtrace export --from tensorflow`, tf2onnx).
BACKEND = Backend("tensorflow", "TensorFlow",
                  "TensorFlow 2.21 CPU (Python 3.11 env), eager, fwd/vjp/vjp2 through GradientTape, deterministic ops",
                  module="tensorflow", modes=("fwd", "vjp", "vjp2"), chained=True, demo=True, port=True,
                  dtypes=("float32", "float16", "bfloat16"),
                  environment=Environment("3.11", check="import tensorflow, tf2onnx",
                                          variables={"TF_CPP_MIN_LOG_LEVEL": "3"}))
