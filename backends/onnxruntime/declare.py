from backends._runtime.declare import Backend

# glibc raises its threshold for serving an allocation from mmap to the size of each large block freed,
# so the outputs of one-node sessions (a Transpose of a 2048 x 5632 weight: 46 MB each) came from the heap
# and were never returned: the worker grew with the model (4.2 GB at a 1.1B Llama's 2807 nodes, 1.2 GB at
# 245). A fixed threshold (glibc's default, 128 kB) keeps every large block mmapped, returned when freed.
BACKEND = Backend("onnxruntime", "onnxruntime",
                  "onnxruntime CPU, one-node sessions, graph optimizations off, fwd only",
                  module="onnxruntime", modes=("fwd",), needs=("onnxruntime", "onnx"), dtypes=("float32", "float16"),
                  variables={"MALLOC_MMAP_THRESHOLD_": "131072"})
