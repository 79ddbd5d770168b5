"""The report's plots as plain specs (rendered by ``dtfbench.report.plots``; written beside each
plot as its JSON sidecar)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

from . import reference as reference_data
from . import stats
from .analysis import Analysis, _group_of
from .tables import SETTING_COLUMNS, _group_title, _workload_suffix

# ---------------------------------------------------------------------------------------
# Plot specs (rendered by dtfbench.report.plots; written beside each plot as its JSON sidecar).
# ---------------------------------------------------------------------------------------

DATA_STYLE = {"synthetic": 0, "real": 1}


def _slug(*parts: Any) -> str:
    return "-".join(re.sub(r"[^A-Za-z0-9._-]+", "_", str(p)).strip("_") for p in parts)


def _points(rows: Iterable[Mapping[str, Any]], key: str, ci: bool = False) -> list[dict[str, Any]]:
    points = []
    for r in sorted(rows, key=lambda r: r["gpus"]):
        if r.get(key) is None:
            continue
        point = {"x": r["gpus"], "y": r[key]}
        if ci and r.get("ci_low") is not None:
            point.update(low=r["ci_low"], high=r["ci_high"])
        points.append(point)
    return points


def _series(label: str, source: str, points: list, style: int, **extra: Any) -> dict[str, Any]:
    return {"label": label, "source": source, "style": style, "points": points, **extra}


def plot_specs(analysis: Analysis) -> list[tuple[str, dict[str, Any]]]:
    """(name, spec) of every plot: per (system, model, batch) images/sec, speedup, efficiency;
    then I/O overhead over all systems, and speedup over all systems when there are several."""
    specs: list[tuple[str, dict[str, Any]]] = []
    used: set[str] = set()
    all_speedup: list[dict[str, Any]] = []
    seen_ref: set[tuple] = set()
    for system, workload, model, batch_size in analysis.groups():
        group = [
            r for r in analysis.best if _group_of(r) == (system, workload, model, batch_size) and r["status"] == "ok"
        ]
        if not group:
            continue
        slug = _slug(system, *([] if stats.is_ours(workload) else [workload]), model, f"bs{batch_size}")
        while slug in used:
            slug += "_"
        used.add(slug)
        theirs = analysis.ref_system(system)
        refs = analysis.matcher.rows_for(system) if theirs else []
        title = _group_title(system, workload, model, batch_size)
        series_of = partial(_data_series, system, group, theirs, refs)
        specs += _scaling_specs(series_of, slug, title)
        specs += step_split_specs(group, slug, title)
        specs += modes_specs(
            [r for r in analysis.modes if _group_of(r) == (system, workload, model, batch_size)], slug, title
        )
        all_speedup += _speedup_all_series(series_of("speedup", False), (system, workload, model, batch_size), seen_ref)
    specs += _io_overhead_specs(analysis)
    specs += _speedup_all_specs(all_speedup)
    return specs + accuracy_specs(analysis)


def _data_series(
    system: str, group: list[Mapping[str, Any]], theirs: str | None, refs: list[Mapping[str, Any]], key: str, ci: bool
) -> list[dict[str, Any]]:
    """A group's series of `key` per data kind, ours then the published ones beside them (those with points)."""
    datas = list(dict.fromkeys(r["data"] for r in group))
    ref_datas = [d for d in datas if any(r["data"] == d for r in refs)]
    series = [
        _series(
            f"{system} {d}",
            "ours",
            _points([r for r in group if r["data"] == d], key, ci),
            DATA_STYLE.get(d, 2),
            system=system,
            data=d,
        )
        for d in datas
    ]
    series += [
        _series(
            f"{reference_data.display_name(theirs)} {d} (published)",
            "published",
            _points([r for r in refs if r["data"] == d], key),
            DATA_STYLE.get(d, 2),
            system=theirs,
            data=d,
        )
        for d in ref_datas
    ]
    return [s for s in series if s["points"]]


