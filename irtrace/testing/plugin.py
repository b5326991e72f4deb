"""The pytest plugin of irtrace.testing (entry point `pytest11`: irtrace): --irtrace-keep DIR, the
irtrace_bundle fixture, the irtrace_known marker. Light at import: nothing of irtrace's engine is loaded
until a test uses it."""
import shutil

import pytest

from irtrace.testing import CONTEXT, Known, folder_for


def pytest_addoption(parser):
    group = parser.getgroup("irtrace")
    group.addoption("--irtrace-keep", metavar="DIR", default=None,
                    help="keep the bundle, report and repros of each failing irtrace assertion in DIR/<test id>/")


def pytest_configure(config):
    config.addinivalue_line("markers", "irtrace_known(backend, op, mode, verdict=None, reason=''): a framework bug "
                                       "the test knows of: left out of irtrace's assertions while it shows, a "
                                       "failure once it no longer does")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    root = item.config.getoption("--irtrace-keep")
    folder = folder_for(root, item.nodeid) if root else None
    known = tuple(Known(*m.args, **m.kwargs) for m in item.iter_markers("irtrace_known"))
    token = CONTEXT.set((folder, known))
    try:
        outcome = yield
    finally:
        CONTEXT.reset(token)
    if folder is not None and outcome.excinfo is None and folder.exists():
        shutil.rmtree(folder)  # kept only for a failing test


@pytest.fixture
def irtrace_bundle(tmp_path):
    """A factory: irtrace_bundle(model, example_inputs, train=False, loss="dot") -> the exported Bundle
    (in the test's tmp_path)."""
    import irtrace

    def make(model, example_inputs, train=False, loss="dot", seed=0, name="model.irt"):
        return irtrace.export(model, example_inputs, tmp_path / name, train=train, seed=seed, loss=loss)
    return make
