"""How a repro script drives MegEngine's autodiff, straight-line (irtrace/repro/straight.py fills
the fields: {op} the op's lines, {xs} the differentiated inputs, {ys} the outputs with a cotangent,
{gs} their cotangents, {hs} / {ds} the first / second-order results, {s} the sum of {term}; vjp2:
{ps} the inputs the penalty's first backward differentiates (those with a direction u), {ws} what
the second-order results are taken of ({xs}, or {gs} for ds/dg), {and_gs} ", {gs}" when ds/dg is
taken (else empty); a line starting with `*x ` is written once per differentiated input {x} with its
result {h}, one starting with `*p ` once per penalised input {p}).
It does what backends/megengine/autodiff.py does for one op."""
RECIPE = {
    "imports": ["import megengine as mge", "from megengine.autodiff import GradManager",
                "mge.config.async_level = 0  # errors raised where they happen, as irtrace runs MegEngine"],
    "tensor": "mge.tensor({})",
    "leaf": "mge.tensor({})",
    "numpy": "{}.numpy()",
    # bfloat16: written as float32 literals (exact) and made MegEngine's own bfloat16 (numpy has none)
    "dtypes": {"bfloat16": "float32"},
    "by_dtype": {"bfloat16": {"tensor": "mge.tensor({}, dtype=mge.core.tensor.dtype.bfloat16)",
                              "leaf": "mge.tensor({}, dtype=mge.core.tensor.dtype.bfloat16)",
                              "numpy": "{}.astype('float32').numpy()"}},
    "dtype_text": {"bfloat16": "mge.core.tensor.dtype.bfloat16"},  # a dtype the op's lines name
    # the form with the copies irtrace's autodiff feeds the op (autodiff.fed): tried when the plain one
    # does not reproduce what the worker saw
    "fed": "{0} * mge.tensor(1.0, dtype={0}.dtype)  # a recorded copy of the leaf, as in a network",
    "none_is_zero": True,   # GradManager leaves .grad None where the gradient is zero
    "numpy_dtype": True,    # Tensor.dtype is a numpy dtype: an op's branch on it is written out for the case
    "vjp": ["gm = GradManager().attach([{xs}])",
            "with gm:",
            "    {op}",
            "    gm.backward([{ys}], [{gs}])",
            "*x {h} = {x}.grad"],
    "vjp2": ["outer = GradManager().attach([{xs}{and_gs}])",
             "inner = GradManager().attach([{ps}])",
             "with outer:",
             "    with inner:",
             "        {op}",
             "        inner.backward([{ys}], [{gs}])",
             "*p     {h} = {p}.grad",
             "    for t in [{xs}{and_gs}]:",
             "        t.grad = None  # .grad accumulates: the outer backward starts from nothing",
             "    outer.backward({s})",
             "[{ds}] = [t.grad for t in [{ws}]]"],
    "term": "({h} * {u}).sum()",
}
