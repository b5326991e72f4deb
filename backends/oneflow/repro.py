"""How a repro script drives oneflow.autograd.grad, straight-line (the fields: see
backends/megengine/repro.py). It does what backends/oneflow/autodiff.py does for one op; the
first import lines load the CUDA libraries OneFlow 0.9's CPU-less wheel links (as that module does)."""
RECIPE = {
    "imports": ["import ctypes, glob, os, sysconfig",
                "for lib in (\"cublasLt.so.11\", \"cublas.so.11\", \"cudnn_ops_infer.so.8\", \"cudnn_ops_train.so.8\",",
                "            \"cudnn_cnn_infer.so.8\", \"cudnn_cnn_train.so.8\"):  # OneFlow 0.9 is a CUDA build",
                "    ctypes.CDLL((glob.glob(os.path.join(sysconfig.get_paths()[\"purelib\"], \"nvidia/*/lib/lib\" + lib))",
                "                 or [\"lib\" + lib])[0], mode=ctypes.RTLD_GLOBAL)",
                "import oneflow as flow"],
    "tensor": "flow.tensor({})",
    "leaf": "flow.tensor({}, requires_grad=True)",
    "numpy": "{}.numpy()",
    # bfloat16: written as float32 literals (exact) and made OneFlow's (numpy has no bfloat16; OneFlow's
    # .numpy() of a bfloat16 tensor is float32, exact)
    "dtypes": {"bfloat16": "float32"},
    "by_dtype": {"bfloat16": {"tensor": "flow.tensor({}, dtype=flow.bfloat16)",
                              "leaf": "flow.tensor({}, dtype=flow.bfloat16, requires_grad=True)",
                              "numpy": "{}.to(flow.float32).numpy()"}},
    "none_is_zero": True,
    # backward and .grad, not autograd.grad: that has no allow_unused and raises for an input the outputs
    # do not reach (OneFlow's layer_norm given a weight and no bias leaves the weight out), where .grad
    # stays None: zero, as irtrace's autodiff reads OneFlow's graph
    "vjp": ["{op}",
            "flow.autograd.backward([{ys}], [{gs}])",
            "*x {h} = {x}.grad"],
    "vjp2": ["{op}",
             "flow.autograd.backward([{ys}], [{gs}], create_graph=True)",
             "*p {h} = {p}.grad if {p}.grad is not None else flow.zeros_like({p})  # None: no path, zero",
             "for t in [{xs}{and_gs}]:",
             "    t.grad = None  # .grad accumulates: the second backward starts from nothing",
             "s = {s}",
             "if s.requires_grad:  # else the first backward built no graph: every second-order result is zero",
             "    s.backward()",
             "[{ds}] = [t.grad for t in [{ws}]]"],
    "term": "({h} * {u}).sum()",
}
