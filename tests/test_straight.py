"""irtrace/repro/straight.py, the specialiser (and irtrace/repro/recipe.py around it), on each backend's
own op functions: for Conv with asymmetric pads, Pad, MaxPool, BatchNormalization, Gemm, ReduceSum with
keepdims=0 and Resize, the straight-line script `irtrace repro` writes first (standalone.build): the
framework's own call with every attribute a literal, the script compiles, and it imports neither irtrace
nor backends.

Pure Python, no worker: an op's source is read from its backend's op table as the worker reads it
(backends/_runtime/source.py). The table's module imports its framework, which need not be installed
here: while it is imported, the framework's package is an empty module that only names things (the
specialiser never calls the framework; it writes the calls out), and every module imported that way
is dropped afterwards."""
import ast
import dataclasses
import importlib
import importlib.abc
import importlib.util
import sys
import types
from contextlib import contextmanager

import numpy as np
import pytest
from onnx import TensorProto, helper

from irtrace.ir.canonical import canonicalize
from irtrace.ir.spec import node_specs
from irtrace.replay.call import differentiated, proto_text, wire_spec
from irtrace.repro import standalone, straight
from irtrace.repro.recipe import ScriptCase

FRAMEWORKS = {"torch": "torch", "megengine": "megengine", "paddle": "paddle", "tensorflow": "tensorflow",
              "oneflow": "oneflow"}


class _Named(types.ModuleType):
    """A framework package or anything in it, by name only: `functional.conv2d` is another _Named."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        sub = _Named(f"{self.__name__}.{name}")
        sub.__path__ = []
        setattr(self, name, sub)
        return sub

    def __call__(self, *args, **kwargs):
        return _Named(f"{self.__name__}()")

    def __mro_entries__(self, bases):
        return (object,)


class _NamedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, package):
        self.package = package

    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] == self.package:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        module = _Named(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


@contextmanager
def _op_table(backend):
    """(the backend's op table, its repro recipe), its framework only named unless already imported."""
    before = set(sys.modules)
    finder = _NamedFinder(FRAMEWORKS[backend])
    sys.meta_path.insert(0, finder)
    try:
        ops = importlib.import_module(f"backends.{backend}.ops").OPS
        recipe = importlib.import_module(f"backends.{backend}.repro").RECIPE
        yield ops, recipe
    finally:
        sys.meta_path.remove(finder)
        for name in set(sys.modules) - before:
            if name.split(".")[0] == finder.package or name.startswith(f"backends.{backend}"):
                del sys.modules[name]


def _f32(*shape):
    return (np.arange(1, 1 + int(np.prod(shape)), dtype=np.float32) / 8).reshape(shape)


# op -> (input names, inputs, attributes, output shape); opset 20
CASES = {
    "Conv": (["x", "w"], [_f32(1, 1, 4, 4), _f32(1, 1, 3, 3)], {"pads": [1, 0, 2, 1]}, (1, 1, 5, 3)),
    "Pad": (["x", "pads", "value"], [_f32(1, 1, 2, 2), np.array([0, 0, 1, 0, 0, 0, 0, 2], np.int64),
                                     np.array(1.5, np.float32)], {"mode": "constant"}, (1, 1, 3, 4)),
    "MaxPool": (["x"], [_f32(1, 1, 4, 4)], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 0, 0]},
                (1, 1, 2, 2)),
    "BatchNormalization": (["x", "s", "b", "m", "v"], [_f32(1, 2, 2, 2)] + [_f32(2)] * 4, {"epsilon": 1e-3},
                           (1, 2, 2, 2)),
    "Gemm": (["a", "b", "c"], [_f32(2, 3), _f32(4, 3), _f32(4)], {"transB": 1, "alpha": 0.5, "beta": 2.0}, (2, 4)),
    "ReduceSum": (["x", "axes"], [_f32(2, 3, 4), np.array([1], np.int64)], {"keepdims": 0}, (2, 4)),
    "Resize": (["x", "", "scales"], [_f32(1, 1, 2, 2), None, np.array([1, 1, 2, 2], np.float32)],
               {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
               (1, 1, 4, 4)),
}

