"""Batches (irtrace/replay/batch.py) change how calls travel, never what is judged: each backend in its
own environment replays an example one call at a time and in batches, and every verdict, metric,
message and restart count is the same. The GPT block on MegEngine has errors in the middle of batches
(GELU's double backward is unimplemented, in both parts of a gradient penalty); a worker that dies
with a batch in flight is tests/test_faults.py's (a real MegEngine does not crash on these examples,
where replay differentiates only what a training step does)."""
import json
import shutil
import threading
import time

import pytest
import torch

from backends._runtime import wire
from irtrace.replay import ReplayOptions
from irtrace.report.folder import replay_into
from irtrace.replay import backends

CASES = [("megengine", "gpt"), pytest.param("paddle", "gpt", marks=pytest.mark.slow),
         pytest.param("tensorflow", "resnet", marks=pytest.mark.slow),
         pytest.param("oneflow", "resnet", marks=pytest.mark.slow),
         pytest.param("megengine", "stylegan2", marks=pytest.mark.slow)]


def rows(report):
    return [(n["name"], r["backend"], r["mode"], r["output"], r["verdict"], json.dumps(r.get("metrics"), sort_keys=True),
             r.get("message"), r.get("tags")) for n in report["nodes"] for r in n["results"]]


@pytest.mark.parametrize("backend, example", CASES)
def test_batched_replay_judges_what_one_call_at_a_time_judges(backend, example, example_bundle, tmp_path):
    reason = backends.get(backend).unavailable()
    if reason:
        pytest.skip(f"{backend} unavailable: {reason}")
    bundle = example_bundle(example)
    one = replay_into(bundle.path, ReplayOptions.parse(backend, "fwd,vjp,vjp2", batch=False), out=tmp_path / "one").json
    many = replay_into(bundle.path, ReplayOptions.parse(backend, "fwd,vjp,vjp2"), out=tmp_path / "many").json
    assert rows(one) == rows(many)
    assert one["restarts"] == many["restarts"]
    tested = [r for r in rows(one) if r[1] == backend]
    assert len(tested) > 100
    if (backend, example) == ("megengine", "gpt"):  # the failures the batches must not blur
        whole = {(r[0], r[2], r[3]): r[4] for r in tested if r[3].endswith("*")}
        assert whole == {("node_gelu", "vjp2", "d2x:*"): "ERROR", ("node_gelu", "vjp2", "d2g:*"): "ERROR"}, whole
        assert one["restarts"]["megengine"] == 0


