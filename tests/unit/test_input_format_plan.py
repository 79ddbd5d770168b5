"""input_format in a sweep (issue 55, item 7): the plan's axis and checks, the runs' flags, the
record's column, and the configuration key that keeps TFRecords and LMDB apart."""

import re

import pytest

from dtfbench.plan.sweep import PlanError
from dtfbench.report import stats
from dtfbench.results import record
from dtfbench.results.sweep_resume import plan_sweep

HOSTS = [{"name": "localhost", "address": "127.0.0.1", "devices": 8, "device_type": "cpu"}]
BASE = {"gpus": 1, "num_ps": 1, "model": "trivial", "sweep_id": "s", "repetitions": 1, "data": "real",
        "data_dir": "/data/digits"}  # fmt: skip


def _flag(run):
    args = run["launch"]["args"]
    return args[args.index("--input_format") + 1] if "--input_format" in args else None


def test_both_formats_are_a_sweep_axis_and_tfrecord_runs_keep_their_ids():
    plan = plan_sweep({**BASE, "input_format": "tfrecord,lmdb"}, HOSTS)
    tfrecord, lmdb = plan["runs"]
    assert (_flag(tfrecord), _flag(lmdb)) == (None, "lmdb")
    assert "input_format" not in tfrecord and lmdb["input_format"] == "lmdb"
    assert sorted(plan["sweep_config"]["input_format"]) == ["lmdb", "tfrecord"]
    plain = plan_sweep(BASE, HOSTS)
    assert tfrecord["run_id"] == plain["runs"][0]["run_id"] != lmdb["run_id"]


def test_the_record_names_the_format_and_older_real_runs_read_as_tfrecord():
    plan = plan_sweep({**BASE, "input_format": "tfrecord,lmdb"}, HOSTS)
    stored = []
    for run in plan["runs"]:
        payload = {
            "run": dict(run),
            "layout": {"num_workers": 1},
            "sweep_id": "s",
            "system": "local",
            "hosts": {"localhost": {"workers": [{"result": {"task_index": 0, "status": "ok", "images_per_sec": 9.0}}]}},
        }
        stored.append(record.build_record(payload))
    assert [r["input_format"] for r in stored] == ["tfrecord", "lmdb"]
    assert "input_format" in stats.CONFIG_KEYS
    # A real-data run stored before there was a choice (NULL) is the same configuration as a TFRecord one.
    older = dict(stored[0], input_format=None, run_id="old")
    summaries = stats.summarise([older, *stored])
    assert sorted((s["input_format"], s["runs"]) for s in summaries) == [("lmdb", 1), ("tfrecord", 2)]


@pytest.mark.parametrize(
    "request_, message",
    [
        ({"input_format": "hdf5"}, "input_format='hdf5'"),
        ({"input_format": "lmdb", "data": "synthetic"}, "input_format=lmdb is the file format of data_dir's records"),
        ({"input_format": "lmdb", "workload": "cscs2017"},
         "input_format=lmdb: workload=cscs2017 reads tfrecord only; use workload=ours"),
    ],
)  # fmt: skip
def test_a_format_that_cannot_be_read_is_refused_before_anything_starts(request_, message):
    with pytest.raises(PlanError, match=re.escape(message)):
        plan_sweep({**BASE, **request_}, HOSTS)
