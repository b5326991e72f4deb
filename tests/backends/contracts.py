"""What every framework backend under test must do (tests/backends/test_contract.py checks it), and
the data that differs between them: the cases each replays beside tests/op_cases.py's table, where
its strict known-failure table lives, its pinned versions and op count, the modes each case has.

The op-case table is replayed once per backend and session (`case_run`), whichever module asks
first; the contract and the backend's own tests read the same Replay and report."""
import functools
import re
from dataclasses import dataclass, field

import numpy as np
from onnx import TensorProto, helper

from irtrace import compare

OK = (compare.MATCH, compare.NOISE)
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # OneFlow colours some of its error messages
TF_FUNCTION = re.compile(r"\{\{function_node [^}]*\}\}\s*")  # TensorFlow prefixes messages with its graph's name

# Forward results whose translation (attributes, layouts, pads order) a backend must get right: checked
# for each backend that answers the case, unless its known-failure table names that very result.
TRANSLATION_GUARDS = (
    "batchnorm_train_m07.out1", "batchnorm_train_m07.out2", "batchnorm_train.out0", "batchnorm_train.out1",
    "batchnorm_train.out2", "batchnorm_eval.out0", "instancenorm.out0", "avgpool_exclude_pad.out0",
    "avgpool_include_pad.out0", "avgpool_asym_exclude.out0", "conv_s2_same_upper_pads.out0",
    "conv_begin_heavy_pads.out0", "conv_depthwise.out0", "conv_groups_batch.out0", "conv_dilation2.out0",
    "convtranspose_groups2.out0", "convtranspose_s2_outpad.out0", "convtranspose_asym_pads.out0",
    "pad_constant_asym.out0", "pad_reflect.out0", "pad_edge.out0", "maxpool_asym.out0",
    "resize_linear_align_corners.out0", "resize_linear_half_pixel.out0", "resize_nearest.out0", "hardsigmoid.out0",
    "slice_negative_step.out0", "prelu.out0", "gelu_tanh.out0", "gather_axis0.out0", "depthtospace_dcr.out0",
    "depthtospace_crd.out0", "topk.out1", "einsum.out0", "cast_int.out0",
    # cases only Paddle's list adds (its translation paths)
    "hardsigmoid_ab.out0", "pad_wrap.out0", "pad_constant_2d.out0", "cumsum_rev_excl.out0", "div_int.out0",
    "mod_int.out0", "mod_fmod.out0", "conv1d.out0", "conv3d.out0", "convtranspose1d.out0", "maxpool1d.out0",
    "avgpool3d.out0", "resize_cubic.out0", "resize_cubic_ac.out0", "resize_linear1d.out0", "layernorm_axis1.out0",
    "prelu_vec.out0", "argmax_last.out0", "split_even.out2", "isinf.out0", "spacetodepth.out0")
EXAMPLES = ("resnet", "wideresnet", "wideresnet-train", "stylegan2", "gpt")


def _shared_cases():
    from op_cases import CASES
    return list(CASES)


def _megengine_cases():
    """The shared table and the rest of MegEngine's op table (ReduceL1, ReduceL2: weight_norm's norm; Selu, Softsign,
    SpaceToDepth, Trilu)."""
    from op_cases import CASES, INT, C, X
    return CASES + [C("reducel2", "ReduceL2", X(2, 3, 4), INT(1, 2), keepdims=1),
                    C("reducel1", "ReduceL1", X(2, 3, 4), INT(2), keepdims=0),
                    C("selu", "Selu", X(2, 3)), C("softsign", "Softsign", X(2, 3)),
                    C("spacetodepth", "SpaceToDepth", X(1, 2, 4, 6), blocksize=2),
                    C("trilu_lower", "Trilu", X(4, 5), INT(1), upper=0), C("trilu_upper", "Trilu", X(4, 5))]


