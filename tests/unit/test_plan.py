"""The sweep plan: every bad request is one clear error before anything starts."""

import pytest
from store_harness import run_row

from dtfbench.plan.sweep import PlanError, as_list, default_num_ps
from dtfbench.results.sweep_resume import plan_sweep

LOCAL = [{"name": "localhost", "address": "127.0.0.1", "devices": 8, "device_type": "cpu"}]
FOUR_GPU_HOSTS = [{"name": f"n{i}", "address": f"10.0.0.{i}", "devices": 1, "device_type": "gpu"} for i in range(1, 5)]


def plan(hosts=LOCAL, **request):
    request.setdefault("sweep_id", "s")
    return plan_sweep(request, hosts)


@pytest.mark.parametrize(
    "value, expected",
    [
        (2, [2]),
        ("1,2,4", ["1", "2", "4"]),
        ("1, 2", ["1", "2"]),
        ([1, 2], [1, 2]),
        ("[1, 2]", ["1", "2"]),
        (None, []),
        ("", []),
    ],
)
def test_as_list(value, expected):
    assert as_list("gpus", value) == expected


def test_sweep_is_the_product_of_the_axes_times_repetitions():
    result = plan(gpus="1,2", variable_update=["parameter_server", "distributed_replicated"], num_ps="1", repetitions=3)
    assert result["total_runs"] == 2 * 2 * 3
    assert [r["index"] for r in result["runs"]] == list(range(1, 13))
    assert len({r["run_id"] for r in result["runs"]}) == 12
    assert result["runs"][0]["run_id"].startswith("s-01-")
    first = result["runs"][0]
    assert (first["gpus"], first["variable_update"], first["repetition"]) == (1, "parameter_server", 1)
    assert [r["repetition"] for r in result["runs"][:3]] == [1, 2, 3]


def test_default_num_ps_is_the_studys_sweep():
    assert default_num_ps(4, "parameter_server") == [1, 2, 3, 4]
    assert default_num_ps(4, "collective_all_reduce") == [0]
    runs = plan(hosts=FOUR_GPU_HOSTS, gpus=4, num_ps=None, repetitions=1)["runs"]
    assert [r["num_ps"] for r in runs] == [1, 2, 3, 4]


def test_default_num_ps_is_pruned_for_large_worker_counts():
    assert default_num_ps(8, "parameter_server") == [1, 2, 3, 4, 5, 6, 7, 8]
    assert default_num_ps(9, "parameter_server") == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert default_num_ps(64, "parameter_server") == [1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64]
    assert default_num_ps(100, "parameter_server") == [1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64, 100]


def test_default_num_ps_stops_where_the_nodes_run_out_of_ps_slots():
    # 8 nodes x 8 GPUs, one PS per node beside its workers (EC2 p2.8xlarge, the study's setting).
    hosts = [{"name": f"n{i}", "address": f"10.0.0.{i}", "devices": 8, "max_ps": 1} for i in range(1, 9)]
    runs = plan(hosts=hosts, gpus=64, num_ps=None, repetitions=1)["runs"]
    assert [r["num_ps"] for r in runs] == [1, 2, 3, 4, 5, 6, 7, 8]
    with pytest.raises(PlanError, match="num_ps=16"):
        plan(hosts=hosts, gpus=64, num_ps=16, repetitions=1)


def test_both_data_kinds_expand():
    runs = plan(gpus=1, num_ps=1, repetitions=1, data="both", data_dir="/data")["runs"]
    assert [r["data"] for r in runs] == ["synthetic", "real"]


@pytest.mark.parametrize(
    "request_, message",
    [
        ({"gpus": "two"}, "gpus='two' is not an integer"),
        ({"gpus": 0}, "gpus=0 is below 1"),
        ({"gpus": 1, "model": "googlenet9"}, "model='googlenet9' is unknown"),
        ({"gpus": 1, "variable_update": "replicated_magic"}, "variable_update='replicated_magic' is unknown"),
        ({"gpus": 1, "data": "real"}, "data=real needs a dataset"),
        ({"gpus": 1, "data": "imaginary"}, "data='imaginary' is unknown"),
        ({"gpus": 1, "repetitions": 0}, "repetitions=0 is below 1"),
        ({"gpus": 1, "batch_size": -4}, "batch_size=-4 is below 1"),
        ({"gpus": 3, "devices_per_worker": 2}, "not a multiple of devices_per_worker=2"),
        ({"gpus": 2, "variable_update": "collective_all_reduce", "num_ps": 1}, "all-reduce has no parameter servers"),
        ({"gpus": 2, "num_ps": 0}, "give num_ps >= 1"),
        ({"gpus": 1, "model": "inception3", "image_size": 32}, "image_size=32 is too small for model=inception3"),
        ({"gpus": 1, "sweep_id": "x$(reboot)"}, "is not a plain name"),
        ({"gpus": 1, "sweep_id": "../up"}, "is not a plain name"),
        ({"gpus": 1, "step_timeout": 0}, "step_timeout=0: a timeout must be above 0 seconds"),
        ({"gpus": 1, "run_timeout": "0"}, "run_timeout=0: a timeout must be above 0 seconds"),
        ({"gpus": 1, "ready_timeout": -1}, "ready_timeout=-1: a timeout must be above 0 seconds"),
        ({"gpus": 1, "startup_timeout": -5}, "startup_timeout=-5: a timeout must be above 0 seconds"),
        ({"gpus": 1, "step_timeout": "abc"}, "step_timeout='abc' is not a whole number of seconds"),
        ({"gpus": 1, "submit": False}, "submit=false only writes Slurm job scripts, and this sweep's launcher is ssh"),
        ({"gpus": "1,2", "num_ps": "auto", "submit": False, "launcher": "slurm"}, "they need submit=true"),
        (
            {"gpus": "1,2", "stop_below_efficiency": 0.5, "submit": False, "launcher": "slurm"},
            "they need submit=true",
        ),
    ],
)
def test_bad_requests_are_named(request_, message):
    with pytest.raises(PlanError, match=message.replace("(", r"\(").replace("[", r"\[")):
        plan(**request_)


