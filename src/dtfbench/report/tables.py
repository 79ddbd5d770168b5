"""The report's tables: the per-configuration table printed after a sweep, and the CSV
(every column, raw numbers) and Markdown (per system, formatted) files of the report.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import bounds, markdown, stats
from . import environment as report_environment
from . import reference as reference_data
from .analysis import CONFIG_KEYS, Analysis, _group_of

# ---------------------------------------------------------------------------------------
# The per-configuration table printed after a sweep (`table`).
# ---------------------------------------------------------------------------------------


def _f(value: Any, spec: str = ".2f") -> str:
    """A figure as the tables print it: `spec`, or "-" for none."""
    return "-" if value is None else format(value, spec)


def _model_label(row: Mapping[str, Any]) -> str:
    """The model, and the workload that ran it when it is not ours."""
    workload = row.get("workload")
    return str(row["model"]) + ("" if stats.is_ours(workload) else f" ({workload})")


def format_table(summaries: list[dict[str, Any]]) -> str:
    """The per-configuration table printed after a sweep, then its failed runs, bounds and environment splits."""
    header = (
        "system",
        "model",
        "data",
        "gpus",
        "workers",
        "ps",
        "variable_update",
        "runs",
        "img/s/worker",
        "img/s total",
        "±95%",
        "min",
        "max",
        "spread",
        "CV",
        "speedup",
        "efficiency",
        "nic GB/s in/out",
        "in+out of link",
        "bound",
    )
    # Held-out accuracy where a configuration measured it (eval_every_steps), mean over its ok runs.
    evaluated = any(s.get("eval_top1") is not None for s in summaries)
    timed = any(s.get("tta_runs") for s in summaries)
    # What tells apart configurations that differ in a setting of their own (sync=true,false, ...).
    settings = _setting_columns(summaries)
    header += tuple(settings)
    if evaluated:
        header += ("top-1", "top-5")
    if timed:
        header += ("to target s",)
    lines = [header] + [_summary_cells(s, settings, evaluated, timed) for s in summaries]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [
        "  ".join(cell.rjust(w) if i >= 3 else cell.ljust(w) for i, (cell, w) in enumerate(zip(line, widths)))
        for line in lines
    ]
    text.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(text + _summary_notes(summaries))


def _summary_cells(s: Mapping[str, Any], settings: list[str], evaluated: bool, timed: bool) -> tuple[str, ...]:
    """One configuration's cells of format_table, in the order of its header."""
    runs = f"{s['runs'] - s['failed']}/{s['runs']}"
    return (
        (
            str(s["system"]),
            _model_label(s),
            str(s["data"]),
            str(s["gpus"]),
            _f(s["num_workers"], "d"),
            str(s["num_ps"]),
            str(s["variable_update"]),
            runs,
            _f(s["images_per_sec_per_worker"], ".2f"),
            _f(s["images_per_sec"], ".2f"),
            _f(s.get("ci_half_width"), ".2f"),
            _f(s["images_per_sec_min"], ".2f"),
            _f(s["images_per_sec_max"], ".2f"),
            _variability(s.get("spread")),
            _variability(s.get("cv")),
            _f(s["speedup"], ".2f"),
            _f(s["efficiency"], ".4f"),
            _nic_in_out(s),
            _share(s.get("nic_share")),
            str(s.get("bound") or "-"),
        )
        + tuple(_setting(k, s.get(k)) for k in settings)
        + ((_f(s.get("eval_top1"), ".4f"), _f(s.get("eval_top5"), ".4f")) if evaluated else ())
        + ((_tta(s),) if timed else ())
    )


