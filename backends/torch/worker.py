from backends.torch.adapter import TorchAdapter  # at import: a fork server of the reference imports it once


def make_adapter():
    return TorchAdapter()