# (backend, op) -> the lines that compute y, exactly, the last one just before `got = `
WANT = {
    ("torch", "Conv"): ["x_ = functional.pad(x, [0, 1, 1, 2])",
                        "y = functional.conv2d(x_, w, None, stride=[1, 1], padding=0, dilation=[1, 1], groups=1)"],
    ("torch", "Pad"): ["y = functional.pad(x, [0, 2, 1, 0], mode='constant', value=1.5)"],
    ("torch", "BatchNormalization"): ["y = functional.batch_norm(x, mean, var, scale, b, training=False, eps=0.001)"],
    ("torch", "Gemm"): ["b_ = b.t()", "y_ = torch.matmul(a, b_)", "y = 0.5 * y_ + 2.0 * c"],
    ("torch", "ReduceSum"): ["y = torch.sum(x, dim=(1,), keepdim=False)"],
    ("torch", "Resize"): ["y = functional.interpolate(x, mode='nearest', scale_factor=[2.0, 2.0])"],
    ("megengine", "Conv"): ["x_ = functional.pad(x, ((0, 0), (0, 0), (1, 2), (0, 1)))",
                            "y = functional.conv2d(x_, w, None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), "
                            "groups=1)"],
    ("megengine", "Pad"): ["y = functional.pad(x, ((0, 0), (0, 0), (1, 0), (0, 2)), mode='constant', "
                           "constant_value=1.5)"],
    ("megengine", "MaxPool"): ["x_ = functional.pad(x, ((0, 0), (0, 0), (1, 0), (1, 0)), constant_value=float('-inf'))",
                               "y = functional.max_pool2d(x_, (3, 3), (2, 2), 0)"],
    ("megengine", "BatchNormalization"): [
        "y_ = functional.nn.batch_norm(x, functional.reshape(mean, (1, -1, 1, 1)), functional.reshape(var, "
        "(1, -1, 1, 1)), functional.reshape(scale, (1, -1, 1, 1)), functional.reshape(b, (1, -1, 1, 1)), "
        "training=False, eps=0.001)",
        "y = functional.reshape(y_, (1, 2, 2, 2))"],
    ("megengine", "Gemm"): ["y_ = functional.matmul(a, b, transpose_a=False, transpose_b=True)",
                            "y = 0.5 * y_ + 2.0 * c"],
    ("megengine", "ReduceSum"): ["y = functional.sum(x, axis=(1,), keepdims=False)"],
    ("megengine", "Resize"): ["y = functional.vision.interpolate(x, mode='nearest', scale_factor=(2.0, 2.0))"],
    ("paddle", "Conv"): ["y = functional.conv2d(x, w, None, stride=[1, 1], padding=[1, 2, 0, 1], dilation=[1, 1], "
                         "groups=1)"],
    ("paddle", "Pad"): ["y = functional.pad(x, [0, 0, 0, 0, 1, 0, 0, 2], mode='constant', value=1.5)"],
    ("paddle", "MaxPool"): ["y = functional.max_pool2d(x, [3, 3], [2, 2], [1, 0, 1, 0], ceil_mode=False)"],
    ("paddle", "BatchNormalization"): ["y = functional.batch_norm(x, mean, var, scale, b, training=False, "
                                       "epsilon=0.001)"],
    ("paddle", "Gemm"): ["y_ = paddle.matmul(a, b, transpose_x=False, transpose_y=True)", "y = 0.5 * y_ + 2.0 * c"],
    ("paddle", "ReduceSum"): ["y = paddle.sum(x, axis=(1,), keepdim=False)"],
    ("paddle", "Resize"): ["y = functional.interpolate(x, mode='nearest', scale_factor=[2.0, 2.0])"],
    ("tensorflow", "Conv"): [
        "(xt, wt) = (tf.transpose(x, [0, 2, 3, 1]), tf.transpose(w, [2, 3, 1, 0]))",
        "y_ = tf.nn.conv2d(xt, wt, strides=[1, 1], padding=[[0, 0], [1, 2], [0, 1], [0, 0]], dilations=[1, 1])",
        "y = tf.transpose(y_, [0, y_.shape.rank - 1] + list(range(1, y_.shape.rank - 1)))"],
    ("tensorflow", "Pad"): ["value = constant_value if True and tf.size(constant_value) > 0 else 0",
                            "y = tf.pad(x, [[0, 0], [0, 0], [1, 0], [0, 2]], mode='CONSTANT', "
                            "constant_values=tf.cast(tf.reshape(value, []), x.dtype))"],
    ("tensorflow", "MaxPool"): ["xt = tf.transpose(x, [0, 2, 3, 1])",
                                "y = to_nchw(tf.nn.max_pool2d(xt, [3, 3], [2, 2], [[0, 0], [1, 0], [1, 0], [0, 0]]))"],
    ("tensorflow", "BatchNormalization"): [
        "y = tf.nn.batch_normalization(x, tf.reshape(mean, [-1, 1, 1]), tf.reshape(var, [-1, 1, 1]), "
        "tf.reshape(b, [-1, 1, 1]), tf.reshape(scale, [-1, 1, 1]), 0.001)"],
    ("tensorflow", "Gemm"): ["y_ = tf.linalg.matmul(a, b, transpose_a=False, transpose_b=True)",
                             "y = 0.5 * y_ + 2.0 * c"],
    ("tensorflow", "ReduceSum"): ["y = tf.math.reduce_sum(x, axis=(1,), keepdims=False)"],
    ("tensorflow", "Resize"): ["xt = tf.transpose(x, [0, 2, 3, 1])",
                               "y = to_nchw(tf.compat.v1.image.resize_nearest_neighbor(xt, [4, 4], "
                               "align_corners=False, half_pixel_centers=False))"],
    ("oneflow", "Conv"): ["x_ = functional.pad(x, [0, 1, 1, 2])",
                          "y = functional.conv2d(x_, w, None, stride=[1, 1], padding=0, dilation=[1, 1], groups=1)"],
    ("oneflow", "Pad"): ["y = functional.pad(x, [0, 2, 1, 0], mode='constant', value=1.5)"],
    ("oneflow", "MaxPool"): ["x_ = functional.pad(x, [1, 0, 1, 0], value=float('-inf'))",
                             "y = functional.max_pool2d(x_, [3, 3], [2, 2], 0, [1, 1], ceil_mode=False)"],
    ("oneflow", "BatchNormalization"): ["y = functional.batch_norm(x, mean, var, scale, b, training=False, eps=0.001)"],
    ("oneflow", "Gemm"): ["b_ = b.t()", "y_ = oneflow.matmul(a, b_)", "y = 0.5 * y_ + 2.0 * c"],
    ("oneflow", "ReduceSum"): ["y = oneflow.sum(x, dim=(1,), keepdim=False)"],
    ("oneflow", "Resize"): ["y = functional.interpolate(x, mode='nearest', scale_factor=(2.0, 2.0))"],
}
# where the straight form is refused, and why: the writer goes on to the op's function
REFUSED = {("torch", "MaxPool"): "cannot write out a For on tensors"}  # asymmetric pads: torch's index fix-up loop


