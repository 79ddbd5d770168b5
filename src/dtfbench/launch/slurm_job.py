# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""One run's Slurm batch job, in one call: submit it once per run, wait for it, collect it; or cancel it.

A library for the slurm_job module (roles/slurm_cluster/library/slurm_job.py documents the
options and what they return): ``slurm_job(params, check_mode)`` returns the result or raises
``JobError``. Slurm's client commands (sbatch, scontrol, scancel) run on the login node; the
job's state is kept in ``<run_dir>/job.json``, so a second call for the same run returns the
recorded outcome instead of submitting again, and a cancel from another play (the interrupt
watchdog's) reaches the same cluster. While it waits, the call watches for the controller
going away and then cancels the job. Standard library only (shipped as module_utils).
"""

import json
import os
import re
import shutil
import subprocess
import time

from ..plan.layout import LayoutError, compute_layout, expand_nodelist
from . import nic_sampler
from .controller_watch import ControllerWatch

# The options of the slurm_job module (its DOCUMENTATION describes them).
ARGUMENT_SPEC = dict(
    run_dir=dict(type="path", required=True),
    state=dict(type="str", choices=["submitted", "cancelled"], default="submitted"),
    script=dict(type="path"),
    wait=dict(type="bool", default=True),
    poll_interval=dict(type="float", default=2.0),
    timeout=dict(type="float", default=86400),
    cancel_on_timeout=dict(type="bool", default=True),
    resubmit_failed=dict(type="bool", default=True),
    output_lines=dict(type="int", default=30),
    layout=dict(type="dict", default={}),
)

STATE_FILE = "job.json"
FINAL = {
    "COMPLETED",
    "FAILED",
    "TIMEOUT",
    "CANCELLED",
    "NODE_FAIL",
    "PREEMPTED",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "REVOKED",
    "SPECIAL_EXIT",
}
ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SUBMITTED"}
# The Slurm client environment a job was submitted with (SLURM_CONF: which cluster), kept in
# job.json so that a cancel from another play (the interrupt watchdog's) reaches the same one.
CLIENT_ENV_PREFIX = "SLURM_"
SLICE = 0.2  # seconds between two looks at the controller while waiting
FIELD = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:]*)=")


def parse_show_job(text):
    """`scontrol show job -o` (one line) -> {key: value}; values may hold spaces."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    fields = {}
    matches = list(FIELD.finditer(line))
    for k, match in enumerate(matches):
        end = matches[k + 1].start() if k + 1 < len(matches) else len(line)
        fields[match.group(1)] = line[match.end() : end].strip()
    return fields


def read_json(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.write("\n")
    os.replace(tmp, path)


def tail(path, lines):
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 65536))
            text = handle.read().decode(errors="replace")
    except OSError:
        return None
    return "\n".join(text.splitlines()[-lines:])


class JobError(Exception):
    """A slurm_job call that failed: the message, and the result fields (``result``) so far."""

    def __init__(self, msg, **result):
        Exception.__init__(self, msg)
        self.msg = msg
        self.result = result


def run_command(argv, cwd=None):
    """(rc, stdout, stderr) of `argv`, as AnsibleModule.run_command gives them."""
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    except OSError as error:
        return 127, "", str(error)
    return done.returncode, done.stdout, done.stderr


