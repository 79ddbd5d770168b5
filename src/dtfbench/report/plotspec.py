"""The report's plots as plain specs (rendered by ``dtfbench.report.plots``; written beside each
plot as its JSON sidecar)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from . import reference as reference_data
from . import stats
from .analysis import Analysis, _group_of
from .tables import _group_title, _workload_suffix

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
    for _g, (system, workload, model, batch_size) in enumerate(analysis.groups()):
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
        datas = list(dict.fromkeys(r["data"] for r in group))
        ref_datas = [d for d in datas if any(r["data"] == d for r in refs)]
        title = _group_title(system, workload, model, batch_size)

        def make(key: str, ci: bool) -> list[dict[str, Any]]:
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

        xs = sorted({p["x"] for s in make("speedup", False) for p in s["points"]})
        specs.append(
            (
                f"images_per_sec-{slug}",
                {
                    "plot": "images_per_sec",
                    "kind": "bar",
                    "x_scale": "category",
                    "title": f"Training throughput: {title}",
                    "x_label": "Number of GPUs",
                    "y_label": "images/sec",
                    "legend_title": "Data",
                    "legend_loc": "upper left",
                    "series": make("images_per_sec", True),
                },
            )
        )
        specs.append(
            (
                f"speedup-{slug}",
                {
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
                    + make("speedup", False),
                },
            )
        )
        specs.append(
            (
                f"efficiency-{slug}",
                {
                    "plot": "efficiency",
                    "kind": "line",
                    "x_scale": "log2",
                    "title": f"Scaling efficiency: {title}",
                    "x_label": "Number of GPUs",
                    "y_label": "efficiency",
                    "legend_title": "Data",
                    "legend_loc": "lower left",
                    "series": ([_series("ideal", "ideal", [{"x": x, "y": 1.0} for x in xs], 0)] if xs else [])
                    + make("efficiency", False),
                },
            )
        )
        specs += step_split_specs(group, slug, title)
        specs += modes_specs(
            [r for r in analysis.modes if _group_of(r) == (system, workload, model, batch_size)], slug, title
        )
        for s in make("speedup", False):
            if s["source"] == "published":
                if (s["system"], s["data"]) in seen_ref:
                    continue
                seen_ref.add((s["system"], s["data"]))
            all_speedup.append(
                dict(
                    s,
                    label=s["label"]
                    if s["source"] == "published"
                    else f"{system} ({model}, bs {batch_size}{_workload_suffix(workload)}) {s['data']}",
                )
            )

    if analysis.io:
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
                        _series(
                            f"{reference_data.display_name(theirs)} (published)", "published", points, k, system=theirs
                        )
                    )
        specs.append(
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
        )

    ours_all = [s for s in all_speedup if s["source"] == "ours"]
    if len(ours_all) > 1:
        for k, s in enumerate(all_speedup):
            s["style"] = k
        xs = sorted({p["x"] for s in all_speedup for p in s["points"]})
        specs.append(
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
        )
    return specs


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
