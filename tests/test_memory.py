"""A step that cannot fit in this machine's memory is refused with its reason before it runs (never an
OOM kill midway): an export whose module's parameters alone need more than is available, a replayed call
whose inputs do. $IRTRACE_MEMORY_AVAILABLE stands in for the machine's MemAvailable."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

import irtrace
from irtrace.errors import IrtraceError
from irtrace.export.torch_export import EXPORT_HOLDS
from irtrace.replay import ReplayOptions, batch, execute
from irtrace.report.folder import replay_into


def test_an_export_that_cannot_fit_is_refused_before_any_work(tmp_path, monkeypatch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(100, 50), torch.nn.BatchNorm1d(50))
    # by hand: 100*50 + 50 weights and bias, 50 + 50 BN affine, 50 + 50 running stats (float32) and
    # num_batches_tracked (int64): 5250 * 4 + 8 bytes
    nbytes = 5250 * 4 + 8
    assert EXPORT_HOLDS * nbytes == 63024
    monkeypatch.setenv("IRTRACE_MEMORY_AVAILABLE", "50000")
    with pytest.raises(IrtraceError) as e:
        irtrace.export(model, (torch.randn(4, 100),), tmp_path / "m.irt")
    assert str(e.value) == (
        "exporting Sequential needs about 63.0 kB of memory and 50.0 kB is available: its parameters and buffers "
        "(21.0 kB; the largest 0.weight, 50x100 float32, 20.0 kB) need about 3 times that again (a float64 copy of "
        "the module where float32 does not confirm a gradient, the gradients the recording and its check make); "
        "export a part of the model, or on a machine with more memory")
    assert not (tmp_path / "m.irt").exists()
    monkeypatch.setenv("IRTRACE_MEMORY_AVAILABLE", str(EXPORT_HOLDS * nbytes))  # exactly enough: exported
    assert irtrace.export(model, (torch.randn(4, 100),), tmp_path / "m.irt").path.exists()


def test_a_call_that_cannot_fit_is_a_gap_with_its_sizes_not_a_finding(example_bundle, tmp_path, monkeypatch):
    bundle = example_bundle("resnet")  # exported before the machine is made small
    monkeypatch.setattr(execute, "MEMORY_CHECKED", 0)  # every call checked, not only those needing 1 GB
    monkeypatch.setenv("IRTRACE_MEMORY_AVAILABLE", "300000")
    batched = []  # (backend, node, mode) of every call sent ahead in a batch: none that is refused
    original = batch.Batches.__init__

    def spy(self, pool, backend, calls, timeout):
        batched.extend((backend, c.spec.name, c.mode) for c in calls)
        original(self, pool, backend, calls, timeout)
    monkeypatch.setattr(batch.Batches, "__init__", spy)
    written = replay_into(bundle, ReplayOptions(cache=False), tmp_path / "out")
    report = json.loads((written.out / "report.json").read_text())
    refused = [r for n in report["nodes"] for r in n["results"] if r["verdict"] == "UNSUPPORTED"
               and "of memory" in r["message"]]
    assert refused and not report["findings"] and report["summary"]["MATCH"] > 0
    refused_calls = {(r["backend"], n["name"], r["mode"]) for n in report["nodes"] for r in n["results"]
                     if r in refused}
    assert batched and refused_calls and not refused_calls & set(batched)
    assert {b for b, _, _ in batched} == {"onnxruntime"}  # a role's call checked for memory goes alone
    for r in refused:
        m = re.search(r"needs about ([\d.]+) (kB|MB) of memory and 0.30 MB is available: it sends ([\d.]+) kB \(the "
                      r"largest, \S+, [\dx]+ float32, [\d.]+ kB\), held about 20 times", r["message"])
        assert m, r["message"]
        need = float(m.group(1)) * (1e3 if m.group(2) == "kB" else 1e6)
        assert need > 3e5 and need == pytest.approx(20 * float(m.group(3)) * 1e3, rel=0.02)
    # every call small enough was sent and judged
    passed = [r for n in report["nodes"] for r in n["results"] if r["verdict"] == "MATCH"]
    assert all(r["mode"] for r in passed)


EXPORT_PEAK = """
import sys, torch, irtrace
def status(key):
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith(key + ":"))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Embedding(32000, 1024), torch.nn.Linear(1024, 1024), torch.nn.GELU(),
                            torch.nn.Linear(1024, 32000))  # an LLM's ends: 138 MB of weights, 16 tokens
