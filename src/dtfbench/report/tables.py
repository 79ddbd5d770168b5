"""The report's tables: the per-configuration table printed after a sweep, and the CSV
(every column, raw numbers) and Markdown (per system, formatted) files of the report.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import environment as report_environment
from . import reference as reference_data
from . import stats
from .analysis import CONFIG_KEYS, Analysis, _group_of

# ---------------------------------------------------------------------------------------
# The per-configuration table printed after a sweep (`table`).
# ---------------------------------------------------------------------------------------


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _model_label(row: Mapping[str, Any]) -> str:
    """The model, and the workload that ran it when it is not ours."""
    workload = row.get("workload")
    return str(row["model"]) + ("" if stats.is_ours(workload) else f" ({workload})")


def format_table(summaries: list[dict[str, Any]]) -> str:
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
        "speedup",
        "efficiency",
    )
    lines = [header]
    for s in summaries:
        runs = f"{s['runs'] - s['failed']}/{s['runs']}"
        lines.append(
            (
                str(s["system"]),
                _model_label(s),
                str(s["data"]),
                str(s["gpus"]),
                _fmt(s["num_workers"], "d"),
                str(s["num_ps"]),
                str(s["variable_update"]),
                runs,
                _fmt(s["images_per_sec_per_worker"], ".2f"),
                _fmt(s["images_per_sec"], ".2f"),
                _fmt(s.get("ci_half_width"), ".2f"),
                _fmt(s["images_per_sec_min"], ".2f"),
                _fmt(s["images_per_sec_max"], ".2f"),
                _fmt(s["speedup"], ".2f"),
                _fmt(s["efficiency"], ".4f"),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [
        "  ".join(cell.rjust(w) if i >= 3 else cell.ljust(w) for i, (cell, w) in enumerate(zip(line, widths)))
        for line in lines
    ]
    text.insert(1, "  ".join("-" * w for w in widths))
    failures = [
        f"  {s['gpus']} GPUs, {s['num_ps']} PS, {s['variable_update']}: {reason}"
        for s in summaries
        for reason in s["reasons"]
    ]
    if failures:
        text += ["", "failed runs:"] + failures
    split = report_environment.splits(summaries, report_environment.labels(summaries))
    if split:
        text += ["", "kept apart by their environment (the report's environments.md):"] + [f"  {s}" for s in split]
    return "\n".join(text)


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
    return str(value).replace("|", "\\|").replace("\n", " ").strip() or " "


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


def _f(value: Any, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def _ci(low: Any, high: Any) -> str:
    return "-" if low is None or high is None else f"[{low:.2f}, {high:.2f}]"


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value:+.1f}%"


def _pp(value: Any) -> str:
    return "-" if value is None else f"{value:+.2f} pp"


def _group_title(system: Any, workload: Any, model: Any, batch_size: Any) -> str:
    return f"{system}: {model}, batch {batch_size} per GPU" + _workload_suffix(workload)


def _workload_suffix(workload: Any) -> str:
    """', measured with tf_cnn_benchmarks@REF (COMMIT)' for another workload than ours."""
    return "" if stats.is_ours(workload) else f", measured with {workload}"


def _ref_label(analysis: Analysis, system: str) -> str:
    theirs = analysis.ref_system(system)
    if theirs is None:
        if analysis.reference == "none":
            return ""
        return f"Published counterpart: none (`{system}` maps to no published system)."
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
    "images_per_sec",
    "ci_low",
    "ci_high",
    "ci_half_width",
    "stddev",
    "images_per_sec_min",
    "images_per_sec_max",
    "n_ok",
    "failed_runs",
    "configurations",
    "failed_configurations",
    "speedup",
    "efficiency",
    "io_overhead_pct",
    "reasons",
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
        md += ["", f"> Note: {notes_line}"]
    for system, workload, model, batch_size in analysis.groups():
        group = [r for r in rows if _group_of(r) == (system, workload, model, batch_size)]
        matched = analysis.ref_system(system) is not None
        md += ["", f"## {_group_title(system, workload, model, batch_size)}", ""]
        label = _ref_label(analysis, system)
        if label:
            md += [label, ""]
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
            body.append(line)
        md += _md_table(header, body)
        failed_groups = [r for r in group if r["status"] != "ok"]
        if failed_groups:
            md += ["", "Failed (every configuration of the GPU count failed; see failures.md):", ""]
            md += [
                f"- {r['gpus']} GPUs, {r['data']}: {'; '.join(r['reasons']) or stats.NO_REASON}" for r in failed_groups
            ]
        io_group = [r for r in analysis.io if _group_of(r) == (system, workload, model, batch_size)]
        if io_group:
            md += ["", "### I/O overhead", ""]
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
            md += _md_table(header, body)
    return csv_text, "\n".join(md) + "\n"


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
    "images_per_sec",
    "ci_low",
    "ci_high",
    "ci_half_width",
    "stddev",
    "images_per_sec_min",
    "images_per_sec_max",
    "images_per_sec_per_worker",
    "speedup",
    "efficiency",
    "is_best",
    "reasons",
    "sweep_ids",
    "environment_split",
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
        "(Student t; none with a single repetition), min/max, runs ok of runs, speedup and efficiency "
        "against the best 1-GPU configuration. ★ marks the best configuration of its GPU count and data "
        "(best_configurations.md); a configuration whose runs all failed is never best.",
    ]
    for system, workload, model, batch_size in analysis.groups():
        group = [r for r in rows if _group_of(r) == (system, workload, model, batch_size)]
        matched = analysis.ref_system(system) is not None
        md += ["", f"## {_group_title(system, workload, model, batch_size)}", ""]
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
            "speedup",
            "efficiency",
            "best",
        ]
        if matched:
            header += ["published img/s (best config)", "Δ img/s"]
        header += ["failures"]
        group.sort(
            key=lambda r: (
                r["data"] != "synthetic",
                str(r["data"]),
                r["gpus"] or 0,
                str(r["variable_update"]),
                r["num_ps"] or 0,
            )
        )
        body = []
        for r in group:
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
                _f(r["speedup"]),
                _f(r["efficiency"], ".4f"),
                "★" if r["is_best"] else "",
            ]
            if matched:
                line += [_f(r.get("ref_images_per_sec")), _pct(r.get("diff_images_per_sec_pct"))]
            line += ["; ".join(f"{n}× {reason}" for reason, n in _reason_counts(r["failures"])) or ""]
            body.append(line)
        md += _md_table(header, body)
    return csv_text, "\n".join(md) + "\n"


def _reason_counts(failures: Iterable[Mapping[str, Any]]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for f in failures:
        counts[f["reason"]] = counts.get(f["reason"], 0) + 1
    return sorted(counts.items())


FAILURE_CSV = (
    "sweep_id",
    "run_id",
    "system",
    "workload",
    "model",
    "batch_size",
    "data",
    "gpus",
    "num_workers",
    "num_ps",
    "variable_update",
    "repetition",
    "started_at",
    "finished_at",
    "reason",
)


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
