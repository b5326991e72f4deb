"""The replay loop: every selected node alone on the bundle's recorded inputs, per backend and mode, in
three stages: plan.py (what to ask), execute.py (an Executor runs each call: the workers, wrapped by
the cache of the reference's and oracle's answers and by batches sent ahead) and judge.py (the
answers give Results). Reference results: fwd is the bundle's recorded value; vjp and vjp2 come from
the reference backend run on the same isolated inputs. The float64 oracle arbitrates."""
import contextlib
import functools
import gc
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

from irtrace import compare
from irtrace.replay import backends as registry
from irtrace.replay.batch import Batches
from irtrace.replay.cache import ResultCache, cache_limit
from irtrace.replay.execute import Batching, Caching, Executor, LocalExecutor, MemoryBound, small, too_big
from irtrace.replay.judge import gather, judge_node, judged_before, unjudged
from irtrace.replay.plan import MODES, ORACLE, REFERENCE, parse_modes, plan, recorded_outputs  # noqa: F401


@dataclass
class NodeReport:
    name: str
    op_type: str
    domain: str
    index: int
    source: dict
    results: list = field(default_factory=list)
    skipped: list = field(default_factory=list)   # {"mode", "output", "backend" (None: all), "reason"}
    # (the counts of results and skipped it was made from, to_json()'s strict JSON text), as
    # irtrace.report.json_report.node_text made it: the journal's line, report.json's and report.html's node
    made_text: tuple = field(default=None, repr=False, compare=False)

    def to_json(self):
        return {"name": self.name, "op_type": self.op_type, "domain": self.domain, "index": self.index,
                "source": self.source, "results": [r.to_json() for r in self.results], "skipped": self.skipped}

    @classmethod
    def from_json(cls, d):
        return cls(d["name"], d["op_type"], d["domain"], d["index"], d["source"],
                   [compare.Result.from_json(r) for r in d["results"]], d["skipped"])


@dataclass
class Replay:
    bundle: object
    backends: list
    modes: list
    nodes: list
    elapsed_s: float
    policy: compare.Policy
    versions: dict
    restarts: dict
    # backend -> node name -> what each of its alternative formulations gives there (replay/workarounds.py)
    workarounds: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Session:
    """What a replay judges with, for work done on its nodes once they are all done (verified
    workarounds): the bundle, the backends, the Executor, the Policy, whether the oracle arbitrates,
    the ResultCache (or None) and the Plan."""
    bundle: object
    backends: list
    executor: object
    policy: compare.Policy
    use_oracle: bool
    cache: object
    plan: object


def replay(bundle, options, progress=None, done=None, on_node=None):
    """Replay the nodes of `bundle` that ReplayOptions `options` select; returns a Replay. `done`: node
    name -> NodeReport already computed (a resumed run: not run again); `on_node(NodeReport)` is called
    as each node completes (the journal appends it); `progress()` after each node."""
    t0 = time.perf_counter()
    planned = plan(bundle, options)
    backends, policy = list(options.backends), options.policy()
    use_oracle = registry.get(ORACLE).unavailable() is None
    roles = [REFERENCE] + ([ORACLE] if use_oracle else [])
    cache = ResultCache(bundle, roles, limit=None if options.cache_size is None else
                        cache_limit(options.cache_size, bundle.path), behind=True) if options.cache else None
    done = dict(done or {})
    todo = [it for it in planned.selected if it[1].name not in done]
    nodes = [done[s.name] for _, s in planned.selected if s.name in done]
    local = options.executor if isinstance(options.executor, Executor) else LocalExecutor(options.timeout)
    threads = None
    try:
        local.open(options.timeout)
        jobs = max(options.jobs, local.concurrency())
        executor = _compose(local, planned, todo, cache, options, roles)
        judge = functools.partial(_run_node, planned, executor, policy, use_oracle, cache, progress)
        with _survivors_frozen() as survived:
            if jobs <= 1:
                for item in todo:
                    nodes.append(judge(item))
                    bundle.values.release()  # the node's recorded values leave resident memory
                    if on_node:
                        on_node(nodes[-1])
                    survived()
            else:
                threads = ThreadPoolExecutor(jobs)
                for future in as_completed([threads.submit(judge, item) for item in todo]):
                    nodes.append(future.result())
                    if on_node:
                        on_node(nodes[-1])
                    survived()
        if hasattr(executor, "drain"):
            executor.drain()  # nothing in flight once every node is done (workarounds call workers themselves)
        nodes.sort(key=lambda n: n.index)
        tried = {}
        if options.verify_workarounds:
            from irtrace.replay.workarounds import verify
            tried = verify(Session(bundle, backends, executor, policy, use_oracle, cache, planned), nodes,
                           everywhere=options.workarounds_everywhere)
        versions = _versions(executor, cache, backends)
        restarts = {name: 0 for name in dict.fromkeys(roles + backends)}
        for name, n in executor.restarts().items():
            restarts[name] = restarts.get(name, 0) + n
    except BaseException:
        local.kill()  # interrupted (or broken): workers end now, with irtrace, not after their node
        raise
    finally:
        if threads is not None:
            threads.shutdown(wait=True, cancel_futures=True)
        local.close()
        if cache is not None:
            cache.close()  # what was put is written (an interrupted replay's answers are kept too)
    return Replay(bundle, backends, list(options.modes), nodes, time.perf_counter() - t0, policy, versions,
                  restarts, tried)


