"""Input data: synthetic (made once on the device) or ImageNet TFRecords through tf.data.

Synthetic data follows tf_cnn_benchmarks: one batch of random images and labels is made
once per tower as a non-trainable *local* variable on the tower's device, so a step pays
for no input pipeline and no transfer. It is created outside replica_device_setter's
scope, so it never lands on a PS.

Real data follows the ImageNet TFRecord layout (image/encoded, image/class/label, ...):
list the train-* shards, shard them over the workers, read them with a parallel
interleave, decode and randomly crop/resize in parallel, batch, prefetch.
"""

from . import formats
from .models import input_shape

# Synthetic pixels: roughly the [-1, 1] range real images are scaled to below, so the
# loss stays finite (tf_cnn_benchmarks' mean-127 noise diverges small models quickly).
SYNTHETIC_STDDEV = 0.5
SHUFFLE_RECORDS = 256
READ_BUFFER_BYTES = 8 << 20


def batch_args(config):
    """(batch_size, image_size, num_classes, data_format): one batch as the run's flags shape it,
    in the order every input function here (and evaluation.eval_input) takes them."""
    return config.batch_size, config.image_size, config.num_classes, config.data_format


def synthetic_variables(tf, batch_size, image_size, num_classes, data_format, name="synthetic"):
    """Graph mode: (images, labels, [local variables]) for one tower, on the current device."""
    shape = [batch_size, *input_shape(image_size, data_format)]
    local = [tf.compat.v1.GraphKeys.LOCAL_VARIABLES]
    images = tf.compat.v1.Variable(
        tf.random.truncated_normal(shape, stddev=SYNTHETIC_STDDEV),
        trainable=False,
        collections=local,
        name=f"{name}_images",
    )
    labels = tf.compat.v1.Variable(
        tf.random.uniform([batch_size], minval=0, maxval=num_classes, dtype=tf.int32),
        trainable=False,
        collections=local,
        name=f"{name}_labels",
    )
    return images.read_value(), labels.read_value(), [images, labels]


def synthetic_tensors(tf, batch_size, image_size, num_classes, data_format):
    """Eager: one batch of random images and labels on the current device."""
    shape = [batch_size, *input_shape(image_size, data_format)]
    images = tf.random.truncated_normal(shape, stddev=SYNTHETIC_STDDEV)
    labels = tf.random.uniform([batch_size], minval=0, maxval=num_classes, dtype=tf.int32)
    return images, labels


