"""The graph-mode workload's networks: tf_cnn_benchmarks' architectures on cnn_builder.

``build_network`` returns the logits of one tower and the batch-norm update ops. Variables are
created with tf.compat.v1.get_variable under the scope ``cg`` (tf_cnn_benchmarks' name), inside
whatever outer scope, device and reuse the caller sets. At each model's default image size the
variables, their names and shapes per layer, equal tf_cnn_benchmarks' (master) models:
tests/workload/test_cnn_models_match.py builds both and compares. Other image sizes work too:
the flattened size and Inception's last pool follow the feature map instead of being fixed.

trivial and small_cnn are this project's own test models, not tf_cnn_benchmarks'.

``weight_decay_loss`` is tf_cnn_benchmarks' L2 term of the loss, the same in every
``--variable_update``.
"""

from dataclasses import dataclass

from ..plan.catalog import MODEL_SPECS
from .cnn_builder import ConvNetBuilder

RESNET_LAYERS = {"resnet50": (3, 4, 6, 3), "resnet101": (3, 4, 23, 3)}


@dataclass
class Network:
    logits: object
    update_ops: list


def build_network(tf, name, images, num_classes, data_format, phase_train=True):
    if name not in MODEL_SPECS:
        raise ValueError(f"unknown model {name}")
    cnn = ConvNetBuilder(tf, images, data_format, phase_train)
    with tf.compat.v1.variable_scope("cg"):
        if name in RESNET_LAYERS:
            _resnet_v1(tf, cnn, RESNET_LAYERS[name])
        else:
            {
                "inception3": _inception3,
                "vgg16": _vgg16,
                "alexnet": _alexnet,
                "lenet": _lenet,
                "trivial": _trivial,
                "small_cnn": _small_cnn,
            }[name](cnn)
        logits = cnn.affine(num_classes, activation="linear")
    return Network(logits, cnn.update_ops)


def _alexnet(cnn):
    cnn.conv(64, 11, 11, 4, 4, "VALID")
    cnn.mpool(3, 3, 2, 2)
    cnn.conv(192, 5, 5)
    cnn.mpool(3, 3, 2, 2)
    cnn.conv(384, 3, 3)
    cnn.conv(384, 3, 3)
    cnn.conv(256, 3, 3)
    cnn.mpool(3, 3, 2, 2)
    cnn.flatten()
    cnn.affine(4096)
    cnn.dropout()
    cnn.affine(4096)
    cnn.dropout()


def _vgg16(cnn):
    for repeats, channels in zip((2, 2, 3, 3, 3), (64, 128, 256, 512, 512)):
        for _ in range(repeats):
            cnn.conv(channels, 3, 3)
        cnn.mpool(2, 2)
    cnn.flatten()
    cnn.affine(4096)
    cnn.dropout()
    cnn.affine(4096)
    cnn.dropout()


def _lenet(cnn):
    cnn.conv(32, 5, 5)
    cnn.mpool(2, 2)
    cnn.conv(64, 5, 5)
    cnn.mpool(2, 2)
    cnn.flatten()
    cnn.affine(512)


def _trivial(cnn):
    cnn.flatten()


def _small_cnn(cnn):
    cnn.conv(16, 3, 3)
    cnn.mpool(2, 2)
    cnn.conv(32, 3, 3)
    cnn.spatial_mean()


def _bottleneck_v1(tf, cnn, depth, depth_bottleneck, stride):
    input_layer, in_size = cnn.top_layer, cnn.top_size
    with tf.compat.v1.variable_scope(cnn._name("resnet_v1")):
        if depth == in_size:
            shortcut = (
                input_layer
                if stride == 1
                else cnn.apool(1, 1, stride, stride, input_layer=input_layer, num_channels_in=in_size)
            )
        else:
            shortcut = cnn.conv(
                depth,
                1,
                1,
                stride,
                stride,
                activation=None,
                use_batch_norm=True,
                input_layer=input_layer,
                num_channels_in=in_size,
                bias=None,
            )
        cnn.conv(
            depth_bottleneck,
            1,
            1,
            stride,
            stride,
            input_layer=input_layer,
            num_channels_in=in_size,
            use_batch_norm=True,
            bias=None,
        )
        cnn.conv(depth_bottleneck, 3, 3, 1, 1, mode="SAME_RESNET", use_batch_norm=True, bias=None)
        res = cnn.conv(depth, 1, 1, 1, 1, activation=None, use_batch_norm=True, bias=None)
        cnn.top_layer = tf.nn.relu(shortcut + res)
        cnn.top_size = depth


