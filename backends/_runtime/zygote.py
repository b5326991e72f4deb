"""A fork server of workers: started once per interpreter and environment with the framework's modules
imported (`python -m backends._runtime.zygote FD MODULE...`), it forks a worker for each request on the
socket FD (a SOCK_SEQPACKET socket: one message a packet), without importing the framework again. The
host asks with one packet of JSON ({"id": n, "argv": [...]}) and three file descriptors (the worker's stdin, stdout and
stderr); the server answers `pid ID PID` once forked, `exit PID CODE` when one of its workers ends
(CODE as subprocess's returncode: -N for signal N), and `refused ID WHY` where it cannot fork safely.

One thread only: a process forked while another thread holds a lock (a BLAS pool's) inherits the lock
held forever, so a server whose imports started threads refuses every request (the host then starts the
worker as a plain process).

Kept warm (`python -m backends._runtime.zygote --listen PATH IDLE LIMIT MODULE...`, irtrace replay --keep-warm): the
server listens on the Unix socket PATH instead, for any process of this user (each connection asks as above,
and is told of its own workers' exits), outlives the process that started it, and ends once no process has
been connected and none of its workers has run for IDLE seconds (its socket removed); one whose imports take
more than LIMIT seconds is killed. A server that refuses
stays as long, refusing at once: the next replay does not import the framework a second time to learn it."""
import importlib
import json
import os
import runpy
import select
import signal
import socket
import struct
import sys
import time


def _threads():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def _child(socks, fds, argv):
    """In the forked worker: the server's sockets closed, its own session, the three descriptors as 0, 1, 2, then
    the worker's module as __main__; never returns."""
    code = 1
    try:
        for s in socks:
            s.close()
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        sys.argv = list(argv)
        runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - the worker's own failure, on its stderr, and its exit code
        import traceback
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001,S110 - a closed stream at exit
                pass
        os._exit(code)


def _ended():
    """(pid, exit code as subprocess's returncode) of each worker that has ended since asked last."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, os.waitstatus_to_exitcode(status)


def _reap(sock):
    """Tell the host of every worker that has ended."""
    for pid, code in _ended():
        sock.sendall(f"exit {pid} {code}\n".encode())


def _outlive(sock):
    """Tell the host of each worker as it ends, until none is left (a host gone closes their stdin)."""
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return
        try:
            sock.sendall(f"exit {pid} {os.waitstatus_to_exitcode(status)}\n".encode())
        except OSError:
            pass


def _import(modules):
    """The modules imported; whether forking is safe after them (one thread)."""
    for m in modules:
        try:
            importlib.import_module(m)
        except Exception:  # noqa: BLE001,S112 - the worker imports it again and reports why it cannot
            continue
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the host's Ctrl-C is the host's: it ends the server
    return _threads() == 1


def _fork(sock, msg, fds, safe, socks):
    """Fork the worker the request `msg` (with descriptors `fds`) asks for on `sock`, and tell its pid; None
    (told: refused) where forking is not safe. `socks`: every socket of the server, closed in the worker."""
    request = json.loads(msg)
    if not safe or len(fds) != 3:
        for f in fds:
            os.close(f)
        sock.sendall(f"refused {request['id']} {_threads()} threads\n".encode())
        return None
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _child(socks, fds, request["argv"])
    for f in fds:
        os.close(f)
    sock.sendall(f"pid {request['id']} {pid}\n".encode())
    return pid


def serve(fd, modules):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=fd)
    safe = _import(modules)
    while True:
        ready, _, _ = select.select([sock], [], [], 0.01)  # a worker's exit is told within this
        _reap(sock)
        if not ready:
            continue
        msg, fds, _, _ = socket.recv_fds(sock, 65536, 3)
        if not msg:  # no more workers: the server ends with the last of those it forked
            return _outlive(sock)
        _fork(sock, msg, fds, safe, [sock])


def _bound(path):
    """A socket listening at `path`, or None where a live server listens there already (two replays started one
    each at once: the later one ends). A socket file nobody listens on (a server killed) is replaced."""
    for _ in range(2):
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            srv.bind(path)
            srv.listen(64)
            return srv
        except OSError:
            srv.close()
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            probe.connect(path)
            return None  # a live one
        except OSError:
            try:
                os.unlink(path)
            except OSError:
                pass
        finally:
            probe.close()
    return None


def peer(conn):
    """(pid, uid, gid) of the process at the other end of the Unix socket `conn` (Linux's SO_PEERCRED)."""
    return struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))


