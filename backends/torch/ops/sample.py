"""Sampling at computed positions: grid_sample, and fold (col2im)."""
from torch.nn import functional

from backends._table import Unsupported
from backends._torch_like import register_sampling
from backends.torch.ops import OPS
from backends.torch.ops._util import ints


register_sampling(OPS, functional)


@OPS.register("Col2Im", since=18)
def col2im(x, image_shape, block_shape, *, dilations=None, pads=None, strides=None):
    size, block = ints(image_shape), ints(block_shape)
    if len(size) != 2:
        raise Unsupported(f"Col2Im over {len(size)} spatial dims (torch's fold is 2-D)")
    pads = pads if pads is not None else [0, 0, 0, 0]
    # fold onto the padded image, then cut the padding off (torch's fold pads both sides alike)
    padded = [size[0] + pads[0] + pads[2], size[1] + pads[1] + pads[3]]
    y = functional.fold(x, padded, block, dilation=dilations if dilations is not None else 1, padding=0,
                        stride=strides if strides is not None else 1)
    return y[..., pads[0]:pads[0] + size[0], pads[1]:pads[1] + size[1]]
