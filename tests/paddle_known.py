"""What PaddlePaddle 3.3.1 (CPU) gets wrong or cannot do, as observed against torch with the float64
oracle arbitrating. Strict: each entry must still show this verdict and this message; a Paddle fix
(or a translation fix) shows up as a failure that asks to update this file.

Keys of KNOWN: (op case, mode, output) -> (verdict, observed). ERROR messages are Paddle's own.
  - fwd, running_var (out2): Paddle's batch_norm updates running_var with the biased (population)
    variance; torch uses the unbiased one (tests/backends/test_paddle.py::test_running_var_is_the_biased_estimator).
  - vjp2, d2g of Pad (constant value 1.5, and -1 on a 2-D tensor): Paddle's pad double grad pads
    the direction with the pad value instead of zeros: a silent wrong value where torch has 0.
  - vjp2, training-mode batch_norm and instance_norm: their double grad kernels fail ("Required tensor
    shall not be nullptr") when the cotangent does not require grad, as in a gradient penalty's own
    graph (the harness hid it while it attached the cotangent).
  - vjp2 ERRORs: no double-grad op (or kernel) registered for the op; eval-mode batch_norm refuses
    double backward ("is_test = True CANNOT be used in train program").
"""

KNOWN = {('acosh', 'vjp2', 'd2g:*'): ('ERROR',
                              "RuntimeError: (Unavailable) The Op acosh_grad doesn't have any grad op. If you don't "
                              'intend calculat'),
 ('acosh', 'vjp2', 'd2x:*'): ('ERROR',
                              "RuntimeError: (Unavailable) The Op acosh_grad doesn't have any grad op. If you don't "
                              'intend calculat'),
 ('asin', 'vjp2', 'd2g:*'): ('ERROR',
                             "RuntimeError: (Unavailable) The Op asin_grad doesn't have any grad op. If you don't "
                             'intend calculati'),
 ('asin', 'vjp2', 'd2x:*'): ('ERROR',
                             "RuntimeError: (Unavailable) The Op asin_grad doesn't have any grad op. If you don't "
                             'intend calculati'),
 ('asinh', 'vjp2', 'd2g:*'): ('ERROR',
                              "RuntimeError: (Unavailable) The Op asinh_grad doesn't have any grad op. If you don't "
                              'intend calculat'),
 ('asinh', 'vjp2', 'd2x:*'): ('ERROR',
                              "RuntimeError: (Unavailable) The Op asinh_grad doesn't have any grad op. If you don't "
                              'intend calculat'),
 ('atan', 'vjp2', 'd2g:*'): ('ERROR',
                             "RuntimeError: (Unavailable) The Op atan_grad doesn't have any grad op. If you don't "
                             'intend calculati'),
 ('atan', 'vjp2', 'd2x:*'): ('ERROR',
                             "RuntimeError: (Unavailable) The Op atan_grad doesn't have any grad op. If you don't "
                             'intend calculati'),
 ('atanh', 'vjp2', 'd2g:*'): ('ERROR',
                              "RuntimeError: (Unavailable) The Op atanh_grad doesn't have any grad op. If you don't "
                              'intend calculat'),
 ('atanh', 'vjp2', 'd2x:*'): ('ERROR',
                              "RuntimeError: (Unavailable) The Op atanh_grad doesn't have any grad op. If you don't "
                              'intend calculat'),
 ('avgpool3d', 'vjp2', 'd2g:*'): ('ERROR',
                                  "RuntimeError: (Unavailable) The Op pool3d_grad doesn't have any grad op. If you "
                                  "don't intend calcula"),
 ('avgpool3d', 'vjp2', 'd2x:*'): ('ERROR',
                                  "RuntimeError: (Unavailable) The Op pool3d_grad doesn't have any grad op. If you "
                                  "don't intend calcula"),
 ('batchnorm_eval', 'vjp2', 'd2g:*'): ('ERROR',
                                       'ValueError: (InvalidArgument) `is_test = True` CANNOT be used in train '
                                       'program. If you want to use g'),
 ('batchnorm_eval', 'vjp2', 'd2x:*'): ('ERROR',
                                       'ValueError: (InvalidArgument) `is_test = True` CANNOT be used in train '
                                       'program. If you want to use g'),
 ('batchnorm_eval_stats', 'vjp', '*'): ('UNSUPPORTED',
                                        "paddle's BatchNormalization does not differentiate its input(s) 3 "
                                        '(batchnorm_eval_stats.in3), 4 (bat'),
 ('batchnorm_eval_stats', 'vjp2', 'd2g:*'): ('UNSUPPORTED',
                                             "paddle's BatchNormalization does not differentiate its input(s) 3 "
                                             '(batchnorm_eval_stats.in3), 4 (bat'),
 ('batchnorm_eval_stats', 'vjp2', 'd2x:*'): ('UNSUPPORTED',
                                             "paddle's BatchNormalization does not differentiate its input(s) 3 "
                                             '(batchnorm_eval_stats.in3), 4 (bat'),
 ('batchnorm_train', 'fwd', 'batchnorm_train.out2'): ('DIVERGENT',
                                                      'paddle 0.6794 vs torch 0.682 at [2], max abs 0.00262'),
 ('batchnorm_train', 'vjp2', 'd2g:*'): ('ERROR',
                                        'ValueError: (InvalidArgument) Required tensor shall not be nullptr, but '
                                        'received nullptr. [Hint: ten'),
 ('batchnorm_train', 'vjp2', 'd2x:*'): ('ERROR',
                                        'ValueError: (InvalidArgument) Required tensor shall not be nullptr, but '
                                        'received nullptr. [Hint: ten'),
 ('batchnorm_train_3d', 'fwd', 'batchnorm_train_3d.out2'): ('DIVERGENT',
                                                            'paddle 0.9324 vs torch 0.937 at [0], max abs 0.00463'),
 ('batchnorm_train_3d', 'vjp2', 'd2g:*'): ('ERROR',
                                           'ValueError: (InvalidArgument) Required tensor shall not be nullptr, but '
                                           'received nullptr. [Hint: ten'),
 ('batchnorm_train_3d', 'vjp2', 'd2x:*'): ('ERROR',
                                           'ValueError: (InvalidArgument) Required tensor shall not be nullptr, but '
                                           'received nullptr. [Hint: ten'),
 ('batchnorm_train_biased', 'vjp2', 'd2g:*'): ('ERROR',
                                               'ValueError: (InvalidArgument) Required tensor shall not be nullptr, '
                                               'but received nullptr. [Hint: ten'),
 ('batchnorm_train_biased', 'vjp2', 'd2x:*'): ('ERROR',
                                               'ValueError: (InvalidArgument) Required tensor shall not be nullptr, '
                                               'but received nullptr. [Hint: ten'),
 ('batchnorm_train_m07', 'fwd', 'batchnorm_train_m07.out2'): ('DIVERGENT',
                                                              'paddle 1.362 vs torch 1.37 at [1], max abs 0.00847'),
 ('batchnorm_train_m07', 'vjp2', 'd2g:*'): ('ERROR',
                                            'ValueError: (InvalidArgument) Required tensor shall not be nullptr, but '
                                            'received nullptr. [Hint: ten'),
 ('batchnorm_train_m07', 'vjp2', 'd2x:*'): ('ERROR',
                                            'ValueError: (InvalidArgument) Required tensor shall not be nullptr, but '
                                            'received nullptr. [Hint: ten'),
 ('conv_depthwise', 'vjp2', 'd2g:*'): ('ERROR',
                                       'RuntimeError: (NotFound) The kernel `depthwise_conv2d_double_grad` is not '
                                       'registered. [Hint: Expecte'),
 ('conv_depthwise', 'vjp2', 'd2x:*'): ('ERROR',
                                       'RuntimeError: (NotFound) The kernel `depthwise_conv2d_double_grad` is not '
                                       'registered. [Hint: Expecte'),
 ('conv_depthwise_m2_dilated', 'vjp2', 'd2g:*'): ('ERROR',
                                                  'RuntimeError: (NotFound) The kernel `depthwise_conv2d_double_grad` '
                                                  'is not registered. [Hint: Expecte'),
 ('conv_depthwise_m2_dilated', 'vjp2', 'd2x:*'): ('ERROR',
                                                  'RuntimeError: (NotFound) The kernel `depthwise_conv2d_double_grad` '
                                                  'is not registered. [Hint: Expecte'),
 ('convtranspose1d', 'vjp2', 'd2g:*'): ('ERROR',
                                        'RuntimeError: (NotFound) The kernel `conv2d_transpose_double_grad` is not '
                                        'registered. [Hint: Expecte'),
 ('convtranspose1d', 'vjp2', 'd2x:*'): ('ERROR',
                                        'RuntimeError: (NotFound) The kernel `conv2d_transpose_double_grad` is not '
                                        'registered. [Hint: Expecte'),
 ('convtranspose_asym_pads', 'vjp2', 'd2g:*'): ('ERROR',
                                                'RuntimeError: (NotFound) The kernel `conv2d_transpose_double_grad` is '
                                                'not registered. [Hint: Expecte'),
 ('convtranspose_asym_pads', 'vjp2', 'd2x:*'): ('ERROR',
                                                'RuntimeError: (NotFound) The kernel `conv2d_transpose_double_grad` is '
                                                'not registered. [Hint: Expecte'),
 ('convtranspose_basic', 'vjp2', 'd2g:*'): ('ERROR',
                                            'RuntimeError: (NotFound) The kernel `conv2d_transpose_double_grad` is not '
                                            'registered. [Hint: Expecte'),
 ('convtranspose_basic', 'vjp2', 'd2x:*'): ('ERROR',
                                            'RuntimeError: (NotFound) The kernel `conv2d_transpose_double_grad` is not '
                                            'registered. [Hint: Expecte'),
 ('convtranspose_groups2', 'vjp2', 'd2g:*'): ('ERROR',
                                              'RuntimeError: (NotFound) The kernel `conv2d_transpose_double_grad` is '
                                              'not registered. [Hint: Expecte'),
 ('convtranspose_groups2', 'vjp2', 'd2x:*'): ('ERROR',
                                              'RuntimeError: (NotFound) The kernel `conv2d_transpose_double_grad` is '
                                              'not registered. [Hint: Expecte'),
 ('convtranspose_s2_outpad', 'vjp2', 'd2g:*'): ('ERROR',
                                                'RuntimeError: (NotFound) The kernel `conv2d_transpose_double_grad` is '
                                                'not registered. [Hint: Expecte'),
 ('convtranspose_s2_outpad', 'vjp2', 'd2x:*'): ('ERROR',
                                                'RuntimeError: (NotFound) The kernel `conv2d_transpose_double_grad` is '
                                                'not registered. [Hint: Expecte'),
 ('cosh', 'vjp2', 'd2g:*'): ('ERROR',
                             "RuntimeError: (Unavailable) The Op cosh_grad doesn't have any grad op. If you don't "
                             'intend calculati'),
 ('cosh', 'vjp2', 'd2x:*'): ('ERROR',
                             "RuntimeError: (Unavailable) The Op cosh_grad doesn't have any grad op. If you don't "
                             'intend calculati'),
 ('cumsum', 'vjp2', 'd2g:*'): ('ERROR',
                               "RuntimeError: (Unavailable) The Op cumsum_grad doesn't have any grad op. If you don't "
                               'intend calcula'),
 ('cumsum', 'vjp2', 'd2x:*'): ('ERROR',
                               "RuntimeError: (Unavailable) The Op cumsum_grad doesn't have any grad op. If you don't "
                               'intend calcula'),
 ('cumsum_exclusive_reverse', 'vjp2', 'd2g:*'): ('ERROR',
                                                 "RuntimeError: (Unavailable) The Op cumsum_grad doesn't have any grad "
                                                 "op. If you don't intend calcula"),
 ('cumsum_exclusive_reverse', 'vjp2', 'd2x:*'): ('ERROR',
                                                 "RuntimeError: (Unavailable) The Op cumsum_grad doesn't have any grad "
                                                 "op. If you don't intend calcula"),
 ('cumsum_rev_excl', 'vjp2', 'd2g:*'): ('ERROR',
                                        "RuntimeError: (Unavailable) The Op cumsum_grad doesn't have any grad op. If "
                                        "you don't intend calcula"),
 ('cumsum_rev_excl', 'vjp2', 'd2x:*'): ('ERROR',
                                        "RuntimeError: (Unavailable) The Op cumsum_grad doesn't have any grad op. If "
                                        "you don't intend calcula"),
 ('depthtospace_crd', 'vjp2', 'd2g:*'): ('ERROR',
                                         "RuntimeError: (Unavailable) The Op pixel_shuffle_grad doesn't have any grad "
                                         "op. If you don't intend "),
 ('depthtospace_crd', 'vjp2', 'd2x:*'): ('ERROR',
                                         "RuntimeError: (Unavailable) The Op pixel_shuffle_grad doesn't have any grad "
                                         "op. If you don't intend "),
 ('einsum', 'vjp2', 'd2g:*'): ('ERROR',
                               "RuntimeError: (Unavailable) The Op einsum_grad doesn't have any grad op. If you don't "
                               'intend calcula'),
 ('einsum', 'vjp2', 'd2x:*'): ('ERROR',
                               "RuntimeError: (Unavailable) The Op einsum_grad doesn't have any grad op. If you don't "
                               'intend calcula'),
 ('einsum_batch', 'vjp2', 'd2g:*'): ('ERROR',
                                     "RuntimeError: (Unavailable) The Op einsum_grad doesn't have any grad op. If you "
                                     "don't intend calcula"),
 ('einsum_batch', 'vjp2', 'd2x:*'): ('ERROR',
                                     "RuntimeError: (Unavailable) The Op einsum_grad doesn't have any grad op. If you "
                                     "don't intend calcula"),
 ('erf', 'vjp2', 'd2g:*'): ('ERROR',
                            "RuntimeError: (Unavailable) The Op erf_grad doesn't have any grad op. If you don't intend "
                            'calculatin'),
 ('erf', 'vjp2', 'd2x:*'): ('ERROR',
                            "RuntimeError: (Unavailable) The Op erf_grad doesn't have any grad op. If you don't intend "
                            'calculatin'),
 ('floor', 'vjp2', 'd2g:*'): ('ERROR',
                              "RuntimeError: (Unavailable) The Op floor_grad doesn't have any grad op. If you don't "
                              'intend calculat'),
 ('floor', 'vjp2', 'd2x:*'): ('ERROR',
                              "RuntimeError: (Unavailable) The Op floor_grad doesn't have any grad op. If you don't "
                              'intend calculat'),
 ('gelu', 'vjp2', 'd2g:*'): ('ERROR',
                             "RuntimeError: (Unavailable) The Op gelu_grad doesn't have any grad op. If you don't "
                             'intend calculati'),
 ('gelu', 'vjp2', 'd2x:*'): ('ERROR',
                             "RuntimeError: (Unavailable) The Op gelu_grad doesn't have any grad op. If you don't "
                             'intend calculati'),
 ('gelu_tanh', 'vjp2', 'd2g:*'): ('ERROR',
                                  "RuntimeError: (Unavailable) The Op gelu_grad doesn't have any grad op. If you don't "
                                  'intend calculati'),
 ('gelu_tanh', 'vjp2', 'd2x:*'): ('ERROR',
                                  "RuntimeError: (Unavailable) The Op gelu_grad doesn't have any grad op. If you don't "
                                  'intend calculati'),
 ('globalmaxpool', 'vjp2', 'd2g:*'): ('ERROR',
                                      "RuntimeError: (Unavailable) The Op amax_grad doesn't have any grad op. If you "
                                      "don't intend calculati"),
 ('globalmaxpool', 'vjp2', 'd2x:*'): ('ERROR',
                                      "RuntimeError: (Unavailable) The Op amax_grad doesn't have any grad op. If you "
                                      "don't intend calculati"),
 ('gridsample_cubic_border', 'fwd', '*'): ('UNSUPPORTED',
                                           "Paddle's grid_sample is 4-D bilinear or nearest only (GridSample "
                                           "mode='cubic', 4-D input)"),
 ('gridsample_cubic_border', 'vjp', '*'): ('UNSUPPORTED',
                                           "Paddle's grid_sample is 4-D bilinear or nearest only (GridSample "
                                           "mode='cubic', 4-D input)"),
 ('gridsample_cubic_border', 'vjp2', 'd2g:*'): ('UNSUPPORTED',
                                                "Paddle's grid_sample is 4-D bilinear or nearest only (GridSample "
                                                "mode='cubic', 4-D input)"),
 ('gridsample_cubic_border', 'vjp2', 'd2x:*'): ('UNSUPPORTED',
                                                "Paddle's grid_sample is 4-D bilinear or nearest only (GridSample "
                                                "mode='cubic', 4-D input)"),
 ('gridsample_linear', 'vjp2', 'd2g:*'): ('ERROR',
                                          "RuntimeError: (Unavailable) The Op grid_sample_grad doesn't have any grad "
                                          "op. If you don't intend ca"),
 ('gridsample_linear', 'vjp2', 'd2x:*'): ('ERROR',
                                          "RuntimeError: (Unavailable) The Op grid_sample_grad doesn't have any grad "
                                          "op. If you don't intend ca"),
 ('gru', 'vjp2', 'd2g:*'): ('ERROR',
                            "RuntimeError: (Unavailable) The Op rnn_grad doesn't have any grad op. If you don't intend "
                            'calculatin'),
 ('gru', 'vjp2', 'd2x:*'): ('ERROR',
                            "RuntimeError: (Unavailable) The Op rnn_grad doesn't have any grad op. If you don't intend "
                            'calculatin'),
 ('gru_reverse_reset_before', 'fwd', '*'): ('UNSUPPORTED', "Paddle's GRU runs forward or both ways, not reverse only"),
 ('gru_reverse_reset_before', 'vjp', '*'): ('UNSUPPORTED', "Paddle's GRU runs forward or both ways, not reverse only"),
 ('gru_reverse_reset_before', 'vjp2', 'd2g:*'): ('UNSUPPORTED',
                                                 "Paddle's GRU runs forward or both ways, not reverse only"),
 ('gru_reverse_reset_before', 'vjp2', 'd2x:*'): ('UNSUPPORTED',
                                                 "Paddle's GRU runs forward or both ways, not reverse only"),
 ('hardsigmoid', 'vjp2', 'd2g:*'): ('ERROR',
                                    "RuntimeError: (Unavailable) The Op hardsigmoid_grad doesn't have any grad op. If "
                                    "you don't intend ca"),
 ('hardsigmoid', 'vjp2', 'd2x:*'): ('ERROR',
                                    "RuntimeError: (Unavailable) The Op hardsigmoid_grad doesn't have any grad op. If "
                                    "you don't intend ca"),
 ('hardsigmoid_ab', 'vjp2', 'd2g:*'): ('ERROR',
                                       "RuntimeError: (Unavailable) The Op hardsigmoid_grad doesn't have any grad op. "
                                       "If you don't intend ca"),
 ('hardsigmoid_ab', 'vjp2', 'd2x:*'): ('ERROR',
                                       "RuntimeError: (Unavailable) The Op hardsigmoid_grad doesn't have any grad op. "
                                       "If you don't intend ca"),
 ('hardswish', 'vjp2', 'd2g:*'): ('ERROR',
                                  "RuntimeError: (Unavailable) The Op hardswish_grad doesn't have any grad op. If you "
                                  "don't intend calc"),
 ('hardswish', 'vjp2', 'd2x:*'): ('ERROR',
                                  "RuntimeError: (Unavailable) The Op hardswish_grad doesn't have any grad op. If you "
                                  "don't intend calc"),
 ('hardswish_wide', 'vjp2', 'd2g:*'): ('ERROR',
                                       "RuntimeError: (Unavailable) The Op hardswish_grad doesn't have any grad op. If "
                                       "you don't intend calc"),
 ('hardswish_wide', 'vjp2', 'd2x:*'): ('ERROR',
                                       "RuntimeError: (Unavailable) The Op hardswish_grad doesn't have any grad op. If "
                                       "you don't intend calc"),
 ('instancenorm', 'vjp2', 'd2g:*'): ('ERROR',
                                     "ValueError: (InvalidArgument) The DX in InstanceNormDoubleGradInferMeta can't be "
                                     'nullptr. [Hint: Exp'),
 ('instnorm1d', 'vjp2', 'd2g:*'): ('ERROR',
                                   "ValueError: (InvalidArgument) The DX in InstanceNormDoubleGradInferMeta can't be "
                                   'nullptr. [Hint: Exp'),
 ('layernorm', 'vjp2', 'd2g:*'): ('ERROR',
                                  "RuntimeError: (Unavailable) The Op layer_norm_grad doesn't have any grad op. If you "
                                  "don't intend cal"),
 ('layernorm', 'vjp2', 'd2x:*'): ('ERROR',
                                  "RuntimeError: (Unavailable) The Op layer_norm_grad doesn't have any grad op. If you "
                                  "don't intend cal"),
 ('layernorm_axis1', 'vjp2', 'd2g:*'): ('ERROR',
                                        "RuntimeError: (Unavailable) The Op layer_norm_grad doesn't have any grad op. "
                                        "If you don't intend cal"),
 ('layernorm_axis1', 'vjp2', 'd2x:*'): ('ERROR',
                                        "RuntimeError: (Unavailable) The Op layer_norm_grad doesn't have any grad op. "
                                        "If you don't intend cal"),
 ('logsoftmax', 'vjp2', 'd2g:*'): ('ERROR',
                                   "RuntimeError: (Unavailable) The Op log_softmax_grad doesn't have any grad op. If "
                                   "you don't intend ca"),
 ('logsoftmax', 'vjp2', 'd2x:*'): ('ERROR',
                                   "RuntimeError: (Unavailable) The Op log_softmax_grad doesn't have any grad op. If "
                                   "you don't intend ca"),
 ('lstm', 'vjp2', 'd2g:*'): ('ERROR',
                             "RuntimeError: (Unavailable) The Op rnn_grad doesn't have any grad op. If you don't "
                             'intend calculatin'),
 ('lstm', 'vjp2', 'd2x:*'): ('ERROR',
                             "RuntimeError: (Unavailable) The Op rnn_grad doesn't have any grad op. If you don't "
                             'intend calculatin'),
 ('lstm_batch_first', 'vjp2', 'd2g:*'): ('ERROR',
                                         "RuntimeError: (Unavailable) The Op rnn_grad doesn't have any grad op. If you "
                                         "don't intend calculatin"),
 ('lstm_batch_first', 'vjp2', 'd2x:*'): ('ERROR',
                                         "RuntimeError: (Unavailable) The Op rnn_grad doesn't have any grad op. If you "
                                         "don't intend calculatin"),
 ('maxpool1d', 'vjp2', 'd2g:*'): ('ERROR',
                                  'ValueError: (InvalidArgument) Pool op grad grad only supports avgpool. (at '
                                  '/paddle/paddle/phi/kernel'),
 ('maxpool_asym', 'vjp2', 'd2g:*'): ('ERROR',
                                     'ValueError: (InvalidArgument) Pool op grad grad only supports avgpool. (at '
                                     '/paddle/paddle/phi/kernel'),
 ('maxpool_k3s2p1', 'vjp2', 'd2g:*'): ('ERROR',
                                       'ValueError: (InvalidArgument) Pool op grad grad only supports avgpool. (at '
                                       '/paddle/paddle/phi/kernel'),
 ('mish', 'vjp2', 'd2g:*'): ('ERROR',
                             "RuntimeError: (Unavailable) The Op mish_grad doesn't have any grad op. If you don't "
                             'intend calculati'),
 ('mish', 'vjp2', 'd2x:*'): ('ERROR',
                             "RuntimeError: (Unavailable) The Op mish_grad doesn't have any grad op. If you don't "
                             'intend calculati'),
 ('mod_fmod', 'vjp2', 'd2g:*'): ('ERROR',
                                 "RuntimeError: (Unavailable) The Op trunc_grad doesn't have any grad op. If you don't "
                                 'intend calculat'),
 ('mod_fmod', 'vjp2', 'd2x:*'): ('ERROR',
                                 "RuntimeError: (Unavailable) The Op trunc_grad doesn't have any grad op. If you don't "
                                 'intend calculat'),
 ('nll_loss', 'vjp2', 'd2g:*'): ('ERROR',
                                 "RuntimeError: (Unavailable) The Op nll_loss_grad doesn't have any grad op. If you "
                                 "don't intend calcu"),
 ('nll_loss', 'vjp2', 'd2x:*'): ('ERROR',
                                 "RuntimeError: (Unavailable) The Op nll_loss_grad doesn't have any grad op. If you "
                                 "don't intend calcu"),
 ('nll_loss_weighted_none', 'vjp2', 'd2g:*'): ('ERROR',
                                               "RuntimeError: (Unavailable) The Op nll_loss_grad doesn't have any grad "
                                               "op. If you don't intend calcu"),
 ('nll_loss_weighted_none', 'vjp2', 'd2x:*'): ('ERROR',
                                               "RuntimeError: (Unavailable) The Op nll_loss_grad doesn't have any grad "
                                               "op. If you don't intend calcu"),
 ('pad_constant_2d', 'vjp2', 'd2g:pad_constant_2d.out0'): ('DIVERGENT', 'paddle -1 vs torch 0 at [0, 0], max abs 1'),
 ('pad_constant_asym', 'vjp2', 'd2g:pad_constant_asym.out0'): ('DIVERGENT',
                                                               'paddle 1.5 vs torch 0 at [0, 0, 0, 0], max abs 1.5'),
 ('pad_negative_crop', 'vjp2', 'd2g:pad_negative_crop.out0'): ('DIVERGENT',
                                                               'paddle 0.5 vs torch 0 at [0, 0, 0], max abs 0.5'),
 ('pow', 'vjp2', 'd2g:*'): ('ERROR',
                            "RuntimeError: (Unavailable) The Op elementwise_pow_grad doesn't have any grad op. If you "
                            "don't inten"),
 ('pow', 'vjp2', 'd2x:*'): ('ERROR',
                            "RuntimeError: (Unavailable) The Op elementwise_pow_grad doesn't have any grad op. If you "
                            "don't inten"),
 ('prelu', 'vjp2', 'd2g:*'): ('ERROR',
                              "RuntimeError: (Unavailable) The Op prelu_grad doesn't have any grad op. If you don't "
                              'intend calculat'),
 ('prelu', 'vjp2', 'd2x:*'): ('ERROR',
                              "RuntimeError: (Unavailable) The Op prelu_grad doesn't have any grad op. If you don't "
                              'intend calculat'),
 ('prelu_scalar', 'vjp2', 'd2g:*'): ('ERROR',
                                     "RuntimeError: (Unavailable) The Op prelu_grad doesn't have any grad op. If you "
                                     "don't intend calculat"),
 ('prelu_scalar', 'vjp2', 'd2x:*'): ('ERROR',
                                     "RuntimeError: (Unavailable) The Op prelu_grad doesn't have any grad op. If you "
                                     "don't intend calculat"),
 ('reciprocal', 'vjp2', 'd2g:*'): ('ERROR',
                                   "RuntimeError: (Unavailable) The Op reciprocal_grad doesn't have any grad op. If "
                                   "you don't intend cal"),
 ('reciprocal', 'vjp2', 'd2x:*'): ('ERROR',
                                   "RuntimeError: (Unavailable) The Op reciprocal_grad doesn't have any grad op. If "
                                   "you don't intend cal"),
 ('reducelogsumexp', 'vjp2', 'd2g:*'): ('ERROR',
                                        "RuntimeError: (Unavailable) The Op logsumexp_grad doesn't have any grad op. "
                                        "If you don't intend calc"),
 ('reducelogsumexp', 'vjp2', 'd2x:*'): ('ERROR',
                                        "RuntimeError: (Unavailable) The Op logsumexp_grad doesn't have any grad op. "
                                        "If you don't intend calc"),
 ('reducemax', 'vjp2', 'd2g:*'): ('ERROR',
                                  "RuntimeError: (Unavailable) The Op amax_grad doesn't have any grad op. If you don't "
                                  'intend calculati'),
 ('reducemax', 'vjp2', 'd2x:*'): ('ERROR',
                                  "RuntimeError: (Unavailable) The Op amax_grad doesn't have any grad op. If you don't "
                                  'intend calculati'),
 ('reducemin', 'vjp2', 'd2g:*'): ('ERROR',
                                  "RuntimeError: (Unavailable) The Op amin_grad doesn't have any grad op. If you don't "
                                  'intend calculati'),
 ('reducemin', 'vjp2', 'd2x:*'): ('ERROR',
                                  "RuntimeError: (Unavailable) The Op amin_grad doesn't have any grad op. If you don't "
                                  'intend calculati'),
 ('reduceprod', 'vjp2', 'd2g:*'): ('ERROR',
                                   "RuntimeError: (Unavailable) The Op prod_grad doesn't have any grad op. If you "
                                   "don't intend calculati"),
 ('reduceprod', 'vjp2', 'd2x:*'): ('ERROR',
                                   "RuntimeError: (Unavailable) The Op prod_grad doesn't have any grad op. If you "
                                   "don't intend calculati"),
 ('resize_cubic', 'vjp2', 'd2g:*'): ('ERROR',
                                     "RuntimeError: (Unavailable) The Op bicubic_interp_grad doesn't have any grad op. "
                                     "If you don't intend"),
 ('resize_cubic', 'vjp2', 'd2x:*'): ('ERROR',
                                     "RuntimeError: (Unavailable) The Op bicubic_interp_grad doesn't have any grad op. "
                                     "If you don't intend"),
 ('resize_cubic_ac', 'vjp2', 'd2g:*'): ('ERROR',
                                        "RuntimeError: (Unavailable) The Op bicubic_interp_grad doesn't have any grad "
                                        "op. If you don't intend"),
 ('resize_cubic_ac', 'vjp2', 'd2x:*'): ('ERROR',
                                        "RuntimeError: (Unavailable) The Op bicubic_interp_grad doesn't have any grad "
                                        "op. If you don't intend"),
 ('resize_linear1d', 'vjp2', 'd2g:*'): ('ERROR',
                                        "RuntimeError: (Unavailable) The Op linear_interp_grad doesn't have any grad "
                                        "op. If you don't intend "),
 ('resize_linear1d', 'vjp2', 'd2x:*'): ('ERROR',
                                        "RuntimeError: (Unavailable) The Op linear_interp_grad doesn't have any grad "
                                        "op. If you don't intend "),
 ('resize_linear_align_corners', 'vjp2', 'd2g:*'): ('ERROR',
                                                    "RuntimeError: (Unavailable) The Op bilinear_interp_grad doesn't "
                                                    "have any grad op. If you don't inten"),
 ('resize_linear_align_corners', 'vjp2', 'd2x:*'): ('ERROR',
                                                    "RuntimeError: (Unavailable) The Op bilinear_interp_grad doesn't "
                                                    "have any grad op. If you don't inten"),
 ('resize_linear_half_pixel', 'vjp2', 'd2g:*'): ('ERROR',
                                                 "RuntimeError: (Unavailable) The Op bilinear_interp_grad doesn't have "
                                                 "any grad op. If you don't inten"),
 ('resize_linear_half_pixel', 'vjp2', 'd2x:*'): ('ERROR',
                                                 "RuntimeError: (Unavailable) The Op bilinear_interp_grad doesn't have "
                                                 "any grad op. If you don't inten"),
 ('resize_nearest', 'vjp2', 'd2g:*'): ('ERROR',
                                       "RuntimeError: (Unavailable) The Op nearest_interp_grad doesn't have any grad "
                                       "op. If you don't intend"),
 ('resize_nearest', 'vjp2', 'd2x:*'): ('ERROR',
                                       "RuntimeError: (Unavailable) The Op nearest_interp_grad doesn't have any grad "
                                       "op. If you don't intend"),
 ('resize_negative_axes', 'vjp2', 'd2g:*'): ('ERROR',
                                             "RuntimeError: (Unavailable) The Op bilinear_interp_grad doesn't have any "
                                             "grad op. If you don't inten"),
 ('resize_negative_axes', 'vjp2', 'd2x:*'): ('ERROR',
                                             "RuntimeError: (Unavailable) The Op bilinear_interp_grad doesn't have any "
                                             "grad op. If you don't inten"),
 ('rnn', 'fwd', '*'): ('UNSUPPORTED',
                       "Paddle's SimpleRNN has one activation, Tanh or Relu, for every direction, not ['Tanh', "
                       "'Relu']"),
 ('rnn', 'vjp', '*'): ('UNSUPPORTED',
                       "Paddle's SimpleRNN has one activation, Tanh or Relu, for every direction, not ['Tanh', "
                       "'Relu']"),
 ('rnn', 'vjp2', 'd2g:*'): ('UNSUPPORTED',
                            "Paddle's SimpleRNN has one activation, Tanh or Relu, for every direction, not ['Tanh', "
                            "'Relu']"),
 ('rnn', 'vjp2', 'd2x:*'): ('UNSUPPORTED',
                            "Paddle's SimpleRNN has one activation, Tanh or Relu, for every direction, not ['Tanh', "
                            "'Relu']"),
 ('rnn_relu', 'vjp2', 'd2g:*'): ('ERROR',
                                 "RuntimeError: (Unavailable) The Op rnn_grad doesn't have any grad op. If you don't "
                                 'intend calculatin'),
 ('rnn_relu', 'vjp2', 'd2x:*'): ('ERROR',
                                 "RuntimeError: (Unavailable) The Op rnn_grad doesn't have any grad op. If you don't "
                                 'intend calculatin'),
 ('scatterelements', 'vjp2', 'd2g:*'): ('ERROR',
                                        'ValueError: (InvalidArgument) put_along_axis_double_grad only support reduce '
                                        "= 'add' yet, but receiv"),
 ('scatterelements_negative', 'vjp2', 'd2g:*'): ('ERROR',
                                                 'ValueError: (InvalidArgument) put_along_axis_double_grad only '
                                                 "support reduce = 'add' yet, but receiv"),
 ('scatternd', 'vjp2', 'd2g:*'): ('ERROR',
                                  "RuntimeError: (Unavailable) The Op scatter_nd_add_grad doesn't have any grad op. If "
                                  "you don't intend"),
 ('scatternd', 'vjp2', 'd2x:*'): ('ERROR',
                                  "RuntimeError: (Unavailable) The Op scatter_nd_add_grad doesn't have any grad op. If "
                                  "you don't intend"),
 ('scatternd_add', 'vjp2', 'd2g:*'): ('ERROR',
                                      "RuntimeError: (Unavailable) The Op scatter_nd_add_grad doesn't have any grad "
                                      "op. If you don't intend"),
 ('scatternd_add', 'vjp2', 'd2x:*'): ('ERROR',
                                      "RuntimeError: (Unavailable) The Op scatter_nd_add_grad doesn't have any grad "
                                      "op. If you don't intend"),
 ('scatternd_pairs', 'vjp2', 'd2g:*'): ('ERROR',
                                        "RuntimeError: (Unavailable) The Op scatter_nd_add_grad doesn't have any grad "
                                        "op. If you don't intend"),
 ('scatternd_pairs', 'vjp2', 'd2x:*'): ('ERROR',
                                        "RuntimeError: (Unavailable) The Op scatter_nd_add_grad doesn't have any grad "
                                        "op. If you don't intend"),
 ('selu', 'vjp2', 'd2g:*'): ('ERROR',
                             "RuntimeError: (Unavailable) The Op selu_grad doesn't have any grad op. If you don't "
                             'intend calculati'),
 ('selu', 'vjp2', 'd2x:*'): ('ERROR',
                             "RuntimeError: (Unavailable) The Op selu_grad doesn't have any grad op. If you don't "
                             'intend calculati'),
 ('sinh', 'vjp2', 'd2g:*'): ('ERROR',
                             "RuntimeError: (Unavailable) The Op sinh_grad doesn't have any grad op. If you don't "
                             'intend calculati'),
 ('sinh', 'vjp2', 'd2x:*'): ('ERROR',
                             "RuntimeError: (Unavailable) The Op sinh_grad doesn't have any grad op. If you don't "
                             'intend calculati'),
 ('slice', 'vjp2', 'd2g:*'): ('ERROR',
                              "RuntimeError: (Unavailable) The Op strided_slice_grad doesn't have any grad op. If you "
                              "don't intend "),
 ('slice', 'vjp2', 'd2x:*'): ('ERROR',
                              "RuntimeError: (Unavailable) The Op strided_slice_grad doesn't have any grad op. If you "
                              "don't intend "),
 ('slice_negative_step', 'vjp2', 'd2g:*'): ('ERROR',
                                            "RuntimeError: (Unavailable) The Op strided_slice_grad doesn't have any "
                                            "grad op. If you don't intend "),
 ('slice_negative_step', 'vjp2', 'd2x:*'): ('ERROR',
                                            "RuntimeError: (Unavailable) The Op strided_slice_grad doesn't have any "
                                            "grad op. If you don't intend "),
 ('softmax', 'vjp2', 'd2g:*'): ('ERROR',
                                "RuntimeError: (Unavailable) The Op softmax_grad doesn't have any grad op. If you "
                                "don't intend calcul"),
 ('softmax', 'vjp2', 'd2x:*'): ('ERROR',
                                "RuntimeError: (Unavailable) The Op softmax_grad doesn't have any grad op. If you "
                                "don't intend calcul"),
 ('softmax_axis', 'vjp2', 'd2g:*'): ('ERROR',
                                     "RuntimeError: (Unavailable) The Op softmax_grad doesn't have any grad op. If you "
                                     "don't intend calcul"),
 ('softmax_axis', 'vjp2', 'd2x:*'): ('ERROR',
                                     "RuntimeError: (Unavailable) The Op softmax_grad doesn't have any grad op. If you "
                                     "don't intend calcul"),
 ('softmax_cross_entropy', 'vjp2', 'd2g:*'): ('ERROR',
                                              "RuntimeError: (Unavailable) The Op log_softmax_grad doesn't have any "
                                              "grad op. If you don't intend ca"),
 ('softmax_cross_entropy', 'vjp2', 'd2x:*'): ('ERROR',
                                              "RuntimeError: (Unavailable) The Op log_softmax_grad doesn't have any "
                                              "grad op. If you don't intend ca"),
 ('softmax_cross_entropy_weighted', 'vjp2', 'd2g:*'): ('ERROR',
                                                       "RuntimeError: (Unavailable) The Op log_softmax_grad doesn't "
                                                       "have any grad op. If you don't intend ca"),
 ('softmax_cross_entropy_weighted', 'vjp2', 'd2x:*'): ('ERROR',
                                                       "RuntimeError: (Unavailable) The Op log_softmax_grad doesn't "
                                                       "have any grad op. If you don't intend ca"),
 ('softsign', 'vjp2', 'd2g:*'): ('ERROR',
                                 "RuntimeError: (Unavailable) The Op softsign_grad doesn't have any grad op. If you "
                                 "don't intend calcu"),
 ('softsign', 'vjp2', 'd2x:*'): ('ERROR',
                                 "RuntimeError: (Unavailable) The Op softsign_grad doesn't have any grad op. If you "
                                 "don't intend calcu"),
 ('topk', 'vjp2', 'd2g:*'): ('ERROR',
                             "RuntimeError: (Unavailable) The Op topk_grad doesn't have any grad op. If you don't "
                             'intend calculati'),
 ('topk', 'vjp2', 'd2x:*'): ('ERROR',
                             "RuntimeError: (Unavailable) The Op topk_grad doesn't have any grad op. If you don't "
                             'intend calculati'),
 ('topk_ties', 'fwd', 'topk_ties.out1'): ('DIVERGENT', 'paddle 2 vs torch 0 at [3], max abs 2'),
 ('topk_ties', 'vjp', 'd:topk_ties.in0'): ('DIVERGENT', 'paddle 0 vs torch 0.007921 at [0], max abs 0.00792'),
 ('topk_ties', 'vjp2', 'd2g:*'): ('ERROR',
                                  "RuntimeError: (Unavailable) The Op topk_grad doesn't have any grad op. If you don't "
                                  'intend calculati'),
 ('topk_ties', 'vjp2', 'd2x:*'): ('ERROR',
                                  "RuntimeError: (Unavailable) The Op topk_grad doesn't have any grad op. If you don't "
                                  'intend calculati'),
 ('trilu_lower', 'vjp2', 'd2g:*'): ('ERROR',
                                    "RuntimeError: (Unavailable) The Op tril_grad doesn't have any grad op. If you "
                                    "don't intend calculati"),
 ('trilu_lower', 'vjp2', 'd2x:*'): ('ERROR',
                                    "RuntimeError: (Unavailable) The Op tril_grad doesn't have any grad op. If you "
                                    "don't intend calculati"),
 ('trilu_upper', 'vjp2', 'd2g:*'): ('ERROR',
                                    "RuntimeError: (Unavailable) The Op triu_grad doesn't have any grad op. If you "
                                    "don't intend calculati"),
 ('trilu_upper', 'vjp2', 'd2x:*'): ('ERROR',
                                    "RuntimeError: (Unavailable) The Op triu_grad doesn't have any grad op. If you "
                                    "don't intend calculati")}

