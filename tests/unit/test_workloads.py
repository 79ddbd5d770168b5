"""workload=ours | tf_cnn_benchmarks@<ref>: every bad request is one clear error before anything starts,
and a good one gives each run the tf_cnn_benchmarks flags it will get."""

import pytest
from store_harness import run_row

from dtfbench.plan import workloads
from dtfbench.plan.sweep import PlanError, run_digest
from dtfbench.results.sweep_resume import plan_sweep

LOCAL = [{"name": "localhost", "address": "127.0.0.1", "devices": 8, "device_type": "cpu"}]
GPU_HOSTS = [{"name": f"n{i}", "address": f"10.0.0.{i}", "devices": 2, "device_type": "gpu"} for i in range(1, 3)]
TF_CNN = "tf_cnn_benchmarks@master"


def plan(hosts=LOCAL, **request):
    request.setdefault("sweep_id", "s")
    request.setdefault("model", "trivial")
    return plan_sweep(request, hosts)


@pytest.mark.parametrize(
    "value, name, ref",
    [
        (None, "ours", None),
        ("", "ours", None),
        ("ours", "ours", None),
        (" ours ", "ours", None),
        ("tf_cnn_benchmarks@master", "tf_cnn_benchmarks", "master"),
        ("tf_cnn_benchmarks@v1.1.0", "tf_cnn_benchmarks", "v1.1.0"),
        ("tf_cnn_benchmarks@cnn_tf_v1.1_compatible", "tf_cnn_benchmarks", "cnn_tf_v1.1_compatible"),
        ("tf_cnn_benchmarks@release/2017-07", "tf_cnn_benchmarks", "release/2017-07"),
        (
            "tf_cnn_benchmarks@0123456789abcdef0123456789abcdef01234567",
            "tf_cnn_benchmarks",
            "0123456789abcdef0123456789abcdef01234567",
        ),
        ("tf_cnn_benchmarks@HEAD", "tf_cnn_benchmarks", "HEAD"),
    ],
)
def test_good_workloads(value, name, ref):
    workload = workloads.parse_workload(value)
    assert (workload.name, workload.ref) == (name, ref)
    assert workload.label == (name if ref is None else f"{name}@{ref}")
    if ref is not None:  # tensorflow/benchmarks, where its script has always lived
        assert (workload.repo, workload.script_dir) == (
            "https://github.com/tensorflow/benchmarks.git",
            "scripts/tf_cnn_benchmarks",
        )


@pytest.mark.parametrize(
    "value, ref, label",
    [
        ("cscs2017", "a0d3d61f4f8994d96b40e1a65e78e5a92ef09741", "cscs2017"),
        (" cscs2017 ", "a0d3d61f4f8994d96b40e1a65e78e5a92ef09741", "cscs2017"),
        ("cscs2017@master", "master", "cscs2017@master"),
    ],
)
def test_the_studys_program_is_its_repositorys_copy_pinned_to_its_commit(value, ref, label):
    workload = workloads.parse_workload(value)
    assert (workload.name, workload.ref, workload.label) == ("cscs2017", ref, label)
    assert workload.repo == "https://github.com/e-bug/distributed-tensorflow-benchmarks.git"
    assert workload.as_dict()["script"] == "google-benchmarks/tf_cnn_benchmarks/tf_cnn_benchmarks.py"
    # It is tf_cnn_benchmarks: the same checks and flags.
    runs = plan(gpus=2, num_ps=1, workload=value, repetitions=1)["runs"]
    assert runs[0]["workload"] == label and runs[0]["workload_args"][:2] == ["--model", "trivial"]
    with pytest.raises(PlanError, match="model=small_cnn is dtfbench's own test model"):
        plan(gpus=1, num_ps=1, workload=value, model="small_cnn")


def test_a_bad_ref_of_the_studys_program_names_it():
    with pytest.raises(workloads.WorkloadError, match=r"workload='cscs2017@a..b': the git ref 'a..b' contains '..'"):
        workloads.parse_workload("cscs2017@a..b")