def _oneflow_cases():
    """The shared table, a training-mode BatchNorm that asks for ONNX's biased running_var, and the
    rest of OneFlow's table (ops the shared table and the examples do not reach)."""
    from op_cases import CASES, INT, POS, PSTAT, STAT, C, X
    return CASES + [
        C("batchnorm_train_biased", "TrainBatchNormalization", X(4, 2, 3, 3), X(2), X(2), STAT(2), PSTAT(2), outputs=3,
          domain="ai.irtrace", epsilon=1e-5, momentum=0.8, running_var_estimator="biased"),
        C("mod_fmod", "Mod", X(2, 3), POS(2, 3), fmod=1), C("elu", "Elu", X(2, 3), alpha=0.7),
        C("selu", "Selu", X(2, 3)), C("softsign", "Softsign", X(2, 3)), C("sign", "Sign", X(2, 3)),
        C("isinf", "IsInf", X(2, 3)), C("flatten", "Flatten", X(2, 3, 4), axis=2),
        C("cumsum_excl_rev", "CumSum", X(3, 4), INT(1), exclusive=1, reverse=1),
        C("argmax_last", "ArgMax", X(3, 4), axis=1, select_last_index=1),
        C("globalmaxpool", "GlobalMaxPool", X(2, 3, 4, 5)), C("sum3", "Sum", X(2, 3), X(2, 3), X(3)),
        C("gather_elements", "GatherElements", X(3, 4), ("idx", (3, 2), 4), axis=1),
        C("spacetodepth", "SpaceToDepth", X(1, 2, 4, 6), blocksize=2),
        C("trilu_lower", "Trilu", X(4, 5), INT(1), upper=0),
        C("reducel2", "ReduceL2", X(2, 3, 4), INT(1), keepdims=1),
        C("reduceprod", "ReduceProd", X(2, 3, 4), INT(0, 2), keepdims=0),
        C("reducesumsquare", "ReduceSumSquare", X(2, 3, 4), INT(1), keepdims=1),
        C("reducelogsumexp", "ReduceLogSumExp", X(2, 3, 4), INT(2), keepdims=0),
        C("dropout_eval", "Dropout", X(2, 3))]