def _summary_notes(summaries: list[dict[str, Any]]) -> list[str]:
    """The lines below format_table's table: failed runs, what bounds each step, environment splits."""
    text = []
    failures = [
        f"  {s['gpus']} GPUs, {s['num_ps']} PS, {s['variable_update']}: {reason}"
        for s in summaries
        for reason in s["reasons"]
    ]
    if failures:
        text += ["", "failed runs:"] + failures
    verdicts = [
        f"  {s['gpus']} GPUs, {s['num_ps']} PS, {s['variable_update']}: {s['bound']}: {s['bound_why']}"
        for s in summaries
        if s.get("bound")
    ]
    if verdicts:
        text += ["", "what bounds the step (docs/network.md):"] + verdicts
    split = report_environment.splits(summaries, report_environment.labels(summaries))
    if split:
        text += ["", "kept apart by their environment (the report's environments.md):"] + [f"  {s}" for s in split]
    return text


# Configuration keys a plan sets only when asked (dtfbench.plan.sweep.OPTIONAL_KEYS): a column each in
# the tables where some configuration has one, so that rows that differ only there can be told apart.
SETTING_COLUMNS = (
    "storage",
    "cache",
    "background_io",
    "sync",
    "optimizer",
    "learning_rate",
    "lr_scaling",
    "warmup_epochs",
    "eval_every_steps",
    "target_accuracy",
    "max_epochs",
    "checkpoint_every_steps",
    "checkpoint_every_secs",
)
# Configuration keys every run has that the tables show no column for (the sweep's own constants,
# mostly): a column each where the configurations shown differ in it. Two sweeps of other steps,
# batch sizes or PS placement in one store are otherwise two rows that look the same (issue 56).
VARYING_COLUMNS = ("batch_size", "devices_per_worker", "ps_on_worker_nodes", "warmup_steps", "steps", "input_format")


def _setting_columns(rows: list[Mapping[str, Any]], shown: tuple[str, ...] = ()) -> list[str]:
    """The settings some row has, then the other keys in which the rows differ (not in `shown`)."""
    settings = [k for k in SETTING_COLUMNS if any(r.get(k) is not None for r in rows)]
    return settings + [k for k in VARYING_COLUMNS if k not in shown and len({str(r.get(k)) for r in rows}) > 1]


