"""Host side of a backend worker process: one generic proxy for every backend.

A worker that dies (segfault, OOM kill, exit) or does not answer within the timeout is
reported as CRASH / TIMEOUT for the request it was serving, then restarted."""
import logging
import os
import queue
import re
import signal
import subprocess
import tempfile
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from backends._runtime import wire
from irtrace.errors import IrtraceError
from irtrace.replay import forkserver

log = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[2]   # the folder that holds irtrace/ and backends/
_BANNER = ("info: ", "debug: ")


class WorkerFailed(Exception):
    """A call no reply came for: `status` (wire.Status) CRASH, TIMEOUT, or ERROR for a worker that could
    not start; `verdict` the report's verdict of it."""

    def __init__(self, status, message, exit_code=None):
        super().__init__(message)
        self.status, self.message, self.exit_code = wire.Status(status), message, exit_code

    @property
    def verdict(self):
        return self.status.name


class StartFailed(IrtraceError):
    """A worker that did not answer its hello (its import failed, it was killed, it hung)."""

    def __init__(self, name, failure):
        super().__init__(f"backend {name!r} failed to start: {failure.message}")
        # a worker that exits (its import failed) is an ERROR; killed by a signal a CRASH; hung a TIMEOUT
        self.status = wire.Status.ERROR if failure.exit_code is not None and failure.exit_code > 0 else failure.status


# onnxruntime (and others) write timestamped, coloured lines to stderr; the messages that carry them
# must read the same in every run (docs/report.md: report.json is deterministic)
_NOISE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|^\s*\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?\s*")


def normalise(line):
    """A line of a framework's stderr without its timestamp and colour codes."""
    return _NOISE.sub("", line).strip()


_EARLY = {}  # backend name -> (a WorkerProxy launched ahead of the replay, the thread launching it), for the first
            # pool that asks


def launch_early(infos):
    """Launch the workers of `infos` (BackendInfo) now, so that their frameworks import while the host
    loads the bundle; a WorkerPool adopts them (adopt), discard_early() kills those nobody adopted. A
    backend that cannot be launched is left to the replay, which reports it as usual. Their interpreters are
    found at once (each managed environment's asks its base Python, a pyenv shim here, for its version). Each
    is launched on a thread of its own: a fork server kept warm (--keep-warm) that starts now answers once it has
    imported its framework, and the host goes on meanwhile."""
    infos = [i for i in infos if i.name not in _EARLY]
    with ThreadPoolExecutor(max(1, len(infos))) as pool:
        reasons = list(pool.map(lambda i: i.unavailable(), infos))
    for info, reason in zip(infos, reasons):
        if info.name in _EARLY or reason is not None:
            continue
        w = WorkerProxy(info)
        t = threading.Thread(target=_launch, args=(w,), daemon=True)
        t.start()
        _EARLY[info.name] = (w, t)


def _launch(w):
    try:
        w.launch()
    except Exception as e:  # noqa: BLE001 - on this thread: not launched, adopt hands out none (the pool's own
        log.info("%s: not launched early (%s: %s)", w.info.name, type(e).__name__, e)  # worker says why)
        if w.proc is not None:  # started, then its hello could not be asked: ended, not left running
            w.kill()
        w.proc = None


def adopt(info):
    """The worker launch_early started for `info` (the same declaration), or None."""
    early = _EARLY.pop(info.name, None)  # one pop: threads of --jobs N may ask at once
    if early is None:
        return None
    w, t = early
    if w.info != info:
        _EARLY[info.name] = early  # launched for another declaration of that name: discard_early kills it
        return None
    t.join()
    return w if w.proc is not None else None


def discard_early():
    while _EARLY:
        w, t = _EARLY.popitem()[1]
        t.join()
        if w.proc is not None:
            w.kill()


# Workers kept running between the replays of one process (keep_warm): a replay's workers, healthy and
# idle at its end, wait for the next replay that asks for the same declaration under the same environment
# variables, instead of importing their framework again (seconds each: TensorFlow's 4-7 s). Off by default;
# the demo (four examples in a row) and the test session turn it on.
_WARM = None          # [(BackendInfo, environment key, WorkerProxy)] of the idle workers, oldest first, or None
_VOLATILE = frozenset()  # environment variables left out of the key (keep_warm's `volatile`)
WARM_PER_BACKEND = 4  # idle workers kept per declaration (--jobs N parks up to N)
WARM_MAX = 8          # idle workers kept in all (each holds its framework in memory): the oldest end first
_FORK = False         # workers are forked (forkserver): on with keep_warm, where workers start over and over,
                      # and kept on by close_warm (a test's cold workers start as often), off by stop_forking


