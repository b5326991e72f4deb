"""`irtrace port` on real frameworks: correct ports of two models match module by module, and the mistakes
porters make (../shared/seeds/) are each named at their module with the reason; bad input is one line,
exit 2, nothing written. The ports are tests/ports/<framework>_ports.py (the same factory names in each), the
torch models tests/models_for_tests.py."""
import json
import os
import re
import subprocess
from pathlib import Path
from typing import NamedTuple

import pytest

import irtrace
from irtrace.cli import main
from irtrace.replay import backends

HERE = Path(__file__).parent
PORTS = str(HERE / "ports")


class Framework(NamedTuple):
    backend: str
    ports: str   # tests/ports/<ports>.py: the test ports, with the same factory names in every framework
    # the isolated finding (op type, mode, verdict) that explains the correct head's step under the gradient
    # penalty (its train-mode BatchNorm's double backward); None: the framework computes it, the port matches
    penalty: tuple = ("TrainBatchNormalization", "vjp2", "DIVERGENT")


# the frameworks whose ports these tests check (one line each); `each()` makes them test parameters
FRAMEWORKS = [Framework("megengine", "mge_ports"), Framework("tensorflow", "tf_ports"),
              Framework("paddle", "paddle_ports", penalty=None),
              Framework("oneflow", "oneflow_ports", penalty=("TrainBatchNormalization", "vjp2", "ERROR"))]
ALL = tuple(f.backend for f in FRAMEWORKS)


def each(default=ALL):
    """One pytest parameter per framework: skipped where its backend is unavailable, and in `make test-slow`
    only where it is not in `default` (each framework's default suite: a correct port, one mistake, the capture)."""
    out = []
    for f in FRAMEWORKS:
        reason = backends.get(f.backend).unavailable()
        marks = [pytest.mark.skipif(reason is not None, reason=f"{f.backend} unavailable: {reason}")]
        if f.backend not in default:
            marks.append(pytest.mark.slow)
        out.append(pytest.param(f, marks=marks, id=f.backend))
    return out


def only(backend):
    reason = backends.get(backend).unavailable()
    return pytest.mark.skipif(reason is not None, reason=f"{backend} unavailable: {reason}")


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    import models_for_tests as m
    return irtrace.export(m.conv_bn_head(), m.conv_bn_head_inputs(), tmp_path_factory.mktemp("head") / "head.irt",
                          train=True)


@pytest.fixture(scope="module")
def wrn(tmp_path_factory):
    import models_for_tests as m
    return irtrace.export(m.same_pad_wrn(), m.same_pad_wrn_inputs(), tmp_path_factory.mktemp("wrn") / "wrn.irt")


@pytest.fixture(scope="module")
def wrn_symmetric(tmp_path_factory):
    import models_for_tests as m
    return irtrace.export(m.same_pad_wrn(fixed=False), m.same_pad_wrn_inputs(),
                          tmp_path_factory.mktemp("wrn_sym") / "wrn.irt")


def port(bundle, factory, tmp_path, *extra, fw=FRAMEWORKS[0]):
    """(exit code, report.json or None) of `irtrace port` with `fw`'s test port `factory`."""
    out = tmp_path / f"{fw.backend}_{factory.replace(':', '_')}"
    code = main(["port", str(bundle.path), "--port", f"{fw.ports}:{factory}", "--backend", fw.backend,
                 "--path", PORTS, "-o", str(out), *extra])
    report = out / "report.json"
    return code, (json.loads(report.read_text()) if report.exists() else None)


def verdicts(report, kind):
    return {r["name"]: r["verdict"] for r in report[kind]}


@pytest.mark.parametrize("fw", each())
def test_a_correct_port_matches_every_module_gradient_and_running_stat(head, tmp_path, capsys, fw):
    code, r = port(head, "head", tmp_path, fw=fw)
    assert code == 0 and not r["diverges"]
    assert set(verdicts(r, "modules")) == {"conv", "bn", "square", "head"}
    assert set(verdicts(r, "grads")) == {"conv", "bn", "square", "head"}
    assert set(verdicts(r, "parameters")) == {"conv.weight", "conv.bias", "bn.weight", "bn.bias", "square.weight",
                                             "square.bias", "head.weight", "head.bias"}
    assert set(verdicts(r, "state")) == {"bn.running_mean", "bn.running_var"}
    assert all(r2["verdict"] in ("MATCH", "NOISE") for k in ("modules", "grads", "parameters", "state", "outputs")
               for r2 in r[k])
    assert "irtrace port: the port matches" in capsys.readouterr().out


