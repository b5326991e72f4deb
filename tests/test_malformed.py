"""Malformed bundles and arguments: a generated corpus, and a property test.

Every case starts from one small valid bundle (conv + relu, exported once per module) and breaks
one thing: a byte, a header field, a manifest field, the graph, an argument. Each runs through
the real CLI in-process (irtrace.cli.main) and must give exit 2 (never 1: 1 means findings),
exactly one line on stderr naming the file and the field, no traceback, and nothing written:
validation comes before any allocation and before a replay runs.
"""
import contextlib
import io
import json
import os
import re
import shutil
import struct
import tempfile
from pathlib import Path

import pytest

from irtrace.cli import main

VALUES, MANIFEST, GRAPH = "values.safetensors", "manifest.json", "graph.onnx"


@pytest.fixture(scope="module")
def valid(tmp_path_factory):
    """The valid bundle every case mutates (a copy of it)."""
    import torch
    import irtrace

    class ConvRelu(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 2, 3, padding=1)

        def forward(self, x):
            return torch.relu(self.conv(x))

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("valid") / "t.irt"
    irtrace.export(ConvRelu(), (torch.randn(1, 1, 4, 4),), path)
    return path


def run_cli(argv):
    """(exit code, stdout, stderr) of `irtrace ARGV`, in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def tree(root):
    return sorted(str(p.relative_to(root)) for p in Path(root).rglob("*"))


# --- the values file: 8-byte little-endian header length, JSON header, data ---

def split_values(bundle):
    raw = (bundle / VALUES).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def write_values(bundle, header, data, length=None):
    """Write `header` (a JSON-able object, or bytes as they are) and `data`; `length`: the 8-byte field."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    n = len(text) if length is None else length
    (bundle / VALUES).write_bytes(n.to_bytes(8, "little") + text + data)


def header_edit(edit):
    """A mutation that applies `edit(header, data) -> (header, data)` to the values file."""
    def mutate(bundle):
        header, data = split_values(bundle)
        write_values(bundle, *edit(header, data))
    return mutate


def tensor_field(name, key, value):
    def edit(header, data):
        header[name][key] = value
        return header, data
    return header_edit(edit)


def raw_values(make):
    """A mutation writing make(header bytes, data) -> whole file bytes."""
    def mutate(bundle):
        raw = (bundle / VALUES).read_bytes()
        n = int.from_bytes(raw[:8], "little")
        (bundle / VALUES).write_bytes(make(raw[8:8 + n], raw[8 + n:], raw))
    return mutate


def length_field(n):
    return raw_values(lambda h, d, raw: n.to_bytes(8, "little") + raw[8:])


def _drop_last_tensor(header, data):
    name = max((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][1])
    b, _ = header.pop(name)["data_offsets"]
    return header, data[:b]


def _deep(depth):
    return b"[" * depth + b"]" * depth


def _with_header(text, data):
    return len(text).to_bytes(8, "little") + text + data


def _shift(header, data, name, by):
    """Move `name` and everything after it `by` bytes later, leaving a gap of zeros."""
    begin = header[name]["data_offsets"][0]
    for k, v in header.items():
        if k != "__metadata__" and v["data_offsets"][0] >= begin:
            v["data_offsets"] = [v["data_offsets"][0] + by, v["data_offsets"][1] + by]
    return header, data[:begin] + b"\0" * by + data[begin:]


