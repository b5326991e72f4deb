"""`python -m backends._runtime.worker NAME`: serve one backend over stdin/stdout.

The backend module `backends.NAME.worker` provides `make_adapter()`; the adapter has a
`table` (OpTable), `modes`, `versions()` and fwd / vjp / vjp2(entry, inputs, attrs, ...).
An adapter that declares `workarounds` (a backends._table.Alternatives beside its op table, in
backends/<name>/workarounds.py) offers alternative formulations: a "run" or "graph" request can
name one in place of an op, "source" gives its code, and "alternatives" lists those of a node's op.
Every request gets exactly one reply: ok, unsupported, or error (with the message).
A crash or hang is the host's to see (EOF / timeout), never hidden here.
"""
import importlib
import os
import sys
import time
import traceback

import numpy as np

from backends._runtime import wire
from backends._runtime.spec import from_json
from backends._runtime.adapter import Computed, NodeFailed, error_text
from backends._table import Unsupported


def serve(name):
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    wire.widen_pipes(stdin, stdout)
    sys.stdout = sys.stderr  # a stray print in a framework must not corrupt the frames
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    module = f"backends.{name}.worker" if os.path.isdir(os.path.join(here, name)) else name
    adapter = importlib.import_module(module).make_adapter()
    while True:
        try:
            msg, arrays = wire.read(stdin)
        except EOFError:
            return
        kind = msg.get("kind")
        if kind == "exit":
            return
        if kind == "batch":  # one reply per call, each with that call's id
            for call, (reply, out) in zip(msg["calls"], batch(adapter, msg, arrays)):
                reply = ending(adapter, reply)
                wire.write(stdout, {**reply, "id": call.get("id")}, out)
                if reply.get("ends"):
                    return  # the batch's other calls, owed by a process that ended, are sent again alone
            del arrays
            wire.release_mapped()  # the inputs viewed in the bundle's file: the file's bytes again, for the next request
            continue
        reply, out = answer(adapter, kind, msg, arrays)
        reply = ending(adapter, reply)
        wire.write(stdout, {**reply, "id": msg.get("id")}, out)  # the host matches replies to requests by id
        del arrays, out
        wire.release_mapped()
        if reply.get("ends"):
            return  # the next call starts another process


def ending(adapter, reply):
    """`reply`, saying "ends" (why) where it is an ERROR after which this process no longer computes a
    Mul's gradient right, and ends once it is written (a framework may keep a broken state after an
    exception: Paddle 3.3's eager engine, after MatMul's double backward of a 1-D operand raised, answers
    every later gradient with zeros, so each later node of a replay would be a finding of its own)."""
    if reply.get("status") != wire.Status.ERROR or "vjp" not in adapter.modes:
        return reply
    a, b, g = (np.array(v, np.float32) for v in ([1.0, 2.0], [3.0, -4.0], [0.5, 2.0]))
    spec = from_json({"name": "irtrace_canary", "op_type": "Mul", "domain": "", "opset": 17, "inputs": ["a", "b"],
                      "outputs": ["y"], "attrs": {}, "out_dtypes": ["<f4"]})
    try:
        entry = adapter.lookup(spec)
    except Exception:  # noqa: BLE001 - no Mul to check with: nothing known against it
        return reply
    try:
        (da, db), _ = adapter.run("vjp", entry, [a, b], spec, [g])
        if np.allclose(da, b * g) and np.allclose(db, a * g):
            return reply
        wrong = f"d/da {np.asarray(da).tolist()}, d/db {np.asarray(db).tolist()} for {(b * g).tolist()}, {(a * g).tolist()}"
    except Exception as e:  # noqa: BLE001 - a Mul's gradient that raises now
        wrong = f"{type(e).__name__}: {e}"[:200]
    return {**reply, "ends": f"after this error, a Mul's gradient comes out wrong in this process ({wrong})"}


def answer(adapter, kind, msg, arrays):
    """(reply, arrays) of one request that is not a batch."""
    if kind == "hello":
        return {"status": wire.Status.OK, "modes": list(adapter.modes), "versions": adapter.versions(),
                "native": bool(adapter.native),
                "workarounds": [list(k) for k in adapter.workarounds.keys()] if adapter.workarounds is not None
                else [], "ops": [list(k) for k in adapter.table.keys()], "pid": os.getpid()}, []
    if kind == "graph":
        return graph(adapter, msg, arrays)
    if kind == "source":
        return source(adapter, msg)
    if kind == "alternatives":
        return alternatives(adapter, msg)
    if kind in ("port-describe", "port-run"):
        if adapter.port is None:
            return {"status": wire.Status.UNSUPPORTED, "message": f"backend {adapter.name!r} runs no ports"}, []
        from backends._runtime import port
        return port.handle(adapter, kind, msg, arrays)
    return handle(adapter, msg, arrays)


