"""The fuzz loop: cases drawn in batches (generate.py), each batch one bundle of side-by-side nodes replayed
by the one replay engine (irtrace.replay.run: the oracle, the rounding model, the judge), its findings
grouped as a report groups them (irtrace.report.findings.group) and attributed back to the cases. A
distinct bug is kept once, with the count of cases that hit it and its smallest case as a single-node
bundle in DIR/corpus/<bug-id>/ (kept only when that bundle, replayed alone, shows it); `repros` writes
its repro with the repro writer. DIR/state.json makes a run resumable; `recheck` replays the corpus."""
import hashlib
import json
import logging
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from irtrace import compare
from irtrace.errors import IrtraceError, suggest
from irtrace.export.onnx_bundle import bundle_from_onnx
from irtrace.fuzz import generate
from irtrace.replay import ReplayOptions, run
from irtrace.replay import backends as registry
from irtrace.report.findings import group
from irtrace.report.json_report import dump_atomic

log = logging.getLogger(__name__)

SCHEMA = "irtrace.fuzz/1"
KINKS = {"ties", "zeros"}
# ops whose derivative is undefined at exact zeros or ties of their inputs (a kink, a step, a tied max):
# there each framework picks a subgradient of its own
KINKED_OPS = {"Abs", "Relu", "LeakyRelu", "PRelu", "Elu", "Selu", "Celu", "Clip", "HardSigmoid", "HardSwish",
              "Max", "Min", "MaxPool", "GlobalMaxPool", "ReduceMax", "ReduceMin", "TopK", "ReduceL1", "ReduceL2",
              "Round", "Floor", "Ceil", "Sign", "Mod", "ThresholdedRelu", "Shrink"}
STATE = "state.json"


@dataclass(frozen=True)
class FuzzOptions:
    """What to fuzz: backends under test, op types (None: every op the generator draws that a backend
    declares), modes, seed, and when to stop: after `cases` cases, or `seconds` (either; neither: 100
    cases). `batch`: cases per replay; `timeout`: seconds per node and backend."""
    backends: tuple
    ops: tuple = None
    modes: tuple = ("fwd", "vjp", "vjp2")
    seed: int = 0
    cases: int = None
    seconds: float = None
    values: tuple = ()  # generate.EXTRAS asked for: "nonfinite" (NaN/Inf values), "empty" (0-size inputs)
    dtypes: tuple = ()  # generate.LOW_PRECISION drawn beyond float32 ("float16", "bfloat16")
    batch: int = 24
    timeout: float = 30.0


def declared_ops(name):
    """The op types (default domain) backend `name`'s own worker declares (its op table's keys)."""
    from irtrace.replay.worker import WorkerProxy, keep_warm, park, warm
    keep_warm()
    info = registry.get(name)
    w = warm(info) or WorkerProxy(info)
    try:
        hello = w.hello if w.hello is not None else w.start()  # a worker kept warm has said its hello
    except Exception as e:  # noqa: BLE001 - a backend that cannot start is one line, not a traceback
        w.close()
        raise IrtraceError(f"backend {name!r} cannot start: {e}") from e
    if not park(w):
        w.close()
    return {op for domain, op, _ in hello["ops"] if domain == ""}


def check_dtypes(backends, dtypes):
    """An IrtraceError when a dtype asked for is not one the generator draws, or a backend under test (or
    the reference that records the cases) does not declare it."""
    for d in dtypes:
        if d not in generate.LOW_PRECISION:
            raise IrtraceError(f"--dtypes {d!r}: not one of {', '.join(generate.LOW_PRECISION)} "
                               f"(float32 is always drawn)")
    for b in (*backends, *registry.with_role(registry.REFERENCE)):
        missing = [d for d in dtypes if d not in registry.get(b).dtypes]
        if missing:
            raise IrtraceError(f"--dtypes {','.join(dtypes)}: backend {b!r} does not declare {', '.join(missing)} "
                               f"(it declares {', '.join(registry.get(b).dtypes)}: backends/"
                               f"{registry.split_release(b)[0]}/declare.py)")


