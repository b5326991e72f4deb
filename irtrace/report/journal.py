"""OUT/journal.jsonl: the results of a replay, one line per node, appended as the nodes complete.

Lines are appended whole to a file opened for appending, a node's together with the next ones' in one write()
within FLUSH_LINES nodes or FLUSH_S seconds of its completion, whichever comes first, the replay running or
waiting on a node (a write a line cost 10 us of a one-element node's 0.25 ms, benchmarks/fixed_cost.py); close()
writes what is pending, and the replay closes its journal on SIGINT and SIGTERM too. A run killed outright loses
at most those last nodes (a resume runs them again) and leaves at most a truncated last line, which a resume
drops. Line 1 says which replay it belongs to (the bundle's
content and the options that decide verdicts); `irtrace replay --resume` reads the journal, keeps its
nodes and runs only the others (docs/report.md).

Every line ends with `"sig": "<HMAC>"}`, its signature under this user's key (irtrace/envs/trust.py), a
node's bound to its journal's header: a line that does not verify (edited, spliced in from another
journal, written by another user or machine) is dropped and its node runs again; a header that does not
verify starts the journal over. The header's "bundle" hashes every byte of the bundle, so a bundle
edited since (even keeping its files' sizes and modification times) is another replay, refused.
"""
import json
import os
import re
import threading
import time
from dataclasses import fields
from pathlib import Path

from irtrace.envs import trust
from irtrace.errors import IrtraceError
from irtrace.replay.engine import NodeReport
from irtrace.report.json_report import clean, node_text, write_atomic

SCHEMA = "irtrace.journal/1"
NAME = "journal.jsonl"
FLUSH_LINES = 64  # a node's line is written within this many nodes
FLUSH_S = 0.25    # or this many seconds of its completion
# options that change how fast or where, not what: a resume may change them
_NOT_VERDICTS = ("jobs", "cache", "cache_size", "batch", "executor")


def header(bundle, options):
    opts = {f.name: getattr(options, f.name) for f in fields(options) if f.name not in _NOT_VERDICTS}
    return json.loads(json.dumps(clean({"schema": SCHEMA, "bundle": bundle.content_key, "options": opts})))


