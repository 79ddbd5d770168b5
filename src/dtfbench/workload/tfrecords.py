"""Generate a small ImageNet-format TFRecord set of real JPEGs.

    python -m dtfbench tfrecords --output_dir D --shards 4 --images_per_shard 64 [--image_size 64]
    python -m dtfbench tfrecords --output_dir D --dataset digits [--shards 4 --validation_shards 1]
    python -m dtfbench tfrecords --output_dir D --format lmdb ...

Files are named like ImageNet's build_imagenet_data.py output (train-00000-of-00004, and
validation-*), with the same feature keys, so the real-data path of ``dtfbench train`` reads
them the way it reads ImageNet.

``--dataset synthetic`` (the default): smooth colour gradients plus noise, encoded as real JPEGs
of slightly varying sizes, with labels drawn independently of the pixels: it measures speed and
nothing can be learnt from it. ``--dataset digits``: scikit-learn's handwritten digits (1,797
real 8x8 scans of 10 digits, UCI's optdigits test set, shipped inside the package: nothing is
downloaded), scaled up to --image_size (default 32) as grey RGB JPEGs, label = digit + 1
(ImageNet's labels start at 1; 0 is background). Its split is fixed and stratified: the k-th
image of each digit, in ``load_digits()``'s order, is a validation image when k % 5 == 0 (364
images, 35-37 of each digit), a training image otherwise (1,433), so the held-out accuracy of
every run is measured on the same images, every digit a fifth. (Every 5th image of the whole
set would hold out 0s and 5s only: the set cycles through the digits.)

``--format lmdb`` writes the same records (the same images, labels and order) as one LMDB file
a shard, ``train-00000-of-00004.lmdb`` (dtfbench.workload.formats), for ``dtfbench train
--input_format lmdb``: the Summitdev study's TFRecords-against-LMDB comparison. Into a folder
that holds the TFRecords already, both formats sit side by side.

Beside the shards, ``SHA256SUMS`` (``sha256sum``'s format; ``sha256sum -c SHA256SUMS`` checks
them): a staging to node-local disk (dtfbench.node.stage_data) checks every copy against it.
"""

import argparse
import hashlib
import os
import sys

import numpy as np

from . import formats

PROG = "dtfbench tfrecords"
NUM_LABELS = 1000  # ImageNet: labels 1..1000 (0 is background)
DATASETS = ("synthetic", "digits")
# digits: every DIGITS_VALIDATION_EVERY-th image of each digit (its 0th, 5th, 10th, ...) is held out.
DIGITS_VALIDATION_EVERY = 5
DIGITS_IMAGE_SIZE = 32
# The classes a model needs for the digits: labels 1..10, and 0 (ImageNet's background) unused.
DIGITS_NUM_CLASSES = 11


def shard_name(split, index, total):
    return f"{split}-{index:05d}-of-{total:05d}"


def write_checksums(output_dir, paths):
    """SHA256SUMS of `paths` (files in output_dir), as ``sha256sum`` writes it, replaced whole; the
    lines of other files still there are kept (the other format's, written into the same folder)."""
    sums = {}
    listed = os.path.join(output_dir, "SHA256SUMS")
    if os.path.isfile(listed):
        with open(listed) as handle:
            for line in handle:
                digest, _, name = line.rstrip("\n").partition("  ")
                if name and os.path.isfile(os.path.join(output_dir, name)):
                    sums[name] = digest
    for path in paths:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        sums[os.path.basename(path)] = digest.hexdigest()
    lines = [f"{sums[name]}  {name}\n" for name in sorted(sums)]
    temporary = os.path.join(output_dir, ".SHA256SUMS.partial")
    with open(temporary, "w") as handle:
        handle.writelines(lines)
    os.replace(temporary, os.path.join(output_dir, "SHA256SUMS"))


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


def example(tf, encoded, height, width, label, filename, text=None):
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
                "image/class/text": b((text or f"synthetic class {label}").encode()),
            }
        )
    )


def write_split(tf, output_dir, split, shards, images_per_shard, image_size, seed, input_format="tfrecord"):
    rng = np.random.default_rng(seed)
    paths = []
    for shard in range(shards):
        path = os.path.join(output_dir, shard_name(split, shard, shards))
        with formats.writer(tf, path, input_format) as writer:
            for n in range(images_per_shard):
                pixels = make_image(rng, image_size)
                encoded = tf.io.encode_jpeg(pixels, quality=90).numpy()
                label = int(rng.integers(1, NUM_LABELS + 1))
                filename = f"{split}_{shard:05d}_{n:05d}.JPEG"
                record = example(tf, encoded, pixels.shape[0], pixels.shape[1], label, filename)
                writer.write(record.SerializeToString())
        paths.append(formats.written_path(path, input_format))
    return paths


