"""Where real data was read from (issue #55, item 1): each node's file system under data_dir, read
from its mount table, and the run's storage as one configuration value; and the page cache a
run starts with (item 4: cache=cold|warm, measured with mincore either way)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dtfbench.linux import procfs
from dtfbench.node import read_throughput
from dtfbench.plan.sweep import PlanError
from dtfbench.report import stats
from dtfbench.results import record
from dtfbench.results.sweep_resume import plan_sweep

MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 253:0 / / rw,relatime - ext4 /dev/vda rw
60 27 0:50 / /mnt/shared rw,relatime - nfs4 10.214.57.1:/srv/digits rw,vers=4.2
61 27 253:1 / /mnt/local\\040ssd rw,relatime - xfs /dev/nvme0n1 rw
62 61 253:1 /node01 /mnt/local\\040ssd rw,relatime - xfs /dev/nvme0n1 rw
"""


@pytest.mark.parametrize(
    "path, fs_type, source, point, network",
    [
        ("/mnt/shared/train-00000-of-00004", "nfs4", "10.214.57.1:/srv/digits", "/mnt/shared", True),
        ("/mnt/local ssd/imagenet", "xfs", "/dev/nvme0n1", "/mnt/local ssd", False),  # the top of two mounts
        ("/mnt/sharedother", "ext4", "/dev/vda", "/", False),  # a prefix of the name is not a mount above it
        ("/", "ext4", "/dev/vda", "/", False),
    ],
)
def test_the_mount_above_a_path_is_the_deepest_one(tmp_path, path, fs_type, source, point, network):
    table = tmp_path / "mountinfo"
    table.write_text(MOUNTINFO)
    assert procfs.mount_of(path, str(table)) == {
        "fs_type": fs_type, "source": source, "mount_point": point, "network": network,
    }  # fmt: skip
    assert procfs.mount_of(path, str(tmp_path / "missing")) is None


def test_the_read_test_says_which_file_system_it_read(tmp_path):
    (tmp_path / "train-00000-of-00001").write_bytes(b"x" * 4096)
    result = read_throughput.measured(str(tmp_path))
    assert result["filesystem"] == procfs.mount_of(str(tmp_path)) and result["filesystem"]["fs_type"]
    missing = read_throughput.measured(str(tmp_path / "nothing"))
    assert "error" in missing and missing["filesystem"]["mount_point"] == result["filesystem"]["mount_point"]


def node(fs_type, source, network):
    return {"mb_per_s": 100.0, "filesystem": {"fs_type": fs_type, "source": source, "network": network}}


def test_a_runs_storage_is_one_configuration_value():
    local = {"n1": node("xfs", "/dev/nvme0n1", False), "n2": node("xfs", "/dev/nvme1n1", False)}
    shared = {"n1": node("nfs4", "10.0.0.1:/srv", True), "n2": node("nfs4", "10.0.0.1:/srv", True)}
    assert record.storage_of(local) == "xfs"  # each node's own disk: one kind of storage
    assert record.storage_of(shared) == "nfs4 10.0.0.1:/srv"  # one shared copy, named
    assert record.storage_of({**local, "n3": node("nfs4", "10.0.0.1:/srv", True)}) == "nfs4 10.0.0.1:/srv, xfs"
    assert record.storage_of({"n1": {"error": "no train-* files"}}) is None
    assert "storage" in stats.CONFIG_KEYS


# --- the page cache a run starts with (item 4): cache=cold|warm, and what was cached either way ---


def dataset(folder, files=3, size=256 << 10):
    folder.mkdir()
    for index in range(files):
        (folder / f"train-{index:05d}-of-{files:05d}").write_bytes(os.urandom(size))
    (folder / "validation-00000-of-00001").write_bytes(os.urandom(size))
    (folder / "README").write_bytes(b"not a shard: not the dataset")
    return folder


def test_cold_drops_the_datasets_pages_and_warm_reads_them_in(tmp_path):
    data = dataset(tmp_path / "data")
    # Just written (dirty pages, which DONTNEED alone keeps): cold writes them back first.
    cold = read_throughput.page_cache(str(data), "cold")
    assert (cold["setting"], cold["files"], cold["bytes"], cold["resident"]) == ("cold", 4, 4 * (256 << 10), 0.0)
    warm = read_throughput.page_cache(str(data), "warm")
    assert (warm["setting"], warm["resident"]) == ("warm", 1.0)
    # Unset, the cache is left as it is and measured: a quarter read in is a quarter resident.
    read_throughput.page_cache(str(data), "cold")
    (data / "validation-00000-of-00001").read_bytes()
    assert read_throughput.page_cache(str(data))["resident"] == pytest.approx(0.25)
    nothing = read_throughput.page_cache(str(tmp_path / "none"), "cold")
    assert (nothing["files"], nothing["bytes"], nothing["resident"]) == (0, 0, None)


