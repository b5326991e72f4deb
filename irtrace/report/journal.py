"""OUT/journal.jsonl: the results of a replay, one line per node, appended as each node completes.

Each line is one write() of a whole line to a file opened for appending, so a killed run leaves at
most a truncated last line, which a resume drops. Line 1 says which replay it belongs to (the bundle's
content and the options that decide verdicts); `irtrace replay --resume` reads the journal, keeps its
nodes and runs only the others (docs/report.md).
"""
import json
import os
from dataclasses import asdict
from pathlib import Path

from irtrace.errors import IrtraceError
from irtrace.replay.engine import NodeReport
from irtrace.report.json_report import clean, write_atomic

SCHEMA = "irtrace.journal/1"
NAME = "journal.jsonl"
_NOT_VERDICTS = ("jobs", "cache", "batch")  # options that change how fast, not what: a resume may change them


def header(bundle, options):
    opts = {k: v for k, v in asdict(options).items() if k not in _NOT_VERDICTS}
    return json.loads(json.dumps(clean({"schema": SCHEMA, "bundle": bundle.content_key, "options": opts})))


class Journal:
    """Append-only results of one replay in `out`. resume=False starts a new journal; resume=True keeps
    the nodes of an earlier run of the same replay (`done`)."""

    def __init__(self, out, head, resume=False):
        self.path = Path(out) / NAME
        self.done = {}
        if resume and self.path.exists():
            self.done = self._read(head)
        else:
            self._write_new(head)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)

    def _write_new(self, head):  # an old journal is replaced whole, never mixed with this run
        write_atomic(self.path, json.dumps(head, sort_keys=True) + "\n")

    def _read(self, head):
        raw = self.path.read_bytes()
        complete = raw[:raw.rfind(b"\n") + 1]  # a run killed mid-write leaves a partial last line: dropped
        lines = complete.decode("utf-8", errors="replace").splitlines()
        if not lines:
            self._write_new(head)
            return {}
        try:
            first = json.loads(lines[0])
        except ValueError:
            first = None
        if not isinstance(first, dict) or first.get("schema") != SCHEMA:
            raise IrtraceError(f"{self.path}: line 1 is not an irtrace journal header; cannot resume from it")
        if first != head:
            what = "bundle" if first.get("bundle") != head["bundle"] else "options " + ", ".join(
                k for k in sorted(set(head["options"]) | set(first.get("options", {})))
                if head["options"].get(k) != first.get("options", {}).get(k))
            raise IrtraceError(f"{self.path}: written by another replay ({what} differ); "
                               f"run without --resume, or give another -o")
        done = {}
        for k, line in enumerate(lines[1:], start=2):
            try:
                node = NodeReport.from_json(json.loads(line))
            except (ValueError, KeyError, TypeError) as e:
                raise IrtraceError(f"{self.path}: line {k} is not a node's results ({type(e).__name__}: {e}); "
                                   f"cannot resume from it") from None
            done[node.name] = node
        if len(complete) != len(raw):
            with open(self.path, "r+b") as f:
                f.truncate(len(complete))
        return done

    def append(self, node):
        # keys in their own order (not sorted): a resumed report.json must be the same bytes
        os.write(self.fd, (json.dumps(clean(node.to_json()), allow_nan=False) + "\n").encode())

    def close(self):
        os.close(self.fd)