def _resnet_v1(tf, cnn, layer_counts):
    cnn.use_batch_norm = True
    cnn.batch_norm_config = {"decay": 0.9, "epsilon": 1e-5, "scale": True}
    cnn.conv(64, 7, 7, 2, 2, mode="SAME_RESNET", use_batch_norm=True)
    cnn.mpool(3, 3, 2, 2, mode="SAME")
    for stage, (count, depth) in enumerate(zip(layer_counts, (256, 512, 1024, 2048))):
        for i in range(count):
            stride = 2 if stage > 0 and i == 0 else 1
            _bottleneck_v1(tf, cnn, depth, depth // 4, stride)
    cnn.spatial_mean()


def _inception3(cnn):
    def block_a(n):
        cnn.inception_module(
            "incept_v3_a",
            [
                [("conv", 64, 1, 1)],
                [("conv", 48, 1, 1), ("conv", 64, 5, 5)],
                [("conv", 64, 1, 1), ("conv", 96, 3, 3), ("conv", 96, 3, 3)],
                [("apool", 3, 3, 1, 1, "SAME"), ("conv", n, 1, 1)],
            ],
        )

    def block_b():
        cnn.inception_module(
            "incept_v3_b",
            [
                [("conv", 384, 3, 3, 2, 2, "VALID")],
                [("conv", 64, 1, 1), ("conv", 96, 3, 3), ("conv", 96, 3, 3, 2, 2, "VALID")],
                [("mpool", 3, 3, 2, 2, "VALID")],
            ],
        )

    def block_c(n):
        cnn.inception_module(
            "incept_v3_c",
            [
                [("conv", 192, 1, 1)],
                [("conv", n, 1, 1), ("conv", n, 1, 7), ("conv", 192, 7, 1)],
                [("conv", n, 1, 1), ("conv", n, 7, 1), ("conv", n, 1, 7), ("conv", n, 7, 1), ("conv", 192, 1, 7)],
                [("apool", 3, 3, 1, 1, "SAME"), ("conv", 192, 1, 1)],
            ],
        )

    def block_d():
        cnn.inception_module(
            "incept_v3_d",
            [
                [("conv", 192, 1, 1), ("conv", 320, 3, 3, 2, 2, "VALID")],
                [("conv", 192, 1, 1), ("conv", 192, 1, 7), ("conv", 192, 7, 1), ("conv", 192, 3, 3, 2, 2, "VALID")],
                [("mpool", 3, 3, 2, 2, "VALID")],
            ],
        )

    def block_e(pool):
        cnn.inception_module(
            "incept_v3_e",
            [
                [("conv", 320, 1, 1)],
                [("conv", 384, 1, 1), ("conv", 384, 1, 3)],
                [("share",), ("conv", 384, 3, 1)],
                [("conv", 448, 1, 1), ("conv", 384, 3, 3), ("conv", 384, 1, 3)],
                [("share",), ("share",), ("conv", 384, 3, 1)],
                [(pool, 3, 3, 1, 1, "SAME"), ("conv", 192, 1, 1)],
            ],
        )

    cnn.use_batch_norm = True
    cnn.conv(32, 3, 3, 2, 2, mode="VALID")
    cnn.conv(32, 3, 3, 1, 1, mode="VALID")
    cnn.conv(64, 3, 3, 1, 1, mode="SAME")
    cnn.mpool(3, 3, 2, 2, mode="VALID")
    cnn.conv(80, 1, 1, 1, 1, mode="VALID")
    cnn.conv(192, 3, 3, 1, 1, mode="VALID")
    cnn.mpool(3, 3, 2, 2, "VALID")
    block_a(32)
    block_a(64)
    block_a(64)
    block_b()
    for n in (128, 160, 160, 192):
        block_c(n)
    block_d()
    block_e("apool")
    block_e("mpool")
    height, width = cnn.spatial_size()  # 8 x 8 at 299 x 299, as tf_cnn_benchmarks' apool(8, 8)
    cnn.apool(height, width, 1, 1, "VALID")
    cnn.flatten()


def decayed_variables(variables):
    """The variables the weight decay applies to: all but batch norm's (tf_cnn_benchmarks'
    Model.filter_l2_loss_vars drops every variable with ``batchnorm`` in its name)."""
    return [v for v in variables if "batchnorm" not in v.name]


def weight_decay_loss(tf, variables, weight_decay):
    """``weight_decay * sum(l2_loss(v))`` over ``decayed_variables``; None when there is none.

    tf_cnn_benchmarks adds this (``--weight_decay``, default 4e-5) to the loss it differentiates
    and reports (``total_loss``). It computes it on one tower and multiplies it by the towers,
    so that their averaged gradients decay each variable by ``weight_decay`` once per step:
    callers scale it the same way for their towers and replicas.
    """
    decayed = decayed_variables(variables)
    if not weight_decay or not decayed:
        return None
    with tf.name_scope("l2_loss"):
        return weight_decay * tf.math.add_n([tf.nn.l2_loss(v) for v in decayed])