@pytest.mark.parametrize("fw", each(default=("megengine",)))
def test_symmetric_padding_where_the_bundle_pads_same_is_named_with_its_pads(wrn, tmp_path, capsys, fw):
    """../shared/seeds/004: a TensorFlow WideResNet pads 'SAME' at stride 2 (nothing before, one after); the
    port pads 1 on every side (in TensorFlow: a ZeroPadding2D before the conv, counted as the conv's). The
    correct port matches; this one diverges first at block2.conv1, whose op matches in isolation: the port's
    code, with the pads that differ."""
    assert port(wrn, "wrn_same", tmp_path, fw=fw)[0] == 0
    code, r = port(wrn, "wrn_symmetric", tmp_path, fw=fw)
    assert code == 1 and r["first_forward"]["name"] == "block2.conv1"
    e = r["explanation"]
    assert e["module"] == "block2.conv1" and e["culprits"] == []
    assert "pads [1, 1, 1, 1] in the port vs [0, 0, 1, 1] in the bundle's Conv" in e["text"]
    assert "the difference is in the port's code of block2.conv1" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("fw", each())
@pytest.mark.parametrize("factory, where, words", [
    ("head_untransposed", "square", "the difference is in the port's code of square"),
    ("head_no_gain", "head", "the difference is in the port's code of head")])
def test_a_wrong_module_is_the_first_to_diverge_and_its_ops_are_cleared(head, tmp_path, factory, where, words, fw):
    """A Linear weight used without its transpose (square, 8x8: the shapes agree), an equalized-lr layer
    without its gain: the first module whose output diverges, every op inside it clean in isolation."""
    code, r = port(head, factory, tmp_path, fw=fw)
    assert code == 1 and r["first_forward"]["name"] == where
    assert words in r["explanation"]["text"] and r["explanation"]["culprits"] == []
    before = [x for x in r["modules"] if x["name"] in ("conv", "bn")]
    assert before and all(x["verdict"] in ("MATCH", "NOISE") for x in before)


@pytest.mark.slow
@pytest.mark.parametrize("fw", each())
def test_running_var_with_the_other_estimator_is_named_with_the_exact_factor(head, tmp_path, fw):
    """../shared/seeds/001 (OneFlow's BatchNorm): running_var updated with the biased variance (Keras's own
    BatchNormalization does). Only that stat diverges, by exactly (n-1)/n of the batch variance term
    (n = 4 * 6 * 6)."""
    code, r = port(head, "head_biased_bn", tmp_path, fw=fw)
    assert code == 1 and verdicts(r, "state") == {"bn.running_mean": "MATCH", "bn.running_var": "DIVERGENT"} or \
        verdicts(r, "state")["bn.running_var"] == "DIVERGENT"
    (row,) = [x for x in r["state"] if x["name"] == "bn.running_var"]
    assert "= (n-1)/n exactly (n = 144 values per channel)" in row["message"]
    assert all(x["verdict"] in ("MATCH", "NOISE") for x in r["modules"] + r["parameters"])


@pytest.mark.slow
@pytest.mark.parametrize("fw", each())
def test_a_gradient_penalty_step_that_drops_the_penalty_is_named(head, tmp_path, fw):
    """The port detaches its input: under the gradient-penalty loss its outputs match and its parameter
    gradients are the plain loss's."""
    code, r = port(head, "head_detached", tmp_path, "--loss", "grad-penalty", fw=fw)
    assert code == 1 and r["penalty_dropped"] and all(x["verdict"] in ("MATCH", "NOISE") for x in r["outputs"])
    assert "its step drops the gradient penalty" in r["explanation"]["text"]


@only("megengine")
def test_a_step_that_raises_where_no_bundle_op_does_names_the_port_s_line(head, tmp_path):
    """The port's step raises in a call the bundle's graph does not make (here a planted raise; in the wild
    paddle.flatten, whose double backward Paddle lacks, where the graph has a Reshape): no isolated finding
    fails that way, so the report says where the port raised and that irtrace cannot tell whose fault it is,
    not that the port's code is wrong."""
    code, r = port(head, "head_raising", tmp_path)
    step = r["outputs"][0]
    assert code == 1 and step["verdict"] == "ERROR" and "planted: the port's own call fails" in step["message"]
    assert re.fullmatch(r"tests/ports/mge_ports\.py:\d+: raise ValueError\(.*", step["at"]), step["at"]
    text = r["explanation"]["text"]
    assert "the failing call is one the port makes and the bundle's graph does not (raised at tests/ports/" in text
    assert "the framework's fault" not in text