def _paddle_cases():
    """The shared table, plus the rest of Paddle's op table and its translation paths (1-D/3-D conv
    and pools, cubic and 1-D Resize, wrap Pad, reverse/exclusive CumSum, integer Div/Mod, fmod,
    multi-axis LayerNorm, non-default HardSigmoid, ...) and a training-mode BatchNorm that asks for
    ONNX's biased running_var."""
    from onnx import numpy_helper
    from op_cases import CASES, INT, POS, PSTAT, STAT, C, F, X
    return CASES + [
        C("batchnorm_train_biased", "TrainBatchNormalization", X(4, 2, 3, 3), X(2), X(2), STAT(2), PSTAT(2), outputs=3,
          domain="ai.irtrace", epsilon=1e-5, momentum=0.8, running_var_estimator="biased"),
        C("selu", "Selu", X(2, 3)), C("softsign", "Softsign", X(2, 3)), C("elu", "Elu", X(2, 3), alpha=0.5),
        C("reducel2", "ReduceL2", X(2, 3, 4), INT(1), keepdims=0), C("reducel1", "ReduceL1", X(2, 3, 4), INT(2)),
        C("reduceprod", "ReduceProd", X(2, 3, 4), INT(1, 2)), C("reducesumsquare", "ReduceSumSquare", X(2, 3), INT(1)),
        C("reducelogsumexp", "ReduceLogSumExp", X(2, 3), INT(1)),
        C("argmax_last", "ArgMax", ("idx", (3, 4), 2), axis=1, select_last_index=1),
        C("argmin", "ArgMin", X(3, 4), axis=0, keepdims=0),
        C("cumsum_rev_excl", "CumSum", X(3, 4), INT(1), exclusive=1, reverse=1),
        C("mod_fmod", "Mod", X(2, 3), POS(2, 3), fmod=1), C("mod_int", "Mod", ("idx", (2, 3), 9), INT(4, -3, 5)),
        C("div_int", "Div", ("idx", (2, 3), 9), INT(4, -3, 5)),
        C("trilu_lower", "Trilu", X(4, 5), INT(1), upper=0), C("trilu_upper", "Trilu", X(4, 5)),
        C("spacetodepth", "SpaceToDepth", X(1, 2, 4, 6), blocksize=2),
        C("gatherelements", "GatherElements", X(3, 4), ("idx", (3, 2), 4), axis=1),
        C("flatten", "Flatten", X(2, 3, 4), axis=2), C("size", "Size", X(2, 3)),
        C("sum3", "Sum", X(2, 3), X(2, 3), X(3)), C("lessorequal", "LessOrEqual", X(2, 3), X(2, 3)),
        C("sign", "Sign", X(2, 3)), C("round", "Round", F(0.5, 1.5, 2.5, -0.5, -1.5)), C("floor", "Floor", X(2, 3)),
        C("hardsigmoid_ab", "HardSigmoid", X(2, 3), alpha=0.3, beta=0.4),
        C("resize_cubic", "Resize", X(1, 2, 3, 4), ("none",), F(1, 1, 2, 2), mode="cubic",
          coordinate_transformation_mode="half_pixel"),
        C("resize_cubic_ac", "Resize", X(1, 2, 3, 4), ("none",), F(1, 1, 2, 2), mode="cubic",
          coordinate_transformation_mode="align_corners"),
        C("resize_linear1d", "Resize", X(1, 2, 5), ("none",), F(1, 1, 2), mode="linear",
          coordinate_transformation_mode="half_pixel"),
        C("pad_wrap", "Pad", X(1, 2, 4, 5), INT(0, 0, 1, 2, 0, 0, 2, 1), mode="wrap"),
        C("pad_constant_2d", "Pad", X(3, 4), INT(1, 0, 2, 1), F(-1.0), mode="constant"),
        C("maxpool1d", "MaxPool", X(1, 2, 9), kernel_shape=[3], strides=[2], pads=[1, 0]),
        C("avgpool3d", "AveragePool", X(1, 1, 4, 4, 4), kernel_shape=[2, 2, 2], strides=[2, 2, 2], pads=[0] * 6),
        C("conv1d", "Conv", X(1, 2, 8), X(3, 2, 3), pads=[1, 0]),
        C("conv3d", "Conv", X(1, 2, 4, 4, 4), X(2, 2, 3, 3, 3), pads=[1, 0, 1, 0, 1, 1]),
        C("convtranspose1d", "ConvTranspose", X(1, 2, 5), X(2, 3, 3), strides=[2], pads=[1, 0]),
        C("globalmaxpool", "GlobalMaxPool", X(2, 3, 4, 5)), C("gemm_transA", "Gemm", X(4, 3), X(4, 5), transA=1),
        C("isinf", "IsInf", F(1.0, float("inf"), float("-inf"), 0.0), detect_negative=0),
        C("isnan", "IsNaN", F(1.0, float("nan"))), C("not", "Not", ("bool", (1, 0, 1))),
        C("and", "And", ("bool", (1, 0, 1)), ("bool", (1, 1, 0))), C("cast_f64", "Cast", X(2, 3), to=TensorProto.DOUBLE),
        C("constantofshape", "ConstantOfShape", INT(2, 3),
          value=numpy_helper.from_array(np.array([1.5], np.float32))),
        C("prelu_vec", "PRelu", X(2, 3, 4), X(4)), C("prelu_scalar", "PRelu", X(2, 3), X(1)),
        C("split_even", "Split", X(2, 7), axis=1, num_outputs=3, outputs=3),
        C("softmax_axis", "Softmax", X(2, 3, 4), axis=-2), C("squeeze_all", "Squeeze", X(1, 3, 1)),
        C("transpose_default", "Transpose", X(2, 3, 4)), C("instnorm1d", "InstanceNormalization", X(2, 3, 5), X(3), X(3)),
        C("layernorm_axis1", "LayerNormalization", X(2, 3, 4), X(3, 4), X(3, 4), axis=1),
        C("einsum_batch", "Einsum", X(2, 3, 4), X(2, 4, 5), equation="bij,bjk->bik")]