def _scaling_specs(
    series_of: Callable[[str, bool], list[dict[str, Any]]], slug: str, title: str
) -> list[tuple[str, dict[str, Any]]]:
    """A group's images/sec bars, and its speedup and efficiency against the ideal line."""
    xs = sorted({p["x"] for s in series_of("speedup", False) for p in s["points"]})
    images_per_sec = {
        "plot": "images_per_sec",
        "kind": "bar",
        "x_scale": "category",
        "title": f"Training throughput: {title}",
        "x_label": "Number of GPUs",
        "y_label": "images/sec",
        "legend_title": "Data",
        "legend_loc": "upper left",
        "series": series_of("images_per_sec", True),
    }
    speedup = {
        "plot": "speedup",
        "kind": "line",
        "x_scale": "log2",
        "y_scale": "log2",
        "title": f"Speedup: {title}",
        "x_label": "Number of GPUs",
        "y_label": "speedup",
        "legend_title": "Data",
        "legend_loc": "upper left",
        "series": ([_series("ideal", "ideal", [{"x": x, "y": float(x)} for x in xs], 0)] if xs else [])
        + series_of("speedup", False),
    }
    efficiency = {
        "plot": "efficiency",
        "kind": "line",
        "x_scale": "log2",
        "title": f"Scaling efficiency: {title}",
        "x_label": "Number of GPUs",
        "y_label": "efficiency",
        "legend_title": "Data",
        "legend_loc": "lower left",
        "series": ([_series("ideal", "ideal", [{"x": x, "y": 1.0} for x in xs], 0)] if xs else [])
        + series_of("efficiency", False),
    }
    return [
        (f"images_per_sec-{slug}", images_per_sec),
        (f"speedup-{slug}", speedup),
        (f"efficiency-{slug}", efficiency),
    ]


def _speedup_all_series(series: list[dict[str, Any]], group_key: tuple, seen_ref: set[tuple]) -> list[dict[str, Any]]:
    """A group's speedup series for the every-system plot, labelled by group; each published one only once."""
    system, workload, model, batch_size = group_key
    out = []
    for s in series:
        if s["source"] == "published":
            if (s["system"], s["data"]) in seen_ref:
                continue
            seen_ref.add((s["system"], s["data"]))
        out.append(
            dict(
                s,
                label=s["label"]
                if s["source"] == "published"
                else f"{system} ({model}, bs {batch_size}{_workload_suffix(workload)}) {s['data']}",
            )
        )
    return out


def _io_overhead_specs(analysis: Analysis) -> list[tuple[str, dict[str, Any]]]:
    """The I/O overhead bars of every group, each system's published overhead beside it (none without I/O rows)."""
    if not analysis.io:
        return []
    series = []
    io_groups = list(dict.fromkeys(_group_of(r) for r in analysis.io))
    several = len({group[0] for group in io_groups}) < len(io_groups)
    for k, (system, workload, model, batch_size) in enumerate(io_groups):
        rows = [r for r in analysis.io if _group_of(r) == (system, workload, model, batch_size)]
        label = f"{system} ({model}, bs {batch_size}{_workload_suffix(workload)})" if several else system
        series.append(_series(label, "ours", _points(rows, "io_overhead"), k, system=system))
        theirs = analysis.ref_system(system)
        if theirs and not any(s["source"] == "published" and s["system"] == theirs for s in series):
            ref_rows = [r for (ref_system, _), r in analysis.ref_io.items() if ref_system == theirs]
            points = _points(ref_rows, "io_overhead")
            if points:
                series.append(
                    _series(f"{reference_data.display_name(theirs)} (published)", "published", points, k, system=theirs)
                )
    return [
        (
            "io_overhead",
            {
                "plot": "io_overhead",
                "kind": "bar",
                "x_scale": "category",
                "annotate": True,
                "title": "I/O overhead in distributed training: (synthetic - real) / synthetic",
                "x_label": "Number of GPUs",
                "y_label": "I/O overhead [%]",
                "legend_title": "System",
                "legend_loc": "upper left",
                "series": series,
            },
        )
    ]


