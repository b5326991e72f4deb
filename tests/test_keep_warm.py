"""Fork servers kept warm across replays (irtrace replay --keep-warm; irtrace.replay.forkserver.keep): a server a
replay started outlives it and forks the workers of the next replay, in another process; it ends once unused for
as long as it was asked to stay; one that refuses to fork (threads after its imports) stays, refusing at once; a
changed backend file names another server; `irtrace servers` lists them and --stop ends them. Each replay here is a
process of its own, as a user's are."""
import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from irtrace.replay import forkserver

ROOT = Path(__file__).resolve().parents[1]

# one process's worker of BACKEND (or torch's backend under another NAME, whose server also imports module NAME),
# started with servers kept KEEP seconds: whether it was forked, its pid and its parent's
WORKER = """
import dataclasses, json, sys
from irtrace.replay import backends, forkserver
from irtrace.replay.worker import WorkerProxy
keep, backend, name = float(sys.argv[1]), sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None
forkserver.IMPORT_WAIT_S = float(sys.argv[4]) if len(sys.argv) > 4 else forkserver.IMPORT_WAIT_S
info = backends.get(backend)
if name:
    info = dataclasses.replace(info, name=name, needs=("torch", name))
forkserver.keep(keep)
w = WorkerProxy(info)
w.start()
pid = w.proc.pid
parent = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
print(json.dumps({"forked": isinstance(w.proc, forkserver.Forked), "pid": pid, "parent": parent}))
w.close()
"""


@pytest.fixture
def servers(monkeypatch):
    """This test's own folder of kept servers (short: a Unix socket's path holds at most 107 bytes), and every
    server in it ended afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="irtrace-kw-"))
    monkeypatch.setenv("IRTRACE_SERVERS", str(folder))
    yield folder
    for path, pid in forkserver.running():
        forkserver.stop(path, pid)
    shutil.rmtree(folder, ignore_errors=True)


def _worker(keep, backend="torch", name=None, env=None, wait=None):
    extra = ([name] if name else []) + ([str(wait)] if wait else [])
    done = subprocess.run([sys.executable, "-c", WORKER, str(keep), backend] + extra,
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, **(env or {})}, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _alive(pid):
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def test_a_kept_server_outlives_its_process_and_forks_the_next_ones_workers(servers):
    first = _worker(60)
    [(path, server)] = forkserver.running()
    assert first["forked"] and first["parent"] == server and _alive(server)
    assert Path(path).parent == servers and os.stat(servers).st_mode & 0o777 == 0o700
    second = _worker(60)
    assert second["forked"] and second["parent"] == server and second["pid"] != first["pid"]
    assert forkserver.running() == [(path, server)]


def test_a_kept_server_ends_once_unused_for_as_long_as_it_was_asked_to_stay(servers):
    first = _worker(1)
    server = first["parent"]
    assert first["forked"] and _alive(server)
    deadline = time.monotonic() + 20
    while _alive(server) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(server)
    assert not list(servers.glob("*.sock")) and forkserver.running() == []


def test_a_kept_server_that_refuses_stays_and_refuses_the_next_process_at_once(servers, tmp_path):
    (tmp_path / "irtrace_threads_kept.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    first = _worker(60, name="irtrace_threads_kept", env=env)
    [(path, server)] = forkserver.running()
    assert not first["forked"] and first["parent"] != server  # a plain process of the replay's own
    second = _worker(60, name="irtrace_threads_kept", env=env)
    assert not second["forked"] and forkserver.running() == [(path, server)]  # the same server: not imported again


def test_a_kept_server_whose_imports_hang_is_killed_and_the_worker_is_a_plain_process(servers, tmp_path):
    (tmp_path / "irtrace_hangs_kept.py").write_text("import time\ntime.sleep(600)\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    first = _worker(60, name="irtrace_hangs_kept", env=env, wait=2)
    assert not first["forked"]
    deadline = time.monotonic() + 10
    while _servers_importing("irtrace_hangs_kept") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _servers_importing("irtrace_hangs_kept") and forkserver.running() == []


def _servers_importing(module):
    """Pids of live processes whose command line names `module` (a kept server importing it)."""
    out = []
    for pid in os.listdir("/proc"):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"--listen" in argv and module.encode() in argv and _alive(pid):
            out.append(pid)
    return out


# a worker forked from a kept server, the server stopped (irtrace servers --stop) while the worker runs: whether the
# worker still answers its hello, and whether the server still runs then and once the process is done with it
STOPPED = """
import json, os, time
from irtrace.replay import backends, forkserver
from irtrace.replay.worker import WorkerProxy
forkserver.keep(60)
w = WorkerProxy(backends.get("torch"))
w.start()
[(path, server)] = forkserver.running()
forkserver.stop(path, server)
time.sleep(1.5)  # the server's select wakes within a second
stopped = {"listed": forkserver.running(), "alive": os.path.exists(f"/proc/{server}")}
answered = w.call({"kind": "hello"}, [], 30)[0].get("pid") == w.proc.pid
w.close()
forkserver.close_all()
deadline = time.monotonic() + 10
while os.path.exists(f"/proc/{server}") and open(f"/proc/{server}/stat").read().split()[2] != "Z" and \
        time.monotonic() < deadline:
    time.sleep(0.1)
