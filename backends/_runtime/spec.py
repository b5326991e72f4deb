"""The node spec as a worker sees it (decoded from the host's JSON)."""
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class WorkerSpec:
    name: str
    op_type: str
    domain: str
    opset: int
    inputs: tuple
    outputs: tuple
    attrs: dict
    proto: str = ""   # base64 NodeProto, for backends that execute ONNX natively
    out_dtypes: tuple = ()  # numpy dtype strings of the recorded outputs ("" where unknown)


def _attr(v):
    if isinstance(v, dict) and "__tensor__" in v:
        t = v["__tensor__"]
        return np.array(t["data"], dtype=np.dtype(t["dtype"])).reshape(t["shape"])
    return v


def from_json(d):
    return WorkerSpec(d["name"], d["op_type"], d["domain"], d["opset"], tuple(d["inputs"]), tuple(d["outputs"]),
                      {k: _attr(v) for k, v in d["attrs"].items()}, d.get("proto", ""),
                      tuple(d.get("out_dtypes", ())))
