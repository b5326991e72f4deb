"""Straight-line repro scripts: the op call with its concrete arguments and only the autodiff
steps the mode needs, in the backend framework's public API.

The op function a backend ran (its source, from the worker) is specialised to the case: its
attributes and its integer inputs (pads, axes, shapes) are known values, its float inputs are
tensors whose shapes are known and whose contents are not. Each statement of its body runs here
when it touches no tensor contents and no framework (`ints(pads)`, `if axes is not None`,
`pad_width(p)`); what remains is written out with every known sub-expression replaced by its
value: `functional.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), mode='constant', constant_value=0.0)`.
A body this cannot specialise (a loop over tensors, a branch on tensor contents) is kept as the
function itself and called with the case's arguments. Either way `irtrace repro` then runs the
script in the framework's environment and checks it gives what the worker computed
(irtrace/repro/make.py), so a wrong specialisation can never become a repro.

The autodiff steps around these lines come from the backend's recipe (irtrace/repro/recipe.py
fills it in)."""
import ast
import builtins
import copy
import keyword
import math
import re

import numpy as np

from backends._runtime.wire import is_float

# names the script itself uses around the op's lines: an op local with one of these is renamed
RESERVED = {"np", "os", "sys", "subprocess", "gm", "outer", "inner", "t", "s", "got", "want", "f64", "err", "i",
            "here", "data", "y", "ys", "tape", "r", "e"}


UNROLL_MAX = 8  # a loop on tensors is written out once per item up to this many items
_UNROLLED = (ast.Assign, ast.AugAssign, ast.If, ast.For, ast.Return, ast.Pass)  # the statements its body may hold


class CannotSpecialise(Exception):
    pass


class _Touched(Exception):
    """A known-value evaluation touched tensor contents or a framework: not foldable."""


class _Framework:
    """A framework module or function on the host (it is not importable here): a reference that
    writes itself out as its source (`functional.conv2d`); calling it is not foldable."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, a):
        if a.startswith("__"):
            raise AttributeError(a)
        if a == "Tensor":
            return Tensor  # isinstance(t, torch.Tensor) holds for the op's inputs
        return _Framework(f"{self._name}.{a}")

    def __call__(self, *a, **k):
        raise _Touched(self._name)

    def __deepcopy__(self, memo):
        return self

    __add__ = __radd__ = __sub__ = __mul__ = __rmul__ = __getitem__ = __eq__ = __bool__ = __hash__ = \
        lambda self, *a: (_ for _ in ()).throw(_Touched(self._name))


def _touched(self, *a, **k):
    raise _Touched("tensor")


class _Shape(tuple):
    """A known shape, answering TensorFlow's TensorShape questions too."""

    @property
    def rank(self):
        return len(self)

    def as_list(self):
        return list(self)

    def num_elements(self):
        return int(np.prod(self))


class _Size(int):
    """Tensor.size as each framework spells it: the element count (numpy's, Paddle's and MegEngine's
    property), callable too as torch's and OneFlow's size() and size(d)."""

    def __new__(cls, shape, shape_type):
        self = super().__new__(cls, int(np.prod(shape)))
        self._shape, self._shape_type = tuple(shape), shape_type
        return self

    def __call__(self, dim=None):
        return self._shape_type(self._shape) if dim is None else self._shape[dim]

    def __deepcopy__(self, memo):
        return self


class Tensor:
    """An op input in the script: a variable name, a known shape; contents known (integer inputs such
    as pads) or not (float data); `requires_grad`: whether the script differentiates it (a leaf)."""

    def __init__(self, name, shape, value=None, shape_type=_Shape, requires_grad=False, dtype=None):
        self.name, self._shape, self.value, self._shape_type = name, tuple(shape), value, shape_type
        self._requires_grad = requires_grad
        self._dtype = dtype  # a numpy dtype where the framework's Tensor.dtype is one (MegEngine's), else None
        self.used = False

    @property
    def dtype(self):
        if self._dtype is None:
            raise _Touched(self.name)
        return self._dtype

    @property
    def requires_grad(self):
        return self._requires_grad

    @property
    def shape(self):
        return self._shape_type(self._shape)

    @property
    def ndim(self):
        return len(self._shape)

    def dim(self):
        return len(self._shape)

    def numel(self):
        return int(np.prod(self._shape))

    @property
    def size(self):
        return _Size(self._shape, self._shape_type)

    def _known(self):
        if self.value is None:
            raise _Touched(self.name)
        return self.value

    def numpy(self):
        return np.array(self._known())

    def item(self):
        return self._known().item()

    def tolist(self):
        return self._known().tolist()

    def reshape(self, *shape):
        return self._known().reshape(*shape)

    def flatten(self):
        return self._known().reshape(-1)

    def __deepcopy__(self, memo):
        return self

    def __getattr__(self, a):
        raise _Touched(a)

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _touched
    __neg__ = __pow__ = __rpow__ = __matmul__ = __getitem__ = __len__ = __iter__ = __array__ = _touched
    __lt__ = __le__ = __gt__ = __ge__ = __float__ = __int__ = __index__ = __abs__ = _touched


