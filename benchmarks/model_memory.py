"""How much memory one training process of each model needs: the table of dtfbench.plan.memory.

    PYTHONPATH=src python benchmarks/model_memory.py [--models vgg16,resnet50] [--batch-sizes 2,10]

For each model of dtfbench.workload.cnn_models at its default image size, runs
``python -m dtfbench train --variable_update independent --device cpu`` (one warm-up and two
measured steps, one intra- and one inter-op thread) at two small batch sizes (2 and 10; 16 and 256 for the 28-32 px models), and reads each
process's peak resident memory (``ru_maxrss`` of the finished child, from ``os.wait4``). The
difference over the batch sizes' difference is the memory per image; what is left at batch 0 is
the fixed part (TensorFlow itself, the variables, their gradients and optimizer slots). Prints
one line per model and, last, the rows for ``MODEL_MEMORY`` as Python.
"""

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from dtfbench.plan.catalog import MODEL_SPECS  # noqa: E402

# Models whose images are small (28-32 px): a few MiB apart only at larger batches.
SMALL_MODELS = ("lenet", "trivial", "small_cnn")


def peak_rss_mib(model, batch_size):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT / "src"))
    argv = [sys.executable, "-m", "dtfbench", "train", "--variable_update", "independent", "--device", "cpu",
            "--model", model, "--batch_size", str(batch_size), "--num_warmup_batches", "1", "--num_batches", "2",
            "--display_every", "1", "--num_intra_threads", "1", "--num_inter_threads", "1"]  # fmt: skip
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{model} batch {batch_size}: rc {child.returncode}\n{stderr.decode()[-2000:]}")
    return usage.ru_maxrss / 1024  # KiB on Linux


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODEL_SPECS))
    parser.add_argument(
        "--batch-sizes", help="two batch sizes for every model (default: 2,10; 16,256 for the small ones)"
    )
    args = parser.parse_args()
    rows = []
    for model in args.models.split(","):
        pair = args.batch_sizes or ("16,256" if model in SMALL_MODELS else "2,10")
        small, large = (int(b) for b in pair.split(","))
        low, high = peak_rss_mib(model, small), peak_rss_mib(model, large)
        per_image = max(high - low, 0.0) / (large - small)
        fixed = low - small * per_image
        rows.append((model, round(fixed), round(per_image, 2)))
        print(f"{model}: batch {small}: {low:.0f} MiB, batch {large}: {high:.0f} MiB -> "
              f"{fixed:.0f} MiB + {per_image:.2f} MiB per image", flush=True)  # fmt: skip
    for model, fixed, per_image in rows:
        print(f'    "{model}": ModelMemory(fixed_mib={fixed}, per_image_mib={per_image}),')


if __name__ == "__main__":
    main()