def real_dataset(
    tf,
    files,
    batch_size,
    image_size,
    num_classes,
    data_format,
    shard_index,
    num_shards,
    augmentation="inception",
    input_format="tfrecord",
):
    """tf.data pipeline over TFRecord (or LMDB) shards yielding (images, labels) batches for one
    worker; `augmentation`: the workload's --augmentation (inception: random crop and flip; none:
    whole); `input_format`: dtfbench.workload.formats."""
    autotune = tf.data.AUTOTUNE
    file_ds = tf.data.Dataset.from_tensor_slices(list(files))
    if len(files) >= num_shards:
        # Each worker reads its own files: no two workers decode the same record.
        file_ds = file_ds.shard(num_shards, shard_index).shuffle(len(files)).repeat()
        # The dataset functions here are plain TF ops, no tensor-dependent Python control flow:
        # not autograph-converted, since autograph leaves the converted source of every function
        # in the temporary folder (on every node, each run).
        records = file_ds.interleave(
            tf.autograph.experimental.do_not_convert(
                lambda f: formats.file_records(tf, f, input_format, READ_BUFFER_BYTES)
            ),
            cycle_length=min(8, max(1, len(files) // num_shards)),
            num_parallel_calls=autotune,
            deterministic=False,
        )
    else:
        # Fewer files than workers: every worker reads all files and keeps every n-th record.
        if input_format == "lmdb":
            records = file_ds.flat_map(
                tf.autograph.experimental.do_not_convert(lambda f: formats.file_records(tf, f, input_format))
            )
        else:
            records = tf.data.TFRecordDataset(file_ds, buffer_size=READ_BUFFER_BYTES)
        records = records.shard(num_shards, shard_index)
        records = records.repeat()
    records = records.shuffle(SHUFFLE_RECORDS)

    def parse(record):
        return parse_and_preprocess(tf, record, image_size, num_classes, data_format, augmentation)

    # Not autograph-converted either (the comment at the interleave above says why).
    ds = records.map(tf.autograph.experimental.do_not_convert(parse), num_parallel_calls=autotune, deterministic=False)
    ds = ds.batch(batch_size, drop_remainder=True)
    return ds.prefetch(autotune)


def parse_and_preprocess(tf, record, image_size, num_classes, data_format, augmentation="inception"):
    """One Example -> (image float32 in [-1, 1], label int32): random crop, resize, flip
    (augmentation "inception"), or the whole image resized ("none")."""
    features = tf.io.parse_single_example(
        record,
        {
            "image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64, default_value=0),
        },
    )
    encoded = features["image/encoded"]
    if augmentation == "none":
        image = tf.image.resize(tf.io.decode_jpeg(encoded, channels=3), [image_size, image_size])
    else:
        # Decode only the random crop (Inception-style distortion, as tf_cnn_benchmarks).
        shape = tf.image.extract_jpeg_shape(encoded)
        whole_image = tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4])
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            shape,
            bounding_boxes=whole_image,
            min_object_covered=0.1,
            aspect_ratio_range=(0.75, 1.33),
            area_range=(0.05, 1.0),
            max_attempts=10,
            use_image_if_no_bounding_boxes=True,
        )
        offset_y, offset_x, _ = tf.unstack(begin)
        height, width, _ = tf.unstack(size)
        crop = tf.io.decode_and_crop_jpeg(encoded, tf.stack([offset_y, offset_x, height, width]), channels=3)
        image = tf.image.resize(crop, [image_size, image_size])
        image = tf.image.random_flip_left_right(image)
    image = image * (2.0 / 255.0) - 1.0
    if data_format == "NCHW":
        image = tf.transpose(image, [2, 0, 1])
    # ImageNet labels are 1..1000 with 0 for background (1001 classes); fold anything
    # larger into range so a smaller --num_classes still trains instead of failing.
    label = tf.cast(tf.math.floormod(features["image/class/label"], num_classes), tf.int32)
    return image, label


# A damaged shard is looked for in this long at most (ImageNet's 1,024 shards of 140 MB take minutes).
SCAN_SECONDS = 30.0


def describe_data_loss(tf, exc, data_dir, during, input_format="tfrecord"):
    """One line for TF's DataLossError in the input pipeline (a damaged TFRecord): what TF said
    (`corrupted record at N`), and the shard of `data_dir` that holds it, found by reading the
    shards through TF's record reader, which checks each record's CRC (within SCAN_SECONDS)."""
    import re
    import time

    from .evaluation import eval_files
    from .flags import train_files

    message = " ".join(str(getattr(exc, "message", None) or exc).split())
    said = re.search(r"(corrupted record at \d+|truncated record at \d+|[Dd]ata loss:[^\[]*)", message)
    what = said.group(1).strip() if said else message[:200]
    if input_format == "lmdb":
        # No record checksums to scan for: LMDB's pages have none.
        return "%s failed: the training data is damaged (%s); copy the LMDB files of %s again" % (
            during,
            what,
            data_dir,
        )
    files = train_files(data_dir) + eval_files(data_dir) if data_dir else []
    started, damaged, read = time.monotonic(), [], 0
    for path in files:
        if time.monotonic() - started > SCAN_SECONDS:
            break
        try:
            for _ in tf.compat.v1.io.tf_record_iterator(path):
                pass
        except tf.errors.OpError as err:  # DataLossError: this one
            damaged.append("%s (%s)" % (path, " ".join(str(err).split())[:120]))
        read += 1
    if damaged:
        where = (
            "damaged shard: "
            + "; ".join(damaged[:3])
            + (" and %d more" % (len(damaged) - 3) if len(damaged) > 3 else "")
        )
    elif read < len(files):
        where = "no damaged shard among the first %d of %d in %s (the scan stops after %.0f s)" % (
            read,
            len(files),
            data_dir,
            SCAN_SECONDS,
        )
    else:
        where = "every shard of %s reads whole now: was one being written?" % data_dir
    return (
        "%s failed: the training data is damaged (DataLossError: %s); %s; copy the dataset again "
        "(configure-nodes.yml syncs and verifies it) or remove the shard" % (during, what, where)
    )