def _float64_nodes(model, feeds):
    """Two float64 nodes beside the op cases: a backend that has float64 must compute it (a second
    float64 witness), never refuse it or cast it down."""
    rng = np.random.default_rng(3)
    feeds["f64.x"], feeds["f64.w"] = rng.standard_normal((1, 2, 5, 5)), rng.standard_normal((3, 2, 3, 3))
    g = model.graph
    g.input.extend([helper.make_tensor_value_info("f64.x", TensorProto.DOUBLE, [1, 2, 5, 5]),
                    helper.make_tensor_value_info("f64.w", TensorProto.DOUBLE, [3, 2, 3, 3])])
    g.node.extend([helper.make_node("Conv", ["f64.x", "f64.w"], ["f64.c"], name="f64_conv", pads=[0, 0, 1, 1],
                                    strides=[2, 2]),
                   helper.make_node("Softmax", ["f64.c"], ["f64.y"], name="f64_softmax", axis=1)])
    g.output.extend([helper.make_empty_tensor_value_info("f64.y")])
    return model, feeds


@dataclass(frozen=True)
class Contract:
    name: str
    cases: object = _shared_cases       # () -> the op cases replayed (tests/op_cases.py's CASES and more)
    extend: object = None               # (model, feeds) -> (model, feeds): nodes added beside the cases
    replay_with: tuple = ()             # backends replayed beside it on the op cases
    shape_arithmetic: frozenset = frozenset({"shape", "range"})  # left to the host, not judged
    fwd_only: tuple = ()                # cases with a forward result only (integer or boolean outputs)
    partial_modes: dict = field(default_factory=dict)  # case -> its modes, where neither fwd only nor all
    fwd_findings: dict = field(default_factory=dict)   # (case, output) -> verdict of every forward not MATCH/NOISE
    vjp_findings: tuple = ()            # (case, output, verdict) of every first-order gradient not MATCH/NOISE
    borderline: frozenset = frozenset()  # (case, mode, output) judged at the edge of the float32 allowance
    numbers_rel: float = 0.0            # a known DIVERGENT's max abs within this fraction; 0: the same text
    padding: str = None                 # the padding matrix's known failures: "module:NAME" or None
    versions: dict = field(default_factory=dict)  # package -> version ("1." : a prefix)
    ops: int = 0                        # entries of its op table, as the worker and `irtrace backends` state (0: unpinned)
    quiet: tuple = ()                   # what its worker's stderr must not show (framework logging)
    example_nodes: dict = field(default_factory=dict)  # example -> nodes replayed, where pinned
    examples_slow: bool = True
    float64: bool = True                # computes float64 (else UNSUPPORTED, tests/backends/test_<name>.py)
    penalty_gaps: dict = field(default_factory=dict)  # example -> the missing double grad its penalty chain names

    @property
    def known_module(self):
        return f"{self.name}_known"

    def known(self):
        import importlib
        return importlib.import_module(self.known_module).KNOWN


