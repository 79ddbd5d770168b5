"""Environment provenance (#20) without TensorFlow: the collector against recorded nvidia-smi
answers (tests/nodes: the replaying stand-in, run for real), the store's schema step, runs kept
apart by the fields that matter, the report's Environment section and the export.

The real-process checks are beside the workers' own tests: tests/workload/test_gpu_sampling.py
(our workers: CPU-only, and recorded nvidia-smi), test_tf_cnn_adapter.py (the adapter under
Python 2.7/3.6 and this one), tests/integration/test_study_workload.py (TF 1.1) and
test_environment_testbed.py (two hosts that differ).
"""

import csv
import io
import json
import os
from pathlib import Path

import pytest
from store_harness import old_store, run_row

from dtfbench.compat import environment
from dtfbench.report import analysis, build, tables
from dtfbench.results import environment_view, record, store

NODES = Path(__file__).resolve().parents[1] / "nodes"
FAKE = str(NODES / "fake_nvidia_smi" / "nvidia-smi")
CASES = NODES / "nvidia_smi_outputs"


def collect_with(case, monkeypatch, **kwargs):
    monkeypatch.setenv("DTFBENCH_FAKE_NVIDIA_SMI", str(case))
    return environment.collect(nvidia_smi=FAKE, **kwargs)


@pytest.mark.parametrize(
    "case, name, memory, driver, capability, count",
    [
        ("v100_p3_8xlarge", "Tesla V100-SXM2-16GB", 16384, "535.104.05", "7.0", 4),
        ("k80_p2_8xlarge", "Tesla K80", 11441, "470.182.03", "3.7", 8),  # R470 refuses compute_cap: asked again
        ("a100_p4d_24xlarge", "NVIDIA A100-SXM4-40GB", 40960, "535.161.08", "8.0", 8),
    ],
)
def test_recorded_nvidia_smi_answers_fill_the_gpu_fields(monkeypatch, case, name, memory, driver, capability, count):
    doc = environment_view.interpret(collect_with(CASES / case, monkeypatch))
    assert doc["gpu_status"] == "ok" and len(doc["gpus"]) == count
    assert {(g["name"], g["memory_mib"], g["driver_version"], g["compute_capability"]) for g in doc["gpus"]} == {
        (name, memory, driver, capability)
    }
    fields = environment_view.fields(doc)
    assert (fields["gpu_model"], fields["gpu_driver"], fields["gpu_count"]) == (name, driver, str(count))
    # The recordings hold no clocks or power limit: unknown, and why.
    assert fields["gpu_clocks"] == "unknown" and "not recorded" in doc["unknown"]["gpu_clocks"]
    assert "gpus" not in doc["unknown"]


@pytest.mark.parametrize(
    "case, status, why",
    [
        ("no_driver", "no_driver", "couldn't communicate with the NVIDIA driver"),
        ("no_devices", "no_devices", "No devices were found"),
        ("driver_mismatch", "no_driver", "Driver/library version mismatch"),
    ],
)
def test_nvidia_smi_failures_are_unknown_with_why(monkeypatch, case, status, why):
    doc = environment_view.interpret(collect_with(CASES / case, monkeypatch))
    assert doc["gpus"] == "unknown" and doc["gpu_status"] == status
    assert why in doc["unknown"]["gpus"]
    assert environment_view.fields(doc)["gpu_model"] == "unknown"


def test_a_hung_nvidia_smi_or_none_at_all_never_fails_the_collection(monkeypatch, tmp_path):
    case = tmp_path / "hung"
    (tmp_path / "hung.sleep").write_text("30")
    monkeypatch.setenv("DTFBENCH_FAKE_NVIDIA_SMI", str(case))
    answer = environment.query_gpus(FAKE, timeout=0.5)
    assert answer["status"] == "error" and "did not answer within 0.5 s" in answer["reason"]
    doc = environment_view.interpret(environment.collect(nvidia_smi=str(tmp_path / "no-such-nvidia-smi")))
    assert doc["gpu_status"] == "absent" and "was not found" in doc["unknown"]["gpus"]


