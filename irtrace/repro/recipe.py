"""The straight-line script of one case: a backend's recipe (backends/<name>/repro.py, data only)
filled in around the op's lines (irtrace/repro/straight.py's specialisation, or the function form):
the case's arrays as literals (data.npz when large), the autodiff steps its mode needs, the check of
the result against the expected values."""
import ast
import re
from dataclasses import dataclass, field

import numpy as np

from backends._runtime.wire import is_float
from irtrace import compare
from irtrace.repro.straight import CannotSpecialise, array_text

INLINE_ELEMENTS = 64       # a tensor of at most this many elements is written as a literal
INLINE_TOTAL = 96          # ... while all literals together stay under this many elements


def _wrap(text, width=110, indent="    "):
    """A long literal split after commas into continuation lines."""
    if len(text) <= width:
        return [text]
    lines, line = [], ""
    for part in re.split(r"(?<=, )", text):
        if line and len(line) + len(part) > width:
            lines.append(line.rstrip())
            line = indent
        line += part
    return lines + [line]


class Script:
    """The straight-line script of one case being written: its setup lines, and the arrays too big to
    inline (`npz`, for data.npz). Literals share one budget of INLINE_TOTAL elements."""

    def __init__(self, recipe):
        self.recipe, self.npz, self.setup = recipe, {}, []
        self.budget = INLINE_TOTAL

    def form(self, key, dtype):
        """The recipe's `key` template ("tensor", "leaf", "numpy") for a value of `dtype`: its own where the
        recipe has one (recipe["by_dtype"]: a bfloat16 literal written in float32 and cast by the framework,
        whose tensors do not take ml_dtypes' type), else the recipe's."""
        return self.recipe.get("by_dtype", {}).get(np.dtype(dtype).name, {}).get(key, self.recipe[key])

    def value(self, name, array, wrap, comment=""):
        """`name = <literal or data.npz entry>` (wrapped in the framework's tensor when `wrap`)."""
        a = np.asarray(array)
        dt = self.recipe.get("dtypes", {}).get(a.dtype.name, a.dtype.name)
        form = self.form(wrap, a.dtype) if wrap else "{}"
        lines = None
        if a.size <= INLINE_ELEMENTS and self.budget >= a.size:
            expr = array_text(a.astype(dt), dt)
            lines = _wrap(f"{name} = {form.format(expr)}")
            if len(lines) > 2:  # a literal of more than two lines reads worse than data.npz
                lines = None
            else:
                self.budget -= a.size
        if lines is None:
            self.npz[name] = a.astype(dt)
            lines = [f"{name} = {form.format(f'data[{name!r}]')}"]
        if comment and len(lines[-1]) + len(comment) + 4 <= 118:
            lines[-1] += f"  # {comment}"
        elif comment:
            lines.insert(0, f"# {comment}")
        self.setup += lines


def _fill(template, fields, each, each_p=()):
    """Expand a recipe's line templates: `{op}` lines, `*x ` lines once per differentiated input, `*p `
    lines once per penalised input (vjp2: those with a direction u)."""
    out = []
    for line in template:
        if line.strip() == "{op}":
            pad = line[:len(line) - len(line.lstrip())]
            out += [pad + op_line for op_line in fields["op"]]
        elif line.startswith(("*x ", "*p ")):
            for item in (each if line.startswith("*x ") else each_p):
                out.append(line[3:].format(**{**fields, **item}))
        else:
            out.append(line.format(**fields))
    return out


def _fed(lines, value, recipe, names):
    """The op's lines reading `x_` = a recorded copy of each differentiated input `x` (recipe["fed"])."""
    class Ren(ast.NodeTransformer):
        def visit_Name(self, n):
            return ast.Name(n.id + "_", n.ctx) if n.id in names else n
    new = [f"{n}_ = {recipe['fed'].format(n)}" for n in names]
    new += [ast.unparse(Ren().visit(ast.parse(line))) for line in lines]
    return new, ast.unparse(Ren().visit(ast.parse(value, mode="eval")))