W = "conv.weight"   # F32 [2, 1, 3, 3], 72 bytes at [8, 80)
HEADER_CASES = [
    ("length 2**40", length_field(2 ** 40), r"header length 1099511627776 is over"),
    ("length 2**64-1", length_field(2 ** 64 - 1), r"header length 18446744073709551615 is over"),
    ("length past file", raw_values(lambda h, d, raw: (len(raw)).to_bytes(8, "little") + raw[8:]),
     r"larger than the file"),
    ("length zero", length_field(0), r"header.*not valid JSON"),
    ("empty file", raw_values(lambda h, d, raw: b""), r"0 bytes, too short"),
    ("5 bytes", raw_values(lambda h, d, raw: raw[:5]), r"5 bytes, too short"),
    ("truncated data", raw_values(lambda h, d, raw: raw[:-10]), r"data_offsets \[\d+, \d+\] outside the data"),
    ("trailing bytes", raw_values(lambda h, d, raw: raw + b"\0" * 8), r"at the end of the data section belong to no"),
    ("header a list", raw_values(lambda h, d, raw: len(b"[]").to_bytes(8, "little") + b"[]" + d),
     r"header is a JSON list, expected an object"),
    ("header a string", raw_values(lambda h, d, raw: len(b'"x"').to_bytes(8, "little") + b'"x"' + d),
     r"header is a JSON str"),
    ("deep nesting 100000", raw_values(lambda h, d, raw: len(_deep(100000)).to_bytes(8, "little") + _deep(100000)),
     r"nested too deeply"),
    ("deep nesting 200", raw_values(lambda h, d, raw: len(_deep(200)).to_bytes(8, "little") + _deep(200)),
     r"nested (too|deeper)"),
    ("header not UTF-8", raw_values(lambda h, d, raw: raw[:8] + h.replace(b"conv.bias", b"conv.bia\xff") + d),
     r"header: not UTF-8 text \(byte \d+"),
    ("header garbage", raw_values(lambda h, d, raw: raw[:8] + b"{" + b"\x01" * (len(h) - 1) + d), r"not valid JSON"),
    ("header NaN", raw_values(lambda h, d, raw: _with_header(h.replace(b'"shape":[2]', b'"shape":[NaN]', 1), d)),
     r"header: not valid JSON \(NaN is not a JSON number"),
    ("duplicate tensor", raw_values(lambda h, d, raw: _with_header(
        b'{"x": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}, '
        b'"x": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}}', b"")), r"duplicate key 'x'"),
    # bfloat16 is stored (the fuzzer's low-precision cases): a float32 tensor relabelled BF16 is half its bytes
    ("dtype BF16 over F32 bytes", tensor_field(W, "dtype", "BF16"),
     r"tensor 'conv.weight': BF16 \[2, 1, 3, 3\] needs 36 bytes but data_offsets \[\d+, \d+\] hold 72"),
    ("dtype F8_E4M3", tensor_field(W, "dtype", "F8_E4M3"), r"tensor 'conv.weight': dtype 'F8_E4M3' is not supported"),
    ("dtype number", tensor_field(W, "dtype", 4), r"tensor 'conv.weight': dtype 4 is not"),
    ("dtype lowercase", tensor_field(W, "dtype", "f32"), r"dtype 'f32' is not supported"),
    ("shape negative", tensor_field(W, "shape", [-2, 1, 3, 3]), r"tensor 'conv.weight': shape \[-2, 1, 3, 3\] is not"),
    ("shape floats", tensor_field(W, "shape", [2.0, 1, 3, 3]), r"tensor 'conv.weight': shape"),
    ("shape string", tensor_field(W, "shape", "2x1x3x3"), r"tensor 'conv.weight': shape '2x1x3x3'"),
    ("shape bools", tensor_field(W, "shape", [True, 1]), r"tensor 'conv.weight': shape \[True, 1\]"),
    ("shape 65 dims", tensor_field(W, "shape", [1] * 65), r"at most 64 non-negative"),
    ("shape mismatch", tensor_field(W, "shape", [2, 1, 3, 4]), r"'conv.weight': F32 \[2, 1, 3, 4\] needs 96 bytes "
                                                               r"but data_offsets \[8, 80\] hold 72"),
    ("itemsize mismatch", tensor_field(W, "dtype", "F64"), r"'conv.weight': F64 .* needs 144 bytes"),
    ("offsets negative", tensor_field(W, "data_offsets", [-8, 64]), r"data_offsets \[-8, 64\] outside the data"),
    ("offsets reversed", tensor_field(W, "data_offsets", [80, 8]), r"data_offsets \[80, 8\] outside"),
    ("offsets out of range", tensor_field(W, "data_offsets", [8, 10 ** 9]), r"outside the data section of 1328"),
    ("offsets 2**64", tensor_field(W, "data_offsets", [2 ** 64, 2 ** 64 + 72]), r"outside the data section"),
    ("offsets three", tensor_field(W, "data_offsets", [8, 80, 90]), r"not a pair of integers"),
    ("offsets strings", tensor_field(W, "data_offsets", ["8", "80"]), r"not a pair of integers"),
    ("offsets floats", tensor_field(W, "data_offsets", [8.0, 80.0]), r"not a pair of integers"),
    ("offsets bools", tensor_field(W, "data_offsets", [False, True]), r"not a pair of integers"),
    ("zero-length range", tensor_field(W, "data_offsets", [8, 8]), r"'conv.weight': F32 \[2, 1, 3, 3\] needs 72 "
                                                                   r"bytes but data_offsets \[8, 8\] hold 0"),
    ("overlapping ranges", tensor_field(W, "data_offsets", [0, 72]), r"tensors 'conv.bias' and 'conv.weight' overlap"),
    ("same range twice", tensor_field("grad/relu", "data_offsets", [736, 864]), r"'grad/relu' and 'relu' overlap|"
                                                                                 r"'relu' and 'grad/relu' overlap"),
    ("gap", header_edit(lambda h, d: _shift(h, d, "conv2d", 8)),
     r"bytes \[80, 88\) of the data section belong to no tensor"),
    ("huge shape no data", tensor_field(W, "shape", [10 ** 9]), r"F32 \[1000000000\] needs 4000000000 bytes"),
    ("shape over memory", tensor_field(W, "shape", [10 ** 12]), r"over the memory budget"),
    ("shape 2**70", tensor_field(W, "shape", [2 ** 35, 2 ** 35]), r"over the memory budget"),
    ("missing data_offsets", header_edit(lambda h, d: ({**h, W: {"dtype": "F32", "shape": [2, 1, 3, 3]}}, d)),
     r"tensor 'conv.weight': missing data_offsets"),
    ("unknown field", tensor_field(W, "offsets", [8, 80]), r"tensor 'conv.weight': unknown field 'offsets'"),
    ("entry a list", header_edit(lambda h, d: ({**h, W: [8, 80]}, d)), r"tensor 'conv.weight': entry is a JSON list"),
    ("metadata a list", header_edit(lambda h, d: ({**h, "__metadata__": ["x"]}, d)), r"__metadata__ must map"),
    ("metadata number", header_edit(lambda h, d: ({**h, "__metadata__": {"schema": 1}}, d)), r"__metadata__ must map"),
    ("tensor removed", header_edit(lambda h, d: ({k: v for k, v in h.items() if k != "conv2d"}, d)),
     r"bytes \[80, 208\) of the data section belong to no tensor"),
    ("input value missing", header_edit(_drop_last_tensor), r"values.safetensors: input 'x' of manifest.json has no"),
    ("input dtype changed", tensor_field("x", "dtype", "I32"), r"input 'x' is int32\[1, 1, 4, 4\] but manifest.json"),
    ("output value missing", header_edit(lambda h, d: ({("gone" if k == "relu" else k): v for k, v in h.items()}, d)),
     r"output 'relu' of manifest.json has no recorded value"),
]


