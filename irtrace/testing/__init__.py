"""irtrace in a test suite: `assert_ops_match(model, inputs, backend=...)`, the one line a porter puts in a
test, in the spirit of torch.testing.assert_close: export, replay every op alone on the backend (torch
the reference, float64 the arbiter), and an AssertionError whose message is the findings table (finding
ids, the first node with its module and file:line) and where the bundle, report and repros are.

The pytest plugin (irtrace.testing.plugin, registered through the `pytest11` entry point) adds
`--irtrace-keep DIR` (keep what a failing assertion wrote, per test), the `irtrace_bundle` fixture and the
`irtrace_known` marker: a framework bug the suite knows of, left out of the assertion while it shows, and
a failure once it no longer does (strict, like torch's and onnxscript's strict xfails), so the suite says
when an upstream fix lands."""
import contextvars
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

# set by the plugin for the running test: (the folder to keep failing runs in or None, [Known])
CONTEXT = contextvars.ContextVar("irtrace_testing", default=(None, ()))


@dataclass(frozen=True)
class Known:
    """A framework bug a suite knows of (the `irtrace_known` marker): backend, op type, mode, and the
    verdict when given (None: any)."""
    backend: str
    op: str
    mode: str
    verdict: str = None
    reason: str = ""

    def matches(self, finding):
        return (finding["backend"], finding["op_type"], finding["mode"]) == (self.backend, self.op, self.mode) \
            and self.verdict in (None, finding["verdict"])

    def __str__(self):
        return f"{self.backend} {self.op} {self.mode}" + (f" {self.verdict}" if self.verdict else "")


def assert_ops_match(model, example_inputs, backend="megengine", modes=("fwd", "vjp", "vjp2"), train=False,
                     loss="dot", seed=0, repro=True, keep=None):
    """Export `model` on `example_inputs` (irtrace.export), replay every op on `backend` in `modes`, and
    raise AssertionError with the findings table when an op diverges, fails or crashes (a known bug of the
    running test's `irtrace_known` markers left out, and one that no longer shows reported). `repro`:
    write each finding's repro beside the report. `keep`: the folder for the bundle, report and repros
    (default: --irtrace-keep's folder for this test, else a temporary one, removed when the assertion
    passes). Returns the report (report.json as a dict)."""
    import irtrace
    from irtrace.replay import ReplayOptions
    from irtrace.report.folder import replay_into
    _, known = CONTEXT.get()
    folder, temporary = _folder(keep, "irtrace-")
    # force: an earlier run's bundle in the same folder is replaced (export refuses to replace a non-bundle)
    bundle = irtrace.export(model, example_inputs, folder / "model.irt", train=train, seed=seed, loss=loss, force=True)
    options = ReplayOptions.parse(backend, ",".join(modes))
    report = replay_into(bundle.path, options, folder / "replay").json
    unknown = [f for f in report["findings"] if not any(k.matches(f) for k in known)]
    fixed = [k for k in known if not any(k.matches(f) for f in report["findings"])]
    if not unknown and not fixed:
        if temporary:
            shutil.rmtree(folder, ignore_errors=True)
        return report
    raise AssertionError(_message(report, unknown, fixed, folder, repro))


def _folder(keep, prefix):
    """(the folder an assertion writes in, whether it is a temporary one to remove when it passes): `keep`,
    else --irtrace-keep's folder for the running test, else a new temporary folder. Nothing in a folder
    the user gave is removed."""
    kept, _ = CONTEXT.get()
    folder = Path(keep or kept or tempfile.mkdtemp(prefix=prefix))
    folder.mkdir(parents=True, exist_ok=True)
    return folder, not (keep or kept)


def assert_port_matches(bundle_or_model, port_factory, backend="megengine", loss="dot", example_inputs=None,
                        train=False, path=(), mapping=None, keep=None):
    """Check your own port (`irtrace port`): the model built by `port_factory` ("pkg.module:callable",
    importable with the folders `path` on sys.path) in `backend`'s environment, module by module, against
    `bundle_or_model` (a bundle, its folder, or a torch model exported here on `example_inputs`, `train`).
    `mapping`: a MAP.toml path or None. AssertionError when the port diverges, saying the first diverging
    module forward and backward and the culprit op, with the port report kept in `keep` (or --irtrace-keep's
    folder, or a temporary one). Returns the port report (report.json as a dict)."""
    import irtrace
    from irtrace import port
    from irtrace.port.align import read_map
    from irtrace.report import port as port_report
    folder, temporary = _folder(keep, "irtrace-port-")
    if hasattr(bundle_or_model, "parameters"):  # a torch model
        bundle = irtrace.export(bundle_or_model, example_inputs, folder / "model.irt", train=train, force=True)
    elif hasattr(bundle_or_model, "manifest"):
        bundle = bundle_or_model
    else:
        bundle = irtrace.load(bundle_or_model)
    report = port.check(bundle, port_factory, backend, path=[str(Path(p).resolve()) for p in path],
                        mapping=read_map(mapping), loss=loss)
    out = port_report.write(report, folder / "port")
    r = report.to_json()
    if not report.diverges:
        if temporary:
            shutil.rmtree(folder, ignore_errors=True)
        return r
    raise AssertionError("\n".join(port_report.lines(r) + [f"port report: {out / 'report.json'}"]))


def _message(report, unknown, fixed, folder, repro):
    from irtrace.report.terminal import finding_lines
    lines = []
    if unknown:
        lines += finding_lines({**report, "findings": unknown}, per_backend=len(unknown))
        if repro:
            from irtrace.repro.make import make_repros
            made = make_repros(folder / "replay" / "report.json", folder / "repros", [f["id"] for f in unknown])
            lines.append(f"repros: {folder / 'repros'} ({len(made)} written)")
    for k in fixed:
        lines.append(f"known bug {k} no longer shows{f' ({k.reason})' if k.reason else ''}: fixed upstream? "
                     f"remove its irtrace_known marker")
    lines.append(f"bundle and report: {folder}")
    return "\n".join(lines)


def folder_for(root, nodeid):
    """The folder --irtrace-keep gives a test: its node id as a file name."""
    return Path(root) / re.sub(r"[^\w.-]+", "_", nodeid).strip("_")