_RAISES = (compare.ERROR, compare.CRASH, compare.TIMEOUT)   # verdicts with no numbers to check: the call itself is the problem
_KILLS = (compare.CRASH, compare.TIMEOUT)             # ... and those that may take the process with them
# a script whose op may kill the process runs it again in a child, and reports how the child ended
_IN_A_CHILD = ["import subprocess", "import sys",
               'if "--child" not in sys.argv:  # the op may kill the process: it runs in a child',
               "    try:",
               '        code = subprocess.run([sys.executable, __file__, "--child"], timeout=60).returncode',
               "    except subprocess.TimeoutExpired:",
               '        code = "no answer within 60 s"',
               '    print("the op\'s process:", code if not isinstance(code, int) or code >= 0 else '
               'f"killed by signal {-code}")',
               "    raise SystemExit(0 if code in (0, 1) else 1)"]


@dataclass(frozen=True)
class ScriptCase:
    """One (shrunk) case as a repro script computes and checks it. `spec`: the node's wire spec (with
    its "proto"); `check`: the index of the checked result of `mode` (fwd: per output; vjp: per input;
    vjp2: per input, then per output); `nondiff`: the input positions that do not require grad;
    `part` (vjp2): "g" for ds/dg (the cotangents require grad), else ds/dx (the penalty's own graph:
    the cotangents are constants); `want`, `f64`, `got`: the checked result as the reference, float64
    and the backend's worker computed it (None where there is none); `allowed`: irtrace's tolerance,
    and `allowance` what it is, in words (the comment on the script's check); `varies`: the worker's result
    differs from one run to the next, so a script shows the problem by reproducing it, not by computing
    the worker's `got` again."""
    spec: dict
    mode: str
    verdict: str
    check: int
    inputs: tuple
    cots: tuple
    us: tuple
    nondiff: tuple = ()
    attrs: dict = field(default_factory=dict)
    want: object = None
    f64: object = None
    got: object = None
    allowed: float = 0.0
    allowance: str = "irtrace's tolerance for this case"
    part: str = None
    error: str = None  # ERROR: the worker's message ("RuntimeError: ..."), whose type the script must raise
    varies: bool = False


@dataclass(frozen=True)
class _Names:
    """The script's names for one case: per input (the op's own parameter names), the differentiated
    inputs `xs` (positions) with their results `h` and directions `u`, the outputs `outs`, those with a
    cotangent `with_cot` and its name `g`, the penalised inputs `ps` (vjp2: with a direction) and the
    second-order results `d`."""
    inputs: list
    xs: list
    h: dict
    u: dict
    outs: list
    with_cot: list
    g: dict
    ps: list
    d: dict


def _names(case, names):
    grads = case.mode != "fwd"
    diff = [a is not None and is_float(np.asarray(a).dtype) and i not in case.nondiff
            for i, a in enumerate(case.inputs)]
    xs = [i for i in range(len(case.inputs)) if grads and diff[i]]
    if grads and not xs:
        raise CannotSpecialise("no differentiated input")
    single, n_out = len(xs) == 1, len(case.cots)
    with_cot = [j for j in range(n_out) if grads and case.cots[j] is not None]
    if grads and not with_cot:
        raise CannotSpecialise("no output with a cotangent")
    g = {j: "g" if n_out == 1 else f"g{j}" for j in with_cot}
    d = {("g", j): f"d_{g[j]}" for j in with_cot} if _of_g(case) else {("x", i): f"d_{names[i]}" for i in xs}
    return _Names(names, xs, {i: "h" if single else f"h_{names[i]}" for i in xs},
                  {i: "u" if single else f"u_{names[i]}" for i in xs},
                  ["y"] if n_out == 1 else [f"ys[{j}]" for j in range(n_out)], with_cot, g,
                  [i for i in xs if case.mode == "vjp2" and case.us[i] is not None], d)


def _of_g(case):
    return case.mode == "vjp2" and case.part == "g"


