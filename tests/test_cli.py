"""CLI: export/inspect, and bad input -> one clear line, exit code 2, nothing half-written."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from irtrace.cli import main

TESTS = Path(__file__).parent


def _run(argv, capsys):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_export_and_inspect(tmp_path, capsys):
    rc, out, err = _run(["export", "models_for_tests:tiny", "--input", "x=2x2x8x8", "-o", str(tmp_path / "t.irt")], capsys)
    assert rc == 0, err
    assert "wrote" in out and "eval mode" in out
    rc, out, _ = _run(["inspect", str(tmp_path / "t.irt")], capsys)
    assert rc == 0
    assert "inputs   x float32[2x2x8x8]" in out
    assert "Conv 1" in out and "BatchNormalization 1" in out
    rc, out, _ = _run(["inspect", str(tmp_path / "t.irt"), "--format", "json"], capsys)
    facts = json.loads(out)
    assert rc == 0 and facts["inputs"] == [{"name": "x", "dtype": "float32", "shape": [2, 2, 8, 8]}]
    assert facts["ops"]["Conv"] == 1 and facts["ops"]["BatchNormalization"] == 1 and facts["mode"] == "eval"
    rc, out, _ = _run(["replay", str(tmp_path / "t.irt"), "--backend", "onnxruntime", "--modes", "fwd",
                       "--format", "json", "-o", str(tmp_path / "out")], capsys)
    line = json.loads(out)  # one JSON object and nothing else on stdout
    assert rc == 0 and line["findings"] == [] and line["summary"]["nodes"] == facts["nodes"]
    assert line["summary"]["findings"] == 0 and line["report"] == str(tmp_path / "out" / "report.json")


def test_export_instance_attribute_and_default_inputs(tmp_path, capsys):
    rc, out, err = _run(["export", "models_for_tests:tiny_instance", "--input-file", str(_npz(tmp_path)),
                         "--train", "-o", str(tmp_path / "i.irt")], capsys)
    assert rc == 0, err
    assert "train mode" in out


def _npz(tmp_path):
    import numpy as np
    p = tmp_path / "in.npz"
    np.savez(p, x=np.random.default_rng(0).standard_normal((2, 2, 8, 8)).astype(np.float32))
    return p


@pytest.mark.parametrize("argv,message", [
    (["export", "no_such_module:f"], r"cannot import module 'no_such_module'"),
    (["export", "models_for_tests:tinyy"], r"has no attribute 'tinyy'\. Did you mean: tiny"),
    (["export", "models_for_tests:raises"], r"factory models_for_tests:raises raised RuntimeError: factory exploded"),
    (["export", "models_for_tests:not_a_module"], r"returned a int, not an nn.Module"),
    (["export", "models_for_tests:tiny", "--input", "x=2by3"], r"bad --input 'x=2by3': expected NAME=DIMxDIM"),
    (["export", "models_for_tests:data_dependent", "--input", "x=3"], r"torch.onnx.export could not export DataDependent"),
    (["export", "models_for_tests:tiny", "-o", "/nonexistent/dir/t.irt"], r"folder /nonexistent/dir does not exist"),
    (["export", "model.onnx"], r"model.onnx: no such file"),
    (["export", "models_for_tests:tiny", "--input-file", "/nope.npz"], r"--input-file /nope.npz: no such file"),
    (["inspect", "/no/such.irt"], r"no such bundle"),
])
def test_bad_input_is_one_line_exit_2(argv, message, capsys, tmp_path):
    if "-o" not in argv and argv[0] == "export":
        argv = argv + ["-o", str(tmp_path / "x.irt")]
    rc, _, err = _run(argv, capsys)
    assert rc == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("irtrace: error: ")
    import re
    assert re.search(message, lines[0]), lines[0]
    assert not (tmp_path / "x.irt").exists()


def test_existing_bundle_refused_then_forced(tmp_path, capsys):
    out = str(tmp_path / "t.irt")
    assert _run(["export", "models_for_tests:tiny", "-o", out], capsys)[0] == 0
    before = (tmp_path / "t.irt" / "values.safetensors").stat().st_mtime_ns
    rc, _, err = _run(["export", "models_for_tests:tiny", "-o", out], capsys)
    assert rc == 2 and "already exists; pass --force" in err
    assert (tmp_path / "t.irt" / "values.safetensors").stat().st_mtime_ns == before
    assert _run(["export", "models_for_tests:tiny", "-o", out, "--force"], capsys)[0] == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".t.irt")]  # no temp folders left


def test_unwritable_output(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root)")
        rc, _, err = _run(["export", "models_for_tests:tiny", "-o", str(ro / "t.irt")], capsys)
        assert rc == 2 and "cannot write" in err
    finally:
        ro.chmod(0o700)


def test_output_path_is_a_file(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    rc, _, err = _run(["export", "models_for_tests:tiny", "-o", str(f / "t.irt")], capsys)
    assert rc == 2 and f"{f} is a file, not a folder" in err  # names what is there, not "does not exist"


def test_python_m_irtrace_and_console_script(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    r = subprocess.run([sys.executable, "-m", "irtrace", "export", "models_for_tests:tiny", "-o", str(tmp_path / "a.irt")],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    exe = Path(sys.executable).with_name("irtrace")
    r = subprocess.run([str(exe), "inspect", str(tmp_path / "a.irt")], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "source   torch" in r.stdout
    r = subprocess.run([str(exe), "export", "models_for_tests:nope", "-o", str(tmp_path / "b.irt")],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_version_names_irtrace_the_host_and_each_environment_s_framework(capsys):
    import re
    from irtrace import envs
    from irtrace.version import __version__
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"irtrace {__version__} (Python 3.") and "host: torch 2.13.0" in lines[0]
    rows = {ln.split()[0]: ln for ln in lines[1:]}
    assert sorted(rows) == sorted(envs.all_envs())
    for name, env in envs.all_envs().items():
        pins = dict(ln.split("==") for ln in env.requirement_text().decode().splitlines() if "==" in ln)
        if "not set up" not in rows[name]:  # the version installed is the one pinned
            dist, version = rows[name].split()[1:3]
            assert pins[next(p for p in pins if re.sub("[-_]", "", p.lower()) == re.sub("[-_]", "", dist.lower()))] \
                == version, rows[name]


def test_parsing_a_replays_arguments_imports_no_replay_module():
    """`irtrace replay` launches the backends' workers before it imports its judging code (numpy, the cache,
    the engine): parsing the arguments, --jobs's default "auto" included, imports none of them, and the parsed
    default is the engine's AUTO."""
    code = ("import sys; from irtrace.cli import build_parser; a = build_parser().parse_args(['replay', 'b.irt']); "
            "print(a.jobs, sorted(m for m in ('numpy', 'irtrace.replay.api', 'irtrace.replay.cache') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout.split()
    from irtrace.replay.api import AUTO
    assert out == [AUTO, "[]"]