# --- the manifest ---

def manifest_edit(edit):
    def mutate(bundle):
        m = json.loads((bundle / MANIFEST).read_text())
        edit(m)
        (bundle / MANIFEST).write_text(json.dumps(m))
    return mutate


def set_path(keys, value):
    def edit(m):
        target = m
        for k in keys[:-1]:
            target = target[k]
        target[keys[-1]] = value
    return manifest_edit(edit)


def raw_manifest(data):
    def mutate(bundle):
        (bundle / MANIFEST).write_bytes(data)
    return mutate


def _delete(key):
    return manifest_edit(lambda m: m.pop(key))


REQUIRED = ("source", "versions", "mode", "seed", "loss", "inputs", "outputs", "nodes")
WRONG_TYPES = [  # (field path, wrong value, what the message names)
    (("name",), 7, r"field name must be a string"),
    (("source",), "torch", r"field source must be an object"),
    (("source", "framework"), None, r"field source must be"),
    (("source", "model"), ["m"], r"field source.model must be a string"),
    (("versions",), ["2.13"], r"field versions must be an object of strings"),
    (("versions", "torch"), 2.13, r"field versions must be an object of strings"),
    (("mode",), "training", r"field mode must be 'train' or 'eval'"),
    (("mode",), None, r"field mode must be"),
    (("seed",), "0", r"field seed must be an integer"),
    (("seed",), 1.5, r"field seed must be an integer"),
    (("seed",), True, r"field seed must be an integer"),
    (("loss",), "dot", r"field loss must be an object"),
    (("loss", "kind"), 3, r"field loss must be an object with a string 'kind'"),
    (("loss", "definition"), {"x": 1}, r"field loss.definition must be a string"),
    (("loss", "outputs"), "relu", r"field loss.outputs must be a list of strings"),
    (("inputs",), {"x": [1]}, r"field inputs must be a list"),
    (("inputs", 0), "x", r"field inputs\[0\] must be an object"),
    (("inputs", 0, "name"), 0, r"field inputs\[0\].name must be a string"),
    (("inputs", 0, "dtype"), None, r"field inputs\[0\].dtype must be a string"),
    (("inputs", 0, "shape"), "1x1x4x4", r"field inputs\[0\].shape must be a list of non-negative"),
    (("inputs", 0, "shape"), [1, -1, 4, 4], r"field inputs\[0\].shape"),
    (("inputs", 0, "shape"), [1, 1, 4, 5], r"input 'x' is float32\[1, 1, 4, 4\] but manifest.json declares"),
    (("inputs", 0, "dtype"), "float64", r"input 'x' is float32.* declares 'float64'"),
    (("outputs",), "relu", r"field outputs must be a list of strings"),
    (("outputs",), [1], r"field outputs must be a list of strings"),
    (("parameters",), "conv.weight", r"field parameters must be a list of strings"),
    (("differentiable",), [None], r"field differentiable must be a list of strings"),
    (("state_outputs",), [], r"field state_outputs must be an object of strings"),
    (("timings",), {"t": "fast"}, r"field timings must be an object of numbers"),
    (("nodes",), ["node_relu"], r"field nodes must be an object"),
    (("nodes", "node_relu"), "relu", r"field nodes\['node_relu'\] must be an object"),
    (("nodes", "node_conv2d", "module"), ["conv"], r"field nodes\['node_conv2d'\].module must be a string"),
    (("nodes", "node_conv2d", "file_line"), 5, r"field nodes\['node_conv2d'\].file_line must be a string"),
    (("nodes", "node_conv2d", "original_attrs"), [1], r"nodes\['node_conv2d'\].original_attrs must be an object"),
    (("schema",), "irtrace.bundle/2", r"bundle schema 'irtrace.bundle/2' is not supported"),
    (("schema",), ["irtrace.bundle/1"], r"bundle schema \['irtrace.bundle/1'\] is not supported"),
]
MANIFEST_CASES = [
    *[(f"manifest {'.'.join(map(str, path))}={value!r}", set_path(path, value), msg)
      for path, value, msg in WRONG_TYPES],
    *[(f"manifest without {k}", _delete(k), rf"manifest.json: missing keys {k}$") for k in REQUIRED],
    ("manifest a list", raw_manifest(b"[1, 2]"), r"manifest.json: a JSON list, expected an object"),
    ("manifest empty", raw_manifest(b""), r"manifest.json: not valid JSON"),
    ("manifest garbage", raw_manifest(b"\x00garbage"), r"manifest.json: not valid JSON"),
    ("manifest not UTF-8", raw_manifest(b'{"schema": "\xff"}'), r"manifest.json: not UTF-8 text \(byte 12"),
    ("manifest deep", raw_manifest(b'{"a":' * 100000 + b"1" + b"}" * 100000), r"manifest.json: JSON nested too"),
    ("manifest deep 100", raw_manifest(b'{"a":' * 100 + b"1" + b"}" * 100), r"manifest.json: JSON nested"),
    ("manifest NaN", raw_manifest(b'{"schema": NaN}'), r"manifest.json: not valid JSON \(NaN is not"),
    ("manifest Infinity", raw_manifest(b'{"seed": -Infinity}'), r"-Infinity is not a JSON number"),
    ("manifest duplicate key", raw_manifest(b'{"schema": "irtrace.bundle/1", "schema": "x"}'),
     r"manifest.json: not valid JSON \(duplicate key 'schema'\)"),
    ("manifest huge int", raw_manifest(b'{"seed": ' + b"9" * 5000 + b"}"), r"manifest.json: not valid JSON"),
    # the manifest's claims about the graph: names that exist, and a differentiable list that
    # keeps every parameter and float input (one that drops a weight would stop judging its gradients)
    ("manifest differentiable ghost", set_path(("differentiable",), ["conv.bias", "conv.weight", "x", "ghost"]),
     r"manifest.json: differentiable names 'ghost', which is not an input or an initializer of graph.onnx"),
    ("manifest parameters ghost", set_path(("parameters",), ["conv.weight", "conv.bias", "ghost"]),
     r"manifest.json: parameters names 'ghost', which is not an initializer of graph.onnx"),
    ("manifest buffers ghost", set_path(("buffers",), ["running_ghost"]),
     r"manifest.json: buffers names 'running_ghost', which is not an input or an initializer"),
    ("manifest differentiable without a weight", set_path(("differentiable",), ["conv.bias", "x"]),
     r"manifest.json: differentiable omits the parameter 'conv.weight'; .* their gradients would go unjudged"),
    ("manifest differentiable without the input", set_path(("differentiable",), ["conv.bias", "conv.weight"]),
     r"manifest.json: differentiable omits the float graph input 'x'"),
    ("manifest differentiable empty", set_path(("differentiable",), []),
     r"manifest.json: differentiable omits the parameter 'conv.bias' \(and 2 more\)"),
]


