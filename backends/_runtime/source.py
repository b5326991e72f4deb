"""The source of an op function as a standalone block (stdlib only), for repro scripts.

The function exactly as written in its op table, renamed `op`, preceded by the imports of the
framework modules it uses and by the helpers it calls from irtrace's backends (module-level
functions and closure variables, recursively). backends._table's Unsupported becomes a local
exception class, so the block needs nothing from irtrace."""
import ast
import inspect
import io
import sys
import textwrap
import tokenize
import types

# the name backends/_torch_like.py gives the framework's top-level module (torch, oneflow): a script
# writes the module's own name there, so it shows `oneflow.matmul`, not `framework.matmul`
FRAMEWORK = "framework"

_PRELUDE = 'class Unsupported(Exception):\n    """The framework cannot express this op as ONNX defines it."""\n'


def _lambda_source(fn):
    line = textwrap.dedent(inspect.getsource(fn)).strip()
    for candidate in (line, line.rstrip(","), "{" + line.rstrip(",") + "}", "(" + line.rstrip(",") + ")"):
        try:
            tree = ast.parse(candidate)
        except SyntaxError:
            continue
        lambdas = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)]
        if len(lambdas) == 1:
            return ast.get_source_segment(candidate, lambdas[0])
    raise ValueError(f"cannot isolate the lambda of {fn} in: {line}")


def _function_source(fn, name):
    if fn.__name__ == "<lambda>":
        return f"{name} = {_lambda_source(fn)}\n"
    lines = textwrap.dedent(inspect.getsource(fn)).splitlines()
    while lines and lines[0].lstrip().startswith("@"):
        lines.pop(0)  # the registration decorator: the script calls the function directly
    lines[0] = lines[0].replace(f"def {fn.__name__}(", f"def {name}(", 1)
    return "\n".join(lines) + "\n"


def _names_used(source):
    """Names the code reads from outside (ast Name nodes; attribute names like F.pad's `pad` are not
    names; a function's own parameters and assigned locals, such as an `axis` attribute, are not
    free)."""
    tree = ast.parse(textwrap.dedent(source))
    own = {a.arg for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda))
           for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs + [n.args.vararg, n.args.kwarg] if a}
    own |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - own


def _assignment(module, name):
    """The source of the module-level statement that assigns `name`, or None."""
    src = inspect.getsource(module)
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.get_source_segment(src, node) + "\n"
    return None


class _Collector:
    def __init__(self, home):
        self.imports, self.helpers, self.seen = [], [], set()
        self.framework = None  # the module FRAMEWORK stands for, once bound
        self.module, self.globals = None, {}
        self.home = home  # the op function's own module: its helpers are inlined like backends' ones

    def own(self, obj):
        mod = getattr(obj, "__module__", "") or ""
        return mod.startswith("backends") or mod == self.home

    def _import(self, line):
        if line not in self.imports:
            self.imports.append(line)

    def bind(self, n, obj):
        """Make `n` mean `obj` in the script."""
        if n in self.seen or n == "Unsupported":
            return
        self.seen.add(n)
        if isinstance(obj, types.ModuleType):
            if n == FRAMEWORK and "." not in obj.__name__:
                self.framework = obj.__name__
                self._import(f"import {obj.__name__}")
            elif obj.__name__.split(".")[0] != "backends" and obj.__name__ != self.home:
                self._import(f"import {obj.__name__}" + (f" as {n}" if obj.__name__ != n else ""))
        elif isinstance(obj, types.FunctionType) and self.own(obj):
            self.visit(obj)
            self.helpers.append(_function_source(obj, n))
        elif isinstance(obj, type) and self.own(obj):
            src = textwrap.dedent(inspect.getsource(obj))
            self._visit_names(src, vars(sys.modules[obj.__module__]), obj.__module__)
            self.helpers.append(src)
        elif isinstance(obj, (int, float, str, bool, type(None), dict, tuple, list, frozenset)):
            stmt = _assignment(sys.modules[self.module], n) if self.module else None
            if stmt is not None:  # as written in the op table's module, e.g. {2: F.conv2d, ...}
                for m in sorted(_names_used(stmt)):
                    if m != n and m in self.globals:
                        self.bind(m, self.globals[m])
                self.helpers.append(stmt)
            else:
                self.helpers.append(f"{n} = {obj!r}\n")
        else:
            mod = getattr(obj, "__module__", None) or ""
            if mod and mod != "builtins" and hasattr(obj, "__name__"):
                self._import(f"from {mod} import {obj.__name__}" + (f" as {n}" if obj.__name__ != n else ""))

    def _visit_names(self, src, g, module, closure=()):
        outer = (self.module, self.globals)
        self.module, self.globals = module, g
        used = _names_used(src)
        free = dict(closure)
        for n in sorted(used):
            if n in free:
                self.bind(n, free[n])
            elif n in g:
                self.bind(n, g[n])
        self.module, self.globals = outer

    def visit(self, fn):
        src = _lambda_source(fn) if fn.__name__ == "<lambda>" else inspect.getsource(fn)
        closure = [(n, c.cell_contents) for n, c in zip(fn.__code__.co_freevars, fn.__closure__ or ())]
        self._visit_names(src, fn.__globals__, fn.__module__, closure)


def op_source(fn, name="op"):
    """(source block defining `name`, import lines) for the op function `fn`."""
    c = _Collector(getattr(fn, "__module__", None))
    if isinstance(fn, types.FunctionType):
        c.visit(fn)
        main = _function_source(fn, name)
    else:  # a framework builtin registered directly, e.g. torch.sqrt
        mod = getattr(fn, "__module__", None) or "torch"
        c._import(f"import {mod.split('.')[0]}")
        main = f"{name} = {mod.split('.')[0]}.{fn.__name__}\n"
    block = "\n\n".join(c.helpers + [main])
    if c.framework:
        block = _renamed(block, FRAMEWORK, c.framework)
    return _PRELUDE + "\n\n" + block, c.imports


def _renamed(source, old, new):
    """`source` with the name `old` written `new` (names only: not attributes, strings or comments)."""
    lines = source.splitlines(keepends=True)
    spots = [t.start for t in tokenize.generate_tokens(io.StringIO(source).readline)
             if t.type == tokenize.NAME and t.string == old]
    for row, col in reversed(spots):
        line = lines[row - 1]
        if col and line[:col].rstrip().endswith("."):
            continue  # an attribute named like it: `x.framework`
        lines[row - 1] = line[:col] + new + line[col + len(old):]
    return "".join(lines)
