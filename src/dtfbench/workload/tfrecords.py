"""Generate a small ImageNet-format TFRecord set of real JPEGs.

    python -m dtfbench tfrecords --output_dir D --shards 4 --images_per_shard 64 [--image_size 64]

Files are named like ImageNet's build_imagenet_data.py output (train-00000-of-00004, and
validation-* with --validation_shards), with the same feature keys, so the real-data path
of ``dtfbench train`` reads them the way it reads ImageNet. The pictures are smooth colour
gradients plus noise, encoded as real JPEGs of slightly varying sizes.
"""

import argparse
import os
import sys

import numpy as np

PROG = "dtfbench tfrecords"
NUM_LABELS = 1000  # ImageNet: labels 1..1000 (0 is background)


def shard_name(split, index, total):
    return f"{split}-{index:05d}-of-{total:05d}"


def make_image(rng, size):
    """An RGB uint8 picture: a random linear colour gradient plus noise (compresses like a photo)."""
    height = int(size * rng.uniform(1.0, 1.33))
    width = int(size * rng.uniform(1.0, 1.33))
    ys = np.linspace(0.0, 1.0, height)[:, None, None]
    xs = np.linspace(0.0, 1.0, width)[None, :, None]
    start, dy, dx = (rng.uniform(0, 255, 3) for _ in range(3))
    image = start + (dy - start) * ys + (dx - start) * xs * 0.5
    image = image + rng.normal(0.0, 12.0, (height, width, 3))
    return np.clip(image, 0, 255).astype(np.uint8)


def example(tf, encoded, height, width, label, filename):
    def b(value):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

    def i(value):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))

    return tf.train.Example(
        features=tf.train.Features(
            feature={
                "image/encoded": b(encoded),
                "image/format": b(b"JPEG"),
                "image/filename": b(filename.encode()),
                "image/colorspace": b(b"RGB"),
                "image/channels": i(3),
                "image/height": i(height),
                "image/width": i(width),
                "image/class/label": i(label),
                "image/class/text": b(f"synthetic class {label}".encode()),
            }
        )
    )


def write_split(tf, output_dir, split, shards, images_per_shard, image_size, seed):
    rng = np.random.default_rng(seed)
    paths = []
    for shard in range(shards):
        path = os.path.join(output_dir, shard_name(split, shard, shards))
        with tf.io.TFRecordWriter(path) as writer:
            for n in range(images_per_shard):
                pixels = make_image(rng, image_size)
                encoded = tf.io.encode_jpeg(pixels, quality=90).numpy()
                label = int(rng.integers(1, NUM_LABELS + 1))
                filename = f"{split}_{shard:05d}_{n:05d}.JPEG"
                record = example(tf, encoded, pixels.shape[0], pixels.shape[1], label, filename)
                writer.write(record.SerializeToString())
        paths.append(path)
    return paths


def main(argv=None):
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--shards", type=int, default=4, help="train-* files")
    parser.add_argument("--images_per_shard", type=int, default=64)
    parser.add_argument("--image_size", type=int, default=64, help="approximate side of the JPEGs")
    parser.add_argument("--validation_shards", type=int, default=0, help="validation-* files")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for flag, value in (
        ("--shards", args.shards),
        ("--images_per_shard", args.images_per_shard),
        ("--image_size", args.image_size),
    ):
        if value < 1:
            print(f"{PROG}: error: {flag} {value}: must be at least 1", file=sys.stderr)
            return 2
    if args.validation_shards < 0:
        print(f"{PROG}: error: --validation_shards {args.validation_shards}: must not be negative", file=sys.stderr)
        return 2
    os.makedirs(args.output_dir, exist_ok=True)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    paths = write_split(tf, args.output_dir, "train", args.shards, args.images_per_shard, args.image_size, args.seed)
    if args.validation_shards:
        paths += write_split(
            tf,
            args.output_dir,
            "validation",
            args.validation_shards,
            args.images_per_shard,
            args.image_size,
            args.seed + 1,
        )
    for path in paths:
        print(path)
    return 0
