"""The replay API, the one way into a replay: `irtrace.replay.run(bundle, ReplayOptions) -> Report`.
The CLI, the demo, tests and benchmarks call it."""
import logging
import math
import os
import threading
from dataclasses import dataclass, field, replace

from irtrace import compare
from irtrace.errors import IrtraceError
from irtrace.replay import backends as registry

log = logging.getLogger(__name__)


AUTO = "auto"  # --jobs auto: auto_jobs decides


@dataclass(frozen=True)
class ReplayOptions:
    """What to replay and how. Defaults: the reference (itself judged against the float64 oracle, which
    arbitrates whenever it is available) and onnxruntime; all three modes; every node; as many worker
    sets as --jobs auto picks (one for a small bundle or a cached replay); 60 s per node and backend;
    verdicts from the float64 oracle (atol/rtol set: fixed tolerances instead); no chained run; each
    backend's alternative formulations tried on the nodes where its op failed (verify_workarounds);
    chained runs without them."""
    backends: tuple = ("torch", "onnxruntime")
    modes: tuple = ("fwd", "vjp", "vjp2")
    nodes: str = None              # regex on node names
    ops: tuple = None              # op types
    jobs: object = AUTO            # auto_jobs decides for the bundle (1 unless a large first replay in vjp2); or N
    timeout: float = 60.0
    atol: float = None
    rtol: float = None
    strict: bool = False           # UNSUPPORTED counts as a finding
    chained: bool = False
    loss: str = "bundle"           # chained loss: "bundle" or "grad-penalty"
    form: str = "canonical"        # "original": ONNX-executing backends get the pre-canonical attributes
    cache: bool = True             # keep and reuse the reference's and oracle's results beside the bundle
    cache_size: object = None      # the most BUNDLE.cache/ keeps after the replay: bytes, "2GB", "1.5x" the bundle
    verify_workarounds: bool = True  # try each backend's alternative formulations where its op failed
    workarounds: bool = False      # chained: also run each backend with every verified workaround applied
    batch: bool = True             # jobs 1: calls sent ahead in batches (replay/batch.py); False: one at a time
    workarounds_everywhere: bool = False  # verify alternatives on every node of their op, not only failing ones
    # an Executor that runs the calls instead of this machine's workers (RayExecutor), or a callable
    # executor(the replay's Executor) -> the Executor it runs with (irtrace/replay/execute.py): a class
    # that wraps another is one (tests/recording_executor.py); None: the local workers
    executor: object = None

    @classmethod
    def parse(cls, backend, modes, ops=None, **kw):
        """ReplayOptions from the CLI's comma-separated texts (--backend, --modes, --ops) and the other fields."""
        from irtrace.replay.plan import parse_modes
        return cls(backends=tuple(registry.parse_list(backend)), modes=tuple(parse_modes(modes)),
                   ops=tuple(o.strip() for o in ops.split(",") if o.strip()) if ops is not None else None, **kw)

    def policy(self):
        if self.atol is None and self.rtol is None:
            return compare.Policy()
        return compare.Policy(atol=self.atol if self.atol is not None else 0.0,
                              rtol=self.rtol if self.rtol is not None else 0.0, fixed=True)

    def check(self):
        """The options, refused (IrtraceError) before anything runs when they cannot give a replay: an
        unknown backend, --jobs below 1 or over max_jobs(), a timeout that is not a positive number a lock
        can wait, a --cache-size that is not a size, and a replay that would test nothing (nothing_tested)."""
        for n in self.backends:
            registry.get(n)
        if not self.backends:
            raise IrtraceError("no backend to replay on")
        if self.jobs == AUTO:
            pass
        elif not isinstance(self.jobs, int) or isinstance(self.jobs, bool):
            raise IrtraceError(f"--jobs {self.jobs!r}: must be a whole number or {AUTO}")
        elif self.jobs < 1:
            raise IrtraceError(f"--jobs {self.jobs}: must be at least 1")
        elif self.jobs > max_jobs():
            raise IrtraceError(f"--jobs {self.jobs}: more than {max_jobs()} (4 per CPU; each job starts a worker "
                               f"per backend)")
        if not (isinstance(self.timeout, (int, float)) and math.isfinite(self.timeout)
                and 0 < self.timeout <= threading.TIMEOUT_MAX):
            raise IrtraceError(f"--timeout {self.timeout!r}: not a positive number of seconds up to "
                               f"{threading.TIMEOUT_MAX:.4g}")
        if self.cache_size is not None:
            from irtrace.replay.cache import cache_limit
            if not self.cache:
                raise IrtraceError("--cache-size goes with the cache; leave out --no-cache")
            cache_limit(self.cache_size, None)
        if self.ops is not None and not self.ops:
            raise IrtraceError("--ops names no op type; give one or more, comma-separated (e.g. Conv,Pad), "
                               "or leave --ops out for every op")
        if not self.modes and not self.chained:
            from irtrace.replay.plan import MODES
            raise IrtraceError(f"--modes {','.join(self.modes)!r} names no mode and --chained is off: nothing "
                               f"would be tested; choose from {', '.join(MODES)}")
        why = nothing_tested(self)
        if why:
            raise IrtraceError(why)
        if self.workarounds and not self.chained:
            raise IrtraceError("--workarounds applies the verified workarounds in the chained run: add --chained")
        if self.workarounds and not self.verify_workarounds:
            raise IrtraceError("--workarounds applies the workarounds the replay verifies: "
                               "it cannot go with --no-verify-workarounds")
        return self


MAX_JOBS_PER_CPU = 4


