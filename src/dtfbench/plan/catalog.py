"""Names the workload accepts, and what each model needs, without importing TensorFlow.

The plan (validated on the controller before anything starts) and the workload's flag
parser both read these, so a name is known in exactly one place. Pure standard library:
Ansible ships this file as module_utils (``ansible.module_utils.dtfbench.plan.catalog``).
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSpec:
    name: str
    default_image_size: int
    # The smallest input the architecture accepts (smaller ones shrink a feature map to
    # nothing); checked as bad input before TF is imported.
    min_image_size: int
    description: str


MODEL_SPECS = {
    spec.name: spec
    for spec in (
        ModelSpec("inception3", 299, 75, "InceptionV3 as in tf_cnn_benchmarks, the study's model"),
        ModelSpec("resnet50", 224, 32, "ResNet-50 v1 as in tf_cnn_benchmarks"),
        ModelSpec("resnet101", 224, 32, "ResNet-101 v1 as in tf_cnn_benchmarks"),
        ModelSpec("vgg16", 224, 32, "VGG16 as in tf_cnn_benchmarks"),
        # 227: tf_cnn_benchmarks' size (224 + 3, which its VALID first conv needs for 6 x 6 at the end)
        ModelSpec("alexnet", 227, 67, "AlexNet as in tf_cnn_benchmarks (5 conv, 3 fc)"),
        ModelSpec("lenet", 28, 16, "LeNet-5 as in tf_cnn_benchmarks (2 conv, 2 fc)"),
        ModelSpec("trivial", 32, 1, "one dense layer on the flattened image (tests, overhead)"),
        ModelSpec("small_cnn", 32, 8, "two small conv layers (tests)"),
    )
}

# The launcher's modes (cluster jobs) and the workload's single-process baseline.
# The modes that keep the variables on parameter servers, and the one that has none.
PS_VARIABLE_UPDATES = ("parameter_server", "distributed_replicated")
ALL_REDUCE = "collective_all_reduce"
VARIABLE_UPDATES = (*PS_VARIABLE_UPDATES, ALL_REDUCE)
LOCAL_VARIABLE_UPDATES = ("independent",)
MODELS = tuple(MODEL_SPECS)
DATA_CHOICES = ("synthetic", "real")
