"""Graph-mode layers on raw TF ops, named as tf_cnn_benchmarks' ConvNetBuilder names them.

Why not Keras 3 layers: one profiled ResNet-50 step (docs/workload_speed.md) spent a third
of its op time in Keras 3's BatchNormalization, which builds the batch moments from
Mean/SquaredDifference/Sub/Mul ops, and in the gradients of conv biases that
keras.applications' ResNet50 has and tf_cnn_benchmarks' has not. Here batch norm is one
FusedBatchNormV3 (oneDNN fuses it further), convolutions are tf.nn.conv2d, and variables come
from tf.compat.v1.get_variable under the caller's variable scope, so the placement rules of
variable_update (replica_device_setter, reuse across towers) apply to them as they did in
tf_cnn_benchmarks. Every layer's variables have tf_cnn_benchmarks' names and shapes
(conv0/conv2d/kernel, conv0/batchnorm0/gamma ...); a test checks that against its models.
"""

import math
from collections import defaultdict


class ConvNetBuilder:
    """Stacks layers on ``top_layer``; ``update_ops`` collects the batch-norm moving averages."""

    def __init__(self, tf, images, data_format="NHWC", phase_train=True):
        self.tf = tf
        self.v1 = tf.compat.v1
        self.top_layer = images
        self.data_format = data_format
        self.channel_axis = 3 if data_format == "NHWC" else 1
        self.top_size = int(images.shape[self.channel_axis])
        self.phase_train = phase_train
        self.counts = defaultdict(int)
        self.use_batch_norm = False
        self.batch_norm_config = {}
        self.update_ops = []

    # -- helpers ---------------------------------------------------------------------------

    def _name(self, key):
        name = f"{key}{self.counts[key]}"
        self.counts[key] += 1
        return name

    def _nchw(self, nhwc_list):
        return nhwc_list if self.data_format == "NHWC" else [nhwc_list[0], nhwc_list[3], nhwc_list[1], nhwc_list[2]]

    def spatial_size(self):
        shape = self.top_layer.shape
        return (int(shape[1]), int(shape[2])) if self.data_format == "NHWC" else (int(shape[2]), int(shape[3]))

    # -- layers ----------------------------------------------------------------------------

    def conv(
        self,
        num_out,
        k_height,
        k_width,
        d_height=1,
        d_width=1,
        mode="SAME",
        input_layer=None,
        num_channels_in=None,
        use_batch_norm=None,
        stddev=None,
        activation="relu",
        bias=0.0,
    ):
        tf, v1 = self.tf, self.v1
        input_layer = self.top_layer if input_layer is None else input_layer
        num_channels_in = self.top_size if num_channels_in is None else num_channels_in
        if stddev is not None:
            initializer = v1.truncated_normal_initializer(stddev=stddev)
        else:
            initializer = v1.variance_scaling_initializer()
        strides = self._nchw([1, d_height, d_width, 1])
        with v1.variable_scope(self._name("conv")):
            kernel = v1.get_variable(
                "conv2d/kernel", [k_height, k_width, num_channels_in, num_out], tf.float32, initializer=initializer
            )
            padding = "SAME" if mode == "SAME_RESNET" else mode
            if mode == "SAME_RESNET" and (d_height, d_width) != (1, 1):
                # ResNet's strided convs pad explicitly, independent of the input size.
                pad_h, pad_w = k_height - 1, k_width - 1
                pads = self._nchw([[0, 0], [pad_h // 2, pad_h - pad_h // 2], [pad_w // 2, pad_w - pad_w // 2], [0, 0]])
                input_layer = tf.pad(input_layer, pads)
                padding = "VALID"
            conv = tf.nn.conv2d(input_layer, kernel, strides, padding, data_format=self.data_format)
            use_batch_norm = self.use_batch_norm if use_batch_norm is None else use_batch_norm
            if use_batch_norm:
                self.top_layer, self.top_size = conv, num_out
                out = self.batch_norm(**self.batch_norm_config)
            elif bias is not None:
                biases = v1.get_variable("biases", [num_out], tf.float32, initializer=v1.constant_initializer(bias))
                out = tf.nn.bias_add(conv, biases, data_format=self.data_format)
            else:
                out = conv
            if activation == "relu":
                out = tf.nn.relu(out)
        self.top_layer, self.top_size = out, num_out
        return out

    def _pool(self, key, function, k_height, k_width, d_height, d_width, mode, input_layer, num_channels_in):
        if input_layer is None:
            input_layer = self.top_layer
        else:
            self.top_size = num_channels_in
        self.top_layer = function(
            input_layer,
            self._nchw([1, k_height, k_width, 1]),
            self._nchw([1, d_height, d_width, 1]),
            padding=mode,
            data_format=self.data_format,
            name=self._name(key),
        )
        return self.top_layer

    def mpool(self, k_height, k_width, d_height=2, d_width=2, mode="VALID", input_layer=None, num_channels_in=None):
        return self._pool(
            "mpool", self.tf.nn.max_pool2d, k_height, k_width, d_height, d_width, mode, input_layer, num_channels_in
        )

    def apool(self, k_height, k_width, d_height=2, d_width=2, mode="VALID", input_layer=None, num_channels_in=None):
        return self._pool(
            "apool", self.tf.nn.avg_pool2d, k_height, k_width, d_height, d_width, mode, input_layer, num_channels_in
        )

    def flatten(self):
        """tf_cnn_benchmarks' reshape([-1, C*H*W]), with the size read from the shape (any image size)."""
        size = math.prod(int(d) for d in self.top_layer.shape[1:])
        self.top_layer = self.tf.reshape(self.top_layer, [-1, size])
        self.top_size = size
        return self.top_layer

    def affine(self, num_out, bias=0.0, stddev=None, activation="relu"):
        tf, v1 = self.tf, self.v1
        with v1.variable_scope(self._name("affine")):
            stddev = stddev or math.sqrt((2.0 if activation == "relu" else 1.0) / self.top_size)
            weights = v1.get_variable(
                "weights",
                [self.top_size, num_out],
                tf.float32,
                initializer=v1.truncated_normal_initializer(stddev=stddev),
            )
            biases = v1.get_variable("biases", [num_out], tf.float32, initializer=v1.constant_initializer(bias))
            out = tf.nn.bias_add(tf.linalg.matmul(self.top_layer, weights), biases)
            if activation == "relu":
                out = tf.nn.relu(out)
        self.top_layer, self.top_size = out, num_out
        return out

    def dropout(self, keep_prob=0.5):
        with self.v1.variable_scope(f"dropout{self.counts['dropout']}"):  # tf_cnn_benchmarks never counts up
            if self.phase_train:
                self.top_layer = self.tf.nn.dropout(self.top_layer, rate=1.0 - keep_prob)
        return self.top_layer

    def spatial_mean(self):
        axes = [1, 2] if self.data_format == "NHWC" else [2, 3]
        self.top_layer = self.tf.reduce_mean(self.top_layer, axes, name=self._name("spatial_mean"))
        return self.top_layer

    def batch_norm(self, decay=0.999, scale=False, epsilon=0.001):
        tf, v1 = self.tf, self.v1
        channels = self.top_size
        with v1.variable_scope(self._name("batchnorm")):
            beta = v1.get_variable("beta", [channels], tf.float32, initializer=v1.zeros_initializer())
            if scale:
                gamma = v1.get_variable("gamma", [channels], tf.float32, initializer=v1.ones_initializer())
            else:
                gamma = tf.ones([channels], tf.float32)
            moving_mean = v1.get_variable(
                "moving_mean", [channels], tf.float32, initializer=v1.zeros_initializer(), trainable=False
            )
            moving_variance = v1.get_variable(
                "moving_variance", [channels], tf.float32, initializer=v1.ones_initializer(), trainable=False
            )
            if self.phase_train:
                out, mean, variance = v1.nn.fused_batch_norm(
                    self.top_layer, gamma, beta, epsilon=epsilon, data_format=self.data_format, is_training=True
                )
                for variable, value in ((moving_mean, mean), (moving_variance, variance)):
                    # assign_moving_average without zero debiasing, as tf_cnn_benchmarks.
                    self.update_ops.append(variable.assign_sub((variable - value) * (1.0 - decay), read_value=False))
            else:
                out, _, _ = v1.nn.fused_batch_norm(
                    self.top_layer,
                    gamma,
                    beta,
                    mean=moving_mean,
                    variance=moving_variance,
                    epsilon=epsilon,
                    data_format=self.data_format,
                    is_training=False,
                )
        self.top_layer = out
        return out

    def inception_module(self, name, cols):
        input_layer, in_size = self.top_layer, self.top_size
        # tf_cnn_benchmarks counts under the numbered name, so every module is "<name>0"
        # (its variables differ by the conv counter): the same names here.
        with self.v1.variable_scope(f"{name}0"):
            col_layers, col_sizes = [], []
            for c, col in enumerate(cols):
                col_layers.append([])
                col_sizes.append([])
                for index, (kind, *args) in enumerate(col):
                    first = {"input_layer": input_layer, "num_channels_in": in_size} if index == 0 else {}
                    if kind == "share":  # the same layer as the previous column's
                        self.top_layer, self.top_size = col_layers[c - 1][index], col_sizes[c - 1][index]
                    else:
                        getattr(self, kind)(*args, **first)
                    col_layers[c].append(self.top_layer)
                    col_sizes[c].append(self.top_size)
            self.top_layer = self.tf.concat([layers[-1] for layers in col_layers], self.channel_axis)
            self.top_size = sum(sizes[-1] for sizes in col_sizes)
        return self.top_layer