def _setting(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key in ("sync", "ps_on_worker_nodes"):  # booleans, stored as 0 or 1
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _tta(row: Mapping[str, Any]) -> str:
    """Time to the target accuracy as MLPerf scores the repetitions, or why there is none."""
    if not row.get("tta_runs"):
        return "-"
    score = row.get("time_to_accuracy")
    return _f(score, ".2f") if score is not None else "not converged"


def _nic_in_out(row: Mapping[str, Any]) -> str:
    """The busiest node's GB/s in and out, or '-' (unknown)."""
    if row.get("nic_rx_gb_per_s") is None or row.get("nic_tx_gb_per_s") is None:
        return "-"
    return f"{row['nic_rx_gb_per_s']:.3g}/{row['nic_tx_gb_per_s']:.3g}"


def _share(value: Any) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _variability(value: Any) -> str:
    # Run-to-run spreads of images/sec are often under a few percent: one decimal.
    return "-" if value is None else f"{value * 100:.1f}%"


# ---------------------------------------------------------------------------------------
# Tables: CSV (every column, raw numbers) and Markdown (per system, formatted).
# ---------------------------------------------------------------------------------------


def _csv_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(round(value, 6))
    if isinstance(value, (list, tuple)):
        return "; ".join(str(v) for v in value)
    return str(value)


def _csv(header: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow([_csv_value(row.get(name)) for name in header])
    return buf.getvalue()


def _cell(value: Any) -> str:
    return markdown.cell(value) or " "


_NUMERIC = re.compile(r"^([+-]?\d[\d.]*(%| pp)?|\[.*\]|\d+/\d+)$")


def _md_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A Markdown table; columns of numbers (and '-', 'failed', blanks) right-aligned."""
    rows = [[_cell(c) for c in row] for row in rows]
    right = [
        bool(rows)
        and all(_NUMERIC.match(row[i]) or row[i] in ("-", " ", "failed") for row in rows)
        and any(_NUMERIC.match(row[i]) for row in rows)
        for i in range(len(header))
    ]
    lines = [
        "| " + " | ".join(_cell(h) for h in header) + " |",
        "|" + "|".join("---:" if r else ":---" for r in right) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _ci(low: Any, high: Any) -> str:
    return "-" if low is None or high is None else f"[{low:.2f}, {high:.2f}]"


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value:+.1f}%"


def _pp(value: Any) -> str:
    return "-" if value is None else f"{value:+.2f} pp"


def _group_title(system: Any, workload: Any, model: Any, batch_size: Any) -> str:
    """A group's heading (Markdown): its names escaped."""
    return markdown.text(f"{system}: {model}, batch {batch_size} per GPU" + _workload_suffix(workload))


def _workload_suffix(workload: Any) -> str:
    """', measured with tf_cnn_benchmarks@REF (COMMIT)' for another workload than ours."""
    return "" if stats.is_ours(workload) else f", measured with {workload}"


def _ref_label(analysis: Analysis, system: str) -> str:
    theirs = analysis.ref_system(system)
    if theirs is None:
        if analysis.reference == "none":
            return ""
        return f"Published counterpart: none ({markdown.code(system)} maps to no published system)."
    sources = sorted({r["source"] for r in analysis.matcher.rows_for(system)})
    return f"Published counterpart: {reference_data.display_name(theirs)} (`{theirs}`, {', '.join(sources)})."


BEST_CSV = (
    "system",
    "workload",
    "tf_version",
    "model",
    "batch_size",
    "data",
    "gpus",
    "status",
    "num_ps",
    "variable_update",
    "num_workers",
    "devices_per_worker",
    *stats.FIGURES,
    "n_ok",
    "failed_runs",
    "configurations",
    "failed_configurations",
    "speedup",
    "efficiency",
    "io_overhead_pct",
    "reasons",
    *bounds.KEYS,
)
BEST_REF_CSV = (
    "ref_system",
    "ref_source",
    "ref_num_ps",
    "ref_variable_update",
    "ref_images_per_sec",
    "ref_speedup",
    "ref_efficiency",
    "ref_io_overhead_pct",
    "diff_images_per_sec_pct",
    "diff_speedup_pct",
    "diff_efficiency_pct",
    "diff_io_overhead_pp",
)


def best_rows(analysis: Analysis) -> list[dict[str, Any]]:
    """The best-configuration rows with I/O overhead and, when matched, the published columns."""
    io_by = {(*_group_of(r), r["gpus"]): r for r in analysis.io}
    out = []
    for r in analysis.best:
        row = dict(r)
        io_row = io_by.get((*_group_of(r), r["gpus"]))
        row["io_overhead_pct"] = io_row["io_overhead"] if io_row else None
        ref = analysis.ref_for(r["system"], r["gpus"], r["data"])
        if ref is not None:
            ref_io = analysis.ref_io.get((ref["system"], ref["gpus"]))
            row.update(
                ref_system=ref["system"],
                ref_source=ref["source"],
                ref_num_ps=ref["num_ps"],
                ref_variable_update=ref["variable_update"],
                ref_images_per_sec=ref["images_per_sec"],
                ref_speedup=ref["speedup"],
                ref_efficiency=ref["efficiency"],
                ref_io_overhead_pct=ref_io["io_overhead"] if ref_io else None,
                diff_images_per_sec_pct=stats.relative_difference(r["images_per_sec"], ref["images_per_sec"]),
                diff_speedup_pct=stats.relative_difference(r["speedup"], ref["speedup"]),
                diff_efficiency_pct=stats.relative_difference(r["efficiency"], ref["efficiency"]),
            )
            if row["io_overhead_pct"] is not None and row["ref_io_overhead_pct"] is not None:
                row["diff_io_overhead_pp"] = row["io_overhead_pct"] - row["ref_io_overhead_pct"]
        out.append(row)
    return out


def best_tables(analysis: Analysis) -> tuple[str, str]:
    """best_configurations.csv and .md: the study's Tables 1-3 for our systems."""
    rows = best_rows(analysis)
    with_ref = analysis.reference != "none"
    csv_text = _csv(BEST_CSV + (BEST_REF_CSV if with_ref else ()), rows)
    md = _best_intro(analysis, with_ref)
    for group_key in analysis.groups():
        md += _best_group(analysis, [r for r in rows if _group_of(r) == group_key], group_key)
    return csv_text, "\n".join(md) + "\n"


def _best_intro(analysis: Analysis, with_ref: bool) -> list[str]:
    """best_configurations.md's title, what its columns mean, and the analysis' notes."""
    md = [
        "# Best configuration per system and GPU count",
        "",
        "As the study's Tables 1-3: for each GPU count and data kind, the configuration (parameter "
        "servers, variable update) with the highest mean images/sec over its successful repetitions; "
        "95% CI of that mean (Student t); speedup and efficiency against the best 1-GPU "
        "configuration of the same system, model, batch size and data; I/O overhead = "
        "(synthetic - real) / synthetic x 100.",
    ]
    if with_ref:
        md += [
            "",
            "Published columns: the study's numbers for the system ours maps to (same GPU count and "
            "data); Δ = (ours - published) / published, and for the I/O overhead the difference in "
            "percentage points.",
        ]
    for notes_line in analysis.notes:
        md += ["", f"> Note: {markdown.text(notes_line)}"]
    return md


def _best_group(analysis: Analysis, group: list[dict[str, Any]], group_key: tuple) -> list[str]:
    """One plot group's section of best_configurations.md: its best table, failures, modes, I/O, accuracy."""
    system, workload, model, batch_size = group_key
    matched = analysis.ref_system(system) is not None
    md = ["", f"## {_group_title(system, workload, model, batch_size)}", ""]
    label = _ref_label(analysis, system)
    if label:
        md += [label, ""]
    md += _best_table(group, matched)
    failed_groups = [r for r in group if r["status"] != "ok"]
    if failed_groups:
        md += ["", "Failed (every configuration of the GPU count failed; see failures.md):", ""]
        md += [
            "- " + markdown.text(f"{r['gpus']} GPUs, {r['data']}: {'; '.join(r['reasons']) or stats.NO_REASON}")
            for r in failed_groups
        ]
    md += _modes_section([r for r in analysis.modes if _group_of(r) == group_key])
    md += _io_overhead_section(analysis, system, [r for r in analysis.io if _group_of(r) == group_key], matched)
    md += _fastest_to_target([r for r in analysis.summaries if _group_of(r) == group_key])
    return md


def _best_table(group: list[dict[str, Any]], matched: bool) -> list[str]:
    """The Markdown table of a group's best configuration per GPU count, the published one beside it when matched."""
    header = ["GPUs", "data", "PS", "variable update", "img/s", "95% CI", "n", "speedup", "efficiency"]
    if matched:
        header += [
            "published PS",
            "published variable update",
            "published img/s",
            "Δ img/s",
            "published efficiency",
            "Δ efficiency",
        ]
    header += ["busiest NIC GB/s in/out", "in+out of link", "bound"]
    body = []
    for r in group:
        failed = r["status"] != "ok"
        line = [
            r["gpus"],
            r["data"],
            _f(r["num_ps"], "d") if not failed else "-",
            r["variable_update"] or "-",
            "failed" if failed else _f(r["images_per_sec"]),
            _ci(r["ci_low"], r["ci_high"]),
            f"{r['n_ok']}/{r['runs']}",
            _f(r["speedup"]),
            _f(r["efficiency"], ".4f"),
        ]
        if matched:
            line += [
                _f(r.get("ref_num_ps"), "d"),
                r.get("ref_variable_update") or "-",
                _f(r.get("ref_images_per_sec")),
                _pct(r.get("diff_images_per_sec_pct")),
                _f(r.get("ref_efficiency"), ".4f"),
                _pct(r.get("diff_efficiency_pct")),
            ]
        line += [_nic_in_out(r), _share(r.get("nic_share")), r.get("bound") or "-"]
        body.append(line)
    return _md_table(header, body)


def _io_overhead_section(
    analysis: Analysis, system: str, io_group: list[Mapping[str, Any]], matched: bool
) -> list[str]:
    """best_configurations.md's I/O overhead part of one group (nothing without synthetic and real results)."""
    if not io_group:
        return []
    md = ["", "### I/O overhead", ""]
    header = ["GPUs", "synthetic img/s", "real img/s", "I/O overhead %"]
    if matched:
        header += ["published I/O overhead %", "Δ"]
    body = []
    for r in io_group:
        line = [r["gpus"], _f(r["synthetic"]), _f(r["real"]), _f(r["io_overhead"])]
        if matched:
            ref_io = analysis.ref_io.get((analysis.ref_system(system), r["gpus"]))
            ref_value = ref_io["io_overhead"] if ref_io else None
            line += [_f(ref_value), _pp(None if ref_value is None else r["io_overhead"] - ref_value)]
        body.append(line)
    return md + _md_table(header, body)


def fastest_to_target(summaries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per data and GPU count of a group: the configuration that reached the target accuracy first
    (MLPerf's score over its repetitions), beside the one with the most images/sec among those
    that ran to it, and whether they are the same."""
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for s in summaries:
        if s.get("tta_runs"):
            groups.setdefault((s["data"], s["gpus"]), []).append(s)
    rows = []
    for (data, gpus), members in groups.items():
        timed = [s for s in members if s.get("time_to_accuracy") is not None]
        fastest = min(timed, key=lambda s: s["time_to_accuracy"]) if timed else None
        speed = [s for s in members if s.get("images_per_sec") is not None]
        quickest = max(speed, key=lambda s: s["images_per_sec"]) if speed else None
        rows.append(
            {
                "data": data,
                "gpus": gpus,
                "target_accuracy": members[0].get("target_accuracy"),
                "fastest": fastest,
                "most_images": quickest,
                "same": fastest is not None and fastest is quickest,
            }
        )
    return sorted(rows, key=lambda r: (r["data"] != "synthetic", str(r["data"]), r["gpus"] or 0))


def _config_name(s: Mapping[str, Any] | None) -> str:
    return "-" if s is None else f"{s['num_ps']} PS, {s['variable_update']}"


def _fastest_to_target(summaries: list[Mapping[str, Any]]) -> list[str]:
    rows = fastest_to_target(summaries)
    if not rows:
        return []
    md = [
        "",
        "### Fastest to the target accuracy",
        "",
        "Per GPU count, the configuration that reached the held-out target first (time to accuracy as MLPerf "
        "scores repetitions) beside the one with the most images/sec among those that ran to it; where they "
        "differ, the fastest images did not make the fastest training (docs/accuracy.md).",
        "",
    ]
    header = ["data", "GPUs", "target top-1", "fastest to target", "time to target s", "most img/s", "img/s", "same"]
    body = [
        [
            r["data"],
            r["gpus"],
            _f(r["target_accuracy"], ".3f"),
            _config_name(r["fastest"]),
            _tta(r["fastest"]) if r["fastest"] else "not converged",
            _config_name(r["most_images"]),
            _f(r["most_images"]["images_per_sec"]) if r["most_images"] else "-",
            "yes" if r["same"] else "no",
        ]
        for r in rows
    ]
    return md + _md_table(header, body)


def mode_verdict(row: Mapping[str, Any]) -> str:
    """One line: which of the best PS configuration and all-reduce wins at this count, by how
    much, with the confidence interval of the difference."""
    diff = row["all_reduce_vs_ps_pct"]
    low, high = row["all_reduce_vs_ps_ci_low_pct"], row["all_reduce_vs_ps_ci_high_pct"]
    confidence = f"{row.get('confidence', stats.CONFIDENCE) * 100:.0f}%"
    interval = (
        "no interval: fewer than 2 repetitions on a side"
        if low is None
        else f"{confidence} CI {low:+.1f}% to {high:+.1f}%"
    )
    winner = row["winner"]
    if winner == "neither":
        return f"neither: all-reduce {diff:+.1f}% against the best PS configuration ({interval}, which holds 0)"
    faster = "all-reduce" if diff > 0 else "the best PS configuration"
    return f"{winner}: {faster} faster by {abs(diff):.1f}% ({interval})"


def _modes_section(rows: list[Mapping[str, Any]]) -> list[str]:
    """best_configurations.md's "PS or all-reduce" part of one group (nothing when no GPU
    count ran both)."""
    if not rows:
        return []
    md = [
        "",
        "### PS or all-reduce",
        "",
        "Per GPU count, the best parameter-server configuration (either PS mode, any PS count) beside "
        "collective_all_reduce; the difference is (all-reduce - PS) / PS with Welch's confidence "
        "interval of the difference of the two means.",
        "",
    ]
    header = ["GPUs", "data", "best PS", "PS img/s", "PS 95% CI", "all-reduce img/s", "all-reduce 95% CI", "winner"]
    body = [
        [
            r["gpus"],
            r["data"],
            f"{r['ps_num_ps']} PS, {r['ps_variable_update']}",
            _f(r["ps_images_per_sec"]),
            _ci(r["ps_ci_low"], r["ps_ci_high"]),
            _f(r["all_reduce_images_per_sec"]),
            _ci(r["all_reduce_ci_low"], r["all_reduce_ci_high"]),
            mode_verdict(r),
        ]
        for r in rows
    ]
    return md + _md_table(header, body)


def modes_table(analysis: Analysis) -> str:
    """ps_or_all_reduce.csv: the best PS configuration beside all-reduce per GPU count."""
    return _csv(stats.MODES_CSV, analysis.modes)


IO_CSV = (
    "system",
    "workload",
    "model",
    "batch_size",
    "gpus",
    "synthetic",
    "real",
    "synthetic_num_ps",
    "synthetic_variable_update",
    "real_num_ps",
    "real_variable_update",
    "io_overhead_pct",
)
IO_REF_CSV = ("ref_system", "ref_synthetic", "ref_real", "ref_io_overhead_pct", "diff_io_overhead_pp")


def io_table(analysis: Analysis) -> str:
    rows = []
    for r in analysis.io:
        row = dict(r, io_overhead_pct=r["io_overhead"])
        theirs = analysis.ref_system(r["system"])
        ref_io = analysis.ref_io.get((theirs, r["gpus"])) if theirs else None
        if ref_io:
            row.update(
                ref_system=theirs,
                ref_synthetic=ref_io["synthetic"],
                ref_real=ref_io["real"],
                ref_io_overhead_pct=ref_io["io_overhead"],
                diff_io_overhead_pp=r["io_overhead"] - ref_io["io_overhead"],
            )
        rows.append(row)
    return _csv(IO_CSV + (IO_REF_CSV if analysis.reference != "none" else ()), rows)


CONFIG_CSV = CONFIG_KEYS + (
    "runs",
    "n_ok",
    "failed",
    "status",
    *stats.FIGURES,
    "images_per_sec_per_worker",
    "speedup",
    "efficiency",
    "is_best",
    "reasons",
    "sweep_ids",
    "environment_split",
    *bounds.KEYS,
    *stats.ACCURACY,
)
CONFIG_REF_CSV = (
    "ref_system",
    "ref_images_per_sec",
    "ref_num_ps",
    "ref_variable_update",
    "ref_is_same_config",
    "diff_images_per_sec_pct",
)


def configuration_rows(analysis: Analysis) -> list[dict[str, Any]]:
    best_keys = {r["best_key"] for r in analysis.best if r.get("best_key") is not None}
    out = []
    for s in analysis.summaries:
        row = dict(s, is_best=tuple(s.get(k) for k in CONFIG_KEYS) in best_keys)
        ref = analysis.ref_for(s["system"], s["gpus"], s["data"])
        if ref is not None:
            row.update(
                ref_system=ref["system"],
                ref_images_per_sec=ref["images_per_sec"],
                ref_num_ps=ref["num_ps"],
                ref_variable_update=ref["variable_update"],
                ref_is_same_config=(ref["num_ps"], ref["variable_update"]) == (s["num_ps"], s["variable_update"]),
                diff_images_per_sec_pct=stats.relative_difference(s["images_per_sec"], ref["images_per_sec"]),
            )
        out.append(row)
    return out


def configuration_tables(analysis: Analysis) -> tuple[str, str]:
    """configurations.csv and .md: every configuration with mean, 95% CI, min/max, failures."""
    rows = configuration_rows(analysis)
    with_ref = analysis.reference != "none"
    csv_text = _csv(CONFIG_CSV + (CONFIG_REF_CSV if with_ref else ()), rows)
    md = [
        "# Every configuration",
        "",
        "Mean images/sec over the successful repetitions, the 95% confidence interval of the mean "
        "(Student t; none with a single repetition), min/max, the run-to-run variability as the Summitdev "
        "study shows it (spread: (max - min) / mean; CV: standard deviation / mean), runs ok of runs, "
        "speedup and efficiency "
        "against the best 1-GPU configuration. ★ marks the best configuration of its GPU count and data "
        "(best_configurations.md); a configuration whose runs all failed is never best.",
    ]
    for system, workload, model, batch_size in analysis.groups():
        group = [r for r in rows if _group_of(r) == (system, workload, model, batch_size)]
        matched = analysis.ref_system(system) is not None
        md += ["", f"## {_group_title(system, workload, model, batch_size)}", ""]
        group.sort(key=_configuration_order)  # the table and the bounds after it list them in this order
        md += _configuration_table(group, matched)
        md += _where_the_time_goes([r for r in group if r["status"] == "ok"])
    return csv_text, "\n".join(md) + "\n"


def _configuration_order(r: Mapping[str, Any]) -> tuple:
    """The sort key of configurations.md's rows: synthetic data first, then data, GPUs, mode, PSs."""
    return (
        r["data"] != "synthetic",
        str(r["data"]),
        r["gpus"] or 0,
        str(r["variable_update"]),
        r["num_ps"] or 0,
    )


def _configuration_table(group: list[dict[str, Any]], matched: bool) -> list[str]:
    """The Markdown table of a group's configurations, in the order given."""
    header = [
        "data",
        "GPUs",
        "workers",
        "PS",
        "variable update",
        "runs ok",
        "img/s",
        "95% CI",
        "min",
        "max",
        "spread",
        "CV",
        "speedup",
        "efficiency",
        "best",
    ]
    evaluated = any(r.get("eval_top1") is not None for r in group)
    timed = any(r.get("tta_runs") for r in group)
    settings = _setting_columns(group, shown=("batch_size",))  # the group's title names its batch
    header += settings
    if evaluated:
        header += ["top-1", "top-5"]
    if timed:
        header += ["time to target s (MLPerf)", "CV", "converged"]
    if matched:
        header += ["published img/s (best config)", "Δ img/s"]
    header += ["failures"]
    return _md_table(header, [_configuration_cells(r, settings, evaluated, timed, matched) for r in group])


def _configuration_cells(
    r: Mapping[str, Any], settings: list[str], evaluated: bool, timed: bool, matched: bool
) -> list[Any]:
    """One configuration's cells of configurations.md, in the order of its group's header."""
    line = [
        r["data"],
        r["gpus"],
        _f(r["num_workers"], "d"),
        r["num_ps"],
        r["variable_update"],
        f"{r['n_ok']}/{r['runs']}",
        _f(r["images_per_sec"]) if r["status"] == "ok" else "failed",
        _ci(r["ci_low"], r["ci_high"]),
        _f(r["images_per_sec_min"]),
        _f(r["images_per_sec_max"]),
        _variability(r.get("spread")),
        _variability(r.get("cv")),
        _f(r["speedup"]),
        _f(r["efficiency"], ".4f"),
        "★" if r["is_best"] else "",
    ]
    line += [_setting(k, r.get(k)) for k in settings]
    if evaluated:
        line += [_f(r.get("eval_top1"), ".4f"), _f(r.get("eval_top5"), ".4f")]
    if timed:
        line += [_tta(r), _share(r.get("tta_cv")), f"{r.get('tta_converged') or 0}/{r.get('tta_runs') or 0}"]
    if matched:
        line += [_f(r.get("ref_images_per_sec")), _pct(r.get("diff_images_per_sec_pct"))]
    line += ["; ".join(f"{n}× {reason}" for reason, n in _reason_counts(r["failures"])) or ""]
    return line


def _where_the_time_goes(group: list[Mapping[str, Any]]) -> list[str]:
    """The verdict of each configuration with the numbers behind it (docs/network.md)."""
    if not group:
        return []
    md = [
        "",
        "### What bounds the step",
        "",
        "The measured step split into compute (the 1-GPU step), transfer (the busiest NIC's bytes per "
        "step, in and out, over the measured link rate) and the rest; the busiest node's NIC over the "
        "workers' measured window, and its share (in + out) of the measured link rate. '-' is unknown.",
        "",
    ]
    header = [
        "data",
        "GPUs",
        "PS",
        "variable update",
        "step s",
        "compute s",
        "transfer s",
        "rest s",
        "busiest node",
        "in GB/s",
        "out GB/s",
        "link GB/s",
        "in+out of link",
        "bound",
        "why",
    ]
    body = [
        [
            r["data"],
            r["gpus"],
            r["num_ps"],
            r["variable_update"],
            _f(r.get("step_time"), ".4f"),
            _f(r.get("compute_s"), ".4f"),
            _f(r.get("transfer_s"), ".4f"),
            _f(r.get("rest_s"), ".4f"),
            r.get("nic_busiest_host") or "-",
            _f(r.get("nic_rx_gb_per_s"), ".4f"),
            _f(r.get("nic_tx_gb_per_s"), ".4f"),
            _f(r.get("link_gb_s"), ".4f"),
            _share(r.get("nic_share")),
            r.get("bound") or "-",
            (r.get("bound_why") or "") + (f" (NIC: {r['nic_unknown']})" if r.get("nic_unknown") else ""),
        ]
        for r in group
    ]
    return md + _md_table(header, body)


def _reason_counts(failures: Iterable[Mapping[str, Any]]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for f in failures:
        counts[f["reason"]] = counts.get(f["reason"], 0) + 1
    return sorted(counts.items())


# A failed run: its sweep and id, its configuration (stats.CONFIG_KEYS), which repetition, when, why.
FAILURE_CSV = ("sweep_id", "run_id") + CONFIG_KEYS + ("repetition", "started_at", "finished_at", "reason")


def failed_runs(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        if r.get("status") == "ok" and r.get("images_per_sec") is not None:
            continue
        reason = (r.get("reason") or stats.NO_REASON) if r.get("status") != "ok" else "no images/sec recorded"
        out.append({k: r.get(k) for k in FAILURE_CSV} | {"workload": stats.workload_label(r), "reason": reason})
    return out


def failure_tables(analysis: Analysis) -> tuple[str, str]:
    failures = failed_runs(analysis.rows)
    csv_text = _csv(FAILURE_CSV, failures)
    md = ["# Failed runs", ""]
    if not failures:
        md += ["None: every run succeeded."]
    else:
        md += [
            f"{len(failures)} failed run(s). A configuration's mean is taken over its successful "
            "repetitions only; one whose runs all failed is listed as failed.",
            "",
        ]
        md += _md_table(
            ["sweep", "run", "system", "data", "GPUs", "PS", "variable update", "rep", "reason"],
            [
                [
                    f["sweep_id"],
                    f["run_id"],
                    f["system"],
                    f["data"],
                    f["gpus"],
                    f["num_ps"],
                    f["variable_update"],
                    f["repetition"],
                    f["reason"],
                ]
                for f in failures
            ],
        )
    return csv_text, "\n".join(md) + "\n"
