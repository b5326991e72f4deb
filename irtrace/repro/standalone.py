"""The repro script a maintainer files: straight-line code (irtrace/repro/straight.py), written,
then run in the framework's own environment without irtrace to check that it reproduces and that
what it computes is what irtrace's worker computed. One writer (`write`) for every script of a
case: repro.py in the first form that passes (straight-line, then the op's function called with the
case's arguments, then the harness that runs irtrace's own autodiff module, see repro_forms) and
compare_torch.py, the same case in PyTorch. A form that does not pass is never kept."""
import ast
import base64
import io
import logging
import zipfile
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from backends._runtime.wire import Status, is_float
from irtrace import compare
from irtrace.repro import recipe as script_recipe, script, straight

log = logging.getLogger(__name__)

# runs a script as `python repro.py` would, then saves its `got` (the checked result) for comparison
_RUNNER = """import sys
import numpy as np
path, out = sys.argv[1], sys.argv[2]
sys.argv = [path]
g = {"__name__": "__main__", "__file__": path}
code = 0
try:
    exec(compile(open(path).read(), path, "exec"), g)
except SystemExit as e:
    code = e.code if isinstance(e.code, int) else 1
if isinstance(g.get("got"), np.ndarray) or hasattr(g.get("got"), "shape"):
    got = np.asarray(g["got"])
    # ml_dtypes' bfloat16 (TensorFlow's .numpy()) saves as raw bytes ('V2'): float32 holds each value exactly
    np.save(out, got.astype(np.float32) if got.dtype.kind == "V" else got)
sys.stdout.flush()
sys.exit(code)
"""


@dataclass
class Run:
    code: int
    output: str
    same: bool = None      # the script's result equals the worker's (None: nothing to compare)


def _environment(info):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # no irtrace on the path: standalone
    env.update(info.variables())
    env.pop("PYTHONPATH", None)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def run_script(info, folder, text, name="repro.py", want_got=None, timeout=300, finite_only=False):
    """Write `text` as folder/name and run it with the backend's interpreter. Run.same compares the
    script's `got` with `want_got` (the worker's result) when given; `finite_only` (a NaN/Inf pattern
    finding): the elements finite on both sides only, since a framework that makes a NaN where it
    should not may make it at other elements in another process (MegEngine's BatchNormalization double
    backward: the worker's and the script's NaN differ, each the same run after run)."""
    path = Path(folder).resolve() / name
    path.write_text(text)
    return run_file(info, path, want_got, timeout, finite_only)


def run_file(info, path, want_got=None, timeout=300, finite_only=False):
    """Run the script at `path` (in its folder, beside its data) with the backend's interpreter, as
    run_script does."""
    folder = path.parent
    with tempfile.TemporaryDirectory() as tmp:
        got_file = Path(tmp) / "got.npy"
        try:
            p = subprocess.run([info.interpreter(), "-c", _RUNNER, str(path), str(got_file)], cwd=folder,
                               env=_environment(info), capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return Run(124, f"(no answer within {timeout} s)")
        except OSError as e:
            return Run(127, f"(cannot run {info.interpreter()}: {e})")
        out = p.stdout.strip()
        code = p.returncode
        if code == 1 and "Traceback (most recent call last)" in p.stderr:
            code = 2  # the script itself raised: not "reproduces"
        if code not in (0, 1):
            tail = [ln for ln in p.stderr.strip().splitlines() if ln.strip()][-3:]
            out = "\n".join([out] + tail).strip()
        same = None
        if want_got is not None and got_file.exists():
            a, b = np.load(got_file).astype(np.float64), np.asarray(want_got).astype(np.float64)
            if finite_only and a.shape == b.shape:
                both = np.isfinite(a) & np.isfinite(b)
                a, b = a[both], b[both]
            same = a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-6, atol=1e-30, equal_nan=True))
        elif want_got is not None:
            same = False
    return Run(code, out, same)


def _tensors(names, case, shape_type, numpy_dtype=False):
    """The op's inputs as straight.Tensor: integer and non-differentiated inputs known by value, and every
    input's dtype where the framework's is numpy's (`numpy_dtype`)."""
    out = []
    for i, (n, a) in enumerate(zip(names, case.inputs)):
        if a is None:
            out.append(None)
            continue
        a = np.asarray(a)
        known = not is_float(a.dtype) or i in case.nondiff
        out.append(straight.Tensor(n, a.shape, a if known else None, shape_type,
                                   requires_grad=not known and case.mode != "fwd",
                                   dtype=a.dtype if numpy_dtype else None))
    return out


def _call_form(block, imports, names, inputs, attrs):
    """The function form: the op's own source, called with the case's arguments."""
    args = [n if a is not None else "None" for n, a in zip(names, inputs)]
    while args and args[-1] == "None":
        args.pop()
    kw = [_keywords(attrs)] if attrs else []
    return [], f"op({', '.join(args + kw)})", [block], list(imports)


def _keywords(attrs):
    """`**{'name': value, ...}`: attribute names from a bundle are written as string literals, never as
    source (store_check refuses names that are not identifiers; this holds whatever reaches here)."""
    return "**{" + ", ".join(f"{str(k)!r}: {straight.literal_source(v)}" for k, v in attrs.items()) + "}"


