"""A user's distributed TensorFlow program in the shape of the study's MNIST case study (§4.4).

Between-graph replication with tf.compat.v1: variables on the parameter servers through
replica_device_setter, each worker trains on its own batches. The parameter server does
what most such programs do: ``server.join()`` forever; the launcher stops it when the
workers are done. Images are random 28x28 digits-shaped arrays, so nothing is downloaded.

    python examples/mnist_distributed.py --job_name worker --task_index 0 \
        --ps_hosts localhost:2230 --worker_hosts localhost:2220,localhost:2221 --steps 50
"""

import argparse
import sys


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--job_name", choices=("ps", "worker"), required=True)
    parser.add_argument("--task_index", type=int, required=True)
    parser.add_argument("--ps_hosts", required=True)
    parser.add_argument("--worker_hosts", required=True)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch_size", type=int, default=32)
    return parser.parse_args(argv)


def model(images, labels, tf):
    """Two convolutions and a dense layer, as the tutorial's deep MNIST."""
    def conv(x, name, out):
        w = tf.compat.v1.get_variable(f"{name}_w", [5, 5, x.shape[-1], out])
        b = tf.compat.v1.get_variable(f"{name}_b", [out], initializer=tf.compat.v1.zeros_initializer())
        y = tf.nn.relu(tf.nn.conv2d(x, w, strides=1, padding="SAME") + b)
        return tf.nn.max_pool2d(y, ksize=2, strides=2, padding="SAME")

    x = conv(conv(images, "conv1", 8), "conv2", 16)
    x = tf.reshape(x, [-1, 7 * 7 * 16])
    w = tf.compat.v1.get_variable("fc_w", [7 * 7 * 16, 10])
    b = tf.compat.v1.get_variable("fc_b", [10], initializer=tf.compat.v1.zeros_initializer())
    logits = tf.matmul(x, w) + b
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))


def main(argv):
    args = parse_args(argv)
    import tensorflow as tf  # after argument parsing: bad flags fail fast

    tf.compat.v1.disable_eager_execution()
    cluster = tf.train.ClusterSpec({"ps": args.ps_hosts.split(","), "worker": args.worker_hosts.split(",")})
    server = tf.distribute.Server(cluster, job_name=args.job_name, task_index=args.task_index)
    if args.job_name == "ps":
        server.join()
        return 0

    worker = f"/job:worker/task:{args.task_index}"
    with tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(worker_device=worker, cluster=cluster)):
        images = tf.random.uniform([args.batch_size, 28, 28, 1])
        labels = tf.random.uniform([args.batch_size], maxval=10, dtype=tf.int32)
        loss = model(images, labels, tf)
        step = tf.compat.v1.train.get_or_create_global_step()
        train = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=step)
        init = tf.compat.v1.global_variables_initializer()
        ready = tf.compat.v1.report_uninitialized_variables()

    # Each worker's session reaches the PSs and itself only. Without the filter a session waits
    # for every task of the cluster, and a worker that starts late waits forever for a worker
    # that has already finished its steps and exited.
    config = tf.compat.v1.ConfigProto(device_filters=["/job:ps", worker])
    # Non-chief workers wait until the chief has initialised the variables on the PSs.
    manager = tf.compat.v1.train.SessionManager(ready_op=ready, recovery_wait_secs=0.2)
    if args.task_index == 0:
        sess = manager.prepare_session(server.target, init_op=init, config=config)
    else:
        sess = manager.wait_for_session(server.target, config=config)
    for i in range(args.steps):
        _, value = sess.run([train, loss])
        if i % 10 == 0 or i == args.steps - 1:
            print(f"worker {args.task_index} step {i} loss {value:.4f}", flush=True)
    print(f"worker {args.task_index} done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
