"""`irtrace inspect`: a bundle summary."""
from collections import Counter


def summary(bundle):
    m = bundle.manifest
    g = bundle.model.graph
    ops = Counter((f"{n.domain}::" if n.domain else "") + n.op_type for n in g.node)
    size = sum(f.stat().st_size for f in bundle.path.iterdir() if f.is_file())
    grads = sum(1 for k in bundle.values.keys() if k.startswith("grad/"))
    lines = [
        f"bundle   {bundle.path}",
        f"source   {m['source']['framework']} {m['versions'].get(m['source']['framework'], '')} "
        f"model {m['source'].get('model', '')}",
        f"mode     {m['mode']}   seed {m['seed']}   loss {m['loss']['kind']}",
        f"inputs   " + ", ".join(f"{i['name']} {i['dtype']}[{'x'.join(map(str, i['shape']))}]" for i in m["inputs"]),
        f"outputs  " + ", ".join(m["outputs"]),
        f"nodes    {len(g.node)}   initializers {len(g.initializer)}   values {len(bundle.values)} "
        f"(cotangents {grads})   size {size / 1e6:.2f} MB",
        "ops      " + ", ".join(f"{k} {v}" for k, v in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))),
    ]
    if m.get("state_outputs"):
        lines.append(f"state    {len(m['state_outputs'])} running stats updated in {m['mode']} mode")
    return "\n".join(lines)
