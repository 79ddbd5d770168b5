"""The results store is checked before a sweep, read without writing, and never loses a run
(issue #21, items 2 to 6): real SQLite files, real tmpfs mounts for a full disk, the real
command lines (`python -m dtfbench store`, `python -m dtfbench report`, `python -m dtfbench record`)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from store_harness import fill, measured_row

from dtfbench.plan import sweep as planner
from dtfbench.results import store
from dtfbench.results.sweep_resume import plan_sweep

HOSTS = [{"name": "localhost", "address": "127.0.0.1", "devices": 4, "device_type": "cpu"}]


def row(run_id="s-1-aaaaaaaa", sweep_id="s", **overrides):
    return measured_row(run_id, sweep_id, **overrides)


def a_store(path: Path, *rows) -> Path:
    conn = store.connect(path)
    for r in rows:
        store.add_run(conn, r)
    conn.close()
    return path


def truncated_store(path: Path) -> Path:
    """A store cut short after its first pages, as a copy interrupted half-way leaves it."""
    conn = store.connect(path)
    for n in range(200):
        store.add_run(conn, row(run_id=f"s-{n}", worker_results=[{"pad": "x" * 500}]))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    return path


def cli(command: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dtfbench", command, *args], capture_output=True, text=True, input=stdin, timeout=60
    )


def one_line_error(done: subprocess.CompletedProcess) -> str:
    """The command failed with exit 2, one line on stderr, no traceback, nothing on stdout."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr.strip()


# --- item 2: the store is checked before anything starts --------------------------------


def test_an_unwritable_path_is_refused_with_the_variable_and_the_path():
    with pytest.raises(store.StoreError) as refused:
        store.check_writable("/proc/x/r.sqlite")
    message = str(refused.value)
    assert message.startswith("results_db=/proc/x/r.sqlite: cannot create its folder /proc/x"), message
    assert "use a path in a folder you can write" in message


def test_a_full_disk_is_refused_as_a_full_disk(small_tmpfs):
    full = small_tmpfs("64k")
    with pytest.raises(store.StoreError, match=r"results_db=.*/r\.sqlite: the disk is full: \d+ KB free"):
        store.check_writable(full / "r.sqlite")
    assert list(full.iterdir()) == []  # no store, no probe left


def test_a_new_store_is_checked_without_being_created(tmp_path):
    db = tmp_path / "deep" / "r.sqlite"
    store.check_writable(db)
    assert db.parent.is_dir() and list(db.parent.iterdir()) == []  # the probe was removed


def test_an_existing_store_takes_a_test_write_and_is_left_as_it_was(tmp_path):
    db = a_store(tmp_path / "r.sqlite", row())
    store.check_writable(db)
    # The plan runs the check in --check and with submit=false too: nothing may change.
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT value FROM meta WHERE key = 'write_checked_at'").fetchone() is None
    assert conn.execute("SELECT count(*) FROM runs").fetchone() == (1,)


def test_an_existing_store_that_cannot_take_a_write_is_refused(small_tmpfs):
    folder = small_tmpfs("1m")
    db = a_store(folder / "r.sqlite", row())
    subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    with pytest.raises(store.StoreError) as refused:
        store.check_writable(db, need=0)
    assert str(refused.value).startswith(f"results_db={db}: "), str(refused.value)
    assert "use a path in a folder you can write" in str(refused.value), str(refused.value)


def test_an_empty_file_is_a_new_store(tmp_path):
    db = tmp_path / "r.sqlite"
    db.touch()
    store.check_writable(db)