class _Emitted(Tensor):
    """A local the script computes: a name, nothing known."""

    def __init__(self, name):
        super().__init__(name, ())

    @property
    def shape(self):
        raise _Touched(self.name)

    @property
    def ndim(self):
        raise _Touched(self.name)

    @property
    def size(self):
        raise _Touched(self.name)

    @property
    def requires_grad(self):
        raise _Touched(self.name)


def float_text(v, dtype):
    """The shortest text that reads back as exactly this value in `dtype`."""
    v = dtype.type(v)
    if dtype.kind != "f":  # ml_dtypes' bfloat16: numpy formats none of its scalars; float32 holds it exactly, and
        v = np.float32(v)  # the text of that float32 reads back as the same bfloat16 value
    if not np.isfinite(v):
        return f"float({str(float(v))!r})"
    m = abs(float(v))  # compared as a Python float: 1e16 is out of float16's range
    t = np.format_float_positional(v, unique=True, trim="-") if m < 1e16 and (m == 0 or m >= 1e-4) \
        else np.format_float_scientific(v, unique=True, trim="-")
    return t if any(c in t for c in ".en") else t + ".0"  # a float literal: -0.0 keeps its sign


def array_text(a, dtype_name=None):
    """np.array(...) source for a small array, exact."""
    a = np.asarray(a)
    dt = np.dtype(dtype_name or a.dtype)
    if is_float(a.dtype):
        items = [float_text(v, a.dtype) for v in a.reshape(-1)]
    elif a.dtype.kind == "b":
        items = [str(bool(v)) for v in a.reshape(-1)]
    else:
        items = [str(int(v)) for v in a.reshape(-1)]
    if a.ndim == 0:
        return f"np.array({items[0]}, {dt.name!r})"
    if a.size > 1 and len(set(items)) == 1:  # one value throughout: zeros, ones or full
        shape = tuple(a.shape)
        if items[0] in ("0", "0.0", "False"):
            return f"np.zeros({shape!r}, {dt.name!r})"
        if items[0] in ("1", "1.0", "True"):
            return f"np.ones({shape!r}, {dt.name!r})"
        return f"np.full({shape!r}, {items[0]}, {dt.name!r})"
    flat = f"np.array([{', '.join(items)}], {dt.name!r})"
    return flat if a.ndim == 1 else f"{flat}.reshape{tuple(a.shape)!r}"


class Renderer:
    """Source text of known values; None for a value that has none."""

    def __init__(self, helpers, dtypes=None):
        self.helpers = helpers      # name -> function object defined by the op's block
        self.used_helpers = set()
        self.dtypes = dtypes or {}  # dtype name -> the script's text of it where numpy's is not the framework's

    def __call__(self, v, depth=0):
        if depth > 6:
            return None
        if isinstance(v, Tensor):
            v.used = True
            return v.name
        if isinstance(v, _Framework):
            return v._name
        if v is None or isinstance(v, (bool, int, str)):
            return repr(v)
        if isinstance(v, float):
            if not math.isfinite(v):
                return f"float({str(v)!r})"
            short = float_text(v, np.dtype(np.float32))
            return short if float(np.float32(v)) == v and len(short) < len(repr(v)) else repr(v)
        if isinstance(v, (np.bool_, np.integer, np.floating)):
            return self(v.item(), depth)
        if isinstance(v, (tuple, list)):
            if len(v) > 64:
                return None
            items = [self(x, depth + 1) for x in v]
            if any(x is None for x in items):
                return None
            if isinstance(v, tuple):
                return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
            return "[" + ", ".join(items) + "]"
        if isinstance(v, dict):
            items = [(self(k, depth + 1), self(x, depth + 1)) for k, x in v.items()]
            if any(a is None or b is None for a, b in items):
                return None
            return "{" + ", ".join(f"{a}: {b}" for a, b in items) + "}"
        if isinstance(v, slice):
            parts = [self(p, depth + 1) for p in (v.start, v.stop, v.step)]
            return None if None in parts else f"slice({', '.join(parts)})"
        if v is Ellipsis:
            return "..."
        if isinstance(v, np.ndarray) and v.size <= 16 and v.dtype.kind in "fiub":
            return array_text(v)
        if isinstance(v, np.dtype):
            return self.dtypes.get(v.name, f"np.dtype({v.name!r})")
        if isinstance(v, type) and issubclass(v, np.generic):
            return f"np.{v.__name__}"
        for name, fn in self.helpers.items():
            if v is fn:
                self.used_helpers.add(name)
                return name
        if isinstance(v, type(len)) and getattr(builtins, getattr(v, "__name__", ""), None) is v:
            return v.__name__
        return None


