"""Write the Report of a replay: report.json (docs/report.md), report.html and, with a chained
run, chained.png. Returns the report dict (what report.json holds)."""
import os
import tempfile
from pathlib import Path

from irtrace.errors import IrtraceError
from irtrace.report import html, json_report
from irtrace.report.findings import group


def build(outcome):
    """The report dict of a Report (irtrace.replay.api.Report)."""
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
    html.write(report, out, extra, json_report.node_texts(outcome.replay, report))
    return report


def default_out(bundle):
    """BUNDLE.replay beside a bundle (an opened Bundle or its path)."""
    return Path(str(getattr(bundle, "path", bundle)).rstrip("/") + ".replay")


REPORT_FILES = ("report.json", "report.html", "timings.json", "chained.png")


LOCK = ".irtrace.lock"


def prepare_out(out, replaced=(), claim=False):
    """Create the output folder `out` (and its parents) and prove it writable, before a replay (or a
    diff) runs; then remove the files of `replaced` there (an earlier run's reports), so that a run that
    fails or is killed leaves nothing that reads as its own result. `claim`: hold `out` for this process
    (an exclusive lock on OUT/.irtrace.lock, released when the returned file is closed or the process
    ends): a second replay into the same folder at the same time is refused instead of mixing its
    journal and reports with the first's."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise IrtraceError(f"output folder {out}: exists and is not a folder")
    held = None
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".irtrace-probe-", dir=out)
        os.close(fd)
        os.unlink(probe)
        if claim:
            held = _claim(out)
        remove(out, replaced, strict=True)
    except OSError as e:
        if held is not None:
            held.close()
        raise IrtraceError(f"output folder {out}: cannot write there ({e.strerror}: {e.filename})") from None
    return held


def _claim(out):
    import fcntl
    held = open(Path(out) / LOCK, "a+")
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        held.seek(0)
        who = held.read().strip()[:40]
        held.close()
        raise IrtraceError(f"output folder {out}: another irtrace replay is writing there"
                           + (f" (pid {who})" if who else "") + "; wait for it to end, or give another -o") from None
    except OSError:  # a filesystem without locks: nothing to hold, as before
        return held
    held.seek(0)
    held.truncate()
    held.write(str(os.getpid()))
    held.flush()
    return held


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
