"""Workers forked from a server that imported their framework once (irtrace.replay.forkserver), where
workers are kept warm (and in a test's cold workers after): a forked worker answers, dies and is told dead as a plain process does; a server
that cannot fork safely (threads after its imports) or whose imports hang leaves the worker to a plain
process."""
import base64
import dataclasses
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper

from irtrace.ir.spec import node_specs
from irtrace.replay import backends, forkserver, worker
from irtrace.replay.worker import WorkerFailed, WorkerProxy



@pytest.fixture(autouse=True)
def _warm():
    if not worker._FORK:
        pytest.skip("workers are started per replay here (IRTRACE_COLD_WORKERS=1): none is forked")


def relu_request():
    """A Relu forward's request and its input (msg, arrays), as a replay sends them: its output is [0, 0.5, 2]."""
    node = helper.make_node("Relu", ["x"], ["y"], name="relu")
    model = helper.make_model(helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                                                [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
                              opset_imports=[helper.make_opsetid("", 17)])
    (spec,) = node_specs(model)
    msg = {"kind": "run", "mode": "fwd", "spec": {**spec.to_json(), "out_dtypes": ["<f4"],
                                                   "proto": base64.b64encode(node.SerializeToString()).decode()}}
    return msg, [np.array([-1.0, 0.5, 2.0], np.float32)]


def _relu(w):
    """One Relu forward asked of worker `w`: its output."""
    reply, out = w.call(*relu_request(), 60.0)
    if reply["status"] != "ok":
        raise WorkerFailed(reply["status"], reply.get("message", ""))
    return out[0]


def _backend(tmp_path, monkeypatch, name, body):
    """torch's backend under another name, whose fork server also imports a module made of `body`."""
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    return dataclasses.replace(backends.get("torch"), name=name, needs=("torch", name))


def test_a_forked_worker_answers_and_its_death_is_told_as_a_plain_ones():
    w = WorkerProxy(backends.get("torch"))
    w.start()
    assert isinstance(w.proc, forkserver.Forked) and w.hello["pid"] == w.proc.pid
    np.testing.assert_array_equal(_relu(w), [0.0, 0.5, 2.0])
    os.kill(w.proc.pid, signal.SIGSEGV)
    with pytest.raises(WorkerFailed, match=r"^worker killed by signal SIGSEGV"):
        _relu(w)
    # restarted (forked again) on the next call
    np.testing.assert_array_equal(_relu(w), [0.0, 0.5, 2.0])
    assert w.restarts == 1
    proc = w.proc
    w.close()
    assert proc.returncode == 0  # it read "exit" and returned


def test_a_server_whose_imports_start_threads_refuses_and_the_worker_is_a_plain_process(tmp_path, monkeypatch):
    info = _backend(tmp_path, monkeypatch, "irtrace_threads_at_import",
                    "import threading, time\nthreading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n")
    w = WorkerProxy(info)
    w.start()
    assert isinstance(w.proc, subprocess.Popen)
    np.testing.assert_array_equal(_relu(w), [0.0, 0.5, 2.0])
    w.close()
    refused = [s for s in forkserver._SERVERS.values() if "irtrace_threads_at_import" in s.proc.args]
    assert refused and refused[0].refused.endswith("threads")


def test_a_server_whose_imports_hang_is_given_up_and_the_worker_is_a_plain_process(tmp_path, monkeypatch):
    info = _backend(tmp_path, monkeypatch, "irtrace_hangs_at_import", "import time\ntime.sleep(600)\n")
    monkeypatch.setattr(forkserver, "IMPORT_WAIT_S", 1.0)
    w = WorkerProxy(info)
    w.start()
    assert isinstance(w.proc, subprocess.Popen)
    np.testing.assert_array_equal(_relu(w), [0.0, 0.5, 2.0])
    w.close()
    [server] = [s for s in forkserver._SERVERS.values() if "irtrace_hangs_at_import" in s.proc.args]
    assert server.refused == "no fork within 1 s" and server.proc.wait(10) == -signal.SIGKILL


def test_a_server_that_dies_ends_its_workers_as_killed():
    w = WorkerProxy(backends.get("torch"))
    w.start()
    [server] = [s for s in forkserver._SERVERS.values() if any(c is w.proc for c in s.running.values())]
    proc = w.proc
    server.proc.kill()
    assert proc.wait(10) == -signal.SIGKILL
    # it died owing nothing: the next call starts another (as for a plain process), which a new server forks
    np.testing.assert_array_equal(_relu(w), [0.0, 0.5, 2.0])
    assert w.restarts == 1 and isinstance(w.proc, forkserver.Forked) and w.proc.pid != proc.pid
    w.close()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))