def literal_source(v):
    """Source of a plain attribute value (numbers, strings, lists, small arrays)."""
    text = Renderer({})(v)
    if text is None:
        raise CannotSpecialise(f"no source for a {type(v).__name__} attribute")
    return text


def safe_doc(text):
    """A title made safe inside a triple-quoted docstring."""
    return re.sub(r'[\\"]', "'", str(text))[:300]


def _bound_names(node):
    """Names bound inside comprehensions and lambdas of `node` (never folded: they vary)."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.comprehension):
            out |= {t.id for t in ast.walk(n.target) if isinstance(t, ast.Name)}
        elif isinstance(n, ast.Lambda):
            out |= {a.arg for a in n.args.args + n.args.kwonlyargs}
    return out


def _free(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


class _Folder(ast.NodeTransformer):
    def __init__(self, ns, render, bound, inline=None):
        self.ns, self.render, self.bound, self.inline = ns, render, bound, inline or {}

    def _inlined(self, node):
        """A call of a one-expression helper (`to_nhwc(x)`), as that expression on the call's arguments;
        None when it is not one (each parameter used at most once, or its argument a plain name)."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in self.inline
                and not node.keywords):
            return None
        params, expr = self.inline[node.func.id]
        if len(params) != len(node.args) or any(isinstance(a, ast.Starred) for a in node.args):
            return None
        uses = [n.id for n in ast.walk(expr) if isinstance(n, ast.Name)]
        args = dict(zip(params, node.args))
        if any(uses.count(p) > 1 and not isinstance(a, (ast.Name, ast.Constant)) for p, a in args.items()):
            return None

        class Sub(ast.NodeTransformer):
            def visit_Name(self, n):
                return copy.deepcopy(args[n.id]) if n.id in args else n
        return Sub().visit(copy.deepcopy(expr))

    def visit(self, node):
        inlined = self._inlined(node)
        if inlined is not None:
            return self.visit(inlined)
        if isinstance(node, ast.IfExp) and not (_free(node.test) & self.bound):  # `a if unbiased else b`
            try:
                test = eval(compile(ast.Expression(node.test), "<op>", "eval"), self.ns)  # noqa: S307
                return self.visit(node.body if test else node.orelse)
            except Exception:  # noqa: BLE001 - depends on tensors: kept
                pass
        if isinstance(node, ast.expr) and not isinstance(node, (ast.Starred, ast.Lambda, ast.Slice)) \
                and not ((_free(node) - _bound_names(node)) & self.bound):  # a comprehension's own names
            try:
                value = eval(compile(ast.Expression(node), "<op>", "eval"), self.ns)  # noqa: S307 - our own op code
            except Exception:  # noqa: BLE001 - not foldable: keep the expression, fold inside it
                pass
            else:
                text = self.render(value)
                if text is not None:
                    return ast.parse(text, mode="eval").body
        return self.generic_visit(node)


class _Keywords(ast.NodeTransformer):
    """`f(x, **{'scale_factor': 2.0})`, a keyword dict the op built and folding made a literal, written
    as the keywords it passes: `f(x, scale_factor=2.0)` (only names that are identifiers and not passed
    twice)."""

    def visit_Call(self, node):
        self.generic_visit(node)
        named = {k.arg for k in node.keywords if k.arg is not None}
        out = []
        for k in node.keywords:
            keys = getattr(k.value, "keys", None) if k.arg is None and isinstance(k.value, ast.Dict) else None
            names = [key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
                     for key in keys or []]
            if keys and all(n is not None and n.isidentifier() and not keyword.iskeyword(n) for n in names) \
                    and not (set(names) & named) and len(set(names)) == len(names):
                out += [ast.keyword(n, v) for n, v in zip(names, k.value.values)]
                named |= set(names)
            else:
                out.append(k)
        node.keywords = out
        return node


