"""Print each model's variables (name below ``cg/``, shape) as JSON: ours or tf_cnn_benchmarks'.

    python model_variables.py ours MODEL...
    python model_variables.py collective MODEL...
    python model_variables.py theirs TF_CNN_BENCHMARKS_DIR MODEL...
    python model_variables.py keras MODEL...
    python model_variables.py ours_initial MODEL...

Each model is built for training in its own graph at its default image size (ours from the
catalog, theirs from its model class), NHWC, batch 2, 1001 classes. ``collective`` builds
ours as collective_all_reduce does (eagerly, variables made by a MultiWorkerMirroredStrategy
of this one process). tf_cnn_benchmarks' models
are built with use_tf_layers=False, whose variables have the names and shapes of its default
tf.layers path (its ConvNetBuilder keeps them equal) and which needs no tf_keras.
``keras`` builds the Keras twin of a hand-written model (dtfbench.workload.models, the
benchmarks' baseline) and lists its weights as [layer path, shape, trainable, standard deviation
of the initial values]: Keras names differ, the shapes in order must not, nor how the initial
values spread. ``ours_initial`` lists ours' trainable variables so, initialised.

A standard deviation pools draws until it has seen at least DRAWN_VALUES values per variable:
one draw of a small layer (small_cnn's first, 432 weights) is a sample whose spread alone
moves by ~3%, and two such samples once stood 10% apart.
"""

import json
import math
import sys
import types

DRAWN_VALUES = 50_000
MAX_DRAWS = 100


def draws_for(size):
    return max(1, min(MAX_DRAWS, math.ceil(DRAWN_VALUES / max(size, 1))))


TF_CNN_CLASSES = {  # tf_cnn_benchmarks' models/model_config.py names them so
    "resnet50": ("resnet_model", "create_resnet50_model"),
    "resnet101": ("resnet_model", "create_resnet101_model"),
    "inception3": ("inception_model", "Inceptionv3Model"),
    "vgg16": ("vgg_model", "Vgg16Model"),
    "alexnet": ("alexnet_model", "AlexnetModel"),
    "lenet": ("lenet_model", "Lenet5Model"),
}


def variables_of(tf, graph):
    """[[name below cg/, shape, trainable]] in creation order."""
    keys = tf.compat.v1.GraphKeys
    trainable = {v.name for v in graph.get_collection(keys.TRAINABLE_VARIABLES)}
    rows = []
    for v in graph.get_collection(keys.GLOBAL_VARIABLES):
        name = v.name.split(":")[0]
        rows.append([name[name.index("cg/") + 3 :], v.shape.as_list(), v.name in trainable])
    return rows


def ours(tf, model):
    from dtfbench.plan.catalog import MODEL_SPECS
    from dtfbench.workload.cnn_models import build_network

    size = MODEL_SPECS[model].default_image_size
    graph = tf.Graph()
    with graph.as_default():
        images = tf.zeros([2, size, size, 3])
        build_network(tf, model, images, 1001, "NHWC")
    return size, variables_of(tf, graph)


def collective(tf, model):
    from dtfbench.workload import collective as all_reduce
    from dtfbench.workload import flags

    config, _ = flags.parse(["--variable_update", "independent", "--model", model, "--device", "cpu"])
    config = flags.check_devices(config, 0)
    with tf.distribute.MultiWorkerMirroredStrategy().scope():
        variables = all_reduce.build_variables(tf, config, all_reduce.network_template(tf, config))
    rows = [
        [name[name.index("cg/") + 3 :], shape, trainable]
        for name, shape, trainable in all_reduce.variable_rows(variables)
    ]
    return config.image_size, rows


def theirs(tf, root, model):
    import importlib

    sys.path.insert(0, root)  # the original tf_cnn_benchmarks checkout (not dtfbench): its models/ package
    module_name, class_name = TF_CNN_CLASSES[model]
    module = importlib.import_module(f"models.{module_name}")
    params = types.SimpleNamespace(
        use_tf_layers=False, fp16_vars=False, use_fp16=False, data_format="NHWC", resnet_base_lr=None, batch_size=2
    )
    cnn_model = getattr(module, class_name)(params=params)
    size = cnn_model.image_size
    graph = tf.Graph()
    with graph.as_default():
        images = tf.zeros([2, size, size, 3])
        labels = tf.zeros([2], tf.int32)
        cnn_model.build_network((images, labels), phase_train=True, nclass=1001)
    return size, variables_of(tf, graph)


def keras_twin(tf, model):
    """[[layer path, shape, trainable, standard deviation of the initial values]]."""
    import numpy as np

    from dtfbench.plan.catalog import MODEL_SPECS
    from dtfbench.workload.models import build_model

    size = MODEL_SPECS[model].default_image_size
    net = build_model(model, size, 1001, "NHWC")
    # The weight as built, and more draws from the initializer that drew it.
    initializers = {}
    for layer in net.layers:
        for attribute in ("kernel", "bias"):
            weight = getattr(layer, attribute, None)
            if weight is not None:
                initializers[weight.path] = getattr(layer, attribute + "_initializer")

    def spread(w):
        shape, values = tuple(w.shape), [w.numpy().ravel()]
        for _ in range(draws_for(int(np.prod(shape))) - 1):
            values.append(np.asarray(initializers[w.path](shape)).ravel())
        return float(np.concatenate(values).std())

    return size, [[w.path, list(w.shape), w.trainable, spread(w)] for w in net.weights]


def ours_initial(tf, model):
    """ours' trainable variables with the standard deviation of their initial values."""
    import numpy as np

    from dtfbench.plan.catalog import MODEL_SPECS
    from dtfbench.workload.cnn_models import build_network

    size = MODEL_SPECS[model].default_image_size
    graph = tf.Graph()
    with graph.as_default():
        build_network(tf, model, tf.zeros([2, size, size, 3]), 1001, "NHWC")
        variables = graph.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            drawn = {v.name: [x.ravel()] for v, x in zip(variables, session.run(variables))}
            for draw in range(1, MAX_DRAWS):
                again = [v for v in variables if draw < draws_for(v.shape.num_elements())]
                if not again:
                    break
                session.run([v.initializer for v in again])
                for v, x in zip(again, session.run(again)):
                    drawn[v.name].append(x.ravel())
    return size, [[v.name, v.shape.as_list(), True, float(np.concatenate(drawn[v.name]).std())] for v in variables]


def main(argv):
    import tensorflow as tf

    if argv[0] in ("ours", "collective", "keras", "ours_initial"):
        build = {"ours": ours, "collective": collective, "keras": keras_twin, "ours_initial": ours_initial}[argv[0]]
        result = {m: build(tf, m) for m in argv[1:]}
    else:
        result = {m: theirs(tf, argv[1], m) for m in argv[2:]}
    print("MODEL_VARIABLES " + json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
