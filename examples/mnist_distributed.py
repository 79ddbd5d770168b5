"""A user's distributed TensorFlow program in the shape of the study's MNIST case study (§4.4).

Between-graph replication with tf.compat.v1: variables on the parameter servers through
replica_device_setter, each worker trains on its own batches of real handwritten digits and
prints its train accuracy; worker 0 evaluates the test accuracy on the held-out digits at the
end, as the study's dist_deepMNIST_gpu.py does. The parameter server does what most such
programs do: ``server.join()`` forever; the launcher stops it when the workers are done.

The digits are scikit-learn's (1,797 8x8 scans, shipped inside the package: nothing is
downloaded), or the shards ``dtfbench tfrecords --dataset digits`` writes (``--data_dir``, for
nodes without scikit-learn), held out as that command holds them out: the k-th image of each
digit when k % 5 == 0. Either way the network sees them scaled to MNIST's 28x28.

    python examples/mnist_distributed.py --job_name worker --task_index 0 \
        --ps_hosts localhost:2230 --worker_hosts localhost:2220,localhost:2221 --steps 50
"""

import argparse
import glob
import os
import sys

HELD_OUT_EVERY = 5  # as dtfbench tfrecords --dataset digits


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--job_name", choices=("ps", "worker"), required=True)
    parser.add_argument("--task_index", type=int, required=True)
    parser.add_argument("--ps_hosts", required=True)
    parser.add_argument("--worker_hosts", required=True)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=0.001, help="Adam's, as the deep MNIST tutorial")
    parser.add_argument("--data_dir", default="", help="train-*/validation-* of dtfbench tfrecords --dataset digits")
    return parser.parse_args(argv)


def digits_from_sklearn(np):
    """(train images, train labels, test images, test labels): 8x8 grey in [0, 1], labels 0-9."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise SystemExit(
            "mnist_distributed: the digits need scikit-learn, or --data_dir with the shards of "
            "`dtfbench tfrecords --dataset digits`"
        ) from None
    digits = load_digits()
    seen = [0] * 10
    held_out = []
    for label in digits.target:
        held_out.append(seen[label] % HELD_OUT_EVERY == 0)
        seen[label] += 1
    held_out = np.array(held_out)
    images = (digits.images / 16.0).astype(np.float32)[..., None]
    labels = digits.target.astype(np.int32)
    return images[~held_out], labels[~held_out], images[held_out], labels[held_out]


def digits_from_shards(data_dir, tf, np):
    """The same from ImageNet-format shards (JPEGs, labels 1-10), read once in a session of their own."""

    def read(pattern):
        files = sorted(glob.glob(os.path.join(data_dir, pattern)))
        if not files:
            raise SystemExit(f"mnist_distributed: no {pattern} shards in --data_dir {data_dir}")

        def parse(record):
            features = tf.io.parse_single_example(
                record,
                {
                    "image/encoded": tf.io.FixedLenFeature([], tf.string),
                    "image/class/label": tf.io.FixedLenFeature([], tf.int64),
                },
            )
            image = tf.cast(tf.io.decode_jpeg(features["image/encoded"], channels=1), tf.float32) / 255.0
            return image, tf.cast(features["image/class/label"] - 1, tf.int32)

        with tf.Graph().as_default():
            batch = tf.compat.v1.data.make_one_shot_iterator(
                tf.data.TFRecordDataset(files).map(parse).batch(1 << 20)
            ).get_next()
            with tf.compat.v1.Session() as sess:
                return sess.run(batch)

    train_images, train_labels = read("train-*")
    test_images, test_labels = read("validation-*")
    return train_images, train_labels, test_images, test_labels


def model(images, tf):
    """Two convolutions and a dense layer, as the tutorial's deep MNIST, on 28x28 inputs: logits."""

    def conv(x, name, out):
        w = tf.compat.v1.get_variable(f"{name}_w", [5, 5, x.shape[-1], out])
        b = tf.compat.v1.get_variable(f"{name}_b", [out], initializer=tf.compat.v1.zeros_initializer())
        y = tf.nn.relu(tf.nn.conv2d(x, w, strides=1, padding="SAME") + b)
        return tf.nn.max_pool2d(y, ksize=2, strides=2, padding="SAME")

    x = conv(conv(tf.image.resize(images, [28, 28]), "conv1", 8), "conv2", 16)
    x = tf.reshape(x, [-1, 7 * 7 * 16])
    w = tf.compat.v1.get_variable("fc_w", [7 * 7 * 16, 10])
    b = tf.compat.v1.get_variable("fc_b", [10], initializer=tf.compat.v1.zeros_initializer())
    return tf.matmul(x, w) + b


def main(argv):
    args = parse_args(argv)
    import numpy as np
    import tensorflow as tf  # after argument parsing: bad flags fail fast

    tf.compat.v1.disable_eager_execution()
    cluster = tf.train.ClusterSpec({"ps": args.ps_hosts.split(","), "worker": args.worker_hosts.split(",")})
    server = tf.distribute.Server(cluster, job_name=args.job_name, task_index=args.task_index)
    if args.job_name == "ps":
        server.join()
        return 0

    if args.data_dir:
        train_images, train_labels, test_images, test_labels = digits_from_shards(args.data_dir, tf, np)
    else:
        train_images, train_labels, test_images, test_labels = digits_from_sklearn(np)
    worker = f"/job:worker/task:{args.task_index}"
    with tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(worker_device=worker, cluster=cluster)):
        images = tf.compat.v1.placeholder(tf.float32, [None, None, None, 1])
        labels = tf.compat.v1.placeholder(tf.int32, [None])
        logits = model(images, tf)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1, output_type=tf.int32), labels), tf.float32))
        step = tf.compat.v1.train.get_or_create_global_step()
        train = tf.compat.v1.train.AdamOptimizer(args.learning_rate).minimize(loss, global_step=step)
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
    rng = np.random.default_rng(args.task_index)  # each worker its own batches
    for i in range(args.steps):
        pick = rng.integers(0, len(train_labels), args.batch_size)
        _, value, train_accuracy = sess.run(
            [train, loss, accuracy], {images: train_images[pick], labels: train_labels[pick]}
        )
        if i % 10 == 0 or i == args.steps - 1:
            print(f"worker {args.task_index} step {i} loss {value:.4f} train accuracy {train_accuracy:.4f}", flush=True)
    if args.task_index == 0:  # as in the study: worker 0 evaluates the test accuracy
        test_accuracy = sess.run(accuracy, {images: test_images, labels: test_labels})
        print(f"worker 0 test accuracy {test_accuracy:.4f} on {len(test_labels)} held-out digits", flush=True)
    print(f"worker {args.task_index} done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
