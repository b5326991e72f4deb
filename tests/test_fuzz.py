"""irtrace fuzz: cases drawn from the ONNX schemas (deterministic, valid), a planted bug found, grouped
once with its count, kept in the corpus and found again by --replay; a clean backend gives no finding."""
import json

import numpy as np
import onnx
import pytest
from onnx import shape_inference

from backends._runtime.wire import dtype_of
from irtrace.cli import main
from irtrace.fuzz import generate, run
from low_precision import recorded_add

SAMPLE = ["Conv", "ConvTranspose", "MaxPool", "AveragePool", "Pad", "ReduceSum", "ReduceMax", "ArgMax", "TopK",
          "Slice", "Gather", "Resize", "LayerNormalization", "Gemm", "MatMul", "Softmax", "Relu", "Clip", "Max",
          "PRelu", "Split", "Transpose", "CumSum", "BatchNormalization"]


def test_generation_is_deterministic_per_seed():
    for op in SAMPLE:
        a = [generate.case_bytes(generate.draw_case(7, i, op)) for i in range(5)]
        b = [generate.case_bytes(generate.draw_case(7, i, op)) for i in range(5)]
        c = [generate.case_bytes(generate.draw_case(8, i, op)) for i in range(5)]
        assert a == b, op
        assert a != c, op
    # the op of a case depends on its seed and index only
    assert [generate.pick_op(3, i, SAMPLE) for i in range(20)] == [generate.pick_op(3, i, SAMPLE) for i in range(20)]


def test_every_drawn_case_passes_the_checker_and_strict_shape_inference():
    for op in SAMPLE:
        for i in range(15):
            case = generate.draw_case(0, i, op)
            assert case.problem is None, (op, i, case.problem)
            model, _, _ = generate.model_of([case])
            inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
            onnx.checker.check_model(inferred, full_check=True)  # independently of generate.check
            assert all(o.type.tensor_type.HasField("shape") for o in inferred.graph.output), (op, i)


def test_an_invalid_case_is_discarded_with_its_reason():
    case = generate.draw_case(0, 0, "Transpose")
    case.attrs["perm"] = [0] * len(case.attrs["perm"])
    assert "repeated value" in generate.check(case)


def test_cases_stress_the_values():
    """Ties, exact zeros and kinks, and large and tiny magnitudes are among the values drawn."""
    seen = set()
    for i in range(40):
        for inp in generate.draw_case(0, i, "MaxPool").inputs + generate.draw_case(0, i, "Relu").inputs:
            a = inp.value
            if np.unique(a).size < a.size:
                seen.add("ties")
            if (a == 0).any():
                seen.add("zeros")
            if np.abs(a).max() > 20 or np.abs(a).max() < 0.05:
                seen.add("magnitude")
    assert seen == {"ties", "zeros", "magnitude"}


@pytest.fixture(scope="module")
def planted_pad(tmp_path_factory):
    import planted_backend
    planted_backend.register("pad")
    out = tmp_path_factory.mktemp("fuzz") / "pad"
    state = run.fuzz(out, run.FuzzOptions(backends=("planted-pad",), ops=("Conv",), modes=("fwd",), seed=5,
                                          cases=16), say=lambda *_: None)
    return out, state


def _moving_pads_changes(case):
    import torch
    from torch.nn import functional
    x, w, *b = [torch.from_numpy(i.value).double() for i in case.inputs]
    pads = case.attrs["pads"]

    def conv(p):  # p: [h_begin, w_begin, h_end, w_end]
        padded = functional.pad(x, (p[1], p[3], p[0], p[2]))
        return functional.conv2d(padded, w, b[0] if b else None, stride=case.attrs["strides"],
                                 dilation=case.attrs["dilations"], groups=case.attrs["group"])
    right, wrong = conv(pads), conv([0, 0, pads[0] + pads[2], pads[1] + pads[3]])
    # in float64, relative to the output's size (some cases draw tiny magnitudes)
    return right.shape != wrong.shape or (right - wrong).abs().max() > 1e-9 * right.abs().max()


