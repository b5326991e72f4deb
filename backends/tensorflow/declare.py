from backends._runtime.declare import Backend, Environment

# Today the environment of `irtrace export --from tensorflow` (tf2onnx); no replay worker yet (modes=()).
BACKEND = Backend("tensorflow", "TensorFlow", "TensorFlow 2.21 CPU (Python 3.11 env): the importer's environment",
                  module="tensorflow", modes=(), demo=False,
                  environment=Environment("3.11", check="import tensorflow, tf2onnx",
                                          variables={"TF_CPP_MIN_LOG_LEVEL": "3"}))
