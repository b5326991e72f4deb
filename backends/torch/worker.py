def make_adapter():
    from backends.torch.adapter import TorchAdapter
    return TorchAdapter()