def compose(recipe, case, op, names, doc, who, copies=False, prune=True):
    """(script text, arrays for data.npz) of `case` (a ScriptCase) in the framework of `recipe` (the
    backend's repro.py). `op`: (lines, returned expression, helper sources, imports) of the specialised
    op (or the function form); `names`: the script's name of each input; `doc`: the docstring; `who`:
    whose the expected values are; `copies`: the op reads recorded copies of the differentiated inputs
    (recipe["fed"]); `prune`: outputs the mode never reads are not computed."""
    lines, value = op[:2]
    if prune and len(case.cots) > 1 and case.verdict not in _KILLS:
        wanted = {case.check} if case.mode == "fwd" else {j for j, c in enumerate(case.cots) if c is not None}
        lines, value = _drop_unused(lines, value, wanted)
    v = _names(case, names)
    sc = Script(recipe)
    terms = _arrays(sc, case, v, lines + [f"y = {value}"])
    if copies:
        lines, value = _fed(lines, value, recipe, [names[i] for i in v.xs])
    body = _autodiff(recipe, case, v, lines + [f"{'y' if len(case.cots) == 1 else 'ys'} = {value}"], terms)
    result = _checked(case, v)
    tail = [] if case.verdict in _RAISES else _check(sc, case, result, who)
    return _assemble(sc, case, doc, op, body, tail), sc.npz


def _arrays(sc, case, v, op_lines):
    """The setup lines of the inputs the op reads (leaves: those differentiated), the cotangents and
    (vjp2) the directions; the terms of vjp2's s."""
    used = {n.id for n in ast.walk(ast.parse("\n".join(op_lines))) if isinstance(n, ast.Name)}
    for i, a in enumerate(case.inputs):
        if a is not None and (i in v.xs or v.inputs[i] in used):
            sc.value(v.inputs[i], a, "leaf" if i in v.xs else "tensor")
    for j in v.with_cot:
        sc.value(v.g[j], case.cots[j], "leaf" if _of_g(case) else "tensor", f"cotangent of {v.outs[j]}")
    if case.mode != "vjp2":
        return []
    terms = []
    for i in v.ps:
        sc.value(v.u[i], case.us[i], "tensor", f"direction: s = <{v.h[i]}, {v.u[i]}>" if len(v.xs) == 1 else "")
        terms.append(sc.recipe["term"].format(h=v.h[i], u=v.u[i]))
    if not terms:
        raise CannotSpecialise("no direction u")
    return terms


def _autodiff(recipe, case, v, op_lines, terms):
    """The op's lines inside the recipe's autodiff steps for the mode (fwd: the op's lines alone)."""
    if case.mode == "fwd":
        return op_lines
    of_g = _of_g(case)
    gs = ", ".join(v.g[j] for j in v.with_cot)
    xs = ", ".join(v.inputs[i] for i in v.xs)
    fields = {"op": op_lines, "xs": xs, "ys": ", ".join(v.outs[j] for j in v.with_cot),
              "gs": gs, "hs": ", ".join(v.h[i] for i in (v.ps if case.mode == "vjp2" else v.xs)),
              "ps": ", ".join(v.inputs[i] for i in v.ps), "ws": gs if of_g else xs,
              "and_gs": f", {gs}" if of_g else "", "ds": ", ".join(v.d.values()), "s": " + ".join(terms)}
    each = [{"x": v.inputs[i], "h": v.h[i]} for i in v.xs]
    each_p = [{"p": v.inputs[i], "h": v.h[i]} for i in v.ps]
    return _fill(recipe[case.mode], fields, each, each_p)


def _checked(case, v):
    """The script's name of the checked result (None for a verdict that checks none)."""
    n_in, n_out, check = len(case.inputs), len(case.cots), case.check
    if case.mode == "fwd":
        result = v.outs[check] if check < n_out else None
    elif case.mode == "vjp":
        result = v.h.get(check)
    else:
        result = v.d.get(("x", check)) if check < n_in else v.d.get(("g", check - n_in))
    if result is None and case.verdict not in _RAISES:
        raise CannotSpecialise("the checked result is not one the script computes")
    return result


def _check(sc, case, result, who):
    """The lines that take the checked result as numpy (`got`) and judge it; `want` and `f64` set up."""
    numpy = sc.form("numpy", np.asarray(case.want).dtype).format(result)
    absent = []
    if sc.recipe.get("none_is_zero") and case.mode != "fwd":
        numpy = f"np.zeros({tuple(np.shape(case.want))!r}, 'float32') if {result} is None else {numpy}"
    elif case.mode != "fwd" and case.got is None:  # the framework gives no gradient here: that is the problem
        absent = [f"if {result} is None:", f"    print({f'no gradient: {result} is None ({who} gives one)'!r})",
                  "    raise SystemExit(1)"]
    sc.value("want", case.want, None, who)
    if case.f64 is not None:
        sc.value("f64", case.f64, None, "float64")
    return absent + [f"got = {numpy}"] + _check_lines(case, np.size(case.want))