# --- the graph ---

def graph_edit(edit):
    def mutate(bundle):
        import onnx
        model = onnx.load(str(bundle / GRAPH), load_external_data=False)
        edit(model)
        (bundle / GRAPH).write_bytes(model.SerializeToString())
    return mutate


def graph_bytes(make):
    def mutate(bundle):
        (bundle / GRAPH).write_bytes(make((bundle / GRAPH).read_bytes()))
    return mutate


def _external(model):
    from onnx import TensorProto
    t = next(t for t in model.graph.initializer if t.name == W)
    t.ClearField("raw_data")
    t.ClearField("float_data")
    t.data_location = TensorProto.EXTERNAL
    del t.external_data[:]
    entry = t.external_data.add()
    entry.key, entry.value = "location", "../../../etc/passwd"


def _external_field(name=W, **fields):
    """An edit of initializer `name`'s external data: `fields` replace entries (None drops one); a
    tensor that was inline is made external (its data dropped) first."""
    def edit(model):
        from onnx import TensorProto
        t = next(t for t in model.graph.initializer if t.name == name)
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        entries = {e.key: e.value for e in t.external_data}
        for k, v in fields.items():
            entries.pop(k, None) if v is None else entries.__setitem__(k, v(entries.get(k)) if callable(v) else v)
        del t.external_data[:]
        for k, v in entries.items():
            e = t.external_data.add()
            e.key, e.value = k, v
    return edit


def _weight_extent(model):
    t = next(t for t in model.graph.initializer if t.name == W)
    return {e.key: e.value for e in t.external_data}


def _bias_aliases_weight(model):
    """The bias refers to the weight's bytes (location, offset, length all those of the weight)."""
    entries = _weight_extent(model)
    _external_field("conv.bias", **entries)(model)