@pytest.mark.parametrize(
    "value, message",
    [
        (
            "theirs",
            "workload='theirs' is unknown; use ours (python -m dtfbench train, the default), "
            "tf_cnn_benchmarks@<git ref>",
        ),
        ("tf_cnn_benchmark@master", "workload='tf_cnn_benchmark@master' is unknown"),
        ("tf_cnn_benchmarks", "workload=tf_cnn_benchmarks needs a git ref: tf_cnn_benchmarks@<branch, tag or commit>"),
        ("tf_cnn_benchmarks@", "the git ref '' is empty"),
        ("tf_cnn_benchmarks@my branch", "the git ref 'my branch' contains a space or control character"),
        ("tf_cnn_benchmarks@a\tb", "contains a space or control character"),
        ("tf_cnn_benchmarks@master..v2", "the git ref 'master..v2' contains '..' (a range, not one ref)"),
        ("tf_cnn_benchmarks@-rf", "the git ref '-rf' starts with '-' (git would read it as an option)"),
        ("tf_cnn_benchmarks@--upload-pack=evil", "starts with '-'"),
        ("tf_cnn_benchmarks@HEAD~1", "contains '~', which git refs cannot hold"),
        ("tf_cnn_benchmarks@v1^{}", "contains '^'"),
        ("tf_cnn_benchmarks@a:b", "contains ':'"),
        ("tf_cnn_benchmarks@feat*", "contains '*'"),
        ("tf_cnn_benchmarks@master@{1}", "is reflog syntax"),
        ("tf_cnn_benchmarks@@", "is reflog syntax"),
        ("tf_cnn_benchmarks@/master", "has an empty path component"),
        ("tf_cnn_benchmarks@a//b", "has an empty path component"),
        ("tf_cnn_benchmarks@topic.lock", "ends with '.' or '.lock'"),
        ("tf_cnn_benchmarks@a/.hidden", "has a path component that starts with '.'"),
        ("tf_cnn_benchmarks@" + "a" * 201, "is longer than 200 characters"),
    ],
)
def test_bad_workloads_are_one_clear_error(value, message):
    with pytest.raises(workloads.WorkloadError) as err:
        workloads.parse_workload(value)
    assert message in str(err.value)
    assert "\n" not in str(err.value)
    # ... and reach the user through the plan unchanged.
    with pytest.raises(PlanError) as through_plan:
        plan(gpus=1, num_ps=1, workload=value)
    assert str(through_plan.value) == str(err.value)


@pytest.mark.parametrize(
    "request_, message",
    [
        (
            {"model": "small_cnn"},
            "model=small_cnn is dtfbench's own test model; tf_cnn_benchmarks has no such model: "
            "choose from alexnet, googlenet, inception3",
        ),
        (
            {"model": "trivial,resnet9000"},
            "model='resnet9000' is not a model of tf_cnn_benchmarks (the study's version)",
        ),
        ({"model": "mobilenet"}, "model='mobilenet' is not a model of tf_cnn_benchmarks"),
        (
            {"variable_update": "replicated"},
            "variable_update=replicated is a single-process mode of tf_cnn_benchmarks: it refuses it with --job_name",
        ),
        ({"variable_update": "independent"}, "variable_update=independent is a single-process mode"),
        (
            {"variable_update": "collective_all_reduce"},
            "variable_update='collective_all_reduce' is not a cluster mode of tf_cnn_benchmarks (the study's version); "
            "use parameter_server or distributed_replicated, or workload=ours for collective_all_reduce",
        ),
        ({"variable_update": "horovod"}, "variable_update='horovod' is not a cluster mode of tf_cnn_benchmarks"),
        ({"image_size": 64}, "image_size=64: tf_cnn_benchmarks has no --image_size, each model has its own"),
        ({"warmup_steps": 0}, "warmup_steps=0: tf_cnn_benchmarks of 2017 reads 0 as 'its default'"),
    ],
)
def test_what_tf_cnn_benchmarks_cannot_run_is_refused_by_name(request_, message):
    with pytest.raises(PlanError) as err:
        plan(gpus=1, num_ps=1, workload=TF_CNN, **request_)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_ours_keeps_its_own_models_and_modes():
    result = plan(
        gpus=2,
        num_ps=0,
        model="small_cnn",
        variable_update="collective_all_reduce",
        image_size=16,
        warmup_steps=0,
        launcher="slurm",
    )
    assert result["workload"] == {
        "name": "ours",
        "ref": None,
        "label": "ours",
        "notes": [],
        "repo": None,
        "script_dir": None,
        "script": None,
    }
    assert all(run["workload"] == "ours" and "workload_args" not in run for run in result["runs"])
    with pytest.raises(PlanError, match="model='vgg19' is unknown"):
        plan(gpus=1, num_ps=1, model="vgg19")  # one of tf_cnn_benchmarks', not ours


