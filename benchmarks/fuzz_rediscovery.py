"""Which of the op-level bugs a backend's known-failure table pins (tests/<backend>_known.py, observed on
the shared op-case table, tests/op_cases.py) a fuzz run found without a model: a known entry (case, mode,
verdict) is rediscovered when the fuzz folder holds a bug of the same op, mode and verdict, conventions
aside. UNSUPPORTED entries (what a backend cannot express) are not bugs and are left out; so are entries
of ops the generator does not draw (said, with their count). Prints, per fuzz folder, the count found
and each one missed.

    .venv/bin/python benchmarks/fuzz_rediscovery.py FUZZ_DIR [FUZZ_DIR ...]
"""
import argparse
import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import op_cases  # noqa: E402 - tests/ is put on the path just above

from irtrace.fuzz import generate, run  # noqa: E402


def known_bugs(backend):
    """{(op, mode, verdict): [case ids]} of the backend's known-failure table, UNSUPPORTED left out."""
    ops = {c.id: c.op for c in op_cases.CASES}
    table = importlib.import_module(f"{backend}_known").KNOWN
    out = {}
    for (case, mode, _output), (verdict, _said) in table.items():
        if verdict == "UNSUPPORTED" or case not in ops:
            continue
        out.setdefault((ops[case], mode, verdict), []).append(case)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", help="irtrace fuzz folders (-o DIR of a run)")
    args = ap.parse_args()
    for folder in args.folders:
        state = run.load_state(folder)
        for backend in state["backends"]:
            known = known_bugs(backend)
            found = {(b["op"], b["mode"], b["verdict"]) for b in state["bugs"].values()
                     if b["backend"] == backend and not run.convention(b)}
            drawn = {k: v for k, v in known.items() if generate.fuzzable(k[0])}
            hit = sorted(k for k in drawn if k in found)
            print(f"{backend}: {len(hit)} of {len(drawn)} known op-level bugs (op, mode, verdict) rediscovered "
                  f"in {state['cases'][backend]} cases; {len(known) - len(drawn)} of ops the generator does "
                  f"not draw")
            for k in sorted(set(drawn) - set(hit)):
                print(f"  missed {k[0]} {k[1]} {k[2]} (known on {', '.join(drawn[k])})")


if __name__ == "__main__":
    main()