class SlurmJob:
    """One run's batch job, in one call: submit it (once per run_dir), wait for it, collect it;
    or cancel it.

    ``params``: the slurm_job module's options (ARGUMENT_SPEC, checked); ``check_mode``: change
    nothing; ``run_command(argv, cwd=None)`` -> (rc, out, err) and ``get_bin_path(name)`` -> path
    or None: the module's (by default the standard library's). ``run()`` returns the result
    or raises JobError.
    """

    def __init__(self, params, check_mode=False, run_command=run_command, get_bin_path=shutil.which):
        self.params = p = params
        self.check_mode = check_mode
        self.run_command = run_command
        self.get_bin_path = get_bin_path
        self.run_dir = p["run_dir"]
        self.script = p["script"] or os.path.join(self.run_dir, "job.sbatch")
        self.state_path = os.path.join(self.run_dir, STATE_FILE)
        self.record = read_json(self.state_path) or {}
        self.started = time.monotonic()
        self.last_error = ""
        self.watch = None

    # ---------------------------------------------------------------- scheduler
    def command(self, name):
        path = self.get_bin_path(name)
        if not path:
            raise JobError(
                "%s not found on this host: run the role on the cluster's login node "
                "(Slurm's client commands), or set submit=false to only write the scripts" % name
            )
        return path

    def submit(self):
        if not os.path.isfile(self.script):
            raise JobError("batch script %s does not exist" % self.script)
        argv = [self.command("sbatch"), "--parsable", self.script]
        rc, out, err = self.run_command(argv, cwd=self.run_dir)
        job_id = out.strip().split(";")[0].strip() if rc == 0 else ""
        if rc != 0 or not job_id.isdigit():
            raise JobError("sbatch refused the job (exit %d): %s" % (rc, (err or out).strip()), argv=argv)
        self.record = {
            "job_id": job_id,
            "state": "SUBMITTED",
            "script": self.script,
            "submitted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "client_env": dict((k, v) for k, v in os.environ.items() if k.startswith(CLIENT_ENV_PREFIX)),
        }
        write_json(self.state_path, self.record)
        return job_id

    def show(self, job_id):
        """The job's fields, None when the controller no longer knows it, {} on an error."""
        rc, out, err = self.run_command([self.command("scontrol"), "--oneliner", "show", "job", job_id])
        if rc == 0 and out.strip():
            return parse_show_job(out)
        text = (err or out).strip()
        if "Invalid job id" in text:
            return None
        self.last_error = "scontrol show job %s (exit %d): %s" % (job_id, rc, text)
        return {}

    def failed_nodes(self, nodelist, output=None):
        """The job's nodes that failed, as 'node2 down (Not responding)': those Slurm has down, drained
        or not responding now, with its reason (sinfo), and, for a NODE_FAIL, those srun named in the
        job's `output` ("Node failure on node2"), which may be back by now. "" where none is known."""
        bad = {}
        try:
            argv = [self.command("sinfo"), "--Node", "--noheader", "--nodes=%s" % nodelist, "--format=%N|%T|%E"]
            rc, out, _ = self.run_command(argv)
        except JobError:
            rc, out = 1, ""
        for line in out.splitlines() if rc == 0 else []:
            parts = line.strip().split("|", 2)
            if len(parts) == 3 and any(w in parts[1].lower() for w in ("down", "drain", "fail", "not_responding")):
                reason = parts[2].strip()
                shown = " (%s)" % reason if reason not in ("", "none") else ""
                bad[parts[0]] = "%s %s%s" % (parts[0], parts[1].lower(), shown)
        if output and os.path.isfile(output):
            with open(output, errors="replace") as handle:
                for name in re.findall(r"Node failure on (\S+)", handle.read()):
                    bad.setdefault(name, "%s (srun: node failure)" % name)
        return ", ".join(bad[name] for name in sorted(bad))

    def cancel(self, job_id):
        self.run_command([self.command("scancel"), job_id])

    # ---------------------------------------------------------------- waiting
    def wait(self, job_id, timeout, interval):
        """Poll until a final state (at most `timeout` s since this call began); returns
        (fields, timed_out). A job the controller forgot is judged by its exit status."""
        return self.poll(job_id, self.started + timeout, interval, self.forgotten)

    def poll(self, job_id, deadline, interval, when_forgotten):
        """scontrol show job every `interval` s until a final state or `deadline`
        (monotonic): (fields, timed_out); a forgotten job gives when_forgotten(job_id, last)."""
        fields = {}
        while True:
            shown = self.show(job_id)
            if shown is None:
                return when_forgotten(job_id, fields), False
            if shown:
                fields = shown
                if fields.get("JobState") in FINAL:
                    return fields, False
            if time.monotonic() >= deadline:
                return fields, True
            self.pause(max(0.05, min(interval, deadline - time.monotonic())))

    def pause(self, seconds):
        """Sleep, but look at the controller every SLICE: a controller gone cancels the job."""
        end = time.monotonic() + seconds
        while True:
            if self.watch is not None and self.watch.gone():
                self.interrupted(self.watch.why)
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(SLICE, left))

    def interrupted(self, why):
        """The controller is gone: cancel the job, wait for it to end, fail saying so."""
        self.watch = None
        job_id = self.record.get("job_id")
        self.cancel(job_id)
        # Noted before waiting: a module killed meanwhile still leaves the run marked cancelled
        # (a resumed sweep submits it anew).
        failure = "interrupted: %s; cancelled Slurm job %s" % (why, job_id)
        self.record.update(state="CANCELLED", fields={"JobState": "CANCELLED"}, failure=failure, interrupted=why)
        write_json(self.state_path, self.record)
        state = self.wait_ended(job_id).get("JobState", "UNKNOWN")
        if state != "CANCELLED":
            failure += " (%s)" % state
            self.record.update(state=state, fields={"JobState": state}, failure=failure)
            write_json(self.state_path, self.record)
        raise JobError(failure, changed=True, job_id=job_id, state=state, cancelled=True, run_dir=self.run_dir)

    def cancel_and_wait(self, job_id, timeout=60.0):
        """scancel, then wait until the scheduler has ended the job."""
        self.cancel(job_id)
        return self.wait_ended(job_id, timeout)

    def wait_ended(self, job_id, timeout=60.0):
        """Poll until the cancelled job is in a final state or forgotten (at most `timeout` s)."""
        fields, _ = self.poll(
            job_id, time.monotonic() + timeout, SLICE, lambda _job_id, last: dict(last, JobState="CANCELLED")
        )
        return fields

    def forgotten(self, job_id, last):
        """The controller purged the job: judge it by the exit status its script left."""
        fields = dict(last)
        code = None
        try:
            with open(os.path.join(self.job_dir(job_id), "exit_code")) as handle:
                code = int(handle.read().strip() or "1")
        except (OSError, ValueError):
            pass
        if code is None:
            fields.update(JobState="UNKNOWN", Reason="the scheduler no longer knows the job and it left no exit status")
        else:
            fields.update(JobState="COMPLETED" if code == 0 else "FAILED", ExitCode="%d:0" % code)
            fields.setdefault("Reason", "None")
        return fields

    # ---------------------------------------------------------------- results
    def job_dir(self, job_id):
        return os.path.join(self.run_dir, "job-%s" % job_id)

    def layout(self, job_id, nodelist):
        found = read_json(os.path.join(self.job_dir(job_id), "layout.json"))
        if isinstance(found, dict) and "num_workers" in found:
            return found
        request = self.params["layout"] or {}
        if not request or not nodelist or nodelist == "(null)":
            return None
        try:
            hosts = [
                {
                    "name": n,
                    "address": n,
                    "devices": request.get("devices_per_node", 1),
                    "device_type": request.get("device_type", "gpu"),
                }
                for n in expand_nodelist(nodelist)
            ]
            return compute_layout(
                hosts,
                request.get("gpus", 1),
                request.get("num_ps", 0),
                devices_per_worker=request.get("devices_per_worker", 1),
                ps_on_worker_nodes=bool(request.get("ps_on_worker_nodes", True)),
                ps_port_base=request.get("ps_port_base", 2230),
                worker_port_base=request.get("worker_port_base", 2220),
            )
        except LayoutError:
            return None

    def workers(self, job_id, layout, nodelist):
        if not layout:
            return []
        found = []
        for index in range(int(layout.get("num_workers") or 0)):
            path = os.path.join(self.job_dir(job_id), "worker-%d.json" % index)
            result = read_json(path)
            if isinstance(result, dict):
                result["slurm_job_id"] = job_id
                result["slurm_nodelist"] = nodelist
                found.append({"task_index": index, "result": result, "result_file": path})
        return found

    def nic(self, job_id, layout, workers):
        """Every node's NIC figures over the span of the workers' measured steps (first to last)."""
        if not layout:
            return {}
        results = {w["task_index"]: w["result"] for w in workers}
        window = nic_sampler.measured_window([results.get(i) for i in range(int(layout.get("num_workers") or 0))])
        return {
            node: nic_sampler.host_figures(os.path.join(self.job_dir(job_id), "nic-%s.samples" % node), window)
            for node in layout.get("hosts_used") or sorted(layout.get("hosts") or {})
        }

    def _per_node(self, job_id, layout, name):
        """{node: its <name>-<node>.json in the job's folder}, for the nodes that wrote one."""
        found = {}
        for node in (layout or {}).get("hosts_used") or sorted((layout or {}).get("hosts") or {}):
            written = read_json(os.path.join(self.job_dir(job_id), "%s-%s.json" % (name, node)))
            if isinstance(written, dict):
                found[node] = written
        return found

    def data_read(self, job_id, layout):
        """Every node's read test ({node: dtfbench read_throughput's JSON}) where the job ran one."""
        return self._per_node(job_id, layout, "data_read")

    def staging(self, job_id, layout):
        """Every node's staging of the dataset ({node: dtfbench_stage_data.py's JSON}) where the job staged."""
        return self._per_node(job_id, layout, "staging")

    def failure(self, job_id, fields, output, timed_out, timeout):
        state = fields.get("JobState", "UNKNOWN")
        if state == "COMPLETED" and not timed_out:
            return ""
        reason = fields.get("Reason", "")
        if timed_out:
            text = "timed out after %ds waiting for Slurm job %s (%s)%s" % (
                timeout,
                job_id,
                state,
                "; cancelled" if self.params["cancel_on_timeout"] else "",
            )
        else:
            text = "Slurm job %s %s" % (job_id, state)
            if reason and reason not in ("None", "(null)"):
                text += " (%s)" % reason
        if fields.get("ExitCode"):
            text += ", exit code %s" % fields["ExitCode"]
        if fields.get("NodeList") and fields["NodeList"] != "(null)":
            text += " on %s" % fields["NodeList"]
            down = self.failed_nodes(fields["NodeList"], output if state == "NODE_FAIL" else None)
            if down:
                text += "; failed node: %s" % down
        end = tail(output, self.params["output_lines"]) if output else None
        if end:
            text += "; end of %s:\n%s" % (output, end)
        elif output:
            text += "; no output in %s" % output
        return text

    # ---------------------------------------------------------------- main
    def run(self):
        p = self.params
        if p["state"] == "cancelled":
            return self.cancel_recorded()
        job_id = self.record.get("job_id")
        state = self.record.get("state")
        submitted = False
        needs_submit = not job_id or (state in FINAL and state != "COMPLETED" and p["resubmit_failed"])
        if needs_submit:
            if self.check_mode:
                return dict(
                    changed=True, submitted=True, job_id="", state="NOT_SUBMITTED", msg="would submit %s" % self.script
                )
            job_id = self.submit()
            submitted = True

        if not p["wait"]:
            fields = self.show(job_id) or {}
            return self.finish(job_id, fields, submitted, collect=False)

        if self.record.get("state") in FINAL and not submitted:
            fields = self.record.get("fields") or {"JobState": self.record["state"]}
            timed_out = bool(self.record.get("timed_out"))
        else:
            self.watch = ControllerWatch()
            fields, timed_out = self.wait(job_id, p["timeout"], p["poll_interval"])
            self.watch = None
            if timed_out:
                if not fields and self.last_error:
                    raise JobError(
                        "cannot follow Slurm job %s: %s" % (job_id, self.last_error), job_id=job_id, submitted=submitted
                    )
                if p["cancel_on_timeout"]:
                    fields = self.cancel_and_wait(job_id) or fields
                fields = dict(fields)
                fields.setdefault("JobState", "UNKNOWN")
        return self.finish(job_id, fields, submitted, collect=True, timed_out=timed_out)

    def cancel_recorded(self):
        """state=cancelled: end the job run_dir submitted, if the scheduler still runs it."""
        job_id = self.record.get("job_id")
        result = dict(
            changed=False,
            cancelled=False,
            job_id=job_id or "",
            run_dir=self.run_dir,
            state=self.record.get("state", ""),
        )
        if not job_id:
            return dict(result, msg="no job was submitted from %s" % self.run_dir)
        # The scheduler this job went to, whatever environment this play has.
        os.environ.update(self.record.get("client_env") or {})
        shown = self.show(job_id)
        state = (shown or {}).get("JobState", "") if shown is not None else "gone"
        if shown is None or state not in ACTIVE:
            if shown == {} and self.last_error:
                raise JobError("cannot cancel Slurm job %s: %s" % (job_id, self.last_error), **result)
            result["state"] = state or result["state"]
            return dict(result, msg="Slurm job %s has ended (%s): nothing to cancel" % (job_id, result["state"]))
        if self.check_mode:
            result.update(changed=True, cancelled=True)
            return dict(result, msg="would cancel Slurm job %s (%s)" % (job_id, state))
        fields = self.cancel_and_wait(job_id)
        final = fields.get("JobState", "UNKNOWN")
        self.record.update(
            state=final, fields={"JobState": final}, failure=self.record.get("failure") or "cancelled (state=cancelled)"
        )
        write_json(self.state_path, self.record)
        result.update(changed=True, cancelled=True, state=final)
        return dict(result, msg="cancelled Slurm job %s (%s, was %s)" % (job_id, final, state))

    def finish(self, job_id, fields, submitted, collect, timed_out=False):
        p = self.params
        state = fields.get("JobState", "UNKNOWN")
        nodelist = fields.get("NodeList", "")
        nodelist = "" if nodelist in ("(null)", "None") else nodelist
        output = fields.get("StdOut") or os.path.join(self.run_dir, "job-%s.out" % job_id)
        result = dict(
            changed=submitted,
            submitted=submitted,
            job_id=job_id,
            state=state,
            exit_code=fields.get("ExitCode", ""),
            reason=fields.get("Reason", ""),
            nodelist=nodelist,
            run_dir=self.run_dir,
            job_dir=self.job_dir(job_id),
            output=output,
            elapsed=round(time.monotonic() - self.started, 3),
        )
        try:
            result["nodes"] = expand_nodelist(nodelist) if nodelist else []
        except LayoutError:
            result["nodes"] = []
        if collect:
            layout = self.layout(job_id, nodelist)
            workers = self.workers(job_id, layout, nodelist)
            staging = self.staging(job_id, layout)
            failure = self.failure(job_id, fields, output, timed_out, p["timeout"])
            staged_wrong = ["%s: %s" % (node, s["error"]) for node, s in sorted(staging.items()) if s.get("error")]
            if failure and staged_wrong:  # the cause first: the job's state only says that it failed
                failure = "the staging of the dataset failed on %s; %s" % ("; ".join(staged_wrong), failure)
            result.update(
                layout=layout,
                workers=workers,
                nic=self.nic(job_id, layout, workers),
                data_read=self.data_read(job_id, layout),
                staging=staging,
                failure=failure,
            )
            if state in FINAL:
                # A final state is remembered: the next call returns it instead of waiting
                # (and submits anew only for a failure, with resubmit_failed).
                keep = {
                    k: fields[k]
                    for k in ("JobState", "Reason", "ExitCode", "NodeList", "StdOut", "StartTime", "EndTime", "RunTime")
                    if k in fields
                }
                self.record.update(state=state, fields=keep, timed_out=timed_out, failure=result["failure"])
                write_json(self.state_path, self.record)
        else:
            result.update(layout=None, workers=[], nic={}, data_read={}, staging={}, failure="")
        return result


def slurm_job(params, check_mode=False, run_command=run_command, get_bin_path=shutil.which):
    """The result of one slurm_job call with `params` (ARGUMENT_SPEC's options, checked), or JobError."""
    if params["poll_interval"] <= 0 or params["timeout"] <= 0:
        raise JobError("poll_interval and timeout must be > 0")
    if not os.path.isdir(params["run_dir"]):
        if params["state"] == "cancelled":
            return dict(
                changed=False,
                cancelled=False,
                job_id="",
                state="",
                run_dir=params["run_dir"],
                msg="no job was submitted from %s (no such directory)" % params["run_dir"],
            )
        raise JobError("run_dir %s does not exist" % params["run_dir"])
    return SlurmJob(params, check_mode, run_command, get_bin_path).run()
