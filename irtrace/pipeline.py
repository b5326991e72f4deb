"""Replay a bundle on disk and write its reports: what `irtrace replay` and `irtrace demo` do,
as one call (tests and benchmarks use it too)."""
import sys

from irtrace.errors import IrtraceError, printable
from irtrace.replay.api import ReplayOptions, run
from irtrace.replay.engine import MODES, parse_modes
from irtrace.replay.worker import discard_early, launch_early
from irtrace.replay import backends as registry
from irtrace.report import write as report_writer
from irtrace.report.journal import Journal, header as journal_header
from irtrace.store import load


def options_from_text(backend, modes, ops=None, **kw):
    """ReplayOptions from the CLI's comma-separated texts (--backend, --modes, --ops)."""
    return ReplayOptions(backends=tuple(registry.parse_list(backend)), modes=tuple(parse_modes(modes)),
                         ops=tuple(o.strip() for o in ops.split(",") if o.strip()) if ops is not None else None,
                         **kw)


def run_replay(bundle_path, backend, modes, out=None, quiet=False, resume=False, **options):
    """Replay + reports; returns (report dict, out folder). `options`: the fields of ReplayOptions
    (jobs, nodes, ops as text, timeout, atol, rtol, strict, chained, loss, form). Each node's results
    are appended to OUT/journal.jsonl as it completes; `resume` keeps those of an earlier run of the
    same replay and runs only the rest."""
    try:
        opts = options_from_text(backend, modes, **options)
        if not opts.modes and not opts.chained:
            raise IrtraceError(f"--modes {modes!r} names no mode and --chained is off: nothing would be tested; "
                               f"choose from {', '.join(MODES)}")
        opts.check()  # every option, before the bundle is read or anything written
        # the backends under test start importing their frameworks while the bundle loads (the reference
        # and the oracle start later, and only when their answers are not cached)
        launch_early([registry.get(n) for n in opts.backends if registry.get(n).role == registry.UNDER_TEST])
        return _run_replay(bundle_path, opts, out, quiet, resume)
    finally:
        discard_early()  # those a bad bundle or option left unused (the CLI launches them even earlier)


def _run_replay(bundle_path, opts, out, quiet, resume):
    bundle = load(bundle_path)
    out = out if out else report_writer.default_out(bundle)
    import os
    from pathlib import Path
    here, inside = Path(os.path.realpath(out)), Path(os.path.realpath(bundle.path))
    if here == inside or inside in here.parents:  # reports in the bundle make it no bundle (export --force)
        raise IrtraceError(f"output folder {out}: it is the bundle {bundle.path} or inside it; give another -o")
    # before the replay: its results are never lost to an unwritable -o, and the reports this run replaces
    # are removed now, so that a run that fails leaves none of an earlier run's to be read as its own
    held = report_writer.prepare_out(out, report_writer.REPORT_FILES, claim=True)
    try:
        return _replay_into(bundle, opts, out, quiet, resume)
    finally:
        if held is not None:
            held.close()


def _replay_into(bundle, opts, out, quiet, resume):
    progress, bar = None, None
    if sys.stderr.isatty() and not quiet:
        from rich.progress import Progress
        bar = Progress(transient=True)
        task = bar.add_task("replaying", total=None)
        bar.start()
        progress = lambda: bar.advance(task)  # noqa: E731
    journal = Journal(out, journal_header(bundle, opts), resume)
    if journal.restarted:
        print(f"irtrace: warning: {journal.path} is not signed by this user's key (edited, or written by another "
              f"user or machine): not resuming from it, every node runs", file=sys.stderr)
    if journal.dropped:
        print(f"irtrace: warning: {journal.dropped} line(s) of {journal.path} are not signed by this user's key "
              f"(edited, or written elsewhere): their nodes run again", file=sys.stderr)
    if resume and not quiet:
        print(f"irtrace: resuming: {len(journal.done)} node(s) already in {journal.path}", file=sys.stderr)
    try:
        outcome = run(bundle, opts, progress, done=journal.done, on_node=journal.append)
    except KeyboardInterrupt:
        print(f"irtrace: the nodes completed so far are in {journal.path}; finish with the same command "
              f"and --resume", file=sys.stderr)
        raise
    finally:
        journal.close()
        if bar is not None:
            bar.stop()
    try:
        report = report_writer.write(outcome, out)
    except OSError as e:  # a full disk or quota: the journal holds every node; nothing half written stays
        report_writer.remove(out, report_writer.REPORT_FILES)
        raise IrtraceError(f"output folder {out}: cannot write the report ({e.strerror or e}); the "
                           f"results are in {journal.path}: free space, then run the same command with "
                           f"--resume") from e
    if not quiet:
        from irtrace.report import terminal
        terminal.show(report)
        if opts.chained:
            from irtrace.report import chained as chained_report
            for line in chained_report.lines(report["chained"]):
                print(printable(line))
        from pathlib import Path
        out = Path(out)
        print(f"wrote {out / 'report.json'} and {out / 'report.html'}" +
              (f" and {out / 'chained.png'}" if opts.chained else ""))
    from pathlib import Path
    return report, Path(out)
