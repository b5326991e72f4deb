"""Interrupted runs lose nothing and resume; verdicts are deterministic.

A replay appends each node's results to OUT/journal.jsonl as it completes. SIGTERM or SIGINT in
the middle of a node: irtrace ends within seconds, its workers with it, the completed nodes are on
disk, and `--resume` finishes the run without redoing them, with a report.json byte-identical to an
uninterrupted run's. Three runs of one replay write byte-identical report.json files.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from irtrace.cli import main
from irtrace.replay import ReplayOptions
from irtrace.report.folder import replay_into
from test_faults import CHAIN, HERE, chain, faulty, leftover_workers  # noqa: F401 - fixtures

ROOT = HERE.parent
# Ctrl-C as a terminal delivers it: a child inherits an ignored SIGINT (the test runner may ignore it when
# the driver starts, and Python then raises no KeyboardInterrupt), so the driver takes Python's own handler
DRIVER = """
import signal
import sys
from dataclasses import replace
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, {tests!r})
from irtrace.cli import main
from irtrace.replay import backends
info = backends.get("onnxruntime")
backends.register(replace(info, name="faulty", worker="faulty_backend", extra_path=(sys.path[0],),
                          env={{**info.env, "IRTRACE_FAULT_BASE": info.worker, "IRTRACE_FAULT": "hang:Exp",
                               "IRTRACE_FAULTS_TEST": {tag!r}}}))
