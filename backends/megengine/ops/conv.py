from megengine import functional

from backends._table import Unsupported
from backends.megengine.ops import OPS
from backends.megengine.ops._util import spatial_only

_CONV = {1: functional.conv1d, 2: functional.conv2d, 3: functional.conv3d}


@OPS.register("Conv", since=11)
def conv(x, w, b=None, *, auto_pad="NOTSET", dilations, group=1, kernel_shape, pads, strides):
    r = len(kernel_shape)
    if r not in _CONV:
        raise Unsupported(f"MegEngine has no {r}-D conv")
    begins, ends = pads[:r], pads[r:]
    if begins != ends:
        x = functional.pad(x, spatial_only(pads, r))  # MegEngine's conv pads symmetrically only: pad first
        begins = [0] * r
    o, i_per_group = w.shape[0], w.shape[1]
    if group > 1:  # MegEngine's grouped weight is (G, O/G, I/G, k...)
        w = functional.reshape(w, (group, o // group, i_per_group) + tuple(w.shape[2:]))
    if b is not None:
        b = functional.reshape(b, (1, o) + (1,) * r)  # MegEngine's conv bias is (1, O, 1, ...)
    if r == 1:
        return functional.conv1d(x, w, b, stride=strides[0], padding=begins[0], dilation=dilations[0], groups=group)
    return _CONV[r](x, w, b, stride=tuple(strides), padding=tuple(begins), dilation=tuple(dilations), groups=group)


@OPS.register("ConvTranspose", since=11)
def conv_transpose(x, w, b=None, *, auto_pad="NOTSET", dilations, group=1, kernel_shape, output_padding, pads,
                   strides, output_shape=None):
    r = len(kernel_shape)
    if r not in (2, 3):
        raise Unsupported(f"MegEngine has no {r}-D conv_transpose")
    begins, ends = pads[:r], pads[r:]
    cin, cout_per_group = w.shape[0], w.shape[1]
    if group > 1:  # MegEngine's grouped transposed weight is (G, I/G, O/G, k...)
        w = functional.reshape(w, (group, cin // group, cout_per_group) + tuple(w.shape[2:]))
    if b is not None:
        b = functional.reshape(b, (1, cout_per_group * group) + (1,) * r)
    fn = functional.conv_transpose2d if r == 2 else functional.conv_transpose3d
    if begins == ends:
        return fn(x, w, b, stride=tuple(strides), padding=tuple(begins), output_padding=tuple(output_padding),
                  dilation=tuple(dilations), groups=group)
    # asymmetric pads remove output: the full transposed conv, then crop, as a porter would
    y = fn(x, w, b, stride=tuple(strides), padding=(0,) * r, output_padding=tuple(output_padding),
           dilation=tuple(dilations), groups=group)
    index = (slice(None), slice(None)) + tuple(slice(bg, y.shape[2 + i] - e) for i, (bg, e) in enumerate(zip(begins, ends)))
    return y[index]
