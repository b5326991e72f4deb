"""Host side of a backend worker process: one generic proxy for every backend.

A worker that dies (segfault, OOM kill, exit) or does not answer within the timeout is
reported as CRASH / TIMEOUT for the request it was serving, then restarted."""
import logging
import os
import queue
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

from backends._runtime import wire
from irtrace.errors import IrtraceError

log = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[2]   # the folder that holds irtrace/ and backends/
_BANNER = ("info: ", "debug: ")


class WorkerFailed(Exception):
    def __init__(self, verdict, message):
        super().__init__(message)
        self.verdict, self.message = verdict, message


class WorkerProxy:
    def __init__(self, info, start_timeout=120.0):
        self.info, self.start_timeout = info, start_timeout
        self.proc = None
        self.hello = None
        self.restarts = 0

    def start(self):
        reason = self.info.unavailable()
        if reason:
            raise IrtraceError(f"backend {self.info.name!r} is unavailable: {reason} — run: {self.info.install}")
        env = dict(os.environ)
        paths = [str(p) for p in self.info.extra_path] + [str(ROOT)]
        env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env.update(self.info.variables())
        env.setdefault("OMP_NUM_THREADS", "1")
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([self.info.interpreter(), "-m", "backends._runtime.worker", self.info.worker],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env,
                                     cwd=str(ROOT), start_new_session=True)
        self._frames = queue.Queue()
        threading.Thread(target=self._reader, args=(self.proc, self._frames), daemon=True).start()
        try:
            self.hello, _ = self._call({"kind": "hello"}, [], self.start_timeout)
        except WorkerFailed as e:
            raise IrtraceError(f"backend {self.info.name!r} failed to start: {e.message}") from e
        return self.hello

    @staticmethod
    def _reader(proc, frames):
        try:
            while True:
                frames.put(wire.read(proc.stdout))
        except (EOFError, ValueError, OSError):
            frames.put(None)

    def stderr_tail(self, n=6):
        try:
            self._stderr.seek(0)
            lines = self._stderr.read().decode(errors="replace").splitlines()
        except (OSError, ValueError):
            return ""
        lines = [ln for ln in lines if ln.strip() and not ln.startswith(_BANNER)]
        return " | ".join(lines[-n:])

    def _call(self, msg, arrays, timeout):
        try:
            wire.write(self.proc.stdin, msg, arrays)
        except (BrokenPipeError, OSError):
            pass  # it died: the reader reports EOF below
        try:
            frame = self._frames.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise WorkerFailed("TIMEOUT", f"no answer within {timeout:g} s (worker killed and restarted)") from None
        if frame is None:
            rc = self.proc.wait()
            how = f"killed by signal {signal.Signals(-rc).name}" if rc < 0 else f"exited with code {rc}"
            tail = self.stderr_tail()
            self.proc = None
            raise WorkerFailed("CRASH", f"worker {how}" + (f": {tail}" if tail else ""))
        return frame

    def call(self, msg, arrays, timeout):
        """(reply, arrays); WorkerFailed on crash or timeout (the worker is restarted on next call).
        An error reply carries what the framework wrote to stderr meanwhile (MegEngine's AsyncError
        says only "see above")."""
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None or self.hello is not None:
                self.restarts += 1
            self.start()
        mark = self._stderr.seek(0, 2)
        reply, out = self._call(msg, arrays, timeout)
        if reply.get("status") == "error":
            self._stderr.seek(mark)
            new = [ln for ln in self._stderr.read().decode(errors="replace").splitlines()
                   if ln.strip() and not ln.startswith(_BANNER)]
            if new:
                reply["message"] = reply.get("message", "") + " | stderr: " + " | ".join(new[-3:])[:500]
        return reply, out

    def kill(self):
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            self.proc = None

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                wire.write(self.proc.stdin, {"kind": "exit"})
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired, ValueError):
                self.kill()
        self.proc = None