def _same_user(conn):
    return peer(conn)[1] == os.getuid()


def _unlink(path, inode):
    try:
        if os.stat(path).st_ino == inode:  # still this server's socket (not a newer server's)
            os.unlink(path)
    except OSError:
        pass


def listen(path, idle, limit, modules):
    """Serve every process of this user that connects to `path` until none has been connected and no worker has
    run for `idle` seconds. The parent process returns as soon as the socket listens (the host waits for that,
    not for the imports); the server is its child, in a session of its own. SIGTERM (irtrace servers --stop):
    no new connection, and the server ends once the replays connected are done with it (their workers are not
    killed midway)."""
    r, w = os.pipe()
    if os.fork() != 0:  # the parent: returns once the server listens (connections wait in its backlog for the imports)
        os.close(w)
        os.read(r, 1)
        return
    os.close(r)
    os.setsid()
    srv = _bound(path)  # in the server itself: its pid is the one a connection's peer credentials name
    os.write(w, b".")
    os.close(w)
    if srv is None:
        return
    inode = os.stat(path).st_ino
    # imports that hang would leave a server every later replay connects to and waits on: killed after `limit`
    # seconds, as long as the host waits for a fork (SIGALRM; its socket then refuses connections, and the next
    # replay starts another in its place)
    signal.alarm(max(1, round(limit)))
    safe = _import(modules)
    signal.alarm(0)
    # owner: pid of a worker -> the connection that asked for it; closing: connections whose process is done
    # asking, open until each of its workers' exits is told (it waits for them as they end)
    conns, closing, owner, quiet, stop = [], [], {}, time.monotonic(), []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    while True:
        if stop and srv is not None:
            _unlink(path, inode)
            srv.close()
            srv = None
        listening = [srv] if srv is not None else []
        ready, _, _ = select.select(listening + conns, [], [], 0.01 if owner else 1.0)
        for pid, code in _ended() if owner else ():  # each worker's exit told to the process that asked for it
            try:
                owner.pop(pid).sendall(f"exit {pid} {code}\n".encode())
            except (OSError, KeyError):  # that process has gone
                pass
        for c in [c for c in closing if c not in owner.values()]:
            closing.remove(c)
            c.close()
        for s in ready:
            if s is srv:
                conn, _ = srv.accept()
                if _same_user(conn):
                    conns.append(conn)
                else:
                    conn.close()
                continue
            try:
                msg, fds, _, _ = socket.recv_fds(s, 65536, 3)
            except OSError:
                msg, fds = b"", []
            if not msg:  # that process asks for no more workers
                conns.remove(s)
                closing.append(s)
                continue
            try:
                pid = _fork(s, msg, fds, safe, listening + conns + closing)
            except (ValueError, KeyError, TypeError, OSError):  # not a request of irtrace's, or its asker gone
                for f in fds:
                    try:
                        os.close(f)
                    except OSError:  # closed already (the fork was made, telling its pid failed)
                        pass
                conns.remove(s)
                s.close()
                continue
            if pid is not None:
                owner[pid] = s
        if conns or closing or owner:
            quiet = time.monotonic()
        elif stop or time.monotonic() - quiet > idle:
            break
    _unlink(path, inode)


if __name__ == "__main__":
    if sys.argv[1] == "--listen":
        listen(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5:])
    else:
        serve(int(sys.argv[1]), sys.argv[2:])
    # ended without the interpreter's teardown of what it imported (torch's took 0.6 s here): it holds nothing
    # to flush, and a replay's end waits for its server to end
    os._exit(0)