def _parent(pid):
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])


def test_a_replays_reference_and_oracle_fork_from_one_server_that_ends_with_the_replay(cold_workers):
    """Workers not kept warm (a single `irtrace replay`): the reference's and the oracle's workers still fork from one
    server that imported both their frameworks once (a first replay with --jobs 2 imported torch four times, 1.5-2
    CPU s each), each a process of its own; the server ends with the replay (release_forks)."""
    assert not worker._FORK
    ws = [WorkerProxy(backends.get(n)) for n in (backends.reference(), backends.oracle())]
    try:
        for w in ws:
            w.ensure()
        parents = {_parent(w.proc.pid) for w in ws}
        assert len(parents) == 1 and len({w.proc.pid for w in ws}) == 2 and os.getpid() not in parents
        (server,) = parents
        argv = open(f"/proc/{server}/cmdline", "rb").read().split(b"\0")
        assert b"backends._runtime.zygote" in argv and {b"onnx", b"torch"} <= set(argv)
        for w in ws:
            np.testing.assert_array_equal(_relu(w), np.array([0.0, 0.5, 2.0], np.float32))
    finally:
        for w in ws:
            w.close()
    worker.release_forks()
    assert not os.path.exists(f"/proc/{server}")


def test_a_first_replays_role_server_started_early_is_the_one_its_workers_fork_from(cold_workers):
    """`irtrace replay` of a bundle with no cache yet starts the roles' server before it loads the bundle
    (serve_roles_early: torch imports meanwhile); the replay's workers fork from that one, not from another."""
    worker.release_forks()  # a role server an earlier test in this process left running would be the one used
    before = set(forkserver._SERVERS)
    worker.serve_roles_early()
    (key,) = set(forkserver._SERVERS) - before
    server = forkserver._SERVERS[key]
    w = WorkerProxy(backends.get(backends.oracle()))
    try:
        w.ensure()
        assert set(forkserver._SERVERS) - before == {key} and _parent(w.proc.pid) == server.proc.pid
    finally:
        w.close()
    worker.release_forks()
    assert server.proc.poll() == 0  # ended (without its imports' teardown), and waited for


def test_a_cli_replay_without_a_cache_leaves_no_server_and_no_worker(cold_workers, tmp_path, capsys):
    """A first `irtrace replay` (its roles forked from a server started before the bundle loaded) ends with every
    process it started ended: the workers asked to exit, the server waited for."""
    from irtrace.cli import main
    from irtrace.export.onnx_bundle import bundle_from_onnx
    node = helper.make_node("Relu", ["x"], ["y"], name="relu")
    model = helper.make_model(helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                                                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])]),
                              opset_imports=[helper.make_opsetid("", 17)])
    bundle_from_onnx(model, {"x": np.array([-1.0, 0.5, 2.0], np.float32)}, tmp_path / "relu.irt")
    children = set(_children())
    assert main(["replay", str(tmp_path / "relu.irt"), "--backend", "torch", "--modes", "fwd,vjp",
                 "-o", str(tmp_path / "out")]) == 0
    assert not forkserver._SERVERS and set(_children()) <= children


def _children():
    """This process's children that are alive (not zombies)."""
    out = []
    for pid in os.listdir("/proc"):
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except (OSError, ValueError):
            continue
        if fields[1] == str(os.getpid()) and fields[0] != "Z":
            out.append(int(pid))
    return out


def test_a_replays_end_leaves_a_server_still_running_another_replays_worker(cold_workers):
    """release_forks at one replay's end, while a worker another replay in this process forked still runs: that
    worker goes on answering, and its server ends with it (not killed with the first replay's end)."""
    before = set(forkserver._SERVERS)
    w = WorkerProxy(backends.get(backends.reference()))
    try:
        w.ensure()
        (key,) = set(forkserver._SERVERS) - before
        server = forkserver._SERVERS[key]
        worker.release_forks()
        assert server.proc.poll() is None
        np.testing.assert_array_equal(_relu(w), np.array([0.0, 0.5, 2.0], np.float32))
    finally:
        w.close()
    assert server.proc.wait(timeout=10) == 0