@contextlib.contextmanager
def _survivors_frozen():
    """Yields survived(): the objects alive then (the bundle's graph and specs, the cache's pack, the modules, each
    node's report as it completes) live until the replay ends: frozen (gc.freeze, a constant-time move), the
    cyclic collector does not walk them again and again, only what the node in progress makes. A 3000-node replay
    served from the cache spent 80 ms (27 us a node) in the collector, which found about a thousand objects in all
    (benchmarks/fixed_cost.py --without collector). Anything frozen that becomes garbage is still freed by its
    count; a cycle waits for the end of the loop. Unfrozen then, unless the caller had frozen objects itself
    (gc.unfreeze cannot tell its from ours)."""
    frozen = gc.get_freeze_count()
    gc.freeze()
    try:
        yield gc.freeze
    finally:
        if not frozen:
            gc.unfreeze()


def _versions(executor, cache, backends):
    """backend -> its framework's versions: its worker's, else the cache's (a reference or oracle that was
    not started), else asked of a worker started now (a resumed run whose nodes were all done already:
    no worker has said them, and the report must say what the first run said)."""
    from irtrace.replay.worker import WorkerFailed
    versions = executor.versions()
    if cache is not None:
        versions = {**cache.versions(), **versions}
    unsaid = [b for b in backends if b not in versions]
    for b in unsaid:
        try:
            executor.modes(b)  # its worker's hello: the versions
        except WorkerFailed:
            pass  # a backend that cannot start says none, as in the first run
    if unsaid:
        versions = {**versions, **executor.versions()}
    if cache is not None:
        cache.replayed(versions)
    return versions


def _compose(local, planned, todo, cache, options, roles):
    """The Executor of a replay: `local` runs the calls (this machine's workers, started now for one
    worker set, in batches sent ahead; or the Executor options.executor gives, e.g. a RayExecutor), the
    reference's and oracle's answers from the cache, calls that cannot fit in memory refused, then
    `options.executor` around it all when it is a wrapper."""
    under_test = [b for b in planned.backends if b not in (ORACLE, REFERENCE)]
    executor = local
    if isinstance(local, LocalExecutor) and options.jobs <= 1 and todo:
        warm = cache is not None and cache.warm()  # with answers cached, the roles start only when one is missing
        local.prestart(list(dict.fromkeys(([] if warm else roles) + under_test)))
        if options.batch:
            ahead = {b: [planned.form(c, local.native(b)) for _, spec in todo if b in planned.on(spec)
                         for c in planned.calls(spec)[0] if c.mode in local.modes(b)] for b in under_test}
            # every node's call goes to both roles (gather), but what the cache holds; a call large enough to have
            # its memory checked goes alone, as it did (a batch's answers computed ahead are held here until judged)
            for role in [] if warm else roles:
                ahead[role] = [c for _, spec in todo for c in planned.calls(spec)[0] if c.mode in local.modes(role)
                               and small(c) and not (cache is not None and cache.has(c, role))]
            # a call MemoryBound refuses is never asked of a batch: not sent in one either
            executor = Batching(local, {b: Batches(local.pool, b, [c for c in calls if not too_big(c)],
                                                   options.timeout) for b, calls in ahead.items()})
    if cache is not None:
        executor = Caching(executor, cache)
    executor = MemoryBound(executor)  # a call that cannot fit here is its ERROR, not a worker killed midway
    wraps = options.executor is not None and not isinstance(options.executor, Executor)
    return options.executor(executor) if wraps else executor


def _run_node(planned, executor, policy, use_oracle, cache, progress, item):
    """The NodeReport of one node: each of its calls gathered and judged (or its rows as judged before)."""
    index, spec = item
    bundle = planned.bundle
    node = NodeReport(spec.name, spec.op_type, spec.domain, index, bundle.node_source(spec.name))
    on = planned.on(spec)
    node.skipped += planned.skipped(spec)
    for call in planned.calls(spec)[0]:
        off = call.off()
        recorded = recorded_outputs(bundle, call)
        rows = judged_before(call, on, cache, policy, off, recorded is not None)
        if rows is None:
            forms = {b: planned.form(call, executor.native(b)) for b in on} \
                if spec.name in planned.originals else None
            got = gather(executor, call, recorded, on, use_oracle, forms)
            rows = judge_node(executor, call, got, policy, off_path=off, cache=cache)
            node.skipped += [s for s in [unjudged(call, got)] if s]
        node.results.extend(rows)
    planned.forget(spec)
    if progress:
        progress()
    return node
