"""Op functions written once for the frameworks whose functional API is torch's (torch, OneFlow):
each `register_*` defines the ops over the `functional` module it is given and registers them in
that backend's table. No framework is imported here: each backend passes its own module.

A repro inlines the op function as it is written here, its `functional` imported as the backend's
own module (`import oneflow.nn.functional as functional`), so it shows that framework's calls."""
from backends._ops_common import pad_list


def register_conv(table, functional):
    """Conv and ConvTranspose (1-D to 3-D) with `functional`'s conv{r}d / conv_transpose{r}d."""
    @table.register("Conv", since=11)
    def conv(x, w, b=None, *, auto_pad="NOTSET", dilations, group=1, kernel_shape, pads, strides):
        r = len(kernel_shape)
        begins, ends = pads[:r], pads[r:]
        conv_nd = getattr(functional, f"conv{r}d")
        if begins == ends:
            return conv_nd(x, w, b, stride=strides, padding=begins, dilation=dilations, groups=group)
        # the conv only takes symmetric padding: pad explicitly first, as a porter would
        x = functional.pad(x, pad_list(pads))
        return conv_nd(x, w, b, stride=strides, padding=0, dilation=dilations, groups=group)

    @table.register("ConvTranspose", since=11)
    def conv_transpose(x, w, b=None, *, auto_pad="NOTSET", dilations, group=1, kernel_shape, output_padding,
                       pads, strides, output_shape=None):
        r = len(kernel_shape)
        begins, ends = pads[:r], pads[r:]
        conv_t = getattr(functional, f"conv_transpose{r}d")
        if begins == ends:
            return conv_t(x, w, b, stride=strides, padding=begins, output_padding=output_padding, groups=group,
                          dilation=dilations)
        # asymmetric pads: the full transposed conv, then crop begins/ends (pads remove output)
        y = conv_t(x, w, b, stride=strides, padding=0, output_padding=output_padding, groups=group,
                   dilation=dilations)
        index = [slice(None), slice(None)] + [slice(bg, y.shape[2 + i] - e) for i, (bg, e) in
                                              enumerate(zip(begins, ends))]
        return y[tuple(index)]