def test_a_sweep_point_that_does_not_fit_fails_before_the_first_run():
    with pytest.raises(PlanError) as err:
        plan(hosts=FOUR_GPU_HOSTS, gpus="1,2,8", num_ps=1)
    assert "gpus=8" in str(err.value)
    assert "not enough" in str(err.value)


def test_submit_false_plans_a_slurm_sweeps_scripts():
    written = plan(gpus="1,2", num_ps=1, repetitions=1, submit=False, launcher="slurm")
    assert written["pending_runs"] == 2 and written["adaptive"] is None


def test_no_hosts():
    with pytest.raises(PlanError, match="no TF nodes"):
        plan(hosts=[], gpus=1)


def test_a_sweep_resumes_where_the_store_says_it_stopped(tmp_path):
    from dtfbench.results import store

    db = tmp_path / "r.sqlite"
    first = plan(gpus="1,2", num_ps=1, repetitions=1, results_db=str(db))
    assert first["pending_runs"] == 2 and not any(r["done"] for r in first["runs"])
    conn = store.connect(db)
    done_run = first["runs"][0]
    store.add_run(
        conn,
        run_row(done_run["run_id"]),
    )
    store.add_run(
        conn,
        run_row(first["runs"][1]["run_id"], gpus=2, status="failed", reason="x"),
    )
    again = plan(gpus="1,2", num_ps=1, repetitions=1, results_db=str(db))
    assert [r["done"] for r in again["runs"]] == [True, False]  # a failed run is run again
    assert again["pending_runs"] == 1


def test_resuming_with_other_axes_never_takes_a_different_run_for_a_done_one(tmp_path):
    from dtfbench.results import store

    db = tmp_path / "r.sqlite"
    first = plan(gpus="1,2", num_ps=1, repetitions=1, results_db=str(db))
    conn = store.connect(db)
    for run in first["runs"]:
        store.add_run(
            conn,
            run_row(run["run_id"], gpus=run["gpus"]),
        )
    # Other axes under the same sweep_id: only with sweep_extend (tested in test_store_checks.py).
    other = plan(gpus="4", num_ps=1, repetitions=1, results_db=str(db), sweep_extend=True)  # index 1 is another run now
    assert [r["done"] for r in other["runs"]] == [False]
    wider = plan(gpus="2,1", num_ps=1, repetitions=1, results_db=str(db))  # same runs, other order
    assert [r["done"] for r in wider["runs"]] == [True, True]
    many = plan(gpus="1,2", num_ps=1, repetitions=6, results_db=str(db), sweep_extend=True)  # other padding, same runs
    assert sum(r["done"] for r in many["runs"]) == 2


def test_ps_counts_apply_only_to_the_modes_with_parameter_servers():
    result = plan(
        hosts=FOUR_GPU_HOSTS,
        gpus=2,
        num_ps="0,1,2",
        variable_update="parameter_server,distributed_replicated,collective_all_reduce",
    )
    configs = [(r["variable_update"], r["num_ps"]) for r in result["runs"] if r["repetition"] == 1]
    assert configs == [
        ("parameter_server", 1),
        ("parameter_server", 2),
        ("distributed_replicated", 1),
        ("distributed_replicated", 2),
        ("collective_all_reduce", 0),
    ]
    assert any("collective_all_reduce has no parameter servers and runs with num_ps 0" in n for n in result["notes"])
    # Alone, all-reduce with a PS count is still refused; PS modes with only 0 are too.
    with pytest.raises(PlanError, match="give num_ps >= 1"):
        plan(gpus=2, num_ps="0", variable_update="parameter_server,collective_all_reduce")