def _speedup_all_specs(all_speedup: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Speedup of every group in one plot, restyled one by one (none unless several of ours)."""
    ours_all = [s for s in all_speedup if s["source"] == "ours"]
    if len(ours_all) <= 1:
        return []
    for k, s in enumerate(all_speedup):
        s["style"] = k
    xs = sorted({p["x"] for s in all_speedup for p in s["points"]})
    return [
        (
            "speedup-all",
            {
                "plot": "speedup_all",
                "kind": "line",
                "x_scale": "log2",
                "y_scale": "log2",
                "title": "Speedup, every system",
                "x_label": "Number of GPUs",
                "y_label": "speedup",
                "legend_title": "System",
                "legend_loc": "upper left",
                "series": [_series("ideal", "ideal", [{"x": x, "y": float(x)} for x in xs], 0)] + all_speedup,
            },
        )
    ]


SPLIT_PARTS = (
    ("compute_s", "compute (the 1-GPU step)"),
    ("transfer_s", "transfer (busiest NIC bytes / measured link rate)"),
    ("rest_s", "the rest"),
)


def modes_specs(rows: list[Mapping[str, Any]], slug: str, title: str) -> list[tuple[str, dict[str, Any]]]:
    """Per GPU count, the best PS configuration's images/sec beside all-reduce's, each with its
    95% CI (no plot when no count ran both)."""
    if not rows:
        return []
    series = []
    for style, (label, prefix) in enumerate((("best PS", "ps"), ("all-reduce", "all_reduce"))):
        for data in dict.fromkeys(r["data"] for r in rows):
            points = [
                {
                    "x": r["gpus"],
                    "y": r[f"{prefix}_images_per_sec"],
                    "low": r[f"{prefix}_ci_low"],
                    "high": r[f"{prefix}_ci_high"],
                }
                for r in sorted(rows, key=lambda r: r["gpus"])
                if r["data"] == data
            ]
            series.append(_series(f"{label} {data}", "ours", points, style, data=data, mode=label))
    return [
        (
            f"ps_or_all_reduce-{slug}",
            {
                "plot": "ps_or_all_reduce",
                "kind": "bar",
                "x_scale": "category",
                "title": f"PS or all-reduce: {title}",
                "x_label": "Number of GPUs",
                "y_label": "images/sec",
                "legend_title": "Mode",
                "legend_loc": "upper left",
                "series": series,
            },
        )
    ]


def step_split_specs(group: list[Mapping[str, Any]], slug: str, title: str) -> list[tuple[str, dict[str, Any]]]:
    """Per data kind, the best configuration's measured step per GPU count split into compute,
    transfer and the rest (dtfbench.report.bounds); none where no GPU count has a compute part.
    Without a measured link rate the transfer is unknown and the rest holds it (the legend says so)."""
    specs = []
    for data in dict.fromkeys(r["data"] for r in group):
        rows = sorted(
            (r for r in group if r["data"] == data and r.get("compute_s") is not None), key=lambda r: r["gpus"]
        )
        if not rows:
            continue
        known = any(r.get("transfer_s") is not None for r in rows)
        series = []
        for k, (key, label) in enumerate(SPLIT_PARTS):
            if key == "transfer_s" and not known:
                continue
            if key == "rest_s" and not known:
                label = "the rest (transfer included: no measured link rate)"
            points = [
                {"x": r["gpus"], "y": r.get(key) or 0.0, "bound": r.get("bound"), "step": r.get("step_time")}
                for r in rows
            ]
            series.append(_series(label, "ours", points, k, part=key))
        specs.append(
            (
                f"step_split-{slug}-{_slug(data)}",
                {
                    "plot": "step_split",
                    "kind": "stacked",
                    "x_scale": "category",
                    "title": f"Where the step goes: {title}, {data}",
                    "x_label": "Number of GPUs (bound)",
                    "y_label": "seconds per step",
                    "legend_title": "Part",
                    "legend_loc": "upper left",
                    "series": series,
                },
            )
        )
    return specs


# ---------------------------------------------------------------------------------------
# Accuracy (docs/accuracy.md): the curves, time to accuracy against GPUs, and the Summitdev
# study's shapes (top-1 after the same epochs against workers, PSs and batch size, its Figs. 8b,
# 9b and 13).
# ---------------------------------------------------------------------------------------

# What tells two configurations of one plot group apart, beside the GPU count: the mode, the PSs, and
# the settings the tables show a column for.
SETTING_KEYS = ("variable_update", "num_ps", *SETTING_COLUMNS)
MODE_SHORT = {
    "parameter_server": "PS",
    "distributed_replicated": "replicated",
    "collective_all_reduce": "all-reduce",
    "independent": "independent",
}


def setting_label(row: Mapping[str, Any], *, gpus: bool = True, num_ps: bool = True, batch: bool = False) -> str:
    """A configuration in a few words: '4 GPUs, PS x2, async, lr 0.01 linear'."""
    parts = [f"{row['gpus']} GPU{'s' if row['gpus'] != 1 else ''}"] if gpus else []
    mode = MODE_SHORT.get(row["variable_update"], row["variable_update"])
    if num_ps and row.get("num_ps"):
        mode += f" x{row['num_ps']}"
    parts.append(mode)
    if row.get("sync") is not None:
        parts.append("sync" if row["sync"] else "async")
    if batch:
        parts.append(f"bs {row['batch_size']}")
    if row.get("learning_rate") is not None:
        parts.append(f"lr {row['learning_rate']:g}" + (f" {row['lr_scaling']}" if row.get("lr_scaling") else ""))
    return ", ".join(parts)


def _curve_of(row: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Worker 0's accuracy curve of a stored run (it evaluates in every mode); [] without."""
    results = row.get("worker_results") or []
    chief = next((r for r in results if isinstance(r, Mapping) and r.get("task_index") == 0), None)
    accuracy = (chief or {}).get("accuracy") or {}
    return [p for p in accuracy.get("curve") or [] if p.get("top1") is not None]


def mean_curve(rows: Iterable[Mapping[str, Any]], x: str) -> list[dict[str, Any]]:
    """The repetitions' curves averaged point by point (the same measured steps), x one of
    'wall_seconds' or 'epoch', with the lowest and highest top-1 at each point."""
    by_step: dict[int, list[Mapping[str, Any]]] = {}
    for row in rows:
        for point in _curve_of(row):
            if point.get(x) is not None:
                by_step.setdefault(int(point["step"]), []).append(point)
    out = []
    for step in sorted(by_step):
        points = by_step[step]
        tops = [float(p["top1"]) for p in points]
        out.append(
            {
                "x": sum(float(p[x]) for p in points) / len(points),
                "y": sum(tops) / len(tops),
                "low": min(tops),
                "high": max(tops),
                "step": step,
                "runs": len(points),
            }
        )
    return out


def accuracy_specs(analysis: Analysis) -> list[tuple[str, dict[str, Any]]]:
    """Per plot group with held-out accuracy: top-1 against wall time and epochs per configuration,
    time to accuracy against GPUs, and top-1 against workers, PSs and batch size."""
    specs: list[tuple[str, dict[str, Any]]] = []
    ok_rows = [r for r in analysis.rows if r.get("status") == "ok" and r.get("eval_top1") is not None]
    groups = list(dict.fromkeys((r["system"], stats.workload_label(r), r.get("model")) for r in ok_rows))
    for system, workload, model in groups:
        rows = [
            r for r in ok_rows if (r["system"], stats.workload_label(r), r.get("model")) == (system, workload, model)
        ]
        slug = _slug(system, *([] if stats.is_ours(workload) else [workload]), model)
        title = f"{system}, {model}{_workload_suffix(workload)}"
        configs: dict[tuple, list[Mapping[str, Any]]] = {}
        for r in rows:
            configs.setdefault(tuple(r.get(k) for k in ("gpus", "batch_size", *SETTING_KEYS)), []).append(r)
        batches = {r.get("batch_size") for r in rows}
        targets = sorted({r["target_accuracy"] for r in rows if r.get("target_accuracy")})
        target_line = [_series(f"target {t:g}", "ideal", [], 0, target=t) for t in targets]
        for x, label, name in (("wall_seconds", "seconds from the first step", "time"), ("epoch", "epochs", "epochs")):
            series = []
            for k, (_key, members) in enumerate(configs.items()):
                points = mean_curve(members, x)
                if points:
                    label_of = setting_label(members[0], batch=len(batches) > 1)
                    series.append(_series(f"{label_of} ({len(members)} runs)", "ours", points, k))
            if not series:
                continue
            xs = [p["x"] for s in series for p in s["points"]]
            lines = [
                dict(s, points=[{"x": min(xs), "y": s["target"]}, {"x": max(xs), "y": s["target"]}])
                for s in target_line
            ]
            specs.append(
                (
                    f"accuracy_{name}-{slug}",
                    {
                        "plot": f"accuracy_{name}",
                        "kind": "line",
                        "x_scale": "linear",
                        "title": f"Held-out top-1 against {label.split(' ')[0]}: {title}",
                        "x_label": label,
                        "y_label": "held-out top-1 (mean of the runs; bars: lowest and highest)",
                        "legend_title": "Configuration",
                        "legend_loc": "lower right",
                        "series": lines + series,
                    },
                )
            )
        specs += _time_to_accuracy_spec(
            [s for s in analysis.summaries if _same_group(s, system, workload, model)], slug, title
        )
        specs += _summitdev_specs(
            [s for s in analysis.summaries if _same_group(s, system, workload, model)], slug, title
        )
    return specs


def _same_group(row: Mapping[str, Any], system: Any, workload: Any, model: Any) -> bool:
    return (row.get("system"), row.get("workload"), row.get("model")) == (system, workload, model)


def _time_to_accuracy_spec(
    summaries: list[Mapping[str, Any]], slug: str, title: str
) -> list[tuple[str, dict[str, Any]]]:
    """Time to accuracy (MLPerf's score of the repetitions; bars: the mean's 95% CI) against GPUs,
    one series per setting."""
    timed = [s for s in summaries if s.get("status") == "ok" and s.get("time_to_accuracy") is not None]
    if not timed:
        return []
    by_setting: dict[tuple, list[Mapping[str, Any]]] = {}
    for s in timed:
        by_setting.setdefault(tuple(s.get(k) for k in ("batch_size", *SETTING_KEYS) if k != "num_ps"), []).append(s)
    series = []
    for k, members in enumerate(by_setting.values()):
        best: dict[int, Mapping[str, Any]] = {}
        for s in members:  # per GPU count, the PS count first to the target
            if s["gpus"] not in best or s["time_to_accuracy"] < best[s["gpus"]]["time_to_accuracy"]:
                best[s["gpus"]] = s
        points = [
            {"x": g, "y": best[g]["time_to_accuracy"], "low": best[g].get("tta_ci_low"), "high": best[g].get("tta_ci_high"),
             "num_ps": best[g].get("num_ps")}
            for g in sorted(best)
        ]  # fmt: skip
        series.append(_series(setting_label(members[0], gpus=False, num_ps=False, batch=True), "ours", points, k))
    return [
        (
            f"time_to_accuracy-{slug}",
            {
                "plot": "time_to_accuracy",
                "kind": "line",
                "x_scale": "log2",
                "title": f"Time to accuracy: {title}",
                "x_label": "Number of GPUs",
                "y_label": "seconds to the target (MLPerf score; bars: 95% CI of the mean)",
                "legend_title": "Setting (fastest PS count)",
                "legend_loc": "upper right",
                "series": series,
            },
        )
    ]


# The Summitdev study's accuracy figures: top-1 after the same epochs against one parameter, the
# others fixed (Fig. 8b: workers, 9b: PSs, 13: batch size).
SUMMITDEV_AXES = (
    ("num_workers", "workers", "workers", "Number of workers", "log2"),
    ("num_ps", "parameter_servers", "parameter servers", "Number of parameter servers", "linear"),
    ("batch_size", "batch_size", "batch size", "Batch size per device", "log2"),
)


def _summitdev_specs(summaries: list[Mapping[str, Any]], slug: str, title: str) -> list[tuple[str, dict[str, Any]]]:
    measured = [s for s in summaries if s.get("status") == "ok" and s.get("eval_top1") is not None]
    specs = []
    for axis, name, noun, x_label, scale in SUMMITDEV_AXES:
        others = [k for k in ("num_workers", "gpus", "batch_size", *SETTING_KEYS) if k != axis]
        if axis == "num_workers":
            others.remove("gpus")
        lines: dict[tuple, list[Mapping[str, Any]]] = {}
        for s in measured:
            lines.setdefault(tuple(s.get(k) for k in others), []).append(s)
        series = []
        for members in lines.values():
            if len({s.get(axis) for s in members}) < 2:
                continue
            points = [
                {"x": s[axis], "y": s["eval_top1"], "low": s.get("eval_top1_min"), "high": s.get("eval_top1_max")}
                for s in sorted(members, key=lambda s: s[axis])
            ]
            first = members[0]
            label = setting_label(
                first, gpus=axis != "num_workers", num_ps=axis != "num_ps", batch=axis != "batch_size"
            )
            series.append(_series(label, "ours", points, len(series)))
        if series:
            specs.append(
                (
                    f"accuracy_vs_{name}-{slug}",
                    {
                        "plot": f"accuracy_vs_{name}",
                        "kind": "line",
                        "x_scale": scale,
                        "title": f"Held-out top-1 after the same training against the {noun}: {title}",
                        "x_label": x_label,
                        "y_label": "held-out top-1 (mean; bars: lowest and highest run)",
                        "legend_title": "Configuration",
                        "legend_loc": "lower left",
                        "series": series,
                    },
                )
            )
    return specs
