"""Print, per mode, the step's loss with and without the weight decay, and the L2 term itself.

    python weight_decay_terms.py MODEL IMAGE_SIZE WEIGHT_DECAY

``graph``: the loss of the graph-mode modes (variable_update.tower_forward, two towers sharing
the variables as parameter_server's do, their losses averaged). ``collective``: the loss
collective_all_reduce sums over its replicas (collective.replica_loss, two replicas of a
MirroredStrategy on two logical CPUs). Each mode computes both losses on the same variables
and inputs in one run; ``l2`` is 0.5 * sum of squares over every trainable variable whose name
has no ``batchnorm``, computed here with numpy from the variables' values, and ``l2_all`` the
same over every trainable variable (the two differ when the network has batch norm).
"""

import json
import sys

import numpy as np


def parse(model, image_size, weight_decay):
    from dtfbench.workload import flags

    argv = ["--variable_update", "independent", "--model", model, "--image_size", image_size, "--device", "cpu"]
    config, _ = flags.parse([*argv, "--batch_size", "2", "--weight_decay", weight_decay])
    return flags.check_devices(config, 0)


def l2_terms(named_values):
    decayed = sum(0.5 * float(np.sum(np.square(v))) for name, v in named_values if "batchnorm" not in name)
    every = sum(0.5 * float(np.sum(np.square(v))) for _, v in named_values)
    return decayed, every


def inputs(config):
    rng = np.random.default_rng(7)
    images = rng.normal(size=(config.batch_size, config.image_size, config.image_size, 3)).astype(np.float32)
    labels = rng.integers(0, config.num_classes, size=(config.batch_size,)).astype(np.int32)
    return images, labels


def graph_mode(tf, decayed_config, plain_config):
    from dtfbench.workload.variable_update import tower_forward

    images, labels = inputs(decayed_config)
    graph = tf.Graph()
    with graph.as_default():
        losses = {}
        for name, config in (("decayed", decayed_config), ("plain", plain_config)):
            towers = [
                tower_forward(tf, config, images, labels, "/cpu:0", k, 2, "v", reuse=(name == "plain" or k > 0))
                for k in range(2)
            ]
            losses[name] = tf.math.add_n([t.loss for t in towers]) / 2.0  # as variable_update._finish
        params = tf.compat.v1.trainable_variables()
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            values, params_values = sess.run([losses, params])
    return values, [(p.name, v) for p, v in zip(params, params_values)]


def collective_mode(tf, decayed_config, plain_config):
    from dtfbench.workload import collective

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        network = collective.network_template(tf, decayed_config)
        variables = collective.build_variables(tf, decayed_config, network)
    params = [v for v in variables if v.trainable]
    images, labels = inputs(decayed_config)
    global_batch = decayed_config.batch_size * strategy.num_replicas_in_sync

    def replica(images, labels):
        logits = network(images, True).logits
        return [
            collective.replica_loss(tf, config, logits, labels, params, global_batch)
            for config in (decayed_config, plain_config)
        ]

    @tf.function
    def step():
        per_replica = strategy.run(replica, args=(tf.constant(images), tf.constant(labels)))
        return [strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None) for loss in per_replica]

    decayed, plain = step()
    return {"decayed": float(decayed), "plain": float(plain)}, [(p.name, p.numpy()) for p in params]


def main(model, image_size, weight_decay):
    import tensorflow as tf

    # Two CPU devices for the two replicas; set before anything starts TF's runtime.
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    decayed_config = parse(model, image_size, weight_decay)
    plain_config = parse(model, image_size, "0")
    result = {}
    for mode, build in (("graph", graph_mode), ("collective", collective_mode)):
        losses, named_values = build(tf, decayed_config, plain_config)
        decayed, every = l2_terms(named_values)
        result[mode] = {
            "loss": float(losses["decayed"]),
            "loss_without_decay": float(losses["plain"]),
            "l2": decayed,
            "l2_all": every,
        }
    print("WEIGHT_DECAY_TERMS " + json.dumps(result))


if __name__ == "__main__":
    main(*sys.argv[1:])
