"""`irtrace inspect`: a bundle summary."""
from collections import Counter


def facts(bundle):
    """What `irtrace inspect` says of a bundle, as data (`--format json`)."""
    m = bundle.manifest
    g = bundle.model.graph
    ops = Counter((f"{n.domain}::" if n.domain else "") + n.op_type for n in g.node)
    framework = m["source"]["framework"]
    return {
        "bundle": str(bundle.path),
        "source": {"framework": framework, "version": m["versions"].get(framework, ""),
                   "model": m["source"].get("model", "")},
        "mode": m["mode"], "seed": m["seed"], "loss": m["loss"]["kind"],
        "inputs": [{"name": i["name"], "dtype": i["dtype"], "shape": list(i["shape"])} for i in m["inputs"]],
        "outputs": list(m["outputs"]),
        "nodes": len(g.node), "initializers": len(g.initializer), "values": len(bundle.values),
        "cotangents": sum(1 for k in bundle.values.keys() if k.startswith("grad/")),
        "bytes": sum(f.stat().st_size for f in bundle.path.iterdir() if f.is_file()),
        "ops": dict(sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))),
        "state_outputs": len(m.get("state_outputs") or []),
    }


def summary(bundle):
    f = facts(bundle)
    src = f["source"]
    lines = [
        f"bundle   {f['bundle']}",
        f"source   {src['framework']} {src['version']} model {src['model']}",
        f"mode     {f['mode']}   seed {f['seed']}   loss {f['loss']}",
        "inputs   " + ", ".join(f"{i['name']} {i['dtype']}[{'x'.join(map(str, i['shape']))}]" for i in f["inputs"]),
        "outputs  " + ", ".join(f["outputs"]),
        f"nodes    {f['nodes']}   initializers {f['initializers']}   values {f['values']} "
        f"(cotangents {f['cotangents']})   size {f['bytes'] / 1e6:.2f} MB",
        "ops      " + ", ".join(f"{k} {v}" for k, v in f["ops"].items()),
    ]
    if f["state_outputs"]:
        lines.append(f"state    {f['state_outputs']} running stats updated in {f['mode']} mode")
    return "\n".join(lines)
