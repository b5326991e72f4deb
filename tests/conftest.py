import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # test model modules importable as pkg:factory


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
