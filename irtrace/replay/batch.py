"""The calls of a backend under test sent ahead in batches: one request frame for many nodes, the
next batch computing in the worker while the host judges this one (a pipeline, not a round trip per
call). The answers are the worker's own per-node replies (backends/_runtime/worker.py `batch`), so a
replay judges exactly what it would have judged one call at a time; the inputs travel as references
into the memory-mapped bundle (backends/_runtime/wire.py), not as copies.

Whatever a batch cannot answer goes back to one call at a time, where a crash, a hang and an error
are attributed to their node as before: the rest of a batch whose worker crashed or hung (and the
batch sent behind it), and a node whose reply is an error (run again alone, so its message carries
what the framework wrote to stderr meanwhile, as a call of its own would). onnxruntime computes a
batch's forward in one session (backends/onnxruntime/worker.py run_many): its first reply comes when
the whole batch is done, within the per-call timeout (else the batch is run node by node)."""
import collections

from backends._runtime.wire import Status
from irtrace.replay.execute import answer_of
from irtrace.replay.worker import WorkerFailed

MAX_CALLS = 64            # nodes per batch
MAX_BYTES = 64 << 20      # input bytes per batch (what the worker maps at once)


def key(call):
    return call.spec.name, call.mode, call.part, call.proto


def _split(calls):
    chunks, size = [[]], 0
    for call in calls:
        n = sum(int(a.nbytes) for a in call.arrays() if a is not None)
        if chunks[-1] and (len(chunks[-1]) >= MAX_CALLS or size + n > MAX_BYTES):
            chunks.append([])
            size = 0
        chunks[-1].append(call)
        size += n
    return [c for c in chunks if c]


class Batches:
    """take(call) -> the Answer of `call` on `backend` from a batch, or None: then the
    caller sends it alone (nothing of this backend is in flight by then). `calls` in the order the
    replay takes them. The worker answers each call of a batch in a frame of its own as soon as it is
    computed, so each has the replay's per-call timeout, and an interrupted replay keeps every node
    answered before it."""

    def __init__(self, pool, backend, calls, timeout):
        self.pool, self.backend, self.timeout = pool, backend, timeout
        self.chunks = _split(calls)
        self.where = {key(c): i for i, chunk in enumerate(self.chunks) for c in chunk}
        self.answers = {}
        self.in_flight = collections.deque()   # [chunk index, replies read] of the batches sent
        self.sent = 0                          # batches sent so far
        self.crashes = 0                       # worker restarts a batch caused (each node alone says its own)
        self._deaths = []                      # the WorkerFailed of each death counted in `crashes`

    def take(self, call):
        k = key(call)
        i = self.where.pop(k, None)
        if i is None:
            self.drain()
            return None
        while self.sent <= i:
            self._send_next()
        if self.sent == i + 1 and self.sent < len(self.chunks):
            self._send_next()  # the worker computes the next batch while the host judges this one
        while k not in self.answers and self.in_flight and self.in_flight[0][0] <= i:
            self._receive()
        answer = self.answers.pop(k, None)
        if answer is None:
            self.drain()
        return answer

    def drain(self):
        while self.in_flight:
            self._receive()

    def _send_next(self):
        chunk = self.chunks[self.sent]
        messages, arrays, counts = [], [], []
        for call in chunk:
            messages.append(call.message())
            sent = call.arrays()
            counts.append(len(sent))
            arrays += sent
        ids = self.pool.get(self.backend).send({"kind": "batch", "mode": chunk[0].mode
                                                if len({c.mode for c in chunk}) == 1 else None,
                                                "calls": messages, "counts": counts}, arrays, background=True)
        self.in_flight.append([self.sent, 0, ids])
        self.sent += 1

    def _receive(self):
        """Read the next reply of the oldest batch in flight (each reply is matched to its call by id)."""
        at = self.in_flight[0]
        index, k, ids = at
        call = self.chunks[index][k]
        worker = self.pool.get(self.backend)
        try:
            reply, out = worker.receive(self.timeout, ids[k])
        except WorkerFailed as death:
            # the worker died (restarted on the next call, unless it cannot start at all), and with it the
            # rest of this batch: those nodes are run alone. A batch sent to the process that died fails
            # the same way when its turn comes; one sent to a restarted process is answered as usual.
            if not worker.dead and all(death is not seen for seen in self._deaths):
                self._deaths.append(death)  # one death, one restart: however many batches it took with it
                self.crashes += 1
            worker.forget(ids[k + 1:])
            self.in_flight.popleft()
            return
        at[1] += 1
        if at[1] == len(self.chunks[index]):
            self.in_flight.popleft()
        if reply.get("status") == Status.ERROR:
            return  # asked again alone: what the framework wrote to stderr meanwhile belongs to it
        self.answers[key(call)] = answer_of(reply, out)