x = torch.randint(0, 32000, (1, 16))
irtrace.export(torch.nn.Sequential(torch.nn.Linear(2, 2)), (torch.randn(1, 2),), sys.argv[1] + "/warm.irt")
before = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak counts from here
irtrace.export(model, (x,), sys.argv[1] + "/m.irt")
print(status("VmHWM") - before, sum(p.numel() * 4 for p in model.parameters()))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux's /proc peak reset")
def test_an_export_holds_no_copy_of_the_weights(tmp_path):
    """The ONNX graphs refer to the module's weights, and every recorded value, gradient and direction
    goes straight to the value store: the export's peak above the built module is the gradients in
    flight (the largest weight's and its transpose's: 1.7x the weights here, 0.2x for a 1.1B Llama whose
    weights are spread over 22 layers), not the 10x to 18x of them it once was."""
    done = subprocess.run([sys.executable, "-c", EXPORT_PEAK, str(tmp_path)], capture_output=True, text=True,
                          check=True)
    extra, weights = map(int, done.stdout.split())
    assert weights == (32000 * 1024 * 2 + 1024 * 1024 + 1024 + 32000) * 4
    assert extra < 2 * weights, (extra / 1e6, weights / 1e6)


def test_a_native_backend_keeps_its_last_sessions_not_one_per_node(monkeypatch):
    """onnxruntime builds a session per node: a worker keeps the SESSIONS last used, so their number does
    not grow with the depth of the model. One evicted is built again, with the same answer."""
    import base64

    import numpy as np
    from onnx import helper

    from backends import _onnx_native
    from backends._runtime.spec import WorkerSpec
    from backends.onnxruntime.worker import make_adapter
    monkeypatch.setattr(_onnx_native, "SESSIONS", 3)
    specs = [WorkerSpec(f"neg{k}", "Neg", "", 20, ("x",), (f"y{k}",), {}, base64.b64encode(
        helper.make_node("Neg", ["x"], [f"y{k}"], name=f"neg{k}").SerializeToString()).decode(), ("<f4",))
        for k in range(5)]
    adapter, x = make_adapter(), np.array([1.5, -2.0], np.float32)
    for spec in specs:
        assert adapter.fwd(None, [x], spec)[0].tolist() == [-1.5, 2.0]
    assert [key[0] for key in adapter.cache] == [s.proto for s in specs[2:]]  # the last 3, oldest first
    assert adapter.fwd(None, [x], specs[0])[0].tolist() == [-1.5, 2.0]  # built again
    assert [key[0] for key in adapter.cache] == [s.proto for s in [specs[3], specs[4], specs[0]]]


ORT_SESSIONS = """
import base64, numpy as np
from onnx import helper
from backends._runtime.spec import WorkerSpec
from backends.onnxruntime.worker import make_adapter
def rss():
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmRSS:"))
adapter, w = make_adapter(), np.ones((2048, 2048), np.float32)
before = rss()
for k in range(20):  # 20 one-node sessions, each transposing a 16.8 MB weight
    node = helper.make_node("Transpose", ["w"], [f"y{k}"], name=f"t{k}", perm=[1, 0])
    adapter.fwd(None, [w], WorkerSpec(f"t{k}", "Transpose", "", 20, ("w",), (f"y{k}",), {"perm": [1, 0]},
                                      base64.b64encode(node.SerializeToString()).decode(), ("<f4",)))
print(rss() - before)
"""