class Journal:
    """Append-only results of one replay in `out`. resume=False starts a new journal; resume=True keeps
    the nodes of an earlier run of the same replay (`done`)."""

    def __init__(self, out, head, resume=False):
        self.path = Path(out) / NAME
        self.done = {}
        self.dropped = 0        # lines (nodes) of the old journal that did not verify: run again
        self.restarted = False  # the old journal's header did not verify: started over
        self.head_text = json.dumps(head, sort_keys=True)
        self.head_sig = trust.sign("journal header", self.head_text)
        if resume and not trust.available():
            raise IrtraceError(f"{self.path}: cannot resume without the signing key that proves the journal "
                               f"is this user's (see the warning above)")
        if resume and self.path.exists():
            self.done = self._read(head)
        else:
            self._write_new()
        self._line_signer = trust.signer("journal line", self.head_sig)  # the header's as _read left it
        self._pending = []  # [(node name, line)] not written yet
        self._lock, self._timer, self._failed = threading.Lock(), None, None
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)

    def _write_new(self, lines=()):  # an old journal is replaced whole, never mixed with this run
        write_atomic(self.path, "".join(f"{ln}\n" for ln in [_sign(self.head_text, self.head_sig), *lines]))

    def _read(self, head):
        raw = self.path.read_bytes()
        complete = raw[:raw.rfind(b"\n") + 1]  # a run killed mid-write leaves a partial last line: dropped
        lines = complete.decode("utf-8", errors="replace").splitlines()
        if not lines:
            self._write_new()
            return {}
        try:
            first = json.loads(lines[0])
        except ValueError:
            first = None
        if not isinstance(first, dict) or first.get("schema") != SCHEMA:
            raise IrtraceError(f"{self.path}: line 1 is not an irtrace journal header; cannot resume from it")
        first.pop("sig", None)
        if first != head:
            what = "bundle" if first.get("bundle") != head["bundle"] else "options " + ", ".join(
                k for k in sorted(set(head["options"]) | set(first.get("options", {})))
                if head["options"].get(k) != first.get("options", {}).get(k))
            raise IrtraceError(f"{self.path}: written by another replay ({what} differ); "
                               f"run without --resume, or give another -o")
        text, sig = _split(lines[0])
        if text is None or not trust.verify(sig, "journal header", text):  # edited, or another user's: nothing kept
            self.restarted = True
            self._write_new()
            return {}
        # equal to this replay's header (above), if not as text (120 and 120.0): its lines are signed under it
        self.head_text, self.head_sig = text, sig
        done, kept = {}, []
        for k, line in enumerate(lines[1:], start=2):
            try:
                node = NodeReport.from_json(json.loads(line))
            except (ValueError, KeyError, TypeError) as e:
                raise IrtraceError(f"{self.path}: line {k} is not a node's results ({type(e).__name__}: {e}); "
                                   f"cannot resume from it") from None
            text, sig = _split(line)
            if text is None or not trust.verify(sig, "journal line", self.head_sig, text) or node.name in done:
                self.dropped += 1
                continue
            done[node.name] = node
            kept.append(line)
        if self.dropped:
            self._write_new(kept)  # without the lines that did not verify: their nodes are appended again
        elif len(complete) != len(raw):
            with open(self.path, "r+b") as f:
                f.truncate(len(complete))
        return done

    def append(self, node):
        # keys in their own order (not sorted): a resumed report.json must be the same bytes
        text = node_text(node)
        sig = trust.sign_after(self._line_signer, text) if self._line_signer is not None else None
        line = (_sign(text, sig) + "\n").encode()
        with self._lock:
            self._raise_failed()
            self._pending.append((node.name, line))
            if len(self._pending) >= FLUSH_LINES:
                self._write_pending()
            elif self._timer is None:  # written FLUSH_S from now, whatever the replay does meanwhile
                self._timer = threading.Timer(FLUSH_S, self._write_later)
                self._timer.daemon = True
                self._timer.start()

    def _write_later(self):
        with self._lock:
            self._timer = None
            if self.fd is None:  # closed meanwhile (its number may be another file's by now): close wrote them
                return
            try:
                self._write_pending()
            except IrtraceError as e:  # raised by the replay's next append, or by close
                self._failed = e

    def _raise_failed(self):
        if self._failed is not None:
            failed, self._failed = self._failed, None
            raise failed

    def _write_pending(self):
        """Write the lines not written yet, in one write (holding the lock)."""
        if not self._pending:
            return
        data = b"".join(line for _, line in self._pending)
        try:
            if os.write(self.fd, data) != len(data):
                raise OSError(28, "short write (the disk is full)")
        except OSError as e:  # a full disk or quota: the nodes already written are whole; resume later
            raise IrtraceError(f"{self.path}: cannot append node {self._pending[0][0]!r} ({e.strerror}); free space, "
                               f"then finish with the same command and --resume") from e
        finally:
            self._pending.clear()

    def close(self):
        """Every line appended written, and the file closed (the first write that failed raised)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            try:
                self._raise_failed()
                self._write_pending()
            finally:
                os.close(self.fd)
                self.fd = None


_SIGNED = re.compile(r'(\{.+), "sig": "([0-9a-f]{64})"\}')


def _sign(text, sig):
    """A JSON object's text with its signature as a last key (a line any JSON reader still reads)."""
    return f'{text[:-1]}, "sig": "{sig}"}}' if sig is not None else text


def _split(line):
    """(the text that was signed: the line without its "sig" key, the signature), or (None, None)."""
    m = _SIGNED.fullmatch(line)
    return (f"{m.group(1)}}}", m.group(2)) if m else (None, None)

