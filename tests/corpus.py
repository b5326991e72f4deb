"""The real-model corpus: torchvision, timm and Hugging Face transformers architectures with random
weights (no downloads) and small inputs, as the tests and the README table use them.

Set-up (requirements-corpus.txt, installed with --no-deps so torch stays at 2.13.0+cpu):

torchvision: irtrace.export.thirdparty makes it importable where its C extension does not load
(this machine's only torchvision wheel is a CUDA build); timm imports torchvision, so it runs first.
"""
import importlib.util

import torch

from irtrace.export.thirdparty import make_torchvision_importable


def available():
    """None when torchvision, timm and transformers import, else the reason they do not."""
    missing = [m for m in ("torchvision", "timm", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        return (f"corpus packages not installed ({', '.join(missing)}): "
                f".venv/bin/python -m pip install --no-deps -r requirements-corpus.txt")
    make_torchvision_importable()
    try:
        import timm  # noqa: F401
        import torchvision  # noqa: F401
        import transformers  # noqa: F401
    except Exception as e:  # noqa: BLE001 (the reason is shown in the skip)
        return f"corpus packages do not import: {type(e).__name__}: {e}"
    return None


def _image(n=2, size=32):
    """Seeded images. CNNs with BatchNorm get 64x64 so their last stage keeps 2x2 (train-mode BN over
    N*H*W = 8 values per channel): at 32x32 it is 1x1, BN normalises 2 values, the exact result is
    +-1 with a gradient near 0, and float32 torch itself is judged DIVERGENT from float64 there
    (observed on timm resnet10t and torchvision efficientnet_b0 at 32x32)."""
    g = torch.Generator().manual_seed(0)
    return (torch.randn(n, 3, size, size, generator=g),)


def _tokens(n=2, length=8, vocab=96):
    g = torch.Generator().manual_seed(0)
    return (torch.randint(0, vocab, (n, length), generator=g),)


# ---- torchvision


def resnet18():
    import torchvision
    return torchvision.models.resnet18(weights=None, num_classes=10), _image(size=64)


def mobilenet_v3_small():
    import torchvision
    return torchvision.models.mobilenet_v3_small(weights=None, num_classes=10), _image(size=64)


def efficientnet_b0():
    import torchvision
    # 64x64: at 32x32 the last stage is 1x1, and train-mode BatchNorm over 2 values amplifies float32
    # rounding until the export check (eager vs graph in torch) fails by design
    return torchvision.models.efficientnet_b0(weights=None, num_classes=10), _image(size=64)


def convnext_tiny():
    import torchvision
    return torchvision.models.convnext_tiny(weights=None, num_classes=10), _image()


def vit_tiny():
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
                             num_classes=10, dropout=0.1, attention_dropout=0.1), _image()


def resnet18_fpn():
    """A detection backbone: ResNet-18 + FeaturePyramidNetwork (torchvision's detection code); returns
    an OrderedDict of feature maps."""
    from torchvision.models.detection.backbone_utils import resnet_fpn_backbone
    return resnet_fpn_backbone(backbone_name="resnet18", weights=None, trainable_layers=5), _image(size=64)


# ---- timm


def _timm(name, size=64, **kw):
    import timm
    return timm.create_model(name, pretrained=False, num_classes=10, **kw), _image(size=size)


def timm_resnet10t():
    return _timm("resnet10t", size=64)


def timm_mobilevitv2():
    return _timm("mobilevitv2_050", size=64)


def timm_efficientformerv2():
    return _timm("efficientformerv2_s0", size=64, img_size=64)


def timm_levit():
    return _timm("levit_128s", size=64, img_size=64)


def timm_deit_tiny():
    return _timm("deit_tiny_patch16_224", size=32, img_size=32, depth=2)


# ---- transformers (tiny configs)




def gpt2_tiny():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=96, n_positions=16, n_embd=32, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(cfg), _tokens()


def gpt2_tiny_nocache():
    """GPT-2 as the corpus replays it: use_cache=False (its default output holds a DynamicCache,
    which torch.export cannot return; irtrace says so in one line)."""
    model, inputs = gpt2_tiny()
    return NoCache(model), inputs


def bert_tiny():
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                     max_position_embeddings=16)
    return BertModel(cfg), _tokens()


def llama_tiny():
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16)
    return NoCache(LlamaForCausalLM(cfg)), _tokens()


def t5_tiny():
    from transformers import T5Config, T5ForConditionalGeneration
    cfg = T5Config(vocab_size=96, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
                   decoder_start_token_id=0)
    # eager attention: with sdpa, torch.onnx.export (torch 2.13) fails in its decomposition step
    # ("Cannot view a tensor with shape ... as a tensor with shape (2, 8, 32)", modeling_t5.py's
    # attn_output.reshape after the transpose), with or without irtrace
    model = T5ForConditionalGeneration._from_config(cfg, attn_implementation="eager")
    ids = _tokens()[0]
    return _Seq2Seq(model), (ids, ids[:, :4].contiguous())


class NoCache(torch.nn.Module):
    """A causal LM called with use_cache=False (the model's output is still its ModelOutput)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False)


class _Seq2Seq(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, decoder_input_ids):
        return self.model(input_ids=input_ids, decoder_input_ids=decoder_input_ids, use_cache=False)


# name -> (factory, modes); train only where the model has BatchNorm or dropout
CORPUS = {
    "resnet18": (resnet18, ("eval", "train")),
    "mobilenet_v3_small": (mobilenet_v3_small, ("eval", "train")),
    "efficientnet_b0": (efficientnet_b0, ("eval", "train")),
    "convnext_tiny": (convnext_tiny, ("eval", "train")),
    "vit_tiny": (vit_tiny, ("eval", "train")),
    "resnet18_fpn": (resnet18_fpn, ("eval", "train")),
    "timm_resnet10t": (timm_resnet10t, ("eval", "train")),
    "timm_mobilevitv2": (timm_mobilevitv2, ("eval", "train")),
    "timm_efficientformerv2": (timm_efficientformerv2, ("eval", "train")),
    "timm_levit": (timm_levit, ("eval", "train")),
    "timm_deit_tiny": (timm_deit_tiny, ("eval",)),
    "gpt2_tiny": (gpt2_tiny_nocache, ("eval", "train")),
    "bert_tiny": (bert_tiny, ("eval", "train")),
    "llama_tiny": (llama_tiny, ("eval",)),
    "t5_tiny": (t5_tiny, ("eval", "train")),
}


def build(name):
    """(model, example inputs), seeded: the same random weights every time."""
    make_torchvision_importable()
    torch.manual_seed(0)
    factory, _ = CORPUS[name]
    return factory()
