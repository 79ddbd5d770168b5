"""Statistics for the report: pure functions over the store's rows (no I/O, no matplotlib).

The study's method (CSCS 2017, §5.1): every test is repeated (5 times), the repetitions are
averaged, and for each number of GPUs the configuration (number of PSs, variable update)
with the most images/sec is reported. The later study (Kim et al.) adds the 95% confidence
interval of the mean across repetitions. Here:

- a *configuration* is every parameter of a run except its repetition (``CONFIG_KEYS``);
  its figure is the mean over the repetitions that succeeded, with a Student-t 95% CI,
  min/max and the failed repetitions with their reasons (``summarise``);
- the workload (which program measured: ours or tf_cnn_benchmarks at a ref and commit,
  ``workload_label``) is part of every grouping below: two programs are never mixed;
- the *best* configuration per (system, model, batch size, data, GPUs) is the one with the
  highest mean; a group where every configuration failed has no best and is 'failed'
  (``best_configurations``);
- speedup = images/sec(N) / images/sec(1), efficiency = speedup / N, both against the best
  1-GPU configuration of the same (system, model, batch size, data) (``add_speedup``);
- I/O overhead = (synthetic - real) / synthetic x 100 per (system, GPUs), from the best
  synthetic and best real configurations (``io_overhead``, ``io_overhead_rows``).

Rows are dicts as ``dtfbench.results.store.runs`` returns them; summaries and best rows are dicts
too, so they print, serialise and compare without ceremony.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# scipy.special, not scipy.stats: the same functions (stdtr, stdtrit, ndtri are what scipy.stats'
# t and norm call) at a third of the import time, which every sweep's table pays.
from scipy import special

from ..plan.catalog import ALL_REDUCE, PS_VARIABLE_UPDATES
from ..results import environment_view
from . import bounds

# Every parameter of a run except its repetition. Only parameters the plan fixes before a run
# starts: a failed run has no worker result, so fields taken from one (image_size,
# cross_replica_sync) would put its failure in a configuration of its own.
# The workload (which program measured: ours, or tf_cnn_benchmarks at a ref) is one of them:
# two programs' images/sec are never averaged, compared as "best" or divided for a speedup.
# So is the environment's key (dtfbench.results.environment_view.MATTERS: GPU model, driver, TF version and
# build, instance type): runs that differ in one of them are never one configuration.
CONFIG_KEYS = (
    "system",
    "workload",
    "model",
    "batch_size",
    "data",
    "gpus",
    "num_workers",
    "devices_per_worker",
    "num_ps",
    "variable_update",
    "ps_on_worker_nodes",
    "warmup_steps",
    "steps",
    "environment_key",
    # Evaluation pauses training (its images/sec includes the pauses): runs with and without it,
    # or at other intervals, are never one configuration; nor are runs to other targets or caps.
    "eval_every_steps",
    "target_accuracy",
    "max_epochs",
    "optimizer",
    "learning_rate",
    "lr_scaling",
    "warmup_epochs",
    "sync",
    # Where real data was read from (the nodes' file system under data_dir): a shared and a local
    # copy are never one configuration. Measured before the run starts; NULL for synthetic data.
    "storage",
    # The page cache of data_dir's files at the run's start (cache=cold|warm; NULL: left as it was).
    "cache",
    # The file format of the real data's records (tfrecord, lmdb; the Summitdev study's Fig. 10).
    "input_format",
    # Checkpoints saved during the measured steps cost images/sec: runs with and without are two configurations.
    "checkpoint_every_steps",
    "checkpoint_every_secs",
    # Another node read data_dir beside the run (background_io): the spread under load is its own configuration.
    "background_io",
)
# A configuration's held-out accuracy (eval_every_steps): mean top-1, its range, mean top-5, runs that measured it.
ACCURACY = (
    "eval_top1",
    "eval_top1_min",
    "eval_top1_max",
    "eval_top5",
    "eval_runs",
    "time_to_accuracy",
    "tta_mean",
    "tta_ci_low",
    "tta_ci_high",
    "tta_converged",
    "tta_runs",
    "tta_cv",
)
# A configuration's figures: the mean images/sec over its ok repetitions, its confidence
# interval, standard deviation, range, and its run-to-run variability as the Summitdev study
# shows it (Fig. 4b: the slowest against the fastest run): (max - min) / mean and the coefficient
# of variation (summarise); a best row and the tables carry them as they are.
FIGURES = (
    "images_per_sec",
    "ci_low",
    "ci_high",
    "ci_half_width",
    "stddev",
    "images_per_sec_min",
    "images_per_sec_max",
    "spread",
    "cv",
)
# The best configuration is chosen within each of these groups ...
BEST_KEYS = ("system", "workload", "model", "batch_size", "data", "gpus")
# ... and speedup is taken against the 1-GPU best of the same of these.
BASELINE_KEYS = ("system", "workload", "model", "batch_size", "data")
# I/O overhead compares synthetic and real data within these.
IO_KEYS = ("system", "workload", "model", "batch_size", "gpus")
OURS = "ours"

CONFIDENCE = 0.95
NO_REASON = "failed (no reason recorded)"


# ---------------------------------------------------------------------------------------
# Student's t distribution: scipy.special (the quantile and the CDF), with this module's checks.
# ---------------------------------------------------------------------------------------


def _check_df(df: float) -> None:
    if not df > 0:
        raise ValueError(f"degrees of freedom must be > 0, not {df}")


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom."""
    _check_df(df)
    return float(special.stdtr(df, t))


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with `df` degrees of freedom: t(0.975, 4) = 2.776."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), not {p}")
    _check_df(df)
    if math.isinf(df):
        return float(special.ndtri(p))
    return float(special.stdtrit(df, p))


