"""Execute: a NodeCall on a backend gives an Answer. An Executor sends a call and later receives its
answer (every backend of a node computes at once); LocalExecutor runs the backends' workers on this
machine. Caching and batching are Executors that wrap another (Polygraphy's runner composition): each
answers what it can from its store and hands the rest to the executor it wraps, so a new way to run
calls (another machine, a cluster) is one class, and the replay loop has no branch for any of them.

An answer held at send time (a cached answer, one a batch brought back) is passed through the
wrappers outside its holder as it is: they neither record nor store it again."""
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from backends._runtime.wire import Status
from irtrace.replay import backends as registry
from irtrace.replay.plan import ORACLE, REFERENCE
from irtrace.replay.worker import WorkerFailed, WorkerProxy, adopt, park, release_forks, start_wait, warm


@dataclass(frozen=True)
class Answer:
    """What a backend gave for a call: its Status, its reply (message, time_s, ...), the call's results
    and the extra fields the call asked for beyond them, each declared by name in the reply (the
    oracle's "magnitude", the rounding model's size of every result; its "rounding", one spread per result). Unpacks as
    (status, reply, results)."""
    status: Status
    reply: dict
    results: list
    extra: dict = field(default_factory=dict)

    def __iter__(self):
        return iter((self.status, self.reply, self.results))

    @property
    def ok(self):
        return self.status == Status.OK

    def arrays(self):
        """Every array of the answer as a reply frame carries them: the results, then each extra field's."""
        return list(self.results) + [a for groups in self.extra.values() for group in groups for a in group]


def answer_of(reply, arrays):
    """The Answer of a worker's reply frame: the arrays of each extra field the reply declares
    (reply["extra"]: name -> the sizes of its groups, in order after the results) taken off the end."""
    status = Status(reply["status"])
    declared = reply.get("extra") or {}
    n = sum(sum(sizes) for sizes in declared.values())
    results, rest = (list(arrays[:len(arrays) - n]), list(arrays[len(arrays) - n:])) if n else (list(arrays), [])
    extra = {}
    for name, sizes in declared.items():
        groups = []
        for size in sizes:
            groups.append(rest[:size])
            rest = rest[size:]
        extra[name] = groups
    return Answer(status, reply, results, extra)


@dataclass
class Ticket:
    """A call sent: to `backend`, `call`; `handle` what the executor that sent it needs to receive its
    answer; `answer` when it was answered at send time."""
    backend: str
    call: object
    handle: object = None
    answer: Answer = None


class Executor:
    """Runs NodeCalls on backends: send(backend, call) -> Ticket, receive(Ticket) -> Answer. The rest
    says what the backends are (their modes, whether they execute ONNX themselves) and what ran."""
    elsewhere = False  # the backends run on other machines: whether one can run is theirs to say, not this one's

    def send(self, backend, call):
        raise NotImplementedError

    def receive(self, ticket):
        raise NotImplementedError

    def run(self, backend, call):
        return self.receive(self.send(backend, call))

    def open(self, timeout):
        """Ready to run calls of `timeout` seconds each (an executor a replay is given runs nothing
        before); returns self."""
        return self

    def concurrency(self):
        """How many nodes it runs at once: a replay keeps that many in flight (a thread each)."""
        return 1

    def close(self):
        """Every worker it started ended (or kept warm)."""

    def kill(self):
        """Interrupted: every worker it started ended now."""

    def modes(self, backend):
        raise NotImplementedError

    def native(self, backend):
        """Whether the backend executes ONNX itself (gets --form original's node)."""
        raise NotImplementedError

    def drain(self):
        """Wait for every call sent ahead and not asked for (none, unless calls are sent ahead)."""

    def versions(self):
        """backend -> its framework's versions, for the backends that ran."""
        return {}

    def restarts(self):
        """backend -> how many times its worker was started again after a crash."""
        return {}

    def local(self):
        """The LocalExecutor underneath (its workers, which the workaround search asks directly), or None."""
        return None


class Wrapper(Executor):
    """An Executor around another: everything it does not override goes to `inner`."""

    def __init__(self, inner):
        self.inner = inner

    def send(self, backend, call):
        return self.inner.send(backend, call)

    def receive(self, ticket):
        return ticket.answer if ticket.answer is not None else self.inner.receive(ticket)

    def modes(self, backend):
        return self.inner.modes(backend)

    def native(self, backend):
        return self.inner.native(backend)

    def drain(self):
        self.inner.drain()

    def versions(self):
        return self.inner.versions()

    def restarts(self):
        return self.inner.restarts()

    def local(self):
        return self.inner.local()