CONTRACTS = {c.name: c for c in (
    Contract("megengine", cases=_megengine_cases, replay_with=("megengine", "torch"),
             fwd_only=("cast_int", "equal", "greater", "less"),
             # F.conv1d asserts a 3-D weight: a grouped one (4-D, as its docstring asks) raises (its workaround matches)
             fwd_findings={("conv1d_groups", "*"): compare.ERROR,
                           ("cumsum_exclusive_reverse", "*"): compare.UNSUPPORTED,
                           ("einsum", "*"): compare.UNSUPPORTED, ("erf", "*"): compare.UNSUPPORTED,
                           ("gelu_tanh", "*"): compare.UNSUPPORTED, ("pad_negative_crop", "*"): compare.UNSUPPORTED,
                           ("rnn", "*"): compare.UNSUPPORTED, ("scatternd_add", "*"): compare.UNSUPPORTED,
                           ("scatterelements_add", "*"): compare.UNSUPPORTED,
                           ("topk_ties", "topk_ties.out1"): compare.DIVERGENT},
             vjp_findings=(("batchnorm_eval_stats", "*", compare.UNSUPPORTED), ("conv1d_groups", "*", compare.ERROR),
                           ("cumsum_exclusive_reverse", "*", compare.UNSUPPORTED),
                           ("einsum", "*", compare.UNSUPPORTED), ("erf", "*", compare.UNSUPPORTED),
                           ("gelu_tanh", "*", compare.UNSUPPORTED), ("pad_negative_crop", "*", compare.UNSUPPORTED),
                           ("rnn", "*", compare.UNSUPPORTED), ("scatternd_add", "*", compare.UNSUPPORTED),
                           ("scatterelements_add", "*", compare.UNSUPPORTED),
                           ("topk_ties", "d:topk_ties.in0", compare.DIVERGENT))
             # its LSTM's gradients are wrong, its forward right (tests/megengine_known.py)
             + tuple((case, f"d:{case}.in{k}", compare.DIVERGENT) for case in ("lstm", "lstm_batch_first")
                     for k in range(4)),
             padding=None, versions={"megengine": "1.13.0", "numpy": "1."}, ops=118, quiet=("debug: ", "info: "),
             examples_slow=False, float64=False),
    Contract("oneflow", cases=_oneflow_cases, replay_with=("oneflow",),
             fwd_only=("argmax_last", "cast_int", "equal", "greater", "isinf", "less"),
             partial_modes={"sign": {"fwd", "vjp2"}},  # piecewise constant: no vjp asked, vjp2 still
             # its fused RNN has one activation for both directions (the rnn case's are Tanh and Relu); its
             # log_softmax (a cross entropy's log_prob output) is further from float64 than torch allows
             fwd_findings={("batchnorm_train_biased", "batchnorm_train_biased.out2"): compare.DIVERGENT,
                           ("rnn", "*"): compare.UNSUPPORTED, ("gru_reverse_reset_before", "*"): compare.UNSUPPORTED,
                           ("softmax_cross_entropy", "softmax_cross_entropy.out1"): compare.DIVERGENT,
                           ("softmax_cross_entropy_weighted", "softmax_cross_entropy_weighted.out1"):
                               compare.DIVERGENT},
             vjp_findings=(("batchnorm_eval_stats", "*", compare.UNSUPPORTED), ("mod_fmod", "*", compare.ERROR),
                           ("rnn", "*", compare.UNSUPPORTED), ("gru_reverse_reset_before", "*", compare.UNSUPPORTED),
                           ("softmax_cross_entropy", "d:softmax_cross_entropy.in0", compare.DIVERGENT),
                           ("softmax_cross_entropy_weighted", "d:softmax_cross_entropy_weighted.in0",
                            compare.DIVERGENT)),
             # log_softmax's first derivative (3x4 case) is NOISE on the machine where tests/oneflow_known.py
             # was recorded, and 2.09e-6 from float64 against an allowance of 2.04e-6 (8x torch's own error)
             # on an AMD EPYC with AVX-512 (DIVERGENT, 31 float32 ulps): either verdict is accepted within
             # twice the allowance; more than that is a finding like any other
             borderline=frozenset({("logsoftmax", "vjp", "d:logsoftmax.in0")}),
             # and its double gradient's max abs moves with the machine's vector unit: 1.55e-6 where the table was
             # recorded, 1.49e-6 on an Intel Xeon with AVX-512 (2026-12-07; the code before this change the same)
             numbers_rel=0.1,
             padding="oneflow_known:PADDING", versions={"oneflow": "0.9.0", "numpy": "1.26.4"}, ops=122,
             quiet=("I1", "W1"),
             penalty_gaps={"wideresnet": "gradient function for op normalization_grad is not found"}),
    Contract("paddle", cases=_paddle_cases, replay_with=("paddle",),
             shape_arithmetic=frozenset({"and", "constantofshape", "not", "range", "shape", "size"}),
             fwd_only=("argmax_last", "argmin", "cast_int", "div_int", "equal", "greater", "isinf", "isnan", "less",
                       "lessorequal", "mod_int", "round"),
             # piecewise-constant ops: no vjp asked (the gradient is 0 wherever it exists), vjp2 still
             partial_modes={"sign": {"fwd", "vjp2"}, "floor": {"fwd", "vjp2"}},
             # Paddle's running_var is the biased estimator (torch: unbiased); TopK's order of tied values; no
             # bicubic grid_sample; one SimpleRNN activation for both directions
             fwd_findings={("batchnorm_train", "batchnorm_train.out2"): compare.DIVERGENT,
                           ("batchnorm_train_m07", "batchnorm_train_m07.out2"): compare.DIVERGENT,
                           ("batchnorm_train_3d", "batchnorm_train_3d.out2"): compare.DIVERGENT,
                           ("gridsample_cubic_border", "*"): compare.UNSUPPORTED,
                           ("rnn", "*"): compare.UNSUPPORTED, ("gru_reverse_reset_before", "*"): compare.UNSUPPORTED,
                           ("topk_ties", "topk_ties.out1"): compare.DIVERGENT},
             vjp_findings=(("batchnorm_eval_stats", "*", compare.UNSUPPORTED),
                           ("gridsample_cubic_border", "*", compare.UNSUPPORTED), ("rnn", "*", compare.UNSUPPORTED),
                           ("gru_reverse_reset_before", "*", compare.UNSUPPORTED),
                           ("topk_ties", "d:topk_ties.in0", compare.DIVERGENT)),
             padding="paddle_known:PADDING", versions={"paddle": "3.3.1", "numpy": "2.2.6"}, ops=121,
             quiet=("ccache", "I1"), penalty_gaps={"stylegan2": "reciprocal_grad doesn't have any grad op"}),
    Contract("tensorflow", extend=_float64_nodes, replay_with=("tensorflow",),
             fwd_only=("cast_int", "equal", "greater", "less"),
             vjp_findings=(("batchnorm_eval_stats", "*", compare.UNSUPPORTED), ("conv_groups2", "*", compare.ERROR),
                           ("conv_groups_batch", "*", compare.ERROR)),
             numbers_rel=0.01, padding="padding_known:KNOWN", versions={"tensorflow": "2.21.0"}, ops=120,
             example_nodes={"resnet": 49, "wideresnet": 66, "wideresnet-train": 69, "stylegan2": 244, "gpt": 55}))}


