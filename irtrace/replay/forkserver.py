"""Workers forked from a server that imported their framework once (backends/_runtime/zygote.py): a
worker of a framework already imported starts in milliseconds instead of importing it again. Used where
workers are started over and over in one process (worker.keep_warm: the test session, the demo, irtrace
fuzz, whose crashing cases restart workers), and for a replay's reference and oracle, which share their imports
(torch; two of each with --jobs 2) through one server that ends with the replay; a replay of its own starts the
backends under test as plain processes. One server per
interpreter, environment and module list; where a server cannot fork safely (threads after its
imports) or has died, the worker starts as a plain process (fork returns None).

Kept warm (keep(seconds): irtrace replay --keep-warm): every backend's server listens on a socket in this user's
servers_folder(), outlives the replay, and ends after that long unused; a later replay with --keep-warm whose
server would have the same key (interpreter, environment, folder, modules, and the stamp of the code and packages
it imports: stamp()) forks its workers from the one running. A replay without it neither uses nor starts one."""
import hashlib
import json
import logging
import os
import signal
import socket
import subprocess
import threading
from pathlib import Path

from backends._runtime.zygote import peer

log = logging.getLogger(__name__)
_SERVERS = {}   # (interpreter, environment, folder, modules) -> _Server
_LOCK = threading.Lock()
SERVERS_MAX = 4  # each holds its framework in memory: the oldest stops forking first
IMPORT_WAIT_S = 60.0  # the longest wait for a new server's imports and first fork
_KEEP = None  # seconds a server started now is kept unused (keep), or None: a server ends with its replay
ROOT = Path(__file__).resolve().parents[2]
SOCKET_MAX = 107  # bytes of a Unix socket's path (sun_path, with its NUL)
# environment variables a kept server's name leaves out: the shell sets them anew for each command (`_` is the
# command's path: `time irtrace replay` and `irtrace replay` would each start a server), and irtrace's own
SHELL_VOLATILE = frozenset({"_", "OLDPWD", "PWD", "SHLVL", "COLUMNS", "LINES", "IRTRACE_KEEP_WARM", "IRTRACE_SERVERS"})


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
    def __init__(self, interpreter, env, cwd, modules, path=None):
        """A server of its own (ends with this process's last worker of it), or with `path` the one listening
        there: connected to if it runs, else started (kept _KEEP seconds unused)."""
        self.seq, self.waiting, self.running = 0, {}, {}
        self.refused, self.gone, self.proc = None, False, None
        self.lock = threading.Lock()
        self.sock = _connect(path) if path is not None else None
        if self.sock is None and path is not None and _KEEP is not None:
            subprocess.run([interpreter, "-m", "backends._runtime.zygote", "--listen", path, f"{_KEEP:g}",
                            f"{IMPORT_WAIT_S:g}", *modules], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=env, cwd=cwd, start_new_session=True, check=False)
            self.sock = _connect(path)  # listening once that returns (its imports go on in the server)
            if self.sock is None:
                self.gone = True
                return
        if self.sock is None:  # a server of its own
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            self.sock = ours
            self.proc = subprocess.Popen([interpreter, "-m", "backends._runtime.zygote", str(theirs.fileno()),
                                          *modules], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, env=env, cwd=cwd, pass_fds=[theirs.fileno()],
                                         start_new_session=True)
            theirs.close()
        threading.Thread(target=self._listen, daemon=True).start()

    def ended(self):
        return self.gone or (self.proc is not None and self.proc.poll() is not None)

    def stop(self, why):
        """No more forks from this server, for `why`: one of its own is killed, a kept one is left to others."""
        self.refused = why
        if self.proc is not None:
            self.proc.kill()
        else:
            self.close()

    def fork(self, argv, stderr):
        """A Forked worker running `argv` (a module and its arguments) with stderr to the file `stderr`;
        None where this server refuses or is gone."""
        if self.refused is not None or self.ended():
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
                elif kind == "refused":  # for good: a server of its own ends (it holds a framework)
                    self.waiting.pop(int(a))._end(None)
                    self.stop(b.strip())

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
        if self.sock is None:
            return
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
        server.stop(f"no fork within {IMPORT_WAIT_S:.0f} s")
        return None
    return None if child is None or child.pid is None else child  # pid None: refused (threads)


