"""What a torch module returns, as the export names it: tensors in the containers real models return
(tuples, lists, dicts, dataclasses, ModelOutputs, pytree caches), flattened in torch.export's order."""
from irtrace.errors import IrtraceError


def numpy_of(t):
    """A torch tensor's values as numpy (detached, on the CPU; bfloat16, which Tensor.numpy() refuses, as
    ml_dtypes' bfloat16, the same bits): the torch backend's own conversion, imported when first needed
    (importing irtrace does not import torch)."""
    from backends.torch.autodiff import to_numpy
    return to_numpy(t)


def flatten(out, path=""):
    """The model's output as [(path, tensor)], in the order torch.export flattens it: tensors,
    tuples/lists (path `0`, `1`, ...), dicts and ModelOutput-like mappings (by key; None values are
    left out, as ModelOutput does), dataclasses (by field), and caches that flatten as pytrees
    (transformers' DynamicCache: `past_key_values.layers.0.keys` ...). Anything else raises one
    line saying where it is and what to pass."""
    import dataclasses

    import torch
    from torch.utils import _pytree as pytree
    join = (lambda k: f"{path}.{k}" if path else str(k))
    if isinstance(out, torch.Tensor):
        return [(path or "output", out)]
    if out is None:
        return []
    if isinstance(out, (list, tuple)):
        return [t for i, o in enumerate(out) for t in flatten(o, join(i))]
    if isinstance(out, dict):
        return [t for k in out for t in flatten(out[k], join(k))]
    if dataclasses.is_dataclass(out) and not isinstance(out, type):
        return [t for f in dataclasses.fields(out) for t in flatten(getattr(out, f.name), join(f.name))]
    if type(out) in pytree.SUPPORTED_NODES:
        children, context = pytree.SUPPORTED_NODES[type(out)].flatten_fn(out)
        keys = _pytree_keys(out, context, len(children))
        return [t for k, c in zip(keys, children) for t in flatten(c, join(k))]
    where = f" at output {path!r}" if path else ""
    hint = (" (a cache: pass use_cache=False to the model, e.g. in a wrapper module's forward)"
            if "cache" in type(out).__name__.lower() else " (return only the tensors you want compared)")
    raise IrtraceError(f"the model returned a {type(out).__name__}{where}; irtrace needs tensors, or tuples, "
                       f"lists, dicts, dataclasses or ModelOutputs of them{hint}")



def register_dataclasses(out):
    """torch.export returns only registered pytree types: a plain dataclass the model returns is
    registered with torch.export.register_dataclass (fields in order), as a user would."""
    import dataclasses

    import torch
    from torch.utils import _pytree as pytree
    if isinstance(out, (list, tuple)):
        for o in out:
            register_dataclasses(o)
    elif isinstance(out, dict):
        for o in out.values():
            register_dataclasses(o)
    elif dataclasses.is_dataclass(out) and not isinstance(out, type):
        if type(out) not in pytree.SUPPORTED_NODES:
            torch.export.register_dataclass(type(out))
        for f in dataclasses.fields(out):
            register_dataclasses(getattr(out, f.name))



def _pytree_keys(obj, context, n):
    """Names for a registered pytree node's children: its flatten_with_keys names where it has them."""
    from torch.utils import _pytree as pytree
    entry = pytree.SUPPORTED_NODES[type(obj)]
    if getattr(entry, "flatten_with_keys_fn", None) is not None:
        try:
            pairs, _ = entry.flatten_with_keys_fn(obj)
            names = []
            for k, _c in pairs:
                text = getattr(k, "name", None) or getattr(k, "key", None)
                names.append(str(text if text is not None else getattr(k, "idx", len(names))))
            if len(names) == n:
                return names
        except Exception:  # noqa: BLE001 (names are cosmetic; positions always work)
            pass
    if isinstance(context, (list, tuple)) and len(context) == n and all(isinstance(c, str) for c in context):
        return list(context)
    return [str(i) for i in range(n)]



def is_container(out):
    """True when the output has names worth giving the graph's outputs (a mapping or a record)."""
    import dataclasses

    import torch
    return not isinstance(out, (torch.Tensor, list, tuple)) and out is not None and (
        isinstance(out, dict) or dataclasses.is_dataclass(out))
