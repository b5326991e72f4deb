"""How a repro script drives torch.autograd, straight-line (the fields: see
backends/megengine/repro.py). It does what backends/torch/autodiff.py does for one op."""
RECIPE = {
    "imports": ["import torch"],
    "tensor": "torch.tensor({})",
    "leaf": "torch.tensor({}, requires_grad=True)",
    "numpy": "{}.detach().numpy()",
    "none_is_zero": True,
    "vjp": ["{op}",
            "[{hs}] = torch.autograd.grad([{ys}], [{xs}], [{gs}], allow_unused=True, materialize_grads=True)"],
    "vjp2": ["{op}",
             "[{hs}] = torch.autograd.grad([{ys}], [{ps}], [{gs}], create_graph=True, allow_unused=True,",
             "                             materialize_grads=True)",
             "s = {s}",
             "wrt = [{ws}]",
             "[{ds}] = (torch.autograd.grad(s, wrt, allow_unused=True, materialize_grads=True) if s.requires_grad",
             "          else [torch.zeros_like(t) for t in wrt])  # s independent of them: zero, as irtrace"],
    "term": "({h} * {u}).sum()",
}
