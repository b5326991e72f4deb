"""--nodes: a regex from the command line searched in node names from a bundle (any ONNX file), with a
bound on the time it may take.

Python's re backtracks: `(a+)+$` searched in a name of 5,000 a's and a b never returns. No engine with
linear-time matching is among irtrace's dependencies (google-re2 would be; it also drops backreferences
and lookarounds, which users of Python's re write), and refusing "dangerous" patterns by their shape is
never complete (`(a|a)*$`, `(a|aa)+$` have no nested quantifier). So the search runs as it is, in a child
interpreter that is killed after SEARCH_SECONDS: the same semantics as re.search, and a pattern that
backtracks on these names is one line and exit 2, not a hang.
"""
import json
import subprocess
import sys

from irtrace.errors import IrtraceError

SEARCH_SECONDS = 10.0
_CHILD = ("import json, re, sys\n"
          "data = json.load(sys.stdin)\n"
          "rx = re.compile(data['pattern'])\n"
          "json.dump([k for k, n in enumerate(data['names']) if rx.search(n)], sys.stdout)\n")


def search_names(pattern, names, seconds=None):
    """Positions of the `names` in which re.search(`pattern`) finds a match, in order; IrtraceError when
    that takes more than `seconds` (default SEARCH_SECONDS)."""
    seconds = SEARCH_SECONDS if seconds is None else seconds
    try:
        proc = subprocess.run([sys.executable, "-I", "-S", "-c", _CHILD], capture_output=True, timeout=seconds,
                              input=json.dumps({"pattern": pattern, "names": list(names)}).encode())
    except subprocess.TimeoutExpired:  # subprocess.run kills the child
        raise IrtraceError(f"--nodes {pattern!r}: searching it in the graph's {len(names)} node names took more "
                           f"than {seconds:g} s (a pattern that backtracks, e.g. a nested quantifier like "
                           f"(a+)+); simplify it") from None
    if proc.returncode != 0:
        last = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        raise IrtraceError(f"--nodes {pattern!r}: cannot search it in the node names ({last[0]})")
    return json.loads(proc.stdout)
