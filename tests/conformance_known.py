"""Known failures of each backend on the ONNX backend node tests, with what was observed.

Strict: a case that starts passing fails the test (update this table when a fix lands).
Regenerate the numbers with `irtrace conformance --markdown docs/conformance.md`."""

KNOWN = {'onnxref': {'test_attention_3d_causal_bf16': "error: ValueError: Unable to convert type dtype('V2') into TensorProto "
                                              'element type.',
             'test_attention_4d_attn_mask_causal_bf16': "error: ValueError: Unable to convert type dtype('V2') into "
                                                        'TensorProto element type.',
             'test_attention_4d_causal_bf16': "error: ValueError: Unable to convert type dtype('V2') into TensorProto "
                                              'element type.',
             'test_attention_4d_causal_padded_kv_bf16': "error: ValueError: Unable to convert type dtype('V2') into "
                                                        'TensorProto element type.',
             'test_attention_4d_padded_kv_bf16': "error: ValueError: Unable to convert type dtype('V2') into "
                                                 'TensorProto element type.',
             'test_celu_bfloat16': "error: ValueError: Unable to convert type dtype('V2') into TensorProto element "
                                   'type.',
             'test_compress_bfloat16': "error: ValueError: Unable to convert type dtype('V2') into TensorProto element "
                                       'type.',
             'test_einsum_batch_matmul_bfloat16': "error: ValueError: Unable to convert type dtype('V2') into "
                                                  'TensorProto element type.',
             'test_einsum_sum_bfloat16': "error: ValueError: Unable to convert type dtype('V2') into TensorProto "
                                         'element type.',
             'test_einsum_transpose_bfloat16': "error: ValueError: Unable to convert type dtype('V2') into TensorProto "
                                               'element type.',
             'test_maxpool_2d_same_lower': 'fail: output 0: shape [1, 3, 33, 31] vs expected [1, 3, 32, 32]',
             'test_maxpool_2d_same_upper': 'fail: output 0: shape [1, 3, 31, 33] vs expected [1, 3, 32, 32]',
             'test_range_bfloat16_type_positive_delta': "error: ValueError: Unable to convert type dtype('V2') into "
                                                        'TensorProto element type.',
             'test_reversesequence_bfloat16': "error: ValueError: Unable to convert type dtype('V2') into TensorProto "
                                              'element type.',
             'test_unique_bfloat16_sorted_without_axis': "error: ValueError: Unable to convert type dtype('V2') into "
                                                         'TensorProto element type.'},
 'onnxruntime': {'test_attention_3d_causal_bf16': "error: ValueError: Unable to convert type dtype('V2') into "
                                                  'TensorProto element type.',
                 'test_attention_4d_attn_mask_causal_bf16': "error: ValueError: Unable to convert type dtype('V2') "
                                                            'into TensorProto element type.',
                 'test_attention_4d_causal_bf16': "error: ValueError: Unable to convert type dtype('V2') into "
                                                  'TensorProto element type.',
                 'test_attention_4d_causal_fp16': 'fail: output 0: max abs 0.000488 (rtol 0.001, atol 1e-07)',
                 'test_attention_4d_causal_padded_kv_bf16': "error: ValueError: Unable to convert type dtype('V2') "
                                                            'into TensorProto element type.',
                 'test_attention_4d_diff_heads_mask4d_padded_kv': 'error: Fail: [ONNXRuntimeError] : 1 : FAIL : '
                                                                  'Non-zero status code returned while running '
                                                                  "Attention node. Name:'Attention_0' Status Message: "
                                                                  '/onnxruntime_src/onn',
                 'test_attention_4d_padded_kv_bf16': "error: ValueError: Unable to convert type dtype('V2') into "
                                                     'TensorProto element type.',
                 'test_attention_4d_with_past_and_present_qk_matmul_bias_3d_mask_causal': 'fail: output 3: max abs inf '
                                                                                          '(rtol 0.001, atol 1e-07)',
                 'test_attention_4d_with_past_and_present_qk_matmul_bias_4d_mask_causal': 'fail: output 3: max abs inf '
                                                                                          '(rtol 0.001, atol 1e-07)',
                 'test_celu_bfloat16': "error: ValueError: Unable to convert type dtype('V2') into TensorProto element "
                                       'type.',
                 'test_compress_bfloat16': "error: ValueError: Unable to convert type dtype('V2') into TensorProto "
                                           'element type.',
                 'test_dft': 'fail: output 0: max abs 0.000343 (rtol 0.001, atol 1e-07)',
                 'test_dft_axis': 'fail: output 0: max abs 0.000292 (rtol 0.001, atol 1e-07)',
                 'test_dft_axis_opset19': 'fail: output 0: max abs 0.000292 (rtol 0.001, atol 1e-07)',
                 'test_dft_inverse': 'fail: output 0: max abs 1.86e-05 (rtol 0.001, atol 1e-07)',
                 'test_dft_inverse_opset19': 'fail: output 0: max abs 1.86e-05 (rtol 0.001, atol 1e-07)',
                 'test_dft_irfft': 'fail: output 0: max abs 5.34e-05 (rtol 0.001, atol 1e-07)',
                 'test_dft_irfft_opset19': 'fail: output 0: max abs 5.34e-05 (rtol 0.001, atol 1e-07)',
                 'test_dft_opset19': 'fail: output 0: max abs 0.000343 (rtol 0.001, atol 1e-07)',
                 'test_dft_rfft': 'fail: output 0: max abs 0.000214 (rtol 0.001, atol 1e-07)',
                 'test_dft_rfft_opset19': 'fail: output 0: max abs 0.000214 (rtol 0.001, atol 1e-07)',
                 'test_einsum_batch_matmul_bfloat16': "error: ValueError: Unable to convert type dtype('V2') into "
                                                      'TensorProto element type.',
                 'test_einsum_sum_bfloat16': "error: ValueError: Unable to convert type dtype('V2') into TensorProto "
                                             'element type.',
                 'test_einsum_transpose_bfloat16': "error: ValueError: Unable to convert type dtype('V2') into "
                                                   'TensorProto element type.',
                 'test_gru_batchwise': 'error: Fail: [ONNXRuntimeError] : 1 : FAIL : Exception during initialization: '
                                       '/onnxruntime_src/onnxruntime/core/providers/cpu/rnn/deep_cpu_gru.h:56 '
                                       'onnxruntime:',
                 'test_lstm_batchwise': 'error: Fail: [ONNXRuntimeError] : 1 : FAIL : Exception during initialization: '
                                        '/onnxruntime_src/onnxruntime/core/providers/cpu/rnn/lstm_base.h:53 '
                                        'onnxruntime::LS',
                 'test_maxunpool_export_with_output_shape': 'fail: output 0: max abs 8 (rtol 0.001, atol 1e-07)',
                 'test_range_bfloat16_type_positive_delta': "error: ValueError: Unable to convert type dtype('V2') "
                                                            'into TensorProto element type.',
                 'test_reduce_max_empty_set_bool': 'error: RuntimeException: [ONNXRuntimeError] : 6 : '
                                                   'RUNTIME_EXCEPTION : Non-zero status code returned while running '
                                                   "ReduceMax node. Name:'ReduceMax_0' Status Mess",
                 'test_resize_downsample_scales_cubic_align_corners': 'fail: output 0: max abs 1.05 (rtol 0.001, atol '
                                                                      '1e-07)',
                 'test_resize_downsample_scales_linear_align_corners': 'fail: output 0: max abs 0.857 (rtol 0.001, '
                                                                       'atol 1e-07)',
                 'test_reversesequence_bfloat16': "error: ValueError: Unable to convert type dtype('V2') into "
                                                  'TensorProto element type.',
                 'test_simple_rnn_batchwise': 'error: Fail: [ONNXRuntimeError] : 1 : FAIL : Exception during '
                                              'initialization: '
                                              '/onnxruntime_src/onnxruntime/core/providers/cpu/rnn/rnn.h:48 '
                                              'onnxruntime::RNN<T>::',
                 'test_stft': 'fail: output 0: max abs 8.39e-05 (rtol 0.001, atol 1e-07)',
                 'test_stft_with_window': 'fail: output 0: max abs 6.1e-05 (rtol 0.001, atol 1e-07)',
                 'test_unique_bfloat16_sorted_without_axis': "error: ValueError: Unable to convert type dtype('V2') "
                                                             'into TensorProto element type.'},
 'oracle': {'test_attention_3d_causal_bf16': "error: ValueError: Unable to convert type dtype('V2') into TensorProto "
                                             'element type.',
            'test_attention_4d_attn_mask_causal_bf16': "error: ValueError: Unable to convert type dtype('V2') into "
                                                       'TensorProto element type.',
            'test_attention_4d_causal_bf16': "error: ValueError: Unable to convert type dtype('V2') into TensorProto "
                                             'element type.',
            'test_attention_4d_causal_padded_kv_bf16': "error: ValueError: Unable to convert type dtype('V2') into "
                                                       'TensorProto element type.',
            'test_attention_4d_gqa_with_past_and_present_fp16': 'fail: output 0: max abs 0.000508 (rtol 0.001, atol '
                                                                '1e-07)',
            'test_attention_4d_padded_kv_bf16': "error: ValueError: Unable to convert type dtype('V2') into "
                                                'TensorProto element type.',
            'test_bitcast_2d_float32_to_int32': 'error: ValueError: BitCast requires input and output types to have '
                                                'the same bit-width, but got float64 (64 bits) and int32 (32 bits)',
            'test_bitcast_float32_to_int32': 'error: ValueError: BitCast requires input and output types to have the '
                                             'same bit-width, but got float64 (64 bits) and int32 (32 bits)',
            'test_bitcast_scalar_float32_to_int32': 'error: ValueError: BitCast requires input and output types to '
                                                    'have the same bit-width, but got float64 (64 bits) and int32 (32 '
                                                    'bits)',
            'test_celu_bfloat16': "error: ValueError: Unable to convert type dtype('V2') into TensorProto element "
                                  'type.',
            'test_compress_bfloat16': "error: ValueError: Unable to convert type dtype('V2') into TensorProto element "
                                      'type.',
            'test_dft_inverse': 'fail: output 0: max abs 1.47e-06 (rtol 0.001, atol 1e-07)',
            'test_dft_inverse_opset19': 'fail: output 0: max abs 1.47e-06 (rtol 0.001, atol 1e-07)',
            'test_einsum_batch_matmul_bfloat16': "error: ValueError: Unable to convert type dtype('V2') into "
                                                 'TensorProto element type.',
            'test_einsum_sum_bfloat16': "error: ValueError: Unable to convert type dtype('V2') into TensorProto "
                                        'element type.',
            'test_einsum_transpose_bfloat16': "error: ValueError: Unable to convert type dtype('V2') into TensorProto "
                                              'element type.',
            'test_range_bfloat16_type_positive_delta': "error: ValueError: Unable to convert type dtype('V2') into "
                                                       'TensorProto element type.',
            'test_reversesequence_bfloat16': "error: ValueError: Unable to convert type dtype('V2') into TensorProto "
                                             'element type.',
            'test_unique_bfloat16_sorted_without_axis': "error: ValueError: Unable to convert type dtype('V2') into "
                                                        'TensorProto element type.'},
 'torch': {'test_add_uint16': 'error: NotImplementedError: "add_stub" not implemented for \'UInt16\'',
           'test_add_uint32': 'error: NotImplementedError: "add_stub" not implemented for \'UInt32\'',
           'test_add_uint64': 'error: NotImplementedError: "add_stub" not implemented for \'UInt64\'',
           'test_averagepool_2d_dilations': "error: NotImplementedError: torch's avg_pool has no dilation",
           'test_averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_False': 'error: '
                                                                                            'NotImplementedError: '
                                                                                            "torch's avg_pool has no "
                                                                                            'dilation',
           'test_averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_True': 'error: '
                                                                                           'NotImplementedError: '
                                                                                           "torch's avg_pool has no "
                                                                                           'dilation',
           'test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_False': 'error: '
                                                                                            'NotImplementedError: '
                                                                                            "torch's avg_pool has no "
                                                                                            'dilation',
           'test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_True': 'error: '
                                                                                           'NotImplementedError: '
                                                                                           "torch's avg_pool has no "
                                                                                           'dilation',
           'test_averagepool_3d_dilations_small': "error: NotImplementedError: torch's avg_pool has no dilation",
           'test_celu_bfloat16': "error: TypeError: can't convert np.ndarray of type numpy.void. The only supported "
                                 'types are: float64, float32, float16, complex64, complex128, int64, int32, int',
           'test_dft_inverse': 'fail: output 0: max abs 9.54e-07 (rtol 0.001, atol 1e-07)',
           'test_div_uint16': 'error: NotImplementedError: "div_trunc_cpu" not implemented for \'UInt16\'',
           'test_div_uint32': 'error: NotImplementedError: "div_trunc_cpu" not implemented for \'UInt32\'',
           'test_div_uint64': 'error: NotImplementedError: "div_trunc_cpu" not implemented for \'UInt64\'',
           'test_einsum_batch_matmul_bfloat16': "error: TypeError: can't convert np.ndarray of type numpy.void. The "
                                                'only supported types are: float64, float32, float16, complex64, '
                                                'complex128, int64, int32, int',
           'test_einsum_sum_bfloat16': "error: TypeError: can't convert np.ndarray of type numpy.void. The only "
                                       'supported types are: float64, float32, float16, complex64, complex128, int64, '
                                       'int32, int',
           'test_einsum_transpose_bfloat16': "error: TypeError: can't convert np.ndarray of type numpy.void. The only "
                                             'supported types are: float64, float32, float16, complex64, complex128, '
                                             'int64, int32, int',
           'test_greater_equal_uint16': 'error: NotImplementedError: "ge_cpu" not implemented for \'UInt16\'',
           'test_greater_equal_uint32': 'error: NotImplementedError: "ge_cpu" not implemented for \'UInt32\'',
           'test_greater_equal_uint64': 'error: NotImplementedError: "ge_cpu" not implemented for \'UInt64\'',
           'test_greater_uint16': 'error: NotImplementedError: "gt_cpu" not implemented for \'UInt16\'',
           'test_greater_uint32': 'error: NotImplementedError: "gt_cpu" not implemented for \'UInt32\'',
           'test_greater_uint64': 'error: NotImplementedError: "gt_cpu" not implemented for \'UInt64\'',
           'test_less_equal_uint16': 'error: NotImplementedError: "le_cpu" not implemented for \'UInt16\'',
           'test_less_equal_uint32': 'error: NotImplementedError: "le_cpu" not implemented for \'UInt32\'',
           'test_less_equal_uint64': 'error: NotImplementedError: "le_cpu" not implemented for \'UInt64\'',
           'test_less_uint16': 'error: NotImplementedError: "lt_cpu" not implemented for \'UInt16\'',
           'test_less_uint32': 'error: NotImplementedError: "lt_cpu" not implemented for \'UInt32\'',
           'test_less_uint64': 'error: NotImplementedError: "lt_cpu" not implemented for \'UInt64\'',
           'test_max_uint16': 'error: NotImplementedError: "maximum_cpu" not implemented for \'UInt16\'',
           'test_max_uint32': 'error: NotImplementedError: "maximum_cpu" not implemented for \'UInt32\'',
           'test_max_uint64': 'error: NotImplementedError: "maximum_cpu" not implemented for \'UInt64\'',
           'test_min_uint16': 'error: NotImplementedError: "minimum_cpu" not implemented for \'UInt16\'',
           'test_min_uint32': 'error: NotImplementedError: "minimum_cpu" not implemented for \'UInt32\'',
           'test_min_uint64': 'error: NotImplementedError: "minimum_cpu" not implemented for \'UInt64\'',
           'test_mod_uint16': 'error: NotImplementedError: "remainder_cpu" not implemented for \'UInt16\'',
           'test_mod_uint32': 'error: NotImplementedError: "remainder_cpu" not implemented for \'UInt32\'',
           'test_mod_uint64': 'error: NotImplementedError: "remainder_cpu" not implemented for \'UInt64\'',
           'test_range_bfloat16_type_positive_delta': "error: TypeError: can't convert np.ndarray of type numpy.void. "
                                                      'The only supported types are: float64, float32, float16, '
                                                      'complex64, complex128, int64, int32, int',
           'test_reduce_max_empty_set': 'error: IndexError: amax(): Expected reduction dim 1 to have non-zero size.',
           'test_reduce_max_empty_set_bool': 'error: IndexError: amax(): Expected reduction dim 1 to have non-zero '
                                             'size.',
           'test_reduce_min_empty_set': 'error: IndexError: amin(): Expected reduction dim 1 to have non-zero size.',
           'test_resize_downsample_scales_cubic_A_n0p5_exclude_outside': 'fail: output 0: max abs 0.146 (rtol 0.001, '
                                                                         'atol 1e-07)',
           'test_resize_downsample_scales_cubic_align_corners': 'fail: output 0: max abs 1.05 (rtol 0.001, atol 1e-07)',
           'test_resize_downsample_scales_linear_align_corners': 'fail: output 0: max abs 0.857 (rtol 0.001, atol '
                                                                 '1e-07)',
           'test_resize_downsample_scales_linear_half_pixel_symmetric': 'error: NotImplementedError: linear Resize '
                                                                        'with '
                                                                        'coordinate_transformation_mode=half_pixel_symmetric',
           'test_resize_downsample_sizes_linear_pytorch_half_pixel': 'fail: output 0: max abs 1.5 (rtol 0.001, atol '
                                                                     '1e-07)',
           'test_resize_downsample_sizes_nearest': 'fail: output 0: max abs 5 (rtol 0.001, atol 1e-07)',
           'test_resize_downsample_sizes_nearest_not_larger': 'fail: output 0: shape [1, 1, 1, 3] vs expected [1, 1, '
                                                              '1, 2]',
           'test_resize_downsample_sizes_nearest_not_smaller': 'fail: output 0: shape [1, 1, 1, 3] vs expected [1, 1, '
                                                               '2, 3]',
           'test_resize_tf_crop_and_resize': 'error: NotImplementedError: linear Resize with '
                                             'coordinate_transformation_mode=tf_crop_and_resize',
           'test_resize_tf_crop_and_resize_axes_2_3': 'error: NotImplementedError: linear Resize with '
                                                      'coordinate_transformation_mode=tf_crop_and_resize',
           'test_resize_tf_crop_and_resize_axes_3_2': 'error: NotImplementedError: linear Resize with '
                                                      'coordinate_transformation_mode=tf_crop_and_resize',
           'test_resize_tf_crop_and_resize_extrapolation_value': 'error: NotImplementedError: linear Resize with '
                                                                 'coordinate_transformation_mode=tf_crop_and_resize',
           'test_resize_upsample_scales_cubic_A_n0p5_exclude_outside': 'fail: output 0: max abs 0.234 (rtol 0.001, '
                                                                       'atol 1e-07)',
           'test_resize_upsample_scales_cubic_asymmetric': 'error: NotImplementedError: linear Resize with '
                                                           'coordinate_transformation_mode=asymmetric',
           'test_resize_upsample_scales_linear_half_pixel_symmetric': 'error: NotImplementedError: linear Resize with '
                                                                      'coordinate_transformation_mode=half_pixel_symmetric',
           'test_resize_upsample_sizes_nearest': 'fail: output 0: max abs 2 (rtol 0.001, atol 1e-07)',
           'test_resize_upsample_sizes_nearest_axes_2_3': 'fail: output 0: max abs 2 (rtol 0.001, atol 1e-07)',
           'test_resize_upsample_sizes_nearest_axes_3_2': 'fail: output 0: max abs 2 (rtol 0.001, atol 1e-07)',
           'test_resize_upsample_sizes_nearest_ceil_half_pixel': 'error: NotImplementedError: nearest Resize with '
                                                                 'half_pixel/ceil',
           'test_resize_upsample_sizes_nearest_floor_align_corners': 'error: NotImplementedError: nearest Resize with '
                                                                     'align_corners/floor',
           'test_resize_upsample_sizes_nearest_not_larger': 'fail: output 0: shape [1, 1, 7, 8] vs expected [1, 1, 7, '
                                                            '7]',
           'test_resize_upsample_sizes_nearest_not_smaller': 'fail: output 0: shape [1, 1, 7, 8] vs expected [1, 1, 8, '
                                                             '8]',
           'test_resize_upsample_sizes_nearest_round_prefer_ceil_asymmetric': 'error: NotImplementedError: nearest '
                                                                              'Resize with '
                                                                              'asymmetric/round_prefer_ceil',
           'test_spacetodepth': "error: TypeError: space_to_depth() got an unexpected keyword argument 'mode'",
           'test_spacetodepth_crd_mode_example': 'error: TypeError: space_to_depth() got an unexpected keyword '
                                                 "argument 'mode'",
           'test_spacetodepth_dcr_mode_example': 'error: TypeError: space_to_depth() got an unexpected keyword '
                                                 "argument 'mode'",
           'test_spacetodepth_example': "error: TypeError: space_to_depth() got an unexpected keyword argument 'mode'",
           'test_sub_uint16': 'error: NotImplementedError: "add_stub" not implemented for \'UInt16\'',
           'test_sub_uint32': 'error: NotImplementedError: "add_stub" not implemented for \'UInt32\'',
           'test_sub_uint64': 'error: NotImplementedError: "add_stub" not implemented for \'UInt64\'',
           'test_unique_bfloat16_sorted_without_axis': "error: TypeError: can't convert np.ndarray of type numpy.void. "
                                                       'The only supported types are: float64, float32, float16, '
                                                       'complex64, complex128, int64, int32, int'}}
