import torch
from torch.nn import functional

from backends._ops_common import pad_list, symmetric_pool_pads
from backends._torch_like import register_global_pools
from backends.torch.ops import OPS


_MAX = {1: functional.max_pool1d, 2: functional.max_pool2d, 3: functional.max_pool3d}
_AVG = {1: functional.avg_pool1d, 2: functional.avg_pool2d, 3: functional.avg_pool3d}


@OPS.register("MaxPool", since=12)
def max_pool(x, *, auto_pad="NOTSET", ceil_mode=0, dilations, kernel_shape, pads, storage_order=0, strides):
    """Y, and ONNX's Indices (torch.onnx emits them for return_indices=True and max_unpool): flat over
    the whole unpadded input, N and C included, row-major (column-major over the spatial dims with
    storage_order=1)."""
    r = len(kernel_shape)
    spatial = list(x.shape[2:])
    if symmetric_pool_pads(pads, kernel_shape):
        y, i = _MAX[r](x, kernel_shape, strides, pads[:r], dilations, ceil_mode=bool(ceil_mode), return_indices=True)
    else:
        xp = functional.pad(x, pad_list(pads), value=float("-inf"))
        y, i = _MAX[r](xp, kernel_shape, strides, 0, dilations, ceil_mode=bool(ceil_mode), return_indices=True)
        # torch's index is into the padded input: back to the unpadded one
        padded = list(xp.shape[2:])
        pos, rest = [], i
        for d in reversed(range(r)):
            pos.insert(0, rest % padded[d] - pads[d])
            rest = rest // padded[d]
        i = sum(p * int(torch.tensor(spatial[d + 1:]).prod()) for d, p in enumerate(pos))
    if storage_order:  # column-major over the spatial dims
        pos, rest = [], i
        for d in reversed(range(r)):
            pos.insert(0, rest % spatial[d])
            rest = rest // spatial[d]
        i = sum(p * int(torch.tensor(spatial[:d]).prod()) for d, p in enumerate(pos))
    plane = int(torch.tensor(spatial).prod())
    base = torch.arange(x.shape[0] * x.shape[1]).reshape(x.shape[0], x.shape[1], *([1] * r)) * plane
    return y, i + base


@OPS.register("AveragePool", since=19)
def average_pool(x, *, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0, dilations=None, kernel_shape, pads,
                 strides):
    r = len(kernel_shape)
    if dilations and any(d != 1 for d in dilations):
        return _dilated_average_pool(x, kernel_shape, strides, pads, dilations, ceil_mode, count_include_pad)
    if symmetric_pool_pads(pads, kernel_shape):
        return _AVG[r](x, kernel_shape, strides, pads[:r], ceil_mode=bool(ceil_mode),
                       count_include_pad=bool(count_include_pad))
    # asymmetric pads: window sums over the explicitly padded input, divided by the count of
    # cells that ONNX counts (the padded ones too when count_include_pad=1)
    tp = pad_list(pads)
    sums = _AVG[r](functional.pad(x, tp), kernel_shape, strides, 0, ceil_mode=bool(ceil_mode), divisor_override=1)
    ones = torch.ones_like(x[:1, :1])
    counted = functional.pad(ones, tp, value=1.0 if count_include_pad else 0.0)
    count = _AVG[r](counted, kernel_shape, strides, 0, ceil_mode=bool(ceil_mode), divisor_override=1)
    return sums / count


_CONV = {1: functional.conv1d, 2: functional.conv2d, 3: functional.conv3d}


def _dilated_average_pool(x, kernel, strides, pads, dilations, ceil_mode, count_include_pad):
    """torch's avg_pool has no dilation: window sums as a depthwise convolution with a dilated kernel
    of ones, over the input padded by ONNX's pads (zeros) and, with ceil_mode, by what the last window
    reaches beyond them; divided by the count of cells ONNX counts (the pads too with
    count_include_pad=1, never what only ceil_mode adds)."""
    r = len(kernel)
    c = x.shape[1]
    tail, out = [], []
    for d in range(r):
        n, lo, hi = x.shape[2 + d], pads[d], pads[r + d]
        reach = (kernel[d] - 1) * dilations[d] + 1
        span = n + lo + hi - reach
        m = (-(-span // strides[d]) if ceil_mode else span // strides[d]) + 1
        if ceil_mode and (m - 1) * strides[d] >= n + lo:  # the last window would start in the end padding
            m -= 1
        out.append(m)
        tail.append(max(0, (m - 1) * strides[d] + reach - (n + lo + hi)))
    explicit = pad_list(pads)
    extra = [v for d in reversed(range(r)) for v in (0, tail[d])]
    ones = torch.ones((c, 1, *kernel), dtype=x.dtype)
    sums = _CONV[r](functional.pad(functional.pad(x, explicit), extra), ones, stride=strides, dilation=dilations,
                    groups=c)
    mask = functional.pad(torch.ones((1, 1, *x.shape[2:]), dtype=x.dtype), explicit,
                          value=1.0 if count_include_pad else 0.0)
    count = _CONV[r](functional.pad(mask, extra), ones[:1], stride=strides, dilation=dilations)
    crop = tuple([slice(None), slice(None)] + [slice(0, m) for m in out])
    return sums[crop] / count[crop]


register_global_pools(OPS, torch)