def described(backend, r):
    """What a known-failure table records for a result: the worst element of a numeric failure, the
    framework's own message (whitespace folded, colour codes and graph names cut) otherwise."""
    m = r.metrics
    if m is not None and r.verdict in compare.NUMERIC_FAILURES:
        return (f"{backend} {m.actual_at_worst:.4g} vs torch {m.ref_at_worst:.4g} at {list(m.worst_index)}, "
                f"max abs {m.max_abs:.3g}")
    return " ".join(TF_FUNCTION.sub("", ANSI.sub("", r.message)).split())[:100]


def borderline(contract, node, r):
    """A result at the edge of the float32 allowance whose verdict depends on the CPU the kernels run on."""
    return ((node, r.mode, r.output) in contract.borderline and r.verdict == compare.DIVERGENT
            and r.metrics is not None and r.allowed is not None and r.metrics.max_abs <= 2 * r.allowed)


def observed(contract, rep):
    """(case, mode, output) -> Result of every failing or unsupported result of the backend."""
    return {(n.name, r.mode, r.output): r for n in rep.nodes for r in n.results
            if r.backend == contract.name and r.verdict in compare.FAILING + (compare.UNSUPPORTED,)
            and not borderline(contract, n.name, r)}


def agrees(contract, r, text):
    """Whether a result shows what its known-failure entry recorded: the same text, or for a backend whose
    numbers vary with the machine (numbers_rel), a DIVERGENT's max abs within that fraction."""
    if contract.numbers_rel and r.verdict == compare.DIVERGENT and "max abs " in text and r.metrics is not None:
        want = float(text.rsplit("max abs ", 1)[1])
        return abs(r.metrics.max_abs - want) <= contract.numbers_rel * abs(want)
    return described(contract.name, r).startswith(text)


@dataclass
class CaseRun:
    bundle: object
    answered: set       # ids of the cases it answers
    outcome: object     # the replay's outcome (outcome.replay: the Replay)
    report: dict        # report.json, written beside it (for the repros)
    path: object        # report.json's path

    @property
    def replay(self):
        return self.outcome.replay


_RUNS = {}