sys.exit(main(sys.argv[1:]))
"""


def journal_nodes(out):
    path = Path(out) / "journal.jsonl"
    if not path.exists():
        return []
    return [json.loads(ln)["name"] for ln in path.read_text().splitlines()[1:] if ln.endswith("}")]


@pytest.mark.parametrize("sig, code, word", [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")])
def test_interrupted_replay_keeps_its_nodes_and_resumes(sig, code, word, chain, faulty, tmp_path):
    out = tmp_path / "r"
    argv = ["replay", str(chain.path), "--backend", "torch,faulty", "--modes", "fwd,vjp", "-o", str(out),
            "--timeout", "120"]
    env = {**os.environ, "IRTRACE_FAULTS_TEST": str(tmp_path), "PYTHONPATH": str(ROOT), "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.Popen([sys.executable, "-c", DRIVER.format(tests=str(HERE), tag=str(tmp_path)), *argv],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while len(journal_nodes(out)) < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    time.sleep(0.5)   # now in Exp, hanging on the faulty backend
    assert journal_nodes(out) == ["relu", "sigmoid", "tanh"]
    t = time.monotonic()
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:  # where it hangs: faulthandler's dump of every thread (SIGABRT)
        proc.send_signal(signal.SIGABRT)
        _, err = proc.communicate()
        pytest.fail(f"irtrace did not end within 30 s of signal {sig}:\n{err[-6000:]}")
    assert time.monotonic() - t < 10, "irtrace took too long to end"
    assert proc.returncode == code, err
    assert f"irtrace: {word}" in err and "finish with the same command and --resume" in err
    assert "Traceback" not in err
    assert leftover_workers(str(tmp_path)) == [], "a worker outlived irtrace"
    assert not (out / "report.json").exists()
    if sig != signal.SIGTERM:
        return  # resuming is the same after either

    # resume with a backend that would fail every node already done: they must not run again
    faulty("onnxruntime", "memory:Relu,memory:Sigmoid,memory:Tanh", name="faulty")
    report = replay_into(chain.path, ReplayOptions.parse("torch,faulty", "fwd,vjp", timeout=120), out=out, resume=True).json
    assert journal_nodes(out) == ["relu", "sigmoid", "tanh"] + [op.lower() for op in CHAIN[3:]]
    faulty("onnxruntime", "", name="faulty")
    replay_into(chain.path, ReplayOptions.parse("torch,faulty", "fwd,vjp", timeout=120), out=tmp_path / "clean")
    assert (out / "report.json").read_bytes() == (tmp_path / "clean" / "report.json").read_bytes()


def test_resume_refuses_another_replays_journal_and_drops_a_torn_line(chain, tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["replay", str(chain.path), "--backend", "torch", "--modes", "fwd", "-o", str(out),
                 "--nodes", "^(relu|sigmoid)$"]) == 0
    whole = (out / "report.json").read_bytes()
    journal = out / "journal.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(lines[:2]) + lines[2][:40])  # killed while writing sigmoid's line
    capsys.readouterr()
    assert main(["replay", str(chain.path), "--backend", "torch", "--modes", "fwd", "-o", str(out),
                 "--nodes", "^(relu|sigmoid)$", "--resume"]) == 0
    assert "resuming: 1 node(s) already in" in capsys.readouterr().err
    assert (out / "report.json").read_bytes() == whole
    assert main(["replay", str(chain.path), "--backend", "torch", "--modes", "fwd,vjp", "-o", str(out),
                 "--nodes", "^(relu|sigmoid)$", "--resume"]) == 2
    err = capsys.readouterr().err
    assert f"irtrace: error: {journal}: written by another replay (options modes differ); run without " \
           f"--resume, or give another -o" in err and err.count("\n") == 1
    journal.write_text(lines[0] + "{not json\n")
    assert main(["replay", str(chain.path), "--backend", "torch", "--modes", "fwd", "-o", str(out),
                 "--nodes", "^(relu|sigmoid)$", "--resume"]) == 2
    assert f"{journal}: line 2 is not a node's results (JSONDecodeError" in capsys.readouterr().err


def test_three_runs_give_byte_identical_reports(tmp_path):
    """Findings, MCA re-judging, kinks, every mode: the same in every run; timings are kept apart in
    timings.json."""
    import irtrace
    import models_for_tests
    import planted_backend
    planted_backend.register("pad")
    bundle = irtrace.export(models_for_tests.planted_target(), models_for_tests.planted_target_inputs(),
                            tmp_path / "b.irt")
    outs = [tmp_path / f"r{k}" for k in range(3)]
    for out in outs:
        replay_into(bundle.path, ReplayOptions.parse("torch,onnxruntime,planted-pad", "fwd,vjp,vjp2"), out=out)
    first = (outs[0] / "report.json").read_bytes()
    report = json.loads(first)
    assert report["findings"] and "time_s" not in first.decode() and "elapsed_s" not in report
    assert all((o / "report.json").read_bytes() == first for o in outs[1:])
    timings = json.loads((outs[0] / "timings.json").read_text())
    assert timings["elapsed_s"] > 0 and timings["results"][0]["time_s"] is not None


def test_a_journal_line_gives_back_the_node_byte_for_byte(tmp_path):
    """A node's source (module, class, file:line) and skipped entries keep their key order through the
    journal: found resuming torchvision's MobileNetV3, whose report differed only in that order."""
    from irtrace import compare
    from irtrace.replay.engine import NodeReport
    from irtrace.report.journal import Journal
    node = NodeReport("conv", "Conv", "", 3, {"module": "features.0.0", "class": "torch.nn.Conv2d",
                                               "file_line": "mobilenetv3.py:221"},
                      [compare.Result("conv", "Conv", "torch", "vjp", "d:w", compare.MATCH, message="m")],
                      [{"mode": "vjp", "output": "d:x", "backend": None, "reason": "off path"}])
    head = {"schema": "irtrace.journal/1", "bundle": "k", "options": {}}
    journal = Journal(tmp_path, head)
    journal.append(node)
    journal.close()
    again = Journal(tmp_path, head, resume=True).done["conv"]
    assert json.dumps(again.to_json()) == json.dumps(node.to_json())