def _node_form(spec_json, names, inputs):
    """An ONNX node run by the runtime (backends that execute ONNX): built with onnx.helper."""
    node = onnx.NodeProto()
    node.ParseFromString(base64.b64decode(spec_json["proto"]))
    attrs = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode() for x in v]
        elif not isinstance(v, (int, float, list)):
            raise straight.CannotSpecialise(f"attribute {a.name} is not plain data")
        attrs[a.name] = v
    ins = [n if a is not None else "" for n, a in zip(names, inputs)]
    while ins and not ins[-1]:
        ins.pop()
    n_out = len(spec_json["outputs"])
    outs = [f"y{j}" for j in range(n_out)]
    kw = f", {_keywords(attrs)}" if attrs else ""
    vi = ", ".join(f"helper.make_tensor_value_info({n!r}, {int(helper.np_dtype_to_tensor_dtype(np.asarray(a).dtype))}, "
                   f"{list(np.shape(a))})" for n, a in zip(names, inputs) if a is not None)
    lines = [f"node = helper.make_node({node.op_type!r}, {ins!r}, {outs!r}{kw}"
             + (f", domain={node.domain!r})" if node.domain else ")"),
             f"graph = helper.make_graph([node], 'repro', [{vi}], "
             f"[helper.make_empty_tensor_value_info(o) for o in {outs!r}])",
             f"model = helper.make_model(graph, opset_imports=[helper.make_opsetid({node.domain!r}, "
             f"{spec_json['opset']})])",
             "model.ir_version = min(model.ir_version, 10)"]
    feeds = "{" + ", ".join(f"{n!r}: {n}" for n, a in zip(names, inputs) if a is not None) + "}"
    return lines, feeds


@dataclass(frozen=True)
class Form:
    """One way to write a case's script: "straight" (the op's lines specialised to the case, in the
    framework's public API), "function" (the op's own function called with the case's arguments) or
    "harness" (irtrace's autodiff module and the op reading data.npz, see script.render_script: the
    last resort, kept whatever it shows). `copies`: the op reads recorded copies of the differentiated
    inputs, as in a network (the recipe's "fed"); `prune`: outputs the mode never reads are not computed;
    `first`: the op's call returns more values than the node has outputs (torch.native_layer_norm's Y,
    Mean and InvStdDev for a LayerNormalization with Y alone): the script keeps the node's, as the
    worker does (adapter.check_outputs)."""
    kind: str
    copies: bool = False
    prune: bool = False
    first: bool = False


@dataclass(frozen=True)
class Target:
    """Which script of a case: its file, the exit code that shows what it claims, and whether arrays may
    stay in data.npz beside it (else it keeps to inline literals)."""
    name: str
    exits: int
    data: bool


REPRO = Target("repro.py", 1, True)                  # exit 1: the problem reproduces
COMPARE_TORCH = Target("compare_torch.py", 0, False)  # exit 0: PyTorch's own op agrees with the stored answer


@dataclass(frozen=True)
class Job:
    """A script to write: `src` the worker's "source" reply (the op's code, the framework's recipe),
    `case` a recipe.ScriptCase, `title` its first line, `who` whose the expected values are; for the
    harness form `harness`: (its fields, the arrays of its data.npz), see script.render_script."""
    src: dict
    case: script_recipe.ScriptCase
    title: str
    who: str
    target: Target = REPRO
    harness: tuple = None


@dataclass(frozen=True)
class Written:
    text: str
    npz: dict
    form: str
    run: Run


def repro_forms(src, case):
    """The forms of repro.py, in the order they are tried: straight-line pruned (outputs the mode never
    reads not computed), then whole (an op may update a running stat in place), then with the leaf
    copies, then the op's function called as is, then the harness."""
    fed = (src["script"].get("recipe") or {}).get("fed") is not None and case.mode != "fwd"
    return [Form("straight", prune=True), Form("straight")] + ([Form("straight", copies=True)] if fed else []) \
        + [Form("straight", first=True), Form("function"), Form("harness")]


def build(job, form):
    """(text, npz) of `job`'s script in a "straight" or "function" form; CannotSpecialise when none."""
    src, case = job.src, job.case
    recipe = src["script"].get("recipe")
    if recipe is None:
        raise straight.CannotSpecialise("the backend declares no script recipe")
    doc = (f"{straight.safe_doc(job.title)}\nWritten by irtrace; needs numpy and {src['script']['framework']} "
           f"only; exits 1 while the problem reproduces, 0 once it is fixed.")
    if recipe.get("node"):
        names = [f"x{i}" for i in range(len(case.inputs))]
        lines, feeds = _node_form(case.spec, names, case.inputs)
        lines += recipe.get("setup", [])
        value = recipe["run"].format(feeds=feeds) + ("[0]" if len(case.spec["outputs"]) == 1 else "")
        op = (lines, value, [], [])
        recipe = {**recipe, "tensor": "{}", "leaf": "{}"}
    else:
        names = straight.param_names(src["op"], len(case.inputs))
        if form.kind == "straight":
            shape_type = list if recipe.get("shape_type") == "list" else straight._Shape
            op = straight.specialise(src["op"], src["imports"],
                                     _tensors(names, case, shape_type, recipe.get("numpy_dtype", False)), case.attrs,
                                     shape_type, recipe.get("dtype_text"))
        else:
            op = _call_form(src["op"], src["imports"], names, case.inputs, case.attrs)
        if form.first:
            op = (op[0], _first(op[1], len(case.spec["outputs"])), *op[2:])
    return script_recipe.compose(recipe, case, op, names, doc, job.who, copies=form.copies, prune=form.prune)