def test_each_run_gets_its_tf_cnn_benchmarks_flags():
    result = plan(
        gpus="1,2",
        num_ps=1,
        workload=TF_CNN,
        model="inception3,vgg19",
        batch_size=64,
        repetitions=1,
        variable_update="parameter_server,distributed_replicated",
        warmup_steps=10,
        steps=100,
    )
    assert result["workload"]["label"] == TF_CNN and result["workload"]["notes"]
    assert result["total_runs"] == 2 * 2 * 2
    first = result["runs"][0]
    assert first["workload"] == TF_CNN
    # On the local system's CPU workers: NHWC and the CPU as device (TF 1.x has no NCHW conv there).
    assert (
        first["workload_args"]
        == (
            "--model inception3 --batch_size 64 --num_gpus 1 --num_warmup_batches 10 --num_batches 100"
            " --variable_update parameter_server --device cpu --data_format NHWC --local_parameter_device cpu"
        ).split()
    )
    assert {
        tuple(r["workload_args"][r["workload_args"].index("--variable_update") + 1 :][:1]) for r in result["runs"]
    } == {("parameter_server",), ("distributed_replicated",)}
    assert {r["workload_args"][1] for r in result["runs"]} == {"inception3", "vgg19"}


def test_gpu_workers_keep_tf_cnn_benchmarks_defaults_and_real_data_names_the_dataset():
    runs = plan(
        hosts=GPU_HOSTS,
        gpus=4,
        num_ps=2,
        devices_per_worker=2,
        workload=TF_CNN,
        model="resnet50",
        data="real",
        data_dir="/mnt/local_ssd/data",
        repetitions=1,
    )["runs"]
    assert (
        runs[0]["workload_args"]
        == (
            "--model resnet50 --batch_size 32 --num_gpus 2 --num_warmup_batches 10 --num_batches 100"
            " --variable_update parameter_server --data_dir /mnt/local_ssd/data --data_name imagenet"
        ).split()
    )


def test_workers_on_both_cpu_and_gpu_hosts_are_refused():
    mixed = [
        {"name": "g", "address": "10.0.0.1", "devices": 1, "device_type": "gpu"},
        {"name": "c", "address": "10.0.0.2", "devices": 1, "device_type": "cpu"},
    ]
    assert plan(hosts=mixed, gpus=1, num_ps=1, workload=TF_CNN)["total_runs"] == 5
    with pytest.raises(PlanError, match="gpus=2, num_ps=1: the workers would run on both CPU and GPU hosts"):
        plan(hosts=mixed, gpus=2, num_ps=1, workload=TF_CNN)


def test_the_workload_names_the_run_but_ours_keeps_the_ids_of_older_sweeps():
    ours = plan(gpus=1, num_ps=1, repetitions=1)["runs"][0]
    master = plan(gpus=1, num_ps=1, repetitions=1, workload=TF_CNN)["runs"][0]
    other = plan(gpus=1, num_ps=1, repetitions=1, workload="tf_cnn_benchmarks@v2")["runs"][0]
    study = plan(gpus=1, num_ps=1, repetitions=1, workload="cscs2017")["runs"][0]
    assert len({ours["run_id"], master["run_id"], other["run_id"], study["run_id"]}) == 4
    # The id a run of ours had before workloads existed (its digest covers plan.RUN_KEYS only).
    assert ours["run_id"] == "s-1-" + run_digest({k: v for k, v in ours.items() if k != "workload"})


def test_a_tf_cnn_benchmarks_sweep_resumes_only_its_own_runs(tmp_path):
    from dtfbench.results import store

    db = tmp_path / "r.sqlite"
    first = plan(gpus=1, num_ps=1, repetitions=1, workload=TF_CNN, results_db=str(db))
    run = first["runs"][0]
    store.add_run(
        store.connect(db),
        run_row(run["run_id"], workload="tf_cnn_benchmarks", workload_ref="master", workload_commit="ab" * 20),
    )
    assert plan(gpus=1, num_ps=1, repetitions=1, workload=TF_CNN, results_db=str(db))["pending_runs"] == 0
    # The same sweep id with another ref, or with ours, is other runs (added with sweep_extend;
    # without it such a resume is refused).
    assert (
        plan(gpus=1, num_ps=1, repetitions=1, workload="tf_cnn_benchmarks@v2", results_db=str(db), sweep_extend=True)[
            "pending_runs"
        ]
        == 1
    )
    assert plan(gpus=1, num_ps=1, repetitions=1, results_db=str(db), sweep_extend=True)["pending_runs"] == 1