def test_a_first_replay_sends_the_reference_and_oracle_calls_ahead_in_batches_and_judges_the_same(
        example_bundle, tmp_path, monkeypatch):
    """With no answer cached, the reference's and the oracle's calls go in batches too (they compute ahead
    while the host judges), and every row is what one call at a time gives; with their answers cached, no
    batch is made for them."""
    from irtrace.replay import batch, worker
    made, writers, wrote = [], [], set()
    original, behind, write = batch.Batches.__init__, worker._write_behind, worker._write_frame

    def spy(self, pool, backend, calls, timeout):
        made.append((backend, len(calls)))
        original(self, pool, backend, calls, timeout)

    def spy_behind(frames):
        writers.append((frames, threading.current_thread()))
        behind(frames)

    def spy_write(stream, msg, arrays):
        if msg.get("kind") == "batch":
            wrote.add(threading.current_thread().name)
        write(stream, msg, arrays)
    monkeypatch.setattr(batch.Batches, "__init__", spy)
    monkeypatch.setattr(worker, "_write_behind", spy_behind)
    monkeypatch.setattr(worker, "_write_frame", spy_write)
    path = tmp_path / "resnet.irt"  # a copy, with no cache beside it (the session's bundle may have one)
    shutil.copytree(example_bundle("resnet").path, path)
    one = replay_into(path, ReplayOptions.parse("onnxruntime", "fwd,vjp,vjp2", batch=False, cache=False),
                      out=tmp_path / "one").json
    assert made == []
    many = replay_into(path, ReplayOptions.parse("onnxruntime", "fwd,vjp,vjp2"), out=tmp_path / "many").json
    assert rows(one) == rows(many)
    sizes = dict(made)  # the roles compute every node's fwd, vjp and vjp2; onnxruntime the forward of its ops
    assert 0 < sizes["onnxruntime"] <= len(one["nodes"]) < sizes["torch"] == sizes["oracle"], made
    # each worker's batches are written behind by one thread of its own (not a thread a batch; a worker kept warm
    # from an earlier replay has its thread already), which ends with the worker: those alive after the replay are
    # those of the workers kept warm for the next
    assert sum(-(-n // batch.MAX_CALLS) for n in sizes.values()) > 3
    assert wrote == {f"irtrace-frames-{name}" for name in ("onnxruntime", "oracle", "torch")}, wrote
    assert len(writers) <= 3, writers
    kept = [w._behind for _, _, w in worker._WARM or []]
    deadline = time.monotonic() + 10
    while any(t.is_alive() and not any(q is frames for q in kept) for frames, t in writers) and \
            time.monotonic() < deadline:
        time.sleep(0.01)
    assert [t.name for frames, t in writers if t.is_alive() and not any(q is frames for q in kept)] == []
    made.clear()
    again = replay_into(path, ReplayOptions.parse("onnxruntime", "fwd,vjp,vjp2"), out=tmp_path / "again").json
    assert rows(again) == rows(one)
    assert made == [("onnxruntime", sizes["onnxruntime"])]


def test_a_workers_frame_writer_ends_when_it_is_killed_or_closed_and_a_restarted_one_gets_its_own():
    """The thread that writes a worker's frames sent behind lives as long as the worker's process: killed (a
    timeout, a crash), it ends, and the process started next gets a thread of its own; closed, it ends too, while
    the proxy is still held (not by a collected proxy's finalizer)."""
    from irtrace.replay.worker import WorkerProxy
    from test_forkserver import relu_request
    msg, arrays = relu_request()
    w = WorkerProxy(backends.get("torch"))
    others = set(threading.enumerate())  # workers kept warm by earlier tests have theirs

    def relu_behind():
        reply, out = w.receive(60.0, w.send(msg, arrays, background=True))
        assert reply["status"] == "ok" and out[0].tolist() == [0.0, 0.5, 2.0]
        (thread,) = [t for t in threading.enumerate() if t.name == "irtrace-frames-torch" and t not in others]
        return thread

    def ended(thread):
        thread.join(10)
        return not thread.is_alive()
    first = relu_behind()
    assert relu_behind() is first  # one thread for every frame the process is sent behind
    w.kill()
    assert ended(first)
    second = relu_behind()  # the process started again, and a thread with it
    assert second is not first
    w.close()
    assert ended(second) and w is not None


class _Fork(torch.nn.Module):
    def forward(self, x):
        a = torch.relu(x)  # 128 kB: viewed in the bundle's file by the worker, not read (wire.MAPPED_MIN)
        return torch.sigmoid(a) + torch.tanh(a)


@pytest.mark.parametrize("batch", [True, False])
def test_a_call_that_writes_into_its_inputs_does_not_change_the_next_calls(batch, tmp_path):
    """A worker that writes over the inputs it was handed once it has computed (planted 'scribble': torch, every op
    right) changes no other call's inputs: the value Relu makes (128 kB, viewed in the bundle's file mapped
    copy-on-write) goes to Sigmoid's and Tanh's fwd, vjp and vjp2 in turn, in one worker, and every row is what
    torch's are. Before each call's views were let go (wire.release_mapped), the calls after the first read 7s."""
    import irtrace
    import planted_backend
    planted_backend.register("scribble")
    torch.manual_seed(0)
    bundle = irtrace.export(_Fork(), (torch.randn(2, 16, 32, 32),), tmp_path / "fork.irt", train=True)
    assert bundle.values["relu"].nbytes >= wire.MAPPED_MIN
    report = replay_into(bundle.path, ReplayOptions.parse("torch,planted-scribble", "fwd,vjp,vjp2", batch=batch),
                         out=tmp_path / "out").json
    verdicts = {}
    for r in rows(report):
        verdicts.setdefault(r[1], []).append((r[0], r[2], r[3], r[4]))
    assert len(verdicts["planted-scribble"]) == 18
    assert verdicts["planted-scribble"] == verdicts["torch"]
    assert report["findings"] == [] and {v for *_, v in verdicts["torch"]} <= {"MATCH", "NOISE"}