print(json.dumps({**stopped, "answered": answered, "server": server}))
"""


def test_a_stopped_server_takes_no_new_process_and_ends_once_its_replays_are_done(servers):
    done = subprocess.run([sys.executable, "-c", STOPPED], capture_output=True, text=True, cwd=ROOT, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["listed"] == [] and got["alive"] and got["answered"]  # not listening, still serving its replay
    assert not _alive(got["server"]) and not list(servers.glob("*.sock"))


def test_a_changed_backend_file_names_another_server(servers, tmp_path, monkeypatch):
    (tmp_path / "backends").mkdir()
    code = tmp_path / "backends" / "worker.py"
    code.write_text("x = 1\n")
    monkeypatch.setattr(forkserver, "ROOT", tmp_path)
    key = (sys.executable, frozenset({("A", "1")}), str(tmp_path), ("torch",))
    before = forkserver.socket_path(key)
    st = code.stat()
    os.utime(code, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert forkserver.socket_path(key) != before
    os.utime(code, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert forkserver.socket_path(key) == before
    assert forkserver.socket_path((sys.executable, frozenset({("A", "2")}), str(tmp_path), ("torch",))) != before
    # what the shell sets anew for each command does not (`time irtrace replay` sets `_` to time's path)
    shell = frozenset({("A", "1"), ("_", "/usr/bin/time"), ("SHLVL", "3"), ("OLDPWD", "/"), ("PWD", "/tmp")})
    assert forkserver.socket_path((sys.executable, shell, str(tmp_path), ("torch",))) == before


def test_a_socket_path_too_long_or_a_folder_that_cannot_be_made_keeps_no_server(monkeypatch, tmp_path):
    monkeypatch.setenv("IRTRACE_SERVERS", str(tmp_path / ("x" * 120)))
    assert forkserver.socket_path((sys.executable, frozenset(), str(tmp_path), ("torch",))) is None
    (tmp_path / "f").write_text("a file where the folder would be")
    monkeypatch.setenv("IRTRACE_SERVERS", str(tmp_path / "f" / "servers"))
    assert forkserver.socket_path((sys.executable, frozenset(), str(tmp_path), ("torch",))) is None


def test_cli_replays_with_keep_warm_give_the_same_rows_and_servers_lists_and_stops_them(servers, tmp_path):
    from irtrace.export.onnx_bundle import bundle_from_onnx
    node = helper.make_node("Relu", ["x"], ["y"], name="relu")
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in ("x", "y"))
    model = helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    bundle_from_onnx(model, {"x": np.array([-1.0, 0.5, 2.0], np.float32)}, tmp_path / "relu.irt")

    def replay(out, *extra, env=None):
        done = subprocess.run([sys.executable, "-m", "irtrace", "replay", str(tmp_path / "relu.irt"), "--backend",
                               "torch", "--modes", "fwd,vjp", "--no-cache", "-o", str(tmp_path / out), *extra],
                              capture_output=True,
                              text=True, cwd=tmp_path, env={**os.environ, **(env or {})}, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads((tmp_path / out / "report.json").read_text())
        return [[{k: v for k, v in r.items() if not k.endswith("time_s")} for r in n["results"]]
                for n in report["nodes"]]

    plain = replay("plain")  # --no-cache: the reference's and the oracle's workers start in each replay
    assert forkserver.running() == []  # a replay without --keep-warm keeps none
    assert replay("kept", "--keep-warm", "60") == plain
    [(path, server)] = forkserver.running()
    assert replay("again", env={"IRTRACE_KEEP_WARM": "1m"}) == plain
    assert forkserver.running() == [(path, server)]
    cli = [sys.executable, "-m", "irtrace", "servers"]
    listed = subprocess.run(cli, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert listed.returncode == 0 and listed.stdout.startswith(f"running pid {server} ") and "torch" in listed.stdout
    assert listed.stdout.rstrip().endswith(path)
    stopped = subprocess.run(cli + ["--stop"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert stopped.returncode == 0 and stopped.stdout.startswith(f"stopped pid {server} ")
    deadline = time.monotonic() + 10
    while _alive(server) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(server) and forkserver.running() == [] and not Path(path).exists()


def test_keep_warm_is_parsed_from_the_flag_and_the_environment(monkeypatch):
    from irtrace.cli import build_parser
    assert build_parser().parse_args(["replay", "b.irt"]).keep_warm is None
    assert build_parser().parse_args(["replay", "b.irt", "--keep-warm", "90s"]).keep_warm == 90
    monkeypatch.setenv("IRTRACE_KEEP_WARM", "20m")
    assert build_parser().parse_args(["replay", "b.irt"]).keep_warm == 1200


def test_a_kept_server_drops_a_connection_that_sends_garbage_and_serves_on(servers):
    first = _worker(60)
    [(path, server)] = forkserver.running()
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.connect(path)
        s.sendall(b"not json")
        assert s.recv(4096) == b""  # dropped
    second = _worker(60)
    assert first["forked"] and second["forked"] and second["parent"] == server and _alive(server)


def test_a_bad_keep_warm_in_the_environment_is_one_line_naming_it_and_exit_2(tmp_path):
    done = subprocess.run([sys.executable, "-m", "irtrace", "replay", "b.irt"], capture_output=True, text=True,
                          cwd=tmp_path, env={**os.environ, "IRTRACE_KEEP_WARM": "soon"}, timeout=60)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "irtrace: error: argument --keep-warm: 'soon' is not a number (from the environment's IRTRACE_KEEP_WARM) "
        "(see irtrace replay --help)"]


def test_a_worker_launched_early_that_fails_on_its_thread_is_ended_and_not_adopted(monkeypatch):
    """launch_early launches each worker on a thread (a kept server answers after its imports): one whose launch
    fails there is not handed to the replay, and a process it started is not left running."""
    from irtrace.replay import backends, worker
    started = []

    def launch(self):
        self.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
        started.append(self.proc)
        raise RuntimeError("its hello could not be asked")
    monkeypatch.setattr(worker.WorkerProxy, "launch", launch)
    info = dataclasses.replace(backends.get("torch"), name="irtrace_fails_early")
    monkeypatch.setattr(backends.BackendInfo, "unavailable", lambda self: None)
    worker.launch_early([info])
    assert worker.adopt(info) is None
    [proc] = started
    assert proc.wait(10) == -9  # killed, not left running
