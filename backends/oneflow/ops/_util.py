import oneflow

# ONNX TensorProto data type -> OneFlow dtype
ONNX_TO_FLOW = {1: oneflow.float32, 2: oneflow.uint8, 3: oneflow.int8, 6: oneflow.int32, 7: oneflow.int64,
                9: oneflow.bool, 10: oneflow.float16, 11: oneflow.float64, 16: oneflow.bfloat16}
