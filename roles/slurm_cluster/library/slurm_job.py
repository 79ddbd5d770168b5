#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_job
short_description: Submit one dtfbench batch job (once per run directory), wait for it, collect its results
description:
  - A run directory names one job. The first call submits O(script) with C(sbatch --parsable)
    and records the job id in C(job.json) of O(run_dir); a later call finds it there and does
    not submit again, so running twice changes nothing. A job that ended in a failure state is
    submitted anew when O(resubmit_failed) is true (a resumed sweep retries failed runs).
  - Waits by polling C(scontrol show job) every O(poll_interval) seconds (no accounting
    database needed) until the job is in a final state, for at most O(timeout) seconds (queue
    time included); then cancels the job (O(cancel_on_timeout)). A job the controller has
    already forgotten (older than C(MinJobAge)) is judged by the exit status its batch script
    left in the job directory.
  - Collects what the job wrote into its directory C(<run_dir>/job-<id>/) -
    C(layout.json) (the layout the job computed on its allocation with dtfbench's layout code, C(dtfbench_layout.py))
    and each worker's C(worker-<i>.json) - and adds the job id and node list to every
    worker result.
  - Fails only when the scheduler cannot be used (sbatch refuses the job, scontrol keeps
    failing); a job that fails is a success of this module with RV(failure) saying why.
  - While it waits, it watches its controller. On Ctrl-C or SIGTERM passed on to the module, a
    SIGHUP, or the hang-up of its standard output (the SSH channel of a controller that went
    away), it cancels the job (C(scancel)), waits for the job to leave the queue and fails
    with C(interrupted), so that an interrupted sweep never leaves a job training.
  - O(state=cancelled) cancels the job that O(run_dir) submitted, if it is still queued or
    running, with the Slurm client environment (C(SLURM_*)) it was submitted with; the
    watchdog of an interrupted ansible-playbook (C(playbooks/stop-interrupted.yml)) uses it.
version_added: "0.1.0"
author: dtfbench developers
options:
  run_dir:
    description: The run's directory (shared with the compute nodes); holds the script and C(job.json).
    type: path
    required: true
  state:
    description:
      - C(submitted) submits the run's job once and, with O(wait), waits for it and collects its results.
      - C(cancelled) cancels the run's job if it is still queued or running and waits (at most 60 s)
        for the scheduler to end it; nothing to cancel (no job, or it has ended) changes nothing.
    type: str
    choices: [submitted, cancelled]
    default: submitted
  script:
    description: The batch script; default C(<run_dir>/job.sbatch).
    type: path
  wait:
    description: Wait for the job to end and collect its results. False returns after submitting.
    type: bool
    default: true
  poll_interval:
    description: Seconds between two C(scontrol show job).
    type: float
    default: 2.0
  timeout:
    description: Seconds to wait for the job to end, its time in the queue included.
    type: float
    default: 86400
  cancel_on_timeout:
    description: Cancel (C(scancel)) a job still queued or running at O(timeout).
    type: bool
    default: true
  resubmit_failed:
    description: Submit anew when the run's last job ended in a failure state; false returns its outcome again.
    type: bool
    default: true
  output_lines:
    description: Lines of the end of the job's output quoted in RV(failure).
    type: int
    default: 30
  layout:
    description:
      - The layout request (C(gpus), C(num_ps), C(devices_per_worker), C(ps_on_worker_nodes),
        C(ps_port_base), C(worker_port_base), C(devices_per_node), C(device_type)), used to
        compute the layout on the job's nodes with the same code when the job wrote none
        (it failed before).
    type: dict
    default: {}
notes:
  - Supports check mode (reports whether it would submit; submits nothing).
"""

EXAMPLES = r"""
- name: Submit the run's job and wait for it
  slurm_job:
    run_dir: /scratch/snx3000/me/dtfbench/runs/sweep1-01
    poll_interval: 2
    timeout: 7200
  register: job

- name: Cancel the run's job, if it still runs
  slurm_job:
    run_dir: /scratch/snx3000/me/dtfbench/runs/sweep1-01
    state: cancelled
"""

RETURN = r"""
job_id:
  description: The Slurm job id (empty with O(state=cancelled) when the run directory submitted none).
  returned: success
  type: str
  sample: "4711"
cancelled:
  description: Whether this call cancelled the job (O(state=cancelled)).
  returned: success
  type: bool
submitted:
  description: Whether this call submitted the job.
  returned: success
  type: bool
state:
  description: The job's state (C(COMPLETED), C(FAILED), C(TIMEOUT), C(CANCELLED), ...; C(PENDING)/C(RUNNING) with O(wait=false)).
  returned: success
  type: str
  sample: COMPLETED
exit_code:
  description: Slurm's ExitCode (status:signal).
  returned: success
  type: str
  sample: "0:0"
reason:
  description: Slurm's Reason of the job.
  returned: success
  type: str
  sample: None
nodelist:
  description: The job's node list in Slurm's notation.
  returned: success
  type: str
  sample: nid0[0012-0015]
nodes:
  description: The node list expanded.
  returned: success
  type: list
  elements: str
job_dir:
  description: The job's directory (layout, task logs, worker results).
  returned: success
  type: str
output:
  description: The job's output file.
  returned: success
  type: str
failure:
  description: Empty when the job completed; else why it failed, with the end of its output.
  returned: success
  type: str
layout:
  description: The layout the job used (C(layout.json)), or computed on its nodes; null when it got none.
  returned: success
  type: dict
workers:
  description: One entry per worker result found, C({task_index, result}), in task order; each result carries C(slurm_job_id) and C(slurm_nodelist).
  returned: success
  type: list
  elements: dict
elapsed:
  description: Seconds this call waited.
  returned: success
  type: float
"""

import json
import os
import re
import time

from ansible.module_utils.basic import AnsibleModule

from ansible.module_utils.dtfbench.launch.controller_watch import ControllerWatch
from ansible.module_utils.dtfbench.plan.layout import LayoutError, compute_layout, expand_nodelist

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


class SlurmJob(object):
    def __init__(self, module):
        self.module = module
        p = module.params
        self.run_dir = p["run_dir"]
        self.script = p["script"] or os.path.join(self.run_dir, "job.sbatch")
        self.state_path = os.path.join(self.run_dir, STATE_FILE)
        self.record = read_json(self.state_path) or {}
        self.started = time.monotonic()
        self.last_error = ""
        self.watch = None

    # ---------------------------------------------------------------- scheduler
    def command(self, name):
        path = self.module.get_bin_path(name)
        if not path:
            self.module.fail_json(
                msg="%s not found on this host: run the role on the cluster's login node "
                "(Slurm's client commands), or set submit=false to only write the scripts" % name
            )
        return path

    def submit(self):
        if not os.path.isfile(self.script):
            self.module.fail_json(msg="batch script %s does not exist" % self.script)
        argv = [self.command("sbatch"), "--parsable", self.script]
        rc, out, err = self.module.run_command(argv, cwd=self.run_dir)
        job_id = out.strip().split(";")[0].strip() if rc == 0 else ""
        if rc != 0 or not job_id.isdigit():
            self.module.fail_json(msg="sbatch refused the job (exit %d): %s" % (rc, (err or out).strip()), argv=argv)
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
        rc, out, err = self.module.run_command([self.command("scontrol"), "--oneliner", "show", "job", job_id])
        if rc == 0 and out.strip():
            return parse_show_job(out)
        text = (err or out).strip()
        if "Invalid job id" in text:
            return None
        self.last_error = "scontrol show job %s (exit %d): %s" % (job_id, rc, text)
        return {}

    def cancel(self, job_id):
        self.module.run_command([self.command("scancel"), job_id])

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
        self.module.fail_json(
            msg=failure, changed=True, job_id=job_id, state=state, cancelled=True, run_dir=self.run_dir
        )

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
        request = self.module.params["layout"] or {}
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
                "; cancelled" if self.module.params["cancel_on_timeout"] else "",
            )
        else:
            text = "Slurm job %s %s" % (job_id, state)
            if reason and reason not in ("None", "(null)"):
                text += " (%s)" % reason
        if fields.get("ExitCode"):
            text += ", exit code %s" % fields["ExitCode"]
        if fields.get("NodeList") and fields["NodeList"] != "(null)":
            text += " on %s" % fields["NodeList"]
        end = tail(output, self.module.params["output_lines"]) if output else None
        if end:
            text += "; end of %s:\n%s" % (output, end)
        elif output:
            text += "; no output in %s" % output
        return text

    # ---------------------------------------------------------------- main
    def run(self):
        p = self.module.params
        if p["state"] == "cancelled":
            self.cancel_recorded()
        job_id = self.record.get("job_id")
        state = self.record.get("state")
        submitted = False
        needs_submit = not job_id or (state in FINAL and state != "COMPLETED" and p["resubmit_failed"])
        if needs_submit:
            if self.module.check_mode:
                self.module.exit_json(
                    changed=True, submitted=True, job_id="", state="NOT_SUBMITTED", msg="would submit %s" % self.script
                )
            job_id = self.submit()
            submitted = True

        if not p["wait"]:
            fields = self.show(job_id) or {}
            self.finish(job_id, fields, submitted, collect=False)

        if self.record.get("state") in FINAL and not submitted:
            fields = self.record.get("fields") or {"JobState": self.record["state"]}
            timed_out = bool(self.record.get("timed_out"))
        else:
            self.watch = ControllerWatch()
            fields, timed_out = self.wait(job_id, p["timeout"], p["poll_interval"])
            self.watch = None
            if timed_out:
                if not fields and self.last_error:
                    self.module.fail_json(
                        msg="cannot follow Slurm job %s: %s" % (job_id, self.last_error),
                        job_id=job_id,
                        submitted=submitted,
                    )
                if p["cancel_on_timeout"]:
                    fields = self.cancel_and_wait(job_id) or fields
                fields = dict(fields)
                fields.setdefault("JobState", "UNKNOWN")
        self.finish(job_id, fields, submitted, collect=True, timed_out=timed_out)

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
            self.module.exit_json(msg="no job was submitted from %s" % self.run_dir, **result)
        # The scheduler this job went to, whatever environment this play has.
        os.environ.update(self.record.get("client_env") or {})
        shown = self.show(job_id)
        state = (shown or {}).get("JobState", "") if shown is not None else "gone"
        if shown is None or state not in ACTIVE:
            if shown == {} and self.last_error:
                self.module.fail_json(msg="cannot cancel Slurm job %s: %s" % (job_id, self.last_error), **result)
            result["state"] = state or result["state"]
            self.module.exit_json(
                msg="Slurm job %s has ended (%s): nothing to cancel" % (job_id, result["state"]), **result
            )
        if self.module.check_mode:
            result.update(changed=True, cancelled=True)
            self.module.exit_json(msg="would cancel Slurm job %s (%s)" % (job_id, state), **result)
        fields = self.cancel_and_wait(job_id)
        final = fields.get("JobState", "UNKNOWN")
        self.record.update(
            state=final, fields={"JobState": final}, failure=self.record.get("failure") or "cancelled (state=cancelled)"
        )
        write_json(self.state_path, self.record)
        result.update(changed=True, cancelled=True, state=final)
        self.module.exit_json(msg="cancelled Slurm job %s (%s, was %s)" % (job_id, final, state), **result)

    def finish(self, job_id, fields, submitted, collect, timed_out=False):
        p = self.module.params
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
            result.update(
                layout=layout,
                workers=self.workers(job_id, layout, nodelist),
                failure=self.failure(job_id, fields, output, timed_out, p["timeout"]),
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
            result.update(layout=None, workers=[], failure="")
        self.module.exit_json(**result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
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
        ),
        supports_check_mode=True,
    )
    if module.params["poll_interval"] <= 0 or module.params["timeout"] <= 0:
        module.fail_json(msg="poll_interval and timeout must be > 0")
    if not os.path.isdir(module.params["run_dir"]):
        if module.params["state"] == "cancelled":
            module.exit_json(
                changed=False,
                cancelled=False,
                job_id="",
                state="",
                run_dir=module.params["run_dir"],
                msg="no job was submitted from %s (no such directory)" % module.params["run_dir"],
            )
        module.fail_json(msg="run_dir %s does not exist" % module.params["run_dir"])
    SlurmJob(module).run()


if __name__ == "__main__":
    main()
