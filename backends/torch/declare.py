from backends._runtime.declare import REFERENCE, Backend

BACKEND = Backend("torch", "PyTorch", "PyTorch eager, fwd/vjp/vjp2 through torch.autograd (the reference)",
                  module="torch", modes=("fwd", "vjp", "vjp2"), chained=True, role=REFERENCE, needs=("torch",),
                  dtypes=("float32", "float16", "bfloat16"))
