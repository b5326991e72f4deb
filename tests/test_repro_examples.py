"""Every repro `make demo` writes for the bundled examples, on every available backend: a straight-line
script of at most 40 lines that runs in its framework's own environment without irtrace and
reproduces (exit 1), an issue.md of at most 60 lines. Slow (every example on every backend, all
modes, then shrinking): `make test-slow`."""
import json

import pytest

from irtrace.examples import EXAMPLES
from irtrace.replay import ReplayOptions
from irtrace.report.folder import replay_into
from irtrace.replay import backends
from irtrace.repro.make import make_repros
from test_repro import _filed_as_is

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_example_repro_is_filed_as_is(example_bundle, tmp_path, name):
    shown = [n for n, info in backends.BACKENDS.items() if info.demo and info.modes and info.unavailable() is None]
    replayed = replay_into(example_bundle(name).path, ReplayOptions.parse(",".join(shown), "fwd,vjp,vjp2"), out=tmp_path / "r")
    report, out = replayed.json, replayed.out
    folders = make_repros(out / "report.json", tmp_path / "repros")
    assert len(folders) == len(report["findings"])  # none skipped
    for folder in folders:
        backend = json.loads((folder / "finding.json").read_text())["backend"]
        _filed_as_is(folder, backends.get(backend).interpreter())
