"""A fork server of workers: started once per interpreter and environment with the framework's modules
imported (`python -m backends._runtime.zygote FD MODULE...`), it forks a worker for each request on the
socket FD (a SOCK_SEQPACKET socket: one message a packet), without importing the framework again. The
host asks with one packet of JSON ({"id": n, "argv": [...]}) and three file descriptors (the worker's stdin, stdout and
stderr); the server answers `pid ID PID` once forked, `exit PID CODE` when one of its workers ends
(CODE as subprocess's returncode: -N for signal N), and `refused ID WHY` where it cannot fork safely.

One thread only: a process forked while another thread holds a lock (a BLAS pool's) inherits the lock
held forever, so a server whose imports started threads refuses every request (the host then starts the
worker as a plain process)."""
import importlib
import json
import os
import runpy
import select
import signal
import socket
import sys


def _threads():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def _child(sock, fds, argv):
    """In the forked worker: its own session, the three descriptors as 0, 1, 2, then the worker's module
    as __main__; never returns."""
    code = 1
    try:
        sock.close()
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


def _reap(sock):
    """Tell the host of every worker that has ended."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sock.sendall(f"exit {pid} {os.waitstatus_to_exitcode(status)}\n".encode())


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


def serve(fd, modules):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=fd)
    for m in modules:
        try:
            importlib.import_module(m)
        except Exception:  # noqa: BLE001,S112 - the worker imports it again and reports why it cannot
            continue
    safe = _threads() == 1
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the host's Ctrl-C is the host's: it ends the server
    while True:
        ready, _, _ = select.select([sock], [], [], 0.01)  # a worker's exit is told within this
        _reap(sock)
        if not ready:
            continue
        msg, fds, _, _ = socket.recv_fds(sock, 65536, 3)
        if not msg:  # no more workers: the server ends with the last of those it forked
            return _outlive(sock)
        request = json.loads(msg)
        if not safe or len(fds) != 3:
            for f in fds:
                os.close(f)
            sock.sendall(f"refused {request['id']} {_threads()} threads\n".encode())
            continue
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            _child(sock, fds, request["argv"])
        for f in fds:
            os.close(f)
        sock.sendall(f"pid {request['id']} {pid}\n".encode())


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2:])
    # ended without the interpreter's teardown of what it imported (torch's took 0.6 s here): it holds nothing
    # to flush, and a replay's end waits for its server to end
    os._exit(0)