# --- item 3: errors name the variable and the path --------------------------------------


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda p: p.write_text("gpus,images_per_sec\n1,40\n" * 100),
            "not an SQLite database (file is not a database)",
        ),
        (truncated_store, "the database is damaged"),
        (
            lambda p: sqlite3.connect(p).execute("CREATE TABLE photos (x)"),
            "an SQLite database that holds tables photos but no results store",
        ),
        (
            lambda p: (
                a_store(p),
                sqlite3.connect(p, isolation_level=None).execute(
                    "UPDATE meta SET value = '99' WHERE key = 'schema_version'"
                ),
            ),
            "a store of schema 99, newer than this dtfbench knows",
        ),
    ],
)
def test_a_bad_store_is_refused_naming_the_variable_and_the_path(tmp_path, make, message):
    db = tmp_path / "r.sqlite"
    make(db)
    with pytest.raises(store.StoreError) as refused:
        store.check_writable(db)
    assert str(refused.value).startswith(f"results_db={db}: "), str(refused.value)
    assert message in str(refused.value)


# --- item 4: paths are paths -------------------------------------------------------------


@pytest.mark.parametrize("folder", ["run#1", "what?mode=rw", "100%", "two words", "résultats-数据", "a#b?c%20d é"])
def test_completed_run_ids_reads_any_path_read_only(tmp_path, folder):
    db = tmp_path / folder / "r.sqlite"
    db.parent.mkdir()
    request = {"gpus": 1, "num_ps": 1, "repetitions": 2, "sweep_id": "s", "results_db": str(db)}
    first = plan_sweep(request, HOSTS)
    done_id, failed_id = (r["run_id"] for r in first["runs"])
    a_store(db, row(run_id=done_id), row(run_id=failed_id, status="failed", reason="x"))
    assert store.completed_run_ids(db, "s") == {done_id}
    assert store.recorded_run_ids(db, "s") == {done_id, failed_id}
    # The plan resumes it: the done run is skipped (its id found through the quoted path).
    assert [r["done"] for r in plan_sweep(request, HOSTS)["runs"]] == [True, False]
    # No stray file (for run#1, an unquoted URI made SQLite create `run`), and no -shm or empty -wal
    # left by the readers (issue #56): only the store.
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted([folder, "r.sqlite"])


# --- item 5: readers never write or crash -------------------------------------------------

READERS = [("report", "table", "--db"), ("store", "export", "--db")]


@pytest.mark.parametrize("command, action, flag", READERS)
@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p.write_text("not a database\n" * 300), "not an SQLite database"),
        (truncated_store, "the database is damaged"),
        (lambda p: p.touch(), "an empty file, not a results store"),
        (lambda p: p.mkdir(), "a folder, not a results store"),
    ],
)
def test_a_reader_of_a_bad_store_says_so_in_one_line_and_changes_nothing(
    tmp_path, command, action, flag, make, message
):
    db = tmp_path / "r.sqlite"
    make(db)
    before = db.stat()
    line = one_line_error(cli(command, action, flag, str(db)))
    assert str(db) in line and message in line, line
    after = db.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)  # a 0-byte file stays 0 bytes
    # Nothing else but the WAL files SQLite may open beside a store of WAL mode.
    assert {p.name for p in tmp_path.iterdir()} <= {"r.sqlite", "r.sqlite-wal", "r.sqlite-shm"}


@pytest.mark.parametrize("command, action, flag", READERS)
def test_readers_agree_on_an_empty_store(tmp_path, command, action, flag):
    db = a_store(tmp_path / "r.sqlite")
    line = one_line_error(cli(command, action, flag, str(db)))
    assert line.endswith(f"no runs in {db}"), line


