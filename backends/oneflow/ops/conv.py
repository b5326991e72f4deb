from oneflow.nn import functional

from backends._ops_common import pad_list
from backends.oneflow.ops import OPS


_CONV = {1: functional.conv1d, 2: functional.conv2d, 3: functional.conv3d}
_CONV_T = {1: functional.conv_transpose1d, 2: functional.conv_transpose2d, 3: functional.conv_transpose3d}


@OPS.register("Conv", since=11)
def conv(x, w, b=None, *, auto_pad="NOTSET", dilations, group=1, kernel_shape, pads, strides):
    r = len(kernel_shape)
    begins, ends = pads[:r], pads[r:]
    if begins == ends:
        return _CONV[r](x, w, b, stride=strides, padding=begins, dilation=dilations, groups=group)
    # OneFlow's conv only takes symmetric padding: pad explicitly first, as a porter would
    x = functional.pad(x, pad_list(pads))
    return _CONV[r](x, w, b, stride=strides, padding=0, dilation=dilations, groups=group)


@OPS.register("ConvTranspose", since=11)
def conv_transpose(x, w, b=None, *, auto_pad="NOTSET", dilations, group=1, kernel_shape, output_padding,
                   pads, strides, output_shape=None):
    r = len(kernel_shape)
    begins, ends = pads[:r], pads[r:]
    if begins == ends:
        return _CONV_T[r](x, w, b, stride=strides, padding=begins, output_padding=output_padding,
                          groups=group, dilation=dilations)
    # asymmetric pads: the full transposed conv, then crop begins/ends (pads remove output)
    y = _CONV_T[r](x, w, b, stride=strides, padding=0, output_padding=output_padding, groups=group,
                   dilation=dilations)
    index = [slice(None), slice(None)] + [slice(bg, y.shape[2 + i] - e) for i, (bg, e) in enumerate(zip(begins, ends))]
    return y[tuple(index)]
