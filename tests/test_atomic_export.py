"""`export --force` replaces a bundle atomically: a failure or a kill at any point leaves
the old bundle whole, and what a killed export left is cleaned by the next export to that path."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from irtrace.cli import main
from irtrace.store import load

ROOT = Path(__file__).resolve().parents[1]
SLOW_EXPORT = """
import sys, time
sys.path.insert(0, {tests!r})
from irtrace.store import writer
real = writer.ValueWriter.close
def slow(self):
    real(self)
    time.sleep(600)  # killed here: the new bundle is half in place
writer.ValueWriter.close = slow
from irtrace.cli import main
sys.exit(main(["export", "models_for_tests:tiny", "-o", {out!r}, "--force"]))
"""


def export(out):
    return main(["export", "models_for_tests:tiny", "-o", str(out), "--force", "--seed", "1"])


def snapshot(bundle):
    return {p.name: p.read_bytes() for p in Path(bundle).iterdir()}


@pytest.fixture
def old(tmp_path):
    out = tmp_path / "t.irt"
    assert main(["export", "models_for_tests:tiny", "-o", str(out)]) == 0
    return out


@pytest.mark.parametrize("where", ["open", "write"])
def test_a_failing_forced_export_leaves_the_old_bundle(where, old, monkeypatch, capsys):
    """A full disk as the OS says it, when the value store is made and when a value is written."""
    before = snapshot(old)
    from irtrace.store import writer

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(writer.os, "ftruncate" if where == "open" else "pwrite", broken)
    assert export(old) == 2  # the environment, not a bug: one line
    assert f"cannot write {old}: No space left on device" in capsys.readouterr().err
    assert snapshot(old) == before and sorted(p.name for p in old.parent.iterdir()) == ["t.irt"]


def test_a_killed_export_leaves_the_old_bundle_and_the_next_cleans_up(old, tmp_path):
    before = snapshot(old)
    proc = subprocess.Popen([sys.executable, "-c", SLOW_EXPORT.format(tests=str(ROOT / "tests"), out=str(old))],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any((p / "values.safetensors").exists()
                                                  for p in tmp_path.glob(".t.irt.*.partial")):
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert snapshot(old) == before
    assert [p.name.endswith(".partial") for p in tmp_path.iterdir() if p.name != "t.irt"] == [True]
    assert export(old) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.irt"] and snapshot(old) != before
    load(old)


def test_a_kill_between_the_two_renames_is_undone_by_the_next_export(old, tmp_path):
    dead = 2 ** 22 + 12345  # above the default pid_max: no such process
    before = snapshot(old)
    os.replace(old, tmp_path / f".t.irt.{dead}.abc.old")          # moved aside, the new one never renamed in
    (tmp_path / f".t.irt.{dead}.def.partial").mkdir()
    (tmp_path / f".t.irt.{os.getpid()}.ghi.partial").mkdir()       # a running export's: left alone
    from irtrace.store import _clean_leftovers
    _clean_leftovers(old)
    assert snapshot(old) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".t.irt.{os.getpid()}.ghi.partial", "t.irt"]