def plan_ops(backends, ops=None):
    """{backend: sorted op types to fuzz}: what each declares that the generator draws, limited to `ops`.
    An op in `ops` the generator cannot draw, or that no backend declares, is an IrtraceError."""
    per = {b: sorted(o for o in declared_ops(b) if generate.fuzzable(o)) for b in backends}
    every = sorted(set().union(*per.values()))
    if ops is None:
        return per
    for op in ops:
        if op not in every:
            known = "; ".join(f"{b}: {len(v)} ops" for b, v in per.items())
            raise IrtraceError(f"--ops {op!r}: no case of it can be drawn for {', '.join(backends)} ({known})."
                               f"{suggest(op, every)}")
    return {b: [o for o in v if o in ops] for b, v in per.items()}


# --- state -----------------------------------------------------------------------------------------

def _new_state(options, per):
    return {"schema": SCHEMA, "seed": options.seed, "backends": list(options.backends), "values": list(options.values),
            "dtypes": list(options.dtypes), "modes": list(options.modes), "ops": {b: v for b, v in per.items()},
            "next_case": 0, "cases": {b: 0 for b in options.backends}, "discarded": {}, "unrecorded": 0,
            "unjudged": {}, "unsupported": {}, "elapsed_s": 0.0, "bugs": {}}


def load_state(out):
    """DIR/state.json, or None when DIR holds none; one line for a state that is not a fuzz state."""
    p = Path(out) / STATE
    if not p.exists():
        return None
    try:
        state = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise IrtraceError(f"{p}: cannot read the fuzz state ({e})") from None
    if not isinstance(state, dict) or state.get("schema") != SCHEMA:
        raise IrtraceError(f"{p}: not an irtrace fuzz state (schema {state.get('schema') if isinstance(state, dict) else None!r})")
    return state


def _save(out, state):
    dump_atomic(Path(out) / STATE, state)


def _resumable(state, options, out):
    held = (state["seed"], state["backends"], state["modes"], state.get("values", []), state.get("dtypes", []))
    if held != (options.seed, list(options.backends), list(options.modes), list(options.values),
                list(options.dtypes)):
        raise IrtraceError(f"{out}: holds a fuzz run with seed {state['seed']}, --backend "
                           f"{','.join(state['backends'])}, --modes {','.join(state['modes'])}"
                           f"{', --values ' + ','.join(held[3]) if held[3] else ''}"
                           f"{', --dtypes ' + ','.join(held[4]) if held[4] else ''}; resume it with those, or "
                           f"give another -o")


# --- bugs ------------------------------------------------------------------------------------------

def bug_key(finding, dtype="float32"):
    """A distinct bug: backend, op, mode, verdict, for a failed call (ERROR, CRASH, ...) the framework's
    message without numbers and names (the report's grouping), and the cases' dtype where it is not float32;
    the id names a folder."""
    cause = "" if finding.verdict in compare.NUMERIC_FAILURES else finding.signature
    typed = "" if dtype == "float32" else f"|{dtype}"
    digest = hashlib.sha1(f"{finding.backend}|{finding.op_type}|{finding.mode}|{finding.verdict}|{cause}{typed}"
                          .encode()).hexdigest()[:8]
    plain = re.sub(r"[^A-Za-z0-9_.-]", "_", finding.backend)
    return f"{plain}-{finding.op_type}-{finding.mode}-{finding.verdict.lower()}{typed.replace('|', '-')}-{digest}"


def _worst(finding):
    w = finding.worst or {}
    return {k: w.get(k) for k in ("output", "max_abs", "max_rel", "allowed") if k in w}


def _record(out, cases, seed):
    """The bundle of `cases` side by side (out/work/batch.irt), and the cases it holds: a case the
    recorder (torch) cannot run is dropped (the reference cannot judge it) and returned apart."""
    model, feeds, trained = generate.model_of(cases)
    path = Path(out) / "work" / "batch.irt"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return bundle_from_onnx(model, feeds, path, seed=seed, name="fuzz-batch", force=True,
                                trained=trained), cases, []
    except Exception:  # noqa: BLE001 - one case the recorder refuses: find it, case by case
        log.info("batch not recordable, recording case by case")
    kept, dropped = [], []
    for c in cases:
        m, f, t = generate.model_of([c])
        try:
            bundle_from_onnx(m, f, path, seed=seed, name="fuzz-batch", force=True, trained=t)
            kept.append(c)
        except Exception as e:  # noqa: BLE001 - the reason is logged, the case counted
            log.info("case %s (%s) not recordable: %s", c.id, c.op, str(e)[:200])
            dropped.append(c)
    if not kept:
        return None, [], dropped
    model, feeds, trained = generate.model_of(kept)
    return bundle_from_onnx(model, feeds, path, seed=seed, name="fuzz-batch", force=True,
                            trained=trained), kept, dropped