def mean_ci(values: Sequence[float], confidence: float = CONFIDENCE) -> dict[str, Any]:
    """Mean and its two-sided Student-t confidence interval.

    Returns n, mean, stddev (sample, n-1), half_width, low, high and cv (stddev / mean, the
    coefficient of variation); with one value the interval and cv are unknown (None), with none
    everything but n is None.
    """
    values = [float(v) for v in values]
    n = len(values)
    result: dict[str, Any] = {
        "n": n,
        "mean": None,
        "stddev": None,
        "half_width": None,
        "low": None,
        "high": None,
        "confidence": confidence,
        "cv": None,
    }
    if n == 0:
        return result
    # fsum(n * [x]) / n can miss x by an ulp: keep the mean inside [min, max].
    mean = min(max(statistics.fmean(values), min(values)), max(values))
    result["mean"] = mean
    if n >= 2:
        stddev = statistics.stdev(values)
        half = t_quantile(0.5 + confidence / 2.0, n - 1) * stddev / math.sqrt(n)
        result.update(stddev=stddev, half_width=half, low=mean - half, high=mean + half)
        result["cv"] = stddev / mean if mean else None
    return result


# ---------------------------------------------------------------------------------------
# Per-configuration summaries, best configurations, speedup, efficiency, I/O overhead.
# ---------------------------------------------------------------------------------------


def _is_ok(row: Mapping[str, Any]) -> bool:
    return row.get("status") == "ok" and row.get("images_per_sec") is not None


def _reason(row: Mapping[str, Any]) -> str:
    if row.get("status") == "ok":
        return "no images/sec recorded"
    return row.get("reason") or NO_REASON


def workload_label(row: Mapping[str, Any]) -> str:
    """Which program a run (or a summary) measured: 'ours', 'NAME@REF (COMMIT)', or 'NAME@COMMIT'
    where the ref was the commit itself (cscs2017, pinned).

    A store row has the columns workload, workload_ref and workload_commit (NULL workload:
    recorded before the store knew workloads, all ours); a summary already has the label.
    The commit is part of it: a branch ref resolved at two times may be two programs.
    """
    name = row.get("workload") or OURS
    ref = row.get("workload_ref")
    if name == OURS or not ref:
        return str(name)
    commit = row.get("workload_commit")
    if commit and str(commit) == str(ref):  # a pinned commit (cscs2017): said once
        return f"{name}@{str(commit)[:12]}"
    return f"{name}@{ref}" + (f" ({str(commit)[:12]})" if commit else "")


def is_ours(workload: Any) -> bool:
    """Whether a workload label (or a row without one, such as a published row) is ours."""
    return workload in (None, OURS)


def _config_value(row: Mapping[str, Any], key: str) -> Any:
    if key == "workload":
        return workload_label(row)
    if key == "input_format":
        # Real data read before there was a choice (NULL, store schema < 13) was TFRecords.
        return row.get(key) or ("tfrecord" if row.get("data") == "real" else None)
    return row.get(key)


