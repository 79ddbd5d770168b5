"""Where a dataset's records come from: TFRecord shards or LMDB files (--input_format).

Both hold the same records: ImageNet-format ``tf.train.Example`` protos (image/encoded JPEG,
image/class/label, ...), so every format decodes and augments alike (dtfbench.workload.data)
and only the read differs; the Summitdev study compared the two (its Fig. 10: under 1% apart).

- ``tfrecord``: ImageNet's own layout, ``train-00000-of-01024`` and ``validation-*``, read by TF's
  ``TFRecordDataset``.
- ``lmdb``: one LMDB file per shard beside them, ``train-00000-of-01024.lmdb`` (an environment
  opened with ``subdir=False``, no lock file: read-only), keys the record's index as 8 digits so
  that a cursor reads the records in the order they were written, values the serialized
  Example. TensorFlow removed its LMDB reader (``LMDBDataset`` now raises "LMDB support is
  removed"), so each file is read by the ``lmdb`` package (py-lmdb, a binding of the C
  library) inside ``tf.data.Dataset.from_generator``: a cursor over the memory map hands each
  value over as bytes, the GIL held only for that; decoding runs in TF's parallel map as for
  TFRecords. ``dtfbench tfrecords --format lmdb`` writes such files.

A folder may hold both: each format picks its own files (``.lmdb`` or not).
"""

import glob
import os
import threading

FORMATS = ("tfrecord", "lmdb")
LMDB_SUFFIX = ".lmdb"
# The most an LMDB file written here may grow to: address space only (the file grows as written).
LMDB_MAP_SIZE = 1 << 40
# Records handed from Python to TF at a time when reading LMDB.
LMDB_CHUNK = 64


def shard_files(data_dir, split, input_format="tfrecord"):
    """The `split` ("train" or "validation") shards of `data_dir` in `input_format`, sorted."""
    found = (f for f in glob.glob(os.path.join(data_dir, f"{split}-*")) if os.path.isfile(f))
    if input_format == "lmdb":
        return sorted(f for f in found if f.endswith(LMDB_SUFFIX))
    return sorted(f for f in found if not f.endswith(LMDB_SUFFIX))


def lmdb_module():
    try:
        import lmdb
    except ImportError:
        raise ImportError(
            "--input_format lmdb needs the lmdb package (pip install lmdb; `make setup` installs it in .venv, "
            "roles/tf_virtualenv on the nodes)"
        ) from None
    return lmdb


# Every LMDB file this process reads, opened once: py-lmdb refuses a second open of one file in a
# process, which the input pipeline makes (repeat() and a parallel interleave reach a shard again
# while its previous pass is still open). Read transactions on one environment may run in any
# thread (py-lmdb opens with MDB_NOTLS).
_READ_ENVS = {}
_READ_ENVS_LOCK = threading.Lock()


def _lmdb_reader(path):
    with _READ_ENVS_LOCK:
        env = _READ_ENVS.get(path)
        if env is None:
            env = _READ_ENVS[path] = lmdb_module().open(path, subdir=False, readonly=True, lock=False)
        return env


def lmdb_values(path, chunk=1):
    """Every value of the LMDB file `path` (bytes, or str as TF's generator args come), in key order;
    with `chunk` > 1, lists of up to that many values."""
    env = _lmdb_reader(path.decode() if isinstance(path, bytes) else path)
    with env.begin() as txn:
        if chunk <= 1:
            for _, value in txn.cursor():
                yield value
            return
        values = []
        for _, value in txn.cursor():
            values.append(value)
            if len(values) == chunk:
                yield values
                values = []
        if values:
            yield values


def lmdb_entries(files):
    """The records of LMDB `files`, from each file's own count (nothing is read)."""
    return sum(_lmdb_reader(path).stat()["entries"] for path in files)


class LmdbWriter:
    """Writes serialized records to one LMDB file, as TFRecordWriter does to a shard (one transaction)."""

    def __init__(self, path):
        self.path = path
        self._env = lmdb_module().open(path, subdir=False, map_size=LMDB_MAP_SIZE, lock=False, meminit=False)
        self._txn = self._env.begin(write=True)
        self._count = 0

    def write(self, record):
        self._txn.put(b"%08d" % self._count, record, append=True)
        self._count += 1

    def close(self):
        self._txn.commit()
        self._env.sync(True)
        self._env.close()

    def __enter__(self):
        return self

    def __exit__(self, kind, value, trace):
        if kind is None:
            self.close()
        else:
            self._txn.abort()
            self._env.close()


def writer(tf, path, input_format):
    """A writer of `path`'s records (a context manager with ``write(bytes)``); LMDB files get their suffix."""
    if input_format == "lmdb":
        return LmdbWriter(path + LMDB_SUFFIX)
    return tf.io.TFRecordWriter(path)


def written_path(path, input_format):
    return path + LMDB_SUFFIX if input_format == "lmdb" else path


def file_records(tf, path, input_format, buffer_size=None):
    """One shard's serialized records as a dataset (`path` a string tensor: inside an interleave)."""
    if input_format == "lmdb":
        # Chunks of records, unbatched: one Python call per LMDB_CHUNK records, not per record.
        chunks = tf.data.Dataset.from_generator(
            lmdb_values, args=(path, LMDB_CHUNK), output_signature=tf.TensorSpec([None], tf.string)
        )
        return chunks.unbatch()
    return tf.data.TFRecordDataset(path, buffer_size=buffer_size)


def records(tf, files, input_format, buffer_size=None):
    """The records of `files` in order, one file after the other (the held-out split, a count)."""
    if input_format == "lmdb":
        names = tf.data.Dataset.from_tensor_slices(list(files))
        return names.flat_map(tf.autograph.experimental.do_not_convert(lambda f: file_records(tf, f, input_format)))
    return tf.data.TFRecordDataset(list(files), buffer_size=buffer_size)


def record_count(tf, files, input_format):
    """The records of `files` as an int64 scalar (a graph op in a graph, a value eagerly)."""
    if input_format == "lmdb":
        return tf.constant(lmdb_entries(files), tf.int64)
    return tf.data.TFRecordDataset(list(files)).reduce(tf.constant(0, tf.int64), lambda n, _: n + 1)
