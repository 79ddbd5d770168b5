#!/usr/bin/env python3
"""The link probe and the planner on the shaped test bed (issue #27's goals, #29's ring).

    .venv/bin/python benchmarks/netprobe.py [--parts accuracy time planner planner-ring] [--lock FILE]

Four parts, each on a test bed of its own (tests/testbed/testbed.py: network namespaces
with their own sshd; `--link-mbit` shapes every node's private link with tbf), each against
a baseline measured in the same run:

accuracy  4 hosts shaped to 50, 200 and 1,000 Mbit/s in turn: playbooks/probe-network.yml's
          point-to-point and incast rates / the shaped rate (goal: within 10%), and / one
          plain TCP stream between two nodes timed right before (the goodput the link gives).
time      16 hosts, shaped to 200 Mbit/s: probe-network.yml's wall time (goal <= 30 s) and the
          probe's own, against the bound (transfer rounds x duration) and against the same
          playbook with network_probe=false (what Ansible costs without the probe).
planner   max(--planner-gpus) + 1 hosts shaped to --planner-mbit (100): --planner-repetitions (3)
          sweeps of a network-heavy configuration (the trivial model: one dense layer, 3 MB of
          variables at 16 px, little compute), gpus 1, 2 and 4, 1 PS on a host of its own
          (every worker reaches it over the shaped link), asynchronous updates (one worker's
          transfers overlap the others': the PS's link fills only past the onset, between 2
          and 4 here); the scaling model fitted on the counts up to N = 2 (the planner's own
          path, num_ps=auto's calibrate) predicts 2N = 4 with the probe's link rate (goal:
          within 15% of the measured rate), without it, and with no link rate gives a range
          (goal: it holds the measured rate). docs/network.md, "Across the network onset".
planner-ring  the same for collective_all_reduce (issue #29): max(--planner-gpus) hosts, a worker
          a host, the ring synchronous (every node sends and receives 2(N-1)/N of the variables a
          step); fitted on the counts up to N with the probe's link, predicts 2N (no published
          table has all-reduce runs: this is the mode's check). docs/scaling_model.md.

Writes results/benchmarks/netprobe.json (the parts run), prints each figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "testbed"))

import testbed as tb  # noqa: E402
from bench_env import RESULTS, ansible_env, held, timed_run, write_json  # noqa: E402

from dtfbench.forecast import adaptive, validation  # noqa: E402
from dtfbench.results import network, store  # noqa: E402

OUT = RESULTS / "netprobe.json"
GOODPUT = 1448 / 1514  # TCP payload per byte on a 1500-byte-MTU Ethernet link (what tbf counts)
# The planner's sweep: the test bed's one thread per op pool, and asynchronous updates (each
# worker pulls, computes and pushes on its own, so that one worker's transfers overlap the
# others' compute and the PS's link fills only when the workers' bytes outgrow their steps).
ONSET_ARGS = ["--num_intra_threads", "1", "--num_inter_threads", "1", "--cross_replica_sync", "false"]
RING_ARGS = ["--num_intra_threads", "1", "--num_inter_threads", "1"]


def plain_transfer_gb_s(sender: dict, receiver: dict, seconds: float = 3.0) -> float:
    """GB/s of one TCP stream from `sender` to `receiver` over the private addresses."""
    return tb.timed_transfer(sender, receiver, seconds) / 1e9


def playbook(name: str, inventory: Path, *extra: str, timeout: int = 1800) -> tuple[float, str]:
    done, wall = timed_run(["ansible-playbook", name, "-i", str(inventory), *extra], ansible_env(), timeout)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed (exit {done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}")
    return wall, done.stdout


def probe(bed_dir: Path, db: Path, probe_id: str, *extra: str) -> tuple[float, dict]:
    wall, _ = playbook(
        "probe-network.yml", bed_dir / "hosts.yml", "-e", f"results_db={db}", "-e", f"sweep_id={probe_id}", *extra
    )
    return wall, network.read(db, probe_id)


def accuracy(work: Path, lock: str | None) -> dict:
    result = {"hosts": 4, "rates": []}
    with held(lock):
        bed_dir = work / "accuracy"
        state = tb.up(bed_dir, hosts=4)
        try:
            db = work / "accuracy.sqlite"
            for mbit in (50, 200, 1000):
                tb.shape(state, mbit)
                plain = plain_transfer_gb_s(state["nodes"][0], state["nodes"][1])
                wall, doc = probe(bed_dir, db, f"accuracy-{mbit}")
                shaped = mbit / 8e3  # GB/s
                row = {
                    "shaped_mbit": mbit,
                    "shaped_gb_s": shaped,
                    "plain_stream_gb_s": plain,
                    "link_gb_s": doc["link_gb_s"],
                    "incast_gb_s": doc["incast_gb_s"],
                    "rtt_ms": doc["rtt_ms"],
                    "host_gb_s": {h: e["gb_s"] for h, e in doc["hosts"].items()},
                    "link_to_shaped": doc["link_gb_s"] / shaped,
                    "incast_to_shaped": doc["incast_gb_s"] / shaped,
                    "link_to_plain_stream": doc["link_gb_s"] / plain,
                    "playbook_wall_s": wall,
                }
                row["met"] = abs(row["link_to_shaped"] - 1) <= 0.10 and abs(row["incast_to_shaped"] - 1) <= 0.10
                result["rates"].append(row)
                print(
                    f"accuracy {mbit:>5} Mbit/s: probe {doc['link_gb_s'] * 8e3:7.1f} Mbit/s point-to-point "
                    f"({row['link_to_shaped']:.3f} x shaped, {row['link_to_plain_stream']:.3f} x one plain stream "
                    f"{plain * 8e3:.1f}), incast {doc['incast_gb_s'] * 8e3:7.1f} ({row['incast_to_shaped']:.3f} x), "
                    f"rtt {doc['rtt_ms']:.3f} ms: {'met' if row['met'] else 'NOT met'} (goal within 10%)",
                    flush=True,
                )
        finally:
            tb.down(bed_dir)
    return result


def probe_time(work: Path, lock: str | None, hosts: int = 16) -> dict:
    with held(lock):
        bed_dir = work / "time"
        tb.up(bed_dir, hosts=hosts, link_mbit=200)
        try:
            db = work / "time.sqlite"
            # The same playbook without the probe first (Ansible's own cost), then with it.
            base_wall, _ = probe(bed_dir, db, "time-off", "-e", "network_probe=false")
            wall, doc = probe(bed_dir, db, "time-on")
        finally:
            tb.down(bed_dir)
    bound = doc["rounds"] * doc["duration_s"]
    result = {
        "hosts": hosts,
        "playbook_wall_s": wall,
        "playbook_without_probe_s": base_wall,
        "probe_s": doc["seconds"],
        "rounds": doc["rounds"],
        "duration_s": doc["duration_s"],
        "bound_transfer_s": bound,
        "link_gb_s": doc["link_gb_s"],
        "incast_gb_s": doc["incast_gb_s"],
        "slow_hosts": doc["slow_hosts"],
        "ratio_to_without_probe": wall / base_wall,
        "met": wall <= 30,
    }
    print(
        f"time on {hosts} hosts: probe-network.yml {wall:.1f} s (without the probe {base_wall:.1f} s, "
        f"x{wall / base_wall:.2f}); the probe itself {doc['seconds']:.1f} s for {doc['rounds']} transfer rounds "
        f"of {doc['duration_s']} s (bound {bound:.0f} s + round trips and joining): "
        f"{'met' if result['met'] else 'NOT met'} (goal <= 30 s); point-to-point {doc['link_gb_s'] * 8e3:.1f} Mbit/s, "
        f"incast {doc['incast_gb_s'] * 8e3:.1f}, slow hosts {[s['host'] for s in doc['slow_hosts']]}",
        flush=True,
    )
    return result


def planner(
    work: Path,
    lock: str | None,
    mbit: float,
    image_size: int,
    batch: int,
    steps: int,
    gpus: list[int],
    fit_up_to: int,
    repetitions: int,
    variable_update: str = "parameter_server",
) -> dict:
    ring = "collective_all_reduce" in variable_update
    sweep = "planner-ring" if ring else "planner"
    db = work / f"{sweep}.sqlite"
    # The ring: a worker a host, synchronous (it has no other form), every node's link loaded
    # alike; a PS mode beside it (--ring-variable-update) puts its PS on the first worker's host.
    # The PS onset: a worker a host, asynchronous, the PS on a host of its own.
    hosts = max(gpus) if ring else max(gpus) + 1
    layout = (
        ["-e", f"variable_update={variable_update}", "-e", json.dumps({"benchmark_extra_args": RING_ARGS})]
        + ["-e", "num_ps=1" if variable_update != "collective_all_reduce" else "num_ps=0"]
        if ring
        else [
            "-e",
            "num_ps=1",
            "-e",
            json.dumps({"benchmark_ps_on_worker_nodes": False, "benchmark_extra_args": ONSET_ARGS}),
        ]
    )
    with held(lock):
        bed_dir = work / sweep
        tb.up(bed_dir, hosts=hosts, link_mbit=mbit)
        try:
            wall, out = playbook(
                "run-benchmark.yml",
                bed_dir / "hosts.yml",
                "-e",
                "system=testbed",
                "-e",
                f"gpus={','.join(map(str, gpus))}",
                *layout,
                "-e",
                "model=trivial",
                "-e",
                f"image_size={image_size}",
                "-e",
                f"batch_size={batch}",
                "-e",
                "warmup_steps=3",
                "-e",
                f"steps={steps}",
                "-e",
                f"repetitions={repetitions}",
                "-e",
                f"sweep_id={sweep}",
                "-e",
                f"results_db={db}",
            )
        finally:
            tb.down(bed_dir)
    conn = store.connect(db)
    try:
        recorded = [r for r in store.runs(conn, "sweep_id = ?", (sweep,)) if r["status"] == "ok"]
    finally:
        conn.close()
    measured = network.measured(db, sweep)
    result = validation.sweep_extrapolation(recorded, "trivial", batch, fit_up_to, measured.planner_gb_s)
    if not ring:
        # Beside it, in the same run: the fluid bound, the prediction had the same runs been
        # synchronous (the workers' transfers in perfect order, what the planner had before
        # it modelled the turns).
        as_synchronous = [dict(r, cross_replica_sync=1) for r in recorded]
        fluid = validation.sweep_extrapolation(as_synchronous, "trivial", batch, fit_up_to, measured.planner_gb_s)
        for case, ordered in zip(result["cases"], fluid["cases"]):
            case["fluid_bound"] = ordered["with_link"]
            case["error_fluid_bound"] = ordered["error_with_link"]
    observations = adaptive.observations_of(recorded)
    per_worker_step = {
        f"{o.config.gpus}/{o.config.num_ps}/{o.config.variable_update}": batch / (o.images_per_sec / o.config.gpus)
        for o in observations
    }
    for case in result["cases"]:
        print(
            f"planner {mbit:g} Mbit/s, fit <= {fit_up_to} GPUs, {case['gpus']} GPUs {case['variable_update']} "
            f"{case['num_ps']} PS: measured "
            f"{case['measured']:.1f} img/s; with the probe's link {case['with_link']:.1f} "
            f"({case['error_with_link']:+.1%}), without {case['without_link']:.1f} "
            f"({case['error_without_link']:+.1%}); range with no link "
            f"{case['range'][0]:.1f}-{case['range'][1]:.1f} ({'holds' if case['inside_range'] else 'MISSES'} it)"
            + (
                f"; the fluid bound (perfect turns) {case['fluid_bound']:.1f} ({case['error_fluid_bound']:+.1%})"
                if "fluid_bound" in case
                else ""
            ),
            flush=True,
        )
    print(
        "planner: per-worker step (s) by GPUs/PSs/variable update "
        + ", ".join(f"{c}: {s:.3f}" for c, s in sorted(per_worker_step.items()))
        + f"; the probe's link {measured.link_gb_s * 8e3:.1f} Mbit/s, incast {measured.incast_gb_s * 8e3:.1f}",
        flush=True,
    )
    return {
        "hosts": hosts,
        "variable_update": variable_update,
        "ps_on_worker_nodes": None if ring else False,
        "cross_replica_sync": True if ring else False,
        "shaped_mbit": mbit,
        "workload": {"model": "trivial", "image_size": image_size, "batch_size": batch, "steps": steps},
        "gpus": gpus,
        "repetitions": repetitions,
        "variable_bytes": adaptive.variables_of("trivial", recorded).total_bytes,
        "probe_link_gb_s": measured.link_gb_s,
        "probe_incast_gb_s": measured.incast_gb_s,
        "planner_link_gb_s": measured.planner_gb_s,
        "per_worker_step_s": dict(sorted(per_worker_step.items())),
        "observed_images_per_sec": {
            f"{o.config.gpus}/{o.config.num_ps}/{o.config.variable_update}": o.images_per_sec for o in observations
        },
        "nic_busiest_gb_s": {
            f"{r['gpus']}/{r['variable_update']}": (r["nic_rx_gb_per_s"] or 0) + (r["nic_tx_gb_per_s"] or 0)
            for r in recorded
        },
        **result,
        "winners": winners(result["cases"]),
        "sweep_wall_s": wall,
        "met_with_link": all(abs(c["error_with_link"]) <= 0.15 for c in result["cases"]),
        "met_range": all(c["inside_range"] for c in result["cases"]),
        "sweep_output_tail": out[-1500:],
    }


def winners(cases: list[dict]) -> dict[str, dict]:
    """Per GPU count with both sides predicted: PS or all-reduce, measured and predicted with the
    probe's link (the best PS configuration against the ring, as the planner ranks them)."""
    out = {}
    for gpus in sorted({c["gpus"] for c in cases}):
        ps = [c for c in cases if c["gpus"] == gpus and c["variable_update"] != "collective_all_reduce"]
        ring = [c for c in cases if c["gpus"] == gpus and c["variable_update"] == "collective_all_reduce"]
        if not ps or not ring:
            continue
        best_measured, best_predicted = max(c["measured"] for c in ps), max(c["with_link"] for c in ps)
        out[str(gpus)] = {
            "measured": "all-reduce" if ring[0]["measured"] > best_measured else "ps",
            "measured_ratio": ring[0]["measured"] / best_measured,
            "predicted": "all-reduce" if ring[0]["with_link"] > best_predicted else "ps",
            "predicted_ratio": ring[0]["with_link"] / best_predicted,
        }
        print(
            f"planner: PS or all-reduce at {gpus} GPUs: measured {out[str(gpus)]['measured']} "
            f"(all-reduce / best PS {out[str(gpus)]['measured_ratio']:.2f}), predicted with the link "
            f"{out[str(gpus)]['predicted']} ({out[str(gpus)]['predicted_ratio']:.2f})",
            flush=True,
        )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--parts",
        nargs="+",
        default=["accuracy", "time", "planner", "planner-ring"],
        choices=["accuracy", "time", "planner", "planner-ring"],
    )
    p.add_argument("--lock", help="flock this file around each part (the machine's heavy lock)")
    p.add_argument("--planner-mbit", type=float, default=100)
    p.add_argument("--planner-image-size", type=int, default=16)
    p.add_argument("--planner-batch", type=int, default=512)
    p.add_argument("--planner-steps", type=int, default=10)
    p.add_argument("--planner-gpus", default="1,2,4", help="the sweep's GPU counts (one worker a host)")
    p.add_argument("--planner-fit-up-to", type=int, default=2, help="N: fitted on the counts <= N")
    p.add_argument("--planner-repetitions", type=int, default=3)
    p.add_argument(
        "--ring-variable-update",
        default="collective_all_reduce",
        help="planner-ring's sweep: the ring alone, or a PS mode beside it (parameter_server,collective_all_reduce)",
    )
    args = p.parse_args(argv)
    results = json.loads(OUT.read_text()) if OUT.is_file() else {}
    with tempfile.TemporaryDirectory(prefix="dtfbench-netprobe-") as tmp:
        work = Path(tmp)
        for part in args.parts:
            if part == "accuracy":
                results["accuracy"] = accuracy(work, args.lock)
            elif part == "time":
                results["time"] = probe_time(work, args.lock)
            else:
                results[part] = planner(
                    work,
                    args.lock,
                    args.planner_mbit,
                    args.planner_image_size,
                    args.planner_batch,
                    args.planner_steps,
                    [int(g) for g in args.planner_gpus.split(",")],
                    args.planner_fit_up_to,
                    args.planner_repetitions,
                    args.ring_variable_update if part == "planner-ring" else "parameter_server",
                )
            write_json(OUT, results, sort_keys=True)
    if "accuracy" in results:
        print(
            "accuracy, probe / shaped:",
            ", ".join(f"{r['shaped_mbit']}: {r['link_to_shaped']:.3f}" for r in results["accuracy"]["rates"]),
            f"(median {statistics.median(r['link_to_shaped'] for r in results['accuracy']['rates']):.3f})",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
