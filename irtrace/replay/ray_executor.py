"""Replay on a Ray cluster: RayExecutor is the Executor (execute.py) that runs each call on a Ray actor
(a "Ray worker") instead of this machine's workers. Each Ray worker holds the backends' workers of its
Ray node, one per backend (started, and their managed environments built, on first use there, keyed as
on this machine); the host plans, judges, caches and writes the report as in a local replay, so the
report is the same. A call crosses to its Ray worker as a wire frame's JSON header and its numpy arrays
(backends/_runtime/wire.py's split; no irtrace object is pickled): an input that is a view of the bundle's memory-mapped
values goes as where it lies in the file when the Ray worker sees that file at the same path (shared
storage), otherwise its bytes go through Ray's object store with the call. A Ray worker that dies is
restarted by Ray; the calls it owed are sent again (counted in the report's `restarts`), never lost."""
import itertools
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from backends._runtime import wire
from irtrace.errors import IrtraceError
from irtrace.replay.execute import Answer, Executor, LocalExecutor, Ticket, WorkerPool, answer_of, failed
from irtrace.replay.worker import WorkerFailed, start_wait

RAY = "ray==2.60.0"  # pyproject's extra `ray`; requirements-host.txt installs it for the tests
RETRIES = 4          # times a call is sent again after its Ray worker died, before it is a CRASH
CONCURRENT = 16      # calls a Ray worker serves at once (each backend's worker runs one at a time)
IN_FLIGHT = 2        # nodes in flight per Ray worker by default: one is sent while another computes


