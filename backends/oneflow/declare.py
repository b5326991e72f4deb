from backends._runtime.declare import Backend, Environment

# OneFlow's wheel is a CUDA build: its libraries come from the nvidia-* wheels of the env (see
# requirements.txt); on a CPU-only machine it runs on the CPU. Quiet glog, one thread; kernels run on the
# VM's scheduler thread, not handed to a worker thread of its own (the same kernels, half the CPU per node:
# benchmarks/four_backends.py).
_QUIET = {"GLOG_minloglevel": "2", "ONEFLOW_DEBUG_MODE": "0", "OMP_NUM_THREADS": "1",
          "ONEFLOW_VM_COMPUTE_ON_WORKER_THREAD": "0"}
BACKEND = Backend("oneflow", "OneFlow", "OneFlow 0.9 (Python 3.10 env, CUDA wheel run on the CPU), "
                  "fwd/vjp/vjp2 through oneflow.autograd.grad (eager)",
                  module="oneflow", modes=("fwd", "vjp", "vjp2"), chained=True, port=True,
                  dtypes=("float32", "float16", "bfloat16"),  # bfloat16 crosses the wire as ml_dtypes' type
                  environment=Environment("3.10", check="import oneflow, numpy; "
                                          "assert numpy.__version__ < '2', numpy.__version__; "
                                          "x = oneflow.tensor([2.0], requires_grad=True); "
                                          "(g,) = oneflow.autograd.grad(x * x * x, x, create_graph=True); "
                                          "assert float(oneflow.autograd.grad(g, x)[0]) == 12.0",
                                          variables=_QUIET,
                                          library_dirs=("lib/python3.10/site-packages/nvidia/*/lib",)))
