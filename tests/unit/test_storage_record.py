"""Where real data was read from (issue #55, item 1): each node's file system under data_dir, read
from its mount table, and the run's storage as one configuration value."""

import pytest

from dtfbench.linux import procfs
from dtfbench.node import read_throughput
from dtfbench.report import stats
from dtfbench.results import record

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