def test_a_reader_of_an_older_store_leaves_it_as_it_was(tmp_path):
    # A schema-1 store (no workload or GPU columns), opened by a report: read-only, the new
    # columns come back empty, the file keeps its schema.
    db = tmp_path / "r.sqlite"
    conn = sqlite3.connect(db)
    conn.execute(
        "CREATE TABLE runs (id INTEGER PRIMARY KEY, run_id TEXT, sweep_id TEXT, system TEXT, gpus INTEGER,"
        " num_workers INTEGER, num_ps INTEGER, variable_update TEXT, data TEXT, model TEXT, batch_size INTEGER,"
        " repetition INTEGER, images_per_sec REAL, status TEXT, reason TEXT)"
    )
    conn.execute(
        "INSERT INTO runs (run_id, sweep_id, system, gpus, num_workers, num_ps, variable_update, data, model,"
        " batch_size, repetition, images_per_sec, status) VALUES"
        " ('o-1', 'o', 'local', 1, 1, 1, 'parameter_server', 'synthetic', 'small_cnn', 32, 1, 50.0, 'ok')"
    )
    conn.commit()
    conn.close()
    before = db.read_bytes()
    done = cli("report", "table", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert "50.00" in done.stdout
    exported = cli("store", "export", "--db", str(db), "--format", "json")
    assert json.loads(exported.stdout)[0]["workload"] is None
    assert db.read_bytes() == before


# --- item 2: a write that fails mid-sweep keeps the run ------------------------------------


def record_payload(db: Path) -> dict:
    return {
        "run": {
            "run_id": "full-1-cafecafe",
            "gpus": 1,
            "num_ps": 1,
            "variable_update": "parameter_server",
            "data": "synthetic",
            "repetition": 1,
            "model": "trivial",
            "batch_size": 8,
        },
        "sweep_id": "full",
        "system": "local",
        "results_db": str(db),
        "layout": {"num_workers": 1, "hosts_used": ["localhost"]},
        "hosts": {
            "localhost": {
                "failure": "",
                "workers": [{"result": {"task_index": 0, "status": "ok", "images_per_sec": 12.5}}],
            }
        },
    }


def test_a_run_the_full_store_refuses_is_kept_beside_it(small_tmpfs):
    disk = small_tmpfs("2m")
    db = disk / "results.sqlite"
    store.check_writable(db)  # the plan's check passes: the disk has room
    fill(disk, leave=12 * 1024)  # then the disk fills up during the run
    done = cli("record", stdin=json.dumps(record_payload(db)))
    assert done.returncode == 3, (done.stdout, done.stderr)
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line, line
    kept = disk / "results.sqlite.unrecorded-full-1-cafecafe.json"
    assert f"run full-1-cafecafe finished but was not recorded: results_db={db}: the disk is full" in line, line
    assert f"its result is kept in {kept}" in line and "resume it with -e sweep_id=full" in line, line
    saved = json.loads(kept.read_text())
    assert saved["run_id"] == "full-1-cafecafe" and saved["images_per_sec"] == 12.5
    # Room again: the kept run goes into the store with the command the message gives.
    (disk / "filler").unlink()
    added = cli("store", "add", "--db", str(db), "--file", str(kept))
    assert added.returncode == 0, added.stderr
    assert [r["run_id"] for r in store.runs(store.connect(db))] == ["full-1-cafecafe"]


def test_a_store_gone_mid_sweep_is_not_made_again(tmp_path):
    """Issue #56, case 4: the store's folder removed during a sweep. Made again empty, it would hide
    the runs that went with it; the record fails instead, keeping the run, and says what happened."""
    db = tmp_path / "store" / "results.sqlite"
    payload = dict(record_payload(db), store_expected=True)
    done = cli("record", stdin=json.dumps(payload))
    assert done.returncode == 3, (done.stdout, done.stderr)
    line = " ".join(done.stderr.split())
    assert f"results_db={db}: the store is gone: it was there when the sweep started" in line
    assert "restore it from a copy, or give results_db a new path" in line and "resume it with -e sweep_id=full" in line
    assert not db.exists() and (db.parent / "results.sqlite.unrecorded-full-1-cafecafe.json").is_file()
    # A sweep's first record makes its store, as before.
    assert cli("record", stdin=json.dumps(record_payload(db))).returncode == 0 and db.is_file()


def test_store_add_takes_a_finished_run_as_record_did(tmp_path):
    """Issue #54: one way into the store. `store add` tells a finished run (the playbook's payload,
    the interrupt watchdog's) from a prepared record by its keys, and answers and fails as
    `dtfbench record` did; `record` stays, the same command under its former name."""
    db = tmp_path / "store" / "results.sqlite"
    gone = dict(record_payload(db), store_expected=True)
    by_record, by_store = cli("record", stdin=json.dumps(gone)), cli("store", "add", stdin=json.dumps(gone))
    assert by_store.returncode == by_record.returncode == 3, (by_store.stdout, by_store.stderr)
    assert by_store.stderr == by_record.stderr and "the store is gone" in by_store.stderr
    (tmp_path / "run.json").write_text(json.dumps(record_payload(db)))
    done = cli("store", "add", "--file", str(tmp_path / "run.json"))
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["run_id"] == "full-1-cafecafe" and answer["status"] == "ok" and answer["images_per_sec"] == 12.5
    # --db, given, wins over the run's results_db; a refused run is refused in record's words.
    other = tmp_path / "other.sqlite"
    assert cli("store", "add", "--db", str(other), stdin=json.dumps(record_payload(db))).returncode == 0
    assert [r["run_id"] for r in store.runs(store.connect(other))] == ["full-1-cafecafe"]
    refused = cli("store", "add", stdin=json.dumps(dict(record_payload(db), layout={})))
    assert refused.returncode == 2 and refused.stderr.startswith("dtfbench record: error: cannot record the run: ")
    # A prepared record (what a refused run keeps) is the other kind, with store's answer.
    kept = dict(row(run_id="kept-1"), sweep_id="full")
    added = cli("store", "add", "--db", str(db), stdin=json.dumps(kept))
    assert added.returncode == 0 and json.loads(added.stdout) == {"id": 2, "run_id": "kept-1", "db": str(db)}


# --- item 6: sweeps mean what they say (the plan; the playbook in tests/integration) --------


def test_repeated_values_are_folded_with_a_note():
    plan = planner.build_plan(
        {"gpus": "1,1,2", "model": "trivial,TRIVIAL", "num_ps": "1,1", "repetitions": 2, "sweep_id": "s"}, HOSTS
    )
    assert [(r["gpus"], r["model"], r["repetition"]) for r in plan["runs"]] == [
        (1, "trivial", 1),
        (1, "trivial", 2),
        (2, "trivial", 1),
        (2, "trivial", 2),
    ]
    assert len({r["run_id"] for r in plan["runs"]}) == 4
    assert plan["notes"] == [
        "gpus=1,1,2 repeats 1: each configuration runs once per repetition (raise repetitions to run it more often)",
        "model=trivial,trivial repeats trivial: each configuration runs once per repetition "
        "(raise repetitions to run it more often)",
        "num_ps=1,1 repeats 1: each configuration runs once per repetition (raise repetitions to run it more often)",
    ]


def record_sweep(db: Path, request: dict) -> dict:
    plan = plan_sweep(dict(request, results_db=str(db)), HOSTS)
    conn = store.connect(db)
    store.add_run(conn, row(run_id=plan["runs"][0]["run_id"], sweep_id=plan["sweep_id"]), plan["sweep_config"])
    conn.close()
    return plan


def test_a_resume_of_another_configuration_is_refused_showing_both(tmp_path):
    db = tmp_path / "r.sqlite"
    request = {"gpus": "1,2", "model": "resnet50", "num_ps": 1, "repetitions": 1, "sweep_id": "s"}
    record_sweep(db, request)
    same = plan_sweep(dict(request, gpus="2,1", results_db=str(db)), HOSTS)  # the same sweep resumes
    assert same["pending_runs"] == 1
    with pytest.raises(planner.PlanError) as refused:
        plan_sweep(dict(request, model="alexnet", results_db=str(db)), HOSTS)
    message = str(refused.value)
    assert message.startswith("sweep_id=s is a sweep of another configuration (it differs in model): "), message
    assert "recorded: batch_size=32 data=synthetic" in message and "model=resnet50" in message
    assert "asked now: batch_size=32" in message and "model=alexnet" in message
    assert "-e sweep_extend=true" in message
    # An extension (more GPU counts) is another configuration too.
    with pytest.raises(planner.PlanError, match=r"\(it differs in gpus\)"):
        plan_sweep(dict(request, gpus="1,2,4", results_db=str(db)), HOSTS)
    extended = plan_sweep(dict(request, model="alexnet", results_db=str(db), sweep_extend=True), HOSTS)
    assert extended["pending_runs"] == 2
    # Once a run of the extension is recorded, the extension is the sweep's configuration.
    conn = store.connect(db)
    store.add_run(conn, row(run_id=extended["runs"][0]["run_id"], model="alexnet"), extended["sweep_config"])
    conn.close()
    assert store.recorded_sweep_config(db, "s")["model"] == ["alexnet"]
    assert plan_sweep(dict(request, model="alexnet", results_db=str(db)), HOSTS)["pending_runs"] == 1


def test_a_sweep_recorded_without_its_configuration_is_checked_by_its_runs(tmp_path):
    # Stores written before configurations were recorded: a recorded run that is not one of the
    # plan's is another configuration.
    db = tmp_path / "r.sqlite"
    request = {"gpus": 1, "model": "resnet50", "num_ps": 1, "repetitions": 1, "sweep_id": "s"}
    plan = plan_sweep(request, HOSTS)
    a_store(db, row(run_id=plan["runs"][0]["run_id"]))
    assert plan_sweep(dict(request, results_db=str(db)), HOSTS)["pending_runs"] == 0
    with pytest.raises(planner.PlanError, match=f"recorded runs not in this one: {plan['runs'][0]['run_id']}"):
        plan_sweep(dict(request, model="alexnet", results_db=str(db)), HOSTS)


def test_the_plan_checks_the_store_first(tmp_path):
    db = tmp_path / "r.sqlite"
    db.write_text("id,gpus\n")
    with pytest.raises(planner.PlanError, match=f"results_db={db}: not an SQLite database"):
        plan_sweep({"gpus": 1, "num_ps": 1, "sweep_id": "s", "results_db": str(db)}, HOSTS)


def test_a_check_only_look_at_a_new_store_makes_nothing(tmp_path):
    """ansible-playbook --check: the plan looks at the store without making its folder or a probe."""
    db = tmp_path / "new" / "deeper" / "results.sqlite"
    store.check_writable(db, create=False)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(store.StoreError, match="a folder, not a results store"):
        store.check_writable(tmp_path, create=False)
    (tmp_path / "file").write_text("x")
    with pytest.raises(store.StoreError, match="cannot create it under .*file .not a folder you can write"):
        store.check_writable(tmp_path / "file" / "results.sqlite", create=False)


def test_a_store_on_a_read_only_file_system_is_read(small_tmpfs):
    """Issue #56, case 9: a store copied to read-only media, without its -shm file, is read."""
    disk = small_tmpfs("4m")
    db = disk / "results.sqlite"
    conn = store.connect(db)
    store.add_run(conn, measured_row("ro-1"))
    conn.close()
    assert sorted(p.name for p in disk.iterdir()) == ["results.sqlite"]  # no -shm, no -wal left
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    assert [r["run_id"] for r in store.runs(store.open_readonly(db))] == ["ro-1"]
    assert store.completed_run_ids(db, "s") == {"ro-1"}  # a resume's look at it too
    done = cli("store", "export", "--db", str(db), "--format", "csv")
    assert done.returncode == 0 and "ro-1" in done.stdout, done.stderr
    assert sorted(p.name for p in disk.iterdir()) == ["results.sqlite"]


def test_a_value_with_a_space_is_named_whole():
    """Issue #56, case 10: `-e model="resnet 50"` was refused as model='resnet'."""
    with pytest.raises(planner.PlanError, match=r"model='resnet 50' is unknown; choose from inception3, resnet50"):
        planner.build_plan({"gpus": 1, "model": "resnet 50", "sweep_id": "s"}, HOSTS)
    assert planner.as_list("gpus", "1, 2,4") == ["1", "2", "4"] and planner.as_list("gpus", "[1, 2]") == ["1", "2"]