# --jobs auto starts a second set of workers only for a bundle whose values are at least this large per
# set of workers a job starts (the reference and oracle, and each backend under test): the oracle's compute
# grows with the values, and each extra job starts every backend again (MegEngine's, Paddle's, OneFlow's,
# TensorFlow's imports: seconds each) and gives up sending calls in batches. benchmarks/first_run.py
# measures both sides of the threshold (docs/options.md, --jobs): a 538 MB bundle on torch gains from a second
# job, a 0.7 MB one and a 102 MB one on the four frameworks lose.
AUTO_MIN_BYTES = 64e6


def auto_jobs(bundle, backends=(), cache=True, modes=("fwd", "vjp", "vjp2")):
    """--jobs auto for `bundle` replayed on `backends` in `modes`: 1 where the reference's and oracle's answers
    are cached and `cache` reads them (little compute left to spread), where vjp2 is not among the modes (the
    float64 oracle's double backward is what a second worker set repays: docs/options.md, --jobs), or where
    the values are under AUTO_MIN_BYTES per set of workers (one, and one per backend under test); else one
    job per CPU, as many as the available memory holds (a job's workers need about CALL_HOLDS times its
    largest value: the oracle's float64 copies)."""
    from irtrace.envs.machine import available_bytes
    from irtrace.replay.cache import ResultCache
    from irtrace.replay.execute import CALL_HOLDS
    sizes = [bundle.values.extent(n)[1] for n in bundle.values.keys()]
    cpus = os.cpu_count() or 1
    under_test = [b for b in backends if registry.get(b).role == registry.UNDER_TEST]
    if cpus <= 1 or "vjp2" not in modes or sum(sizes) < AUTO_MIN_BYTES * (1 + len(under_test)):
        return 1
    if cache and ResultCache(bundle, ()).warm():
        return 1
    available, per_job = available_bytes(), CALL_HOLDS * max(sizes)
    by_memory = int(available // per_job) if available is not None and per_job else cpus
    return max(1, min(cpus, by_memory))


def max_jobs():
    """The most --jobs a replay takes: MAX_JOBS_PER_CPU per CPU (each job starts a worker per backend)."""
    return MAX_JOBS_PER_CPU * (os.cpu_count() or 1)


def nothing_tested(options):
    """Why a replay with `options` would judge nothing, or None. One rule: a replay must name a backend
    that is judged (the reference, or one under test; the float64 oracle arbitrates every comparison
    and is not itself tested) in a mode it computes, or run --chained with a backend under test."""
    modes = list(options.modes)
    tested = [b for b in options.backends if registry.get(b).role != registry.ORACLE
              and set(modes) & set(registry.get(b).modes)]
    chained = options.chained and any(registry.get(b).role == registry.UNDER_TEST for b in options.backends)
    if tested or chained:
        return None
    said = []
    for b in options.backends:
        info = registry.get(b)
        said.append(f"{b} arbitrates, it is not tested" if info.role == registry.ORACLE else
                    f"{b} computes {','.join(info.modes) or 'no mode'}")
    return (f"--backend {','.join(options.backends)} --modes {','.join(modes) or repr('')}"
            f"{'' if options.chained else ' (and no --chained)'}: nothing would be tested ({'; '.join(said)}); "
            f"name the reference or a backend under test, and a mode it computes (see `irtrace backends`)")


@dataclass
class Report:
    """What a replay found: `replay` (the isolated Replay of irtrace.replay.engine: every node's Results),
    the options it ran with, and the chained runs when asked for (and their loss). The report files are
    written from it by irtrace.report (write.write; folder.replay_into replays into a folder)."""
    replay: object
    options: ReplayOptions
    chained: list = field(default_factory=list)
    loss: str = None


def run(bundle, options, progress=None, done=None, on_node=None):
    """Replay `bundle` (an opened Bundle, or the path of one) as `options` (ReplayOptions) say; returns a
    Report. `done`: node name -> NodeReport of an earlier run of the same replay (not run again);
    `on_node(NodeReport)` is called as each node completes (a journal appends it); `progress()` after
    each node."""
    from irtrace.replay.worker import discard_early, launch_early
    try:
        options.check()  # every option, before the bundle is read or anything written
        # the backends under test start importing their frameworks while the bundle loads (the reference
        # and the oracle start later, and only when their answers are not cached)
        if not getattr(options.executor, "elsewhere", False):
            launch_early([registry.get(n) for n in options.backends if registry.get(n).role == registry.UNDER_TEST])
        if not hasattr(bundle, "model"):
            from irtrace.store import load
            bundle = load(bundle)
        if options.jobs == AUTO:
            options = replace(options, jobs=auto_jobs(bundle, options.backends, options.cache, options.modes))
            log.info("--jobs auto: %d", options.jobs)
        return _run(bundle, options, progress, done, on_node)
    finally:
        discard_early()  # those a bad bundle or option left unused (the CLI launches them even earlier)


def _run(bundle, options, progress=None, done=None, on_node=None):
    from irtrace.replay.engine import replay
    rep = replay(bundle, options, progress, done=done, on_node=on_node)
    report = Report(rep, options)
    if options.chained:
        from irtrace.replay.chained import chained_replay
        from irtrace.replay.execute import WorkerPool
        from irtrace.replay.worker import start_wait
        pool = WorkerPool(start_wait(options.timeout))
        try:
            # the oracle arbitrates the chains; it is not one of the backends under test there
            # and the reference is what every chain is compared with: a chained torch row would be torch vs torch
            under_test = [n for n in options.backends if registry.get(n).role == registry.UNDER_TEST]
            report.chained, report.loss = chained_replay(bundle, under_test, pool, loss=options.loss,
                                                         policy=options.policy(), isolated=rep,
                                                         workarounds=options.workarounds)
        finally:
            pool.close()
    return report
