"""Subcommands beyond export/inspect: replay, backends, demo. Parsing only; the work is the API."""
import argparse
import contextlib
import math
import os
import sys
import threading
from pathlib import Path

from irtrace.errors import IrtraceError, printable


def seconds(text):
    """A finite, positive number of seconds (nan would turn a timeout off, inf never fires)."""
    value = _number(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite, positive number of seconds")
    if value > threading.TIMEOUT_MAX:  # a lock's wait refuses it (OverflowError)
        raise argparse.ArgumentTypeError(f"{text!r} is over the longest wait this platform allows "
                                         f"({threading.TIMEOUT_MAX:.4g} s)")
    return value


def tolerance(text):
    """A finite tolerance >= 0."""
    value = _number(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite tolerance >= 0")
    return value


def count(text):
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def jobs(text):
    """An integer from 1 to MAX_JOBS_PER_CPU x the CPUs here (each job runs a worker per backend), or
    "auto" (irtrace.replay.api.auto_jobs)."""
    if text == "auto":  # irtrace.replay.api.AUTO, the default: parsing it imports no replay module (their 0.27 s of
        return text     # imports would come before the workers are launched early: _replay)
    from irtrace.replay.api import max_jobs
    value = count(text)
    if value > max_jobs():
        raise argparse.ArgumentTypeError(f"{text!r} is more than {max_jobs()} ({max_jobs() // os.cpu_count()} per "
                                         f"CPU; each job starts a worker per backend)")
    return value


def duration(text):
    """Seconds from '300', '90s', '20m' or '1h'."""
    unit = {"s": 1, "m": 60, "h": 3600}.get(text[-1:].lower()) if text else None
    value = seconds(text[:-1] if unit else text)
    return value * (unit or 1)


def keep_warm(text):
    """duration(), saying where a bad value came from when it is $IRTRACE_KEEP_WARM's (the option's default)."""
    try:
        return duration(text)
    except argparse.ArgumentTypeError as e:
        if text == os.environ.get("IRTRACE_KEEP_WARM"):
            raise argparse.ArgumentTypeError(f"{e} (from the environment's IRTRACE_KEEP_WARM)") from None
        raise


def _number(text):
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def add_commands(sub):
    for add in (_add_replay, _add_repro, _add_fuzz, _add_tools, _add_port):
        add(sub)


def _add_replay(sub):
    r = sub.add_parser("replay", help="replay every node alone on each backend and compare")
    r.add_argument("bundle")
    r.add_argument("--backend", default="torch,onnxruntime",
                   help="comma-separated backends (default torch,onnxruntime; the reference, torch, is judged "
                        "against the float64 oracle, which arbitrates every comparison); see `irtrace backends`")
    r.add_argument("--modes", default="fwd,vjp,vjp2", help="fwd, vjp, vjp2 (default all three)")
    r.add_argument("-o", "--out", help="output folder for report.json / report.html (default BUNDLE.replay)")
    r.add_argument("--jobs", type=jobs, default="auto",
                   help="parallel workers per backend, at most 4 per CPU (default auto: one per CPU where "
                        "the bundle's values are large enough to repay starting them and memory allows, else 1)")
    r.add_argument("--executor", default="local", choices=["local", "ray"],
                   help="ray: run the nodes on Ray workers (pip install 'irtrace[ray]'): a cluster at --address, "
                        "else one started on this machine; see docs/scale.md")
    r.add_argument("--address", help="with --executor ray: the address of a running Ray cluster (ray start's)")
    r.add_argument("--ray-workers", type=count, metavar="N",
                   help="with --executor ray: Ray workers (default one per CPU of the cluster), a node in flight on each")
    r.add_argument("--nodes", help="only nodes whose name matches this regex (Python's re, searched in each "
                                   "name; a pattern that takes more than 10 s on the graph's names is refused)")
    r.add_argument("--ops", help="only these op types, comma-separated (e.g. Conv,Pad)")
    r.add_argument("--timeout", type=seconds, default=60.0,
                   help="seconds per node and backend before TIMEOUT (60); a worker's start-up (its framework's "
                        "import) is waited on as long, but at least 30 s")
    r.add_argument("--atol", type=tolerance, help="fixed absolute tolerance (overrides the oracle)")
    r.add_argument("--rtol", type=tolerance, help="fixed relative tolerance (overrides the oracle)")
    r.add_argument("--strict", action="store_true",
                   help="UNSUPPORTED fails too, and so does a node no backend could judge (as when $CI is set)")
    r.add_argument("--form", default="canonical", choices=["canonical", "original"],
                   help="original: onnxruntime/onnxref get each node's attributes as before canonicalization "
                        "(e.g. auto_pad), to test their own handling of them")
    r.add_argument("--chained", action="store_true",
                   help="also run the whole graph chained on each backend: error growth, parameter gradients")
    r.add_argument("--loss", default="bundle", choices=["bundle", "grad-penalty"],
                   help="chained loss: the bundle's (default) or a gradient penalty (double backward throughout)")
    r.add_argument("--workarounds", action="store_true",
                   help="with --chained: also run each backend with every verified workaround (an alternative "
                        "formulation that matched on a failing node in every mode) in place of the failing op")
    r.add_argument("--no-verify-workarounds", dest="verify_workarounds", action="store_false",
                   help="do not try the backends' alternative formulations on the nodes where an op failed "
                        "(default: try them; each finding then lists those that match)")
    r.add_argument("--no-cache", dest="cache", action="store_false",
                   help="compute the reference's and oracle's results again (default: reuse BUNDLE.cache/)")
    r.add_argument("--cache-size", metavar="SIZE",
                   help="the most BUNDLE.cache/ keeps after the replay, the entries least recently used removed "
                        "first: bytes (500MB, 2GB) or a multiple of the bundle's size (1.5x); default: no limit")
    r.add_argument("--keep-warm", type=keep_warm, metavar="DURATION", default=os.environ.get("IRTRACE_KEEP_WARM"),
                   help="keep each backend's fork server, its framework imported, running this long unused after "
                        "the replay (90s, 20m, 1h; default $IRTRACE_KEEP_WARM, else off): a later replay with "
                        "--keep-warm starts its workers from it in milliseconds instead of importing the framework "
                        "again. Each holds its framework in memory; see docs/options.md")
    r.add_argument("--no-batch", dest="batch", action="store_false",
                   help="send each node's call to a backend alone and wait for it (default: in batches sent "
                        "ahead, inputs mapped from the bundle; the verdicts are the same)")
    r.add_argument("--resume", action="store_true",
                   help="keep the nodes an interrupted run of the same replay wrote to OUT/journal.jsonl; "
                        "run only the rest")
    r.add_argument("--model-explorer", action="store_true",
                   help="also write OUT/model_explorer/<backend>.{verdict,max_rel,finding}.json: the verdicts as "
                        "Model Explorer node data over the bundle's graph.onnx")
    r.add_argument("--format", default="text", choices=["text", "json"],
                   help="json: instead of the table, one JSON object (the summary counts, the findings, the "
                        "report's path) on stdout, for scripts")
    r.add_argument("--repro", metavar="DIR", nargs="?", const="repros",
                   help="also write repros for the findings (default folder repros/)")
    r.set_defaults(func=_replay)


def _add_repro(sub):
    rp = sub.add_parser("repro", help="write a shrunk single-op repro (repro.py, issue.md, data.npz) per finding")
    rp.add_argument("report", help="OUT/report.json of `irtrace replay` (with --versions: a folder of repros)")
    rp.add_argument("--finding", action="append", help="only this finding id (repeatable)")
    rp.add_argument("-o", "--out", default="repros", help="output folder (default repros/)")
    rp.add_argument("--budget", type=count, default=300, help="shrink steps per finding (default 300)")
    rp.add_argument("--no-anonymize", dest="anonymize", action="store_false",
                    help="name the model's module and file:line in issue.md (default: omitted)")
    rp.add_argument("--versions", metavar="all|V1,V2",
                    help="instead: re-run each repro script in the folder given on each declared release of its "
                         "backend (all, or the versions listed); writes versions.json beside each, updates issue.md; "
                         "exit 1 while one reproduces somewhere")
    rp.set_defaults(func=_repro)


def _add_fuzz(sub):
    fz = sub.add_parser("fuzz", help="single-op cases drawn from the ONNX schemas, replayed on backends; "
                                     "distinct bugs kept in a corpus with their repros")
    fz.add_argument("--backend", help="comma-separated backends under test (see `irtrace backends`)")
    fz.add_argument("--ops", help="only these op types, comma-separated (default: every op the generator draws "
                                  "that a backend declares)")
    fz.add_argument("--modes", default="fwd,vjp,vjp2", help="fwd, vjp, vjp2 (default all three)")
    fz.add_argument("--time", type=duration, help="stop after this long (e.g. 300, 90s, 20m, 1h)")
    fz.add_argument("--cases", type=count, help="stop after this many cases (default 100 when --time is absent)")
    fz.add_argument("--seed", type=int, default=0, help="seed of the cases (default 0; printed)")
    fz.add_argument("--values", default="", help="beyond the plain cases, comma-separated: nonfinite (NaN, +Inf "
                                                   "and -Inf among the values), empty (0-size inputs where the op "
                                                   "takes them)")
    fz.add_argument("--dtypes", default="", help="beyond float32, comma-separated: float16, bfloat16 (a case's "
                                                   "float inputs cast to one, where its schema and every backend "
                                                   "take it)")
    fz.add_argument("--batch", type=count, default=24, help="cases replayed together as one bundle (default 24)")
    fz.add_argument("--budget", type=count, default=60, help="shrink steps per repro (default 60)")
    fz.add_argument("--no-repro", dest="repro", action="store_false", help="keep the corpus, write no repros")
    fz.add_argument("-o", "--out", help="the fuzz folder: state.json, corpus/, repros/ (resumed when it exists)")
    fz.add_argument("--replay", metavar="DIR", help="re-check the corpus of fuzz folder DIR: which bugs still "
                                                    "reproduce")
    fz.set_defaults(func=_fuzz)


def _add_port(sub):
    pt = sub.add_parser("port", help="check your own port (the model written in another framework) against a bundle, module by module")
    pt.add_argument("bundle")
    pt.add_argument("--port", required=True, metavar="PKG.MODULE:FACTORY",
                    help="the callable that builds your model in the backend's framework (it may take recorded=: "
                         "the bundle's dropout masks and random draws by name)")
    pt.add_argument("--backend", required=True, help="the framework your port is written in")
    pt.add_argument("--path", action="append", default=[], metavar="DIR",
                    help="a folder to put on the port's import path (repeat for several)")
    pt.add_argument("--map", metavar="MAP.toml", help="renames ([[rename]] from/to regexes) and layouts "
                                                      "([transpose], [reshape]) from your names to the bundle's")
    pt.add_argument("--loss", default="dot", choices=["dot", "grad-penalty"],
                    help="dot: the bundle's output seeds (default); grad-penalty: plus the squared input gradient")
    pt.add_argument("--timeout", type=seconds, default=600.0, help="seconds for each step of the port (600)")
    pt.add_argument("-o", "--out", help="output folder for report.json / report.html (default BUNDLE.port)")
    pt.set_defaults(func=_port)



def _add_tools(sub):
    """The commands about backends and set-up: backends, conformance, diff, setup, env, demo."""
    rp = sub.add_parser("report", help="write more of an existing replay's report: --model-explorer")
    rp.add_argument("out", help="the replay's output folder (OUT, holding report.json)")
    rp.add_argument("--model-explorer", action="store_true", required=True,
                    help="write OUT/model_explorer/<backend>.{verdict,max_rel,finding}.json (as replay --model-explorer)")
    rp.add_argument("--bundle", help="the bundle replayed (default: the path report.json names)")
    rp.set_defaults(func=_report)
    b = sub.add_parser("backends", help="list backends: availability, modes, op coverage")
    b.add_argument("--coverage-md", metavar="FILE", help="write the per-backend op coverage table (markdown)")
    b.set_defaults(func=_backends)

    c = sub.add_parser("conformance", help="run the ONNX backend node tests on backends")
    c.add_argument("--backend", default="torch,onnxruntime,oracle,onnxref")
    c.add_argument("--markdown", metavar="FILE", help="write the pass counts and failures (markdown)")
    c.set_defaults(func=_conformance)

    df = sub.add_parser("diff", help="align two bundles of the same model (e.g. a TF original and its PyTorch port)")
    df.add_argument("a")
    df.add_argument("b")
    df.add_argument("-o", "--out", help="folder for diff.json and diff.html (default: backends.diff)")
    df.set_defaults(func=_diff)

    s = sub.add_parser("setup", help="build (or reuse) the managed environment of a backend (or `all`)")
    s.add_argument("name", help="a backend that declares an environment, or `all`")
    s.add_argument("--if-possible", action="store_true",
                   help="exit 0 with a note when the interpreter it needs is missing (make demo/test use this)")
    s.set_defaults(func=_setup)

    e = sub.add_parser("env", help="print the python of a managed environment: $(irtrace env NAME) repro.py")
    e.add_argument("name")
    e.set_defaults(func=_env)

    w = sub.add_parser("servers", help="list the fork servers replay --keep-warm keeps (each holds a framework)")
    w.add_argument("--stop", action="store_true",
                   help="end them: at once, or once the replays using them now are done (none is cut short)")
    w.set_defaults(func=_servers)

    d = sub.add_parser("demo", help="export the bundled examples, replay them on every backend, write reports")
    d.add_argument("--out", default="demo-out")
    d.add_argument("--examples", default="stylegan2,resnet,wideresnet,gpt")
    d.set_defaults(func=_demo)

def _replay(args):
    from irtrace.replay import backends as registry
    from irtrace.replay.worker import launch_early, serve_roles_early
    # the backends under test import their frameworks while irtrace imports its own and loads the
    # bundle (run adopts them; a name that is wrong is reported there); so do the reference and the oracle
    # where nothing of theirs can be cached yet (no cache folder beside the bundle, or --no-cache)
    if args.executor == "local":
        if args.keep_warm:
            from irtrace.replay import forkserver
            forkserver.keep(args.keep_warm)
        launch_early([i for i in map(registry.known, args.backend.split(",")) if i and i.role == registry.UNDER_TEST])
        from irtrace.replay.cache import folder  # after: it imports the judging code
        if not args.cache or not folder(args.bundle).exists():
            serve_roles_early()
    from irtrace.replay import ReplayOptions
    from irtrace.report.folder import replay_into
    from irtrace.report.json_report import exit_code
    from irtrace.report.write import default_out
    options = ReplayOptions.parse(args.backend, args.modes, ops=args.ops, jobs=args.jobs, nodes=args.nodes,
                                  timeout=args.timeout, atol=args.atol, rtol=args.rtol, strict=args.strict,
                                  chained=args.chained, loss=args.loss, form=args.form, cache=args.cache,
                                  cache_size=args.cache_size,
                                  workarounds=args.workarounds, verify_workarounds=args.verify_workarounds,
                                  batch=args.batch, executor=_executor(args))
    out = Path(args.out) if args.out else default_out(args.bundle)
    with progress_bar() as progress:
        result = replay_into(args.bundle, options, out, resume=args.resume, progress=progress)
    report = result.json
    if args.model_explorer:
        from irtrace.report import explorer
        explorer.write(report, args.bundle, out / "model_explorer")
    if args.format == "json":
        from irtrace.report.terminal import summary_json
        print(summary_json(report, result.out))
    else:
        show(result)
    if args.repro and report["findings"]:
        from irtrace.repro.make import make_repros
        make_repros(out / "report.json", args.repro)
    return exit_code(report, ci=ci_mode())


def _executor(args):
    """The RayExecutor --executor ray asks for (None: this machine's workers); IrtraceError (exit 2) for
    --address or --ray-workers without it, or without Ray installed."""
    if args.executor != "ray":
        if args.address or args.ray_workers:
            raise IrtraceError(f"--{'address' if args.address else 'ray-workers'} goes with --executor ray")
        return None
    from irtrace.replay.ray_executor import RayExecutor, import_ray
    import_ray()
    return RayExecutor(address=args.address, workers=args.ray_workers)


@contextlib.contextmanager
def progress_bar():
    """A progress callback drawing a transient bar on a terminal (None elsewhere)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import Progress
    with Progress(transient=True) as bar:
        task = bar.add_task("replaying", total=None)
        yield lambda: bar.advance(task)


def show(result):
    """The terminal's view of a replay written into a folder (report.folder.Written): the findings table,
    the chained summary, where it wrote."""
    from irtrace.errors import printable
    from irtrace.report import terminal
    terminal.show(result.json)
    chained = result.report.options.chained
    if chained:
        from irtrace.report import chained as chained_report
        for line in chained_report.lines(result.json["chained"]):
            print(printable(line))
    out = result.out
    print(f"wrote {out / 'report.json'} and {out / 'report.html'}" +
          (f" and {out / 'chained.png'}" if chained else ""))


def ci_mode():
    """Whether $CI is set (to anything but '', 0, false or no): warnings then fail the run (exit 1)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _repro(args):
    if args.versions is not None:
        from irtrace.repro.versions import check_versions
        ran = check_versions(args.report, args.versions)
        return 1 if any(r["status"] == "reproduces" for runs in ran.values() for r in runs.values()) else 0
    from irtrace.repro.make import make_repros
    make_repros(args.report, args.out, args.finding, args.budget, anonymize=args.anonymize)
    return 0


def _report(args):
    import json

    from irtrace.report import explorer
    from irtrace.report.json_report import bundle_path
    out = Path(args.out)
    path = out / "report.json"
    try:
        report = json.loads(path.read_text())
        bundle = Path(args.bundle) if args.bundle else bundle_path(report, path)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise IrtraceError(f"{path}: not a replay's report.json ({type(e).__name__}: {e})") from None
    if not (bundle / "graph.onnx").is_file():
        raise IrtraceError(f"{bundle}: no graph.onnx there (give the bundle replayed with --bundle)")
    written = explorer.write(report, bundle, out / "model_explorer")
    print(f"wrote {len(written)} Model Explorer node data files in {out / 'model_explorer'}")
    return 0


def _values(text):
    from irtrace.fuzz.generate import EXTRAS
    values = tuple(v.strip() for v in text.split(",") if v.strip())
    for v in values:
        if v not in EXTRAS:
            raise IrtraceError(f"--values {text}: {v!r} is not one of {', '.join(EXTRAS)}")
    return values


def _fuzz(args):
    from irtrace.fuzz import run
    from irtrace.replay.plan import parse_modes
    if args.replay:
        if args.backend or args.out:
            raise IrtraceError("--replay DIR re-checks a fuzz folder's corpus on the backends it was fuzzed on: "
                               "give it alone")
        rows = run.recheck(args.replay)
        for key, bug, again in rows:
            tag = ", a convention: only at ties/zeros" if run.convention(bug) else ""
            print(f"{'REPRODUCES' if again else 'gone      '}  {key}  ({bug['count']} cases{tag})")
        print(f"irtrace fuzz --replay: {sum(r[2] for r in rows)} of {len(rows)} kept bugs reproduce")
        return 1 if any(r[2] for r in rows) else 0
    if not args.backend or not args.out:
        raise IrtraceError("irtrace fuzz: give --backend B[,B...] and -o DIR (or --replay DIR)")
    from irtrace.replay import backends as registry
    ops = tuple(o.strip() for o in args.ops.split(",") if o.strip()) if args.ops is not None else None
    if ops is not None and not ops:
        raise IrtraceError("--ops names no op type; give one or more, comma-separated (e.g. Conv,Pad)")
    options = run.FuzzOptions(backends=tuple(registry.parse_list(args.backend)), ops=ops,
                              modes=tuple(parse_modes(args.modes)), seed=args.seed, cases=args.cases,
                              seconds=args.time, batch=args.batch, values=_values(args.values),
                              dtypes=tuple(d.strip() for d in args.dtypes.split(",") if d.strip()))
    state = run.fuzz(args.out, options)
    if args.repro:
        run.write_repros(args.out, args.budget)
        state = run.load_state(args.out)
    print(f"{'backend':<14}{'bugs':>6}{'conventions':>13}{'cases':>8}{'cases/min':>11}{'discarded':>11}"
          f"{'unsupported':>13}")
    for b, bugs, conventions, cases, per_min, discarded, unsupported in run.summary(state):
        print(f"{b:<14}{bugs:>6}{conventions:>13}{cases:>8}{per_min:>11.1f}{discarded:>11}{unsupported:>13}")
    for key, bug in sorted(state["bugs"].items(), key=lambda kv: -kv[1]["count"]):
        tag = " (convention: only at ties/zeros)" if run.convention(bug) else ""
        print(f"  {key}: {bug['count']} case(s){tag}" + (f" -> {args.out}/{bug['repro']}" if bug.get("repro") else ""))
    print(f"irtrace fuzz: seed {state['seed']}, {state['next_case']} cases drawn, {len(state['bugs'])} distinct "
          f"bug(s); state in {args.out}/state.json")
    return 1 if any(not run.convention(b) for b in state["bugs"].values()) else 0


def _backends(args):
    from irtrace.replay.coverage import coverage_markdown, describe
    rows = describe()
    for r in rows:
        state = "available" if r["available"] else f"unavailable: {r['reason']} — run: {r['install']}"
        modes = ",".join(r["modes"]) if r["modes"] else "-"
        ops = str(r["ops"]) if r["ops"] is not None else "-"
        print(f"{r['name']:12} {modes:13} ops {ops:>4}  {state}")
        if r["description"]:
            print(f"{'':12} {r['description']}")
        if r.get("versions"):  # each another release in its own env: --backend NAME@VERSION
            print(f"{'':12} versions: {', '.join([r['versions'][0] + ' (default)', *r['versions'][1:]])}"
                  f" (--backend {r['name']}@VERSION)")
    if args.coverage_md:
        from pathlib import Path
        Path(args.coverage_md).write_text(coverage_markdown(rows))
        print(f"wrote {args.coverage_md}")
    return 0


def _conformance(args):
    from irtrace.replay.conformance import main_run
    from irtrace.replay import backends
    main_run(backends.parse_list(args.backend), args.markdown)
    return 0


def _diff(args):
    from pathlib import Path

    from irtrace.diff import diff
    from irtrace.report import diff as diff_report
    from irtrace.report.write import prepare_out
    from irtrace.store import load
    a, b = load(args.a), load(args.b)
    out = Path(args.out) if args.out else Path(str(Path(args.b)).rstrip("/") + ".diff")
    prepare_out(out, ("diff.json", "diff.html"))  # before the work: a bad -o is one line, and no stale diff stays
    d = diff(a, b)
    for line in diff_report.lines(d):
        print(printable(line))
    diff_report.write(d, out)
    print(f"wrote {out / 'diff.json'} and {out / 'diff.html'}")
    return 1 if d["differ"] else 0


def _setup(args):
    from irtrace import envs
    names = list(envs.all_envs()) if args.name == "all" else [args.name]
    for name in names:
        env = envs.get(name)
        if args.if_possible:
            try:
                env.interpreter()
            except IrtraceError as e:
                print(f"irtrace: {name} backend unavailable: {e}")
                continue
        env.setup()
    return 0


def _env(args):
    from irtrace import envs
    print(envs.get(args.name).python())
    return 0


def _servers(args):
    from irtrace.replay import forkserver
    for path, pid, modules, rss in forkserver.describe():
        if args.stop:
            forkserver.stop(path, pid)
        print(f"{'stopped' if args.stop else 'running'} pid {pid}  {rss / 2**20:6.0f} MB  {' '.join(modules)}  {path}")
    return 0


def _demo(args):
    from irtrace.cli.demo import demo
    return demo(args.out, [e.strip() for e in args.examples.split(",") if e.strip()])


def _port(args):
    from pathlib import Path

    from irtrace import port
    from irtrace.port.align import read_map
    from irtrace.report import port as port_report
    from irtrace.store import load
    bundle = load(args.bundle)
    mapping = read_map(args.map)
    paths = [str(Path(p).resolve()) for p in args.path]
    for p in paths:
        if not Path(p).is_dir():
            raise IrtraceError(f"--path {p}: not a folder")
    report = port.check(bundle, args.port, args.backend, path=paths, mapping=mapping, loss=args.loss,
                        timeout=args.timeout)
    out = port_report.write(report, args.out or str(bundle.path).rstrip("/") + ".port")
    print("\n".join(port_report.lines(report)))
    print(f"wrote {out / 'report.json'} and {out / 'report.html'}")
    return 1 if report.diverges else 0