DAINT_TF1 = "TensorFlow/1.1.0-CrayGNU-17.08-cuda-8.0-python3"
DAINT_TF2 = "TensorFlow/2.4.0-CrayGNU-21.09"


@pytest.mark.parametrize("workload", ["cscs2017", "cscs2017@master", TF_CNN])
def test_the_studys_program_and_tf_cnn_benchmarks_plan_on_slurm(workload):
    result = plan(gpus="1,2", num_ps=1, workload=workload, launcher="slurm", tf_modules=["daint-gpu", DAINT_TF1])
    assert result["total_runs"] == 2 * 5 and all(run["workload_args"] for run in result["runs"])


@pytest.mark.parametrize(
    "workload, modules, message",
    [
        (
            "ours",
            ["daint-gpu", DAINT_TF1],
            f"workload=ours (python -m dtfbench train, TensorFlow 2 code) cannot run on the module {DAINT_TF1} "
            "(TensorFlow 1.1): use workload=cscs2017 (the study's program, for a TensorFlow 1.x module), or load a "
            "TensorFlow 2 module (-e tf_module=TensorFlow/2.x... on system=daint, else slurm_cluster_modules)",
        ),
        ("ours", ["tensorflow-gpu/1.15.2"], "cannot run on the module tensorflow-gpu/1.15.2 (TensorFlow 1.15)"),
        (
            "cscs2017",
            ["daint-gpu", DAINT_TF2],
            f"workload=cscs2017 (the study's tf_cnn_benchmarks of 2017, TensorFlow 1.x code) cannot run on the module "
            f"{DAINT_TF2} (TensorFlow 2.4): use workload=ours with this module, or load a TensorFlow 1.x module "
            "(on system=daint leave tf_module out for the study's TensorFlow/1.1.0 module)",
        ),
        ("cscs2017@master", ["TensorFlow/2.11.0"], "workload=cscs2017@master (the study's"),
        # The last TensorFlow module counts (a later `module load` replaces an earlier one).
        ("ours", [DAINT_TF2, DAINT_TF1], f"cannot run on the module {DAINT_TF1}"),
    ],
)
def test_a_workload_on_a_tensorflow_module_it_cannot_run_is_refused_naming_both(workload, modules, message):
    with pytest.raises(PlanError) as err:
        plan(gpus=1, num_ps=1, workload=workload, launcher="slurm", tf_modules=modules)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "workload, modules",
    [
        ("ours", ["daint-gpu", DAINT_TF2]),
        ("cscs2017", ["daint-gpu", DAINT_TF1]),
        ("cscs2017", ["TensorFlow/1.15.0"]),
        # A name without a version says nothing (the test cluster's TensorFlow/venv-python3).
        ("ours", ["daint-gpu", "TensorFlow/venv-python3"]),
        ("cscs2017", ["TensorFlow"]),
        ("ours", []),
        # tf_cnn_benchmarks@<ref> follows its ref: master needs TF 2, the cnn_tf_v1.x branches TF 1.x.
        (TF_CNN, [DAINT_TF1]),
        (TF_CNN, [DAINT_TF2]),
    ],
)
def test_a_coherent_or_unknown_pair_is_planned(workload, modules):
    assert plan(gpus=1, num_ps=1, workload=workload, launcher="slurm", tf_modules=modules)["total_runs"] == 5


def test_tf_module_version_reads_the_sites_names():
    assert workloads.tf_module_version(["daint-gpu", DAINT_TF1]) == (DAINT_TF1, (1, 1))
    assert workloads.tf_module_version(["TensorFlow/v2.9.1"]) == ("TensorFlow/v2.9.1", (2, 9))
    assert workloads.tf_module_version(["Horovod/0.21.0-CrayGNU-tf-2.4.0", "PyTorch/1.9.0"]) is None