class Stopped(Exception):
    """The replay is being interrupted: no worker is started or restarted any more."""


class WorkerPool:
    """One worker per backend per thread (thread-local), all closed at the end. A worker that fails
    to start is not an error here: its calls fail with the reason (WorkerProxy.ensure)."""

    def __init__(self, start_timeout=None):
        self.local = threading.local()
        self.all = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.start_timeout = start_timeout  # seconds a worker's start may take (None: WorkerProxy's default)

    def _proxy(self, info):
        w = adopt(info) or warm(info) or WorkerProxy(info)
        if self.start_timeout is not None:
            w.start_timeout = self.start_timeout
        return w

    def _mine(self):
        d = getattr(self.local, "workers", None)
        if d is None:
            d = self.local.workers = {}
        return d

    def get(self, name):
        if self.stopping.is_set():
            raise Stopped()
        d = self._mine()
        if name not in d:
            info = registry.get(name)
            w = d[name] = self._proxy(info)
            with self.lock:
                self.all.append(w)
            _start(w)
        return d[name]

    def prestart(self, names):
        """Start this thread's workers for `names` concurrently (each start imports a framework)."""
        d = self._mine()
        workers = {n: self._proxy(registry.get(n)) for n in names if n not in d}
        d.update(workers)
        with self.lock:
            self.all.extend(workers.values())
        with ThreadPoolExecutor(max(1, len(workers))) as ex:
            list(ex.map(_start, workers.values()))

    def available(self):
        return {w.info.name for w in self.all} | {n for n, i in registry.BACKENDS.items() if i.unavailable() is None}

    def close(self):
        """Every worker closed, or kept warm for the next replay (worker.keep_warm)."""
        leaving = [w for w in self.all if not park(w)]
        for w in leaving:
            w.ask_to_exit()
        for w in leaving:
            w.wait_exit()
        release_forks()

    def kill(self):
        """Interrupted: no new worker starts, every running one is killed now (not asked to exit)."""
        self.stopping.set()
        with self.lock:
            for w in self.all:
                w.kill()
        release_forks()


def _start(worker):
    try:
        worker.ensure()
    except WorkerFailed:
        pass  # its calls report it: ERROR / CRASH on every node of that backend, the rest go on


def failed(death):
    """The Answer of a call whose worker died, hung or could not start (a WorkerFailed)."""
    return Answer(death.status, {"message": death.message}, [])


class LocalExecutor(Executor):
    """Each backend's worker processes on this machine (a WorkerPool: one set per thread; `pool`, one
    already open); `timeout` seconds per call (and per start, for a pool of its own)."""

    def __init__(self, timeout, pool=None):
        self.timeout = timeout
        self.pool = pool if pool is not None else WorkerPool(start_wait(timeout))

    def send(self, backend, call):
        worker = self.pool.get(backend)
        return Ticket(backend, call, (worker, worker.send(call.message(), call.arrays())))

    def receive(self, ticket):
        if ticket.answer is not None:
            return ticket.answer
        worker, rid = ticket.handle
        try:
            reply, out = worker.receive(self.timeout, rid)
        except WorkerFailed as e:
            if self.pool.stopping.is_set():
                raise Stopped() from None  # killed by the interrupt, not by the node
            return failed(e)
        return answer_of(reply, out)

    def modes(self, backend):
        """The modes a backend computes (its worker says; its declaration when it could not start)."""
        w = self.pool.get(backend)
        return tuple(w.hello["modes"]) if w.hello else registry.get(backend).modes

    def native(self, backend):
        return bool((self.pool.get(backend).hello or {}).get("native"))

    def prestart(self, names):
        self.pool.prestart(names)

    def versions(self):
        """backend -> its worker's framework versions (the workers that started)."""
        return {w.info.name: w.hello.get("versions", {}) for w in self.pool.all if w.hello}

    def restarts(self):
        out = {}
        for w in self.pool.all:
            out[w.info.name] = out.get(w.info.name, 0) + w.restarts
        return out

    def local(self):
        return self

    def close(self):
        self.pool.close()

    def kill(self):
        self.pool.kill()


_AFTER_REFERENCE = object()  # a Ticket's handle: the cached answer is read when it is received (Caching)
_KEPT = object()  # a Ticket's handle: its answer is the cache's (Caching)


