"""Keras 3 models for ``--model`` (weights=None: nothing is downloaded).

Used only by the Keras baseline of benchmarks/workload_vs_keras.py (a second opinion on the
workload's speed). Every ``--variable_update`` builds tf_cnn_benchmarks' networks from
cnn_models instead: keras.applications' ResNet50 is not tf_cnn_benchmarks' (conv biases), and
Keras 3's unfused batch norm cost a third of a step (docs/workload_speed.md).

Every builder returns a keras.Model mapping images (NHWC or NCHW, float32) to logits
(no softmax: the loss is softmax cross-entropy on logits, as in tf_cnn_benchmarks). The
hand-written twins (alexnet, lenet, trivial, small_cnn) are our networks (cnn_models) layer for
layer, their initial weights drawn as ours (tf_cnn_benchmarks' cnn_builder): convolutions from
variance scaling (fan-in, truncated normal), dense layers from a truncated normal of standard
deviation sqrt(2 / fan-in) before a ReLU and sqrt(1 / fan-in) for the logits, biases 0; Keras'
default (Glorot uniform) learnt the digits half as fast per epoch, which compared two trainings.
Keras' image data format is set from --data_format before building, so the
keras.applications models and the hand-written ones follow it alike.
"""

from ..plan.catalog import MODEL_SPECS


def input_shape(image_size, data_format):
    return (3, image_size, image_size) if data_format == "NCHW" else (image_size, image_size, 3)


def build_model(name, image_size, num_classes, data_format):
    import keras

    keras.config.set_image_data_format("channels_first" if data_format == "NCHW" else "channels_last")
    if name not in MODEL_SPECS:
        raise ValueError(f"unknown model {name}")
    shape = input_shape(image_size, data_format)
    apps = keras.applications
    application = {
        "inception3": apps.InceptionV3,
        "resnet50": apps.ResNet50,
        "resnet101": apps.ResNet101,
        "vgg16": apps.VGG16,
    }.get(name)
    if application is not None:
        return application(
            weights=None, include_top=True, input_shape=shape, classes=num_classes, classifier_activation=None
        )
    builder = {"alexnet": _alexnet, "lenet": _lenet, "trivial": _trivial, "small_cnn": _small_cnn}[name]
    return builder(_Layers(keras), shape, num_classes)


class _Layers:
    """keras.layers with our networks' initial weights (cnn_builder's conv and affine)."""

    def __init__(self, keras):
        self.keras = keras
        self.Input, self.Sequential = keras.Input, keras.Sequential
        layers = keras.layers
        self.MaxPooling2D, self.Flatten, self.Dropout = layers.MaxPooling2D, layers.Flatten, layers.Dropout
        self.GlobalAveragePooling2D = layers.GlobalAveragePooling2D

    def Conv2D(self, filters, kernel, **options):
        initializer = self.keras.initializers.VarianceScaling(1.0, "fan_in", "truncated_normal")
        return self.keras.layers.Conv2D(filters, kernel, kernel_initializer=initializer, **options)

    def Dense(self, units, activation=None):
        scale = 2.0 if activation == "relu" else 1.0
        return self.keras.layers.Dense(
            units, activation=activation, kernel_initializer=_fan_in_normal(self.keras, scale)
        )


def _fan_in_normal(keras, scale):
    import math

    class FanInTruncatedNormal(keras.initializers.Initializer):
        # tf.compat.v1.truncated_normal_initializer(stddev=sqrt(scale / fan_in)): no correction for the truncation.
        def __call__(self, shape, dtype=None):
            return keras.random.truncated_normal(shape, stddev=math.sqrt(scale / shape[0]), dtype=dtype)

    return FanInTruncatedNormal()


def _alexnet(L, shape, num_classes):
    # tf_cnn_benchmarks' AlexNet: conv 64/11/4, pool, 192/5, pool, 384/3, 384/3, 256/3, pool, fc 4096 x2.
    return L.Sequential(
        [
            L.Input(shape),
            L.Conv2D(64, 11, strides=4, padding="valid", activation="relu"),
            L.MaxPooling2D(3, 2),
            L.Conv2D(192, 5, padding="same", activation="relu"),
            L.MaxPooling2D(3, 2),
            L.Conv2D(384, 3, padding="same", activation="relu"),
            L.Conv2D(384, 3, padding="same", activation="relu"),
            L.Conv2D(256, 3, padding="same", activation="relu"),
            L.MaxPooling2D(3, 2),
            L.Flatten(),
            L.Dense(4096, activation="relu"),
            L.Dropout(0.5),
            L.Dense(4096, activation="relu"),
            L.Dropout(0.5),
            L.Dense(num_classes),
        ],
        name="alexnet",
    )


def _lenet(L, shape, num_classes):
    # tf_cnn_benchmarks' LeNet-5 (TF's MNIST tutorial model): "same" convolutions, so that 28 or 32
    # pixels keep their size up to each pool (64 x 8 x 8 features into the dense layer at 32).
    return L.Sequential(
        [
            L.Input(shape),
            L.Conv2D(32, 5, padding="same", activation="relu"),
            L.MaxPooling2D(2, 2),
            L.Conv2D(64, 5, padding="same", activation="relu"),
            L.MaxPooling2D(2, 2),
            L.Flatten(),
            L.Dense(512, activation="relu"),
            L.Dense(num_classes),
        ],
        name="lenet",
    )


def _trivial(L, shape, num_classes):
    # tf_cnn_benchmarks' "trivial": almost no compute, shows the framework overhead.
    return L.Sequential([L.Input(shape), L.Flatten(), L.Dense(num_classes)], name="trivial")


def _small_cnn(L, shape, num_classes):
    return L.Sequential(
        [
            L.Input(shape),
            L.Conv2D(16, 3, padding="same", activation="relu"),
            L.MaxPooling2D(2, 2),
            L.Conv2D(32, 3, padding="same", activation="relu"),
            L.GlobalAveragePooling2D(),
            L.Dense(num_classes),
        ],
        name="small_cnn",
    )
