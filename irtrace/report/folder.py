"""A replay into a folder: each node's results journaled as it completes (journal.jsonl, which
`--resume` reads), then the report files. What `irtrace replay -o OUT` and `irtrace demo` do; the
replay itself is irtrace.replay.run."""
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from irtrace.errors import IrtraceError
from irtrace.replay import run
from irtrace.report import write as report_writer
from irtrace.report.journal import Journal, header as journal_header


@dataclass
class Written:
    """A replay written into a folder: its Report, what report.json holds, and the folder."""
    report: object
    json: dict
    out: Path


def replay_into(bundle, options, out, resume=False, progress=None):
    """irtrace.replay.run(bundle, options), with its results journaled in `out` as they complete and its
    report files written there; `resume` keeps the nodes of an earlier run of the same replay in `out`
    and runs only the rest. Returns a Written."""
    options.check()  # every option, before the bundle is read or anything written
    if not hasattr(bundle, "model"):
        from irtrace.store import load
        bundle = load(bundle)
    out = Path(out)
    here, inside = Path(os.path.realpath(out)), Path(os.path.realpath(bundle.path))
    if here == inside or inside in here.parents:  # reports in the bundle make it no bundle (export --force)
        raise IrtraceError(f"output folder {out}: it is the bundle {bundle.path} or inside it; give another -o")
    # before the replay: its results are never lost to an unwritable -o, and the reports this run replaces
    # are removed now, so that a run that fails leaves none of an earlier run's to be read as its own
    held = report_writer.prepare_out(out, report_writer.REPORT_FILES, claim=True)
    try:
        journal = _journal(bundle, options, out, resume)
        try:
            report = run(bundle, options, progress, done=journal.done, on_node=journal.append)
        except KeyboardInterrupt:
            print(f"irtrace: the nodes completed so far are in {journal.path}; finish with the same command "
                  f"and --resume", file=sys.stderr)
            raise
        finally:
            journal.close()
        try:
            return Written(report, report_writer.write(report, out), out)
        except OSError as e:  # a full disk or quota: the journal holds every node; nothing half written stays
            report_writer.remove(out, report_writer.REPORT_FILES)
            raise IrtraceError(f"output folder {out}: cannot write the report ({e.strerror or e}); the "
                               f"results are in {journal.path}: free space, then run the same command with "
                               f"--resume") from e
    finally:
        if held is not None:
            held.close()


def _journal(bundle, options, out, resume):
    journal = Journal(out, journal_header(bundle, options), resume)
    if journal.restarted:
        print(f"irtrace: warning: {journal.path} is not signed by this user's key (edited, or written by "
              f"another user or machine): not resuming from it, every node runs", file=sys.stderr)
    if journal.dropped:
        print(f"irtrace: warning: {journal.dropped} line(s) of {journal.path} are not signed by this user's "
              f"key (edited, or written elsewhere): their nodes run again", file=sys.stderr)
    if resume:
        print(f"irtrace: resuming: {len(journal.done)} node(s) already in {journal.path}", file=sys.stderr)
    return journal