def import_ray():
    """The ray module, or IrtraceError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise IrtraceError(f"--executor ray needs Ray, which is not installed: pip install 'irtrace[ray]' "
                           f"({RAY})") from None
    return ray


class _Frame:
    """A call as it arrived on a Ray worker: what LocalExecutor.send reads of a NodeCall."""

    def __init__(self, msg, arrays):
        self.msg, self._arrays = msg, arrays

    def message(self):
        return self.msg

    def arrays(self):
        return self._arrays


class _SharedPool(WorkerPool):
    """One worker per backend for every thread of a Ray worker (its calls arrive on Ray's threads)."""

    def __init__(self, start_timeout):
        super().__init__(start_timeout)
        self.workers = {}

    def _mine(self):
        return self.workers


class RayWorker:
    """The actor on a Ray node (made a Ray actor class by RayExecutor.open): its backends' workers, each
    serving one call at a time; calls to different backends run at once."""

    def __init__(self, timeout):
        self.executor = LocalExecutor(timeout, _SharedPool(start_wait(timeout)))
        self.locks, self.unbuildable = {}, {}
        self.lock = threading.Lock()
        self.threads = ThreadPoolExecutor(CONCURRENT)

    def pid(self):
        return os.getpid()

    def sees(self, path, size):
        """Whether this Ray node has `path` (the bundle's value file) at the same path and size."""
        return os.path.isfile(path) and os.path.getsize(path) == size

    def _lock(self, backend):
        with self.lock:
            return self.locks.setdefault(backend, threading.Lock())

    def _ready(self, backend):
        """None when `backend` can start here, else why not: its managed environment is built on first use
        (irtrace setup's build, on this Ray node); a build that fails is said once per Ray worker."""
        from irtrace import envs
        from irtrace.replay import backends as registry
        if backend not in self.unbuildable:
            why = None
            try:
                info = registry.get(backend)
                if info.python is not None and info.unavailable() is not None:
                    envs.get(backend).setup(log=lambda line: None)
            except IrtraceError as e:
                why = f"backend {backend!r} cannot run on Ray node {socket.gethostname()}: {e}"
            self.unbuildable[backend] = why
        return self.unbuildable[backend]

    def run_all(self, frames):
        """The reply frames of (backend, call frame) pairs, each backend's at once."""
        if len(frames) == 1:
            return [self.run(*frames[0])]
        return list(self.threads.map(lambda f: self.run(*f), frames))

    def run(self, backend, data):
        """The reply frame of one call frame on `backend`."""
        msg, arrays = wire.join(*data)
        with self._lock(backend):
            why = self._ready(backend)
            answer = failed(WorkerFailed(wire.Status.ERROR, why)) if why else \
                self.executor.run(backend, _Frame(msg, arrays))
        del arrays
        # the inputs viewed in the bundle's file leave this process's resident memory; another thread's request still
        # running reads its pages again from the file (nothing here writes into its inputs: they go to a worker)
        wire.release_mapped()
        return wire.split({**answer.reply, "status": answer.status.value}, answer.arrays())

    def hello(self, backend):
        """{"modes", "native"} of `backend`'s worker here, or None where it cannot start."""
        with self._lock(backend):
            if self._ready(backend):
                return None
            try:
                w = self.executor.pool.get(backend)
            except WorkerFailed:
                return None
            return dict(modes=list(w.hello["modes"]), native=bool(w.hello.get("native"))) if w.hello else None

    def restarts(self):
        return self.executor.restarts()

    def versions(self):
        return self.executor.versions()

    def close(self):
        self.executor.close()


class _Batch:
    """Calls one replay thread sent to Ray worker `worker` before it asked for an answer; `ref` the Ray
    task carrying them, `replies` what it gave."""

    def __init__(self, worker):
        self.worker, self.calls, self.ref, self.replies = worker, [], None, None


class RayExecutor(Executor):
    """Calls run on Ray workers: `address` of a running cluster (None: ray.init() starts one on this
    machine, stopped at the end); `workers` Ray workers (None: one per CPU of the cluster); `shared`: True sends inputs as regions of the bundle's file (every Ray node sees it at
    the same path), False through Ray's object store, None each Ray worker as it sees the file;
    `runtime_env`: Ray's, for the Ray workers (e.g. {"env_vars": {...}}); `in_flight` nodes per Ray worker."""
    elsewhere = True

    def __init__(self, address=None, workers=None, shared=None, runtime_env=None, in_flight=IN_FLIGHT):
        self.address, self.workers, self.shared, self.runtime_env = address, workers, shared, runtime_env
        self.in_flight = in_flight
        self.actors, self.retried = [], {}
        self._owns = False
        self._local = None
        self._hellos, self._sees = {}, {}
        self._slot = threading.local()
        self._count = itertools.count()
        self._lock = threading.Lock()

    def open(self, timeout):
        """Connect (or start Ray here) and start the Ray workers; returns self."""
        ray = import_ray()
        self.timeout = timeout
        if not ray.is_initialized():
            try:
                ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise IrtraceError(f"--executor ray: cannot connect to Ray at {self.address or 'a new local cluster'}:"
                                   f" {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
            self._owns = True
        n = self.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        actor = ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=0, max_concurrency=CONCURRENT,
                           runtime_env=self.runtime_env)(RayWorker)
        self.actors = [actor.remote(timeout) for _ in range(n)]
        return self

    def concurrency(self):
        return self.in_flight * len(self.actors)

    def _mine(self):
        """The Ray worker of this thread: each replay thread keeps one (its nodes go there)."""
        i = getattr(self._slot, "index", None)
        if i is None:
            i = self._slot.index = next(self._count) % len(self.actors)
        return i

    def _by_reference(self, i, arrays):
        """Whether the call's mapped inputs go as file regions to Ray worker `i` (it sees every file)."""
        if self.shared is not None:
            return self.shared
        import ray
        files = {r[0] for r in map(wire.file_region, arrays) if r is not None}
        for path in files:
            key = (i, path)
            if key not in self._sees:
                self._sees[key] = ray.get(self.actors[i].sees.remote(path, os.path.getsize(path)))
        return all(self._sees[(i, path)] for path in files)

    def _submit(self, batch):
        frames = []
        for backend, call in batch.calls:
            arrays = call.arrays()
            frames.append((backend, wire.split(call.message(), arrays, self._by_reference(batch.worker, arrays))))
        batch.ref = self.actors[batch.worker].run_all.remote(frames)

    def send(self, backend, call):
        """The call joins this thread's batch: the calls a thread sends before it receives (a node's, on
        the reference, the oracle and each backend) go to its Ray worker as one Ray task."""
        batch = getattr(self._slot, "batch", None)
        if batch is None:
            batch = self._slot.batch = _Batch(self._mine())
        batch.calls.append((backend, call))
        return Ticket(backend, call, (batch, len(batch.calls) - 1))

    def receive(self, ticket):
        if ticket.answer is not None:
            return ticket.answer
        batch, k = ticket.handle
        if batch.replies is None:
            if getattr(self._slot, "batch", None) is batch:
                self._slot.batch = None  # sent now: later calls start another
            batch.replies = self._collect(batch)
        reply = batch.replies[k]
        return reply if isinstance(reply, Answer) else answer_of(*wire.join(*reply))

    def _collect(self, batch):
        """The reply frames of a batch (sent now), sent again while its Ray worker dies; an Answer for
        each call when that happens RETRIES + 1 times, or when the Ray worker raised."""
        import ray
        from ray.exceptions import ActorUnavailableError, RayActorError, RayTaskError
        for attempt in range(RETRIES + 1):
            try:
                self._submit(batch)
                return ray.get(batch.ref)
            except RayTaskError as e:  # the Ray worker raised: irtrace's own bug, said as the calls' ERROR
                return [failed(WorkerFailed(wire.Status.ERROR, f"the Ray worker raised: {e}"))] * len(batch.calls)
            except (RayActorError, ActorUnavailableError) as e:
                death = e
                with self._lock:
                    for backend, _ in batch.calls:
                        self.retried[backend] = self.retried.get(backend, 0) + 1
                self._sees = {k: v for k, v in self._sees.items() if k[0] != batch.worker}  # maybe elsewhere now
                time.sleep(0.5 * attempt)  # Ray restarts it meanwhile
        why = f"its Ray worker died {RETRIES + 1} times running it: {str(death).splitlines()[0]}"
        return [failed(WorkerFailed(wire.Status.CRASH, why))] * len(batch.calls)

    def _hello(self, backend):
        if backend not in self._hellos:
            import ray
            self._hellos[backend] = ray.get(self.actors[0].hello.remote(backend))
        return self._hellos[backend]

    def modes(self, backend):
        from irtrace.replay import backends as registry
        hello = self._hello(backend)
        return tuple(hello["modes"]) if hello else registry.get(backend).modes

    def native(self, backend):
        return bool((self._hello(backend) or {}).get("native"))

    def versions(self):
        """backend -> its framework's versions, from every Ray worker's started workers."""
        import ray
        out = {}
        for found in ray.get([a.versions.remote() for a in self.actors]):
            for name, v in found.items():
                out.setdefault(name, v)
        return out

    def restarts(self):
        """Each backend's worker restarts on every Ray worker, and the calls sent again after a Ray worker
        died (a restarted Ray worker counts afresh: its workers' earlier restarts are in these)."""
        import ray
        out = dict(self.retried)
        for counts in ray.get([a.restarts.remote() for a in self.actors]):
            for name, n in counts.items():
                out[name] = out.get(name, 0) + n
        return out

    def local(self):
        """This machine's workers: the workaround search asks them for a backend's alternatives."""
        if self._local is None:
            self._local = LocalExecutor(self.timeout)
        return self._local

    def close(self):
        import ray
        try:
            ray.get([a.close.remote() for a in self.actors])
        finally:
            self.kill(graceful=True)

    def kill(self, graceful=False):
        import ray
        if self._local is not None:
            (self._local.close if graceful else self._local.kill)()
        for a in self.actors:
            ray.kill(a)
        self.actors = []
        if self._owns:
            ray.shutdown()
            self._owns = False