def _replay(bundle, backends, modes, timeout):
    """The findings of a replay, UNSUPPORTED ones too (a kernel a framework lacks for a dtype: counted apart)."""
    options = ReplayOptions(backends=tuple(backends), modes=tuple(modes), timeout=timeout, cache=False,
                            verify_workarounds=False)
    return group(run(bundle, options).replay, strict=True)


# ops whose forward names one of tied elements: which one a framework's TopK lists first among equal values
# is its own choice (ONNX asks for the lower index; Paddle's and MegEngine's documents promise no order)
TIED_FORWARD = {"TopK"}


def _kinked(bug):
    if bug["verdict"] not in compare.NUMERIC_FAILURES:
        return False
    return bug["op"] in KINKED_OPS and bug["mode"] != "fwd" or bug["op"] in TIED_FORWARD and bug["mode"] == "fwd"


def _shows(out, key, case, state):
    """Whether `case` alone, as a bundle (out/work/candidate.irt), shows bug `key` on its backend and mode."""
    bug = state["bugs"][key]
    model, feeds, trained = generate.model_of([case], name=f"fuzz-{case.op}")
    tmp = Path(out) / "work" / "candidate.irt"
    try:
        bundle = bundle_from_onnx(model, feeds, tmp, seed=state["seed"], name=f"fuzz-{case.op}", force=True,
                                  trained=trained)
    except Exception as e:  # noqa: BLE001 - the recorder refused it: it shows nothing
        log.info("case %s alone not recordable: %s", case.id, str(e)[:200])
        return False
    return any(bug_key(f, case.dtype) == key for f in _replay(bundle, [bug["backend"]], [bug["mode"]], 60.0))


def _keep_case(out, key, case, state):
    """Write `case` as corpus/<key>/ when it shows the bug alone (replayed on its backend and mode):
    True when kept."""
    path = Path(out) / "corpus" / key
    tmp = Path(out) / "work" / "candidate.irt"
    if not _shows(out, key, case, state):
        return False
    if path.exists():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(tmp), str(path))
    return True


def _by_dtype(findings, by_id):
    """(finding, dtype, its cases of that dtype, smallest first) for each finding and dtype among its cases."""
    for f in findings:
        split = {}
        for n in f.nodes:
            if n in by_id:
                split.setdefault(by_id[n].dtype, []).append(by_id[n])
        for dtype, cases in sorted(split.items()):
            yield f, dtype, sorted(cases, key=lambda c: c.size())


def _unsupported(findings, by_id, state):
    """UNSUPPORTED findings (a framework's kernel missing for a dtype on this device, a mode it does not
    compute) counted apart by backend, op, mode and dtype, with the framework's words: not bugs."""
    for f, dtype, cases in _by_dtype(findings, by_id):
        row = state.setdefault("unsupported", {}).setdefault(f"{f.backend}|{f.op_type}|{f.mode}|{dtype}", {
            "count": 0, "message": (f.message or "")[:300]})
        row["count"] += len(cases)