class _Renamer(ast.NodeTransformer):
    def __init__(self, ns):
        self.ns = ns

    def visit_Name(self, node):
        return ast.Name(self.ns[node.id].name, node.ctx)


def _assigned(target):
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


class Specialiser:
    """Runs / writes out the body of `def op` for one case. `ns`: helpers, imports, bound parameters."""

    def __init__(self, ns, render, names_taken):
        self.ns, self.render, self.lines = ns, render, []
        self.taken = set(names_taken)
        self.emitted = set()   # every name the lines assign (a local assigned twice has two)

    def _script_name(self, name):
        new = name
        while new in RESERVED or new in self.taken:
            new += "_"
        self.taken.add(new)
        self.emitted.add(new)
        return new

    def fold(self, expr):
        folded = _Folder(self.ns, self.render, _bound_names(expr), self.inline).visit(copy.deepcopy(expr))
        return ast.unparse(_Keywords().visit(folded))

    def emit(self, stmt):
        if isinstance(stmt, ast.Assign) and all(isinstance(t, (ast.Name, ast.Tuple)) for t in stmt.targets):
            value = self.fold(stmt.value)
            names = [n for t in stmt.targets for n in _assigned(t)]
            for n in names:
                self.ns[n] = _Emitted(self._script_name(n))
            targets = " = ".join(ast.unparse(_Renamer(self.ns).visit(copy.deepcopy(t))) for t in stmt.targets)
            self.lines.append(f"{targets} = {value}")
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            value = self.fold(stmt.value)
            old = self.fold(stmt.target)
            self.ns[stmt.target.id] = _Emitted(self._script_name(stmt.target.id))
            op = ast.unparse(ast.BinOp(ast.Name("a"), stmt.op, ast.Name("b")))[2:-2]
            self.lines.append(f"{self.ns[stmt.target.id].name} = {old} {op} {value}")
        elif isinstance(stmt, ast.Expr):
            self.lines.append(self.fold(stmt.value))
        else:
            raise CannotSpecialise(f"cannot write out a {type(stmt).__name__} on tensors")

    def unroll(self, stmt):
        """A loop whose body touches tensors, written out once per item when its items are known (the
        variadic inputs of Max, the dimensions a reduction takes one at a time): the returned expression's
        source when its body returns, else None."""
        nodes = list(ast.walk(ast.Module(stmt.body, [])))
        # a body that changes a container in place (coords.insert(0, i)) or an item of one is not written out:
        # the container is a known value here, what goes in it is not
        in_place = any(isinstance(n, ast.stmt) and not isinstance(n, _UNROLLED) or
                       isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.ctx, ast.Store) for n in nodes)
        if stmt.orelse or in_place or not isinstance(stmt.target, (ast.Name, ast.Tuple)):
            raise CannotSpecialise("cannot write out a For on tensors (only assignments to names are unrolled)")
        try:
            items = list(eval(compile(ast.Expression(stmt.iter), "<op>", "eval"), self.ns))  # noqa: S307
        except Exception as e:  # noqa: BLE001
            raise CannotSpecialise(f"cannot write out a For on tensors: its items are not known ({type(e).__name__})") from e
        if len(items) > UNROLL_MAX:
            raise CannotSpecialise(f"cannot write out a For on tensors of {len(items)} items (at most {UNROLL_MAX})")
        bind = compile(ast.fix_missing_locations(ast.Module([ast.Assign([stmt.target], ast.Name("__item", ast.Load()))],
                                                            [])), "<op>", "exec")
        self.locals |= set(_assigned(stmt.target))
        for item in items:
            self.ns["__item"] = item
            exec(bind, self.ns)  # noqa: S102 - the loop's own target, bound to a known item
            del self.ns["__item"]
            r = self.body(stmt.body, top=False)
            if r is not None:
                return r
        return None

    def body(self, stmts, top=True):
        """Run `stmts`; the returned expression's source when a `return` is reached."""
        for k, stmt in enumerate(stmts):
            if k == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # docstring
            if isinstance(stmt, ast.If):
                try:
                    test = eval(compile(ast.Expression(stmt.test), "<op>", "eval"), self.ns)  # noqa: S307
                    taken = bool(test)
                except Exception as e:  # noqa: BLE001
                    raise CannotSpecialise(f"the branch depends on tensor contents ({type(e).__name__})") from e
                r = self.body(stmt.body if taken else stmt.orelse, top=False)
                if r is not None:
                    return r
                continue
            if isinstance(stmt, ast.Return):
                if stmt.value is None:
                    raise CannotSpecialise("the op returns nothing")
                return self.fold(stmt.value)
            if isinstance(stmt, ast.Raise):
                raise CannotSpecialise("the op raises for this case")
            saved = {k2: copy.deepcopy(v) for k2, v in self.ns.items() if k2 in self.locals}
            try:
                exec(compile(ast.Module([stmt], []), "<op>", "exec"), self.ns)  # noqa: S102 - our own op code
            except Exception:  # noqa: BLE001 - touches a tensor or the framework: written out
                self.ns.update(saved)
                if isinstance(stmt, ast.For):
                    r = self.unroll(stmt)
                    if r is not None:
                        return r
                else:
                    self.emit(stmt)
            self.locals |= {n for t in ast.walk(stmt) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)
                            for n in [t.id]}
        if top:
            raise CannotSpecialise("the op's body ends without a return")
        return None