def test_planted_bug_found_grouped_once_and_kept(planted_pad):
    out, state = planted_pad
    divergent = {k: b for k, b in state["bugs"].items() if b["verdict"] == "DIVERGENT"}
    assert len(divergent) == 1, state["bugs"]
    key, bug = next(iter(divergent.items()))
    assert key.startswith("planted-pad-Conv-fwd-divergent-")
    # known answer, computed here with torch: the 2-D cases whose output changes when every pad moves to
    # the end (the planted conv's bug; its 1-D and 3-D cases fail otherwise: conv2d takes no other rank)
    cases = [generate.draw_case(5, i, "Conv") for i in range(state["next_case"])]
    hit = [c for c in cases if len(c.attrs["strides"]) == 2 and _moving_pads_changes(c)]
    assert bug["count"] == len(hit) > 1
    assert bug["kept"] and bug["size"] == min(c.size() for c in hit)
    assert (out / "corpus" / key / "graph.onnx").exists()
    assert state["cases"] == {"planted-pad": 16}


def test_replay_refinds_the_kept_bug(planted_pad, capsys):
    out, state = planted_pad
    rc = main(["fuzz", "--replay", str(out)])
    printed = capsys.readouterr().out
    key = next(k for k, b in state["bugs"].items() if b["verdict"] == "DIVERGENT")
    assert f"REPRODUCES  {key}" in printed
    assert rc == 1


def test_kept_bug_gets_a_straight_line_repro(planted_pad):
    out, state = planted_pad
    key = next(k for k, b in state["bugs"].items() if b["verdict"] == "DIVERGENT")
    folders = run.write_repros(out, budget=20, keys={key}, say=lambda *_: None)
    assert len(folders) == 1
    finding = json.loads((folders[0] / "finding.json").read_text())
    assert finding["script"]["form"] == "straight" and finding["script"]["reproduces"]
    assert "Conv" in (folders[0] / "issue.md").read_text()
    assert run.load_state(out)["bugs"][key]["repro"] == str(folders[0].relative_to(out))


def test_clean_backend_gives_no_finding(tmp_path):
    state = run.fuzz(tmp_path / "ort", run.FuzzOptions(backends=("onnxruntime",), seed=11, cases=36),
                     say=lambda *_: None)
    assert state["bugs"] == {}
    assert state["cases"]["onnxruntime"] + state["unrecorded"] == 36  # the reference records all but a few
    assert json.loads((tmp_path / "ort" / "state.json").read_text())["next_case"] >= 36


def test_resume_continues_from_the_next_case(tmp_path):
    options = run.FuzzOptions(backends=("onnxruntime",), ops=("Relu", "Add"), seed=2, cases=4, batch=4)
    run.fuzz(tmp_path / "r", options, say=lambda *_: None)
    state = run.fuzz(tmp_path / "r", options, say=lambda *_: None)
    assert state["next_case"] == 8 and state["cases"]["onnxruntime"] == 8