def test_the_onnxruntime_worker_gives_back_what_each_node_ran_with():
    """A node's buffers are freed after it runs, and given back to the system (the worker's declared
    environment): without, each one-node session of a transposed weight kept its 16.8 MB, and the worker
    grew with the depth of the model (4.2 GB at a 1.1B Llama's 2807 nodes)."""
    from irtrace.replay import backends as registry
    env = {**os.environ, **registry.get("onnxruntime").variables()}
    done = subprocess.run([sys.executable, "-c", ORT_SESSIONS], capture_output=True, text=True, check=True, env=env,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    grown = int(done.stdout)
    assert grown < 40e6, grown / 1e6  # 20 x 16.8 MB = 336 MB were kept


def test_jobs_auto_starts_more_workers_only_where_they_repay_and_fit(example_bundle, tmp_path, monkeypatch, capsys):
    """--jobs auto (the default): 1 for a bundle whose values are small for the worker sets a job starts (one,
    and one per backend under test), whose reference and oracle answers are cached, or for a replay without
    vjp2; else one per CPU, as many as the available memory holds at CALL_HOLDS times the largest value; the
    report is --jobs 1's."""
    from irtrace.cli import main
    from irtrace.replay import api
    from irtrace.replay.execute import CALL_HOLDS
    bundle = example_bundle("resnet")
    values = bundle.values
    sizes = {n: int(np.prod(values.spec(n)[1])) * values.spec(n)[0].itemsize for n in values.keys()}
    total, largest = sum(sizes.values()), max(sizes.values())
    assert total < api.AUTO_MIN_BYTES and api.auto_jobs(bundle, ("torch",), cache=False) == 1  # 0.7 MB
    monkeypatch.setattr(api, "AUTO_MIN_BYTES", total / 2)  # this bundle repays one set of workers more, not 3
    monkeypatch.setattr(api.os, "cpu_count", lambda: 4)
    monkeypatch.setenv("IRTRACE_MEMORY_AVAILABLE", str(10 * CALL_HOLDS * largest))
    assert api.auto_jobs(bundle, ("torch",), cache=False) == 4  # the CPUs bound it
    assert api.auto_jobs(bundle, ("torch", "onnxruntime"), cache=False) == 4
    assert api.auto_jobs(bundle, ("torch", "onnxruntime", "onnxref"), cache=False) == 1  # 3 sets: not repaid
    assert api.auto_jobs(bundle, ("torch",), cache=False, modes=("fwd", "vjp")) == 1  # no double backward to spread
    monkeypatch.setenv("IRTRACE_MEMORY_AVAILABLE", str(3 * CALL_HOLDS * largest - 1))
    assert api.auto_jobs(bundle, ("torch",), cache=False) == 2  # the memory does
    monkeypatch.setenv("IRTRACE_MEMORY_AVAILABLE", "1")
    assert api.auto_jobs(bundle, ("torch",), cache=False) == 1
    monkeypatch.setenv("IRTRACE_MEMORY_AVAILABLE", str(10 * CALL_HOLDS * largest))
    monkeypatch.setattr(api.os, "cpu_count", lambda: 2)
    picked, auto_jobs = [], api.auto_jobs
    monkeypatch.setattr(api, "auto_jobs", lambda *a, **k: picked.append(auto_jobs(*a, **k)) or picked[-1])
    for jobs in ("auto", "1", None):  # None: --jobs left out, auto by default
        assert main(["replay", str(bundle.path), "--backend", "torch", "--modes", "fwd,vjp2", "--no-cache",
                     *(["--jobs", jobs] if jobs else []), "-o", str(tmp_path / str(jobs))]) in (0, 1)
    assert picked == [2, 2]  # auto's pick, asked for and by default; --jobs 1 asks none
    assert main(["replay", str(bundle.path), "--backend", "torch", "--modes", "fwd,vjp", "--no-cache",
                 "-o", str(tmp_path / "fwd,vjp")]) in (0, 1) and picked == [2, 2, 1]
    assert (tmp_path / "auto" / "report.json").read_bytes() == (tmp_path / "1" / "report.json").read_bytes() == \
        (tmp_path / "None" / "report.json").read_bytes()
    # the reference's and oracle's answers cached (a copy's: the session's bundle is shared): nothing much to
    # spread, one worker set
    import shutil
    shutil.copytree(bundle.path, tmp_path / "copy.irt")
    copy = irtrace.load(tmp_path / "copy.irt")
    assert api.auto_jobs(copy, ("torch",)) == 2
    main(["replay", str(copy.path), "--backend", "torch", "-o", str(tmp_path / "fill")])
    assert api.auto_jobs(copy, ("torch",)) == 1 and api.auto_jobs(copy, ("torch",), cache=False) == 2


def test_the_export_checks_gradients_a_chunk_at_a_time_with_the_exact_answer(monkeypatch):
    """The export's gradient check compares without a float64 copy of a whole weight (torch_check._max_abs,
    a chunk of the flattened arrays at a time): the same max |a - b| and max |a| as over the whole, by hand,
    across chunk edges, with NaN as np.max gives it."""
    from irtrace.export import torch_check
    monkeypatch.setattr(torch_check, "_CHUNK", 2)
    a = np.array([[1.0, -4.0, 2.5], [0.5, 3.0, -7.25]], np.float32)
    b = np.array([[1.0, -1.0, 2.0], [0.5, 3.0, 1.0]], np.float32)
    assert torch_check._max_abs(a) == 7.25                   # |-7.25|, in the last chunk
    assert torch_check._max_abs(a, b) == 8.25                # |-7.25 - 1|
    assert torch_check._max_abs(a[:, :2], b[:, :2]) == 3.0   # |-4 - -1|, in the first chunk; a strided view
    assert torch_check._max_abs(np.zeros((0, 3), np.float32)) == 0.0
    c = a.copy()
    c[1, 0] = np.nan                                         # NaN in a middle chunk, after a larger value
    assert np.isnan(torch_check._max_abs(c, b)) and np.isnan(torch_check._max_abs(c))
    tiny = np.float32(1e-45)                                 # float32's smallest subnormal, exact in float64
    assert torch_check._max_abs(np.array([tiny, 0], np.float32), np.zeros(2, np.float32)) == float(tiny)
    # float32 arrays are compared in float32 unless the difference overflows: 3e38 - -3e38 in float64
    big = np.array([3e38, 1.0], np.float32)
    assert torch_check._max_abs(big, -big) == 2 * float(np.float32(3e38))
    assert torch_check._max_abs(np.array([np.inf, 0], np.float32), np.zeros(2, np.float32)) == float("inf")
    # the float32 difference is float64's rounded once: 1 - (1 - 2**-24) is exact in both
    assert torch_check._max_abs(np.float32([1.0]), np.float32([1 - 2.0 ** -24])) == 2.0 ** -24
    d = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    e = (d + np.float32(1e-3) * np.random.default_rng(1).standard_normal(1000).astype(np.float32))
    want = float(np.max(np.abs(d.astype(np.float64) - e)))
    assert abs(torch_check._max_abs(d, e) - want) <= 2.0 ** -24 * want