def case_run(name, tmp_path_factory):
    """The backend's op cases, exported once and replayed once per session in every mode; the report
    written for the repro tests."""
    if name not in _RUNS:
        import op_cases
        from irtrace.export.onnx_bundle import bundle_from_onnx
        from irtrace.replay import ReplayOptions, run
        from irtrace.report import write
        contract = CONTRACTS[name]
        cases = contract.cases()
        answered = op_cases.cases_of(name, cases)
        model, feeds, _ = op_cases.all_cases_model([c for c in cases if c.id in answered])
        if contract.extend is not None:
            model, feeds = contract.extend(model, feeds)
        bundle = bundle_from_onnx(model, feeds, tmp_path_factory.mktemp(f"{name}_cases") / "cases.irt",
                                  name="op_cases", trained=op_cases.activations(model, feeds))
        outcome = run(bundle, ReplayOptions(contract.replay_with, verify_workarounds=False))
        out = tmp_path_factory.mktemp(f"{name}_report")
        _RUNS[name] = CaseRun(bundle, answered, outcome, write.write(outcome, out), out / "report.json")
    return _RUNS[name]


@functools.cache
def unavailable_mark(name):
    """Skip where the backend's environment is missing, saying how to build it."""
    import pytest
    from irtrace.replay import backends
    reason = backends.get(name).unavailable()
    return pytest.mark.skipif(reason is not None, reason=f"{name} unavailable: {reason}")


def cases_fixture(name):
    """A module's fixture `cases`: the backend's CaseRun (the same one the contract reads)."""
    import pytest

    @pytest.fixture(scope="module")
    def cases(tmp_path_factory):
        return case_run(name, tmp_path_factory)
    return cases


def worker_fixture(name):
    """A module's fixture `worker`: one worker process of the backend, spoken to directly (node and
    graph requests)."""
    import pytest

    @pytest.fixture(scope="module")
    def worker():
        from irtrace.replay import backends
        from irtrace.replay.worker import WorkerProxy
        w = WorkerProxy(backends.get(name))
        w.start()
        yield w
        w.close()
    return worker


def small_bundle(nodes, feeds, path, inits=(), outputs=None):
    """A bundle of a few ONNX nodes on float32 feeds (known-answer tests)."""
    from irtrace.export.onnx_bundle import bundle_from_onnx
    ins = [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in feeds.items()]
    outs = [helper.make_empty_tensor_value_info(o) for o in (outputs or nodes[-1].output)]
    m = helper.make_model(helper.make_graph(nodes, "g", ins, outs, list(inits)),
                          opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("ai.irtrace", 1)])
    return bundle_from_onnx(m, feeds, path)


def chained(name, bundle, loss, out):
    """A chained run of `bundle` on backend `name` through the CLI's options (one node replayed in
    isolation: that part is not under test): its one chain and the output folder."""
    from irtrace.replay import ReplayOptions
    from irtrace.report.folder import replay_into
    first = bundle.model.graph.node[0].name
    replayed = replay_into(bundle.path, ReplayOptions.parse(name, "fwd", chained=True, loss=loss, nodes=f"^{first}$"), out=out)
    report = replayed.json
    (chain,) = report["chained"]["runs"]
    assert report["chained"]["loss"] == loss
    return chain, replayed.out


def low_precision_findings(tmp_path, backend, op, seed=5, rank=None, dtype="float16", modes=("fwd", "vjp")):
    """(the case, the findings of `backend` in `modes`, UNSUPPORTED ones too) of the first `dtype` case of `op`
    (of that rank, when given) that irtrace fuzz draws for `seed`, recorded beside a float32 case of the op."""
    from irtrace.fuzz import generate
    from irtrace.fuzz import run as fuzz_run
    half = next(c for c in (generate.draw_case(seed, i, op, (), (dtype,)) for i in range(40))
                if c.dtype == dtype and rank in (None, c.inputs[0].value.ndim))
    single = generate.draw_case(seed, half.index + 1, op)
    assert single.dtype == "float32" and single.problem is None
    bundle, kept, dropped = fuzz_run._record(tmp_path, [half, single], seed)
    assert len(kept) == 2 and not dropped
    return half, fuzz_run._replay(bundle, (backend,), modes, 60)
