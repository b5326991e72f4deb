"""Write an Outcome of a replay: report.json (docs/report.md), report.html and, with a chained
run, chained.png. Returns the report dict (what report.json holds)."""
import os
import tempfile
from pathlib import Path

from irtrace.errors import IrtraceError
from irtrace.report import html, json_report
from irtrace.report.findings import group


def build(outcome):
    """The report dict of an Outcome (irtrace.replay.api.Outcome)."""
    strict = outcome.options.strict
    report = json_report.build(outcome.replay, group(outcome.replay, strict), strict)
    if outcome.options.chained:
        from irtrace.report import chained as chained_report
        report["chained"] = json_report.clean(chained_report.to_json(outcome.chained, outcome.loss))
    return report


def write(outcome, out):
    """Write every report file of `outcome` into `out` (created); returns the report dict."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report = build(outcome)
    extra = ""
    if outcome.options.chained:
        from irtrace.report import chained as chained_report
        png = chained_report.plot(report["chained"], outcome.replay.bundle, out / "chained.png")
        extra = chained_report.html_section(report["chained"], png)
    json_report.write(report, out)
    html.write(report, out, extra)
    return report


def default_out(bundle):
    return Path(str(bundle.path).rstrip("/") + ".replay")


REPORT_FILES = ("report.json", "report.html", "timings.json", "chained.png")


def prepare_out(out, replaced=()):
    """Create the output folder `out` (and its parents) and prove it writable, before a replay (or a
    diff) runs; then remove the files of `replaced` there (an earlier run's reports), so that a run that
    fails or is killed leaves nothing that reads as its own result."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise IrtraceError(f"output folder {out}: exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".irtrace-probe-", dir=out)
        os.close(fd)
        os.unlink(probe)
        remove(out, replaced, strict=True)
    except OSError as e:
        raise IrtraceError(f"output folder {out}: cannot write there ({e.strerror}: {e.filename})") from None


def remove(out, names, strict=False):
    """Remove the files `names` from folder `out` where they are (and their temporary siblings);
    `strict`: an OSError other than "not there" is raised."""
    for name in names:
        for p in (Path(out) / name, Path(out) / f".{name}.tmp"):
            try:
                p.unlink()
            except FileNotFoundError:
                pass
            except OSError:
                if strict:
                    raise