def _assemble(sc, case, doc, op, body, tail):
    """The script's text: docstring, imports, the op's helpers, the setup, then the body and its check."""
    helpers, op_imports = op[2:]
    imports = list(sc.recipe["imports"])
    head = [f'"""{doc}"""'] + (_IN_A_CHILD if case.verdict in _KILLS else [])
    head += (["import os"] if sc.npz else []) + ["import numpy as np"] + imports + \
        [x for x in op_imports if x not in imports and "import numpy as np" != x]
    out = head + [""]
    for src in helpers:
        out += ["", src.rstrip(), ""]
    if helpers:
        out.append("")
    if sc.npz:
        out.append('data = np.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data.npz"))')
    out += sc.setup
    if case.verdict == compare.ERROR:
        cause = _cause_lines(case)
        out += ["try:"] + ["    " + x for x in body] + [
            "except Exception as e:  # the framework's own error is the problem", *cause,
            "    print(f\"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}" + ("{said}" if cause else "")
            + "\")",
            "    raise SystemExit(1)",
            'print("no error: does not reproduce")', "raise SystemExit(0)"]
    elif case.verdict in _KILLS:
        out += body + ['print("the op returned: does not reproduce")']
    else:
        out += body + tail
    return "\n".join(out) + "\n"


def _cause_lines(case):
    """The lines of an ERROR script's except block that name what the error was raised from, where the
    worker's message says (backends/_runtime/adapter.error_text: MegEngine's AsyncError holds the actual
    error as its __cause__)."""
    if "(caused by " not in (case.error or ""):
        return []
    return ["    cause = e.__cause__",
            "    said = f\" (caused by {type(cause).__name__}: {(str(cause).splitlines() or [''])[0]})\" "
            "if cause else ''"]


def _drop_unused(lines, value, wanted):
    """`value` a tuple literal of the outputs: those not in `wanted` become None, and the lines that
    only computed them are dropped (a statement that assigns nothing read later)."""
    try:
        node = ast.parse(value, mode="eval").body
    except SyntaxError:
        return lines, value
    if not isinstance(node, ast.Tuple):
        return lines, value
    node.elts = [e if k in wanted else ast.Constant(None) for k, e in enumerate(node.elts)]
    value = ast.unparse(node)
    kept = list(lines)
    changed = True
    while changed:
        changed = False
        for k in range(len(kept) - 1, -1, -1):
            try:
                stmt = ast.parse(kept[k]).body[0]
            except SyntaxError:
                return lines, ast.unparse(node)
            if not isinstance(stmt, ast.Assign):
                continue
            targets = {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            later = {n.id for text in kept[k + 1:] + [value] for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name)}
            if not targets & later:
                del kept[k]
                changed = True
    return kept, value


def _check_lines(case, size):
    show = size <= 16
    if case.verdict == compare.SHAPE_MISMATCH:
        return ['print("shape", list(got.shape), "expected", list(want.shape))',
                "raise SystemExit(1 if got.shape != want.shape else 0)"]
    if case.verdict == compare.NAN_MISMATCH:
        return ["odd = np.isfinite(got) != np.isfinite(want)",
                'print(f"{odd.sum()} of {odd.size} elements are finite on one side only")'] + \
               (['print("got", got.ravel(), "expected", want.ravel())'] if show else []) + \
               ["raise SystemExit(1 if odd.any() else 0)"]
    lines = ["same = (got == want) | (np.isnan(got) & np.isnan(want))  # the same infinity or NaN: no difference",
             "err = np.abs(np.subtract(got, want, dtype=np.float64, out=np.zeros(np.shape(want)), where=~same))",
             "i = np.unravel_index(np.argmax(err), err.shape)",
             'print(f"max abs difference {err.max():.3g} at {[int(k) for k in i]}: got {got[i].item()!r}, '
             'expected {want[i].item()!r}' + (' (float64 {f64[i].item()!r})")' if case.f64 is not None else '")')]
    if show:
        lines.append('print("got", got.ravel(), "expected", want.ravel())')
    lines.append(f"raise SystemExit(1 if err.max() > {float(case.allowed):.3g} else 0)  # {case.allowance}")
    return lines
