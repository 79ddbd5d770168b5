"""report.yml end to end: the report built from a fixture store by ansible-playbook, then rebuilt unchanged."""

import csv
import json

import pytest
from playbook_harness import run_playbook

from dtfbench.results import store

pytestmark = pytest.mark.ansible


def fixture_store(db):
    conn = store.connect(db)
    runs = [(1, 1, 40.0), (1, 2, 42.0), (2, 1, 75.0), (2, 2, 77.0), (2, 3, None)]
    for n, (gpus, rep, ips) in enumerate(runs):
        store.add_run(
            conn,
            {
                "run_id": f"pb-{n}",
                "sweep_id": "pb",
                "system": "local",
                "gpus": gpus,
                "num_workers": gpus,
                "num_ps": 1,
                "variable_update": "parameter_server",
                "data": "synthetic",
                "model": "small_cnn",
                "batch_size": 32,
                "repetition": rep,
                "images_per_sec": ips,
                "status": "ok" if ips else "failed",
                "reason": None if ips else "worker 1: peer ps:0 died",
            },
        )
    conn.close()


def test_report_playbook_builds_then_changes_nothing(tmp_path):
    db = tmp_path / "results.sqlite"
    out = tmp_path / "report"
    fixture_store(db)
    args = ["-e", f"results_db={db}", "-e", f"report_dir={out}", "-e", "sweep_id=pb", "-e", "report_formats=png"]

    first = run_playbook("report.yml", *args, timeout=300)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    assert "changed=1" in first.stdout and "failed=0" in first.stdout
    assert "# Benchmark report" in first.stdout  # the index, shown by the debug task
    assert "worker 1: peer ps:0 died" in first.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert all((out / rel).is_file() for rel in manifest["files"])
    assert "plots/speedup-local-small_cnn-bs32.png" in manifest["files"]
    with open(out / "best_configurations.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["gpus"], r["images_per_sec"], r["efficiency"]) for r in rows] == [
        ("1", "41.0", "1.0"),
        ("2", "76.0", "0.926829"),
    ]

    again = run_playbook("report.yml", *args, timeout=300)
    assert again.returncode == 0, again.stdout[-4000:]
    assert "changed=0" in again.stdout


def test_report_playbook_refuses_a_bad_reference(tmp_path):
    db = tmp_path / "results.sqlite"
    fixture_store(db)
    result = run_playbook(
        "report.yml",
        "-e",
        f"results_db={db}",
        "-e",
        f"report_dir={tmp_path / 'r'}",
        "-e",
        "reference=google",
        timeout=300,
    )
    assert result.returncode != 0
    assert "reference=google is unknown" in result.stdout
    assert not (tmp_path / "r").exists()


def test_report_playbook_without_a_store(tmp_path):
    result = run_playbook(
        "report.yml", "-e", f"results_db={tmp_path / 'none.sqlite'}", "-e", f"report_dir={tmp_path / 'r'}", timeout=300
    )
    assert result.returncode != 0
    assert "no results store" in result.stdout + result.stderr


@pytest.mark.parametrize(
    "content, message",
    [
        ("gpus,images_per_sec\n1,40.5\n" * 200, "not an SQLite database (file is not a database)"),
        ("", "an empty file, not a results store"),
    ],
)
def test_report_playbook_on_a_file_that_is_not_a_store(tmp_path, content, message):
    # One line naming the file and the problem, no traceback; the file is left as it was (a
    # 0-byte file used to become a 24 KB database).
    db = tmp_path / "results.sqlite"
    db.write_text(content)
    result = run_playbook("report.yml", "-e", f"results_db={db}", "-e", f"report_dir={tmp_path / 'r'}", timeout=300)
    assert result.returncode == 2
    out = result.stdout + result.stderr
    assert f"dtfbench report: error: --db {db}: {message}" in " ".join(out.split()), out[-3000:]
    assert "Traceback" not in out
    assert db.read_text() == content and sorted(p.name for p in tmp_path.iterdir()) == ["results.sqlite"]