@pytest.mark.slow
@pytest.mark.parametrize("fw", each())
def test_batchnorm_double_backward_is_the_framework_s_fault_under_a_penalty(head, tmp_path, fw):
    """The correct port under the gradient penalty: MegEngine's train-mode BatchNorm double backward is off, and so
    is TensorFlow's (tf.nn.moments takes the variance around stop_gradient(mean): right first derivatives, wrong
    second ones), so the gradients of everything upstream of it diverge, and the cross-reference says so; OneFlow
    has none (normalization_grad has no gradient: the step raises, the isolated finding that fails the same way is
    named); Paddle's test port writes its BatchNorm out (Paddle's own updates running_var with the biased variance),
    whose double backward Paddle computes: the port matches."""
    code, r = port(head, "head", tmp_path, "--loss", "grad-penalty", fw=fw)
    assert not r["penalty_dropped"]
    if fw.penalty is None:
        assert code == 0 and not r["diverges"] and r["explanation"] is None
        return
    assert code == 1
    c = r["explanation"]["culprits"][0]
    assert (c["op_type"], c["mode"], c["verdict"]) == fw.penalty
    assert "the framework's fault" in r["explanation"]["text"]


@pytest.mark.parametrize("fw", each(default=("megengine",)))
def test_a_map_renames_the_port_s_names(head, tmp_path, fw):
    """A port whose head is called classifier: refused without a map, loaded with one."""
    code, r = port(head, "wrong_names", tmp_path, fw=fw)
    assert code == 2 and r is None
    m = tmp_path / "map.toml"
    m.write_text('[[rename]]\nfrom = "^classifier"\nto = "head"\n')
    code, r = port(head, "wrong_names", tmp_path, "--map", str(m), fw=fw)
    assert code == 0 and "head" in verdicts(r, "modules")


