from paddle.nn import functional

from backends._table import Unsupported
from backends.paddle.ops import OPS
from backends.paddle.ops._util import paired

_CONV = {1: functional.conv1d, 2: functional.conv2d, 3: functional.conv3d}
_CONV_T = {1: functional.conv1d_transpose, 2: functional.conv2d_transpose, 3: functional.conv3d_transpose}


@OPS.register("Conv", since=11)
def conv(x, w, b=None, *, auto_pad="NOTSET", dilations, group=1, kernel_shape, pads, strides):
    r = len(kernel_shape)
    if r not in _CONV:
        raise Unsupported(f"Paddle has no {r}-D conv")
    # Paddle's padding list takes each dimension's (begin, end): asymmetric pads need no explicit pad
    return _CONV[r](x, w, b, stride=list(strides), padding=paired(pads), dilation=list(dilations), groups=group)


@OPS.register("ConvTranspose", since=11)
def conv_transpose(x, w, b=None, *, auto_pad="NOTSET", dilations, group=1, kernel_shape, output_padding, pads,
                   strides, output_shape=None):
    r = len(kernel_shape)
    if r not in _CONV_T:
        raise Unsupported(f"Paddle has no {r}-D conv_transpose")
    if output_shape is not None:
        raise Unsupported("ConvTranspose with output_shape: the canonical IR gives explicit pads")
    return _CONV_T[r](x, w, b, stride=list(strides), padding=paired(pads), output_padding=list(output_padding),
                      dilation=list(dilations), groups=group)
