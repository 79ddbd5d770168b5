"""Who is in the cluster and who this process is: host lists, TF_CONFIG, task identity.

Pure Python (no TensorFlow) so that bad input is rejected before TF is imported.
"""

import json
from dataclasses import dataclass, field

from .errors import UsageError


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    def __str__(self):
        # IPv6 literals need brackets to be told apart from the port.
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_address(flag, text):
    """'host:port' (or '[v6]:port') -> Address; UsageError naming ``flag`` otherwise."""
    item = text.strip()
    if item.startswith("["):
        host, sep, rest = item[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise UsageError(f"{flag}: '{text}' is not host:port; write IPv6 hosts as [addr]:port")
        port_text = rest[1:]
    else:
        host, sep, port_text = item.rpartition(":")
        if not sep:
            raise UsageError(f"{flag}: '{text}' has no port; write each task as host:port, e.g. {text or 'node1'}:2222")
    if not host:
        raise UsageError(f"{flag}: '{text}' has no host; write each task as host:port, e.g. node1:2222")
    if not port_text.isdigit():
        raise UsageError(f"{flag}: '{text}' has port '{port_text}', not a number; use a port in 1-65535")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise UsageError(f"{flag}: '{text}' has port {port} out of range; use a port in 1-65535")
    return Address(host, port)


def parse_host_list(flag, text):
    """'h1:p1,h2:p2' -> [Address, ...]; '' or None -> []. Rejects duplicates and empty items."""
    if text is None or not text.strip():
        return []
    items = text.split(",")
    addresses = []
    for item in items:
        if not item.strip():
            raise UsageError(f"{flag}: '{text}' has an empty entry; separate host:port items with single commas")
        addresses.append(parse_address(flag, item))
    seen = set()
    for address in addresses:
        if address in seen:
            raise UsageError(f"{flag}: {address} is listed twice; every task needs its own host:port")
        seen.add(address)
    return addresses


@dataclass(frozen=True)
class ClusterInfo:
    """The cluster as tf_cnn_benchmarks sees it. Empty host lists mean a single process."""

    ps_hosts: tuple = field(default_factory=tuple)
    worker_hosts: tuple = field(default_factory=tuple)
    job_name: str = ""
    task_index: int = 0

    @property
    def num_ps(self):
        return len(self.ps_hosts)

    @property
    def num_workers(self):
        return max(1, len(self.worker_hosts))

    @property
    def is_distributed(self):
        return bool(self.worker_hosts)

    @property
    def is_chief(self):
        # tf_cnn_benchmarks' chief is worker 0: it initialises the variables.
        return self.job_name in ("", "worker") and self.task_index == 0

    @property
    def own_address(self):
        hosts = self.ps_hosts if self.job_name == "ps" else self.worker_hosts
        return hosts[self.task_index] if hosts else None

    def as_dict(self):
        """The ClusterSpec dict: {'ps': [...], 'worker': [...]}, without empty jobs."""
        spec = {}
        if self.ps_hosts:
            spec["ps"] = [str(a) for a in self.ps_hosts]
        if self.worker_hosts:
            spec["worker"] = [str(a) for a in self.worker_hosts]
        return spec

    def address_of(self, job, index):
        hosts = {"ps": self.ps_hosts, "worker": self.worker_hosts}.get(job, ())
        return str(hosts[index]) if 0 <= index < len(hosts) else None


def parse_tf_config(text):
    """TF_CONFIG JSON -> (ps_hosts, worker_hosts, job_name, task_index) as strings/ints."""
    try:
        config = json.loads(text)
    except ValueError as exc:
        raise UsageError(
            f"TF_CONFIG: not valid JSON ({exc}); unset it or pass --job_name/--task_index/--*_hosts"
        ) from None
    if not isinstance(config, dict):
        raise UsageError("TF_CONFIG: expected a JSON object with 'cluster' and 'task'")
    cluster = config.get("cluster") or {}
    task = config.get("task") or {}
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise UsageError("TF_CONFIG: 'cluster' and 'task' must be JSON objects")
    unknown = sorted(set(cluster) - {"ps", "worker"})
    if unknown:
        raise UsageError(
            f"TF_CONFIG: job(s) {', '.join(unknown)} not supported (tf_cnn_benchmarks has only ps and worker);"
            " list a chief as worker 0"
        )
    for job in ("ps", "worker"):
        if not isinstance(cluster.get(job, []), list):
            raise UsageError(f"TF_CONFIG: cluster.{job} must be a list of host:port strings")
    job_name = task.get("type", "")
    index = task.get("index", 0)
    if not isinstance(index, int) or isinstance(index, bool):
        raise UsageError(f"TF_CONFIG: task.index {index!r} is not an integer")
    return ",".join(cluster.get("ps", [])), ",".join(cluster.get("worker", [])), job_name, index


def build_cluster(job_name, task_index, ps_hosts_text, worker_hosts_text):
    """Validated ClusterInfo from flag values (host lists as comma-separated text)."""
    ps_hosts = parse_host_list("--ps_hosts", ps_hosts_text)
    worker_hosts = parse_host_list("--worker_hosts", worker_hosts_text)
    overlap = set(ps_hosts) & set(worker_hosts)
    if overlap:
        first = sorted(str(a) for a in overlap)[0]
        raise UsageError(f"--ps_hosts/--worker_hosts: {first} is in both lists; give each task its own port")
    if not ps_hosts and not worker_hosts:
        if job_name:
            raise UsageError(
                f"--job_name {job_name}: no cluster given; pass --ps_hosts and --worker_hosts (or TF_CONFIG),"
                " or drop --job_name and use --variable_update independent"
            )
        return ClusterInfo()
    if not job_name:
        raise UsageError("--job_name: missing while host lists are given; pass --job_name worker or --job_name ps")
    if job_name not in ("ps", "worker"):
        raise UsageError(f"--job_name {job_name}: unknown job; use ps or worker")
    if not worker_hosts:
        raise UsageError("--worker_hosts: empty; a cluster needs at least one worker (host:port,...)")
    hosts = ps_hosts if job_name == "ps" else worker_hosts
    flag = "--ps_hosts" if job_name == "ps" else "--worker_hosts"
    if not hosts:
        raise UsageError(f"--job_name ps: {flag} is empty; list the PS tasks as host:port,...")
    if not 0 <= task_index < len(hosts):
        raise UsageError(
            f"--task_index {task_index}: out of range for job {job_name}, which has {len(hosts)} task(s)"
            f" in {flag}; use 0..{len(hosts) - 1}"
        )
    return ClusterInfo(tuple(ps_hosts), tuple(worker_hosts), job_name, task_index)
