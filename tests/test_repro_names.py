"""A harness repro script inlines the op's code (its helpers, closures among them, by their names) beside the
script's own functions: none may share a name. The recurrent ops' shared registration once passed its layer's
function as `run`, and every LSTM repro script called the script's own run() with the op's arguments: it raised,
and each repro said "DOES NOT reproduce"."""
import pytest

from backends._ops_common import register_rnn
from backends._runtime.source import op_source
from backends._table import OpTable
from irtrace.repro import script


def _compute(kind, x, w, r, b, states, attrs):
    return x


def _layer(kind):
    return f"Fake's {kind}"


# as a backend's own functions are (backends/<name>/ops/rnn.py): inlined into the script, not imported
_compute.__module__ = _layer.__module__ = "backends.fake.ops.rnn"


def _harness_names():
    """The names the harness script defines around the op, from its template (a context that fills it)."""
    ctx = {"title": "t", "framework_module": "numpy", "node": "n", "op_type": "LSTM", "module": "", "model": "m",
           "mode": "vjp", "n_inputs": 1, "n_outputs": 1, "check_index": 0, "label": "d:x", "verdict": "DIVERGENT",
           "allowed": 1.0, "allowance": "", "attrs": {}, "nondiff": [], "torch_code": ""}
    try:
        own = script._harness_head(ctx) + script._harness_run(ctx) + script._HARNESS_REPORT + \
            script._harness_main(ctx)
    except KeyError as e:
        pytest.fail(f"the harness template asks for {e}: add it to this test's context")
    return script._bindings(own)


def test_recurrent_ops_code_is_named_apart_from_the_script():
    table = OpTable("fake")
    register_rnn(table, _compute, _layer)
    for kind in ("LSTM", "GRU", "RNN"):
        block, imports = op_source(table.lookup("", kind, 7).fn)
        op, own = script._bindings("\n".join(imports + [block])), _harness_names()
        assert {n for n in op.keys() & own.keys() if op[n][0] != "import" or op[n] != own[n]} == set(), kind


def test_a_clash_is_an_error_not_a_script_that_runs_something_else():
    ctx = {"title": "t", "framework_module": "numpy", "framework": "numpy", "node": "n", "op_type": "LSTM",
           "module": "", "model": "m", "defined_in": "x", "imports": [], "mode": "vjp", "n_inputs": 1,
           "n_outputs": 1, "check_index": 0, "label": "d:x", "verdict": "DIVERGENT", "allowed": 1.0, "allowance": "",
           "attrs": {}, "nondiff": [], "torch_code": "", "autodiff": "", "op": "def run(x):\n    return x\n"}
    with pytest.raises(RuntimeError, match="defines run, which the repro script defines too"):
        script.render_script(ctx)


def test_recurrent_attributes_are_one_options_object_with_the_specs_defaults():
    """register_rnn's ops take a node's attributes as one RnnAttrs: the spec's defaults filled in, an attribute the
    spec does not define refused as a keyword the function lacked was, what the layer cannot say Unsupported."""
    import numpy as np

    from backends._ops_common import RnnAttrs
    from backends._table import Unsupported
    seen = []
    table = OpTable("fake")
    register_rnn(table, lambda kind, x, w, r, b, states, attrs: seen.append((kind, states, attrs)) or x, _layer)
    x, w = np.zeros((5, 2, 4)), np.zeros((1, 12, 4))
    lstm = table.lookup("", "LSTM", 7).fn
    assert lstm(x, w, w, hidden_size=3) is x
    assert seen == [("LSTM", [None, None], RnnAttrs(hidden_size=3))]
    assert seen[0][2].direction == "forward" and seen[0][2].layout == 0 and seen[0][2].activations is None
    with pytest.raises(Unsupported, match="Fake's LSTM has no cell clip"):
        lstm(x, w, w, hidden_size=3, clip=1.0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'hiden_size'"):
        lstm(x, w, w, hiden_size=3)
