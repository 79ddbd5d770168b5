"""Where does one training step's time go? Op-type profile of our workload and of tf_cnn_benchmarks.

    PYTHONPATH=src python benchmarks/profile_step.py ours --model resnet50 --batch_size 16 \
        --trace results/profile/ours_resnet50.json
    PYTHONPATH=src python benchmarks/profile_step.py summarize TRACE.json [TRACE2.json ...]

``ours`` builds the graph exactly as ``python -m dtfbench train --variable_update independent``
does (graph_worker.build_worker_graph, same session config), runs the warm-up steps, then one
step with RunOptions(trace_level=FULL_TRACE) and writes its Chrome trace (TF's timeline), as
tf_cnn_benchmarks' ``--trace_file`` does for one of its steps. ``summarize`` reads such traces
(ours or tf_cnn_benchmarks') and prints, per op type, the summed op time in ms, the count and
the share of the step: the op mix of both programs side by side. Kept short: one traced step.
"""

import argparse
import collections
import json
import sys
import time
from pathlib import Path


def trace_ours(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--trace", required=True)
    p.add_argument("--warmup", type=int, default=3)
    args, rest = p.parse_known_args(argv)
    sys.modules.setdefault("matplotlib", None)
    from dtfbench.workload import flags

    config, cluster = flags.parse(["--variable_update", "independent", "--device", "cpu", *rest])
    config = flags.check_devices(config, 0)
    import tensorflow as tf
    from tensorflow.python.client import timeline

    from dtfbench.workload.graph_worker import build_worker_graph, session_config

    built = build_worker_graph(tf, config, cluster)
    sess = tf.compat.v1.Session(graph=built.graph, config=session_config(tf, config, cluster))
    sess.run(built.init_op)
    sess.run(built.local_init_op)
    fetches = [built.train.train_op, built.train.loss]
    for _ in range(args.warmup):
        sess.run(fetches)
    began = time.perf_counter()
    sess.run(fetches)
    untraced = time.perf_counter() - began
    meta = tf.compat.v1.RunMetadata()
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    sess.run(fetches, options=options, run_metadata=meta)
    Path(args.trace).parent.mkdir(parents=True, exist_ok=True)
    Path(args.trace).write_text(timeline.Timeline(meta.step_stats).generate_chrome_trace_format())
    print(f"untraced step {untraced * 1000:.0f} ms; trace written to {args.trace}")


def op_times(trace_path):
    """{op type: [summed duration in ms, count]} of the compute events of a Chrome trace."""
    events = json.loads(Path(trace_path).read_text())["traceEvents"]
    totals = collections.defaultdict(lambda: [0.0, 0])
    for event in events:
        if event.get("ph") != "X" or "op" not in event.get("args", {}):
            continue
        entry = totals[event["args"]["op"]]
        entry[0] += event["dur"] / 1000.0
        entry[1] += 1
    return totals


def summarize(paths, top=25):
    tables = [op_times(p) for p in paths]
    totals = [sum(v[0] for v in t.values()) for t in tables]
    ops = sorted({op for t in tables for op in t}, key=lambda op: -max(t.get(op, [0])[0] for t in tables))
    names = [Path(p).stem for p in paths]
    print(f"{'op type':32s}" + "".join(f"{n[:26]:>28s}" for n in names))
    for op in ops[:top]:
        cells = []
        for table, total in zip(tables, totals):
            ms, count = table.get(op, [0.0, 0])
            cells.append(f"{ms:9.1f} ms {count:4d} {100 * ms / total:5.1f}%")
        print(f"{op:32s}" + "".join(f"{c:>28s}" for c in cells))
    print(f"{'all ops (summed over threads)':32s}" + "".join(f"{t:25.1f} ms" for t in totals))


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("ours", "summarize"):
        print(__doc__)
        return 2
    if argv[0] == "ours":
        trace_ours(argv[1:])
    else:
        summarize(argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
