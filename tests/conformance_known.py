"""Known failures of each backend on the ONNX backend node tests, with what was observed.

Strict: a case that starts passing fails the test (update this table when a fix lands).
Regenerate the numbers with `irtrace conformance --markdown docs/conformance.md`."""

KNOWN = {'onnxref': {'test_maxpool_2d_same_lower': 'fail: output 0: shape [1, 3, 33, 31] vs expected [1, 3, 32, 32]',
             'test_maxpool_2d_same_upper': 'fail: output 0: shape [1, 3, 31, 33] vs expected [1, 3, 32, 32]'},
 'onnxruntime': {'test_attention_4d_diff_heads_mask4d_padded_kv': 'error: Fail: [ONNXRuntimeError] : 1 : FAIL : '
                                                                  'Non-zero status code returned while running '
                                                                  "Attention node. Name:'Attention_0' Status Message: "
                                                                  '/onnxruntime_src/onnxruntime/core/providers/cpu/llm/attention_helper.h:164 '
                                                                  'onnxruntime::common::Status '
                                                                  'onnxruntime::attention_helper::ComputeOutputShapeForAttention(co',
                 'test_attention_4d_with_past_and_present_qk_matmul_bias_3d_mask_causal': 'fail: output 3: max abs inf '
                                                                                          '(rtol 0.001, atol 1e-07 + '
                                                                                          '2.67e-07)',
                 'test_attention_4d_with_past_and_present_qk_matmul_bias_4d_mask_causal': 'fail: output 3: max abs inf '
                                                                                          '(rtol 0.001, atol 1e-07 + '
                                                                                          '2.89e-07)',
                 'test_dft': 'fail: output 0: max abs 0.000343 (rtol 0.001, atol 1e-07 + 6.44e-05)',
                 'test_dft_axis': 'fail: output 0: max abs 0.000292 (rtol 0.001, atol 1e-07 + 0.000113)',
                 'test_dft_axis_opset19': 'fail: output 0: max abs 0.000292 (rtol 0.001, atol 1e-07 + 0.000113)',
                 'test_dft_inverse': 'fail: output 0: max abs 1.86e-05 (rtol 0.001, atol 1e-07 + 6.44e-06)',
                 'test_dft_inverse_opset19': 'fail: output 0: max abs 1.86e-05 (rtol 0.001, atol 1e-07 + 6.44e-06)',
                 'test_dft_opset19': 'fail: output 0: max abs 0.000343 (rtol 0.001, atol 1e-07 + 6.44e-05)',
                 'test_dft_rfft': 'fail: output 0: max abs 0.000214 (rtol 0.001, atol 1e-07 + 6.44e-05)',
                 'test_dft_rfft_opset19': 'fail: output 0: max abs 0.000214 (rtol 0.001, atol 1e-07 + 6.44e-05)',
                 'test_maxunpool_export_with_output_shape': 'fail: output 0: max abs 8 (rtol 0.001, atol 1e-07 + '
                                                            '9.54e-07)',
                 'test_reduce_max_empty_set_bool': 'error: RuntimeException: [ONNXRuntimeError] : 6 : '
                                                   'RUNTIME_EXCEPTION : Non-zero status code returned while running '
                                                   "ReduceMax node. Name:'ReduceMax_0' Status Message: ReduceMax is "
                                                   'not defined for empty set with bool type | stderr: 2026-12-05 '
                                                   '11:54:40.985926701 [E:onnxruntime:, sequential_executor.cc:677 '
                                                   'Exec',
                 'test_resize_downsample_scales_cubic_align_corners': 'fail: output 0: max abs 1.05 (rtol 0.001, atol '
                                                                      '1e-07 + 1.78e-06)',
                 'test_resize_downsample_scales_linear_align_corners': 'fail: output 0: max abs 0.857 (rtol 0.001, '
                                                                       'atol 1e-07 + 3.75e-07)',},
 'oracle': {},
 'torch': {}}
