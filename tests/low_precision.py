"""A fuzzed low-precision case whose recorded value has a known answer, shared by the tests that replay it
on a backend (tests/test_fuzz.py: onnxruntime's float16; tests/backends: TensorFlow's bfloat16)."""
import numpy as np


def recorded_add(tmp_path, dtype, seed=5):
    """(the bundle, the case) of the first `dtype` Add that irtrace fuzz draws for `seed`, recorded; asserts the
    recorded output is the exact sum (float64: exact for two float16 or bfloat16 values) rounded once to `dtype`."""
    from irtrace.fuzz import generate
    from irtrace.fuzz import run
    case = next(c for c in (generate.draw_case(seed, i, "Add", (), (dtype,)) for i in range(20)) if c.dtype == dtype)
    bundle, kept, dropped = run._record(tmp_path, [case], seed)
    assert kept == [case] and not dropped
    a, b = (i.value.astype(np.float64) for i in case.inputs)
    got = bundle.values[case.output_names()[0]]
    assert got.dtype.name == dtype and np.array_equal(got, (a + b).astype(got.dtype))
    return bundle, case
