"""The plan's memory check (dtfbench.plan.memory) and the wording of TF's allocation failure
(dtfbench.workload.reporting). The whole, with the nodes' documents and real TF processes in a
memory cgroup: tests/integration/test_out_of_memory.py."""

import pytest

from dtfbench.plan import memory
from dtfbench.plan.catalog import MODEL_SPECS
from dtfbench.results import environment_view
from dtfbench.workload.cluster import Address, ClusterInfo
from dtfbench.workload.reporting import describe_tf_error


def run(**values):
    return {"model": "vgg16", "batch_size": 32, "image_size": None, "num_workers": 1, "worker_nodes": 1,
            "devices_per_worker": 1, **values}  # fmt: skip


def test_every_model_has_its_measured_memory():
    assert set(memory.MODEL_MEMORY) == set(MODEL_SPECS)
    for name, measured in memory.MODEL_MEMORY.items():
        assert measured.fixed_mib > 100 and measured.per_image_mib > 0, name
    # The ImageNet models' images (224-299 px) take far more than the 28-32 px test models'.
    per_image = {name: m.per_image_mib for name, m in memory.MODEL_MEMORY.items()}
    assert min(per_image[m] for m in ("inception3", "resnet50", "resnet101", "vgg16", "alexnet")) > max(
        per_image[m] for m in ("lenet", "trivial", "small_cnn")
    )


def test_a_batch_that_does_not_fit_the_ram_is_named_with_one_that_does():
    node = memory.NodeMemory(host="node02", ram_mib=24 * 1024)
    assert memory.fit_warnings([run(batch_size=32)], [node]) == []
    (warning,) = memory.fit_warnings([run(batch_size=4096), run(batch_size=4096, repetition=2)], [node])
    assert warning.startswith("model=vgg16 batch_size=4096 (224 px) needs about ")
    assert "of RAM of node02; it will fail out of memory: choose batch_size=" in warning
    fits = int(warning.rsplit("batch_size=", 1)[1].split()[0])
    assert memory.fit_warnings([run(batch_size=fits)], [node]) == []
    assert memory.fit_warnings([run(batch_size=fits + 1)], [node]) != []


def test_two_workers_on_a_node_need_twice_and_the_smallest_node_counts():
    big, small = memory.NodeMemory("big", 64 * 1024), memory.NodeMemory("small", 8 * 1024)
    fits = int(memory.fit_warnings([run(batch_size=100000)], [big, small])[0].rsplit("batch_size=", 1)[1].split()[0])
    assert "of RAM of small" in memory.fit_warnings([run(batch_size=fits + 1)], [big, small])[0]
    two = run(batch_size=fits, num_workers=2, worker_nodes=1)
    assert "2 worker process(es)" in memory.fit_warnings([two], [big, small])[0]


def test_a_gpu_node_compares_one_gpus_images_with_the_smallest_gpu():
    node = memory.NodeMemory("gpu1", ram_mib=512 * 1024, gpu_mib=16 * 1024)
    (warning,) = memory.fit_warnings([run(batch_size=4096)], [node])
    assert "per GPU" in warning and "of a GPU of gpu1" in warning
    # A smaller image size scales the per-image part with the pixels.
    assert memory.fit_warnings([run(batch_size=4096, image_size=32)], [node]) == []


def test_a_nodes_document_gives_its_ram_its_cgroup_limit_and_its_gpus():
    limited = {"schema": 1, "unknown": {}, "memory_mib": 24000, "memory_limit_mib": 1024}
    node = memory.node_memory("localhost", environment_view.interpret(limited))
    assert node == memory.NodeMemory("localhost", 1024, None, "memory cgroup limit")
    (warning,) = memory.fit_warnings([run(model="trivial", image_size=32, batch_size=200000)], [node])
    assert "the 1.0 GiB memory cgroup limit of localhost" in warning
    gpus = {"memory_mib": 500000, "memory_limit_mib": None, "gpus": [{"memory_mib": 81559}, {"memory_mib": 40960}]}
    assert memory.node_memory("gpu1", gpus) == memory.NodeMemory("gpu1", 500000, 40960)
    # A node that could not say (environment.py failed there) is left out.
    assert (
        memory.node_memory("lost", environment_view.interpret({"schema": 1, "unknown": {"environment": "x"}})) is None
    )


class ResourceExhaustedError(Exception):
    """The name TF's allocation failure has (tf.errors.ResourceExhaustedError)."""


@pytest.mark.parametrize(
    "device, who",
    [
        ("/job:worker/replica:0/task:1/device:CPU:0", "worker 1 could not allocate"),
        ("/job:ps/replica:0/task:0/device:CPU:0", "ps 0 (127.0.0.1:2230) could not allocate"),
    ],
)
def test_tfs_allocation_failure_is_out_of_memory_not_a_lost_peer(device, who):
    cluster = ClusterInfo(
        (Address("127.0.0.1", 2230),), (Address("127.0.0.1", 2220), Address("127.0.0.1", 2221)), "worker", 1
    )
    error = ResourceExhaustedError(
        "Graph execution error: Detected at node 'cg/conv0/Conv2D' defined at (most recent call last): "
        + "  File x.py, line 1\n" * 30
        + f"OOM when allocating tensor with shape[4096,64,224,224] and type float on {device} by allocator cpu\n"
        "\t [[{{node cg/conv0/Conv2D}}]]\nHint: If you want to see a list of allocated tensors ..."
    )
    text = describe_tf_error(error, cluster, "step 1")
    assert text.startswith(
        f"out of memory: {who} a tensor on {device} in step 1 (ResourceExhaustedError: OOM when allocating tensor "
        f"with shape[4096,64,224,224] and type float on {device} by allocator cpu); "
    )
    assert "a peer died" not in text and text.endswith("lower batch_size or use a node with more memory")
