"""What TensorFlow 2.21 (CPU, eager, deterministic ops) gets wrong on the shared op-case table and
the example models, as observed against torch and float64.

Strict: each entry must still show this verdict (and, for ERROR, this message; for DIVERGENT, this
max abs within 1 %), so a TensorFlow fix (or a translation fix) shows up as a failure that asks
for this table to be updated. Keys: (case, mode, output). Values: (verdict, what was observed).

Why, in TensorFlow's own code:
- tf.nn.moments computes the variance around tf.stop_gradient(mean): first derivatives are right
  (the mean's term vanishes), second derivatives are not, so every norm built on it (batch,
  instance, layer) is off in double backward w.r.t. its input.
- tf.nn.conv2d's CPU gradient kernels refuse groups (and depthwise, and dilations > 1) while the
  forward computes them (Keras compiles grouped convs with XLA for this reason). A depthwise conv goes
  through tf.nn.depthwise_conv2d and a dilated one through tf.nn.convolution, as Keras's layers call them,
  and match; a grouped one through tf.nn.conv2d's groups (NVIDIA's TF StyleGAN2's call) stays ERROR.
- tf.nn.max_pool2d with explicit paddings has a gradient, but MaxPoolGradGrad takes SAME/VALID only.
- ResizeBilinearGrad is declared NotDifferentiable, so d2g (the gradient w.r.t. the incoming
  gradient) does not exist in TensorFlow where torch's is nonzero (with
  unconnected_gradients=ZERO it would be a silent 0); ResizeNearestNeighborGrad has no gradient at all.
"""

KNOWN = {('batchnorm_eval_stats', 'vjp', '*'): ('UNSUPPORTED',
                                        "tensorflow's BatchNormalization does not differentiate its input(s) 3 "
                                        '(batchnorm_eval_stat'),
 ('batchnorm_eval_stats', 'vjp2', 'd2g:*'): ('UNSUPPORTED',
                                             "tensorflow's BatchNormalization does not differentiate its input(s) 3 "
                                             '(batchnorm_eval_stat'),
 ('batchnorm_eval_stats', 'vjp2', 'd2x:*'): ('UNSUPPORTED',
                                             "tensorflow's BatchNormalization does not differentiate its input(s) 3 "
                                             '(batchnorm_eval_stat'),
 ('batchnorm_train', 'vjp2', 'd2x:batchnorm_train.in0'): ('DIVERGENT',
                                                          'tensorflow -1.487 vs torch -1.455 at [0, 0, 0, 2], max abs '
                                                          '0.0321'),
 ('batchnorm_train_3d', 'vjp2', 'd2x:batchnorm_train_3d.in0'): ('DIVERGENT',
                                                                'tensorflow 2.272 vs torch 2.24 at [0, 1, 0, 0, 2], '
                                                                'max abs 0.0324'),
 ('batchnorm_train_m07', 'vjp2', 'd2x:batchnorm_train_m07.in0'): ('DIVERGENT',
                                                                  'tensorflow 0.2332 vs torch 0.2036 at [2, 1, 1, 0], '
                                                                  'max abs 0.0296'),
 ('conv_groups2', 'vjp', '*'): ('ERROR',
                                'InvalidArgumentError: Gradients for grouped convolutions are not supported on CPU. '
                                'Please '),
 ('conv_groups2', 'vjp2', 'd2g:*'): ('ERROR',
                                     'InvalidArgumentError: Gradients for grouped convolutions are not supported on '
                                     'CPU. Please '),
 ('conv_groups2', 'vjp2', 'd2x:*'): ('ERROR',
                                     'InvalidArgumentError: Gradients for grouped convolutions are not supported on '
                                     'CPU. Please '),
 ('conv_groups_batch', 'vjp', '*'): ('ERROR',
                                     'InvalidArgumentError: Gradients for grouped convolutions are not supported on '
                                     'CPU. Please '),
 ('conv_groups_batch', 'vjp2', 'd2g:*'): ('ERROR',
                                          'InvalidArgumentError: Gradients for grouped convolutions are not supported '
                                          'on CPU. Please '),
 ('conv_groups_batch', 'vjp2', 'd2x:*'): ('ERROR',
                                          'InvalidArgumentError: Gradients for grouped convolutions are not supported '
                                          'on CPU. Please '),
 ('instancenorm', 'vjp2', 'd2x:instancenorm.in0'): ('DIVERGENT',
                                                    'tensorflow -2.501 vs torch -2.528 at [0, 1, 1, 2], max abs '
                                                    '0.0268'),
 ('layernorm', 'vjp2', 'd2x:layernorm.in0'): ('DIVERGENT',
                                              'tensorflow 0.7705 vs torch 0.9374 at [0, 4, 3], max abs 0.167'),
 ('maxpool_asym', 'vjp2', 'd2g:*'): ('ERROR',
                                     'InvalidArgumentError: Value for attr \'padding\' of "EXPLICIT" is not in the '
                                     'list of allowed'),
 ('maxpool_asym', 'vjp2', 'd2x:*'): ('ERROR',
                                     'InvalidArgumentError: Value for attr \'padding\' of "EXPLICIT" is not in the '
                                     'list of allowed'),
 ('maxpool_k3s2p1', 'vjp2', 'd2g:*'): ('ERROR',
                                       'InvalidArgumentError: Value for attr \'padding\' of "EXPLICIT" is not in the '
                                       'list of allowed'),
 ('maxpool_k3s2p1', 'vjp2', 'd2x:*'): ('ERROR',
                                       'InvalidArgumentError: Value for attr \'padding\' of "EXPLICIT" is not in the '
                                       'list of allowed'),
 ('resize_linear_align_corners', 'vjp2', 'd2g:resize_linear_align_corners.out0'): ('DIVERGENT',
                                                                                   'tensorflow computes no gradient '
                                                                                   'for '
                                                                                   'g:resize_linear_align_corners.out0'),
 ('resize_linear_half_pixel', 'vjp2', 'd2g:resize_linear_half_pixel.out0'): ('DIVERGENT',
                                                                             'tensorflow computes no gradient for '
                                                                             'g:resize_linear_half_pixel.out0'),
 ('resize_nearest', 'vjp2', 'd2g:*'): ('ERROR',
                                       'LookupError: gradient registry has no entry for: ResizeNearestNeighborGrad '
                                       '(registry.py:95'),
 ('resize_negative_axes', 'vjp2', 'd2g:resize_negative_axes.out0'): ('DIVERGENT',
                                                                     'tensorflow computes no gradient for '
                                                                     'g:resize_negative_axes.out0')}


# Among them, the cases added for issue 26 at the end of tests/op_cases.py (the ones TensorFlow's table has): the
# bilinear resize's second derivative again (as resize_linear_half_pixel)

# Distinct findings (op type, mode, verdict) on the example models, as observed. Every node of every
# example is compared (none UNSUPPORTED). stylegan2's modulated convs are grouped (groups = batch), so
# their gradients raise on CPU; resnet's MaxPool has explicit pads, so its double backward raises.
EXAMPLES = {'gpt': [('LayerNormalization', 'vjp2', 'DIVERGENT')],
 'resnet': [('MaxPool', 'vjp2', 'ERROR'), ('TrainBatchNormalization', 'vjp2', 'DIVERGENT')],
 'stylegan2': [('Conv', 'vjp', 'ERROR'), ('Conv', 'vjp2', 'ERROR')],
 'wideresnet': [],
 'wideresnet-train': [('TrainBatchNormalization', 'vjp2', 'DIVERGENT')]}