def test_the_slurm_jobs_copy_runs_alone_on_the_oldest_python(tmp_path):
    """A Slurm job runs dtfbench_read_throughput.py beside dtfbench_procfs.py, without dtfbench
    (the study's TF 1.1 module: Python 3.6), as roles/slurm_cluster/files has them."""
    files = Path(__file__).resolve().parents[2] / "roles" / "slurm_cluster" / "files"
    for name in ("dtfbench_read_throughput.py", "dtfbench_procfs.py"):
        shutil.copy(files / name, tmp_path / name)
    data = dataset(tmp_path / "data")
    python = oldest_python()
    done = subprocess.run(
        [python, str(tmp_path / "dtfbench_read_throughput.py"), str(data), "--files", "2", "--cache", "warm"],
        capture_output=True, text=True, timeout=60, cwd="/", env={"PATH": os.environ["PATH"]},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["files"] == 2 and result["filesystem"] == procfs.mount_of(str(data)), result
    assert (result["cache"]["setting"], result["cache"]["resident"]) == ("warm", 1.0), result


def oldest_python():
    """The nodes' oldest Python the project supports (pyenv's 3.6, TF 1.1's), or this one."""
    found = sorted(Path(os.path.expanduser("~/.pyenv/versions")).glob("3.6*/bin/python3"))
    return str(found[0]) if found else sys.executable


def test_cache_is_a_sweep_axis_of_the_real_data_runs_and_a_configuration_key():
    result = plan_sweep(
        {"gpus": 1, "num_ps": 1, "model": "trivial", "data": "both", "data_dir": "/data", "cache": "cold,warm",
         "sweep_id": "s", "repetitions": 1},
        [{"name": "localhost", "address": "127.0.0.1", "devices": 8, "device_type": "cpu"}],
    )  # fmt: skip
    assert [(r["data"], r.get("cache")) for r in result["runs"]] == [
        ("synthetic", None), ("real", "cold"), ("real", "warm"),
    ]  # fmt: skip
    assert len({r["run_id"] for r in result["runs"]}) == 3 and result["sweep_config"]["cache"] == ["cold", "warm"]
    assert any("cache applies to the real-data runs" in note for note in result["notes"])
    payload = {
        "run": {"run_id": "s-1", "gpus": 1, "num_ps": 1, "variable_update": "parameter_server", "data": "real",
                "repetition": 1, "cache": "cold"},
        "layout": {"num_workers": 1}, "sweep_id": "s", "system": "local", "hosts": {},
    }  # fmt: skip
    assert record.build_record(payload)["cache"] == "cold" and "cache" in stats.CONFIG_KEYS


@pytest.mark.parametrize(
    "request_, message",
    [
        ({"cache": "hot"}, "cache='hot' is unknown; choose from cold, warm"),
        ({"data": "synthetic"}, "cache=cold sets the page cache of data_dir's files, and synthetic data reads none"),
    ],
)
def test_a_bad_cache_setting_is_refused_by_name(request_, message):
    request = {
        "gpus": 1,
        "num_ps": 1,
        "data": "real",
        "data_dir": "/data",
        "cache": "cold",
        "sweep_id": "s",
        **request_,
    }
    with pytest.raises(PlanError, match=re.escape(message)):
        plan_sweep(request, [{"name": "localhost", "address": "127.0.0.1", "devices": 8, "device_type": "cpu"}])


def test_several_data_dirs_are_a_sweep_axis_of_the_real_data_runs():
    """A shared copy against a local one in one sweep: each real-data run reads its own, on its
    command line, and the dataset check looks in every one."""
    result = plan_sweep(
        {"gpus": 1, "num_ps": 1, "model": "trivial", "data": "both", "data_dir": "/mnt/nfs/imagenet,/local/imagenet",
         "sweep_id": "s", "repetitions": 1},
        [{"name": "localhost", "address": "127.0.0.1", "devices": 8, "device_type": "cpu"}],
    )  # fmt: skip
    runs = result["runs"]
    assert [(r["data"], r.get("data_dir")) for r in runs] == [
        ("synthetic", None), ("real", "/mnt/nfs/imagenet"), ("real", "/local/imagenet"),
    ]  # fmt: skip
    for run in runs[1:]:
        args = run["launch"]["args"]
        assert args[args.index("--data_dir") + 1] == run["data_dir"]
    assert "--data_dir" not in runs[0]["launch"]["args"] and len({r["run_id"] for r in runs}) == 3
    assert result["data_dirs"] == ["/mnt/nfs/imagenet", "/local/imagenet"]
    assert result["sweep_config"]["data_dir"] == ["/local/imagenet", "/mnt/nfs/imagenet"]
    # One location stays what it was: no data_dir on the run, the same ids as before.
    one = plan_sweep(
        {"gpus": 1, "num_ps": 1, "model": "trivial", "data": "real", "data_dir": "/local/imagenet", "sweep_id": "s",
         "repetitions": 1},
        [{"name": "localhost", "address": "127.0.0.1", "devices": 8, "device_type": "cpu"}],
    )  # fmt: skip
    assert "data_dir" not in one["runs"][0] and "data_dir" not in one["sweep_config"]
    assert one["data_dirs"] == ["/local/imagenet"]