def digits_split():
    """scikit-learn's digits as {split: [(pixels 8x8 float 0..16, digit), ...]}, in the fixed split."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise SystemExit(
            f"{PROG}: error: --dataset digits needs scikit-learn (pip install scikit-learn; "
            "`make setup` installs it in .venv)"
        ) from None
    digits = load_digits()
    split = {"train": [], "validation": []}
    seen = [0] * 10
    for pixels, digit in zip(digits.images, digits.target):
        digit = int(digit)
        name = "validation" if seen[digit] % DIGITS_VALIDATION_EVERY == 0 else "train"
        seen[digit] += 1
        split[name].append((pixels, digit))
    return split


def digit_image(pixels, size):
    """An 8x8 scan (0..16) as a size x size grey RGB uint8 picture (bilinear, as a scanner's resample)."""
    from PIL import Image

    grey = Image.fromarray(np.clip(pixels * (255.0 / 16.0), 0, 255).astype(np.uint8), mode="L")
    return np.asarray(grey.resize((size, size), Image.BILINEAR).convert("RGB"))


def write_digits(tf, output_dir, split, items, shards, image_size, input_format="tfrecord"):
    """One split of the digits, dealt round-robin over `shards` files, in load_digits' order."""
    paths = []
    for shard in range(shards):
        path = os.path.join(output_dir, shard_name(split, shard, shards))
        with formats.writer(tf, path, input_format) as writer:
            for n in range(shard, len(items), shards):
                pixels, digit = items[n]
                image = digit_image(pixels, image_size)
                encoded = tf.io.encode_jpeg(image, quality=95).numpy()
                filename = f"{split}_{n:05d}_digit{digit}.JPEG"
                record = example(tf, encoded, image_size, image_size, digit + 1, filename, f"digit {digit}")
                writer.write(record.SerializeToString())
        paths.append(formats.written_path(path, input_format))
    return paths


def main(argv=None):
    args = _parser().parse_args(argv)
    digits = args.dataset == "digits"
    problem = _resolve_sizes(args, digits)
    if problem is None:
        split = digits_split() if digits else None
        problem = _format_problem(args.format)
    if problem is not None:
        print(f"{PROG}: error: {problem}", file=sys.stderr)
        return 2
    os.makedirs(args.output_dir, exist_ok=True)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    if digits:
        paths = write_digits(tf, args.output_dir, "train", split["train"], args.shards, args.image_size, args.format)
        paths += write_digits(
            tf, args.output_dir, "validation", split["validation"], args.validation_shards, args.image_size, args.format
        )
    else:
        paths = _write_synthetic(tf, args)
    write_checksums(args.output_dir, paths)
    for path in paths:
        print(path)
    return 0


def _parser():
    """The command's argument parser."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--output_dir", required=True)
    parser.add_argument(
        "--dataset",
        choices=DATASETS,
        default="synthetic",
        help="synthetic: gradients with random labels (speed only); digits: scikit-learn's handwritten digits",
    )
    parser.add_argument(
        "--format",
        choices=formats.FORMATS,
        default="tfrecord",
        help="tfrecord: ImageNet's TFRecord shards; lmdb: the same records, one LMDB file a shard (NAME.lmdb)",
    )
    parser.add_argument("--shards", type=int, default=4, help="train-* files")
    parser.add_argument("--images_per_shard", type=int, default=None, help="synthetic only (default 64)")
    parser.add_argument(
        "--image_size",
        type=int,
        default=None,
        help=f"side of the JPEGs (synthetic: about, default 64; digits {DIGITS_IMAGE_SIZE})",
    )
    parser.add_argument(
        "--validation_shards", type=int, default=None, help="validation-* files (synthetic: default 0; digits: 1)"
    )
    parser.add_argument("--seed", type=int, default=0, help="synthetic only: the pictures' and labels' seed")
    return parser


def _resolve_sizes(args, digits):
    """Fill in the dataset's default sizes on `args`; the problem with the sizes given, or None."""
    if digits and args.images_per_shard is not None:
        return (
            f"--images_per_shard {args.images_per_shard}: the digits are a fixed set "
            f"(1,797 images); give --shards and --validation_shards to spread them"
        )
    args.images_per_shard = 64 if args.images_per_shard is None else args.images_per_shard
    args.image_size = (DIGITS_IMAGE_SIZE if digits else 64) if args.image_size is None else args.image_size
    args.validation_shards = (1 if digits else 0) if args.validation_shards is None else args.validation_shards
    for flag, value in (
        ("--shards", args.shards),
        ("--images_per_shard", args.images_per_shard),
        ("--image_size", args.image_size),
    ):
        if value < 1:
            return f"{flag} {value}: must be at least 1"
    if args.validation_shards < (1 if digits else 0):
        return (
            f"--validation_shards {args.validation_shards}: must be at least "
            f"{'1 with --dataset digits (its held-out split)' if digits else '0'}"
        )
    return None


def _format_problem(input_format):
    """Why `input_format` cannot be written here (lmdb without its module), or None."""
    if input_format == "lmdb":
        try:
            formats.lmdb_module()
        except ImportError as err:
            return f"--format lmdb: {err}"
    return None


def _write_synthetic(tf, args):
    """Write the synthetic train-* shards and any validation-* ones; their paths."""
    paths = write_split(
        tf, args.output_dir, "train", args.shards, args.images_per_shard, args.image_size, args.seed, args.format
    )
    if args.validation_shards:
        paths += write_split(
            tf,
            args.output_dir,
            "validation",
            args.validation_shards,
            args.images_per_shard,
            args.image_size,
            args.seed + 1,
            args.format,
        )
    return paths
