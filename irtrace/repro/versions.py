"""`irtrace repro --versions all DIR`: every repro script in DIR re-run, unchanged, on each release of its
framework that its backend declares, each in that release's managed environment. Each repro folder gets
versions.json (per version: reproduces, fixed, error, timeout or unavailable, with the script's exit
code and output) and issue.md's line saying where it reproduces."""
import json
import re
from pathlib import Path

from irtrace.envs.discover import discover, latest, releases, split_release, version_key
from irtrace.errors import IrtraceError, suggest
from irtrace.replay import backends
from irtrace.repro import script
from irtrace.repro.standalone import run_file

# a script's exit code -> what it says of the release it ran on (repro.py exits 1 while it reproduces)
_STATUS = {1: "reproduces", 0: "fixed", 124: "timeout", 127: "unavailable"}


def repro_folders(root):
    """The repro folders under `root` (itself when it is one): those holding finding.json and repro.py."""
    root = Path(root)
    if not root.is_dir():
        raise IrtraceError(f"{root}: not a folder of repros (irtrace repro -o DIR writes one)")
    if (root / "finding.json").is_file():
        return [root]
    found = sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and (p / "finding.json").is_file())
    if not found:
        raise IrtraceError(f"{root}: holds no repro (a folder with finding.json and repro.py)")
    return found


def _backend_of(folder):
    """The framework backend a repro folder's finding is of ('paddle' for 'paddle@3.0.0'), and its declaration."""
    where = folder / "finding.json"
    try:
        finding = json.loads(where.read_text())
    except (OSError, ValueError) as e:
        raise IrtraceError(f"{where}: cannot read it ({e})") from None
    name = finding.get("backend") if isinstance(finding, dict) else None
    if not isinstance(name, str):
        raise IrtraceError(f"{where}: backend: missing or not a string")
    base = split_release(name)[0]
    found = discover()
    if base not in found:
        raise IrtraceError(f"{where}: backend {base[:80]!r} is not one irtrace knows.{suggest(base, found)}")
    return base, found[base].declaration


def chosen(declaration, versions):
    """The versions asked for: 'all' (every declared one, oldest first) or a comma-separated list of
    declared ones (IrtraceError naming them for any other)."""
    declared = sorted(releases(declaration), key=version_key)
    if versions == "all":
        return declared
    asked = [v.strip() for v in versions.split(",") if v.strip()]
    for v in asked:
        if v not in declared:
            raise IrtraceError(f"--versions: backend {declaration.name!r} declares no version {v!r}; declared: "
                               f"{', '.join(declared)}.{suggest(v, declared)}")
    return sorted(set(asked), key=version_key)


def rerun(folder, base, versions, timeout=300):
    """{version: {"status", "exit_code", "output"}}: the folder's repro.py run on each version."""
    out = {}
    for version in versions:
        info = backends.get(f"{base}@{version}")
        reason = info.unavailable()
        if reason is not None:
            out[version] = {"status": "unavailable", "exit_code": None, "output": f"{reason}"}
            continue
        run = run_file(info, (folder / "repro.py").resolve(), timeout=timeout)
        out[version] = {"status": _STATUS.get(run.code, "error"), "exit_code": run.code, "output": run.output[-2000:]}
    return out


def as_releases(ran, newest):
    """A finding's "versions" (report.json's form) from the runs: where it reproduces, where it is fixed."""
    return {"reproduces": [v for v, r in ran.items() if r["status"] == "reproduces"],
            "clean": [v for v, r in ran.items() if r["status"] == "fixed"], "latest": newest}


_LINE = re.compile(r"^(Reproduces |Does not reproduce ).*$", re.M)


def _update_issue(folder, line):
    """issue.md with `line` in place of its line on releases, or above its last paragraph."""
    path = folder / "issue.md"
    if not path.is_file():
        return
    text = path.read_text()
    if _LINE.search(text):
        text = _LINE.sub(lambda _: line, text, count=1)
    else:
        head, sep, tail = text.rpartition("\nFound by irtrace")
        text = f"{head}\n{line}\n{sep}{tail}" if sep else text.rstrip("\n") + f"\n\n{line}\n"
    path.write_text(text)


def check_versions(root, versions="all", timeout=300, say=print):
    """Re-run every repro script under `root` on `versions` ('all' or 'V1,V2') of its backend; write each
    folder's versions.json and issue.md's line. Returns {folder: {version: run}}."""
    done = {}
    for folder in repro_folders(root):
        base, declaration = _backend_of(folder)
        if not releases(declaration):
            say(f"{folder.name}: skipped: backend {base!r} declares no versions")
            continue
        ran = rerun(folder, base, chosen(declaration, versions), timeout)
        newest = latest(declaration)
        (folder / "versions.json").write_text(json.dumps(
            {"backend": base, "script": "repro.py", "latest": newest, "versions": ran}, indent=1) + "\n")
        summary = as_releases(ran, newest)
        if summary["reproduces"] or summary["clean"]:
            _update_issue(folder, script.releases_line(summary, script.md(declaration.display)))
        said = ", ".join(f"{v}{' (latest)' if v == newest else ''} {r['status']}" for v, r in ran.items())
        say(f"{folder.name}: {said}")
        done[folder] = ran
    return done
