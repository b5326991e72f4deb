"""The repro script a maintainer files: straight-line code (irtrace/repro/straight.py), written,
then run in the framework's own environment without irtrace to check that it reproduces and that
what it computes is what irtrace's worker computed. A form that does not pass is never kept:
straight-line first, then the op's function called with the case's arguments, then (the caller)
the harness that runs irtrace's own autodiff module."""
import base64
import io
import logging
import zipfile
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from irtrace.repro import straight

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
    np.save(out, np.asarray(g["got"]))
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


def run_script(info, folder, text, name="repro.py", want_got=None, timeout=300):
    """Write `text` as folder/name and run it with the backend's interpreter. Run.same compares the
    script's `got` with `want_got` (the worker's result) when given."""
    folder = Path(folder).resolve()
    path = folder / name
    path.write_text(text)
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
            a, b = np.load(got_file), np.asarray(want_got)
            same = a.shape == b.shape and bool(np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=1e-6,
                                                          atol=1e-30, equal_nan=True))
        elif want_got is not None:
            same = False
    return Run(code, out, same)


def _tensors(names, inputs, case, shape_type):
    """The op's inputs as straight.Tensor: integer and non-differentiated inputs known by value."""
    out = []
    for i, (n, a) in enumerate(zip(names, inputs)):
        if a is None:
            out.append(None)
            continue
        a = np.asarray(a)
        known = a.dtype.kind != "f" or i in case["nondiff"]
        out.append(straight.Tensor(n, a.shape, a if known else None, shape_type))
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


def build(src, case, title, who, form, fed=False, prune=True):
    """(text, npz) of the script in `form` ("straight" or "function"); CannotSpecialise when none."""
    recipe = src["script"].get("recipe")
    if recipe is None:
        raise straight.CannotSpecialise("the backend declares no script recipe")
    spec = case["spec"]
    inputs = case["inputs"]
    doc = (f"{title}\nWritten by irtrace; needs numpy and {src['script']['framework']} only; "
           f"exits 1 while the problem reproduces, 0 once it is fixed.")
    if recipe.get("node"):
        names = [f"x{i}" for i in range(len(inputs))]
        lines, feeds = _node_form(spec, names, inputs)
        lines += recipe.get("setup", [])
        value = recipe["run"].format(feeds=feeds) + ("[0]" if len(spec["outputs"]) == 1 else "")
        op = (lines, value, [], [])
        recipe = {**recipe, "tensor": "{}", "leaf": "{}"}
    else:
        names = straight.param_names(src["op"], len(inputs))
        if form == "straight":
            tensors = _tensors(names, inputs, case, list if recipe.get("shape_type") == "list" else straight._Shape)
            op = straight.specialise(src["op"], src["imports"], tensors, case["attrs"],
                                     list if recipe.get("shape_type") == "list" else straight._Shape)
        else:
            op = _call_form(src["op"], src["imports"], names, inputs, case["attrs"])
    diff = [a is not None and np.asarray(a).dtype.kind == "f" and i not in case["nondiff"]
            for i, a in enumerate(inputs)]
    return straight.compose(recipe, case["mode"], case["verdict"], case["check"], names, inputs, diff,
                            case["cots"], case["us"], op, case["want"], case["f64"], case["allowed"], doc, who,
                            fed=fed, prune=prune, part=case.get("part"))


def best_script(src, case, info, folder, title, who):
    """(text, npz, form, Run) of the first form that reproduces and computes what the worker did;
    (None, None, None, None) when none does (the caller writes the harness)."""
    fed = (src["script"].get("recipe") or {}).get("fed") is not None and case["mode"] != "fwd"
    # pruned (outputs the mode never reads not computed), then whole (an op may update a running stat
    # in place), then with the leaf copies, then the op's function called as is
    forms = [("straight", False, True), ("straight", False, False)] + ([("straight", True, False)] if fed else []) \
        + [("function", False, False)]
    for form, copies, prune in forms:
        try:
            text, npz = build(src, case, straight.safe_doc(title), who, form, copies, prune)
        except straight.CannotSpecialise as e:
            log.info("%s form: %s", form, e)
            continue
        _write_data(folder, npz)
        run = run_script(info, folder, text, want_got=case["got"] if case["verdict"] not in (
            "ERROR", "CRASH", "TIMEOUT") else None)
        if run.code == 1 and run.same is not False:
            return text, npz, form, run
        log.info("%s form does not pass: exit %s, same result %s: %s", form, run.code, run.same, run.output[-300:])
    return None, None, None, None


def write_npz(path, arrays):
    """np.savez with fixed zip timestamps: the same finding gives byte-identical files."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for k in sorted(arrays):
            a = io.BytesIO()
            np.lib.format.write_array(a, np.asarray(arrays[k]), allow_pickle=False)
            z.writestr(zipfile.ZipInfo(k + ".npy", date_time=(1980, 1, 1, 0, 0, 0)), a.getvalue())
    Path(path).write_bytes(buf.getvalue())


def _write_data(folder, npz):
    path = Path(folder) / "data.npz"
    if npz:
        write_npz(path, npz)
    elif path.exists():
        path.unlink()


def torch_script(torch_src, case, folder, info, title):
    """compare_torch.py: the same case in PyTorch (straight-line), kept when it runs and prints
    PyTorch's answer; None otherwise."""
    if torch_src.get("status") != "ok":
        return None
    tcase = {**case, "verdict": "DIVERGENT" if case["verdict"] == "ERROR" or case["want"] is not None else
             case["verdict"], "got": case["want"]}
    if tcase["want"] is None:
        return None
    try:
        text, npz = build(torch_src, tcase, straight.safe_doc(f"The same case in PyTorch: {title}"), "PyTorch (stored)",
                          "straight")
    except straight.CannotSpecialise:
        return None
    if npz:
        return None  # compare_torch.py keeps to inline data
    run = run_script(info, folder, text, name="compare_torch.py", want_got=case["want"])
    if run.code != 0 or run.same is False:
        (Path(folder) / "compare_torch.py").unlink()
        return None
    return text


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
