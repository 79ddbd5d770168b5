"""pytest fixtures for the multi-host test bed (tests/testbed/testbed.py).

    from testbed_fixtures import testbed_factory, testbed4   # in a test module (or conftest)

    def test_something(testbed_factory):
        bed = testbed_factory(hosts=4)        # up; taken down at the end of the test
        shaped = testbed_factory(hosts=2, link_mbit=200)  # private links at 200 Mbit/s each way
        subprocess.run(["ansible", "-i", bed.inventory, "tf_nodes", "-m", "ping"], ...)
        bed.down()                            # or earlier, to check what it leaves
        assert bed.leftovers() == []

`testbed4` is one 4-host test bed shared by a module's tests. Both skip (with the reason)
when the machine cannot host a test bed: not root, or sshd/iproute2/util-linux missing
(scripts/test-deps.sh installs them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import playbook_harness
import pytest
import shared_fs
import testbed as tb


@dataclass
class Testbed:
    dir: Path
    state: dict = field(default_factory=dict)

    @property
    def inventory(self) -> str:
        """The static YAML inventory (group tf_nodes)."""
        return str(self.dir / "hosts.yml")

    @property
    def ip_pairs_config(self) -> str:
        """The same hosts through the ip_pairs inventory plugin."""
        return str(self.dir / "testbed.ip_pairs.yml")

    @property
    def nodes(self) -> list[dict]:
        return self.state["nodes"]

    @property
    def public_ips(self) -> list[str]:
        return [n["public_ip"] for n in self.nodes]

    @property
    def private_ips(self) -> list[str]:
        return [n["private_ip"] for n in self.nodes]

    def play(self, playbook: str, *args, timeout: float = 600) -> playbook_harness.Played:
        """ansible-playbook `playbook` on this test bed (its static inventory, then `args`), failing
        on an inventory that does not parse (strict_inventory_env)."""
        return playbook_harness.run_playbook(
            playbook, "-i", self.inventory, *args, env=playbook_harness.strict_inventory_env(), timeout=timeout
        )

    def local_ssd(self, name: str) -> Path:
        """The host-side directory that node `name` sees as /mnt/local_ssd."""
        return Path(next(n["dir"] for n in self.nodes if n["name"] == name)) / "local_ssd"

    def down(self) -> None:
        """Down by its state.json, as `testbed.py down`."""
        tb.down(self.dir)

    def shape(self, link_mbit: float | None) -> None:
        """Shape every node's private link to `link_mbit` Mbit/s each way (None: unshaped)."""
        tb.shape(self.state, link_mbit)

    def share(self, server: str = "node01", link_mbit: float | None = None) -> Path:
        """Serve `server`'s /mnt/local_ssd/shared at /mnt/shared on every node (shared_fs.py); returns
        the host-side folder behind it, where a test writes the dataset."""
        shared_fs.share(self.state, server, link_mbit)
        return shared_fs.shared_dir(self.state)

    def leftovers(self) -> list[str]:
        """Namespaces, links, processes, cgroups and files of this test bed that still exist."""
        return tb.leftovers(self.state, self.dir)


def unavailable() -> str | None:
    try:
        tb.check_prerequisites()
    except tb.TestbedError as err:
        return str(err)
    return None


@pytest.fixture
def testbed_factory(tmp_path_factory):
    """up(hosts=4, devices=1, link_mbit=None) -> Testbed; every test bed it made is down after the test."""
    reason = unavailable()
    if reason:
        pytest.skip(f"no multi-host test bed here: {reason}")
    made: list[Testbed] = []

    def up(hosts: int = 4, devices: int = 1, link_mbit: float | None = None) -> Testbed:
        directory = tmp_path_factory.mktemp("testbed")
        bed = Testbed(directory)
        made.append(bed)
        bed.state = tb.up(directory, hosts=hosts, devices=devices, link_mbit=link_mbit)
        return bed

    yield up
    for bed in made:
        bed.down()


def module_testbed(tmp_path_factory, hosts: int, devices: int = 1, link_mbit: float | None = None):
    """A generator for a module-scoped fixture: one test bed of `hosts` hosts, down at the end.

    @pytest.fixture(scope="module")
    def bed2(tmp_path_factory):
        yield from module_testbed(tmp_path_factory, hosts=2)
    """
    reason = unavailable()
    if reason:
        pytest.skip(f"no multi-host test bed here: {reason}")
    directory = tmp_path_factory.mktemp("testbed")
    bed = Testbed(directory)
    try:
        bed.state = tb.up(directory, hosts=hosts, devices=devices, link_mbit=link_mbit)
        yield bed
    finally:
        bed.down()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def testbed4(tmp_path_factory):
    """One 4-host test bed for a whole test module."""
    yield from module_testbed(tmp_path_factory, hosts=4)


def measure_again_on_a_miss(measure, miss) -> list:
    """`measure()`'s results: the first, or the first and a second when `miss(first)` says why
    the first misses (a str; None when it holds). A shaped-link measurement of a few seconds on
    the test bed shares the two cores with the suite's other lane, whose load can blur it; the
    caller asserts on the last result, so the second must hold."""
    first = measure()
    why = miss(first)
    if why is None:
        return [first]
    print(f"{why}: the machine's load; measured once more")
    return [first, measure()]


def ansible_command(tool: str) -> str:
    """Path of an Ansible CLI next to this interpreter (the project's .venv)."""
    path = Path(sys.executable).parent / tool
    return str(path) if path.exists() else (shutil.which(tool) or tool)


def is_root() -> bool:
    return os.geteuid() == 0


def wheelhouse(python: str, folder: Path, *requirements: str) -> Path:
    """`requirements` (pip's: specifiers, ``-r FILE``) downloaded for `python` into `folder`, kept
    from one session to the next: the wheels the test bed's nodes install from, without an index."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [python, "-m", "pip", "download", "--quiet", "--dest", str(folder), *requirements],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return folder