def _spec(op):
    names, inputs, attrs, out_shape = CASES[op]
    node = helper.make_node(op, names, ["y"], name="n", **attrs)
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
           for n, a in zip(names, inputs) if n]
    graph = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)])
    model, _ = canonicalize(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))
    return node_specs(model)[0], model.graph.node[0]


def _job(ops, recipe, backend, op, mode="fwd", cots=(None,), us=(), part=None):
    """The Job `irtrace repro` gives the writer for this case: the op's source as the worker sends it,
    the inputs the op does not differentiate (its nondiff flags, the schema's NonDifferentiable ones)
    known by value."""
    from backends._runtime.source import op_source
    spec, node = _spec(op)
    inputs = tuple(CASES[op][1])
    entry = ops.lookup("", op, 20)
    body, imports = op_source(entry.fn)
    _, passive = differentiated(spec, list(inputs), set())
    case = ScriptCase(wire_spec(spec, proto_text(node)), mode, "DIVERGENT", 0, inputs, cots, us,
                      tuple(sorted(set(entry.flags.get("nondiff", ())) | passive)), dict(spec.attrs),
                      want=np.zeros(CASES[op][3], np.float32), allowed=1e-6, part=part,
                      allowance="irtrace's allowance: 8 float32 ULPs at the output's scale")
    src = {"op": body, "imports": imports, "script": {"framework": FRAMEWORKS[backend], "recipe": recipe}}
    return standalone.Job(src, case, "title", "PyTorch, float32")