def _first(value, n):
    """The expression `value` (the op's returned values) keeping its first `n`: a tuple literal's own
    items, else indexed (`torch.native_layer_norm(...)[0]`)."""
    node = ast.parse(value, mode="eval").body
    if isinstance(node, ast.Tuple):
        return ast.unparse(node.elts[0] if n == 1 else ast.Tuple(node.elts[:n], ast.Load()))
    primary = isinstance(node, (ast.Call, ast.Name, ast.Attribute, ast.Subscript))
    return f"{value if primary else f'({value})'}[{0 if n == 1 else f':{n}'}]"


def write(job, forms, info, folder):
    """The first of `forms` whose script, written as folder/<its target's name> and run with the
    backend's interpreter without irtrace, exits as its target says and computes what the worker did
    (the harness is kept whatever it shows): Written, or None when none does (no script left behind)."""
    for form in forms:
        last = form.kind == "harness"
        try:
            text, npz = (script.render_script(job.harness[0]), job.harness[1]) if last else build(job, form)
        except straight.CannotSpecialise as e:
            log.info("%s form: %s", form.kind, e)
            continue
        if npz and not job.target.data:
            log.info("%s form: %s keeps to inline data", form.kind, job.target.name)
            continue
        if job.target.data:
            _write_data(folder, npz, keep=last)
        # a result that varies from run to run (ScriptCase.varies) is shown by reproducing, not by its values
        judged = not last and job.case.verdict not in (compare.ERROR, compare.CRASH, compare.TIMEOUT) \
            and not job.case.varies
        run = run_script(info, folder, text, job.target.name, want_got=job.case.got if judged else None,
                         finite_only=job.case.verdict == compare.NAN_MISMATCH)
        if not last and _error_type(job.case.error) and run.code == 1:  # the framework's error, not the script's
            printed = (run.output.strip().splitlines() or [""])[-1]
            run = replace(run, same=_error_type(printed) == _error_type(job.case.error))
        if last or (run.code == job.target.exits and run.same is not False):
            return Written(text, npz, form.kind, run)
        log.info("%s form does not pass: exit %s, same result %s: %s", form.kind, run.code, run.same,
                 run.output[-300:])
    (Path(folder) / job.target.name).unlink(missing_ok=True)
    return None


def _error_type(text):
    """The exception's type name an error message starts with ("InvalidArgumentError: ..." ->
    "InvalidArgumentError"), as the worker reports it and an ERROR script prints it; None without one."""
    m = re.match(r"\s*(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*): ", text or "")
    return m.group(1) if m else None


def write_npz(path, arrays):
    """np.savez with fixed zip timestamps: the same finding gives byte-identical files."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for k in sorted(arrays):
            a = io.BytesIO()
            np.lib.format.write_array(a, np.asarray(arrays[k]), allow_pickle=False)
            z.writestr(zipfile.ZipInfo(k + ".npy", date_time=(1980, 1, 1, 0, 0, 0)), a.getvalue())
    Path(path).write_bytes(buf.getvalue())


def _write_data(folder, npz, keep=False):
    """data.npz beside the script: its arrays; none (removed) when it has none, unless `keep`."""
    path = Path(folder) / "data.npz"
    if npz or keep:
        write_npz(path, npz)
    elif path.exists():
        path.unlink()


def compare_torch(torch_src, case, info, folder, title):
    """compare_torch.py: the same case in PyTorch (straight-line, inline data), kept when it runs and
    prints PyTorch's answer; Written, or None."""
    if torch_src.get("status") != Status.OK or case.want is None:
        return None
    tcase = replace(case, verdict=compare.DIVERGENT, got=case.want)
    job = Job(torch_src, tcase, f"The same case in PyTorch: {title}", "PyTorch (stored)", COMPARE_TORCH)
    return write(job, [Form("straight", prune=True), Form("straight", prune=True, first=True)], info, folder)


def api_of(text):
    """The framework call a script's op line makes (`functional.pad`), for the title; None if unclear."""
    import ast
    import re
    for line in text.splitlines():
        m = re.match(r"\s*ys? = (.*)$", line)
        if m:
            try:
                node = ast.parse(m.group(1), mode="eval").body
            except SyntaxError:
                return None
            return ast.unparse(node.func) if isinstance(node, ast.Call) and not ast.unparse(node.func).startswith(
                ("op", "ort.", "ReferenceEvaluator")) else None
    return None