def test_bad_ops_name_is_one_line_exit_2(tmp_path, capsys):
    assert main(["fuzz", "--backend", "onnxruntime", "--ops", "Conv2", "-o", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--ops 'Conv2'" in err[0] and "Did you mean: Conv" in err[0]


def test_nonfinite_and_empty_values_on_request_leave_the_plain_cases_as_they_are():
    seen = {"nan": 0, "inf": 0, "empty": 0}
    for op in SAMPLE:
        for i in range(8):
            plain, case = generate.draw_case(6, i, op), generate.draw_case(6, i, op, ("nonfinite", "empty"))
            assert generate.case_bytes(case) == generate.case_bytes(generate.draw_case(6, i, op, ("nonfinite", "empty")))
            assert case.problem is None and generate.check(case) is None, (op, i)
            xs = [inp.value for inp in case.inputs if inp.role == "x"]
            if "empty" in case.styles:
                assert case.cls.endswith(" empty") and xs[0].shape[0] == 0 and plain.inputs[0].value.shape[0] > 0
                seen["empty"] += 1
            elif "nonfinite" in case.styles:
                seen["nan"] += any(np.isnan(a).any() for a in xs)
                seen["inf"] += any(np.isinf(a).any() for a in xs)
            else:
                assert generate.case_bytes(case) == generate.case_bytes(plain)
    assert min(seen.values()) >= 20, seen


def test_nonfinite_and_empty_cases_on_a_clean_backend_give_no_finding(tmp_path):
    """onnxruntime and torch agree where NaN and infinities propagate and on 0-size inputs."""
    ops = ("Relu", "Conv", "ReduceSum", "Add", "Softmax", "MatMul", "Concat")
    options = run.FuzzOptions(backends=("onnxruntime",), ops=ops, seed=4, cases=24, values=("nonfinite", "empty"))
    state = run.fuzz(tmp_path / "ort", options, say=lambda *_: None)
    assert state["bugs"] == {} and state["values"] == ["nonfinite", "empty"]
    styles = [generate.draw_case(4, i, generate.pick_op(4, i, sorted(ops)), options.values).styles for i in range(24)]
    assert (sum("empty" in s for s in styles), sum("nonfinite" in s for s in styles)) == (12, 3), styles
    with pytest.raises(Exception, match="--values nonfinite,empty; resume it with those"):
        run.fuzz(tmp_path / "ort", run.FuzzOptions(backends=("onnxruntime",), ops=ops, seed=4, cases=4),
                 say=lambda *_: None)


def test_bad_values_name_is_one_line_exit_2(tmp_path, capsys):
    assert main(["fuzz", "--backend", "onnxruntime", "--values", "nan", "-o", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["irtrace: error: --values nan: 'nan' is not one of nonfinite, empty"], err


def test_low_precision_cases_on_request_leave_the_float32_ones_as_they_are():
    """--dtypes float16,bfloat16: a case's float inputs are cast to one of them (each as likely as float32)
    where its schema takes it, the float32 values rounded to the nearest; a case drawn float32, or whose op
    does not take the type, is the plain case byte for byte."""
    seen = {"float32": 0, "float16": 0, "bfloat16": 0}
    for op in SAMPLE:
        for i in range(8):
            plain, case = generate.draw_case(6, i, op), generate.draw_case(6, i, op, (), generate.LOW_PRECISION)
            assert generate.case_bytes(case) == generate.case_bytes(generate.draw_case(6, i, op, (),
                                                                                        generate.LOW_PRECISION))
            assert case.problem is None and generate.check(case) is None, (op, i)
            seen[case.dtype] += 1
            if case.dtype == "float32":
                assert generate.case_bytes(case) == generate.case_bytes(plain)
                continue
            assert case.cls == f"{plain.cls} {case.dtype}"
            xs = [(p.value, c.value.astype(np.float32)) for p, c in zip(plain.inputs, case.inputs) if p.role == "x"]
            # values the rounding tied or put on zero are marked as the drawn ties and zeros are
            assert ("ties" in case.styles) == ("ties" in plain.styles or any(
                np.unique(w).size < np.unique(v).size for v, w in xs)), (op, i)
            assert ("zeros" in case.styles) >= any((w == 0).sum() > (v == 0).sum() for v, w in xs), (op, i)
            to = dtype_of(case.dtype)
            for p, c in zip(plain.inputs, case.inputs):
                if p.value is not None and p.value.dtype.kind == "f":
                    assert c.value.dtype == to and np.array_equal(c.value, p.value.astype(to)), (op, i)
                else:
                    assert c.role == p.role and (p.value is None or np.array_equal(c.value, p.value))
    # the dtype of case i is drawn by (seed, i) alone: 4 of the 8 indices float16, 3 bfloat16, where an op's
    # schema takes it (at opset 20 Conv, pooling, Resize and more do not take bfloat16: those stay float32)
    assert seen == {"float32": 39, "float16": 96, "bfloat16": 57}, seen


def test_a_float16_case_is_recorded_in_float16_and_judged_in_it(tmp_path):
    """A float16 Add is recorded as float16: the reference's output is the exact sum (float64, exact for two
    float16 values) rounded once to float16, and onnxruntime's float16 result matches it."""
    bundle, _ = recorded_add(tmp_path, "float16")
    assert run._replay(bundle, ("onnxruntime",), ("fwd",), 60) == []


def test_low_precision_fuzz_on_a_clean_backend_gives_no_finding(tmp_path):
    """onnxruntime's float16 kernels against torch's, judged in float16 against float64: no finding."""
    ops = ("Relu", "Conv", "ReduceSum", "Add", "Softmax", "MatMul", "Sigmoid", "LayerNormalization")
    options = run.FuzzOptions(backends=("onnxruntime",), ops=ops, seed=4, cases=24, dtypes=("float16",))
    state = run.fuzz(tmp_path / "ort", options, say=lambda *_: None)
    assert state["bugs"] == {} and state["unsupported"] == {} and state["dtypes"] == ["float16"]
    typed = [generate.draw_case(4, i, generate.pick_op(4, i, sorted(ops)), (), options.dtypes).dtype for i in range(24)]
    assert typed.count("float16") == 15, typed
    with pytest.raises(Exception, match="--dtypes float16; resume it with those"):
        run.fuzz(tmp_path / "ort", run.FuzzOptions(backends=("onnxruntime",), ops=ops, seed=4, cases=4),
                 say=lambda *_: None)


def test_a_dtype_not_drawn_or_not_declared_is_one_line_exit_2(tmp_path, capsys):
    assert main(["fuzz", "--backend", "onnxruntime", "--dtypes", "float64", "-o", str(tmp_path / "f")]) == 2
    assert main(["fuzz", "--backend", "onnxruntime", "--dtypes", "float16,bfloat16", "-o", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["irtrace: error: --dtypes 'float64': not one of float16, bfloat16 (float32 is always drawn)",
                   "irtrace: error: --dtypes float16,bfloat16: backend 'onnxruntime' does not declare bfloat16 (it "
                   "declares float32, float16: backends/onnxruntime/declare.py)"], err
    assert not (tmp_path / "f").exists()


def test_which_of_tied_elements_topk_names_first_is_a_convention_a_wrong_value_is_not():
    """TopK's indices among equal values (ties only, and the smallest case untied matches) are the
    framework's choice; a TopK forward that differs off ties, or an Add forward at ties, is a bug."""
    bug = {"op": "TopK", "mode": "fwd", "verdict": "DIVERGENT", "off_kinks": 0}
    assert run.convention(bug)
    assert not run.convention({**bug, "off_kinks": 1})
    assert not run.convention({**bug, "op": "Add"})
    assert not run.convention({**bug, "verdict": "ERROR"})
    assert run.convention({**bug, "op": "MaxPool", "mode": "vjp"}) and not run.convention({**bug, "op": "MaxPool"})


def test_a_low_precision_case_untied_has_no_ties_left_after_its_rounding():
    """A convention is told from a bug by the smallest case once more with its ties and zeros moved apart
    (generate.untied): each value moved by a distinct offset, 0.2 / size apart. In bfloat16 (step 0.0078 at 1)
    those values rounded to one again: a Max of [1], [7, 4] and [6, 7, 4] bfloat16 inputs (seed 1207, case 1037)
    kept a tie, and TensorFlow's choice among tied maxima was filed as a bug. Untied now, every value of the
    three inputs is distinct and none is zero; a float32 case is moved as before (offsets in [0.01, 0.21))."""
    case = generate.draw_case(1207, 1037, "Max", (), ("bfloat16",))
    assert case.dtype == "bfloat16" and "ties" in case.styles
    moved = generate.untied(case)
    values = np.concatenate([i.value.astype(np.float32).ravel() for i in moved.inputs])
    assert [i.value.dtype.name for i in moved.inputs] == ["bfloat16"] * 3
    assert values.size == 1 + 28 + 168 and len(set(values.tolist())) == values.size and not np.any(values == 0)
    single = generate.draw_case(1207, 1037, "Max")
    assert single.dtype == "float32"
    offsets = [u.value - i.value for u, i in zip(generate.untied(single).inputs, single.inputs)]
    assert all(np.all((o > 0.0099) & (o < 0.2101)) for o in offsets)
