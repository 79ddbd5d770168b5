#!/usr/bin/env python3
"""One table of the benchmark suite's figures: each against its baseline, measured in the same run.

    .venv/bin/python benchmarks/summary.py [results/benchmarks]

Reads what each benchmark wrote (results/benchmarks/*.json) and prints, per goal of issue
#9, the figure, the baseline it is divided by, the ratio, the goal and whether it is met.
A benchmark that has not been run is listed as such, never guessed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(directory: Path, name: str) -> dict | None:
    path = directory / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _at_most(ident: str, figure: str, baseline: str, ratio: float, limit: float, goal: str = "") -> tuple:
    """A goal row met when the ratio is at most `limit` (goal: how the row writes it, "<= limit" if not given)."""
    return (ident, figure, baseline, ratio, goal or f"<= {limit}", ratio <= limit)


def _at_least(ident: str, figure: str, baseline: str, ratio: float, limit: float) -> tuple:
    """A goal row met when the ratio is at least `limit`."""
    return (ident, figure, baseline, ratio, f">= {limit}", ratio >= limit)


def _sync_vs_raw(what: str, staging: dict) -> tuple:
    """P3's goal row of one staging.py run: the sync against the raw GET loop."""
    return _at_least(
        "P3",
        f"{what} {staging['mb_per_s']['dtfbench']:.1f} MB/s",
        f"raw GET loop {staging['mb_per_s']['raw']:.1f} MB/s",
        staging["dtfbench_vs_raw"],
        0.95,
    )


def rows(directory: Path) -> list[tuple[str, str, str, float | None, str, bool | None]]:
    """(id, figure, baseline, ratio, goal, met) per goal."""
    out = []
    # P1 with two workloads: the trivial model (orchestration at its largest share) and the
    # study's InceptionV3, 10 + 100 steps (--study).
    p1_runs = [
        p for p in (_load(directory, "orchestration_overhead"), _load(directory, "orchestration_overhead_study")) if p
    ]
    for p1 in p1_runs:
        load = p1.get("workload") or {"model": "trivial", "steps": "?", "warmup_steps": 10}
        if "ratio_to_bare" in p1:  # issue #19: against the bare launcher of the same run
            rates = p1["images_per_sec"]
            goal = p1.get("goal_to_bare", 1.15)  # the goal the benchmark wrote beside its figure
            out.append(
                _at_most(
                    "P1",
                    f"run-benchmark.yml wall, {p1['machine']['hosts']} hosts, {len(p1['runs'])} runs, "
                    f"{load['model']}: {p1['playbook_wall_s']:.0f} s, {rates['ours']:.1f} img/s",
                    f"bare launcher (plain ssh) {p1['bare_wall_s']:.0f} s, {rates['bare']:.1f} img/s",
                    p1["ratio_to_bare"],
                    goal,
                    f"<= {goal:.2f}",
                )
            )
        out.append(
            _at_most(
                "P1",
                f"run-benchmark.yml wall, {p1['machine']['hosts']} hosts, {len(p1['runs'])} reps, "
                f"{load['model']} {load['warmup_steps']}+{load['steps']} steps: {p1['playbook_wall_s']:.0f} s",
                f"workers' training time {p1['training_s']:.0f} s",
                p1["ratio"],
                1.15,
            )
        )
    if not p1_runs:
        out.append(("P1", "not run", "-", None, "<= 1.15", None))
    p2 = _load(directory, "launch_scaling")
    if p2:
        n = str(p2["hosts"][1])
        start = p2["start_s"]
        out.append(
            _at_most(
                "P2",
                f"start of all tasks on {n} hosts {start[n]:.1f} s",
                f"on 1 host {start['1']:.1f} s",
                p2["ratio"],
                1.5,
            )
        )
        if "ratio_to_bare" in p2:
            bare = f"bare fan-out (xargs -P ssh) {p2['bare_start_s'][n]:.2f} s"
            out.append(
                _at_most("P2", f"start of all tasks on {n} hosts {start[n]:.2f} s", bare, p2["ratio_to_bare"], 1.5)
            )
    else:
        out.append(("P2", "not run", "-", None, "<= 1.5", None))
    scale = _load(directory, "controller_scaling")
    if scale:
        first, last = (str(h) for h in scale["ratio_hosts"])
        per_host = scale["controller_cpu_s_per_host"]
        out.append(
            _at_most(
                "#19",
                f"controller CPU per host at {last} hosts {per_host[last]:.3f} s",
                f"at {first} hosts {per_host[first]:.3f} s",
                scale["ratio"],
                1.2,
            )
        )
    p3 = _load(directory, "staging")
    if p3:
        ours = p3["mb_per_s"]["dtfbench"]
        out.append(_sync_vs_raw("dataset sync", p3))
        vs_aws = p3.get("dtfbench_vs_aws")  # None when awscli was not installed
        out.append(
            (
                "P3",
                f"dataset sync {ours:.1f} MB/s",
                f"aws s3 sync {p3['mb_per_s']['aws']:.1f} MB/s" if vs_aws else "aws s3 sync: not installed",
                vs_aws,
                ">= 1.0",
                None if vs_aws is None else vs_aws >= 1.0,
            )
        )
        # A new process, as a user's re-run pays it (interpreter start and boto3 included).
        out.append(
            (
                "P3",
                f"no-op re-sync of {p3['noop_shards']} shards {p3['noop_resync_s']:.2f} s",
                "2 s",
                p3["noop_resync_s"] / 2.0,
                "<= 1.0",
                p3["noop_resync_s"] < 2.0,
            )
        )
    else:
        out.append(("P3", "not run", "-", None, ">= 0.95", None))
    p3_crc64 = _load(directory, "staging-crc64nvme")
    if p3_crc64:
        out.append(_sync_vs_raw("dataset sync, CRC64NVME objects", p3_crc64))
    p4 = _load(directory, "workload_vs_tf_cnn")
    if p4:
        rates = p4["images_per_sec"]
        peers = {"tf_cnn": "tf_cnn_benchmarks master, TF 2.x", "tf_cnn_study": "the study's program, TF 1.1"}
        for key, ratio in sorted(p4["ratios"].items()):
            model, setup, versus = key.split("/")
            peer = versus.removeprefix("ours_vs_")
            partial = "" if p4.get("complete", True) else " (run not complete)"
            out.append(
                _at_least(
                    "P4",
                    f"our workload, {model} {setup}, batch {p4['config']['batch_size']}{partial}: "
                    f"{rates[f'{model}/{setup}/ours']:.1f} img/s",
                    f"{peers[peer]} {rates[f'{model}/{setup}/{peer}']:.1f} img/s",
                    ratio,
                    1.0,
                )
            )
    else:
        out.append(("P4", "not run", "-", None, ">= 1.0", None))
    keras = _load(directory, "workload_vs_keras")
    if keras:
        out.append(
            _at_least(
                "P4",
                f"our workload, {keras['config']['model']} {keras['config']['image_size']} px",
                "plain Keras loop, same CPU",
                keras["ratio_to_keras"]["ours_independent"],
                0.95,
            )
        )
    out += netprobe_rows(_load(directory, "netprobe") or {})
    nic = _load(directory, "nic_cost")
    if nic:
        out.append(
            (
                "27",
                f"throughput with the NIC sampler on ({nic['config']['model']}, 1 PS + 1 worker, "
                f"sampler {nic['sampler_cpu_share_of_a_core'] * 100:.2f}% of a core)",
                "the same, sampler off, interleaved",
                nic["ratio_on_to_off"],
                ">= 0.98",
                nic["met"],
            )
        )
    else:
        out.append(("27", "telemetry cost: not run", "-", None, ">= 0.98", None))
    return out


