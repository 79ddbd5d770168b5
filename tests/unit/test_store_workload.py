"""Store schema 4: every run records its workload (name, git ref, resolved commit)."""

import sqlite3

from store_harness import old_store, run_row

from dtfbench.results import record, store

WORKLOAD_COLUMNS = ("workload", "workload_ref", "workload_commit")
RUN = {
    "run_id": "s-1",
    "gpus": 1,
    "num_ps": 1,
    "variable_update": "parameter_server",
    "data": "synthetic",
    "repetition": 1,
}
LAYOUT = {"num_workers": 1, "hosts_used": ["localhost"], "cluster_spec": {}}
OK_WORKER = {"result": {"task_index": 0, "status": "ok", "images_per_sec": 10.0}}


def test_a_store_of_schema_3_opens_and_takes_the_workload_columns(tmp_path):
    db = tmp_path / "old.sqlite"
    old_store(db, 3, WORKLOAD_COLUMNS, run_row("old-1", images_per_sec=12.5, data_read_mb_per_s=700.0))

    conn = store.connect(db)
    # 5: environment (test_environment.py); 6: sweep_steps (test_adaptive_sweep_decisions.py);
    # 7: network_probes (test_network_store.py); 8: the NIC figures (test_nic_sampler.py);
    # 9: the held-out accuracy (test_accuracy_store.py); 10: storage, 11: cache (test_storage_record.py);
    # 12: stagings (test_staging_record.py); 13: input_format; 14: background_io (test_background_io.py)
    assert store.SCHEMA_VERSION == 14
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "14"
    new = record.build_record(
        {
            "run": RUN,
            "sweep_id": "s",
            "system": "local",
            "layout": LAYOUT,
            "hosts": {"localhost": {"failure": "", "workers": [OK_WORKER]}},
            "workload": {"name": "tf_cnn_benchmarks", "ref": "v1.1", "commit": "ef" * 20},
        }
    )
    store.add_run(conn, dict(new, run_id="new-1"))
    rows = store.runs(conn)
    assert [
        (r["run_id"], r["images_per_sec"], r["data_read_mb_per_s"]) + tuple(r[c] for c in WORKLOAD_COLUMNS)
        for r in rows
    ] == [("old-1", 12.5, 700.0, None, None, None), ("new-1", 10.0, None, "tf_cnn_benchmarks", "v1.1", "ef" * 20)]
    assert store.completed_run_ids(db, "s") == {"old-1", "new-1"}
    conn.close()
    store.connect(db).close()  # opening again changes nothing
    names = [r[1] for r in sqlite3.connect(db).execute("PRAGMA table_info(runs)")]
    assert names[names.index("workload") :][:3] == list(WORKLOAD_COLUMNS)


def test_ours_is_recorded_as_ours_without_a_ref_or_commit():
    payload = {
        "run": RUN,
        "sweep_id": "s",
        "system": "local",
        "layout": LAYOUT,
        "hosts": {"localhost": {"failure": "", "workers": [OK_WORKER]}},
    }
    for workload in (None, {"name": "ours", "ref": None, "label": "ours", "notes": [], "commit": None}):
        rec = record.build_record(dict(payload, workload=workload) if workload else payload)
        assert (rec["workload"], rec["workload_ref"], rec["workload_commit"]) == ("ours", None, None)
