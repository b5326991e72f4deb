"""A user's Hugging Face model factory exports from irtrace's own environment through the CLI, in a fresh
process without the corpus's set-up: where torchvision's C extension does not load next to the CPU torch
(this machine's only torchvision wheel is a CUDA build), irtrace defines the op schemas its import needs,
with a one-line warning, and only then."""
import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                reason="transformers not installed (requirements-corpus.txt)")

FACTORY = textwrap.dedent('''
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel


    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            config = GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16, bos_token_id=0,
                                eos_token_id=0)
            self.m = GPT2LMHeadModel(config).eval()

        def forward(self, ids):
            return self.m(input_ids=ids).logits


    def factory():
        return Logits()


    def factory_inputs():
        return (torch.randint(0, 64, (1, 6), generator=torch.Generator().manual_seed(0)),)
''')

PROBLEM = "from irtrace.export.thirdparty import torchvision_extension_problem as p; print(p() is not None)"


def test_a_hugging_face_factory_exports_through_the_cli_in_a_fresh_process(tmp_path):
    (tmp_path / "hfmodel.py").write_text(FACTORY)
    broken = subprocess.run([sys.executable, "-c", PROBLEM], capture_output=True, text=True, check=True).stdout
    r = subprocess.run([sys.executable, "-m", "irtrace", "export", "hfmodel:factory", "-o", str(tmp_path / "g.irt")],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith(f"wrote {tmp_path / 'g.irt'}: ") and "eval mode" in r.stdout
    warned = [ln for ln in r.stderr.splitlines() if "torchvision's C extension does not load" in ln]
    assert len(warned) == (1 if broken.strip() == "True" else 0), r.stderr
    manifest = json.loads((tmp_path / "g.irt" / "manifest.json").read_text())
    assert manifest["source"]["model"] == "hfmodel:factory"


def test_a_torchvision_that_loads_or_is_absent_is_left_alone(monkeypatch):
    from irtrace.export import thirdparty
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    assert thirdparty.torchvision_extension_problem() is None
    assert thirdparty.make_torchvision_importable() is False
