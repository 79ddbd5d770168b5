#!/usr/bin/env bash
# The benchmark suite of issue #9 (not part of `make test`): each benchmark measures its
# baseline in the same run and writes results/benchmarks/<name>.json; the summary table
# comes last. `make bench` runs all; name some to run only those: scripts/bench.sh p1 p4
# DTFBENCH_LOCK=FILE: the benchmarks flock it around each of their pieces (a round, a leg, a
# host count), e.g. DTFBENCH_LOCK=/tmp/dtfbench-heavy.lock on a machine others share.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_CONFIG="$PWD/ansible.cfg" PYTHONPATH="$PWD/src"
selected=("$@")
[ ${#selected[@]} -gt 0 ] || selected=(p4 p4-allreduce p4-keras p3 p2 p1 p1-study controller nic-cost)
for name in "${selected[@]}"; do
  echo "=== $name"
  case "$name" in
    # Ours against the bare launcher (plain ssh, the study's method), trivial model, 4 rounds
    # of 3 runs a side, ~5 min on 2 cores: two whole cycles of the sides' order, so that each
    # goes first twice (3 rounds put ours first twice and the bare side once), and a round's
    # noise, several times the goal's margin here, weighs a quarter.
    p1) python benchmarks/orchestration_overhead.py --rounds 4 ;;
    # Where a sweep's time goes between its tasks, from inside ansible-playbook (each worker's
    # start, action, first command and result) and the TF tasks' start on the hosts: a 3-run
    # trivial sweep on 4 hosts, ~45 s.
    timeline) python benchmarks/task_timeline.py --repetitions 3 ${DTFBENCH_LOCK:+--lock "$DTFBENCH_LOCK"} ;;
    # The same sweep with every worker under cProfile (CPU clock): the workers' CPU by task and
    # by function, ~1 min (the profiler slows the timeline down; take that from `timeline`).
    timeline-profile) python benchmarks/task_timeline.py --repetitions 3 --profile-workers \
        --output results/benchmarks/task_timeline_profile.json ${DTFBENCH_LOCK:+--lock "$DTFBENCH_LOCK"} ;;
    # The study's workload (InceptionV3, 10 + 100 steps), 2 rounds of 1 run a side, ~12 min on 2 cores.
    p1-study) python benchmarks/orchestration_overhead.py --study ;;
    # 16 hosts against 1 and against the bare fan-out (xargs -P ssh), ~2 min.
    p2) python benchmarks/launch_scaling.py ;;
    # One run of p2, then one warm start each way under perf record -a: whose CPU each took
    # (the controller, its workers, ssh, the hosts' sshd and Python processes), ~2 min; needs perf.
    p2-split) python benchmarks/launch_scaling.py --repeats 1 --cpu-split --output results/benchmarks/launch_scaling_split.json ;;
    # The controller's CPU per host and the launch's wall time at 4, 16 and 64 hosts, ~6 min.
    controller) python benchmarks/controller_scaling.py ;;
    # Ours against a raw GET loop, aws s3 sync and s5cmd, 12 rounds (two whole cycles of the
    # engines' order), ~2.5 min; objects with a CRC32
    # (as boto3 uploads them), or with a CRC64NVME (S3's own for objects uploaded without one).
    p3) python benchmarks/staging.py ;;
    p3-crc64nvme) python benchmarks/staging.py --checksum CRC64NVME ;;
    # D1: the stager (a shared dataset to node-local disk, checked, fsynced) against cp -a (+ sync) of the
    # same 1 GB tree from a cold page cache into /dev/shm, 8 rounds of 4 sides, ~1 min.
    stage-copy) python benchmarks/stage_copy.py ;;
    # D3: a checkpoint's save rate against dd into the same folder; D4: ours with checkpoints off against
    # the tree before them (the parent of the commit that added them), interleaved, ~5 min on 2 cores.
    checkpoint-cost) python benchmarks/checkpoint_cost.py ;;
    # D2: ours reading LMDB against TFRecords of the same 2,048 JPEGs (trivial model: the input pipeline is
    # the bottleneck), 4 rounds a side, ~3 min on 2 cores.
    input-format) python benchmarks/input_format.py ;;
    # Ours vs tf_cnn_benchmarks master (TF 2.x) and the study's program (TF 1.1), 4 models,
    # single process and 1 PS + 2 workers, ~40 min on 2 cores. DTFBENCH_LOCK=FILE: flock it per leg.
    p4) python benchmarks/workload_vs_tf_cnn.py ${DTFBENCH_LOCK:+--lock "$DTFBENCH_LOCK"} ;;
    # The second baseline: a plain Keras tf.function loop.
    p4-keras) python benchmarks/workload_vs_keras.py ;;
    # Issue #29: ours against tf_cnn_benchmarks master, both collective_all_reduce with 2 workers
    # on 127.0.0.1, resnet50 and inception3, 3 rounds (the legs' order rotated), ~25 min.
    p4-allreduce) python benchmarks/workload_vs_tf_cnn.py --setups ar2 --legs ours tf_cnn --models resnet50 inception3 \
      --repeats 3 --output results/benchmarks/workload_vs_tf_cnn_allreduce.json ${DTFBENCH_LOCK:+--lock "$DTFBENCH_LOCK"} ;;
    # Issue #27: the link probe's accuracy at 50/200/1,000 Mbit/s (4 shaped hosts), its time on
    # 16 hosts, the planner across the network onset (below); ~15 min on 2 cores.
    netprobe) python benchmarks/netprobe.py ${DTFBENCH_LOCK:+--lock "$DTFBENCH_LOCK"} ;;
    # The planner across the network onset alone: 3 repetitions of 1, 2 and 4 GPUs on 5 hosts
    # shaped to 100 Mbit/s, fitted on 1-2 GPUs, 4 predicted; ~8 min on 2 cores.
    netprobe-planner) python benchmarks/netprobe.py --parts planner ${DTFBENCH_LOCK:+--lock "$DTFBENCH_LOCK"} ;;
    # Issue #29: the planner's ring fitted on 1-2 hosts predicts 4 (4 hosts at 100 Mbit/s), ~3 min.
    netprobe-ring) python benchmarks/netprobe.py --parts planner-ring ${DTFBENCH_LOCK:+--lock "$DTFBENCH_LOCK"} ;;
    # Issue #27: the PS's link under its workers' pattern with sockets only (no TF), 1-4 workers
    # on 5 hosts at 100 Mbit/s, against a plain stream and random turns; ~4 min.
    ps-pattern) python benchmarks/ps_pattern.py ${DTFBENCH_LOCK:+--lock "$DTFBENCH_LOCK"} ;;
    # Issue #27's telemetry cost: throughput with the NIC sampler on and off in turns of 3 s, one run, ~1.5 min.
    nic-cost) python benchmarks/nic_cost.py ${DTFBENCH_LOCK:+--lock "$DTFBENCH_LOCK"} ;;
    # Issue #53's A3: images/sec with held-out evaluation once an epoch against without, LeNet on
    # the digits, 4 rounds ABBA; ~3 min.
    eval-cost) python benchmarks/eval_cost.py ${DTFBENCH_LOCK:+--lock "$DTFBENCH_LOCK"} ;;
    # Issue #53's A1 and A2: held-out top-1 after the same epochs, and time to a target, against Keras
    # model.fit on the digits (same network, pipelines, optimizer), 4 rounds; ~6 min.
    accuracy-keras) python benchmarks/accuracy_vs_keras.py ${DTFBENCH_LOCK:+--lock "$DTFBENCH_LOCK"} ;;
    # Issue #53: the Summitdev study's accuracy experiments on 4 test-bed hosts (workers, PSs, batch
    # size, and the race to a target), LeNet on the digits, ~35 min on 2 cores.
    summitdev-accuracy) python benchmarks/summitdev_accuracy.py ${DTFBENCH_LOCK:+--lock "$DTFBENCH_LOCK"} ;;
    # Issue #55's D5: the Summitdev study's storage experiments on 4 test-bed hosts (a shared server at
    # 20 Mbit/s against local disk, cold cache, without and with a background reader; trivial and resnet50), ~20 min.
    summitdev-storage) python benchmarks/summitdev_storage.py ${DTFBENCH_LOCK:+--lock "$DTFBENCH_LOCK"} ;;
    *) echo "unknown benchmark $name: choose from p1 p1-study timeline timeline-profile p2 p3 p3-crc64nvme p4 p4-allreduce p4-keras controller netprobe netprobe-planner netprobe-ring ps-pattern nic-cost eval-cost accuracy-keras summitdev-accuracy summitdev-storage" >&2; exit 2 ;;
  esac
done
echo "=== summary"
python benchmarks/summary.py
