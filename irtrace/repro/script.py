"""repro.py and issue.md text. Names from a bundle are data: they reach the script only through
`safe()` (in comments and docstrings) and `repr()` (in code), so a hostile name cannot inject code."""
import html
import math
import re

from irtrace import compare
from irtrace.version import __version__

_MODE_WORDS = {"fwd": "forward", "vjp": "backward (vjp)", "vjp2": "double backward (grad of grad)"}


def safe(text, limit=120):
    """A name made harmless for a comment or docstring: word characters and a few separators."""
    return re.sub(r"[^\w.:/\-\[\](),+=<> ]", "_", str(text))[:limit]


def literal(value):
    """Python source for a value of plain data: repr, except that a non-finite float is written
    float('nan') / float('inf') (repr's `nan` is a NameError in the script)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        items = ", ".join(literal(v) for v in value)
        return f"({items}{',' if len(value) == 1 else ''})" if isinstance(value, tuple) else f"[{items}]"
    return repr(value)


def _escape(text):
    """Backend-written prose (a workaround's description) for markdown: no HTML, one line."""
    return html.escape(" ".join(str(text).split()), quote=False)


def md(text, limit=120):
    """A name made harmless as markdown text outside code: safe(), and no HTML (`<`, `>` escaped)."""
    return safe(text, limit).replace("<", "&lt;").replace(">", "&gt;")


def framework_name(script_info, backend):
    """The framework's own name as its backend declares it ("MegEngine"), and the irtrace backend
    when that is a variant of it (a planted-bug backend runs PyTorch)."""
    from irtrace.replay import backends
    fw = script_info["framework"]
    owners = [i for i in backends.BACKENDS.values() if i.module == fw and i.role != backends.ORACLE]
    own = next((i for i in owners if i.name == backend.partition("@")[0]), None)  # 'paddle@3.0.0': paddle's
    display = (own or (owners[0] if owners else None))
    name = display.display if display is not None else fw
    return name + ("" if own is not None else f" (irtrace backend {safe(backend)})")


def allowance(result, policy=compare.Policy()):
    """The term of irtrace's tolerance that set `result.allowed`, in words (compare.judge: with float64
    to arbitrate, each element may differ from it by the largest of `noise_factor` x the reference's own
    error, or of float32 rounding of the op's formula where Monte Carlo arithmetic measured more,
    `match_ulps` ULPs at the output's scale, and for an accumulating op the rounding-error model's bound
    there; `allowed` is that limit at the worst element). "" for a result judged without numbers."""
    if result.allowed is None:
        return ""
    if result.oracle_abs is None:
        return f"rtol {policy.rtol:g}, atol {policy.atol:g} x the output's scale (no float64 to arbitrate)"
    near = result.allowed * (1 - 1e-9)
    emulated = result.float32_rounding or 0.0
    noise = policy.noise_factor * max(result.oracle_abs, emulated)
    if result.rounding_bound is not None and result.rounding_bound >= near and result.rounding_bound > noise:
        return "the rounding-error bound of this sum at the worst element"
    if noise >= near and noise > 0:
        if emulated > result.oracle_abs:
            return f"{policy.noise_factor:g} x float32 rounding of the op's formula (Monte Carlo)"
        return f"{policy.noise_factor:g} x PyTorch's own error against float64"
    return f"{policy.match_ulps:g} float32 ULPs at the output's scale"


def allowance_rule(policy=compare.Policy()):
    """irtrace's tolerance as a rule, for issue.md (compare.judge)."""
    return (f"each element may differ from float64 by the largest of {policy.noise_factor:g}x PyTorch's own "
            f"error against float64 (or {policy.noise_factor:g}x float32 rounding of the op's formula, where "
            f"Monte Carlo arithmetic measures more), {policy.match_ulps:g} float32 ULPs at the output's scale, "
            f"and for an accumulating op its rounding-error bound "
            f"{policy.rounding_factor:g}·eps·sqrt(n)·max(|y|, sqrt(Q)) over the n terms summed")


def symptom(verdict, label, numbers, message, role="input"):
    if verdict == compare.DIVERGENT and numbers.get("max_abs") is None:  # a gradient the framework does not compute
        return f"{label_words(label, role)} is not computed ({safe(message, 100)})"
    if verdict == compare.DIVERGENT:
        against = "PyTorch and float64" if numbers.get("oracle_at_worst") is not None else "PyTorch"
        return f"{label_words(label, role)} differs from {against} (max abs {numbers['max_abs']:.3g})"
    if verdict == compare.ERROR:
        cause = re.search(r"\(caused by ([A-Za-z_][\w.]*): ", message or "")  # adapter.error_text
        said = f" (caused by {safe(cause.group(1), 60)})" if cause else ""
        return f"raises {safe(message.split(':')[0], 60)}{said}"
    if verdict == compare.CRASH:
        return "crashes the process (segfault)"
    if verdict == compare.TIMEOUT:
        return "never returns"
    if verdict == compare.NAN_MISMATCH:
        return f"{label_words(label, role)} has NaN/Inf where PyTorch has none (or the reverse)"
    if verdict == compare.SHAPE_MISMATCH:
        return f"{label_words(label, role)} has the wrong shape"
    return verdict.lower()


def label_words(label, role="input"):
    """The checked result in words; `role`: what the differentiated input is to the op
    (ir.semantics.input_role: "filter" for a Conv's W, "bias", ...)."""
    if label.startswith("d2g:"):
        return "d(grad)/d(cotangent)"
    if label.startswith("d2x:"):
        return f"d(grad)/d({role})"
    if label.startswith("d:"):
        return f"the {role} gradient"
    return "the output"


def render_script(ctx):
    """The harness repro script: irtrace's autodiff module and the op as irtrace ran it, reading
    data.npz. `ctx`: see irtrace/repro/make.py."""
    head, run, main = _harness_head(ctx), _harness_run(ctx), _harness_main(ctx)
    own = _bindings(head + run + _HARNESS_REPORT + main)
    op = _bindings("\n".join([ctx["autodiff"], *ctx["imports"], ctx["op"]]))
    # a name both bind, but for one import of one module (numpy as np in each)
    clash = {n for n in own.keys() & op.keys() if own[n] != op[n] or own[n][0] != "import"}
    if clash:  # the script's own would shadow the op's helper (or the reverse): a script that runs something else
        raise RuntimeError(f"irtrace bug: the op's code defines {', '.join(sorted(clash))}, which the repro script "
                           f"defines too")
    return head + _harness_op(ctx) + run + _HARNESS_REPORT + main


def _bindings(source):
    """name -> what `source` binds it to at its top level: ("import", the module's name) or ("def", the line)."""
    import ast
    names = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names[node.name] = ("def", node.lineno)
        elif isinstance(node, ast.Assign):
            names.update({t.id: ("def", node.lineno) for t in node.targets if isinstance(t, ast.Name)})
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            module = f"{node.module}." if isinstance(node, ast.ImportFrom) else ""
            names.update({(a.asname or a.name).split(".")[0]: ("import", module + a.name) for a in node.names})
    return names


def _harness_head(c):
    return f'''#!/usr/bin/env python3
"""{safe(c["title"], 200)}

Generated by irtrace {__version__}; runs without irtrace. Needs numpy and {c["framework_module"]}
(and torch, if importable, for the side-by-side PyTorch result).
    python repro.py      exit 1: the problem reproduces; exit 0: it does not (fixed)
Found at node {safe(c["node"])} ({safe(c["op_type"])}), module {safe(c["module"]) or "-"}, in {safe(c["model"])}.
"""
import os
import subprocess
import sys
import warnings

import numpy as np

warnings.filterwarnings("ignore", message="The value of the smallest subnormal")  # numpy 1.26 on some CPUs
'''


def _harness_op(c):
    return f'''
# ----------------------------------------------------------------------------------------------
# How irtrace drives {c["framework_module"]}'s autodiff (irtrace backends/{c["framework"]}/autodiff.py, verbatim)
# ----------------------------------------------------------------------------------------------
{c["autodiff"]}

# ----------------------------------------------------------------------------------------------
# The op, exactly as irtrace ran it ({safe(c["defined_in"])})
# ----------------------------------------------------------------------------------------------
{chr(10).join(c["imports"])}

{c["op"]}

ATTRS = {literal(c["attrs"])}
MODE = {c["mode"]!r}            # fwd | vjp | vjp2 (s = sum_i <vjp_i(x, g), u_i>; ds/dx and ds/dg)
NONDIFF = {tuple(c["nondiff"])!r}         # the inputs that do not require grad
PART = {c.get("part")!r}            # vjp2: "x" ds/dx (g a constant, the penalty's graph) | "g" ds/dg
N_INPUTS, N_OUTPUTS = {c["n_inputs"]}, {c["n_outputs"]}
CHECK = {c["check_index"]}               # which result of MODE is compared: {safe(c["label"])}
VERDICT = {c["verdict"]!r}
ALLOWED = {literal(c["allowed"])}      # irtrace's allowance: {c["allowance"]}
'''


def _harness_run(c):
    torch_block = c["torch_code"]
    return f'''

def load():
    here = os.path.dirname(os.path.abspath(__file__))
    d = dict(np.load(os.path.join(here, "data.npz")))
    get = lambda k: d.get(k)  # noqa: E731
    inputs = [get(f"input{{i}}") for i in range(N_INPUTS)]
    cots = [get(f"cot{{j}}") for j in range(N_OUTPUTS)]
    us = [get(f"u{{i}}") for i in range(N_INPUTS)]
    return inputs, cots, us, d


def run(inputs, cots, us):
    """All results of MODE: fwd -> outputs; vjp -> d/d inputs; vjp2 -> ds/dx per input + ds/dg per output."""
    if MODE == "fwd":
        return fwd(op, inputs, ATTRS)
    if MODE == "vjp":
        return vjp(op, inputs, ATTRS, cots, NONDIFF)
    dx, dg = vjp2(op, inputs, ATTRS, cots, us, NONDIFF, part=PART)
    return list(dx) + list(dg)


TORCH = {torch_block!r}


def run_torch(inputs, cots, us):
    """The same op and mode in PyTorch (irtrace's reference op function and torch.autograd)."""
    ns = {{}}
    exec(TORCH, ns)
    if MODE == "fwd":
        return ns["fwd"](ns["op"], inputs, ATTRS)
    if MODE == "vjp":
        return ns["vjp"](ns["op"], inputs, ATTRS, cots, NONDIFF)
    dx, dg = ns["vjp2"](ns["op"], inputs, ATTRS, cots, us, NONDIFF, part=PART)
    return list(dx) + list(dg)
'''


_HARNESS_REPORT = '''

def report(name, actual, expected):
    a, e = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    if a.shape != e.shape:
        print(f"{name}: shape {list(a.shape)} vs expected {list(e.shape)}")
        return float("inf")
    if a.size == 0:
        print(f"{name}: empty, shape {list(a.shape)}")
        return 0.0
    with np.errstate(invalid="ignore"):
        d = np.where(np.isfinite(a) & np.isfinite(e), np.abs(a - e), 0.0)
        scale = float(np.max(np.abs(np.where(np.isfinite(e), e, 0.0))))
        rel = d / np.maximum(np.abs(e), max(np.finfo(np.float32).eps * scale, 1e-30))
    worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(d)), a.shape)) if a.ndim else ()
    print(f"{name}: shape {list(a.shape)}  max abs {d.max():.6g}  max rel {rel.max():.6g}  "
          f"worst index {list(worst)}: got {float(a[worst])!r}, expected {float(e[worst])!r}")
    odd = np.isfinite(a) != np.isfinite(e)
    if odd.any():  # NaN/inf where the other side is finite: not in max abs, so said here
        first = tuple(int(i) for i in np.argwhere(odd)[0]) if a.ndim else ()
        print(f"{name}: non-finite pattern differs at {int(odd.sum())} of {a.size} elements, first "
              f"{list(first)}: got {float(a[first])!r}, expected {float(e[first])!r}")
    return float(d.max())
'''


def _harness_main(c):
    return f'''

def main():
    if VERDICT in ("CRASH", "TIMEOUT") and "--child" not in sys.argv:
        try:
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"], timeout=60)
        except subprocess.TimeoutExpired:
            print("the op did not return within 60 s: reproduces")
            return 1
        if r.returncode < 0 or r.returncode not in (0, 1):
            print(f"the op killed the process (exit {{r.returncode}}): reproduces")
            return 1
        return r.returncode
    inputs, cots, us, d = load()
    print("inputs:", [None if x is None else (list(x.shape), str(x.dtype)) for x in inputs])
    try:
        out = run(inputs, cots, us)
    except Exception as e:  # noqa: BLE001 - the framework's own error is the finding
        print(f"{{type(e).__name__}}: {{str(e).splitlines()[0] if str(e) else ''}}")
        return 1 if VERDICT == "ERROR" else 2
    if VERDICT == "ERROR":
        print("no error raised: does not reproduce")
        return 0
    actual, expected = out[CHECK], d["reference"]
    err = report("{c["framework_module"]} vs PyTorch (stored)", actual, expected)
    if "oracle" in d:
        report("{c["framework_module"]} vs float64", actual, d["oracle"])
        report("PyTorch (stored) vs float64", expected, d["oracle"])
    try:
        import torch  # noqa: F401
        report("PyTorch now vs PyTorch (stored)", run_torch(inputs, cots, us)[CHECK], expected)
    except ImportError:
        print("(torch is not importable here: the PyTorch side comes from data.npz)")
    a, e = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    if VERDICT == "SHAPE_MISMATCH":
        bad = a.shape != e.shape
    elif VERDICT == "NAN_MISMATCH":
        bad = a.shape != e.shape or not np.array_equal(np.isfinite(a), np.isfinite(e))
    else:
        bad = a.shape != e.shape or err > ALLOWED
    print("reproduces" if bad else "does not reproduce")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
'''


def _listed(versions, latest):
    named = [md(v, 40) + (" (latest)" if v == latest else "") for v in versions]
    return " and ".join(named) if len(named) < 3 else ", ".join(named[:-1]) + " and " + named[-1]


def releases_line(releases, framework):
    """On which of the framework's releases replayed side by side it reproduces (report.json's finding
    "versions"), as markdown: "Reproduces on PaddlePaddle 3.2.0 and 3.3.1 (latest)." or "Reproduces only on
    PaddlePaddle 3.0.0; fixed in 3.2.0 and 3.3.1 (latest)." or, for a regression, "Reproduces on
    PaddlePaddle 3.3.1 (latest); not on 3.2.0."."""
    from irtrace.envs.discover import version_key
    on, clean, latest = releases["reproduces"], releases["clean"], releases.get("latest")
    if not on:
        return f"Does not reproduce on {framework} {_listed(clean, latest)}."
    if not clean:
        return f"Reproduces on {framework} {_listed(on, latest)}."
    newest = max(on, key=version_key)
    fixed = [v for v in clean if version_key(v) > version_key(newest)]
    before = [v for v in clean if v not in fixed]
    text = f"Reproduces {'only ' if not before else ''}on {framework} {_listed(on, latest)}"
    if fixed:
        text += f"; fixed in {_listed(fixed, latest)}"
    if before:
        text += f"; not on {_listed(before, latest)}"
    return text + "."


def render_issue(c, text):
    """issue.md: title, what is wrong, the script, its actual output, what was expected and where the
    expected numbers come from, versions. No path of this machine; the model's module and file:line
    only without anonymize."""
    n = c["numbers"]
    mode = _MODE_WORDS[c["mode"]]
    what = md(symptom(c["verdict"], c["label"], n, c["message"], c.get("role", "input")), 300)
    shapes = ", ".join(str(list(s)) for s in c["shrunk_shapes"] if s is not None)
    para = (f"{c['framework_name']}'s `{md(c['op_type'])}` ({md(c.get('api') or 'the op')}) {what} in the {mode} "
            f"pass, on inputs of shape {shapes or '[]'}.")
    if n.get("max_abs") is not None and n.get("oracle_at_worst") is not None:
        para += (f" PyTorch and the same computation in float64 agree (PyTorch's own error against float64 is "
                 f"{(n.get('oracle_abs') or 0.0):.3g}), so the expected values are not in doubt.")
    if c.get("all_zero"):
        para += " The result is exactly zero everywhere: no error is raised, the gradient term is silently lost."
    files = "`repro.py`" + (" (beside `data.npz`)" if c.get("has_data") else "")
    lines = [f"# {md(c['title'], 300)}", "", para, "",
             f"Run {files}; it needs numpy and {md(c['framework_module'])} only and exits 1 while the problem "
             f"reproduces, 0 once it is fixed:", "```python", text.rstrip(), "```", "",
             "Its output:", "```", (c.get("output") or "(nothing)").rstrip()[:1500], "```", ""]
    if c.get("varies"):
        lines += ["The wrong values differ from run to run (irtrace ran the same case twice and got two different "
                  "results, so the script's need not be irtrace's): the result depends on more than the inputs "
                  "(memory the kernel did not write, or a race).", ""]
    if n.get("max_abs") is not None:
        exp = (f"Expected: the values PyTorch {c['torch_version']} computes for the same op and inputs (`want`)")
        exp += "; `f64` is the same op computed in float64." if n.get("oracle_at_worst") is not None else "."
        exp += f" Tolerance: {c['allowed']:.3g}, {c['allowance']}"
        exp += f"; {allowance_rule()}." if n.get("oracle_abs") is not None else "."
        lines += [exp, ""]
    elif c["verdict"] in (compare.ERROR, compare.CRASH, compare.TIMEOUT):
        lines += ["Expected: the op returns, as PyTorch's does for the same inputs.", ""]
    for w in c.get("workarounds") or []:  # as the backend declares them (make.own_workarounds)
        if w.get("matches") and w.get("code"):
            head = (f"Workaround that matches today ({_escape(str(w.get('description', w['name'])).rstrip('.'))[:200]}; forward, backward "
                    f"and double backward match PyTorch)")
            code = str(w["code"]).rstrip()
            room = 60 - "\n".join(lines).count("\n") - 6  # below: versions and where it was found
            if code.count("\n") + 4 <= room:
                lines += [head + ":", "```python", code, "```", ""]
            else:  # a long one stays beside the script (issue.md stays short)
                lines += [head + ": `workaround.py` beside the script.", ""]
            break
    env = ", ".join(f"{k} {v}" for k, v in c["environment"].items() if v)
    lines += [f"Versions: {md(env, 400)}.", ""]
    if c.get("releases"):
        lines += [releases_line(c["releases"], md(c["framework_name"])), ""]
    where = f"node `{safe(c['node'])}` ({safe(c['op_type'])}) of {md(c['model'])}"
    if not c.get("anonymize", True):
        where += f", module `{safe(c['module']) or '-'}`" + (f", {safe(c['file_line'])}" if c["file_line"] else "")
    lines.append(f"Found by irtrace {__version__} (each op replayed alone against PyTorch, float64 arbitrating) at "
                 f"{where}; {c['n_nodes']} node(s) of the model show it; inputs shrunk from {c['original_shapes']} "
                 f"to {c['shrunk_shapes']}.")
    return "\n".join(lines) + "\n"