def test_clocks_and_power_limit_are_read_when_the_driver_answers():
    # A constructed answer (not a recording): a V100-SXM2's documented maximum clocks and power limit.
    doc = {
        "gpu_query": {
            "gpus": {
                "fields": list(environment.GPU_FIELDS),
                "rc": 0,
                "stderr": "",
                "stdout": "0, Tesla V100-SXM2-16GB, 16384, 535.104.05, GPU-0e6f, 00000000:00:1B.0, 7.0\n",
            },
            "clocks": {
                "fields": list(environment.CLOCK_FIELDS),
                "rc": 0,
                "stderr": "",
                "stdout": "0, 1530, 877, 300.00\n",
            },
        }
    }
    gpu = environment_view.interpret(doc)["gpus"][0]
    assert (gpu["clocks_max_sm_mhz"], gpu["clocks_max_mem_mhz"], gpu["power_limit_w"]) == (1530.0, 877.0, 300.0)
    fields = environment_view.fields(doc)
    assert (fields["gpu_clocks"], fields["gpu_power_limit"]) == ("1530/877 MHz", "300 W")


class BrokenTensorFlow:
    __version__ = "9.9.9"

    @property
    def sysconfig(self):
        raise RuntimeError("a broken install")


def test_collecting_never_raises_and_says_why(monkeypatch):
    monkeypatch.setattr(environment, "_memory_mib", lambda: 1 // 0)
    doc = environment.collect(
        tf=BrokenTensorFlow(), environ={"OMP_NUM_THREADS": "4", "HOME": "/root", "KMP_AFFINITY": "compact", "TF_X": "1"}
    )
    assert doc["memory_mib"] == "unknown" and doc["unknown"]["memory_mib"].startswith("ZeroDivisionError")
    assert doc["tensorflow"] == "unknown" and "a broken install" in doc["unknown"]["tensorflow"]
    assert doc["env"] == {"OMP_NUM_THREADS": "4", "KMP_AFFINITY": "compact", "TF_X": "1"}
    json.dumps(doc)


# --- the store, the configurations, the report ----------------------------------------------------


def worker_doc(host, *, tf_git="v2.21.0-rc1", driver=None, omp=None):
    doc = environment.collect(nvidia_smi="/nonexistent/nvidia-smi", environ={"OMP_NUM_THREADS": omp} if omp else {})
    doc["host"] = host
    doc["tensorflow"] = {
        "version": "2.21.0",
        "git_version": tf_git,
        "compiler": "clang",
        "cuda_build": False,
        "build": {"is_cuda_build": False},
        "onednn": True,
    }
    if driver:
        doc["gpu_query"]["gpus"] = {
            "fields": list(environment.GPU_FIELDS),
            "rc": 0,
            "stderr": "",
            "stdout": f"0, Tesla T4, 15360, {driver}, GPU-1, 00000000:00:1E.0, 7.5\n",
        }
    return doc


def payload(run_id, docs, repetition=1, status="ok", sweep_id="s1"):
    hosts = {}
    for index, (host, doc) in enumerate(sorted(docs.items())):
        result = {
            "task_index": index,
            "status": status,
            "images_per_sec": 10.0 + index if status == "ok" else None,
            "reason": None if status == "ok" else "boom",
            "environment": doc,
        }
        hosts[host] = {"failure": "", "workers": [{"result": result}] if doc is not None else []}
    return {
        "run": {
            "run_id": run_id,
            "gpus": len(docs),
            "num_ps": 1,
            "variable_update": "parameter_server",
            "data": "synthetic",
            "repetition": repetition,
            "model": "trivial",
            "batch_size": 8,
        },
        "sweep_id": sweep_id,
        "system": "local",
        "layout": {"num_workers": len(docs), "hosts_used": sorted(docs), "cluster_spec": {}},
        "hosts": hosts,
        "instance_types": {h: "g4dn.xlarge" for h in docs},
    }


def add(conn, *payloads):
    for item in payloads:
        store.add_run(conn, record.build_record(item))


def test_runs_that_differ_in_a_field_that_matters_are_never_one_configuration(tmp_path):
    conn = store.connect(tmp_path / "r.sqlite")
    add(
        conn,
        payload("a1", {"n1": worker_doc("n1", driver="535.104.05")}),
        payload("a2", {"n1": worker_doc("n1", driver="535.104.05", omp="2")}, repetition=2),  # env: same configuration
        payload("b1", {"n1": worker_doc("n1", driver="550.54.15")}, repetition=3),
    )
    rows = analysis.load_rows(tmp_path / "r.sqlite")
    assert rows[0]["environment"]["n1"]["instance_type"] == "g4dn.xlarge"  # the inventory's, where the node lacked it
    assert rows[0]["environment_key"] == (
        "instance_type=g4dn.xlarge; gpu_model=Tesla T4; gpu_driver=535.104.05; "
        "tf_version=2.21.0; tf_build=v2.21.0-rc1; no cuda; onednn"
    )
    summaries = analysis.summarise(rows)
    assert [(s["runs"], s["environment_split"]) for s in summaries] == [(2, ["gpu_driver"]), (1, ["gpu_driver"])]
    table = tables.format_table(summaries)
    assert (
        "local, trivial, synthetic, 1 GPUs, 1 PS, parameter_server: environment E1 (2/2 runs ok), "
        "split by gpu_driver" in table
    )
    assert "environment E2 (1/1 runs ok), split by gpu_driver" in table


def test_a_failed_run_without_an_environment_joins_its_configuration(tmp_path):
    conn = store.connect(tmp_path / "r.sqlite")
    add(
        conn,
        payload("a1", {"n1": worker_doc("n1")}),
        dict(payload("a2", {"n1": None}, repetition=2), hosts={"n1": {"failure": "port taken", "workers": []}}),
    )
    rows = analysis.load_rows(tmp_path / "r.sqlite")
    assert rows[1]["status"] == "failed" and rows[1]["environment"] is None and rows[1]["environment_key"] is None
    [summary] = analysis.summarise(rows)
    assert (summary["runs"], summary["failed"], summary["environment_split"]) == (2, 1, [])


def test_a_store_of_schema_4_gains_the_columns_and_its_runs_are_unknown(tmp_path, capsys):
    db = tmp_path / "old.sqlite"
    old_store(
        db,
        4,
        ("environment", "environment_key"),
        run_row("old-1", "s0", images_per_sec=12.5, model="trivial", batch_size=8),
    )
    # A reader sees the old store as it is (read-only: the columns are unknown, nothing is written).
    assert [(r["run_id"], r["environment"], r["environment_key"]) for r in analysis.load_rows(db)] == [
        ("old-1", None, None)
    ]

    conn = store.connect(db)  # a writer: the current schema (5 added the environment)
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(
        store.SCHEMA_VERSION
    )
    assert [r[1] for r in conn.execute("PRAGMA table_info(runs)")][-2:] == ["environment", "environment_key"]
    add(conn, payload("new-1", {"n1": worker_doc("n1")}))
    conn.close()

    out = tmp_path / "report"
    build.build(analysis.load_rows(db), out, formats=(), db=str(db))
    md = (out / "environments.md").read_text()
    assert "## local" in md and "| | unknown | E1 |" in md
    assert "| run_ids | old-1 | new-1 |" in md and "| tf_version | unknown | 2.21.0 |" in md
    assert "None: no configuration ran in more than one environment." in md
    environments = list(csv.DictReader(io.StringIO((out / "environments.csv").read_text())))
    assert [(e["environment"], e["run_ids"], e["gpu_model"]) for e in environments] == [
        ("unknown", "old-1", "unknown"),
        ("E1", "new-1", "unknown"),
    ]
    index = (out / "index.md").read_text()
    assert "## Environment" in index and "- local unknown: 1 run(s) on unknown hosts" in index
    assert "[environments.md](environments.md)" in index

    # The export: both columns, in JSON and CSV (the old row's empty).
    assert store.main(["export", "--db", str(db), "--format", "json"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert exported[0]["environment"] is None and exported[1]["environment"]["n1"]["host"] == "n1"
    assert exported[1]["environment_key"].startswith("instance_type=g4dn.xlarge; gpu_model=unknown")
    assert store.main(["export", "--db", str(db), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert (
        rows[0]["environment"] == ""
        and json.loads(rows[1]["environment"])["n1"]["cpu"]["logical_cores"] == os.cpu_count()
    )


def test_hosts_that_differ_are_named_with_the_field():
    docs = {
        "node01": worker_doc("node01", driver="535.104.05"),
        "node02": worker_doc("node02", driver="550.54.15", omp="3"),
    }
    found = environment_view.host_differences(docs)
    assert [d["field"] for d in found] == ["gpu_driver", "env.OMP_NUM_THREADS"]
    assert environment_view.describe_differences(found) == (
        "gpu_driver: 535.104.05 on node01; 550.54.15 on node02\nenv.OMP_NUM_THREADS: (unset) on node01; 3 on node02"
    )
    # CUDA_VISIBLE_DEVICES is set per task by the launcher: never a difference between hosts.
    docs["node02"]["env"]["CUDA_VISIBLE_DEVICES"] = "1"
    assert [d["field"] for d in environment_view.host_differences(docs)] == ["gpu_driver", "env.OMP_NUM_THREADS"]
    assert environment_view.host_differences({"a": worker_doc("a"), "b": worker_doc("b")}) == []
