"""irtrace replay --executor ray on a real Ray cluster started on this machine (2 CPUs): the report is
byte-identical to the local run's, a Ray worker killed mid-run costs a retry and nothing else, a backend
whose environment cannot be built on a Ray node is that backend's ERROR and nothing else's."""
import json
import os
import re
import signal

import pytest

from irtrace.replay import ReplayOptions
from irtrace.replay import backends as registry
from irtrace.report.folder import replay_into

ray = pytest.importorskip("ray", reason="Ray is installed by `make test` (requirements-host.txt)")
from irtrace.replay.ray_executor import RayExecutor  # noqa: E402

UNDER_TEST = [n for n, i in registry.BACKENDS.items()
              if i.role == registry.UNDER_TEST and i.modes and i.unavailable() is None and not n.startswith("planted")]


@pytest.fixture(scope="module")
def cluster():
    """One local Ray cluster for the module (each replay starts its Ray workers and kills them after)."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def _both(bundle, tmp_path, executor, **kw):
    """(the local run's report.json, the Ray run's) of the same replay, as bytes."""
    local = replay_into(bundle, ReplayOptions(cache=False, **kw), tmp_path / "local")
    remote = replay_into(bundle, ReplayOptions(cache=False, executor=executor, **kw), tmp_path / "ray")
    return (local.out / "report.json").read_bytes(), (remote.out / "report.json").read_bytes()


class Counting(RayExecutor):
    """Counts the Ray tasks it sends that try no workaround (a node's own calls)."""
    tasks = 0

    def _submit(self, batch):
        self.tasks += not any("workaround" in call.message() for _, call in batch.calls)
        super()._submit(batch)


# the nodes of StyleGAN2 where the frameworks' known findings are (MegEngine's LeakyRelu vjp2 and Pad
# vjp2, with their verified workarounds; Paddle's and TensorFlow's Conv gradients) and a few that match
FINDINGS = "node_(leaky_relu|pad|conv2d)(_1)?$"


@pytest.mark.parametrize("nodes", [FINDINGS, pytest.param(None, marks=pytest.mark.slow)], ids=["findings", "all"])
def test_report_is_byte_identical_to_the_local_one_with_every_backend(nodes, example_bundle, cluster, tmp_path):
    bundle = example_bundle("stylegan2")
    local, remote = _both(bundle, tmp_path, RayExecutor(workers=2), backends=("torch", *UNDER_TEST), nodes=nodes)
    assert local == remote
    # --resume over the Ray run's journal: every node kept, none run again (the workarounds are tried
    # again: they are not journaled), the same report
    executor = Counting(workers=1)
    again = replay_into(bundle, ReplayOptions(cache=False, executor=executor, backends=("torch", *UNDER_TEST),
                                              nodes=nodes), tmp_path / "ray", resume=True)
    assert (again.out / "report.json").read_bytes() == remote and executor.tasks == 0
    report = json.loads(remote)
    assert {b["name"] for b in report["backends"]} == {"torch", *UNDER_TEST}
    assert sum(report["restarts"].values()) == 0
    # the findings the local run has (the example's known bugs, with their verified workarounds), all there
    assert report["summary"]["MATCH"] > (100 if nodes is None else 20)
    assert report["summary"]["nodes"] == len(report["nodes"]) == (244 if nodes is None else 6)
    if "megengine" in UNDER_TEST:
        assert any(f["backend"] == "megengine" and f.get("workarounds") for f in report["findings"])


class KillsAWorker(RayExecutor):
    """Kills the Ray worker of its 4th batch of calls (SIGKILL, by its pid) right after sending it."""
    sent = 0

    def _submit(self, batch):
        super()._submit(batch)
        self.sent += 1
        if self.sent == 4:
            self.killed = ray.get(self.actors[batch.worker].pid.remote())
            os.kill(self.killed, signal.SIGKILL)


def _without_restarts(text):
    report = json.loads(text)
    report.pop("restarts")
    for b in report["backends"]:
        b.pop("restarts")
    return report


def test_a_killed_ray_worker_costs_a_retry_not_a_result(example_bundle, cluster, tmp_path):
    executor = KillsAWorker(workers=1)
    local, remote = _both(example_bundle("resnet"), tmp_path, executor, backends=("torch", "onnxruntime"))
    assert executor.killed
    assert sum(json.loads(remote)["restarts"].values()) >= 1  # the calls it owed, sent again
    assert _without_restarts(local) == _without_restarts(remote)
    assert json.loads(remote)["summary"]["CRASH"] == 0


def test_a_backend_that_cannot_be_built_on_a_ray_node_is_its_error_only(example_bundle, cluster, tmp_path):
    env = {"env_vars": {"IRTRACE_CACHE": str(tmp_path / "empty-cache"),
                        "IRTRACE_PYTHON_MEGENGINE": "/nonexistent/python3.10"}}
    bundle = example_bundle("resnet")
    kw = dict(modes=("fwd", "vjp"), verify_workarounds=False)
    local = replay_into(bundle, ReplayOptions(backends=("torch", "onnxruntime"), cache=False, **kw), tmp_path / "l")
    remote = replay_into(bundle, ReplayOptions(backends=("torch", "onnxruntime", "megengine"), cache=False,
                                               executor=RayExecutor(workers=1, runtime_env=env), **kw),
                         tmp_path / "r")
    got, want = (json.loads((r.out / "report.json").read_text()) for r in (remote, local))
    mine = [r for n in got["nodes"] for r in n["results"] if r["backend"] == "megengine"]
    assert mine and {r["verdict"] for r in mine} == {"ERROR"}
    assert re.search(r"backend 'megengine' cannot run on Ray node \S+: IRTRACE_PYTHON_MEGENGINE="
                     r"/nonexistent/python3.10 is not a Python 3.10", mine[0]["message"]), mine[0]["message"]
    rest = [[r for r in n["results"] if r["backend"] != "megengine"] for n in got["nodes"]]
    assert rest == [n["results"] for n in want["nodes"]]


def test_without_ray_or_with_ray_options_alone_it_is_one_line_exit_2(example_bundle, monkeypatch, capsys):
    from irtrace.cli import main
    path = str(example_bundle("resnet").path)
    assert main(["replay", path, "--address", "127.0.0.1:6379"]) == 2
    assert capsys.readouterr().err.strip() == "irtrace: error: --address goes with --executor ray"
    monkeypatch.setitem(__import__("sys").modules, "ray", None)  # as where Ray is not installed
    assert main(["replay", path, "--executor", "ray"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("irtrace: error: --executor ray needs Ray, which is not installed: pip install 'irtrace[ray]' "
                   "(ray==2.60.0)")


@pytest.mark.slow
@pytest.mark.parametrize("example", ["resnet", "wideresnet", "wideresnet-train", "gpt"])
def test_every_bundled_example_is_byte_identical_on_ray(example, example_bundle, cluster, tmp_path):
    local, remote = _both(example_bundle(example), tmp_path, RayExecutor(workers=2), backends=("torch", *UNDER_TEST))
    assert local == remote
