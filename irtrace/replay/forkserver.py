"""Workers forked from a server that imported their framework once (backends/_runtime/zygote.py): a
worker of a framework already imported starts in milliseconds instead of importing it again. Used where
workers are started over and over in one process (worker.keep_warm: the test session, the demo, irtrace
fuzz, whose crashing cases restart workers), and for a replay's reference and oracle, which share their imports
(torch; two of each with --jobs 2) through one server that ends with the replay; a replay of its own starts the
backends under test as plain processes. One server per
interpreter, environment and module list; where a server cannot fork safely (threads after its
imports) or has died, the worker starts as a plain process (fork returns None)."""
import json
import os
import signal
import socket
import subprocess
import threading

_SERVERS = {}   # (interpreter, environment, folder, modules) -> _Server
_LOCK = threading.Lock()
SERVERS_MAX = 4  # each holds its framework in memory: the oldest stops forking first
IMPORT_WAIT_S = 60.0  # the longest wait for a new server's imports and first fork


class Forked:
    """A worker forked by a server, as much of subprocess.Popen as WorkerProxy uses: pid, stdin,
    stdout, poll(), wait(timeout), returncode."""

    def __init__(self, stdin, stdout):
        self.stdin, self.stdout = stdin, stdout
        self.returncode = None
        self._pid, self._forked, self._ended = None, threading.Event(), threading.Event()

    @property
    def pid(self):
        self._forked.wait()
        return self._pid

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired("forked worker", timeout)
        return self.returncode

    def _end(self, code):
        self.returncode = code
        self._forked.set()
        self._ended.set()


class _Server:
    def __init__(self, interpreter, env, cwd, modules):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock, self.seq, self.waiting, self.running = ours, 0, {}, {}
        self.refused, self.gone = None, False
        self.proc = subprocess.Popen([interpreter, "-m", "backends._runtime.zygote", str(theirs.fileno()), *modules],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env=env, cwd=cwd, pass_fds=[theirs.fileno()], start_new_session=True)
        theirs.close()
        self.lock = threading.Lock()
        threading.Thread(target=self._listen, daemon=True).start()

    def fork(self, argv, stderr):
        """A Forked worker running `argv` (a module and its arguments) with stderr to the file `stderr`;
        None where this server refuses or is gone."""
        if self.refused is not None or self.gone or self.proc.poll() is not None:
            return None
        r_in, w_in = os.pipe()
        r_out, w_out = os.pipe()
        child = Forked(os.fdopen(w_in, "wb"), os.fdopen(r_out, "rb"))
        with self.lock:
            self.seq += 1
            self.waiting[self.seq] = child
            try:
                socket.send_fds(self.sock, [json.dumps({"id": self.seq, "argv": argv}).encode()],
                                [r_in, w_out, stderr.fileno()])
            except OSError:
                del self.waiting[self.seq]
                child = None
        os.close(r_in)
        os.close(w_out)
        return child

    def _listen(self):
        while True:
            try:
                msg = self.sock.recv(4096).decode()
            except OSError:
                msg = ""
            if not msg:
                return self._gone()
            kind, a, b = msg.split(" ", 2)
            with self.lock:
                if kind == "pid":
                    child = self.waiting.pop(int(a))
                    child._pid = int(b)
                    self.running[int(b)] = child
                    child._forked.set()
                elif kind == "exit" and int(a) in self.running:
                    self.running.pop(int(a))._end(int(b))
                elif kind == "refused":  # for good: the server's process ends (it holds a framework)
                    self.refused = b.strip()
                    self.waiting.pop(int(a))._end(None)
                    self.proc.kill()

    def _gone(self):
        """The server ended: workers it still ran are orphans whose exit it can no longer tell; they are
        killed, and end as killed."""
        with self.lock:
            self.gone = True
            for pid, child in self.running.items():
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
                child._end(-signal.SIGKILL)
            for child in self.waiting.values():
                child._end(-signal.SIGKILL)
            self.running.clear()
            self.waiting.clear()

    def close(self):
        """No more workers from this server: it ends once those it forked have ended (each still tells
        its exit)."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def fork(interpreter, env, cwd, modules, argv, stderr, volatile=()):
    """A worker forked by the server of (interpreter, env without `volatile`, cwd, modules), started if
    need be; None where none can fork it (the caller starts a plain process)."""
    server = serve(interpreter, env, cwd, modules, volatile)
    child = server.fork(argv, stderr)
    if child is not None and not child._forked.wait(IMPORT_WAIT_S):  # its imports hang: no server for this key
        server.refused = f"no fork within {IMPORT_WAIT_S:.0f} s"
        server.proc.kill()
        return None
    return None if child is None or child.pid is None else child  # pid None: refused (threads)


def serve(interpreter, env, cwd, modules, volatile=()):
    """The server of (interpreter, env without `volatile`, cwd, modules), started now (its imports begin) unless it
    runs."""
    key = (interpreter, frozenset((k, v) for k, v in env.items() if k not in volatile), str(cwd), tuple(modules))
    with _LOCK:
        server = _SERVERS.get(key)
        if server is None or (server.refused is None and (server.gone or server.proc.poll() is not None)):
            server = _SERVERS[key] = _Server(interpreter, env, cwd, modules)
            while len(_SERVERS) > SERVERS_MAX:
                _SERVERS.pop(next(iter(_SERVERS))).close()
    return server


def close_all(wait=None):
    """Every server stops forking (and ends with its last worker); with `wait` (seconds), each whose workers have
    all ended (a replay's end) is waited for, and killed if it has not ended by then. One still running a worker
    (another replay's, in this process) is not: it ends with that worker."""
    with _LOCK:
        servers = list(_SERVERS.values())
        _SERVERS.clear()
    for s in servers:
        s.close()
    for s in servers if wait is not None else ():
        with s.lock:
            serving = bool(s.running or s.waiting)
        if serving:
            continue
        try:
            s.proc.wait(wait)
        except subprocess.TimeoutExpired:
            s.proc.kill()
            s.proc.wait()