def _attribute(out, findings, by_id, state):
    """Each finding's cases counted into its bug (one per dtype); the smallest case that shows it alone kept."""
    for f, dtype, cases in _by_dtype(findings, by_id):
        key = bug_key(f, dtype)
        bug = state["bugs"].setdefault(key, {
            "backend": f.backend, "op": f.op_type, "mode": f.mode, "verdict": f.verdict, "dtype": dtype,
            "signature": f.signature, "message": (f.message or "")[:400], "worst": _worst(f), "count": 0,
            "classes": {}, "case": None, "size": None, "kept": False, "off_kinks": 0})
        bug["count"] += len(cases)
        bug.setdefault("cases", []).extend(c.index for c in cases[:max(0, 100 - len(bug.get("cases", [])))])
        # cases without exact ties or zeros: a gradient that differs only at a kink or a tie is a
        # subgradient convention (which input of a tied max gets the gradient), not a wrong value
        bug["off_kinks"] = bug.get("off_kinks", 0) + sum(not KINKS & set(c.styles) for c in cases)
        if cases and not bug["off_kinks"] and _kinked(bug) and not bug.get("untied_tried"):
            # found only where the derivative is undefined: the smallest case once more, its ties and zeros
            # moved apart; the bug is real where that still shows it
            bug["untied_tried"] = True
            bug["off_kinks"] += _shows(out, key, generate.untied(cases[0]), state)
        for c in cases:
            bug["classes"][c.cls] = bug["classes"].get(c.cls, 0) + 1
        for c in cases[:2]:  # the smallest, and one more should it not show the bug alone
            if bug["size"] is not None and c.size() >= bug["size"]:
                break
            if _keep_case(out, key, c, state):
                bug.update(case=c.index, size=c.size(), kept=True, attrs=_plain(c.attrs),
                           shapes=[list(i.value.shape) if i.value is not None else None for i in c.inputs])
                break


def _plain(attrs):
    return {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in attrs.items()}


# --- the loop --------------------------------------------------------------------------------------

