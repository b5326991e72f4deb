"""The schema of a bundle's manifest.json (docs/bundle.md): what an exporter writes and what
`store_check.check_manifest` checks on open, in one place.

The manifest is JSON, so its records are TypedDicts: a writer builds one by calling it
(`Source(framework="torch", model=...)` is a plain dict, in the key order of the call) and a reader
indexes it as before. Required keys are the ones a bundle must have to open; NotRequired ones may be
missing (older bundles, or what an importer does not know). The types are what the checker enforces:
`str`, `bool`, `int` (not a bool), `float` (any number but a bool), `Literal` (one of its values),
`NonNegativeInt`, `list[...]`, `dict[str, ...]` (an object keyed by strings), `X | None`, a nested
TypedDict, and plain `dict` (any object). Extra keys are allowed everywhere: a bundle written by a
newer irtrace of the same schema still opens.
"""
import json
from typing import Final, Literal, NewType, NotRequired, TypedDict

SCHEMA: Final = "irtrace.bundle/1"
NonNegativeInt = NewType("NonNegativeInt", int)  # a dimension of a shape


class Source(TypedDict):
    """Where the model came from."""
    framework: str           # torch, onnx, tensorflow
    model: NotRequired[str]  # the model's class or file (`module:factory` when exported from the CLI)


class Loss(TypedDict):
    """The scalar L whose gradients the bundle records."""
    kind: str                        # dot, sum, grad-penalty (export/record.py LOSSES)
    definition: NotRequired[str]     # L written out, with how its seeds are drawn
    outputs: NotRequired[list[str]]  # the graph outputs L is computed from


class InputSpec(TypedDict):
    """One graph input, as recorded in values.safetensors under its name."""
    name: str
    dtype: str                   # numpy's name: float32, int64, ...
    shape: list[NonNegativeInt]


# What a node of graph.onnx was in the source model; keys an exporter did not find are absent.
# Spelled as a call because `class` is a Python keyword.
NodeSource = TypedDict("NodeSource", {
    "module": str,           # module path (block2.layer.0.conv1) or, for TF, the layer name
    "class": str,            # the module's class (torch.nn.modules.conv.Conv2d)
    "fx_node": str,          # the torch.fx node it came from (conv2d_3)
    "fx_op": str,            # the aten op (aten.conv2d.default)
    "file_line": str,        # the last user-code frame that made the node: path:line
    "original_attrs": dict,  # only for nodes canonicalization changed: their attributes as they were
    "layout_only": bool,     # a Transpose tf2onnx inserted between NHWC and NCHW, not one of the model's
}, total=False)


class Manifest(TypedDict):
    """manifest.json. Writers give every key, in this order (the torch export) or the ONNX import's."""
    schema: Literal[SCHEMA]                 # store.load refuses any other before the other checks
    name: NotRequired[str]                  # the model, as reports name it
    source: Source
    versions: dict[str, str]                # package -> version of what exported it (irtrace, torch, onnx, ...)
    mode: Literal["train", "eval"]
    seed: int                               # seeds masks, cotangents (seed + 1), vjp2 directions (torch, seed + 2)
    loss: Loss
    inputs: list[InputSpec]
    outputs: list[str]                      # the model's outputs; the loss is over these
    state_outputs: NotRequired[dict[str, str]]  # state_dict key -> value name of its updated running stat
    parameters: NotRequired[list[str] | None]   # initializers that are the model's parameters
    buffers: NotRequired[list[str] | None]      # other state: running stats, filters; inputs standing for them
    # what the model differentiates (float inputs and parameters); absent or null in older bundles,
    # where every float initializer counts
    differentiable: NotRequired[list[str] | None]
    trained: NotRequired[list[str] | None]      # what a training step on the model differentiates
    timings: NotRequired[dict[str, float]]      # seconds, e.g. torch_onnx_export_s
    nodes: dict[str, NodeSource]            # node name -> its source; every node of graph.onnx, no other


REQUIRED = tuple(k for k in Manifest.__annotations__ if k in Manifest.__required_keys__)


def dumps(manifest):
    """The text of manifest.json: strict JSON (no NaN, as store.load reads it), keys in the writer's order.
    ValueError for a value JSON cannot hold."""
    return json.dumps(manifest, indent=1, allow_nan=False) + "\n"
