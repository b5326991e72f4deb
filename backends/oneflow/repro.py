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
    "none_is_zero": True,
    "vjp": ["{op}",
            "[{hs}] = flow.autograd.grad([{ys}], [{xs}], [{gs}], retain_graph=True)"],
    "vjp2": ["{op}",
             "[{hs}] = flow.autograd.grad([{ys}], [{ps}], [{gs}], retain_graph=True, create_graph=True)",
             "s = {s}",
             "[{ds}] = flow.autograd.grad([s], [{ws}], [flow.ones_like(s)])"],
    "term": "({h} * {u}).sum()",
}
