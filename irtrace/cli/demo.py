"""`irtrace demo` (what `make demo` runs): export the bundled examples, replay each on every
available backend, write the reports. Findings are the product working: exit 0."""
from pathlib import Path

from irtrace.errors import IrtraceError, printable


def demo(out, names):
    import irtrace
    from irtrace.replay import ReplayOptions
    from irtrace.report.folder import replay_into
    from irtrace.examples import EXAMPLES
    from irtrace.replay import backends
    from irtrace.report.terminal import finding_lines, summary_line
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    unknown = [n for n in names if n not in EXAMPLES]
    if unknown:
        raise IrtraceError(f"unknown example(s) {', '.join(unknown)}; choose from {', '.join(EXAMPLES)}")
    shown = {n: info for n, info in backends.BACKENDS.items() if info.demo and info.modes}
    available = [n for n, info in shown.items() if info.unavailable() is None]
    for n, info in shown.items():
        if n not in available:
            print(f"backend {n} unavailable: {info.unavailable()} — run: {info.install}")
    chains = [n for n in available if backends.get(n).chained and backends.get(n).role == "test"]
    for name in names:
        e = EXAMPLES[name]
        bundle = irtrace.export(e.build(), e.inputs(), out / f"{name}.irt", train=e.train, force=True)
        print(f"== {name}: {e.doc}")
        print(f"   exported {bundle.path} ({len(bundle.model.graph.node)} nodes, {bundle.manifest['mode']} mode)")
        chained = name == "stylegan2" and bool(chains)  # the gradient-penalty port of seeds/000
        result = replay_into(bundle, ReplayOptions(backends=tuple(available), chained=chained, workarounds=chained,
                                           loss="grad-penalty" if chained else "bundle"), out=out / f"{name}.replay")
        report, where = result.json, result.out
        for line in finding_lines(report):
            print("   " + printable(line))
        print("   " + summary_line(report))
        if chained:
            from irtrace.report.chained import lines
            for line in lines(report["chained"], top=5):
                print("   " + printable(line))
        print(f"   report: {where / 'report.html'}")
        if report["findings"]:
            from irtrace.repro.make import make_repros
            folders = make_repros(where / "report.json", out / f"{name}.repros")
            print(f"   repros: {len(folders)} in {out / f'{name}.repros'}")
        for backend in available:
            _ports(bundle, e, name, backend, out)
    return 0


def _ports(bundle, example, name, backend, out):
    """The ports of an example a backend ships (backends/<name>/ports/<example module>.py: the example's factory,
    and `<factory>_workarounds` where the port is also written with the verified workarounds), checked with
    `irtrace port` (StyleGAN2, ../shared/seeds/000's question, under the gradient penalty)."""
    import importlib.util

    from irtrace import port
    from irtrace.replay import backends
    from irtrace.report import port as port_report
    info = backends.get(backend)
    if not info.port:
        return
    module = info.worker.rsplit(".", 1)[0] + ".ports." + example.factory.split(":")[0].rsplit(".", 1)[-1]
    try:
        spec = importlib.util.find_spec(module)
    except ImportError:
        spec = None
    if spec is None or spec.origin is None:
        return
    fn = example.factory.split(":")[1]
    text = Path(spec.origin).read_text()
    loss = "grad-penalty" if name == "stylegan2" else "dot"
    for factory in [fn] + ([f"{fn}_workarounds"] if f"def {fn}_workarounds(" in text else []):
        report = port.check(bundle, f"{module}:{factory}", backend, loss=loss)
        where = port_report.write(report, out / f"{name}.port-{backend}-{factory}")
        for line in port_report.lines(report):
            print("   " + printable(line))
        print(f"   port report: {where / 'report.html'}")
