"""slurm_job's logic (dtfbench.launch.slurm_job) without Ansible: what it reads from scontrol,
its refusals before anything is submitted, and a recorded job's outcome collected from the
files its job left. Submitting, waiting and cancelling on a real scheduler: tests/slurm and
tests/integration/test_slurm_*.py."""

import json
import os

import pytest

from dtfbench.launch import slurm_job as sj


def params(run_dir, **overrides):
    given = {name: spec.get("default") for name, spec in sj.ARGUMENT_SPEC.items()}
    given.update(run_dir=str(run_dir), **overrides)
    return given


@pytest.mark.parametrize(
    "line, expected",
    [
        (
            "JobId=12 JobName=dtfbench-x UserId=root(0) JobState=FAILED Reason=NonZeroExitCode Dependency=(null) "
            "ExitCode=2:0 NodeList=nid0[0001-0003] StdOut=/scratch/a b/job-12.out Power=",
            {
                "JobId": "12",
                "JobState": "FAILED",
                "Reason": "NonZeroExitCode",
                "ExitCode": "2:0",
                "NodeList": "nid0[0001-0003]",
                "StdOut": "/scratch/a b/job-12.out",
                "Power": "",
            },
        ),
        (
            "JobId=7 JobState=PENDING Reason=Resources NodeList=(null)",
            {"JobId": "7", "JobState": "PENDING", "Reason": "Resources", "NodeList": "(null)"},
        ),
    ],
)
def test_scontrol_show_job_one_line(line, expected):
    fields = sj.parse_show_job(line + "\n")
    assert {k: fields[k] for k in expected} == expected


def test_bad_input_is_one_error_before_anything_is_submitted(tmp_path):
    with pytest.raises(sj.JobError, match="poll_interval and timeout must be > 0"):
        sj.slurm_job(params(tmp_path, poll_interval=0))
    with pytest.raises(sj.JobError, match="run_dir .*/nowhere does not exist"):
        sj.slurm_job(params(tmp_path / "nowhere"))
    with pytest.raises(sj.JobError, match="batch script .*job.sbatch does not exist"):
        sj.slurm_job(params(tmp_path))
    assert not (tmp_path / sj.STATE_FILE).exists()


def test_without_slurm_commands_it_says_where_to_run(tmp_path, monkeypatch):
    (tmp_path / "job.sbatch").write_text("#!/bin/bash\ntrue\n")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(sj.JobError, match="sbatch not found on this host: run the role on the cluster's login node"):
        sj.slurm_job(params(tmp_path))


def test_check_mode_submits_nothing(tmp_path):
    (tmp_path / "job.sbatch").write_text("#!/bin/bash\ntrue\n")
    result = sj.slurm_job(params(tmp_path), check_mode=True)
    assert result == dict(
        changed=True, submitted=True, job_id="", state="NOT_SUBMITTED", msg=f"would submit {tmp_path}/job.sbatch"
    )
    assert not (tmp_path / sj.STATE_FILE).exists()


def test_cancelling_where_nothing_was_submitted_is_no_change(tmp_path):
    gone = sj.slurm_job(params(tmp_path / "nowhere", state="cancelled"))
    assert gone["changed"] is False and "no such directory" in gone["msg"]
    empty = sj.slurm_job(params(tmp_path, state="cancelled"))
    assert empty["changed"] is False and empty["msg"] == f"no job was submitted from {tmp_path}"


def test_a_recorded_job_is_collected_from_its_files_without_asking_the_scheduler(tmp_path, monkeypatch):
    # A second call for the same run: the recorded final state, the layout and the workers'
    # results its job wrote; no Slurm command is needed (none is on PATH).
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    job_dir = tmp_path / "job-12"
    job_dir.mkdir()
    layout = {"num_workers": 2, "num_ps": 1, "cluster_spec": {}}
    (job_dir / "layout.json").write_text(json.dumps(layout))
    (job_dir / "worker-0.json").write_text(json.dumps({"status": "ok", "task_index": 0}))
    (tmp_path / "job-12.out").write_text("".join(f"line {i}\n" for i in range(50)))
    fields = {"JobState": "FAILED", "Reason": "NonZeroExitCode", "ExitCode": "1:0", "NodeList": "nid0[0001-0002]"}
    (tmp_path / sj.STATE_FILE).write_text(json.dumps({"job_id": "12", "state": "FAILED", "fields": fields}))

    result = sj.slurm_job(params(tmp_path, resubmit_failed=False, output_lines=3))
    assert result["changed"] is False and result["submitted"] is False
    assert (result["job_id"], result["state"], result["nodes"]) == ("12", "FAILED", ["nid00001", "nid00002"])
    assert result["layout"] == layout
    assert result["workers"] == [
        {
            "task_index": 0,
            "result": {"status": "ok", "task_index": 0, "slurm_job_id": "12", "slurm_nodelist": "nid0[0001-0002]"},
            "result_file": os.path.join(str(job_dir), "worker-0.json"),
        }
    ]
    assert result["failure"] == (
        f"Slurm job 12 FAILED (NonZeroExitCode), exit code 1:0 on nid0[0001-0002]; end of {tmp_path}/job-12.out:\n"
        "line 47\nline 48\nline 49"
    )


def test_a_job_the_scheduler_forgot_is_judged_by_its_exit_status(tmp_path):
    job = sj.SlurmJob(params(tmp_path))
    assert job.forgotten("5", {"NodeList": "n1"})["JobState"] == "UNKNOWN"
    (tmp_path / "job-5").mkdir()
    (tmp_path / "job-5" / "exit_code").write_text("0\n")
    assert job.forgotten("5", {})["JobState"] == "COMPLETED"
    (tmp_path / "job-5" / "exit_code").write_text("3\n")
    assert job.forgotten("5", {}) == {"JobState": "FAILED", "ExitCode": "3:0", "Reason": "None"}