def _standalone(text, backend):
    """The script compiles, imports its framework, and neither irtrace nor backends, and runs no exec/eval."""
    tree = ast.parse(compile(text, "repro.py", "exec", ast.PyCF_ONLY_AST))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | {
        (n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert FRAMEWORKS[backend] in imported and not imported & {"irtrace", "backends"}, imported
    assert not any(isinstance(n, ast.Name) and n.id in ("exec", "eval", "op") for n in ast.walk(tree))


@pytest.mark.parametrize("backend", sorted(FRAMEWORKS))
def test_each_op_is_written_as_the_framework_call_with_literal_attributes(backend):
    with _op_table(backend) as (ops, recipe):
        for op in CASES:
            job = _job(ops, recipe, backend, op)
            if (backend, op) in REFUSED:
                with pytest.raises(straight.CannotSpecialise, match=REFUSED[backend, op]):
                    standalone.build(job, standalone.Form("straight", prune=True))
                continue
            text, npz = standalone.build(job, standalone.Form("straight", prune=True))
            lines = text.splitlines()
            want = WANT[backend, op]
            at = lines.index(want[-1])
            assert lines[at - len(want) + 1:at + 1] == want, (op, text)
            assert lines[at + 1] == f"got = {recipe['numpy'].format('y')}"
            assert lines[-1] == "raise SystemExit(1 if err.max() > 1e-06 else 0)  # irtrace's allowance: " \
                                "8 float32 ULPs at the output's scale"
            assert not npz  # every array small enough to be a literal
            _standalone(text, backend)


def test_a_refused_straight_form_falls_to_the_op_function_called_with_the_case():
    with _op_table("torch") as (ops, recipe):
        text, _ = standalone.build(_job(ops, recipe, "torch", "MaxPool"), standalone.Form("function"))
    lines = text.splitlines()
    assert 'def op(x, *, auto_pad="NOTSET", ceil_mode=0, dilations, kernel_shape, pads, storage_order=0, ' \
           'strides):' in lines  # torch's own max_pool, as its op table has it
    assert "y = op(x, **{'kernel_shape': [3, 3], 'pads': [1, 1, 0, 0], 'storage_order': 0, 'ceil_mode': 0, " \
           "'strides': [2, 2], 'dilations': [1, 1], 'auto_pad': 'NOTSET'})" in lines
    compile(text, "repro.py", "exec")


def test_megengine_pad_double_backward_of_the_cotangent_is_written_with_two_grad_managers():
    """ds/dg of Pad (MegEngine's is silently zero): the outer GradManager takes x and g, the inner one x,
    and only ds/dg is read."""
    x = CASES["Pad"][1][0]
    with _op_table("megengine") as (ops, recipe):
        job = _job(ops, recipe, "megengine", "Pad", mode="vjp2", cots=(np.ones((1, 1, 3, 4), np.float32),),
                   us=(np.full(x.shape, -1.0, np.float32), None, None), part="g")
        job = standalone.Job(job.src, dataclasses.replace(job.case, check=3), job.title, job.who)
        text, _ = standalone.build(job, standalone.Form("straight", prune=True))
    body = text.splitlines()
    start = body.index("outer = GradManager().attach([x, g])")
    assert body[start:start + 12] == [
        "outer = GradManager().attach([x, g])",
        "inner = GradManager().attach([x])",
        "with outer:",
        "    with inner:",
        "        y = functional.pad(x, ((0, 0), (0, 0), (1, 0), (0, 2)), mode='constant', constant_value=1.5)",
        "        inner.backward([y], [g])",
        "    h = x.grad",
        "    for t in [x, g]:",
        "        t.grad = None  # .grad accumulates: the outer backward starts from nothing",
        "    outer.backward((h * u).sum())",
        "[d_g] = [t.grad for t in [g]]",
        "got = np.zeros((1, 1, 3, 4), 'float32') if d_g is None else d_g.numpy()"]
    _standalone(text, "megengine")


def test_a_local_assigned_again_keeps_each_of_its_names():
    """`y = matmul(...); y = y * alpha`: both lines stay, each with its own name."""
    block = ("import torch\n\ndef op(a, b, *, alpha=1.0):\n    y = torch.matmul(a, b)\n"
             "    y = y * alpha\n    return y\n")
    inputs = [straight.Tensor("a", (2, 2)), straight.Tensor("b", (2, 2))]
    lines, value, helpers, imports = straight.specialise(block, ["import torch"], inputs, {"alpha": 0.5})
    assert lines == ["y_ = torch.matmul(a, b)", "y__ = y_ * 0.5"] and value == "y__" and imports == ["import torch"]


def test_a_comprehension_of_known_values_is_folded_and_its_own_names_are_not_unknown():
    block = ("import torch\n\ndef op(x, *, pads):\n"
             "    return torch.pad(x, [v for i in range(2) for v in (pads[i], pads[i + 2])])\n")
    lines, value, _, _ = straight.specialise(block, ["import torch"], [straight.Tensor("x", (1, 2))],
                                             {"pads": [1, 2, 3, 4]})
    assert lines == [] and value == "torch.pad(x, [1, 3, 2, 4])"


def test_a_one_expression_lambda_helper_is_written_out_in_place():
    block = ("import torch\n\nfn = lambda x, d, k: torch.sum(x, dim=d, keepdim=k)\n\n"
             "def op(x, *, axes, keepdims=1):\n    return fn(x, tuple(axes), bool(keepdims))\n")
    lines, value, helpers, _ = straight.specialise(block, ["import torch"], [straight.Tensor("x", (2, 3))],
                                                   {"axes": [1], "keepdims": 0})
    assert value == "torch.sum(x, dim=(1,), keepdim=False)" and helpers == []


def test_a_keyword_dict_becomes_keywords_only_for_plain_names():
    block = ("import torch\n\ndef op(x, *, scale):\n    kw = {}\n    kw['scale_factor'] = scale\n"
             "    kw['not a name'] = 1\n    return torch.f(x, **kw)\n")
    _, value, _, _ = straight.specialise(block, ["import torch"], [straight.Tensor("x", (2,))], {"scale": 2.0})
    assert value == "torch.f(x, **{'scale_factor': 2.0, 'not a name': 1})"
    block = "import torch\n\ndef op(x, *, scale):\n    kw = {'scale_factor': scale}\n    return torch.f(x, **kw)\n"
    _, value, _, _ = straight.specialise(block, ["import torch"], [straight.Tensor("x", (2,))], {"scale": 2.0})
    assert value == "torch.f(x, scale_factor=2.0)"


def test_a_megengine_branch_on_an_input_s_dtype_is_written_out_for_the_case(monkeypatch):
    """MegEngine's Div branches on its input's dtype (float: F.div; integer: floor_div fixed up to truncate);
    Tensor.dtype is a numpy dtype there, so the float case's script is F.div alone."""
    monkeypatch.setitem(CASES, "Div", (["a", "b"], [_f32(2, 2), _f32(2, 2)], {}, (2, 2)))
    with _op_table("megengine") as (ops, recipe):
        text, _ = standalone.build(_job(ops, recipe, "megengine", "Div"), standalone.Form("straight", prune=True))
    assert "y = functional.div(a, b)" in text.splitlines() and "floor_div" not in text
    _standalone(text, "megengine")


def test_a_megengine_layer_norm_without_bias_writes_its_zeros_with_a_numpy_dtype(monkeypatch):
    """MegEngine's LayerNormalization makes the missing bias as zeros of scale's dtype, a numpy dtype
    there: written np.dtype('float32') (every script imports numpy as np), not refused as an unknown name."""
    monkeypatch.setitem(CASES, "LayerNormalization", (["x", "scale"], [_f32(1, 3), _f32(3)], {"epsilon": 1e-5}, (1, 3)))
    with _op_table("megengine") as (ops, recipe):
        text, _ = standalone.build(_job(ops, recipe, "megengine", "LayerNormalization"),
                                   standalone.Form("straight", prune=True))
    lines = text.splitlines()
    assert "b = functional.zeros((3,), dtype=np.dtype('float32'))" in lines
    assert "y = functional.nn.layer_norm(x, (3,), True, scale, b, 1e-05)" in lines
    _standalone(text, "megengine")


def test_an_op_returning_more_values_than_the_node_has_outputs_is_written_keeping_the_node_s(monkeypatch):
    """torch's LayerNormalization returns Y, Mean and InvStdDev (torch.native_layer_norm, as the kernel
    computes them); for a node with Y alone the worker keeps the first (adapter.check_outputs) and so
    does the `first` form, which then runs to Y by hand; the plain form hands the tuple on and fails."""
    x, scale = np.array([[1.0, 2.0, 4.0]], np.float32), np.array([1.0, 2.0, 3.0], np.float32)
    monkeypatch.setitem(CASES, "LayerNormalization", (["x", "scale"], [x, scale], {"epsilon": 1e-5}, (1, 3)))
    with _op_table("torch") as (ops, recipe):
        job = _job(ops, recipe, "torch", "LayerNormalization")
        plain, _ = standalone.build(job, standalone.Form("straight", prune=True))
        first, _ = standalone.build(job, standalone.Form("straight", prune=True, first=True))
    assert "y = torch.native_layer_norm(x, (3,), scale, None, 1e-05)" in plain.splitlines()
    assert "y = torch.native_layer_norm(x, (3,), scale, None, 1e-05)[0]" in first.splitlines()
    _standalone(first, "torch")
    # by hand: mean 7/3, biased variance 14/9, Y = (x - mean) / sqrt(variance + eps) * scale
    x64 = x.astype(np.float64)
    by_hand = (x64 - 7 / 3) / np.sqrt(14 / 9 + 1e-5) * scale
    ran = {}
    with pytest.raises(SystemExit) as done:
        exec(compile(first, "repro.py", "exec"), ran)  # noqa: S102 - the script under test, torch only
    assert done.value.code == 1  # the job's expected values are zeros: "reproduces"
    np.testing.assert_allclose(ran["got"], by_hand, rtol=1e-6)  # float32: a few roundings of the formula
    with pytest.raises(AttributeError, match="tuple"):
        exec(compile(plain, "repro.py", "exec"), {})  # noqa: S102
    # a tuple literal keeps its own items, not indexed
    assert (standalone._first("(y_, rm, rv)", 1), standalone._first("(y_, rm, rv)", 2)) == ("y_", "(y_, rm)")


def test_an_error_script_reproduces_only_with_the_framework_s_own_error(monkeypatch, tmp_path):
    """An ERROR finding's script exits 1 on any exception; it is kept only when the exception is of the
    type the worker reported (a script that fails on its own mistake, here the plain form handing
    native_layer_norm's tuple on, does not reproduce the finding)."""
    from irtrace.replay import backends
    x, scale = np.array([[1.0, 2.0, 4.0]], np.float32), np.array([1.0, 2.0, 3.0], np.float32)
    monkeypatch.setitem(CASES, "LayerNormalization", (["x", "scale"], [x, scale], {"epsilon": 1e-5}, (1, 3)))
    with _op_table("torch") as (ops, recipe):
        job = _job(ops, recipe, "torch", "LayerNormalization", mode="vjp", cots=(np.ones((1, 3), np.float32),))
    forms = [standalone.Form("straight", prune=True), standalone.Form("straight", prune=True, first=True)]
    for error, kept in (("RuntimeError: the kernel is not registered", None),
                        ("AssertionError: Expected output to be a torch.Tensor", "straight")):
        case = dataclasses.replace(job.case, verdict="ERROR", error=error)
        written = standalone.write(dataclasses.replace(job, case=case), forms, backends.get("torch"), tmp_path)
        assert (written and written.form) == kept, error
        if kept:
            assert written.run.output.splitlines()[-1] == "AssertionError: Expected output to be a torch.Tensor"


def test_a_nan_pattern_script_is_compared_with_the_worker_where_both_are_finite(tmp_path):
    """A NaN/Inf pattern finding's script passes when it shows a pattern and agrees with the worker
    wherever both are finite: the framework may put its NaN at other elements in another process."""
    from irtrace.replay import backends
    text = "import numpy as np\ngot = np.array([1.0, np.nan, np.nan], 'float32')\nraise SystemExit(1)\n"
    worker = np.array([1.0, 2.0, np.nan], np.float32)
    torch_info = backends.get("torch")
    assert standalone.run_script(torch_info, tmp_path, text, want_got=worker).same is False
    assert standalone.run_script(torch_info, tmp_path, text, want_got=worker, finite_only=True).same is True
    other = np.array([1.5, 2.0, np.nan], np.float32)  # a finite element that differs: not the same
    assert standalone.run_script(torch_info, tmp_path, text, want_got=other, finite_only=True).same is False


def test_tensor_size_is_known_as_each_framework_spells_it():
    """Paddle's and MegEngine's `x.size` (an element count), torch's `x.size()` and `x.size(d)`: known from
    the shape, so a branch on them is decided for the case (Paddle's PRelu on a one-element slope,
    its Resize on an empty `sizes`), not a reason to fall back to the op's function."""
    block = ("import paddle.nn.functional as functional\n\ndef op(x, slope):\n"
             "    if slope.size == 1:\n        return functional.prelu(x, slope.reshape([-1]))\n"
             "    return paddle.where(x >= 0, x, x * slope)\n")
    _, value, _, _ = straight.specialise(block, ["import paddle.nn.functional as functional"],
                                         [straight.Tensor("x", (2, 3)), straight.Tensor("slope", (1,))], {})
    assert value == "functional.prelu(x, slope.reshape([-1]))"
    block = "import torch\n\ndef op(x):\n    return torch.zeros(x.size()) if x.size(1) == 3 else x\n"
    _, value, _, _ = straight.specialise(block, ["import torch"], [straight.Tensor("x", (2, 3))], {})
    assert value == "torch.zeros((2, 3))"


def test_a_loop_on_tensors_over_known_items_is_written_out_once_per_item():
    """Max's variadic inputs folded pairwise, a product taken one dimension at a time: the loop's items
    are known for the case, so its body is written out per item; a loop that fills a container in place
    (torch's MaxPool index fix-up) is still refused, since the container is known and its items are not."""
    block = ("import torch\n\ndef op(*xs):\n    out = xs[0]\n    for t in xs[1:]:\n"
             "        out = torch.maximum(out, t)\n    return out\n")
    lines, value, _, _ = straight.specialise(block, ["import torch"],
                                             [straight.Tensor(f"xs{k}", (2,)) for k in range(3)], {})
    assert (lines, value) == (["out = torch.maximum(xs0, xs1)", "out_ = torch.maximum(out, xs2)"], "out_")
    block = ("import torch\n\ndef op(x, *, axes):\n    for d in sorted(axes, reverse=True):\n"
             "        x = torch.prod(x, d)\n    return x\n")
    lines, value, _, _ = straight.specialise(block, ["import torch"], [straight.Tensor("x", (2, 3, 4))],
                                             {"axes": [0, 2]})
    assert (lines, value) == (["x_ = torch.prod(x, 2)", "x__ = torch.prod(x_, 0)"], "x__")
    block = ("import torch\n\ndef op(x):\n    coords = []\n    for d in range(2):\n"
             "        coords.insert(0, x % 2)\n    return torch.stack(coords)\n")
    with pytest.raises(straight.CannotSpecialise, match="only assignments to names are unrolled"):
        straight.specialise(block, ["import torch"], [straight.Tensor("x", (2,))], {})


def test_oneflow_scripts_differentiate_by_hand_and_give_zero_where_no_path_reaches(monkeypatch, tmp_path):
    """OneFlow's scripts (backward and .grad) run in OneFlow's environment, against answers by hand: Mul's
    double backward (h_a = g b, h_b = g a, s = <h_a, u_a> + <h_b, u_b>: ds/da = g u_b, ds/db = g u_a),
    and LayerNormalization with a scale and no bias, whose scale OneFlow's layer_norm leaves out of its
    graph: its gradient is None, written zero, where autograd.grad raised."""
    from irtrace.replay import backends
    info = backends.get("oneflow")
    if info.unavailable():
        pytest.skip(f"oneflow unavailable: {info.unavailable()}")
    a, b = np.array([1.5, -2.0], np.float32), np.array([0.5, 3.0], np.float32)
    g, u_a, u_b = np.array([2.0, -1.0], np.float32), np.array([1.0, 4.0], np.float32), np.array([-3.0, 0.25], np.float32)
    monkeypatch.setitem(CASES, "Mul", (["a", "b"], [a, b], {}, (2,)))
    x, scale = np.array([[1.0, 3.0]], np.float32), np.array([2.0, -1.0], np.float32)
    monkeypatch.setitem(CASES, "LayerNormalization", (["x", "scale"], [x, scale], {"epsilon": 1e-5}, (1, 2)))
    with _op_table("oneflow") as (ops, recipe):
        mul = _job(ops, recipe, "oneflow", "Mul", mode="vjp2", cots=(g,), us=(u_a, u_b))
        layer_norm = _job(ops, recipe, "oneflow", "LayerNormalization", mode="vjp", cots=(np.ones((1, 2), np.float32),))
        # the expected values: torch's scale gradient (not zero: its layer_norm multiplies by the scale)
        layer_norm = standalone.Job(layer_norm.src, dataclasses.replace(layer_norm.case, want=np.ones(2, np.float32)),
                                    "title", "PyTorch")
        for job, check, want in ((mul, 0, g * u_b), (mul, 1, g * u_a), (layer_norm, 1, np.zeros(2, np.float32))):
            job = standalone.Job(job.src, dataclasses.replace(job.case, check=check), "title", "PyTorch")
            text, _ = standalone.build(job, standalone.Form("straight", prune=True))
            assert "autograd.grad" not in text
            run = standalone.run_script(info, tmp_path, text, want_got=want)
            assert run.code == 1 and run.same, (check, run.output)  # not the case's expected values: exit 1


def test_a_scripts_check_takes_the_same_infinity_or_nan_as_no_difference():
    """A DIVERGENT script's check: where got and want hold the same infinity (or both NaN), there is no
    difference (inf - inf is NaN, which made err.max() NaN and the script exit 0: MegEngine's Div double
    backward of a division by zero fell back to the 356-line harness); a real difference still exits 1."""
    from types import SimpleNamespace

    from irtrace import compare
    from irtrace.repro.recipe import _check_lines
    case = SimpleNamespace(verdict=compare.DIVERGENT, allowed=1e-5, allowance="test", f64=None)
    code = "\n".join(_check_lines(case, 4))

    def exits(got, want):
        try:
            exec(code, {"np": np, "got": np.array(got, np.float32), "want": np.array(want, np.float32)})
        except SystemExit as e:
            return e.code
    assert exits([np.inf, 1.0, np.nan, -np.inf], [np.inf, 1.0, np.nan, -np.inf]) == 0
    assert exits([np.inf, -1.89, np.nan, 2.0], [np.inf, -1.79, np.nan, 2.0]) == 1
    assert exits([np.inf, 1.0], [-np.inf, 1.0]) == 1


def test_a_script_whose_result_is_bfloat16_is_compared_with_the_worker(tmp_path):
    """A script's result in ml_dtypes' bfloat16 (TensorFlow's .numpy() of a bfloat16 tensor) was saved as raw
    bytes ('V2') and reading it back raised ("setting an array element with a sequence"), ending the writing
    of every repro after it; it is saved in float32 (exact) and compared as any result."""
    import ml_dtypes
    from irtrace.replay import backends
    text = ("import numpy as np\nimport ml_dtypes\n"
            "got = np.array([1.5, -0.333984375], ml_dtypes.bfloat16)\nraise SystemExit(1)\n")
    torch_info = backends.get("torch")
    same = np.array([1.5, -0.333984375], ml_dtypes.bfloat16)
    assert standalone.run_script(torch_info, tmp_path, text, want_got=same).same is True
    other = np.array([1.5, -0.3359375], ml_dtypes.bfloat16)  # one bfloat16 step apart
    assert standalone.run_script(torch_info, tmp_path, text, want_got=other).same is False


def test_a_bfloat16_value_in_data_npz_is_kept_in_float32_and_cast_by_the_framework():
    """data.npz cannot hold ml_dtypes' bfloat16 (np.savez writes raw bytes, 'V2', which np.load gives back as
    such, and tf.constant refuses them): a recipe that declares it writes bfloat16 values, inline or in data.npz,
    in float32 (exact) and casts them in the framework (TensorFlow's tf.constant(..., tf.bfloat16))."""
    import ml_dtypes
    from backends.tensorflow.repro import RECIPE
    from irtrace.repro.recipe import INLINE_ELEMENTS, Script
    sc = Script(RECIPE)
    big = (np.arange(INLINE_ELEMENTS + 1) / 7).astype(ml_dtypes.bfloat16)
    sc.value("g", big, "tensor")
    sc.value("u", big[:2], "tensor")
    assert sc.setup[0] == "g = tf.constant(data['g'], tf.bfloat16)"
    assert sc.npz["g"].dtype == np.float32 and np.array_equal(sc.npz["g"], big.astype(np.float32))
    assert sc.setup[1] == "u = tf.constant(np.array([0.0, 0.14257812], 'float32'), tf.bfloat16)"