def _one_expression_helpers(tree):
    """name -> (parameters, expression) of the block's helpers that are one expression (a function of one
    `return expr` after a docstring, or `name = lambda ...: expr`): written out in place where called."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name != "op":
            args = node.args
            body = [b for b in node.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
            expr = body[0].value if len(body) == 1 and isinstance(body[0], ast.Return) else None
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and node.targets[0].id != "op":
            args, expr = node.value.args, node.value.body
        else:
            continue
        if expr is not None and not (args.vararg or args.kwarg or args.kwonlyargs or args.defaults or args.posonlyargs):
            out[node.name if isinstance(node, ast.FunctionDef) else node.targets[0].id] = \
                ([a.arg for a in args.args], expr)
    return out


def _signature_binder(fn_node):
    """A function with `fn_node`'s parameters that returns them bound, as a dict."""
    args = copy.deepcopy(fn_node.args)
    binder = ast.FunctionDef(name="__bind", args=args, body=[ast.Return(ast.Call(
        ast.Name("dict", ast.Load()), [], [ast.keyword(None, ast.Call(ast.Name("locals", ast.Load()), [], []))]))],
        decorator_list=[], returns=None, type_params=[])
    return ast.fix_missing_locations(ast.Module([binder], []))


FRAMEWORK_IMPORT = re.compile(r"^(?:import (?P<mod>[\w.]+)(?: as (?P<as1>\w+))?|from (?P<from>[\w.]+) import (?P<name>\w+)(?: as (?P<as2>\w+))?)$")


def import_names(imports):
    """name -> import line, for the op block's import lines."""
    out = {}
    for line in imports:
        m = FRAMEWORK_IMPORT.match(line.strip())
        if not m:
            continue
        if m.group("mod"):
            out[m.group("as1") or m.group("mod").split(".")[0]] = line
        else:
            out[m.group("as2") or m.group("name")] = line
    return out