# Among them, the cases added for issue 26 at the end of tests/op_cases.py (the ones Paddle's table has): no
# double grad of cumsum, topk and bilinear resizing, the pad double grad again (0.5 is the pad value),
# and TopK's tie order (ONNX: of equal values the lower index first; Paddle's topk returns another)

# The padding matrix (tests/padding_matrix.py, 234 cases, fwd) on Paddle: node -> (verdict, observed).
# ceil_mode: Paddle keeps a last window that starts in the end padding (ONNX and torch drop it);
# avg_pool2d(exclusive=False) with a larger end than begin padding divides the border windows by the
# cells inside input + begin padding only (on ones, [0, 1, 0, 1] padding gives 1.0 where ONNX has 6/9).
PADDING = {'avgpool_begin_n7_s2_cip1_c1': ('DIVERGENT', 'paddle 0.4084 vs torch 0.6126 at [0, 0, 1, 3], max abs 0.204'),
 'avgpool_begin_n7_s3_cip1_c1': ('DIVERGENT', 'paddle 0.2342 vs torch 0.527 at [0, 0, 2, 2], max abs 0.293'),
 'avgpool_end_n7_s1_cip1_c0': ('DIVERGENT', 'paddle 1.082 vs torch 0.4808 at [0, 0, 5, 5], max abs 0.601'),
 'avgpool_end_n7_s1_cip1_c1': ('DIVERGENT', 'paddle 0.5671 vs torch 0.3781 at [0, 0, 5, 3], max abs 0.189'),
 'avgpool_end_n7_s2_cip1_c1': ('DIVERGENT', 'paddle 2.087 vs torch 0.5218 at [0, 1, 3, 3], max abs 1.57'),
 'avgpool_end_n7_s3_cip1_c1': ('DIVERGENT', 'paddle 0.636 vs torch 0.159 at [0, 1, 2, 2], max abs 0.477'),
 'avgpool_end_n8_s1_cip1_c0': ('DIVERGENT', 'paddle -0.8823 vs torch -0.3921 at [0, 0, 6, 6], max abs 0.49'),
 'avgpool_end_n8_s1_cip1_c1': ('DIVERGENT', 'paddle -0.9937 vs torch -0.6624 at [0, 0, 1, 6], max abs 0.331'),
 'avgpool_end_n8_s2_cip1_c0': ('DIVERGENT', 'paddle -0.6677 vs torch -0.2967 at [0, 0, 3, 3], max abs 0.371'),
 'avgpool_end_n8_s2_cip1_c1': ('DIVERGENT', 'paddle 0.8953 vs torch 0.3979 at [0, 1, 3, 3], max abs 0.497'),
 'avgpool_end_n8_s3_cip1_c0': ('DIVERGENT', 'paddle -0.6603 vs torch -0.2935 at [0, 1, 2, 2], max abs 0.367'),
 'avgpool_end_n8_s3_cip1_c1': ('DIVERGENT', 'paddle -0.6456 vs torch -0.2869 at [0, 0, 2, 2], max abs 0.359'),
 'avgpool_sym_n8_s3_cip0_c1': ('SHAPE_MISMATCH', 'shape [1, 2, 4, 4] vs reference [1, 2, 3, 3]'),
 'avgpool_sym_n8_s3_cip1_c1': ('SHAPE_MISMATCH', 'shape [1, 2, 4, 4] vs reference [1, 2, 3, 3]'),
 'maxpool_sym_n8_s3_d1_c1': ('SHAPE_MISMATCH', 'shape [1, 2, 4, 4] vs reference [1, 2, 3, 3]')}

# Distinct findings (op type, mode, verdict) on the example models, as observed. Nodes compared / skipped
# as shape arithmetic: resnet 35/14, wideresnet 47/19, wideresnet-train 50/19, stylegan2 183/61, gpt 46/9.
EXAMPLES = {'gpt': [('Gelu', 'vjp2', 'ERROR'), ('LayerNormalization', 'vjp2', 'ERROR'), ('Softmax', 'vjp2', 'ERROR')],
 'resnet': [('MaxPool', 'vjp2', 'ERROR'),
            ('TrainBatchNormalization', 'fwd', 'DIVERGENT'),
            ('TrainBatchNormalization', 'vjp2', 'ERROR')],
 'stylegan2': [('Conv', 'vjp2', 'DIVERGENT'),
               ('Conv', 'vjp2', 'ERROR'),
               ('ConvTranspose', 'vjp2', 'ERROR'),
               ('Pow', 'vjp2', 'ERROR'),
               ('Reciprocal', 'vjp2', 'ERROR')],
 'wideresnet': [('BatchNormalization', 'vjp2', 'ERROR')],
 'wideresnet-train': [('TrainBatchNormalization', 'fwd', 'DIVERGENT'), ('TrainBatchNormalization', 'vjp2', 'ERROR')]}
