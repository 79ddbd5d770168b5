"""Names the workload accepts, without importing TensorFlow.

The plan (validated on the controller before anything starts) and the workload's flag
parser both read these, so a name is known in exactly one place.
"""

# model name -> default image size (pixels, square), as in tf_cnn_benchmarks.
MODELS = {
    "inception3": 299,
    "resnet50": 224,
    "resnet101": 224,
    "vgg16": 224,
    "alexnet": 224,
    "lenet": 28,
    # Small models for tests and the local default: seconds to build, ~1 GB per process.
    "small_cnn": 32,
    "trivial": 32,
}
VARIABLE_UPDATES = ("parameter_server", "distributed_replicated", "collective_all_reduce")
# Single-process mode (no cluster): the workload's local baseline, not a launcher mode.
LOCAL_VARIABLE_UPDATES = ("independent",)
DATA_CHOICES = ("synthetic", "real")
