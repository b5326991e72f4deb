from backends._runtime.declare import Backend, Environment

_QUIET = {"MEGENGINE_LOGGING_LEVEL": "ERROR"}
BACKEND = Backend("megengine", "MegEngine", "MegEngine 1.13 (Python 3.10 env), fwd/vjp/vjp2 through GradManager",
                  module="megengine", modes=("fwd", "vjp", "vjp2"), chained=True, port=True,
                  dtypes=("float32", "float16", "bfloat16"),  # bfloat16 crosses the wire as ml_dtypes' type
                  environment=Environment("3.10", check="import megengine, numpy; "
                                          "assert numpy.__version__ < '2', numpy.__version__", variables=_QUIET))