def serve(interpreter, env, cwd, modules, volatile=()):
    """The server of (interpreter, env without `volatile`, cwd, modules), started now (its imports begin) unless it
    runs."""
    key = (interpreter, frozenset((k, v) for k, v in env.items() if k not in volatile), str(cwd), tuple(modules))
    with _LOCK:
        server = _SERVERS.get(key)
        if server is None or (server.refused is None and server.ended()):
            path = socket_path(key) if _KEEP is not None else None
            server = _SERVERS[key] = _Server(interpreter, env, cwd, modules, path)
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
        if s.proc is None:  # kept warm: others' to use
            continue
        with s.lock:
            serving = bool(s.running or s.waiting)
        if serving:
            continue
        try:
            s.proc.wait(wait)
        except subprocess.TimeoutExpired:
            s.proc.kill()
            s.proc.wait()


def keep(seconds):
    """From now on, servers are kept warm: one that runs is used, one started ends after `seconds` unused (None:
    servers of this process's own, each ending with its replay)."""
    global _KEEP
    _KEEP = seconds


def keeping():
    return _KEEP is not None


def servers_folder():
    """Where kept servers listen: $IRTRACE_SERVERS, else $XDG_RUNTIME_DIR/irtrace (the user's own folder for
    sockets), else the user's cache folder's servers/."""
    if os.environ.get("IRTRACE_SERVERS"):
        return Path(os.environ["IRTRACE_SERVERS"])
    if os.environ.get("XDG_RUNTIME_DIR"):
        return Path(os.environ["XDG_RUNTIME_DIR"]) / "irtrace"
    from irtrace.envs.trust import cache_root
    return cache_root() / "servers"


def running():
    """(socket path, server pid) of each kept server listening now."""
    out = []
    for path in sorted(servers_folder().glob("*.sock")) if servers_folder().is_dir() else ():
        sock = _connect(str(path))
        if sock is not None:
            with sock:
                pid = peer(sock)[0]
            out.append((str(path), pid))
    return out


def socket_path(key):
    """Where the kept server of `key` listens: in servers_folder() (made 0700; a connection from another user is
    refused by the server too), named by the key and stamp() of its interpreter; None where that path is
    too long for a Unix socket (then no server is kept)."""
    interpreter, env, cwd, modules = key
    env = sorted((k, v) for k, v in env if k not in SHELL_VOLATILE)
    h = hashlib.sha256(json.dumps([interpreter, env, cwd, modules, stamp(interpreter)]).encode())
    folder = servers_folder()
    path = str(folder / f"{h.hexdigest()[:32]}.sock")
    if len(os.fsencode(path)) >= SOCKET_MAX:
        log.info("%s: too long for a Unix socket; no server is kept warm", path)
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as e:
        log.warning("%s: cannot make it (%s); no server is kept warm", folder, e)
        return None
    return path


def stamp(interpreter):
    """What a kept server's imports depend on besides its key: irtrace's backends/ (each file's path, size and
    modification time) and the site-packages folders of `interpreter`'s environment (a package installed or
    removed changes its folder's modification time), so that a server never forks code or a framework that
    has changed since it imported them."""
    parts = []
    for p in sorted((ROOT / "backends").rglob("*.py")):
        st = p.stat()
        parts.append((str(p), st.st_size, st.st_mtime_ns))
    for p in sorted(Path(interpreter).parent.parent.glob("lib*/python*/site-packages")):
        parts.append((str(p), p.stat().st_mtime_ns))
    return parts


def _connect(path):
    """A connection to the server listening at `path`, or None."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect(path)
        return sock
    except OSError:
        sock.close()
        return None


def describe():
    """(socket path, pid, the modules it imported, resident bytes) of each kept server listening now."""
    out = []
    for path, pid in running():
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace").split("\0")
            rss = int(open(f"/proc/{pid}/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            argv, rss = [], 0
        modules = argv[argv.index("--listen") + 4:-1] if "--listen" in argv else []
        out.append((path, pid, modules, rss))
    return out


def stop(path, pid):
    """Stop the kept server `pid` listening at `path`: it takes no new connection (a replay after this starts its
    own), and ends once the replays connected to it are done (their workers are not killed midway)."""
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        pass