@pytest.mark.parametrize("fw", each(default=("megengine",)))
@pytest.mark.parametrize("factory, extra, words", [
    ("raises", (), "the port factory '{ports}:raises' raised RuntimeError: planted: the port cannot be built"),
    ("no_such_factory", (), "cannot import the port factory '{ports}:no_such_factory'"),
    ("wrong_names", (), "the port's parameters do not match the bundle's (nothing was run): 2 bundle parameter(s) "
                        "with no port parameter: head.weight, head.bias; 2 port parameter(s) with no bundle value: "
                        "classifier.bias, classifier.weight"),
    ("wrong_output", (), "the port returned 1 output(s) of shape(s) [[4, 2]]; the bundle's model returns 1 of shape(s) "
                         "[[4, 3]]"),
    ("head", ("--map", "MAP"), "not TOML"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(head, tmp_path, capsys, factory, extra, words, fw):
    extra = [str(tmp_path / "map.toml") if e == "MAP" else e for e in extra]
    (tmp_path / "map.toml").write_text("[[rename\n")
    code, r = port(head, factory, tmp_path, *extra, fw=fw)
    err = capsys.readouterr().err.strip()
    words = words.format(ports=fw.ports)
    assert code == 2 and r is None and not (tmp_path / f"{fw.backend}_{factory}").exists()
    assert err.startswith("irtrace: error: ") and words in err and "\n" not in err, err


@pytest.mark.parametrize("fw", each())
def test_capture_does_not_change_the_port_s_results(fw):
    """The hooks (MegEngine, Paddle, OneFlow), call wrappers and tape watches (TensorFlow) that capture every
    module's output and gradient, and the gradient requests for them, change nothing: the same outputs, parameter gradients and buffers, bitwise, as a step without
    them (in the framework's own env)."""
    info = backends.get(fw.backend)
    code = f"""
import sys, numpy as np
sys.path.insert(0, {PORTS!r})
from backends.{fw.backend} import port  # first: OneFlow's driver loads the CUDA runtime its wheel links
import {fw.ports} as ports
x = np.random.default_rng(0).standard_normal((4, 3, 6, 6)).astype('float32')
seed = np.random.default_rng(1).standard_normal((4, 3)).astype('float32')
runs = []
for capture in (True, False):
    m = ports.head()
    w = {{n: np.random.default_rng(2).standard_normal(np.shape(v)).astype('float32') for n, v, k in port.parameters(m)
          if k == 'parameter'}}
    port.load(m, w)
    runs.append(port.run(m, [x], [seed], 'dot', True, capture=capture))
a, b = runs
same = all(np.array_equal(p, q) for p, q in zip(a['outputs'], b['outputs']))
same &= all(np.array_equal(a['params'][k], b['params'][k]) for k in a['params'])
same &= all(np.array_equal(a['buffers'][k], b['buffers'][k]) for k in a['buffers'])
print('captured', len(a['modules']), len(a['grads']), 'same', same)
"""
    env = {**os.environ, **info.variables(), "PYTHONPATH": str(HERE.parent)}
    r = subprocess.run([info.interpreter(), "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert "captured 4 4 same True" in r.stdout, r.stdout + r.stderr


@pytest.mark.slow
@only("megengine")
def test_the_seed_scenario_stylegan2_ported_to_megengine(example_bundle, tmp_path):
    """../shared/seeds/000 end to end: StyleGAN2 ported to MegEngine with F.leaky_relu and F.pad, checked under
    the gradient penalty. With F.leaky_relu the step raises, and the isolated LeakyRelu vjp2 finding with its
    workaround is named; with the leaky ReLU as a where, the parameter gradients diverge and F.pad's double
    backward is named, with its workaround; with both workarounds the port matches end to end."""
    b = example_bundle("stylegan2")

    def check(factory):
        out = tmp_path / factory
        code = main(["port", str(b.path), "--port", f"backends.megengine.ports.stylegan2:{factory}", "--backend",
                     "megengine", "--loss", "grad-penalty", "-o", str(out)])
        return code, json.loads((out / "report.json").read_text())
    code, r = check("synthesis")
    assert code == 1 and r["outputs"][0]["verdict"] == "ERROR" and "PRELU_GRAD" in r["outputs"][0]["message"]
    c = r["explanation"]["culprits"][0]
    assert (c["op_type"], c["mode"], c["verdict"]) == ("LeakyRelu", "vjp2", "ERROR") and "leaky_relu_where" in c["workarounds"]
    code, r = check("synthesis_where")
    assert code == 1 and all(x["verdict"] in ("MATCH", "NOISE") for x in r["outputs"] + r["modules"])
    c = r["explanation"]["culprits"][0]
    assert (c["op_type"], c["mode"], c["verdict"], c["workarounds"]) == ("Pad", "vjp2", "DIVERGENT", ["pad_concat"])
    assert "synthesis.b8.conv0" in r["explanation"]["text"]
    code, r = check("synthesis_workarounds")
    assert code == 0 and not r["diverges"] and len(r["parameters"]) == 28


@pytest.mark.slow
@pytest.mark.parametrize("example, factory", [("resnet", "resnet:resnet"), ("gpt", "gpt:gpt_block"),
                                              ("wideresnet", "wideresnet:wideresnet"),
                                              ("wideresnet-train", "wideresnet:wideresnet_dropout"),
                                              ("stylegan2", "stylegan2:synthesis")])
def test_megengine_ports_of_the_examples_match_under_the_plain_loss(example_bundle, tmp_path, example, factory):
    """Every example's MegEngine port (backends/megengine/ports/) matches module by module, gradients and
    running stats included, the train-mode ones taking the recorded dropout masks."""
    out = tmp_path / "out"
    code = main(["port", str(example_bundle(example).path), "--port", f"backends.megengine.ports.{factory}",
                 "--backend", "megengine", "-o", str(out)])
    r = json.loads((out / "report.json").read_text())
    assert code == 0 and not r["diverges"] and r["modules"] and r["parameters"], r["explanation"]


@only("megengine")
def test_a_penalty_on_a_model_without_float_inputs_is_the_plain_loss(example_bundle, tmp_path):
    """GPT takes token ids: a gradient penalty has nothing to differentiate, so `--loss grad-penalty` runs and
    judges the plain loss's step, module output gradients included, and says so."""
    out = tmp_path / "out"
    code = main(["port", str(example_bundle("gpt").path), "--port", "backends.megengine.ports.gpt:gpt_block",
                 "--backend", "megengine", "--loss", "grad-penalty", "-o", str(out)])
    r = json.loads((out / "report.json").read_text())
    assert code == 0 and r["plain_loss"] and r["loss"] == "grad-penalty" and not r["diverges"]
    assert len(r["grads"]) == len(r["modules"]) == 17
    assert any("no float input for a gradient penalty" in n for n in r["notes"])


# ---- TensorFlow's own: Keras's defaults and idioms that differ from torch ----

@pytest.mark.slow
@only("tensorflow")
def test_tensorflow_same_padding_where_torch_pads_symmetrically_is_named(wrn_symmetric, tmp_path, capsys):
    """../shared/seeds/004 as it happened: torch's WideResNet pads 1 on every side at stride 2, the Keras port
    writes padding='same' (TensorFlow's SAME pads [0, 1] there). The port written with a ZeroPadding2D matches;
    the 'same' one diverges first at block2.conv1, whose op matches in isolation: the pads its 'same' took at
    its input size, against the bundle's."""
    fw = Framework("tensorflow", "tf_ports")
    assert port(wrn_symmetric, "wrn_symmetric", tmp_path, fw=fw)[0] == 0
    code, r = port(wrn_symmetric, "wrn_same", tmp_path, fw=fw)
    assert code == 1 and r["first_forward"]["name"] == "block2.conv1"
    e = r["explanation"]
    assert e["module"] == "block2.conv1" and e["culprits"] == []
    assert "pads [0, 0, 1, 1] in the port vs [1, 1, 1, 1] in the bundle's Conv" in e["text"]
    assert any("NHWC port" in n and "fed transposed (0, 2, 3, 1)" in n for n in r["notes"])
    assert "the difference is in the port's code of block2.conv1" in capsys.readouterr().out


@pytest.mark.slow
@only("tensorflow")
def test_tensorflow_keras_batchnorm_defaults_are_named_through_epsilon_and_momentum(head, tmp_path):
    """keras.layers.BatchNormalization() as it comes: epsilon 1e-3 (torch 1e-5) makes bn the first module
    whose output diverges; its attributes say why, with the momentum (0.99 kept, torch 0.9) and the estimator."""
    code, r = port(head, "head_keras_defaults", tmp_path, fw=Framework("tensorflow", "tf_ports"))
    assert code == 1 and r["first_forward"]["name"] == "bn"
    e = r["explanation"]
    assert e["culprits"] == [] and "the difference is in the port's code of bn" in e["text"]
    said = " ".join(e["attributes"])
    assert "epsilon 0.001 in the port vs 1e-05 in the bundle's" in said
    assert "momentum 0.99 in the port vs 0.9" in said and "running_var_estimator biased in the port vs unbiased" in said


@pytest.mark.slow
@only("tensorflow")
def test_tensorflow_an_unbuilt_keras_model_is_one_line_exit_2(head, tmp_path, capsys):
    code, r = port(head, "not_built", tmp_path, fw=Framework("tensorflow", "tf_ports"))
    err = capsys.readouterr().err.strip()
    assert code == 2 and r is None and "\n" not in err
    assert "the port's Keras model is not built (ConvBNHead, conv, bn, ... has no variables yet)" in err


@pytest.mark.slow
@only("tensorflow")
@pytest.mark.parametrize("name, factory", [("wideresnet", "wideresnet"), ("wideresnet-train", "wideresnet_dropout")])
def test_tensorflow_wideresnet_example_ports_match(example_bundle, tmp_path, name, factory):
    """backends/tensorflow/ports/wideresnet.py: eval, and train with the recorded dropout masks (NCHW, the port
    transposes them), every module, module gradient, parameter gradient and running stat MATCH or NOISE."""
    out = tmp_path / factory
    code = main(["port", str(example_bundle(name).path), "--port", f"backends.tensorflow.ports.wideresnet:{factory}",
                 "--backend", "tensorflow", "-o", str(out)])
    r = json.loads((out / "report.json").read_text())
    assert code == 0 and not r["diverges"] and len(r["modules"]) == 33 and len(r["parameters"]) == 25
    assert r["unaligned"] == ["block2.layer.0.pad1", "block3.layer.0.pad1"]
    if name == "wideresnet-train":
        assert len(r["state"]) == 14 and any("handed to the port's factory (recorded=)" in n for n in r["notes"])


# backends/tensorflow/ports/{resnet,gpt}.py on the example bundles: (example, factory, loss, the isolated finding
# (op type, mode, verdict) the cross-reference names, or None where the port matches everywhere)
TF_EXAMPLE_PORTS = [
    ("resnet", "resnet", "dot", None),
    # tf.nn.moments takes the variance around stop_gradient(mean): right in value and first gradient, wrong in the
    # second, which the penalty's double backward takes through every train-mode BatchNorm
    ("resnet", "resnet", "grad-penalty", ("TrainBatchNormalization", "vjp2", "DIVERGENT")),
    # the same port with the variance around the mean itself (ExactMomentsBatchNorm): nothing else diverged
    ("resnet", "resnet_workarounds", "grad-penalty", None),
    ("gpt", "gpt_block", "dot", None),
    ("gpt", "gpt_block", "grad-penalty", None),  # token inputs only: the penalty is the plain loss
]


@pytest.mark.slow
@only("tensorflow")
@pytest.mark.parametrize("example, factory, loss, culprit", [
    pytest.param(*case, id="-".join(case[1:3])) for case in TF_EXAMPLE_PORTS])
def test_tensorflow_resnet_and_gpt_example_ports_match_or_name_the_framework_s_op(example_bundle, tmp_path, example,
                                                                                  factory, loss, culprit):
    """backends/tensorflow/ports/resnet.py (NHWC, torch's symmetric stride-2 and max-pool padding written as
    ZeroPadding2D) and gpt.py (the recorded dropout masks, by module path): every module output, module gradient,
    parameter gradient and running stat MATCH or NOISE, or only the parameter gradients diverge, where TensorFlow's
    op is named."""
    out = tmp_path / "port"
    code = main(["port", str(example_bundle(example).path), "--port", f"backends.tensorflow.ports.{example}:{factory}",
                 "--backend", "tensorflow", "--loss", loss, "-o", str(out)])
    r = json.loads((out / "report.json").read_text())
    sizes = {"resnet": (19, 20, 12), "gpt": (17, 17, 0)}[example]
    assert (len(r["modules"]), len(r["parameters"]), len(r["state"])) == sizes
    assert r["unaligned"] == (["layer2.0.pad1", "pad"] if example == "resnet" else [])
    if example == "gpt":
        assert any("handed to the port's factory (recorded=)" in n for n in r["notes"])
    if culprit is None:
        assert code == 0 and not r["diverges"], r["explanation"]
        return
    assert code == 1 and _culprit(r) == culprit and "the framework's fault" in r["explanation"]["text"]
    assert all(x["verdict"] in ("MATCH", "NOISE") for x in r["modules"] + r["outputs"] + r["state"])
    assert {x["verdict"] for x in r["parameters"]} >= {"DIVERGENT"}


@pytest.mark.slow
@only("tensorflow")
def test_tensorflow_stylegan2_grouped_convs_are_the_framework_s_fault_and_the_workaround_port_matches(
        example_bundle, tmp_path):
    """backends/tensorflow/ports/stylegan2.py under the gradient penalty: written as the torch reference (the
    batch as conv groups, the FIR filter as a depthwise conv), the step fails where TensorFlow's CPU kernels refuse
    grouped convolutions, and the isolated Conv finding that fails the same way is named; written without grouped
    convolutions (styles on the activations, channels folded into the batch), it matches end to end."""
    b = example_bundle("stylegan2")

    def check(factory):
        out = tmp_path / factory
        code = main(["port", str(b.path), "--port", f"backends.tensorflow.ports.stylegan2:{factory}", "--backend",
                     "tensorflow", "--loss", "grad-penalty", "-o", str(out)])
        return code, json.loads((out / "report.json").read_text())
    code, r = check("synthesis")
    (step,) = r["outputs"]
    assert code == 1 and step["verdict"] == "ERROR"
    assert "Gradients for grouped convolutions are not supported on CPU" in step["message"]
    c = r["explanation"]["culprits"][0]
    assert (c["op_type"], c["mode"], c["verdict"]) == ("Conv", "vjp", "ERROR")
    assert "the framework's fault" in r["explanation"]["text"]
    code, r = check("synthesis_workarounds")
    assert code == 0 and not r["diverges"] and len(r["parameters"]) == 28 and len(r["modules"]) == 14


@pytest.mark.slow
@only("tensorflow")
def test_tensorflow_capture_of_a_tf_module_does_not_change_its_results():
    """The per-instance subclasses that wrap a tf.Module's __call__ change nothing (StyleGAN2's port, both losses)."""
    info = backends.get("tensorflow")
    code = """
import numpy as np
from backends.tensorflow import port
from backends.tensorflow.ports import stylegan2
rng = np.random.default_rng(0)
xs = [rng.standard_normal(s).astype('float32') for s in [(2, 8), (2, 1, 4, 4), (2, 1, 8, 8), (2, 1, 8, 8)]]
seed = rng.standard_normal((2, 3, 8, 8)).astype('float32')
for loss in ('dot', 'grad-penalty'):
    runs = []
    for capture in (True, False):
        m = stylegan2.synthesis_workarounds()
        port.load(m, {n: np.random.default_rng(2).standard_normal(np.shape(v)).astype('float32') * 0.3
                      for n, v, k in port.parameters(m)})
        runs.append(port.run(m, xs, [seed], loss, True, capture=capture))
    a, b = runs
    same = all(np.array_equal(p, q) for p, q in zip(a['outputs'], b['outputs']))
    same &= all(np.array_equal(a['params'][k], b['params'][k]) for k in a['params'])
    restored = type(m.mapping) is stylegan2.MappingNetwork and type(m.synthesis.b8.conv0) is stylegan2.SynthesisLayer
    print(loss, 'captured', len(a['modules']), len(a.get('grads', {})), 'same', same, 'restored', restored)
"""
    env = {**os.environ, **info.variables(), "PYTHONPATH": str(HERE.parent)}
    r = subprocess.run([info.interpreter(), "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert "dot captured 14 14 same True restored True" in r.stdout, r.stdout + r.stderr
    assert "grad-penalty captured 14 0 same True restored True" in r.stdout, r.stdout + r.stderr


# ---- Paddle's and OneFlow's own ----

def _culprit(r):
    c = r["explanation"]["culprits"][0]
    return c["op_type"], c["mode"], c["verdict"]


@pytest.mark.slow
@pytest.mark.parametrize("backend, culprit", [
    pytest.param("oneflow", None, marks=only("oneflow"), id="oneflow"),
    # Paddle's own BatchNorm2D updates running_var with the biased variance: its isolated finding has the numbers
    # of a port's own biased BatchNorm too, and is named
    pytest.param("paddle", ("TrainBatchNormalization", "fwd", "DIVERGENT"), marks=only("paddle"), id="paddle")])
def test_a_biased_running_var_is_cross_referenced_at_bn(head, tmp_path, backend, culprit):
    """The port's own BatchNorm updating running_var with the biased variance: the cross-reference looks at bn's
    forward; OneFlow's batch_norm is right in isolation (the port's code), Paddle's makes the same mistake."""
    fw = next(f for f in FRAMEWORKS if f.backend == backend)
    code, r = port(head, "head_biased_bn", tmp_path, fw=fw)
    e = r["explanation"]
    assert code == 1 and e["module"] == "bn" and e["where"] == "running stats"
    if culprit is None:
        assert e["culprits"] == [] and "the difference is in the port's code of bn" in e["text"]
    else:
        assert _culprit(r) == culprit and "the framework's fault" in e["text"]


@pytest.mark.slow
@only("paddle")
@pytest.mark.parametrize("factory, words", [
    # paddle.nn.BatchNorm2D: Paddle's biased running_var, named with the attribute that says so
    ("head_paddle_bn", ["running_var_estimator biased in the port vs unbiased in the bundle's TrainBatchNormalization"]),
    # torch's momentum 0.1 copied into Paddle's, which is the fraction kept
    ("head_torch_momentum", ["momentum 0.1 in the port vs 0.9 in the bundle's TrainBatchNormalization",
                             "running_var_estimator biased"]),
])
def test_paddle_s_own_batchnorm_is_named_with_what_differs(head, tmp_path, factory, words):
    code, r = port(head, factory, tmp_path, fw=Framework("paddle", "paddle_ports"))
    assert code == 1 and all(x["verdict"] in ("MATCH", "NOISE") for x in r["modules"] + r["grads"] + r["parameters"])
    assert verdicts(r, "state")["bn.running_var"] == "DIVERGENT"
    assert _culprit(r) == ("TrainBatchNormalization", "fwd", "DIVERGENT")
    assert all(w in r["explanation"]["text"] for w in words), r["explanation"]["text"]


# The example ports Paddle and OneFlow ship (backends/<name>/ports/<example module>.py, what `make demo` checks),
# on the example bundles: (backend, example, factory, loss, the isolated finding (op type, mode, verdict) the
# cross-reference names, or None where the port matches everywhere).
EXAMPLE_PORTS = [
    ("paddle", "wideresnet", "wideresnet", "dot", None),
    # Paddle's BatchNorm2D updates running_var with the biased variance: every running_var, Paddle's fault
    ("paddle", "wideresnet-train", "wideresnet_dropout", "dot", ("TrainBatchNormalization", "fwd", "DIVERGENT")),
    ("paddle", "stylegan2", "synthesis", "dot", None),
    # no double backward of a depthwise conv2d (upfirdn2d's FIR filter): the step raises
    ("paddle", "stylegan2", "synthesis", "grad-penalty", ("Conv", "vjp2", "ERROR")),
    # the same running_var (the ResNet's six BatchNorms); everything else matches
    ("paddle", "resnet", "resnet", "dot", ("TrainBatchNormalization", "fwd", "DIVERGENT")),
    # no double backward of max_pool2d ("Pool op grad grad only supports avgpool"): the step raises
    ("paddle", "resnet", "resnet", "grad-penalty", ("MaxPool", "vjp2", "ERROR")),
    ("paddle", "gpt", "gpt_block", "dot", None),
    ("oneflow", "wideresnet", "wideresnet", "dot", None),
    ("oneflow", "wideresnet-train", "wideresnet_dropout", "dot", None),
    ("oneflow", "stylegan2", "synthesis", "dot", None),
    ("oneflow", "stylegan2", "synthesis", "grad-penalty", None),
    ("oneflow", "resnet", "resnet", "dot", None),
    # no double backward of OneFlow's batch norm ("The gradient function for op normalization_grad is not found")
    ("oneflow", "resnet", "resnet", "grad-penalty", ("TrainBatchNormalization", "vjp2", "ERROR")),
    ("oneflow", "gpt", "gpt_block", "dot", None),
]


@pytest.mark.slow
@pytest.mark.parametrize("backend, example, factory, loss, culprit", [
    pytest.param(*case, id="-".join(case[:2] + (case[3],)), marks=only(case[0])) for case in EXAMPLE_PORTS])
def test_paddle_and_oneflow_example_ports_match_or_name_the_framework_s_op(example_bundle, tmp_path, backend, example,
                                                                           factory, loss, culprit):
    out = tmp_path / "port"
    code = main(["port", str(example_bundle(example).path), "--port",
                 f"backends.{backend}.ports.{example.split('-')[0]}:{factory}", "--backend", backend, "--loss", loss,
                 "-o", str(out)])
    r = json.loads((out / "report.json").read_text())
    if culprit is None:
        assert code == 0 and not r["diverges"] and r["modules"] and r["parameters"], r["explanation"]
        return
    assert code == 1 and _culprit(r) == culprit and "the framework's fault" in r["explanation"]["text"]
    if loss == "dot":  # only the culprit's part diverges: every module output and gradient matches
        assert all(x["verdict"] in ("MATCH", "NOISE") for x in r["modules"] + r["grads"] + r["parameters"] + r["outputs"])


@pytest.mark.slow
@only("paddle")
def test_a_parameter_the_port_does_not_train_is_an_error_not_dropped(head, tmp_path):
    """Paddle holds a stop_gradient parameter as a constant: torch trains head.weight, the port does not."""
    code, r = port(head, "head_frozen_head", tmp_path, fw=Framework("paddle", "paddle_ports"))
    assert code == 1 and verdicts(r, "parameters")["head.weight"] == "ERROR"
    (row,) = [x for x in r["parameters"] if x["name"] == "head.weight"]
    assert "the port does not train head.weight" in row["message"]


@only("paddle")
def test_paddle_module_outputs_that_are_views_get_their_own_gradient():
    """a = x * w, then two sublayers each return a view of it (reshape); loss = <v1, 1> + <v2, 10>. Asked in one
    paddle.grad call with a, Paddle 3.3 gives v1 a's gradient (11); the driver asks views on their own:
    scale 11, v1 1, v2 10, w 11 x (tests/backends/test_paddle.py::test_paddle_grad_of_intermediate_tensors_is_wrong)."""
    info = backends.get("paddle")
    code = """
import numpy as np, paddle
import paddle.nn as nn
from backends.paddle import port
class Scale(nn.Layer):
    def __init__(self):
        super().__init__()
        self.w = self.create_parameter([6], default_initializer=nn.initializer.Constant(2.0))
    def forward(self, x):
        return x * self.w
class Flat(nn.Layer):
    def forward(self, a):
        return a.reshape([2, 3])
class Net(nn.Layer):
    def __init__(self):
        super().__init__()
        self.scale, self.v1, self.v2 = Scale(), Flat(), Flat()
    def forward(self, x):
        a = self.scale(x)
        return self.v1(a) * 1.0 + self.v2(a) * 10.0
x = np.arange(6, dtype="float32")
r = port.run(Net(), [x], [np.ones((2, 3), "float32")], "dot", True)
g = r["grads"]
print("ok", bool(np.all(g["scale"] == 11) and np.all(g["v1"] == 1) and np.all(g["v2"] == 10)
                 and np.array_equal(r["params"]["scale.w"], 11 * x)))
"""
    env = {**os.environ, **info.variables(), "PYTHONPATH": str(HERE.parent)}
    r = subprocess.run([info.interpreter(), "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert "ok True" in r.stdout, r.stdout + r.stderr


def test_a_failed_steps_cause_is_matched_without_the_chained_error_a_worker_adds():
    """A replay worker's ERROR says what the error was raised from ("(caused by ...)"); the port's own step does not.
    TensorFlow's grouped-conv message then holds "doesn't" twice, and the text between its two apostrophes read as
    a quoted name: the isolated Conv finding no longer matched the port's step, which was called the port's fault."""
    from irtrace.port.check import _failure
    said = ("InvalidArgumentError: Gradients for grouped convolutions are not supported on CPU. Please file a feature "
            "request if you run into this issue. Computed input depth 3 doesn't match filter input depth 1 "
            "[Op:Conv2DBackpropInput]")
    isolated = (said.replace("depth 3", "depth 16").replace("depth 1 ", "depth 8 ") + " (caused by "
                "InvalidArgumentError: {{function_node __wrapped__Conv2DBackpropInput}} Gradients for grouped "
                "convolutions are not supported on CPU. Computed input depth 16 doesn't match filter input depth 8) "
                "(conv.py:40)")
    assert _failure(isolated) == _failure(said)