def _split_block(block):
    """(the module's tree, the `op` function's node, name -> source of every other definition)."""
    tree = ast.parse(block)
    op_def = None
    helpers_src = {}
    for node in tree.body:
        names = [node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else \
            [n for t in getattr(node, "targets", []) for n in _assigned(t)]
        if "op" in names:
            op_def = node
        else:
            for n in names:
                helpers_src[n] = ast.get_source_segment(block, node)
    if isinstance(op_def, ast.Assign) and isinstance(op_def.value, ast.Lambda):  # op = lambda x: ...
        lam = op_def.value
        op_def = ast.fix_missing_locations(ast.FunctionDef(name="op", args=lam.args, body=[ast.Return(lam.body)],
                                                           decorator_list=[], returns=None, type_params=[]))
    if not isinstance(op_def, ast.FunctionDef):
        raise CannotSpecialise("the op is not a plain function")
    return tree, op_def, helpers_src


def specialise(block, imports, inputs, attrs, shape_type=_Shape, dtypes=None):
    """(op lines, the returned expression, helper sources, import lines) for the op of `block` called as
    op(*inputs, **attrs). `inputs`: Tensor or None per input. `dtypes`: dtype name -> the script's text of
    it where numpy's would not do (MegEngine's bfloat16, recipe["dtype_text"]: its root name is one the
    script imports). Raises CannotSpecialise."""
    tree, op_def, helpers_src = _split_block(block)
    ns = {"__builtins__": builtins}
    for name, line in import_names(imports).items():
        ns[name] = np if line.split()[1].split(".")[0] == "numpy" else _Framework(name)
    for node in tree.body:
        if node is op_def:
            continue
        try:
            exec(compile(ast.Module([node], []), "<helpers>", "exec"), ns)  # noqa: S102 - our own backend code
        except Exception:  # noqa: BLE001 - a helper that needs the framework at import: not foldable
            pass
    helpers = {n: ns[n] for n in helpers_src if n in ns and callable(ns[n])}
    exec(compile(_signature_binder(op_def), "<bind>", "exec"), ns)  # noqa: S102
    try:
        bound = ns.pop("__bind")(*inputs, **attrs)
    except TypeError as e:
        raise CannotSpecialise(f"the op's parameters do not take this call: {e}") from e
    sp = Specialiser(ns, Renderer(helpers, dtypes), {t.name for t in inputs if isinstance(t, Tensor)})
    sp.inline = _one_expression_helpers(tree)
    sp.locals = set(bound)
    ns.update(bound)
    value = sp.body(op_def.body)
    inputs_named = {t.name for t in inputs if isinstance(t, Tensor)} | {
        t.name for v in bound.values() if isinstance(v, (tuple, list)) for t in v if isinstance(t, Tensor)}
    inputs_named |= {text.split(".")[0] for text in (dtypes or {}).values()}  # the recipe's imports name them
    srcs, import_lines = _needed(sp, value, inputs_named, helpers_src, imports)
    return sp.lines, value, srcs, import_lines


def _needed(sp, value, inputs_named, helpers_src, imports):
    """(helper sources, import lines) the written-out lines need; CannotSpecialise when they name anything
    the script would not have (tensors, imports, helpers, builtins)."""
    text = "\n".join(sp.lines + [f"y = {value}"])
    used = {n.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name)}
    emitted = sp.emitted | _bound_names(ast.parse(text))  # comprehension variables are the lines' own
    imports_by_name = import_names(imports)
    need_helpers = sorted(used & set(helpers_src))
    # every script imports numpy as np (recipe.compose): a known dtype is written np.dtype('float32')
    unknown = used - emitted - inputs_named - set(imports_by_name) - set(need_helpers) - set(dir(builtins)) - {"y", "np"}
    if unknown:
        raise CannotSpecialise(f"the written-out lines name {sorted(unknown)}")
    srcs, seen, todo = [], set(), list(need_helpers)
    while todo:  # helpers the lines call, and what those helpers use
        n = todo.pop(0)
        if n in seen:
            continue
        seen.add(n)
        src = helpers_src[n]
        srcs.append(src)
        for m in sorted({x.id for x in ast.walk(ast.parse(src)) if isinstance(x, ast.Name)} & set(helpers_src)):
            todo.append(m)
        used |= {x.id for x in ast.walk(ast.parse(src)) if isinstance(x, ast.Name)}
    return list(reversed(srcs)), [line for name, line in imports_by_name.items() if name in used]


def param_names(block, n_inputs):
    """Script names of the op's inputs: its own parameter names (`x`, `pads`), `*xs` as xs0, xs1, ..."""
    try:
        fn = next(n if isinstance(n, ast.FunctionDef) else n.value for n in ast.parse(block).body
                  if (isinstance(n, ast.FunctionDef) and n.name == "op") or (
                      isinstance(n, ast.Assign) and isinstance(n.value, ast.Lambda)
                      and any(isinstance(t, ast.Name) and t.id == "op" for t in n.targets)))
    except (StopIteration, SyntaxError):
        return [f"x{i}" for i in range(n_inputs)]
    pos = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    names = pos[:n_inputs]
    if len(names) < n_inputs:
        if fn.args.vararg is None:
            return [f"x{i}" for i in range(n_inputs)]
        star = fn.args.vararg.arg
        names += [f"{star}{k}" for k in range(n_inputs - len(names))]
    return [n if n not in RESERVED else n + "_" for n in names]