def netprobe_rows(result: dict) -> list[tuple[str, str, str, float | None, str, bool | None]]:
    """Issue #27: the link probe's accuracy and time, the planner on the shaped test bed."""
    out = []
    for rate in (result.get("accuracy") or {}).get("rates", []):
        out.append(
            (
                "N1",
                f"link probe, 4 hosts shaped to {rate['shaped_mbit']} Mbit/s: {rate['link_gb_s'] * 8e3:.1f} Mbit/s "
                f"point-to-point, incast {rate['incast_gb_s'] * 8e3:.1f}",
                f"the shaped rate (one plain stream: {rate['plain_stream_gb_s'] * 8e3:.1f})",
                rate["link_to_shaped"],
                "0.90-1.10",
                rate["met"],
            )
        )
    if "accuracy" not in result:
        out.append(("N1", "not run", "-", None, "0.90-1.10", None))
    timing = result.get("time")
    if timing:
        out.append(
            (
                "N2",
                f"probe-network.yml on {timing['hosts']} hosts: {timing['playbook_wall_s']:.1f} s "
                f"(the probe {timing['probe_s']:.1f} s)",
                f"the playbook without the probe {timing['playbook_without_probe_s']:.1f} s",
                timing["ratio_to_without_probe"],
                "<= 30 s",
                timing["met"],
            )
        )
    else:
        out.append(("N2", "not run", "-", None, "<= 30 s", None))
    for ident, part in (("N3", "planner"), ("N5", "planner-ring")):
        out.extend(_planner_rows(ident, result.get(part)))
    return out


def _planner_rows(ident, planner):
    """N3 (a PS sweep across the network onset) and N5 (the ring): the planner fitted small
    with the probe's link, against the larger count measured."""
    out = []
    for case in (planner or {}).get("cases", []):
        out.append(
            (
                ident,
                f"planner, {case.get('variable_update', 'parameter_server')}, {planner['hosts']} hosts at "
                f"{planner['shaped_mbit']:g} Mbit/s, fit <= "
                f"{planner.get('fit_up_to', 4)} GPUs with the probe's link: {case.get('gpus', 8)} GPUs "
                f"{case['with_link']:.1f} img/s (no link {case['without_link']:.1f}); range with no link "
                f"{case['range'][0]:.1f}-{case['range'][1]:.1f} ({'holds' if case['inside_range'] else 'misses'})",
                f"measured {case['measured']:.1f} img/s",
                case["with_link"] / case["measured"],
                "0.85-1.15, in range",
                abs(case["error_with_link"]) <= 0.15 and case["inside_range"],
            )
        )
    if not planner:
        out.append((ident, "not run", "-", None, "0.85-1.15, in range", None))
    return out


def main(argv: list[str]) -> int:
    directory = Path(argv[0]) if argv else ROOT / "results" / "benchmarks"
    table = [("goal", "figure", "baseline (same run)", "ratio", "target", "met")]
    for ident, figure, baseline, ratio, goal, met in rows(directory):
        table.append(
            (
                ident,
                figure,
                baseline,
                "-" if ratio is None else f"{ratio:.2f}",
                goal,
                "-" if met is None else ("yes" if met else "NO"),
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for number, row in enumerate(table):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
        if number == 0:
            print("  ".join("-" * width for width in widths))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