class Caching(Wrapper):
    """The reference's and the oracle's answers kept beside the bundle (a ResultCache) and read from it:
    torch and float64 give the same answers on the same node every time."""

    def __init__(self, inner, cache):
        super().__init__(inner)
        self.cache = cache

    def send(self, backend, call):
        kept = self.cache.get(call, backend) if backend in (REFERENCE, ORACLE) else None
        if kept is None and self.cache.waits(call, backend):  # read once the reference it is kept against is
            return Ticket(backend, call, handle=_AFTER_REFERENCE)
        return Ticket(backend, call, _KEPT, kept) if kept is not None else self.inner.send(backend, call)

    def receive(self, ticket):
        if ticket.handle is _KEPT:
            return ticket.answer
        if ticket.handle is _AFTER_REFERENCE:  # the reference's answer is in now (received before, as gather does)
            kept = self.cache.get(ticket.call, ticket.backend)
            if kept is not None:
                return kept
            ticket = self.inner.send(ticket.backend, ticket.call)
        answer = self.inner.receive(ticket)  # computed now, or ahead of time (a batch's: Batching)
        if ticket.backend in (REFERENCE, ORACLE):
            self.cache.put(ticket.call, ticket.backend, answer)
        return answer


@dataclass
class _Ahead:
    """A Ticket's handle: the answer of a call a batch computed ahead (Batching)."""
    answer: Answer


class Batching(Wrapper):
    """The calls of the backends under test, and of the reference and the oracle where their answers are not
    cached, sent ahead in batches (replay/batch.py): `batches`, backend -> Batches of the calls it will be
    sent, in order; a call no batch answers is sent alone."""

    def __init__(self, inner, batches):
        super().__init__(inner)
        self.batches = batches

    def send(self, backend, call):
        sent = self.batches.get(backend)
        answer = sent.take(call) if sent is not None else None
        # the answer is received, not handed over at send time (Ticket.answer): the wrappers between, Caching
        # among them, see it as they see an answer computed now
        return Ticket(backend, call, handle=_Ahead(answer)) if answer is not None else self.inner.send(backend, call)

    def receive(self, ticket):
        return ticket.handle.answer if isinstance(ticket.handle, _Ahead) else super().receive(ticket)

    def drain(self):
        for sent in self.batches.values():
            sent.drain()
        self.inner.drain()

    def restarts(self):
        """A batch's crash: its nodes were run again alone, and say their own."""
        out = self.inner.restarts()
        for backend, sent in self.batches.items():
            out[backend] = out.get(backend, 0) - sent.crashes
        return out


# A replayed call needs about this many times the bytes it sends, here (benchmarks/scale.py: the Llama's
# lm_head vjp2 sends 525 MB; the float64 oracle's worker peaked at 5.5 GB and the host, judging its
# answers, at 5.0 GB). A call below MEMORY_CHECKED bytes of need is sent without reading the machine's.
CALL_HOLDS = 20
MEMORY_CHECKED = 1e9


class MemoryBound(Wrapper):
    """A call that would need more memory than this machine has available is not sent: its answer is
    UNSUPPORTED (here: a gap of this machine, not a finding of any backend; --strict fails it) with a
    message naming the call, its largest input and the sizes, instead of a worker or the host killed by
    the kernel midway."""

    def send(self, backend, call):
        why = too_big(call)
        return Ticket(backend, call, answer=Answer(Status.UNSUPPORTED, {"message": why}, [])) if why else \
            self.inner.send(backend, call)


def small(call):
    """Whether `call` (a NodeCall) needs too little memory for too_big to look at the machine's."""
    return CALL_HOLDS * _sent_bytes(call) < MEMORY_CHECKED


def _sent_bytes(call):
    return sum(a.nbytes for a in call.arrays() if a is not None)


def too_big(call):
    """Why `call` (a NodeCall) cannot run in the memory this machine has available, or None."""
    nbytes = _sent_bytes(call)
    need = CALL_HOLDS * nbytes
    if need < MEMORY_CHECKED:
        return None
    from irtrace.envs.machine import available_bytes, size_text
    available = available_bytes()
    if available is None or need <= available:
        return None
    name, a = max(((n, a) for n, a in call.named_arrays() if a is not None), key=lambda na: na[1].nbytes)
    return (f"{call.mode} of node {call.spec.name} needs about {size_text(need)} of memory and "
            f"{size_text(available)} is available: it sends {size_text(nbytes)} (the largest, {name}, "
            f"{'x'.join(map(str, a.shape))} {a.dtype}, {size_text(a.nbytes)}), held about {CALL_HOLDS} times by the "
            f"float64 oracle and by the host judging its answers")