def summarise(rows: Iterable[Mapping[str, Any]], confidence: float = CONFIDENCE) -> list[dict[str, Any]]:
    """One summary per configuration, in the order configurations first appear.

    Each holds the CONFIG_KEYS and: runs, n_ok, failed, status ('ok' when a repetition
    succeeded, else 'failed'), images_per_sec (mean), ci_low, ci_high, ci_half_width,
    stddev, images_per_sec_min/max, spread ((max - min) / mean) and cv (stddev / mean; both
    None under 2 ok runs), images_per_sec_per_worker (mean), reasons (sorted,
    unique), failures (run_id, sweep_id, repetition, reason of each failed run), sweep_ids,
    speedup/efficiency against the best 1-GPU configuration (None without one), and the
    busiest NIC, the step's split and what bounds it (``dtfbench.report.bounds.KEYS``).
    """
    rows = list(rows)
    environments = environment_view.configuration_keys(rows, _same_but_environment)
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for row, environment in zip(rows, environments):
        groups.setdefault(
            tuple(environment if k == "environment_key" else _config_value(row, k) for k in CONFIG_KEYS), []
        ).append(row)
    summaries = []
    for key, members in groups.items():
        ok = [r for r in members if _is_ok(r)]
        # A run is counted once: a failed attempt that a resume ran again (ok, or failed again)
        # is not another run of the configuration (a resumed 3-run sweep is "3/3", not "3/4").
        ok_ids = {r.get("run_id") for r in ok if r.get("run_id")}
        last_failed: dict[Any, Mapping[str, Any]] = {}
        for index, r in enumerate(members):
            if not _is_ok(r) and not (r.get("run_id") and r.get("run_id") in ok_ids):
                last_failed[r.get("run_id") or ("row", index)] = r
        bad = list(last_failed.values())
        totals = [float(r["images_per_sec"]) for r in ok]
        per_worker = [float(v) for r in ok for v in (r.get("images_per_sec_per_worker") or [])]
        ci = mean_ci(totals, confidence)
        summary = dict(zip(CONFIG_KEYS, key))
        summary.update(
            runs=len(ok) + len(bad),
            n_ok=len(ok),
            failed=len(bad),
            status="ok" if ok else "failed",
            images_per_sec=ci["mean"],
            ci_low=ci["low"],
            ci_high=ci["high"],
            ci_half_width=ci["half_width"],
            stddev=ci["stddev"],
            confidence=confidence,
            images_per_sec_min=min(totals) if totals else None,
            images_per_sec_max=max(totals) if totals else None,
            spread=(max(totals) - min(totals)) / ci["mean"] if len(totals) > 1 and ci["mean"] else None,
            cv=ci["cv"],
            images_per_sec_per_worker=statistics.fmean(per_worker) if per_worker else None,
            reasons=sorted({_reason(r) for r in bad}),
            failures=[
                {
                    "run_id": r.get("run_id"),
                    "sweep_id": r.get("sweep_id"),
                    "repetition": r.get("repetition"),
                    "reason": _reason(r),
                }
                for r in bad
            ],
            sweep_ids=sorted({str(r["sweep_id"]) for r in members if r.get("sweep_id") is not None}),
            # Whether the workers' updates were synchronous, as the ok runs reported it (None
            # when they disagree or did not say): the scaling model's asynchronous workers take
            # turns on the PS's link. Not a configuration key: a failed run has no report of it.
            cross_replica_sync=_agreed(r.get("cross_replica_sync") for r in ok),
            # The TensorFlow the runs reported (the study's program on 1.1, ours on 2.x).
            tf_version=", ".join(sorted({str(r["tf_version"]) for r in members if r.get("tf_version")})) or None,
            **_accuracy(ok),
            **bounds.measured(members, ok),
        )
        summaries.append(summary)
    environment_view.mark_splits(summaries, _same_but_environment)
    add_speedup(summaries)
    bounds.add_bounds(summaries, BASELINE_KEYS)
    return summaries