def entry_of(adapter, spec, workaround=None):
    """The op-table entry of a node, or with `workaround` (an alternative's name) that alternative's."""
    return adapter.lookup(spec) if workaround is None else adapter.alternative(spec, workaround)


def graph(adapter, msg, arrays):
    """The whole graph chained (msg: specs, feeds, outputs, penalty, and optionally workarounds: node
    name -> the alternative run in place of its op; arrays: feeds then cotangents)."""
    specs = [from_json(d) for d in msg["specs"]]
    feeds = dict(zip(msg["feeds"], arrays[:len(msg["feeds"])]))
    cots = arrays[len(msg["feeds"]):]
    chosen = msg.get("workarounds") or {}
    try:
        pairs = [(entry_of(adapter, s, chosen.get(s.name)), s) for s in specs]
    except Unsupported as e:
        return {"status": wire.Status.UNSUPPORTED, "message": str(e)}, []
    t = time.perf_counter()
    try:
        if msg.get("rounding") and "rounding" in adapter.extras():  # the oracle's float32 rounding estimate
            values, grads = adapter.chained_rounding(pairs, feeds, msg["outputs"], cots, msg.get("penalty", []),
                                                     shapes=msg.get("shapes"), samples=int(msg["rounding"]),
                                                     leaves=msg.get("leaves"))
        else:
            values, grads = adapter.chained(pairs, feeds, msg["outputs"], cots, msg.get("penalty", []),
                                            shapes=msg.get("shapes"), leaves=msg.get("leaves"),
                                            progress=msg.get("progress"))
    except Unsupported as e:
        return {"status": wire.Status.UNSUPPORTED, "message": str(e)}, []
    except NodeFailed as e:  # the host substitutes this node's recorded value and runs the rest
        why = adapter.no_kernel(e.message)  # as replaying the node alone says it
        return {"status": wire.Status.UNSUPPORTED if why else wire.Status.ERROR, "node": e.node,
                "message": why or e.message}, []
    except Exception as e:  # the framework raised somewhere in the chain
        text = error_text(e)
        return {"status": wire.Status.ERROR, "message": text[:2000]}, []
    vnames, gnames = sorted(values), sorted(grads)
    return ({"status": wire.Status.OK, "time_s": time.perf_counter() - t, "values": vnames, "grads": gnames},
            [values[k] for k in vnames] + [grads[k] for k in gnames])


def batch(adapter, msg, arrays):
    """Several "run" requests in one frame (msg: "calls", each a run message, and "counts", the number
    of arrays each takes); yields one reply per call, in order, each written as it is ready (as
    handle's). What the adapter's run_many computes in one go (fwd) is taken from it, the rest is
    handled one by one."""
    calls, parts, at = msg["calls"], [], 0
    for n in msg["counts"]:
        parts.append(arrays[at:at + n])
        at += n
    many = {}
    if msg.get("mode") == "fwd" and "fwd" in adapter.modes and \
            not any(c.get("workaround") or c.get("magnitude") or c.get("rounding") for c in calls):
        try:
            many = adapter.run_many("fwd", [(from_json(c["spec"]), part) for c, part in zip(calls, parts)]) or {}
        except Exception:  # noqa: BLE001 - the batch as a whole failed: every node alone says why
            many = {}
    for k, (call, part) in enumerate(zip(calls, parts)):
        if k in many:
            results, seconds = many[k]
            yield {"status": wire.Status.OK, "time_s": seconds}, list(results)
        else:
            yield handle(adapter, call, part)
            # its reply written (serve asks for the next): whatever it wrote into its inputs is not the next call's
            wire.release_mapped(part)


def alternatives(adapter, msg):
    """The alternatives of a node's op: [{"name", "description", "since"}], in registration order."""
    spec = from_json(msg["spec"])
    return {"status": wire.Status.OK, "alternatives": [{"name": a.name, "description": a.description,
                                                        "since": a.since} for a in adapter.alternatives(spec)]}, []


