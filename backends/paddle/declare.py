from backends._runtime.declare import Backend, Environment, Release

# Paddle logs through glog at import: quiet, and one thread. Its FLAGS_* stay at their defaults
# (oneDNN off on this CPU build: FLAGS_use_mkldnn and FLAGS_use_onednn are False), as a user has them.
_QUIET = {"GLOG_minloglevel": "2", "GLOG_v": "0", "OMP_NUM_THREADS": "1"}
BACKEND = Backend("paddle", "PaddlePaddle", "PaddlePaddle 3.3 CPU (Python 3.11 env), fwd/vjp/vjp2 through paddle.grad",
                  module="paddle", modes=("fwd", "vjp", "vjp2"), chained=True, port=True,
                  dtypes=("float32", "float16", "bfloat16"),  # bfloat16 crosses the wire as ml_dtypes' type
                  environment=Environment("3.11", check="import paddle, numpy; paddle.disable_static(); "
                                          "x = paddle.to_tensor([2.0], stop_gradient=False); "
                                          "(g,) = paddle.grad([x * x], [x], create_graph=True); "
                                          "assert float(paddle.grad([g], [x])[0]) == 2.0",
                                          variables=_QUIET, version="3.3.1",
                                          releases=(Release("3.2.0", ("paddlepaddle==3.2.0",)),
                                                    Release("3.0.0", ("paddlepaddle==3.0.0",)))))