def test_a_resume_with_every_node_done_writes_the_first_runs_report(example_bundle, tmp_path):
    """No node is left to run, so no worker starts for one: the versions the report names are still asked."""
    options = ReplayOptions(cache=False, modes=("fwd",))
    first = replay_into(example_bundle("resnet"), options, tmp_path / "out")
    text = (first.out / "report.json").read_bytes()
    assert json.loads(text)["backends"][0]["versions"]["torch"]
    again = replay_into(example_bundle("resnet"), options, tmp_path / "out", resume=True)
    assert (again.out / "report.json").read_bytes() == text


def test_a_line_signed_after_the_journals_parts_is_signed_as_all_its_parts_at_once():
    """trust.sign_after(signer(*before), *parts) == sign(*before, *parts): the journal hashes "journal line" and
    its header's signature once and signs each line after them; the signer it copies stays as it was, and
    the parts stay apart (length-prefixed), however they are split."""
    from irtrace.envs import trust
    if not trust.available():
        pytest.skip("no signing key here")
    head = trust.sign("journal header", "{}")
    h = trust.signer("journal line", head)
    for text in ['{"name": "n0"}', "", "é ünïcode", b"\x00bytes"]:
        assert trust.sign_after(h, text) == trust.sign("journal line", head, text)
    assert trust.sign_after(h, "ab") == trust.sign_after(h, "ab")  # h itself unchanged by either
    assert trust.sign_after(h, "ab") != trust.sign_after(h, "a", "b")
    assert trust.sign_after(trust.signer("journal line"), head, "x") == trust.sign("journal line", head, "x")


def _node(name):
    from irtrace import compare
    from irtrace.replay.engine import NodeReport
    return NodeReport(name, "Relu", "", 0, {}, [compare.Result(name, "Relu", "torch", "fwd", "y", compare.MATCH)])


def test_journal_lines_are_written_in_batches_yet_within_a_quarter_second_and_all_by_close(tmp_path):
    """Journal.append writes a node's line with the next ones' (FLUSH_LINES of them, one write) or FLUSH_S after
    it, whichever comes first, with no further append needed (a replay waiting on a node); close writes the rest;
    every line reads back in order."""
    from irtrace.report import journal as journal_mod
    head = {"schema": "irtrace.journal/1", "bundle": "k", "options": {}}
    j = journal_mod.Journal(tmp_path, head)
    j.append(_node("first"))
    assert journal_nodes(tmp_path) == []  # pending, not yet written
    deadline = time.monotonic() + 5
    while not journal_nodes(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert journal_nodes(tmp_path) == ["first"]
    names = [f"n{k}" for k in range(journal_mod.FLUSH_LINES)]
    for name in names:
        j.append(_node(name))
    assert journal_nodes(tmp_path) == ["first"] + names  # FLUSH_LINES lines pending: written at once
    j.append(_node("last"))
    j.close()
    assert journal_nodes(tmp_path) == ["first"] + names + ["last"]
    assert list(journal_mod.Journal(tmp_path, head, resume=True).done) == ["first"] + names + ["last"]


def test_a_journal_write_that_fails_in_the_background_is_raised_by_the_next_append(tmp_path, monkeypatch):
    import errno

    from irtrace.errors import IrtraceError
    from irtrace.report import journal as journal_mod
    j = journal_mod.Journal(tmp_path, {"schema": "irtrace.journal/1", "bundle": "k", "options": {}})

    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(journal_mod.os, "write", full)
    j.append(_node("a"))
    time.sleep(journal_mod.FLUSH_S + 0.5)  # the timer's write failed meanwhile
    with pytest.raises(IrtraceError, match=r"journal.jsonl: cannot append node 'a' \(No space left on device\); "
                                           r"free space, then finish with the same command and --resume"):
        j.append(_node("b"))
    monkeypatch.undo()
    j.close()  # the failure was raised once; the replay stops there ("b" is not in: it runs again on resume)
    assert journal_nodes(tmp_path) == [] and len((tmp_path / "journal.jsonl").read_text().splitlines()) == 1
