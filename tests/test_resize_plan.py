"""ONNX Resize's arithmetic shared by the backends (backends/_ops_common.py): the output size and
scale (resize_target), the separable plan (resize_plan) on ties, and where a framework's interpolate
cannot compute ONNX's Resize (resize_gap): the framework backends refuse those nodes (UNSUPPORTED)
instead of reporting their own translation's difference as the framework's bug."""
import numpy as np
import pytest

from backends._ops_common import ResizeAttrs, resize_gap, resize_plan, resize_target


def test_target_sizes_policy_and_scales():
    assert resize_target([1, 1, 2, 2], None, np.array([7, 8]), [2, 3], "not_larger") == ([1.0, 1.0, 3.5, 3.5],
                                                                                        [1, 1, 7, 7])
    assert resize_target([1, 1, 2, 2], None, np.array([7, 8]), [2, 3], "not_smaller") == ([1.0, 1.0, 4.0, 4.0],
                                                                                         [1, 1, 8, 8])
    # floor(in * scale) in float64 (ONNX's shape inference): 0.35f * 20 = 6.99999988
    assert resize_target([2, 4, 24, 20], np.array([1, 1, 0.375, 0.35], np.float32), None, None)[1] == [2, 4, 9, 6]


@pytest.mark.parametrize("nearest_mode, picked", [("round_prefer_floor", [0, 1, 1, 2]), ("round_prefer_ceil", [0, 1, 2, 2]),
                                                  ("floor", [0, 0, 1, 2]), ("ceil", [0, 1, 2, 2])])
def test_nearest_ties(nearest_mode, picked):
    """3 -> 4 with asymmetric coordinates: sources 0, 0.75, 1.5, 2.25; the tie at 1.5 goes down for
    round_prefer_floor and up for round_prefer_ceil (functional.interpolate's nearest-exact)."""
    (step,), out = resize_plan([3], np.array([4 / 3], np.float64), None, None, None,
                               ResizeAttrs("nearest", "asymmetric", nearest_mode))
    _, index, weight, outside = step
    assert out == [4] and outside is None
    assert index[np.arange(4), weight.argmax(1)].tolist() == picked


@pytest.mark.parametrize("args, why", [
    (([1, 1, 2, 4], np.array([1, 1, 1, 0.6], np.float32), None, None, "align_corners", "stretch"),
     "align_corners with a scale whose product with the input size is not whole"),
    (([1, 1, 2, 4], None, np.array([1, 1, 2, 1]), None, "pytorch_half_pixel", "stretch"),
     "pytorch_half_pixel to an output of size 1"),
    (([1, 1, 2, 2], None, np.array([7, 8]), [2, 3], "half_pixel", "not_larger"), "keep_aspect_ratio_policy not_larger"),
    (([1, 3, 4, 4], np.array([1, 2, 1, 1], np.float32), None, None, "half_pixel", "stretch"),
     "a resize of the batch or channel dim"),
    (([1, 1, 4, 4], np.array([1, 1, 2, 2], np.float32), None, None, "align_corners", "stretch"), None),
    (([1, 1, 5, 4], np.array([1, 1, 0.8, 1.75], np.float32), None, None, "half_pixel", "stretch"), None),
])
def test_where_interpolate_is_not_onnx_resize(args, why):
    gap = resize_gap(*args)
    assert (gap is None) if why is None else why in gap


def test_a_framework_that_derives_its_scale_from_the_size():
    """tf.image.resize takes sizes: its scale in / out is ONNX's 1 / scale only where in * scale is whole."""
    args = ([1, 1, 5, 4], np.array([1, 1, 0.8, 1.75], np.float32), None, None, "half_pixel", "stretch")
    assert resize_gap(*args, derives_scale=True) is None  # 5 * 0.8 = 4, 4 * 1.75 = 7: whole
    args = ([1, 1, 5, 4], np.array([1, 1, 0.7, 1.75], np.float32), None, None, "half_pixel", "stretch")
    assert "the framework's scale is in / out" in resize_gap(*args, derives_scale=True)