def _accuracy(ok: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The held-out top-1/top-5 of a configuration's ok runs: mean, range and runs (None without)."""
    top1 = [float(r["eval_top1"]) for r in ok if r.get("eval_top1") is not None]
    top5 = [float(r["eval_top5"]) for r in ok if r.get("eval_top5") is not None]
    tta = [r for r in ok if r.get("tta_status")]
    times = [float(r["time_to_accuracy"]) for r in tta if r["tta_status"] == "converged"]
    ci = mean_ci(times, CONFIDENCE)
    return {
        "eval_top1": statistics.fmean(top1) if top1 else None,
        "eval_top1_min": min(top1) if top1 else None,
        "eval_top1_max": max(top1) if top1 else None,
        "eval_top5": statistics.fmean(top5) if top5 else None,
        "eval_runs": len(top1),
        "time_to_accuracy": mlperf_score(times, len(tta)) if tta else None,
        "tta_mean": ci["mean"],
        "tta_ci_low": ci["low"],
        "tta_ci_high": ci["high"],
        "tta_converged": len(times),
        "tta_runs": len(tta),
        # The repetitions' spread: the sample standard deviation over the mean (goal: stated over 5).
        "tta_cv": ci["cv"],
    }


def mlperf_score(converged: Sequence[float], runs: int) -> float | None:
    """Time to accuracy over repetitions as MLPerf Training scores it: a run that did not converge
    counts as the slowest, and at most one may; with 3 runs or more the fastest and the slowest
    are dropped and the rest averaged (an olympic mean), with fewer all are. None: not converged."""
    missing = runs - len(converged)
    if not converged or missing > 1 or (missing and runs < 3):
        return None
    ordered = sorted(converged) + [float("inf")] * missing
    kept = ordered[1:-1] if runs >= 3 else ordered
    return statistics.fmean(kept)


def _agreed(values: Iterable[Any]) -> Any:
    """The one value all of `values` share (None among them ignored), else None."""
    seen = {v for v in values if v is not None}
    return seen.pop() if len(seen) == 1 else None


def _same_but_environment(row: Mapping[str, Any]) -> tuple:
    """A run's (or a summary's) configuration without its environment."""
    return tuple(_config_value(row, k) for k in CONFIG_KEYS if k != "environment_key")


def _group_key(row: Mapping[str, Any], keys: Sequence[str]) -> tuple:
    return tuple(row.get(k) for k in keys)


def best_configurations(summaries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The best configuration per (system, workload, model, batch_size, data, gpus), by mean images/sec.

    One row per group, ordered by system (first appearance), workload (ours first), model, batch size, data
    (synthetic first) and GPUs. A row carries the best configuration's fields (num_ps,
    variable_update, num_workers, devices_per_worker, mean, CI, min/max, n_ok, failed) plus
    `configurations` (how many were tried) and `failed_configurations`; status 'ok'. When
    every configuration of the group failed the row has status 'failed', no best (num_ps,
    variable_update and images_per_sec are None) and the reasons of all its failures.
    Speedup and efficiency are added against the 1-GPU best of the same (system, workload,
    model, batch_size, data).
    """
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for s in summaries:
        groups.setdefault(_group_key(s, BEST_KEYS), []).append(s)
    best_rows = []
    for key, members in groups.items():
        candidates = [s for s in members if s.get("status") == "ok" and s.get("images_per_sec") is not None]
        row: dict[str, Any] = dict(zip(BEST_KEYS, key))
        row.update(
            configurations=len(members),
            failed_configurations=len(members) - len(candidates),
            group_runs=sum(int(s.get("runs") or 0) for s in members),
            failed_runs=sum(int(s.get("failed") or 0) for s in members),
            tf_version=", ".join(sorted({v for s in members for v in str(s.get("tf_version") or "").split(", ") if v}))
            or None,
        )
        if candidates:
            # max() keeps the first of equal means: ties go to the configuration seen first.
            best = max(candidates, key=lambda s: s["images_per_sec"])
            row.update(
                status="ok",
                best_key=_group_key(best, CONFIG_KEYS),
                **{
                    k: best.get(k)
                    for k in (
                        "num_ps",
                        "variable_update",
                        "num_workers",
                        "devices_per_worker",
                        "ps_on_worker_nodes",
                        *FIGURES,
                        "runs",
                        "n_ok",
                        "failed",
                        "reasons",
                        "environment_key",
                        "environment_split",
                        *bounds.KEYS,
                    )
                },
            )
        else:
            row.update(
                status="failed",
                best_key=None,
                num_ps=None,
                variable_update=None,
                num_workers=None,
                devices_per_worker=None,
                ps_on_worker_nodes=None,
                images_per_sec=None,
                ci_low=None,
                ci_high=None,
                ci_half_width=None,
                stddev=None,
                images_per_sec_min=None,
                images_per_sec_max=None,
                runs=row["group_runs"],
                n_ok=0,
                failed=row["failed_runs"],
                reasons=sorted({r for s in members for r in s.get("reasons") or []}),
                **dict.fromkeys(bounds.KEYS),
            )
        best_rows.append(row)
    order = {system: i for i, system in enumerate(dict.fromkeys(r["system"] for r in best_rows))}
    best_rows.sort(
        key=lambda r: (
            order[r["system"]],
            not is_ours(r.get("workload")),
            str(r.get("workload")),
            str(r.get("model")),
            _num(r.get("batch_size")),
            _data_rank(r.get("data")),
            _num(r.get("gpus")),
        )
    )
    add_speedup(best_rows)
    return best_rows


def _num(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.inf


def _data_rank(data: Any) -> tuple:
    return ({"synthetic": 0, "real": 1}.get(str(data), 2), str(data))


def speedup(images_per_sec: float | None, baseline: float | None) -> float | None:
    """images/sec(N) / images/sec(1); None when either is unknown."""
    if images_per_sec is None or not baseline:
        return None
    return float(images_per_sec) / float(baseline)


def efficiency(speedup_value: float | None, gpus: int | None) -> float | None:
    """speedup / N; None when either is unknown."""
    if speedup_value is None or not gpus:
        return None
    return speedup_value / int(gpus)


def add_speedup(rows: list[dict[str, Any]], keys: Sequence[str] = BASELINE_KEYS) -> None:
    """Set `speedup` and `efficiency` on every row, in place.

    The baseline of a row is the best (highest) images/sec among the ok rows with gpus == 1
    and the same `keys`. A row without a baseline, or without images/sec, gets None.
    """
    baselines: dict[tuple, float] = {}
    for r in rows:
        if r.get("gpus") == 1 and r.get("images_per_sec") and r.get("status", "ok") == "ok":
            key = _group_key(r, keys)
            baselines[key] = max(baselines.get(key, 0.0), float(r["images_per_sec"]))
    for r in rows:
        r["speedup"] = speedup(r.get("images_per_sec"), baselines.get(_group_key(r, keys)))
        r["efficiency"] = efficiency(r["speedup"], r.get("gpus"))


def io_overhead(synthetic: float | None, real: float | None, clamp_at_zero: bool = False) -> float | None:
    """(synthetic - real) / synthetic x 100, in percent; None when either is unknown.

    The study's notebook plotted max(0, synthetic - real) / synthetic x 100 (a real-data run
    faster than the synthetic one shows as 0); `clamp_at_zero=True` reproduces that. By
    default the sign is kept: a negative overhead says the two runs are within noise.
    """
    if synthetic is None or real is None or not synthetic:
        return None
    diff = float(synthetic) - float(real)
    if clamp_at_zero:
        diff = max(0.0, diff)
    return diff / float(synthetic) * 100.0


def io_overhead_rows(best_rows: Iterable[Mapping[str, Any]], clamp_at_zero: bool = False) -> list[dict[str, Any]]:
    """I/O overhead per (system, workload, model, batch_size, gpus) where both data kinds have an ok best.

    Each row: system, workload, model, batch_size, gpus, synthetic, real (best images/sec), their
    configurations (synthetic_num_ps, synthetic_variable_update, real_...), io_overhead (%).
    """
    by_key: dict[tuple, dict[str, Mapping[str, Any]]] = {}
    for r in best_rows:
        if r.get("status", "ok") == "ok" and r.get("images_per_sec") is not None:
            by_key.setdefault(_group_key(r, IO_KEYS), {})[str(r.get("data"))] = r
    result = []
    for key, kinds in by_key.items():
        if "synthetic" not in kinds or "real" not in kinds:
            continue
        syn, real = kinds["synthetic"], kinds["real"]
        row = dict(zip(IO_KEYS, key))
        row.update(
            synthetic=syn["images_per_sec"],
            real=real["images_per_sec"],
            synthetic_num_ps=syn.get("num_ps"),
            synthetic_variable_update=syn.get("variable_update"),
            real_num_ps=real.get("num_ps"),
            real_variable_update=real.get("variable_update"),
            io_overhead=io_overhead(syn["images_per_sec"], real["images_per_sec"], clamp_at_zero),
        )
        result.append(row)
    return result


# ---------------------------------------------------------------------------------------
# PS or all-reduce: the best parameter-server configuration beside all-reduce, per GPU count.
# ---------------------------------------------------------------------------------------

MODES_CSV = (
    *BEST_KEYS,
    "ps_num_ps",
    "ps_variable_update",
    "ps_images_per_sec",
    "ps_ci_low",
    "ps_ci_high",
    "ps_n_ok",
    "all_reduce_images_per_sec",
    "all_reduce_ci_low",
    "all_reduce_ci_high",
    "all_reduce_n_ok",
    "all_reduce_vs_ps_pct",
    "all_reduce_vs_ps_ci_low_pct",
    "all_reduce_vs_ps_ci_high_pct",
    "winner",
)


def difference_ci(
    a: Mapping[str, Any], b: Mapping[str, Any], confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """Welch's confidence interval of mean(a) - mean(b), from two summaries' mean, stddev and
    n_ok (unequal variances, Welch-Satterthwaite degrees of freedom); None with fewer than
    two successful repetitions on either side."""
    n_a, n_b = int(a.get("n_ok") or 0), int(b.get("n_ok") or 0)
    if n_a < 2 or n_b < 2 or a.get("stddev") is None or b.get("stddev") is None:
        return None
    diff = float(a["images_per_sec"]) - float(b["images_per_sec"])
    var_a, var_b = float(a["stddev"]) ** 2 / n_a, float(b["stddev"]) ** 2 / n_b
    se = math.sqrt(var_a + var_b)
    if se == 0.0:
        return diff, diff
    df = (var_a + var_b) ** 2 / (var_a**2 / (n_a - 1) + var_b**2 / (n_b - 1))
    half = t_quantile(0.5 + confidence / 2.0, df) * se
    return diff - half, diff + half


def ps_or_all_reduce(summaries: Iterable[Mapping[str, Any]], confidence: float = CONFIDENCE) -> list[dict[str, Any]]:
    """Per (system, workload, model, batch size, data, GPUs) where both kinds ran: the best
    parameter-server configuration (the highest mean of parameter_server and
    distributed_replicated, any PS count) beside collective_all_reduce, and which wins.

    ``all_reduce_vs_ps_pct`` = (all-reduce - PS) / PS x 100, with Welch's confidence interval
    of the difference in the same unit. ``winner`` is 'all-reduce' or 'PS' when the interval
    excludes 0, 'neither' when it holds 0 (the repetitions cannot tell them apart), and the
    higher mean followed by ' (no interval)' with fewer than two repetitions on a side.
    """
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for s in summaries:
        if s.get("status") == "ok" and s.get("images_per_sec") is not None:
            groups.setdefault(_group_key(s, BEST_KEYS), []).append(s)
    out = []
    for key, members in groups.items():
        ps = [s for s in members if s.get("variable_update") in PS_VARIABLE_UPDATES]
        all_reduce = [s for s in members if s.get("variable_update") == ALL_REDUCE]
        if not ps or not all_reduce:
            continue
        best_ps = max(ps, key=lambda s: s["images_per_sec"])
        ring = max(all_reduce, key=lambda s: s["images_per_sec"])
        ps_mean = float(best_ps["images_per_sec"])
        interval = difference_ci(ring, best_ps, confidence)
        row: dict[str, Any] = dict(zip(BEST_KEYS, key))
        row.update(
            ps_num_ps=best_ps.get("num_ps"),
            ps_variable_update=best_ps.get("variable_update"),
            ps_images_per_sec=ps_mean,
            ps_ci_low=best_ps.get("ci_low"),
            ps_ci_high=best_ps.get("ci_high"),
            ps_n_ok=best_ps.get("n_ok"),
            all_reduce_images_per_sec=ring["images_per_sec"],
            all_reduce_ci_low=ring.get("ci_low"),
            all_reduce_ci_high=ring.get("ci_high"),
            all_reduce_n_ok=ring.get("n_ok"),
            all_reduce_vs_ps_pct=relative_difference(ring["images_per_sec"], ps_mean),
            all_reduce_vs_ps_ci_low_pct=None if interval is None else interval[0] / ps_mean * 100.0,
            all_reduce_vs_ps_ci_high_pct=None if interval is None else interval[1] / ps_mean * 100.0,
            confidence=confidence,
        )
        higher = "all-reduce" if ring["images_per_sec"] > ps_mean else "PS"
        if interval is None:
            row["winner"] = f"{higher} (no interval)"
        elif interval[0] > 0:
            row["winner"] = "all-reduce"
        elif interval[1] < 0:
            row["winner"] = "PS"
        else:
            row["winner"] = "neither"
        out.append(row)
    out.sort(
        key=lambda r: (
            str(r["system"]),
            str(r["workload"]),
            str(r["model"]),
            _num(r["batch_size"]),
            _data_rank(r["data"]),
            _num(r["gpus"]),
        )
    )
    return out


def relative_difference(ours: float | None, reference: float | None) -> float | None:
    """(ours - reference) / reference x 100, in percent; None when either is unknown."""
    if ours is None or reference is None or not reference:
        return None
    return (float(ours) - float(reference)) / float(reference) * 100.0