def _ghost(model):
    """A new initializer, stored externally under a name the value store does not hold."""
    from onnx import numpy_helper
    import numpy as np
    t = model.graph.initializer.add()
    t.CopyFrom(numpy_helper.from_array(np.zeros(18, np.float32), "ghost"))
    _external_field("ghost", **_weight_extent(model))(model)


def _retype(data_type=None, dims=None):
    def edit(model):
        t = next(t for t in model.graph.initializer if t.name == W)
        if data_type is not None:
            t.data_type = data_type
        if dims is not None:
            del t.dims[:]
            t.dims.extend(dims)
    return edit


def _inline_too(model):
    next(t for t in model.graph.initializer if t.name == W).raw_data = b"\0" * 72


def _rename(old, new):
    def edit(model):
        for n in model.graph.node:
            if n.name == old:
                n.name = new
    return edit


def _drop_node(model):
    del model.graph.node[-1]


def _opset(version):
    def edit(model):
        for o in model.opset_import:
            if o.domain in ("", "ai.onnx"):
                o.version = version
    return edit


def _attribute_name(name):
    def edit(model):
        next(n for n in model.graph.node if n.op_type == "Conv").attribute[0].name = name
    return edit


GRAPH_CASES = [
    ("graph empty file", graph_bytes(lambda b: b""), r"graph.onnx: the ONNX model has no graph"),
    ("graph garbage", graph_bytes(lambda b: b"\xff\xfe garbage " * 40), r"graph.onnx: not an ONNX model"),
    ("graph truncated half", graph_bytes(lambda b: b[:len(b) // 2]), r"graph.onnx: not an ONNX model"),
    ("graph truncated to 100", graph_bytes(lambda b: b[:100]), r"graph.onnx: "),
    ("graph a text file", graph_bytes(lambda b: b"ir_version: 8\ngraph { }\n"), r"graph.onnx: not an ONNX model"),
    ("graph node name not UTF-8", graph_bytes(lambda b: b.replace(b"node_relu", b"node_rel\xff")),
     r"graph.onnx: model.graph.node\[1\].name b'node_rel\\xff' is not UTF-8"),
    ("graph attribute not UTF-8", graph_bytes(lambda b: b.replace(b"NOTSET", b"NOTSE\xff")),
     r"graph.onnx: attribute 'auto_pad' at model.graph.node\['node_conv2d'\].* not UTF-8"),
    ("graph op type not UTF-8", graph_bytes(lambda b: b.replace(b"\x22\x04Relu", b"\x22\x04Rel\xff")),
     r"graph.onnx: model.graph.node\['node_relu'\].op_type b'Rel\\xff' is not UTF-8"),
    ("graph external data", graph_edit(_external), r"graph.onnx: tensor 'conv.weight' at model.graph.initializer"
                                                   r".*: external data location '../../../etc/passwd'; a bundle's "
                                                   r"graph may only refer to 'values.safetensors' beside it"),
    # export stores the weight (72 bytes) in values.safetensors, its 8-byte bias inline (store.EXTERNAL_MIN_BYTES)
    ("graph external location outside", graph_edit(_external_field(location="../../etc/passwd")),
     r"graph.onnx: tensor 'conv.weight' at model.graph.initializer\['conv.weight'\]: external data location "
     r"'../../etc/passwd'"),
    ("graph external location absolute", graph_edit(_external_field(location="/work/main/values.safetensors")),
     r"tensor 'conv.weight' .*: external data location '/work/main/values.safetensors'"),
    ("graph external offset off", graph_edit(_external_field(offset=lambda v: str(int(v) + 4))),
     r"tensor 'conv.weight' .*: external data offset \d+, length 72, but the value 'conv.weight' is at "
     r"offset \d+, length 72 of values.safetensors"),
    ("graph external length short", graph_edit(_external_field(length="68")),
     r"tensor 'conv.weight' .*: external data offset \d+, length 68, but the value 'conv.weight' is at "
     r"offset \d+, length 72"),
    ("graph external offset not a number", graph_edit(_external_field(offset="-8")),
     r"tensor 'conv.weight' .*: external data offset '-8' is not a non-negative integer"),
    ("graph external offset huge", graph_edit(_external_field(offset="9" * 5000)),
     r"tensor 'conv.weight' .*: external data offset '9999.*' is not a non-negative integer"),
    ("graph external no length", graph_edit(_external_field(length=None)),
     r"tensor 'conv.weight' .*: external data without length"),
    ("graph external unknown key", graph_edit(_external_field(checksum="0")),
     r"tensor 'conv.weight' .*: external data key 'checksum' is not one of location, offset, length"),
    ("graph external aliases another value", graph_edit(_bias_aliases_weight),
     r"tensor 'conv.bias' .*: external data offset \d+, length 72, but the value 'conv.bias' is at "
     r"offset \d+, length 8"),
    ("graph external name not stored", graph_edit(_ghost),
     r"tensor 'ghost' at model.graph.initializer\['ghost'\]: external data in values.safetensors, which "
     r"holds no value 'ghost'"),
    ("graph external dtype differs", graph_edit(_retype(data_type=11)),
     r"tensor 'conv.weight' .*: declares float64\[2, 1, 3, 3\] but values.safetensors holds float32\[2, 1, 3, 3\]"),
    ("graph external shape differs", graph_edit(_retype(dims=[1, 2, 3, 3])),
     r"tensor 'conv.weight' .*: declares float32\[1, 2, 3, 3\] but values.safetensors holds float32\[2, 1, 3, 3\]"),
    ("graph external and inline data", graph_edit(_inline_too),
     r"tensor 'conv.weight' .*: holds data of its own and external data"),
    ("graph duplicate node names", graph_edit(_rename("node_relu", "node_conv2d")),
     r"graph.onnx: two nodes are named 'node_conv2d'"),
    ("graph empty node name", graph_edit(_rename("node_relu", "")), r"graph.onnx: node 1 \(Relu\) has no name"),
    ("graph node dropped", graph_edit(_drop_node), r"graph.onnx: 1 nodes, manifest.json lists 2 \(first not in the "
                                                   r"graph: 'node_relu'\)"),
    ("graph node renamed", graph_edit(_rename("node_relu", "other")), r"first not in the manifest: 'other'"),
    # an opset from the future is a malformed bundle (not 5 ERROR findings blamed on onnxruntime)
    ("graph opset from the future", graph_edit(_opset(99)),
     r"graph.onnx: opset 99 of the ONNX domain is newer than this onnx \([\d.]+\) knows \(up to \d+\)"),
    ("graph opset 0", graph_edit(_opset(0)), r"graph.onnx: opset 0 of domain '' is not a version"),
    # attribute names reach repro scripts; an ONNX attribute name is an identifier
    ("graph attribute name code", graph_edit(_attribute_name("pads=0);__import__('os').system('id');f(x")),
     r"graph.onnx: node 'node_conv2d' \('Conv'\) has an attribute named \"pads=0\);__import__.*not an identifier"),
    ("graph attribute name keyword", graph_edit(_attribute_name("lambda")),
     r"graph.onnx: node 'node_conv2d' \('Conv'\) has an attribute named 'lambda', not an identifier"),
]


# --- the bundle folder ---

def _remove(name):
    def mutate(bundle):
        (bundle / name).unlink()
    return mutate


def _replace_by_dir(name):
    def mutate(bundle):
        (bundle / name).unlink()
        (bundle / name).mkdir()
    return mutate


FOLDER_CASES = [
    (f"missing {name}", _remove(name), rf"not a complete bundle, missing {name}") for name in (GRAPH, VALUES, MANIFEST)
] + [
    (f"{name} a folder", _replace_by_dir(name), rf"missing {name}") for name in (GRAPH, VALUES, MANIFEST)
]

BUNDLE_CASES = [(*case, file) for cases, file in ((HEADER_CASES, VALUES), (MANIFEST_CASES, MANIFEST),
                                                   (GRAPH_CASES, GRAPH)) for case in cases] + \
               [(*case, case[0].split()[-1] if case[0].startswith("missing") else case[0].split()[0])
                for case in FOLDER_CASES]


def check_one_line(rc, out, err, pattern):
    assert rc == 2, (rc, out, err)
    assert "Traceback" not in err and "Traceback" not in out
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("irtrace: error: "), err
    assert re.search(pattern, lines[0]), (pattern, lines[0])


@pytest.mark.parametrize("name,mutate,pattern,file", BUNDLE_CASES, ids=[c[0] for c in BUNDLE_CASES])
def test_malformed_bundle(name, mutate, pattern, file, valid, tmp_path):
    bundle = tmp_path / "t.irt"
    shutil.copytree(valid, bundle)
    mutate(bundle)
    before = tree(tmp_path)
    for argv in (["inspect", bundle], ["replay", bundle, "-o", tmp_path / "out"], ["replay", bundle]):
        rc, out, err = run_cli(argv)
        check_one_line(rc, out, err, pattern)
        assert str(bundle) in err and file in err, err  # the line names the file
    assert tree(tmp_path) == before  # nothing written: no out folder, no t.irt.replay, bundle unchanged


UNWRITABLE = "/proc/irtrace-out"  # even root cannot make a folder there
ARG_CASES = [  # (argv after the bundle path, pattern); {tmp} is the test's folder
    (["--timeout", "-1"], r"argument --timeout: '-1' is not a finite, positive number of seconds"),
    (["--timeout", "0"], r"argument --timeout: '0' is not a finite, positive"),
    (["--timeout", "nan"], r"argument --timeout: 'nan' is not a finite"),
    (["--timeout", "inf"], r"argument --timeout: 'inf' is not a finite"),
    (["--timeout=-inf"], r"argument --timeout: '-inf' is not a finite"),
    (["--timeout", "soon"], r"argument --timeout: 'soon' is not a number"),
    (["--jobs", "0"], r"argument --jobs: '0' must be at least 1"),
    (["--jobs", "-3"], r"argument --jobs: '-3' must be at least 1"),
    (["--jobs", "two"], r"argument --jobs: 'two' is not an integer"),
    (["--atol", "nan"], r"argument --atol: 'nan' is not a finite tolerance"),
    (["--atol=-1e-3"], r"argument --atol: '-1e-3' is not a finite tolerance >= 0"),
    (["--atol", "-0.5"], r"argument --atol: '-0.5' is not a finite tolerance >= 0"),
    (["--rtol", "inf"], r"argument --rtol: 'inf' is not a finite tolerance"),
    (["--backend", ""], r"--backend '' names no backend"),
    (["--backend", ","], r"--backend ',' names no backend"),
    (["--backend", "torchh"], r"torchh"),
    (["--modes", ""], r"--modes '' names no mode"),
    (["--modes", "fwd,bwd"], r"unknown mode 'bwd'"),
    (["--form", "raw"], r"argument --form: invalid choice: 'raw'"),
    (["--loss", "l2"], r"argument --loss: invalid choice: 'l2'"),
    (["--bogus"], r"unrecognized arguments: --bogus"),
    (["-o", "{tmp}/afile"], r"output folder .*afile: exists and is not a folder"),
    (["-o", "{tmp}/afile/sub"], r"output folder .*afile/sub: cannot write there \(Not a directory"),
    (["-o", UNWRITABLE], r"output folder /proc/irtrace-out: cannot write there"),
    (["-o", UNWRITABLE + "/deeper"], r"output folder /proc/irtrace-out/deeper: cannot write there"),
    # one rule for "nothing would be tested", and the limits of --ops, --timeout, --jobs
    (["--backend", "oracle"], r"--backend oracle --modes fwd,vjp,vjp2 \(and no --chained\): nothing would be "
                              r"tested \(oracle arbitrates, it is not tested\)"),
    (["--backend", "oracle", "--modes", "fwd"], r"nothing would be tested"),
    (["--backend", "onnxruntime", "--modes", "vjp,vjp2"], r"nothing would be tested \(onnxruntime computes fwd\)"),
    (["--ops", ",,,"], r"--ops names no op type"),
    (["--ops", ""], r"--ops names no op type"),
    (["--timeout", "1e10"], r"argument --timeout: '1e10' is over the longest wait this platform allows"),
    (["--jobs", "100000"], r"argument --jobs: '100000' is more than \d+ \(4 per CPU"),
]
OTHER_ARGV = [  # whole command lines; {bundle} and {tmp} filled in
    (["inspect"], r"the following arguments are required: bundle"),
    (["inspect", "{tmp}/nothing.irt"], r"nothing.irt: no such bundle"),
    (["inspect", "{tmp}/afile"], r"afile: no such bundle"),
    ([], r"the following arguments are required: command"),
    (["nosuch"], r"invalid choice: 'nosuch'"),
    (["replay"], r"the following arguments are required: bundle"),
    (["replay", "{tmp}/nothing.irt"], r"nothing.irt: no such bundle"),
    (["repro", "{tmp}/report.json", "--budget", "0"], r"argument --budget: '0' must be at least 1"),
    (["export", "m:f"], r"the following arguments are required: -o/--output"),
    (["export", "m:f", "-o", "{tmp}/x.irt", "--seed", "x"], r"argument --seed: invalid int value: 'x'"),
    (["export", "m:f", "-o", "{tmp}/x.irt", "--loss", "mse"], r"argument --loss: invalid choice: 'mse'"),
    (["export", "m:f", "-o", "{tmp}/x.irt", "--from", "jax"], r"argument --from: invalid choice: 'jax'"),
    (["diff", "{bundle}", "{bundle}", "-o", "{tmp}/afile"], r"output folder .*afile: exists and is not a folder"),
]
CLI_CASES = [(["replay", "{bundle}", *a], p) for a, p in ARG_CASES] + OTHER_ARGV


@pytest.mark.parametrize("argv,pattern", CLI_CASES, ids=[" ".join(c[0]) or "(none)" for c in CLI_CASES])
def test_bad_arguments(argv, pattern, valid, tmp_path):
    (tmp_path / "afile").write_text("not a folder\n")
    argv = [a.format(bundle=valid, tmp=tmp_path) for a in argv]
    before, bundle_before = tree(tmp_path), tree(valid.parent)
    rc, out, err = run_cli(argv)
    check_one_line(rc, out, err, pattern)
    assert tree(tmp_path) == before and tree(valid.parent) == bundle_before  # checked before replay runs
    assert not os.path.exists(UNWRITABLE)


def test_memory_budget(valid, tmp_path, monkeypatch):
    """A tensor over $IRTRACE_MEMORY_BUDGET is refused before anything is mapped."""
    monkeypatch.setenv("IRTRACE_MEMORY_BUDGET", "100")
    rc, out, err = run_cli(["inspect", valid])
    check_one_line(rc, out, err, r"values.safetensors: tensor '\S+': F32 \[1, 2, 4, 4\] declares 128 bytes, "
                                 r"over the memory budget of 100 \(set \$IRTRACE_MEMORY_BUDGET")
    monkeypatch.setenv("IRTRACE_MEMORY_BUDGET", "lots")
    check_one_line(*run_cli(["inspect", valid]), r"\$IRTRACE_MEMORY_BUDGET='lots' is not a number of bytes")


def test_corpus_size():
    assert len(BUNDLE_CASES) + len(CLI_CASES) + 1 >= 80


def test_valid_bundle_still_opens(valid):
    """The checks refuse nothing that export writes: the valid bundle inspects and reads back."""
    import numpy as np
    from irtrace.store import initializers, load
    rc, out, err = run_cli(["inspect", valid])
    assert rc == 0 and err == "" and "ops      Conv 1, Relu 1" in out
    b = load(valid)
    assert all(b.values[k].shape == b.values.spec(k)[1] for k in b.values)
    import onnx
    full = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(valid / GRAPH)).graph.initializer}
    weights = initializers(b.model, b.values)
    assert sorted(weights) == sorted(full) == ["conv.bias", "conv.weight"]
    for name, weight in weights.items():  # the views read each value's own bytes, as onnx reads graph.onnx
        assert np.array_equal(b.values[name], weight) and np.array_equal(full[name], weight)
        assert np.abs(weight).max() > 0


# --- property: any byte mutation of the header, manifest or graph: exit 0 or 2, one line ---

def _regions(bundle):
    raw = (bundle / VALUES).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    return {VALUES: 8 + n, MANIFEST: (bundle / MANIFEST).stat().st_size, GRAPH: (bundle / GRAPH).stat().st_size}


def test_mutated_bytes_never_crash(valid):
    from hypothesis import HealthCheck, given, settings, strategies as st

    regions = _regions(valid)
    edits = st.lists(st.tuples(st.sampled_from(["set", "delete", "insert"]), st.integers(0, 1 << 20),
                               st.binary(min_size=1, max_size=4)), min_size=1, max_size=4)

    @settings(max_examples=150, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(name=st.sampled_from(sorted(regions)), edits=edits, cut=st.none() | st.integers(0, 1 << 20))
    def check(name, edits, cut):
        with tempfile.TemporaryDirectory() as tmp:
            bundle = Path(tmp) / "t.irt"
            shutil.copytree(valid, bundle)
            data = bytearray((bundle / name).read_bytes())
            limit = regions[name]  # the values file: only its length field and header
            for kind, at, chunk in edits:
                at %= limit
                if kind == "set":
                    data[at:at + len(chunk)] = chunk[:max(0, len(data) - at)]
                elif kind == "delete":
                    del data[at:at + len(chunk)]
                else:
                    data[at:at] = chunk
            if cut is not None:
                del data[cut % (len(data) + 1):]
            (bundle / name).write_bytes(bytes(data))
            rc, out, err = run_cli(["inspect", bundle])
            assert rc in (0, 2), (rc, err)
            assert "Traceback" not in err
            if rc == 2:
                assert len(err.splitlines()) == 1 and err.startswith("irtrace: error: "), err
            else:
                assert err == "" and out.startswith("bundle ")

    check()


def test_real_process(valid, tmp_path):
    """The installed entry point, as a user runs it: exit 2, one line, for a bundle and an argument."""
    import subprocess
    import sys
    bundle = tmp_path / "t.irt"
    shutil.copytree(valid, bundle)
    tensor_field(W, "dtype", "F8_E4M3")(bundle)
    for argv, pattern in ((["inspect", bundle], r"tensor 'conv.weight': dtype 'F8_E4M3' is not supported"),
                          (["replay", valid, "--timeout", "nan"], r"--timeout: 'nan' is not a finite")):
        p = subprocess.run([sys.executable, "-m", "irtrace", *map(str, argv)], capture_output=True, text=True,
                           timeout=120)
        check_one_line(p.returncode, p.stdout, p.stderr, pattern)


def test_a_consistently_edited_value_is_a_finding_that_says_so(valid, tmp_path):
    """A bundle whose conv weight was zeroed in place (the store itself is valid): the recorded conv
    output is not what the recorded inputs give. Never exit 0; the finding says why."""
    bundle = tmp_path / "b.irt"
    shutil.copytree(valid, bundle)
    from irtrace.store import load
    entry = load(bundle).values._header["conv.weight"]
    _, _, begin, end = entry
    n, = struct.unpack("<Q", (bundle / VALUES).read_bytes()[:8])
    with open(bundle / VALUES, "r+b") as f:
        f.seek(8 + n + begin)
        f.write(b"\0" * (end - begin))
    rc, out, err = run_cli(["replay", bundle, "--modes", "fwd", "-o", tmp_path / "r"])
    assert rc == 1, (out, err)
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    (conv,) = [r for n in report["nodes"] for r in n["results"] if r["op_type"] == "Conv" and r["backend"] == "torch"]
    assert conv["verdict"] == "DIVERGENT"
    assert "the recorded value is not what torch computes again from the recorded inputs" in conv["message"]