def source(adapter, msg):
    """The op function of a node, and the framework's autodiff module, as script text. With
    "workaround": NAME, that alternative's function instead, under its own name."""
    from backends._runtime.source import _PRELUDE, op_source
    spec = from_json(msg["spec"])
    name = msg.get("workaround")
    if name is not None:
        try:
            adapter.alternative(spec, name)
            fn = {a.name: a for a in adapter.alternatives(spec)}[name].fn
            body, imports = op_source(fn, name=name)
            if body.startswith(_PRELUDE) and "Unsupported" not in body[len(_PRELUDE):]:
                body = body[len(_PRELUDE):].lstrip("\n")  # it never raises Unsupported: no class for it
        except Unsupported as e:
            return {"status": wire.Status.UNSUPPORTED, "message": str(e)}, []
        except Exception as e:  # noqa: BLE001 - a function irtrace cannot lift out; the worker lives on
            return {"status": wire.Status.ERROR,
                    "message": f"cannot extract the alternative's source: {type(e).__name__}: {e}"}, []
        return {"status": wire.Status.OK, "op": body, "imports": imports,
                "defined_in": f"{fn.__module__}.{fn.__name__}"}, []
    try:
        entry = adapter.lookup(spec)
    except Unsupported as e:
        return {"status": wire.Status.UNSUPPORTED, "message": str(e)}, []
    if adapter.script is None or (adapter.op_block is None and (entry is None or entry.fn is None)):
        return {"status": wire.Status.UNSUPPORTED, "message": f"backend {adapter.name!r} writes no repro scripts"}, []
    try:
        body, imports = adapter.op_block(spec) if adapter.op_block is not None else op_source(entry.fn)
    except Exception as e:  # a function irtrace cannot lift out: no script, but the worker lives on
        return {"status": wire.Status.ERROR, "message": f"cannot extract the op's source: {type(e).__name__}: {e}"}, []
    return {"status": wire.Status.OK, "op": body, "imports": imports, "script": adapter.script(),
            "versions": adapter.versions(), "nondiff": list(entry.flags.get("nondiff", ())) if entry else [],
            "defined_in": f"the ONNX node as {adapter.name} executes it" if adapter.op_block is not None else
            f"{entry.fn.__module__}.{entry.fn.__name__}"}, []


def handle(adapter, msg, arrays):
    spec = from_json(msg["spec"])
    mode = msg["mode"]
    n_in, n_out = len(spec.inputs), len(spec.outputs)
    inputs = arrays[:n_in]
    try:
        if mode not in adapter.modes:  # before lookup: "does not compute vjp" says more than a missing op
            raise Unsupported(f"backend {adapter.name!r} does not compute {mode}")
        entry = entry_of(adapter, spec, msg.get("workaround"))
        out, seconds = adapter.run(mode, entry, inputs, spec, arrays[n_in:n_in + n_out], arrays[n_in + n_out:],
                                   wrt=msg.get("wrt"), part=msg.get("part"))
    except Unsupported as e:
        return {"status": wire.Status.UNSUPPORTED, "message": str(e)}, []
    except Exception as e:  # the framework raised: an ERROR verdict with its message
        # a backend's autodiff module raises its own ShapeMismatch (the module is inlined verbatim in repro
        # scripts, so it imports nothing of irtrace's and the class is known here by its name)
        if type(e).__name__ == "ShapeMismatch":
            return {"status": wire.Status.SHAPE_MISMATCH, "message": str(e)}, []
        last = traceback.extract_tb(e.__traceback__)[-1]
        text = error_text(e)  # MegEngine appends C++ backtraces and chains its AsyncError's cause
        return {"status": wire.Status.ERROR, "message": text[:2000],
                "where": f"{os.path.basename(last.filename)}:{last.lineno}"}, []
    reply = {"status": wire.Status.OK, "time_s": seconds}
    if adapter.last_check is not None:
        reply["check"] = adapter.last_check
    computed = Computed(mode, entry, inputs, spec, arrays[n_in:n_in + n_out], arrays[n_in + n_out:],
                        msg.get("wrt"), msg.get("part"), list(out))
    for name, compute in adapter.extras().items():
        # answer fields beyond the results, asked for by name (the oracle's): each a list of groups of
        # arrays, appended after the results and declared in the reply by the sizes of its groups
        request = msg.get(name)
        if request is None or request is False:
            continue
        try:
            groups = [list(g) for g in compute(computed, request)]
        except Exception as e:  # noqa: BLE001 - nothing of this field for this node: the verdicts say so
            reply[f"{name}_error"] = f"{type(e).__name__}: {e}"[:300]
            continue
        reply.setdefault("extra", {})[name] = [len(g) for g in groups]
        out += [a for g in groups for a in g]
    if msg.get("extra_only"):  # asked for its extra fields alone (the caller has the results): not sent again
        out = out[len(computed.results):]
    return reply, out


if __name__ == "__main__":
    serve(sys.argv[1])
    # asked to exit (or the host gone): ended without the interpreter's teardown of the framework (MegEngine's took
    # 0.7 s here, TensorFlow's 0.5 s, each waited for at the end of a replay); nothing of this process's is left to
    # keep but what it wrote to its streams
    for stream in (sys.stdout, sys.stderr, sys.__stdout__):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001,S110 - a closed stream at exit
            pass
    os._exit(0)
