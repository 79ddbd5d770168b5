"""The data directory's raw read throughput (dtfbench read_throughput), on real files."""

import json
import os
import subprocess
import sys

import pytest

from dtfbench.node import read_throughput


def make_shards(directory, count, size):
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (directory / f"train-{i:05d}-of-{count:05d}").write_bytes(os.urandom(size))
    (directory / "validation-00000-of-00001").write_bytes(os.urandom(size))


def test_reads_the_first_shards_by_name_and_counts_every_byte(tmp_path):
    make_shards(tmp_path / "data", 6, 3 << 20)
    result = read_throughput.measure(tmp_path / "data", files=4)
    assert result["files"] == 4 and result["bytes"] == 4 * (3 << 20)
    assert result["mb_per_s"] > 0 and result["seconds"] > 0
    assert isinstance(result["direct"], bool)


def test_max_bytes_bounds_the_read(tmp_path):
    make_shards(tmp_path / "data", 4, 8 << 20)
    result = read_throughput.measure(tmp_path / "data", files=4, max_bytes=10 << 20)
    assert 10 << 20 <= result["bytes"] < 16 << 20  # whole 4 MiB blocks, stopped after the limit


def test_no_shards_is_an_error_naming_the_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        read_throughput.measure(tmp_path)


def test_cli_prints_one_json_object(tmp_path):
    make_shards(tmp_path / "data", 2, 1 << 20)
    done = subprocess.run(
        [sys.executable, "-m", "dtfbench", "read_throughput", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout)
    assert result["files"] == 2 and result["bytes"] == 2 << 20
    missing = subprocess.run(
        [sys.executable, "-m", "dtfbench", "read_throughput", str(tmp_path / "none")], capture_output=True, text=True
    )
    assert missing.returncode == 1 and "error" in json.loads(missing.stdout)
