"""Command line: argument parsing only; everything else is the Python API."""
import argparse
import logging
import sys
import traceback

from irtrace.errors import IrtraceError, interrupt_in, printable, strip_ansi

log = logging.getLogger("irtrace")


def _export(args):
    import torch

    from irtrace.export.torch_export import export
    from irtrace.export.inputs import load_input_file, make_inputs, parse_input_spec, resolve_target
    specs = [parse_input_spec(s) for s in args.input]
    if args.source == "tensorflow":
        from irtrace.export.tf_import import export_tf
        arrays = load_input_file(args.input_file) if args.input_file else None
        bundle = export_tf(args.target, args.output, specs, arrays, args.seed, args.loss, args.force)
        print(f"wrote {bundle.path}: {len(bundle.model.graph.node)} nodes, {len(bundle.values)} values, from TensorFlow")
        return 0
    if args.target.endswith(".onnx"):
        from irtrace.export.onnx_import import export_onnx
        arrays = load_input_file(args.input_file) if args.input_file else None
        bundle = export_onnx(args.target, args.output, specs, arrays, args.seed, args.loss, args.force)
        print(f"wrote {bundle.path}: {len(bundle.model.graph.node)} nodes, {len(bundle.values)} values, from ONNX")
        return 0
    model, defaults = resolve_target(args.target)
    if args.input_file:
        arrays = load_input_file(args.input_file)
        inputs = tuple(torch.from_numpy(a) for a in arrays.values())
    elif specs:
        arrays = make_inputs(specs, args.seed)
        inputs = tuple(torch.from_numpy(arrays[n]) for n, _, _ in specs)
    elif defaults is not None:
        inputs = tuple(defaults) if isinstance(defaults, (tuple, list)) else (defaults,)
    else:
        raise IrtraceError(f"{args.target}: no inputs; pass --input NAME=SHAPE[:DTYPE] or --input-file FILE.npz")
    names = [n for n, _, _ in specs] or None
    bundle = export(model, inputs, args.output, train=args.train, seed=args.seed, loss=args.loss,
                    force=args.force, input_names=names, model_name=args.target)
    print(f"wrote {bundle.path}: {len(bundle.model.graph.node)} nodes, {len(bundle.values)} values, "
          f"{bundle.manifest['mode']} mode")
    return 0


def _inspect(args):
    from irtrace.report.inspect import facts, summary
    from irtrace.store import load
    bundle = load(args.bundle)
    if args.format == "json":
        import json
        print(json.dumps(facts(bundle), sort_keys=True))
    else:
        print("\n".join(printable(line) for line in summary(bundle).splitlines()))
    return 0


class _Parser(argparse.ArgumentParser):
    """Bad arguments are user input like any other: one line, exit 2 (argparse prints usage first)."""

    def error(self, message):
        raise IrtraceError(f"{message} (see {self.prog} --help)")


class _Versions(argparse.Action):
    """--version: irtrace's, the host's frameworks', and each managed environment's framework, read from
    installed package metadata (nothing is imported or started)."""

    def __call__(self, parser, namespace, values, option_string=None):
        import importlib.metadata as metadata
        import platform
        from irtrace import envs
        from irtrace.envs.discover import discover
        from irtrace.version import __version__
        host = ", ".join(f"{d} {metadata.version(d)}" for d in ("torch", "onnx", "onnxruntime"))
        print(f"irtrace {__version__} (Python {platform.python_version()}); host: {host}")
        found = discover()
        for name, env in envs.all_envs().items():
            try:
                dist, version, folder = env.framework_version(found[env.backend].declaration.module)
                print(f"{name:<16}{dist} {version} (Python {env.python_version}) {folder}")
            except IrtraceError as e:
                print(f"{name:<16}{e}")
        parser.exit(0)


def build_parser():
    p = _Parser(prog="irtrace", description="Find the first op where two frameworks disagree.")
    p.add_argument("--version", action=_Versions, nargs=0, help="irtrace's version and each backend "
                                                                "environment's framework version")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)")
    sub = p.add_subparsers(dest="command", required=True)

    e = sub.add_parser("export", help="export a model to a bundle (graph + recorded values)")
    e.add_argument("target", help="pkg.module:factory (a callable returning an nn.Module, or an nn.Module), "
                                  "or model.onnx")
    e.add_argument("--from", dest="source", default="torch", choices=["torch", "onnx", "tensorflow"],
                   help="the model's framework (default torch; .onnx files are detected)")
    e.add_argument("--input", action="append", default=[], metavar="NAME=SHAPE[:DTYPE]",
                   help="a seeded random input, e.g. x=2x3x32x32:float32 (repeat for several)")
    e.add_argument("--input-file", help="a .npz with the inputs, in the model's argument order")
    e.add_argument("--train", action="store_true", help="training mode (BatchNorm batch stats, recorded dropout)")
    e.add_argument("--seed", type=int, default=0, help="seed of inputs, masks and cotangents (default 0)")
    e.add_argument("--loss", default="dot", choices=["dot", "sum", "grad-penalty"],
                   help="dot: random output cotangents (default); sum: ones; grad-penalty: dot plus the squared "
                        "input gradient (recorded cotangents then come from a double backward)")
    e.add_argument("-o", "--output", required=True, help="bundle folder to write (NAME.irt)")
    e.add_argument("--force", action="store_true", help="overwrite an existing bundle")
    e.set_defaults(func=_export)

    i = sub.add_parser("inspect", help="summarize a bundle")
    i.add_argument("bundle")
    i.add_argument("--format", default="text", choices=["text", "json"], help="json: the same facts as one JSON object")
    i.set_defaults(func=_inspect)

    from irtrace.cli import commands
    commands.add_commands(sub)
    return p


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, so that every `finally` runs: workers are killed, what
    is done stays on disk."""


def _terminate(signum, frame):
    raise Terminated()


def main(argv=None):
    import signal
    import threading
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if main_thread else None
    try:
        args = build_parser().parse_args(argv)
        logging.basicConfig(level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
                            format="%(levelname)s %(name)s: %(message)s")
        return args.func(args)
    except KeyboardInterrupt as e:
        return _interrupted(e)
    except IrtraceError as e:
        if interrupt_in(e) is not None:  # torch.export wraps a Ctrl-C in its own error, which we wrap again
            return _interrupted(interrupt_in(e))
        print(f"irtrace: error: {printable(e)}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - an internal bug: its own exit code, never 1 (findings)
        if interrupt_in(e) is not None:
            return _interrupted(interrupt_in(e))
        traceback.print_exc()
        print(f"irtrace: internal error: {printable(type(e).__name__)}: {printable(strip_ansi(e)[:300])} -- a bug in "
              f"irtrace; please report it with the traceback above (exit {INTERNAL_ERROR})", file=sys.stderr)
        return INTERNAL_ERROR
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


INTERNAL_ERROR = 3  # exit codes: 0 clean, 1 findings, 2 bad input, 3 a bug in irtrace, 130/143 interrupted


def _interrupted(e):
    terminated = isinstance(e, Terminated)
    print(f"irtrace: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
    return 143 if terminated else 130


if __name__ == "__main__":
    sys.exit(main())
