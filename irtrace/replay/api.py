"""The replay API: options in, an Outcome out. The CLI, the demo, tests and benchmarks call this."""
from dataclasses import dataclass, field

from irtrace import compare
from irtrace.errors import IrtraceError
from irtrace.replay import backends as registry


@dataclass(frozen=True)
class ReplayOptions:
    """What to replay and how. Defaults: the reference (itself judged against the float64 oracle, which
    arbitrates whenever it is available) and onnxruntime; all three modes;
    every node; one worker set; 60 s per node and backend; verdicts from the float64 oracle
    (atol/rtol set: fixed tolerances instead); no chained run; each backend's alternative formulations
    tried on the nodes where its op failed (verify_workarounds); chained runs without them."""
    backends: tuple = ("torch", "onnxruntime")
    modes: tuple = ("fwd", "vjp", "vjp2")
    nodes: str = None              # regex on node names
    ops: tuple = None              # op types
    jobs: int = 1
    timeout: float = 60.0
    atol: float = None
    rtol: float = None
    strict: bool = False           # UNSUPPORTED counts as a finding
    chained: bool = False
    loss: str = "bundle"           # chained loss: "bundle" or "grad-penalty"
    form: str = "canonical"        # "original": ONNX-executing backends get the pre-canonical attributes
    cache: bool = True             # keep and reuse the reference's and oracle's results beside the bundle
    verify_workarounds: bool = True  # try each backend's alternative formulations where its op failed
    workarounds: bool = False      # chained: also run each backend with every verified workaround applied
    batch: bool = True             # jobs 1: calls sent ahead in batches (replay/batch.py); False: one at a time

    def policy(self):
        if self.atol is None and self.rtol is None:
            return compare.Policy()
        return compare.Policy(atol=self.atol if self.atol is not None else 0.0,
                              rtol=self.rtol if self.rtol is not None else 0.0, fixed=True)

    def check(self):
        for n in self.backends:
            registry.get(n)
        if not self.backends:
            raise IrtraceError("no backend to replay on")
        if self.jobs < 1:
            raise IrtraceError(f"--jobs {self.jobs}: must be at least 1")
        if self.workarounds and not self.chained:
            raise IrtraceError("--workarounds applies the verified workarounds in the chained run: add --chained")
        if self.workarounds and not self.verify_workarounds:
            raise IrtraceError("--workarounds applies the workarounds the replay verifies: "
                               "it cannot go with --no-verify-workarounds")
        return self


@dataclass
class Outcome:
    """An isolated Replay (irtrace.replay.engine.Replay) and, when asked for, the chained runs."""
    replay: object
    options: ReplayOptions
    chained: list = field(default_factory=list)
    loss: str = None


def run(bundle, options, progress=None, done=None, on_node=None):
    """Replay `bundle` (an opened Bundle) as `options` say; returns an Outcome. `done`: node name ->
    NodeReport of an earlier, interrupted run (not run again); `on_node` is called with each node's
    NodeReport as it completes."""
    from irtrace.replay.engine import replay
    from irtrace.replay.workarounds import verify
    options.check()
    policy = options.policy()
    rep = replay(bundle, list(options.backends), list(options.modes), nodes_regex=options.nodes,
                 ops=list(options.ops) if options.ops else None, jobs=options.jobs, timeout=options.timeout,
                 policy=policy, progress=progress, form=options.form, done=done, on_node=on_node,
                 cache=options.cache, after=verify if options.verify_workarounds else None, batch=options.batch)
    outcome = Outcome(rep, options)
    if options.chained:
        from irtrace.replay.chained import chained_replay
        from irtrace.replay.engine import WorkerPool
        pool = WorkerPool()
        try:
            # the oracle arbitrates the chains; it is not one of the backends under test there
            # and the reference is what every chain is compared with: a chained torch row would be torch vs torch
            under_test = [n for n in options.backends if registry.get(n).role == registry.UNDER_TEST]
            outcome.chained, outcome.loss = chained_replay(bundle, under_test, pool, loss=options.loss,
                                                           policy=policy, isolated=rep,
                                                           workarounds=options.workarounds)
        finally:
            pool.close()
    return outcome