def fuzz(out, options, say=print):
    """Fuzz into folder `out` (resuming the run state.json there holds); returns the state."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise IrtraceError(f"-o {out}: exists and is not a folder")
    for b in options.backends:
        if registry.get(b).role != registry.UNDER_TEST:
            raise IrtraceError(f"--backend {b}: is the {registry.get(b).role}, not a backend under test")
    check_dtypes(options.backends, options.dtypes)
    per = plan_ops(options.backends, options.ops)
    ops = sorted(set().union(*per.values()))
    if not ops:
        raise IrtraceError(f"--backend {','.join(options.backends)}: no op the generator draws is declared")
    out.mkdir(parents=True, exist_ok=True)
    state = load_state(out)
    if state is None:
        state = _new_state(options, per)
    else:
        _resumable(state, options, out)
        say(f"irtrace fuzz: resuming {out}: {state['next_case']} cases drawn, {len(state['bugs'])} bugs")
    say(f"irtrace fuzz: seed {options.seed}, {len(ops)} ops, backends {','.join(options.backends)}, "
        f"modes {','.join(options.modes)}")
    start, ran = time.monotonic(), 0
    limit = options.cases if options.cases is not None else (None if options.seconds else 100)
    try:
        while (limit is None or ran < limit) and (options.seconds is None
                                                  or time.monotonic() - start < options.seconds):
            began = time.monotonic()
            ran += _batch(out, options, per, ops, state, options.batch if limit is None else min(options.batch,
                                                                                                limit - ran))
            state["elapsed_s"] = round(state["elapsed_s"] + time.monotonic() - began, 3)
            _save(out, state)
    finally:
        _save(out, state)
    return state


def _batch(out, options, per, ops, state, n):
    """Draw `n` valid cases, replay them as one bundle, count them and their findings; returns n."""
    seed, cases = options.seed, []
    while len(cases) < n:
        i = state["next_case"]
        state["next_case"] += 1
        case = generate.draw_case(seed, i, generate.pick_op(seed, i, ops), options.values, options.dtypes)
        if case.problem:
            state["discarded"][case.op] = state["discarded"].get(case.op, 0) + 1
            log.info("discarded %s (%s): %s", case.id, case.op, case.problem)
            continue
        cases.append(case)
    bundle, kept, dropped = _record(out, cases, seed)
    state["unrecorded"] += len(dropped)
    if bundle is None:
        return n
    findings = _replay(bundle, options.backends, options.modes, options.timeout)
    # the reference judged against the oracle, or the oracle failing: not a bug of a backend under test,
    # but a case the judge could not settle; counted apart
    for f in findings:
        if f.backend not in options.backends:
            key = bug_key(f)
            state["unjudged"][key] = state["unjudged"].get(key, 0) + len(f.nodes)
    findings = [f for f in findings if f.backend in options.backends]
    for b in options.backends:
        state["cases"][b] += sum(c.op in per[b] for c in kept)
    by_id = {c.id: c for c in kept}
    _unsupported([f for f in findings if f.verdict == compare.UNSUPPORTED], by_id, state)
    _attribute(out, [f for f in findings if f.verdict != compare.UNSUPPORTED], by_id, state)
    return n


# --- after the loop: repros, the corpus re-checked, the summary ---------------------------------------

def convention(bug):
    """Whether a bug is only a subgradient convention: a gradient of an op with kinks (KINKED_OPS) that
    differs on cases with exact ties or zeros only (where its derivative is not defined), never on a case
    without them, nor on its smallest case with those moved apart; or the forward of an op that names one of
    tied elements (TIED_FORWARD: TopK's indices) that differs on ties only, in the same way."""
    return _kinked(bug) and bug.get("off_kinks", 0) == 0


def _kept(out):
    """(state, [(bug id, bug)] of the bugs whose case is in the corpus) of fuzz folder `out`; from now on
    workers are kept warm between the replays of the corpus."""
    from irtrace.replay.worker import keep_warm
    keep_warm()
    state = load_state(out)
    if state is None:
        raise IrtraceError(f"{out}: no {STATE}: not a fuzz folder (run `irtrace fuzz ... -o {out}` first)")
    return state, [(key, bug) for key, bug in sorted(state["bugs"].items()) if bug.get("kept")]


def write_repros(out, budget=60, say=print, keys=None):
    """For each kept bug without one (of `keys`, when given), its repro (repro.py, issue.md, data.npz) in
    DIR/repros/<bug-id>/, written by the repro writer from a replay of its corpus bundle; returns the
    folders written."""
    from irtrace.report.folder import replay_into
    from irtrace.repro.make import make_repros
    out = Path(out)
    state, kept = _kept(out)
    folders = []
    for key, bug in kept:
        if bug.get("repro") or convention(bug) or (keys is not None and key not in keys):
            continue
        where = out / "repros" / key
        written = replay_into(out / "corpus" / key, ReplayOptions(backends=(bug["backend"],), modes=(bug["mode"],),
                                                                  verify_workarounds=True), where / "replay")
        ids = [f["id"] for f in written.json["findings"] if f["backend"] == bug["backend"] and f["mode"] == bug["mode"]
               and f["verdict"] == bug["verdict"]]
        if not ids:
            say(f"irtrace fuzz: {key}: its corpus case no longer shows it; no repro")
            continue
        made = make_repros(where / "replay" / "report.json", where, ids[:1], shrink_budget=budget)
        if made:
            bug["repro"] = str(Path(made[0]).relative_to(out))
            folders += made
        _save(out, state)
    return folders


def recheck(out, say=print):
    """Replay every kept bug's corpus bundle on its backend and mode: [(bug id, bug, reproduces)]."""
    from irtrace.store import load
    out = Path(out)
    rows = []
    for key, bug in _kept(out)[1]:
        findings = _replay(load(out / "corpus" / key), [bug["backend"]], [bug["mode"]], 60.0)
        rows.append((key, bug, any(bug_key(f, bug.get("dtype", "float32")) == key for f in findings)))
    return rows


def summary(state):
    """One row per backend: (backend, bugs, conventions, cases, cases per minute, discarded, unsupported: the
    (op, mode, dtype) the framework lacks a kernel for or does not compute)."""
    minutes = max(state["elapsed_s"], 1e-9) / 60.0
    rows = []
    for b in state["backends"]:
        bugs = [g for g in state["bugs"].values() if g["backend"] == b]
        conventions = sum(convention(g) for g in bugs)
        discarded = sum(n for op, n in state["discarded"].items() if op in state["ops"].get(b, ()))
        unsupported = sum(k.split("|")[0] == b for k in state.get("unsupported", {}))
        rows.append((b, len(bugs) - conventions, conventions, state["cases"][b], state["cases"][b] / minutes,
                     discarded, unsupported))
    return rows