def keep_warm(volatile=()):
    """From now on, keep the workers a replay ends with for the next one in this process (close_warm ends them).
    `volatile`: environment variables that change between replays without changing what a worker computes
    (pytest's PYTEST_CURRENT_TEST, set anew for each test), left out of the key a worker is kept under,
    with those of earlier calls (a library call that turns keeping on does not bring them back in)."""
    global _WARM, _VOLATILE, _FORK
    _VOLATILE = _VOLATILE | frozenset(volatile)
    if _WARM is None:
        _WARM = []
        import atexit
        atexit.register(close_warm)
    if not _FORK:
        _FORK = True
        import atexit
        atexit.register(stop_forking)


def _environment_of(info):
    """The environment variables of `info`'s worker process."""
    env = dict(os.environ)
    paths = [str(p) for p in info.extra_path] + [str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.update(info.variables())
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def serve_roles_early():
    """Start the fork server of the reference's and the oracle's workers now, so that it imports their frameworks
    while the host loads the bundle (for a replay that will start them: a first one); the replay's own end ends it
    (release_forks), and so does this process's."""
    from irtrace.replay import backends as registry
    info = registry.known(registry.reference()) if registry.reference() else None
    modules = _role_modules(info) if info is not None else ()
    if modules and not _FORK and info.unavailable() is None:
        forkserver.serve(info.interpreter(), _environment_of(info), ROOT, modules, _VOLATILE)


def _role_modules(info):
    """What the fork server of the reference's and the oracle's workers imports (both their frameworks, once), when
    `info` is one of them in this interpreter; () for any other. A replay's first run starts both, and with
    --jobs 2 two of each: each importing torch took 1.5-2 CPU s of a first replay here, forked from one
    server that imported it they take none (benchmarks/first_run.py). Of the worker modules, the server imports
    irtrace's own only: a test's stand-in for a role (tests/faulty_backend.py) may plant a hang or a crash in its
    imports, which its own worker must show."""
    from backends._runtime.declare import UNDER_TEST
    from irtrace.replay import backends as registry
    if info.role == UNDER_TEST or info.python is not None:
        return ()
    roles = [r for r in (registry.known(name) for name in (registry.reference(), registry.oracle()) if name) if r]
    if info not in roles:  # a role's declaration other than the registered one: a plain process
        return ()
    # their frameworks, and the worker modules of irtrace's own (which build their op tables as they import)
    own = {r.worker for r in roles if r.worker.startswith("backends.")}
    return tuple(sorted({m for r in roles for m in r.needs}) + sorted(own))


SERVER_END_S = 5.0  # a replay's fork server ends within a select tick of its last worker: waited for this long


def release_forks():
    """End the fork servers a replay of its own started (its roles'; those keep_warm keeps stay): each ends with
    the last worker it forked."""
    if not _FORK:
        forkserver.close_all(wait=SERVER_END_S)


def stop_forking(end_servers=True):
    """Workers start as plain processes from now on; the fork servers end with the last of their workers
    (or, without `end_servers`, wait for forking to be turned on again by keep_warm)."""
    global _FORK
    _FORK = False
    if end_servers:
        forkserver.close_all()


def close_warm():
    """End every worker kept warm, and keep none from now on."""
    global _WARM
    idle, _WARM = _WARM or [], None
    for _, _, w in idle:
        w.ask_to_exit()
    for _, _, w in idle:
        w.wait_exit()


def _environment():
    return hash(frozenset((k, v) for k, v in os.environ.items() if k not in _VOLATILE))


def park(worker):
    """Keep `worker` for a later replay when workers are kept warm and it is alive and owes nothing;
    False (the caller closes it) otherwise."""
    if _WARM is None or not worker.idle():
        return False
    same = [w for info, _, w in _WARM if info == worker.info]
    if len(same) >= WARM_PER_BACKEND:
        return False
    _WARM.append((worker.info, _environment(), worker))
    while len(_WARM) > WARM_MAX:
        _WARM.pop(0)[2].close()
    return True


def warm(info):
    """A worker kept warm for `info` (the same declaration, the same environment variables), or None."""
    if not _WARM:
        return None
    here = _environment()
    for k, (kept, env, w) in enumerate(_WARM):
        if kept == info and env == here:
            del _WARM[k]
            if w.idle():
                w.restarts = 0
                return w
            w.kill()
            return None
    return None


START_MIN_S = 30.0  # the shortest wait for a worker's hello: a framework's import (TensorFlow: 4.6 s here, idle)


def _write_frame(stream, msg, arrays):
    try:
        wire.write(stream, msg, arrays, by_reference=True)
    except (BrokenPipeError, OSError, ValueError):
        pass  # it died (ValueError: its pipe closed meanwhile): the reader reports EOF when the reply is read


def _write_behind(frames):
    """Write a worker's frames sent behind (WorkerProxy.send), in order: each (stream, msg, arrays); None ends it.
    It holds the queue, not the proxy."""
    while True:
        frame = frames.get()
        try:
            if frame is None:
                return
            _write_frame(*frame)
        finally:
            frames.task_done()


def start_wait(timeout):
    """How long a replay with per-call `timeout` waits for a worker to start: as long, but at least
    START_MIN_S (a framework's import is not a node's call)."""
    return max(float(timeout), START_MIN_S)


class WorkerProxy:
    """One backend's worker process, restarted when it dies. Every request carries an id that its reply
    echoes (`send` returns it, `receive` asks for it): a reply is credited to the request it answers or to
    none. A process that dies or is killed takes the requests it still owed with it: each of them fails
    with that death (WorkerFailed), never with what a restarted process answers to other requests."""

    def __init__(self, info, start_timeout=120.0):
        self.info, self.start_timeout = info, start_timeout
        self.proc = None
        self.hello = None
        self.restarts = 0
        self.dead = None    # (status, message) once it failed to start twice: not started again
        self._mark = 0        # where its stderr was when the call began
        self._greeting = None   # the id of the hello launched and not read yet
        self._behind = None     # the queue of frames a thread of its own writes in the background (_write_behind)
        self._seq = 0           # the last request id given out
        self._owed = {}         # id -> True: requests the running process has not answered yet, in order
        self._early = {}        # id -> (reply, arrays): a reply read while waiting for a later request's
        self._lost = {}         # id -> WorkerFailed: requests the process died owing (or that never went out)
        self._ending = False    # its last reply said it ends (a framework error broke it)

    def start(self):
        """Launch the worker (unless launch() did) and read its hello."""
        if self._greeting is None:
            self.launch()
        rid, self._greeting = self._greeting, None
        try:
            self.hello, _ = self.receive(self.start_timeout, rid)
        except WorkerFailed as e:
            raise StartFailed(self.info.name, e) from e
        return self.hello

    def launch(self):
        """Start the process and ask for its hello without waiting for it (start() reads it): the
        framework imports while the host does something else."""
        reason = self.info.unavailable()
        if reason:
            raise IrtraceError(f"backend {self.info.name!r} is unavailable: {reason} — run: {self.info.install}")
        env = _environment_of(self.info)
        self._stderr = tempfile.TemporaryFile()
        argv = ["backends._runtime.worker", self.info.worker]
        self.proc = None
        # what a fork server imports once: the host's modules a backend needs, or a managed environment's
        # framework and the backend's worker module (not a host backend's own: a test's planted one may hang
        # or die as it imports, a real framework's folder in its environment does not)
        framework = self.info.needs or ((self.info.module, self.info.worker) if self.info.python is not None else ())
        shared = _role_modules(self.info)
        # workers start over and over, their servers are kept warm, or the roles share their imports: forked
        if ((_FORK or forkserver.keeping()) and framework) or shared:
            self.proc = forkserver.fork(self.info.interpreter(), env, ROOT, shared or framework, argv, self._stderr,
                                        _VOLATILE)
        if self.proc is None:
            self.proc = subprocess.Popen([self.info.interpreter(), "-m", *argv], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self._stderr, env=env, cwd=str(ROOT),
                                         start_new_session=True)
        self._frames = queue.Queue()
        threading.Thread(target=self._reader, args=(self.proc, self._frames), daemon=True).start()
        self._greeting = self._ask()
        _write_frame(self.proc.stdin, {"kind": "hello", "id": self._greeting}, [])

    def ensure(self):
        """Start the worker unless it runs; a start that fails is tried once more, then the worker is
        dead: every later call fails at once with the reason (WorkerFailed)."""
        if self._ending and self.proc is not None:  # it said it ends: its exit, then a new process
            self._ending = False
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.proc is not None and self.proc.poll() is None and self._greeting is None:
            return
        if self.proc is not None and self._greeting is None:
            self._salvage()  # it died without our noticing: keep what it answered, what it owed goes with it
        if self.dead:
            raise WorkerFailed(*self.dead)
        for attempt in range(2):
            if (self.proc is not None and self._greeting is None) or self.hello is not None or attempt:
                self.restarts += 1
            try:
                self.start()
                return
            except StartFailed as e:
                self.kill()
                failure = e
        self.dead = (failure.status, f"{failure} (twice; not restarted again)")
        raise WorkerFailed(*self.dead)

    @staticmethod
    def _reader(proc, frames):
        try:
            while True:
                frames.put(wire.read(proc.stdout))
        except EOFError:
            frames.put(None)
        except Exception as e:  # noqa: BLE001 - bytes that are not a frame (a stray print to fd 1, a bug)
            frames.put(e)

    def stderr_tail(self, n=6):
        try:
            self._stderr.seek(0)
            lines = self._stderr.read().decode(errors="replace").splitlines()
        except (OSError, ValueError):
            return ""
        lines = [normalise(ln) for ln in lines if ln.strip() and not ln.startswith(_BANNER)]
        return " | ".join(lines[-n:])

    def _ask(self):
        """A new request id, owed by the running process."""
        self._seq += 1
        self._owed[self._seq] = True
        return self._seq

    def _orphan(self, failure):
        """The running process is gone (or never answers again): every request it still owed fails with
        `failure` (what it did answer stays, for its receive)."""
        for rid in self._owed:
            self._lost[rid] = failure
        self._owed.clear()

    def _salvage(self, wait=5.0):
        """The process has exited: read the replies it wrote before it died (up to its end of stream), then
        orphan what it still owed with the way it died."""
        try:
            while self._owed:
                frame = self._frames.get(timeout=wait)
                if frame is None or isinstance(frame, Exception):
                    break
                reply, out = frame
                if reply.get("id") not in self._owed:
                    break  # out of step: trust nothing more from it
                del self._owed[reply["id"]]
                self._early[reply["id"]] = (reply, out)
        except queue.Empty:
            pass
        self._orphan(self._death())

    def _death(self):
        """WorkerFailed describing how the (exited) process ended, with what it wrote to stderr."""
        rc = self.proc.wait()
        how = f"killed by signal {signal.Signals(-rc).name}" if rc < 0 else f"exited with code {rc}"
        tail = self.stderr_tail()
        self.proc = None
        return WorkerFailed(wire.Status.CRASH, f"worker {how}" + (f": {tail}" if tail else ""), rc)

    def _read(self, timeout):
        """The next frame of the running process; WorkerFailed (every owed request orphaned with it) when
        it dies, hangs or writes something that is not a frame."""
        try:
            frame = self._frames.get(timeout=timeout)
        except queue.Empty:
            failure = WorkerFailed(wire.Status.TIMEOUT, f"no answer within {timeout:g} s (worker killed and restarted)")
            self.kill(failure)
            raise failure from None
        if isinstance(frame, Exception):
            # it may live on, but its stream is out of step: nothing it says can be trusted
            failure = WorkerFailed(wire.Status.CRASH, f"worker wrote something that is not a frame to its output stream "
                                            f"({type(frame).__name__}: {str(frame)[:200]}); worker killed")
            self.kill(failure)
            raise failure
        if frame is None:
            failure = self._death()
            self._orphan(failure)
            raise failure
        return frame

    def call(self, msg, arrays, timeout):
        """(reply, arrays); WorkerFailed on crash or timeout (the worker is restarted on next call).
        An error reply carries what the framework wrote to stderr meanwhile (MegEngine's AsyncError
        says only "see above")."""
        return self.receive(timeout, self.send(msg, arrays))

    def send(self, msg, arrays, background=False):
        """Start a request and return its id at once (a "batch" request: the list of its calls' ids, one
        per call): several workers compute at the same time; receive(timeout, id) gets the reply (a worker
        that cannot start fails there). `background`: the frame is written by a thread, so the host goes on
        while a busy worker has not read it yet (a batch sent ahead); the next send waits for it, receive
        does not (the worker's replies come on another pipe)."""
        self._written()
        try:
            self.ensure()
        except WorkerFailed as e:
            ids = [self._ask() for _ in msg["calls"]] if msg.get("kind") == "batch" else [self._ask()]
            self._orphan(e)  # never sent: each fails with the reason the worker cannot start
            return ids if msg.get("kind") == "batch" else ids[0]
        if msg.get("kind") == "batch":
            ids = [self._ask() for _ in msg["calls"]]
            msg = {**msg, "calls": [{**c, "id": rid} for c, rid in zip(msg["calls"], ids)]}
        else:
            ids = self._ask()
            msg = {**msg, "id": ids}
        self._mark = self._stderr.seek(0, 2)
        if background:
            if self._behind is None:  # one thread for the proxy's life: starting one per frame cost the host's
                # main thread 0.7-1.4 ms a batch here, waiting for it to run (benchmarks/fixed_cost.py)
                self._behind = queue.Queue()
                threading.Thread(target=_write_behind, args=(self._behind,), daemon=True,
                                 name=f"irtrace-frames-{self.info.name}").start()
                weakref.finalize(self, self._behind.put, None)  # a proxy let go unclosed ends it too
            self._behind.put((self.proc.stdin, msg, arrays))
        else:
            _write_frame(self.proc.stdin, msg, arrays)
        return ids

    def _written(self):
        """Wait until a frame written in the background is out (one frame at a time on its stdin)."""
        if self._behind is not None:
            self._behind.join()

    def receive(self, timeout, rid):
        """The reply to request `rid` (send's id): (reply, arrays), or WorkerFailed when the worker died,
        hung or could not start before answering it. Replies to earlier requests read on the way are kept
        for their own receive."""
        while rid not in self._early:
            if rid in self._lost:
                raise self._lost.pop(rid)
            if rid not in self._owed:
                raise RuntimeError(f"irtrace bug: no request {rid} is waiting for a reply from {self.info.name!r}")
            try:
                reply, out = self._read(timeout)
            except WorkerFailed:
                continue  # every request it owed, `rid` among them, is lost with the reason
            got = reply.get("id")
            if got not in self._owed:  # a reply to nothing asked: the stream cannot be trusted any more
                failure = WorkerFailed(wire.Status.CRASH, f"worker answered request {got!r}, which is not waiting for a "
                                                f"reply; worker killed")
                self.kill(failure)
                raise RuntimeError(f"irtrace bug: {self.info.name!r} {failure.message}")
            del self._owed[got]
            self._early[got] = (reply, out)
        reply, out = self._early.pop(rid)
        if reply.get("ends"):  # the framework's error broke the process, which ends: the next call restarts it
            self._ending = True
            log.warning("%s: the worker ends after the error %r: %s", self.info.name,
                        reply.get("message", "")[:120], reply["ends"])
        if reply.get("status") == wire.Status.ERROR:
            self._stderr.seek(self._mark)
            new = [normalise(ln) for ln in self._stderr.read().decode(errors="replace").splitlines()
                   if ln.strip() and not ln.startswith(_BANNER)]
            if new:
                reply["message"] = reply.get("message", "") + " | stderr: " + " | ".join(new[-3:])[:500]
        return reply, out

    def forget(self, ids):
        """Requests whose replies nobody will ask for (a batch's rest after its worker died)."""
        for rid in ids:
            self._lost.pop(rid, None)
            self._early.pop(rid, None)

    def kill(self, failure=None):
        """Kill the process now; what it owed fails with `failure` (default: killed by irtrace)."""
        self._greeting = None
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            self.proc = None
        self._end_writer()  # a frame it was writing failed with the process; a restarted one gets a thread of its own
        self._orphan(failure or WorkerFailed(wire.Status.CRASH, "worker killed by irtrace before it answered"))

    def _end_writer(self):
        if self._behind is not None:
            self._behind.put(None)
            self._behind = None

    def close(self):
        self.ask_to_exit()
        self.wait_exit()

    def idle(self):
        """Running, started, and owing no request: it can serve another replay as it is."""
        self._written()
        return (self.proc is not None and self.proc.poll() is None and self.hello is not None and not self.dead
                and not self._ending and self._greeting is None and not self._owed and not self._early and not self._lost)

    def ask_to_exit(self):
        """The first half of close(): several workers exit at the same time (a framework's
        teardown takes a while)."""
        self._written()
        if self.proc is not None and self.proc.poll() is None:
            try:
                wire.write(self.proc.stdin, {"kind": "exit"})
                self.proc.stdin.close()
            except (OSError, ValueError):
                self.kill()

    def wait_exit(self, timeout=10):
        self._end_writer()  # ask_to_exit waited for what it had
        if self.proc is not None:
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None
