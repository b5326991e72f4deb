import ast
import os
import pprint
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # test model modules importable as pkg:factory
# a user's IRTRACE_KEEP_WARM would keep fork servers from the session's replays in their own folder, outliving it;
# tests/test_keep_warm.py asks for them itself, in a folder of its own
os.environ.pop("IRTRACE_KEEP_WARM", None)


def update_known(module, name, table):
    """With IRTRACE_UPDATE_KNOWN=1 in the environment, write `table` as `name` in tests/<module>.py (a
    strict known-findings table) and return True: the maintainer's way to take what a framework now
    does after reading the test's failure, as a snapshot test's update. Otherwise False (the test
    asserts)."""
    if os.environ.get("IRTRACE_UPDATE_KNOWN") != "1":
        return False
    path = Path(__file__).parent / f"{module}.py"
    text = path.read_text()
    node = next(n for n in ast.parse(text).body if isinstance(n, ast.Assign) and
                any(isinstance(t, ast.Name) and t.id == name for t in n.targets))
    lines = text.splitlines(keepends=True)
    plain = {k: tuple(getattr(x, "value", x) for x in v) for k, v in table.items()}  # verdicts as their strings
    new = f"{name} = " + pprint.pformat(plain, width=120, sort_dicts=True) + "\n"
    path.write_text("".join(lines[:node.lineno - 1]) + new + "".join(lines[node.end_lineno:]))
    return True


# set by pytest for each test phase: a worker kept under it would never be reused by the next test
VOLATILE = ("PYTEST_CURRENT_TEST",)

# the longest files first (pytest --durations): `--dist loadfile` hands each test process the next file as
# it comes free, so a long file collected last keeps one process busy while the other has nothing left
LONGEST_FIRST = ("test_ray.py", "test_contract.py", "test_faults.py", "test_replay.py", "test_repro.py",
                 "test_testing.py", "test_cache.py", "test_workarounds.py", "test_hostile.py", "test_fuzz.py")


def pytest_collection_modifyitems(items):
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file's own order kept


@pytest.fixture(scope="session", autouse=True)
def warm_workers():
    """Backend workers kept running between the session's replays (irtrace.replay.worker.keep_warm): each
    framework is imported once per session and environment, not once per replay. IRTRACE_COLD_WORKERS=1
    starts them per replay as a single `irtrace replay` does."""
    from irtrace.replay import worker
    if os.environ.get("IRTRACE_COLD_WORKERS") == "1":
        yield
        return
    worker.keep_warm(VOLATILE)
    yield
    worker.close_warm()
    worker.stop_forking()


@pytest.fixture
def cold_workers():
    """Within one test, workers start for each replay and end with it (a test that counts the starts)."""
    from irtrace.replay import worker
    was = worker._WARM is not None
    worker.close_warm()
    worker.stop_forking(end_servers=False)  # a server for this test's environment would outlive it
    yield
    worker.close_warm()
    if was:
        worker.keep_warm(VOLATILE)


@pytest.fixture(scope="session")
def example_bundle(tmp_path_factory):
    """Export an example model once per session: example_bundle('resnet') -> Bundle."""
    import irtrace
    from irtrace.examples import EXAMPLES
    cache = {}
    root = tmp_path_factory.mktemp("bundles")

    def get(name):
        if name not in cache:
            e = EXAMPLES[name]
            cache[name] = irtrace.export(e.build(), e.inputs(), root / f"{name}.irt", train=e.train)
        return cache[name]
    return get

