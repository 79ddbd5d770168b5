"""Reports from the results store: the table printed after a sweep, and the full report.

A configuration is everything that defines a run except its repetition, the workload
(which program measured) included; its figure is the mean over the repetitions that
succeeded, with a Student-t 95% confidence interval. The best configuration per (system,
workload, model, batch size, data, GPUs) is the one with the highest mean, as in the study's
Tables 1-3. Speedup and efficiency are taken against the best 1-GPU configuration of the
same system, workload, model, batch size and data: speedup =
images/sec(N) / images/sec(1), efficiency = speedup / N. I/O overhead = (synthetic - real)
/ synthetic x 100 per system and GPU count. The statistics live in ``dtfbench.stats``.

    python -m dtfbench.report table --db results/results.sqlite [--sweep-id ID]
    python -m dtfbench.report build --db results/results.sqlite --output results/report \\
        [--sweep-id ID] [--reference {none,published}] [--formats png,svg] \\
        [--system-map OURS=REFERENCE ...]

``build`` writes, under the output folder: ``best_configurations.{md,csv}`` (the study's
Tables 1-3: per system and GPU count the best configuration, images/sec with its CI,
speedup, efficiency, and the I/O overhead), ``io_overhead.csv``, ``configurations.{md,csv}``
(every configuration: mean, 95% CI, min/max, runs ok/failed and why), ``failures.{md,csv}``
(every failed run and its reason), ``plots/`` (images/sec bars, speedup and efficiency
against the ideal on a log2 GPU axis, I/O overhead; PNG and SVG, each with a JSON sidecar of
its series), ``manifest.json`` and, last, ``index.md``, which lists all of it. With
``--reference published`` every table and plot puts the published numbers
(``dtfbench.reference``) beside ours where our system maps to a published one
(``--system-map``; default ``dtfbench.reference.DEFAULT_SYSTEM_MAP``) and the GPU count
and data kind match, with the relative difference.

Every file is written atomically (a temporary file renamed over it) and only when its
content changes; the output is deterministic, so rebuilding an unchanged store changes
nothing and the command says "report unchanged". Files a previous build listed in its
manifest and this one no longer makes are removed; nothing else in the folder is touched.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from dtfbench import reference as reference_data
from dtfbench import stats, store

CONFIG_KEYS = stats.CONFIG_KEYS
BASELINE_KEYS = stats.BASELINE_KEYS
GROUP_KEYS = ("system", "workload", "model", "batch_size")
DEFAULT_OUTPUT = "results/report"
REFERENCE_CHOICES = ("published", "none")
MANIFEST = "manifest.json"
INDEX = "index.md"


def _group_of(row: Mapping[str, Any]) -> tuple:
    """The (system, workload, model, batch_size) a best, I/O or summary row belongs to."""
    return tuple(row.get(k) for k in GROUP_KEYS)


class ReportError(Exception):
    """Something the user can fix: no store, no runs, a bad option."""


# ---------------------------------------------------------------------------------------
# The per-configuration table printed after a sweep (`table`).
# ---------------------------------------------------------------------------------------

def summarise(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One summary per configuration, in the order configurations first appear."""
    return stats.summarise(rows)


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _model_label(row: Mapping[str, Any]) -> str:
    """The model, and the workload that ran it when it is not ours."""
    workload = row.get("workload")
    return str(row["model"]) + ("" if stats.is_ours(workload) else f" ({workload})")


def format_table(summaries: list[dict[str, Any]]) -> str:
    header = ("system", "model", "data", "gpus", "workers", "ps", "variable_update", "runs",
              "img/s/worker", "img/s total", "±95%", "min", "max", "speedup", "efficiency")
    lines = [header]
    for s in summaries:
        runs = f"{s['runs'] - s['failed']}/{s['runs']}"
        lines.append((
            str(s["system"]), _model_label(s), str(s["data"]), str(s["gpus"]),
            _fmt(s["num_workers"], "d"), str(s["num_ps"]), str(s["variable_update"]), runs,
            _fmt(s["images_per_sec_per_worker"], ".2f"), _fmt(s["images_per_sec"], ".2f"),
            _fmt(s.get("ci_half_width"), ".2f"),
            _fmt(s["images_per_sec_min"], ".2f"), _fmt(s["images_per_sec_max"], ".2f"),
            _fmt(s["speedup"], ".2f"), _fmt(s["efficiency"], ".4f"),
        ))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = ["  ".join(cell.rjust(w) if i >= 3 else cell.ljust(w) for i, (cell, w) in enumerate(zip(line, widths)))
            for line in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    failures = [f"  {s['gpus']} GPUs, {s['num_ps']} PS, {s['variable_update']}: {reason}"
                for s in summaries for reason in s["reasons"]]
    if failures:
        text += ["", "failed runs:"] + failures
    return "\n".join(text)


def load_rows(db: str | Path, sweep_id: str | None = None) -> list[dict[str, Any]]:
    """The store's rows (of one sweep), or a ReportError saying why there are none.

    Read-only: a report never creates or changes a file (store.open_readonly); a file that is
    not a store, or a damaged one, is one line naming it and the problem."""
    try:
        conn = store.open_readonly(db)
        try:
            rows = store.runs(conn, "sweep_id = ?", (sweep_id,)) if sweep_id else store.runs(conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError as err:
        raise ReportError(store.describe_error(f"--db {db}", Path(db), err)) from None
    except store.StoreError as err:
        raise ReportError(str(err)) from None
    if not rows:
        raise ReportError(f"no runs in {db}" + (f" for sweep {sweep_id}" if sweep_id else ""))
    return rows


# ---------------------------------------------------------------------------------------
# Atomic, change-aware writes.
# ---------------------------------------------------------------------------------------

def write_atomic(path: str | Path, data: bytes | str) -> bool:
    """Write `data` to `path` through a temporary file renamed over it.

    Returns False (and writes nothing) when the file already holds exactly `data`, so a
    rebuild of an unchanged report touches no file. A reader, or a build killed half-way,
    never sees a half-written file.
    """
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        if path.read_bytes() == payload:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return True


# ---------------------------------------------------------------------------------------
# The analysis: our summaries, best configurations, I/O overhead, and the published match.
# ---------------------------------------------------------------------------------------

@dataclass
class Analysis:
    rows: list[dict[str, Any]]
    summaries: list[dict[str, Any]]
    best: list[dict[str, Any]]
    io: list[dict[str, Any]]
    reference: str
    system_map: dict[str, str]
    matcher: reference_data.Matcher | None
    ref_io: dict[tuple, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def groups(self) -> list[tuple]:
        """(system, workload, model, batch_size) in the order the best table lists them."""
        return list(dict.fromkeys(_group_of(r) for r in self.best))

    def ref_for(self, system: str, gpus: Any, data: Any) -> Mapping[str, Any] | None:
        return self.matcher.find(system, gpus, data) if self.matcher else None

    def ref_system(self, system: str) -> str | None:
        return self.matcher.system_for(system) if self.matcher else None


def analyse(rows: list[dict[str, Any]], reference: str = "published",
            system_map: Mapping[str, str] | None = None) -> Analysis:
    if reference not in REFERENCE_CHOICES:
        raise ReportError(f"--reference must be one of {', '.join(REFERENCE_CHOICES)}, not {reference!r}")
    summaries = stats.summarise(rows)
    best = stats.best_configurations(summaries)
    io_rows = stats.io_overhead_rows(best)
    mapping = dict(reference_data.DEFAULT_SYSTEM_MAP if system_map is None else system_map)
    analysis = Analysis(rows=rows, summaries=summaries, best=best, io=io_rows, reference=reference,
                        system_map=mapping, matcher=None)
    if reference == "published":
        ref_best = reference_data.published_best()
        analysis.matcher = reference_data.Matcher(ref_best, mapping)
        analysis.ref_io = {(r["system"], r["gpus"]): r for r in stats.io_overhead_rows(ref_best)}
        for system, workload, model, batch_size in analysis.groups():
            refs = analysis.matcher.rows_for(system)
            if not refs:
                continue
            theirs = {(r["model"], r["batch_size"]) for r in refs}
            if (model, batch_size) not in theirs:
                ref_model, ref_batch = sorted(theirs)[0]
                analysis.notes.append(
                    f"{system} ran {model}, batch {batch_size} per GPU; the published "
                    f"{reference_data.display_name(analysis.ref_system(system))} numbers are {ref_model}, "
                    f"batch {ref_batch} per GPU: images/sec are not comparable, speedup and efficiency are.")
    return analysis


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
    right = [bool(rows) and all(_NUMERIC.match(row[i]) or row[i] in ("-", " ", "failed") for row in rows)
             and any(_NUMERIC.match(row[i]) for row in rows) for i in range(len(header))]
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |",
             "|" + "|".join("---:" if r else ":---" for r in right) + "|"]
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
    return (f"Published counterpart: {reference_data.display_name(theirs)} (`{theirs}`, "
            f"{', '.join(sources)}).")


BEST_CSV = ("system", "workload", "tf_version", "model", "batch_size", "data", "gpus", "status", "num_ps", "variable_update",
            "num_workers", "devices_per_worker", "images_per_sec", "ci_low", "ci_high", "ci_half_width",
            "stddev", "images_per_sec_min", "images_per_sec_max", "n_ok", "failed_runs", "configurations",
            "failed_configurations", "speedup", "efficiency", "io_overhead_pct", "reasons")
BEST_REF_CSV = ("ref_system", "ref_source", "ref_num_ps", "ref_variable_update", "ref_images_per_sec",
                "ref_speedup", "ref_efficiency", "ref_io_overhead_pct", "diff_images_per_sec_pct",
                "diff_speedup_pct", "diff_efficiency_pct", "diff_io_overhead_pp")


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
            row.update(ref_system=ref["system"], ref_source=ref["source"], ref_num_ps=ref["num_ps"],
                       ref_variable_update=ref["variable_update"], ref_images_per_sec=ref["images_per_sec"],
                       ref_speedup=ref["speedup"], ref_efficiency=ref["efficiency"],
                       ref_io_overhead_pct=ref_io["io_overhead"] if ref_io else None,
                       diff_images_per_sec_pct=stats.relative_difference(r["images_per_sec"], ref["images_per_sec"]),
                       diff_speedup_pct=stats.relative_difference(r["speedup"], ref["speedup"]),
                       diff_efficiency_pct=stats.relative_difference(r["efficiency"], ref["efficiency"]))
            if row["io_overhead_pct"] is not None and row["ref_io_overhead_pct"] is not None:
                row["diff_io_overhead_pp"] = row["io_overhead_pct"] - row["ref_io_overhead_pct"]
        out.append(row)
    return out


def best_tables(analysis: Analysis) -> tuple[str, str]:
    """best_configurations.csv and .md: the study's Tables 1-3 for our systems."""
    rows = best_rows(analysis)
    with_ref = analysis.reference != "none"
    csv_text = _csv(BEST_CSV + (BEST_REF_CSV if with_ref else ()), rows)

    md = ["# Best configuration per system and GPU count", "",
          "As the study's Tables 1-3: for each GPU count and data kind, the configuration (parameter "
          "servers, variable update) with the highest mean images/sec over its successful repetitions; "
          "95% CI of that mean (Student t); speedup and efficiency against the best 1-GPU "
          "configuration of the same system, model, batch size and data; I/O overhead = "
          "(synthetic - real) / synthetic x 100."]
    if with_ref:
        md += ["", "Published columns: the study's numbers for the system ours maps to (same GPU count and "
               "data); Δ = (ours - published) / published, and for the I/O overhead the difference in "
               "percentage points."]
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
            header += ["published PS", "published variable update", "published img/s", "Δ img/s",
                       "published efficiency", "Δ efficiency"]
        body = []
        for r in group:
            failed = r["status"] != "ok"
            line = [r["gpus"], r["data"], _f(r["num_ps"], "d") if not failed else "-",
                    r["variable_update"] or "-", "failed" if failed else _f(r["images_per_sec"]),
                    _ci(r["ci_low"], r["ci_high"]), f"{r['n_ok']}/{r['runs']}",
                    _f(r["speedup"]), _f(r["efficiency"], ".4f")]
            if matched:
                line += [_f(r.get("ref_num_ps"), "d"), r.get("ref_variable_update") or "-",
                         _f(r.get("ref_images_per_sec")), _pct(r.get("diff_images_per_sec_pct")),
                         _f(r.get("ref_efficiency"), ".4f"), _pct(r.get("diff_efficiency_pct"))]
            body.append(line)
        md += _md_table(header, body)
        failed_groups = [r for r in group if r["status"] != "ok"]
        if failed_groups:
            md += ["", "Failed (every configuration of the GPU count failed; see failures.md):", ""]
            md += [f"- {r['gpus']} GPUs, {r['data']}: {'; '.join(r['reasons']) or stats.NO_REASON}"
                   for r in failed_groups]
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


IO_CSV = ("system", "workload", "model", "batch_size", "gpus", "synthetic", "real", "synthetic_num_ps",
          "synthetic_variable_update", "real_num_ps", "real_variable_update", "io_overhead_pct")
IO_REF_CSV = ("ref_system", "ref_synthetic", "ref_real", "ref_io_overhead_pct", "diff_io_overhead_pp")


def io_table(analysis: Analysis) -> str:
    rows = []
    for r in analysis.io:
        row = dict(r, io_overhead_pct=r["io_overhead"])
        theirs = analysis.ref_system(r["system"])
        ref_io = analysis.ref_io.get((theirs, r["gpus"])) if theirs else None
        if ref_io:
            row.update(ref_system=theirs, ref_synthetic=ref_io["synthetic"], ref_real=ref_io["real"],
                       ref_io_overhead_pct=ref_io["io_overhead"],
                       diff_io_overhead_pp=r["io_overhead"] - ref_io["io_overhead"])
        rows.append(row)
    return _csv(IO_CSV + (IO_REF_CSV if analysis.reference != "none" else ()), rows)


CONFIG_CSV = CONFIG_KEYS + ("runs", "n_ok", "failed", "status", "images_per_sec", "ci_low", "ci_high",
                            "ci_half_width", "stddev", "images_per_sec_min", "images_per_sec_max",
                            "images_per_sec_per_worker", "speedup", "efficiency", "is_best", "reasons",
                            "sweep_ids")
CONFIG_REF_CSV = ("ref_system", "ref_images_per_sec", "ref_num_ps", "ref_variable_update",
                  "ref_is_same_config", "diff_images_per_sec_pct")


def configuration_rows(analysis: Analysis) -> list[dict[str, Any]]:
    best_keys = {r["best_key"] for r in analysis.best if r.get("best_key") is not None}
    out = []
    for s in analysis.summaries:
        row = dict(s, is_best=tuple(s.get(k) for k in CONFIG_KEYS) in best_keys)
        ref = analysis.ref_for(s["system"], s["gpus"], s["data"])
        if ref is not None:
            row.update(ref_system=ref["system"], ref_images_per_sec=ref["images_per_sec"],
                       ref_num_ps=ref["num_ps"], ref_variable_update=ref["variable_update"],
                       ref_is_same_config=(ref["num_ps"], ref["variable_update"]) == (s["num_ps"], s["variable_update"]),
                       diff_images_per_sec_pct=stats.relative_difference(s["images_per_sec"], ref["images_per_sec"]))
        out.append(row)
    return out


def configuration_tables(analysis: Analysis) -> tuple[str, str]:
    """configurations.csv and .md: every configuration with mean, 95% CI, min/max, failures."""
    rows = configuration_rows(analysis)
    with_ref = analysis.reference != "none"
    csv_text = _csv(CONFIG_CSV + (CONFIG_REF_CSV if with_ref else ()), rows)
    md = ["# Every configuration", "",
          "Mean images/sec over the successful repetitions, the 95% confidence interval of the mean "
          "(Student t; none with a single repetition), min/max, runs ok of runs, speedup and efficiency "
          "against the best 1-GPU configuration. ★ marks the best configuration of its GPU count and data "
          "(best_configurations.md); a configuration whose runs all failed is never best."]
    for system, workload, model, batch_size in analysis.groups():
        group = [r for r in rows if _group_of(r) == (system, workload, model, batch_size)]
        matched = analysis.ref_system(system) is not None
        md += ["", f"## {_group_title(system, workload, model, batch_size)}", ""]
        header = ["data", "GPUs", "workers", "PS", "variable update", "runs ok", "img/s", "95% CI",
                  "min", "max", "speedup", "efficiency", "best"]
        if matched:
            header += ["published img/s (best config)", "Δ img/s"]
        header += ["failures"]
        group.sort(key=lambda r: (r["data"] != "synthetic", str(r["data"]), r["gpus"] or 0,
                                  str(r["variable_update"]), r["num_ps"] or 0))
        body = []
        for r in group:
            line = [r["data"], r["gpus"], _f(r["num_workers"], "d"), r["num_ps"], r["variable_update"],
                    f"{r['n_ok']}/{r['runs']}",
                    _f(r["images_per_sec"]) if r["status"] == "ok" else "failed",
                    _ci(r["ci_low"], r["ci_high"]), _f(r["images_per_sec_min"]), _f(r["images_per_sec_max"]),
                    _f(r["speedup"]), _f(r["efficiency"], ".4f"), "★" if r["is_best"] else ""]
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


FAILURE_CSV = ("sweep_id", "run_id", "system", "workload", "model", "batch_size", "data", "gpus", "num_workers",
               "num_ps", "variable_update", "repetition", "started_at", "finished_at", "reason")


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
        md += [f"{len(failures)} failed run(s). A configuration's mean is taken over its successful "
               "repetitions only; one whose runs all failed is listed as failed.", ""]
        md += _md_table(["sweep", "run", "system", "data", "GPUs", "PS", "variable update", "rep", "reason"],
                        [[f["sweep_id"], f["run_id"], f["system"], f["data"], f["gpus"], f["num_ps"],
                          f["variable_update"], f["repetition"], f["reason"]] for f in failures])
    return csv_text, "\n".join(md) + "\n"


# ---------------------------------------------------------------------------------------
# Plot specs (rendered by dtfbench.plots; written beside each plot as its JSON sidecar).
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
    for g, (system, workload, model, batch_size) in enumerate(analysis.groups()):
        group = [r for r in analysis.best if _group_of(r) == (system, workload, model, batch_size)
                 and r["status"] == "ok"]
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
            series = [_series(f"{system} {d}", "ours", _points([r for r in group if r["data"] == d], key, ci),
                              DATA_STYLE.get(d, 2), system=system, data=d) for d in datas]
            series += [_series(f"{reference_data.display_name(theirs)} {d} (published)", "published",
                               _points([r for r in refs if r["data"] == d], key), DATA_STYLE.get(d, 2),
                               system=theirs, data=d) for d in ref_datas]
            return [s for s in series if s["points"]]

        xs = sorted({p["x"] for s in make("speedup", False) for p in s["points"]})
        specs.append((f"images_per_sec-{slug}", {
            "plot": "images_per_sec", "kind": "bar", "x_scale": "category",
            "title": f"Training throughput: {title}", "x_label": "Number of GPUs", "y_label": "images/sec",
            "legend_title": "Data", "legend_loc": "upper left", "series": make("images_per_sec", True)}))
        specs.append((f"speedup-{slug}", {
            "plot": "speedup", "kind": "line", "x_scale": "log2", "y_scale": "log2",
            "title": f"Speedup: {title}", "x_label": "Number of GPUs", "y_label": "speedup",
            "legend_title": "Data", "legend_loc": "upper left",
            "series": ([_series("ideal", "ideal", [{"x": x, "y": float(x)} for x in xs], 0)] if xs else [])
            + make("speedup", False)}))
        specs.append((f"efficiency-{slug}", {
            "plot": "efficiency", "kind": "line", "x_scale": "log2",
            "title": f"Scaling efficiency: {title}", "x_label": "Number of GPUs", "y_label": "efficiency",
            "legend_title": "Data", "legend_loc": "lower left",
            "series": ([_series("ideal", "ideal", [{"x": x, "y": 1.0} for x in xs], 0)] if xs else [])
            + make("efficiency", False)}))
        for s in make("speedup", False):
            if s["source"] == "published":
                if (s["system"], s["data"]) in seen_ref:
                    continue
                seen_ref.add((s["system"], s["data"]))
            all_speedup.append(dict(s, label=s["label"] if s["source"] == "published"
                                    else f"{system} ({model}, bs {batch_size}{_workload_suffix(workload)}) {s['data']}"))

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
                    series.append(_series(f"{reference_data.display_name(theirs)} (published)", "published",
                                          points, k, system=theirs))
        specs.append(("io_overhead", {
            "plot": "io_overhead", "kind": "bar", "x_scale": "category", "annotate": True,
            "title": "I/O overhead in distributed training: (synthetic - real) / synthetic",
            "x_label": "Number of GPUs", "y_label": "I/O overhead [%]", "legend_title": "System",
            "legend_loc": "upper left", "series": series}))

    ours_all = [s for s in all_speedup if s["source"] == "ours"]
    if len(ours_all) > 1:
        for k, s in enumerate(all_speedup):
            s["style"] = k
        xs = sorted({p["x"] for s in all_speedup for p in s["points"]})
        specs.append(("speedup-all", {
            "plot": "speedup_all", "kind": "line", "x_scale": "log2", "y_scale": "log2",
            "title": "Speedup, every system", "x_label": "Number of GPUs", "y_label": "speedup",
            "legend_title": "System", "legend_loc": "upper left",
            "series": [_series("ideal", "ideal", [{"x": x, "y": float(x)} for x in xs], 0)] + all_speedup}))
    return specs


# ---------------------------------------------------------------------------------------
# Building the report folder.
# ---------------------------------------------------------------------------------------

@dataclass
class BuildResult:
    output: Path
    files: list[str]
    changed: list[str]
    removed: list[str]
    analysis: Analysis

    @property
    def index(self) -> Path:
        return self.output / INDEX


def _describe_source(db: str, sweep_id: str | None, rows: list[dict[str, Any]]) -> str:
    sweeps = sorted({str(r["sweep_id"]) for r in rows})
    where = f"sweep `{sweep_id}`" if sweep_id else (
        f"every sweep ({', '.join(f'`{s}`' for s in sweeps)})" if len(sweeps) <= 5 else f"{len(sweeps)} sweeps")
    return f"`{db}`, {where}"


def _index(analysis: Analysis, db: str, sweep_id: str | None, tables: list[tuple[str, str]],
           plots: list[tuple[str, dict[str, Any], list[str]]], extra_files: list[str]) -> str:
    rows = analysis.rows
    ok = sum(1 for r in rows if r.get("status") == "ok" and r.get("images_per_sec") is not None)
    failures = failed_runs(rows)
    starts = [r["started_at"] for r in rows if r.get("started_at")]
    ends = [r["finished_at"] for r in rows if r.get("finished_at")]
    md = ["# Benchmark report", "",
          f"- Source: {_describe_source(db, sweep_id, rows)}",
          f"- Runs: {len(rows)} ({ok} ok, {len(failures)} failed) in {len(analysis.summaries)} configurations "
          f"({sum(1 for s in analysis.summaries if s['status'] != 'ok')} with no successful run)"]
    if starts or ends:
        md.append(f"- Recorded: {min(starts) if starts else '?'} to {max(ends) if ends else '?'}")
    systems = list(dict.fromkeys(r["system"] for r in analysis.best))
    if analysis.reference == "none":
        md.append("- Reference: none (our numbers only)")
    else:
        md.append("- Reference: published (the CSCS 2017 report's Tables 1-3; Google's 2017 benchmark page "
                  "as quoted by the study's notebook; see dtfbench/published_data/README.md)")
        md.append("- System mapping (ours → published; change with --system-map OURS=REFERENCE):")
        for system in systems:
            theirs = analysis.ref_system(system)
            mapped = analysis.system_map.get(system)
            if theirs:
                md.append(f"  - `{system}` → {reference_data.display_name(theirs)} (`{theirs}`)")
            elif mapped:
                md.append(f"  - `{system}` → `{mapped}`, which has no published numbers")
            else:
                md.append(f"  - `{system}`: no published counterpart")
    for note in analysis.notes:
        md.append(f"- Note: {note}")
    md += ["", "## Tables", ""]
    md += [f"- [{name}]({name}): {what}" for name, what in tables]

    best_ok = [r for r in analysis.best if r["status"] == "ok"]
    if best_ok:
        md += ["", "## Best configuration per GPU count", ""]
        md += _md_table(["system", "model", "batch", "data", "GPUs", "PS", "variable update", "img/s",
                         "speedup", "efficiency"],
                        [[r["system"], _model_label(r), r["batch_size"], r["data"], r["gpus"], r["num_ps"],
                          r["variable_update"], _f(r["images_per_sec"]), _f(r["speedup"]),
                          _f(r["efficiency"], ".4f")] for r in best_ok])
    md += ["", "## Plots", ""]
    if not plots:
        md.append("None written (no plot formats asked for, or no successful run).")
    for name, spec, files in plots:
        png = next((f for f in files if f.endswith(".png")), None)
        links = ", ".join(f"[{Path(f).suffix[1:].upper()}]({f})" for f in files)
        md.append(f"- {spec['title']} ({links})")
        if png:
            md += ["", f"  ![{spec['title']}]({png})", ""]
    if not analysis.io:
        md += ["", "No I/O overhead: no GPU count of a system has both synthetic and real results."]
    md += ["", "## Failed runs", ""]
    if not failures:
        md.append("None.")
    else:
        md.append(f"{len(failures)} failed run(s) (all of them in [failures.md](failures.md)):")
        md.append("")
        counts: dict[tuple, int] = {}
        for f in failures:
            key = (f["system"], f["data"], f["gpus"], f["num_ps"], f["variable_update"], f["reason"])
            counts[key] = counts.get(key, 0) + 1
        for (system, data, gpus, num_ps, update, reason), n in counts.items():
            md.append(f"- {system}, {data}, {gpus} GPUs, {num_ps} PS, {update}: {n}× {reason}")
        failed_groups = [r for r in analysis.best if r["status"] != "ok"]
        if failed_groups:
            md += ["", "GPU counts with no successful configuration (no best, no speedup):", ""]
            md += [f"- {r['system']} ({r['model']}, bs {r['batch_size']}), {r['data']}, {r['gpus']} GPUs"
                   for r in failed_groups]
    md += ["", "## Files", ""]
    md += [f"- {name}" for name in sorted(extra_files + [INDEX])]
    return "\n".join(md) + "\n"


def build(rows: list[dict[str, Any]], output: str | Path, *, reference: str = "published",
          formats: Sequence[str] = ("png", "svg"), system_map: Mapping[str, str] | None = None,
          db: str = "", sweep_id: str | None = None) -> BuildResult:
    """Write the whole report for `rows` under `output`; see the module's docstring."""
    output = Path(output)
    analysis = analyse(rows, reference, system_map)
    formats = tuple(dict.fromkeys(f for f in formats if f))
    render = None
    if formats:
        try:
            from dtfbench import plots  # matplotlib: the 'report' extra
        except ImportError as err:
            raise ReportError(f"plots need matplotlib ({err}); install dtfbench[report] or pass --formats none")
        unknown = [f for f in formats if f not in plots.FORMATS]
        if unknown:
            raise ReportError(f"--formats: unknown {', '.join(unknown)}; known: {', '.join(plots.FORMATS)}")
        render = plots.render

    outputs: dict[str, bytes | str] = {}
    best_csv, best_md = best_tables(analysis)
    config_csv, config_md = configuration_tables(analysis)
    fail_csv, fail_md = failure_tables(analysis)
    outputs.update({"best_configurations.md": best_md, "best_configurations.csv": best_csv,
                    "io_overhead.csv": io_table(analysis),
                    "configurations.md": config_md, "configurations.csv": config_csv,
                    "failures.md": fail_md, "failures.csv": fail_csv})
    tables = [("best_configurations.md", "the best configuration per system and GPU count (the study's Tables "
               "1-3): images/sec with 95% CI, speedup, efficiency, I/O overhead"
               + (", beside the published numbers" if reference != "none" else "")),
              ("best_configurations.csv", "the same, every column"),
              ("io_overhead.csv", "I/O overhead per system and GPU count"),
              ("configurations.md", "every configuration: mean, 95% CI, min/max, runs ok/failed and why"),
              ("configurations.csv", "the same, every column"),
              ("failures.md", "every failed run and its reason"),
              ("failures.csv", "the same, every column")]
    plots_written: list[tuple[str, dict[str, Any], list[str]]] = []
    if render is not None:
        for name, spec in plot_specs(analysis):
            files = [f"plots/{name}.{fmt}" for fmt in formats]
            images = render(spec, formats)
            for fmt, rel in zip(formats, files):
                outputs[rel] = images[fmt]
            sidecar = dict(spec, files=[Path(f).name for f in files])
            outputs[f"plots/{name}.json"] = json.dumps(sidecar, indent=2, sort_keys=True) + "\n"
            plots_written.append((name, spec, files + [f"plots/{name}.json"]))

    files = sorted(outputs) + [MANIFEST]
    outputs[MANIFEST] = json.dumps({"files": sorted(files + [INDEX]), "reference": reference,
                                    "formats": list(formats), "db": db, "sweep_id": sweep_id,
                                    "system_map": {s: analysis.system_map[s] for s in sorted(analysis.system_map)}},
                                   indent=2, sort_keys=True) + "\n"
    outputs[INDEX] = _index(analysis, db, sweep_id, tables, plots_written, files)
    from dtfbench import report_sweep  # the scaling model beside the runs; an adaptive sweep's decisions
    model_md = report_sweep.markdown(rows, db)
    if model_md:
        outputs[INDEX] += "\n" + model_md

    previous = _previous_files(output)
    changed = []
    for rel in sorted(o for o in outputs if o != INDEX) + [INDEX]:  # the index last
        if write_atomic(output / rel, outputs[rel]):
            changed.append(rel)
    removed = []
    for rel in sorted(previous - set(outputs)):
        target = output / rel
        if target.is_file():
            target.unlink()
            removed.append(rel)
    return BuildResult(output=output, files=sorted(outputs), changed=changed, removed=removed, analysis=analysis)


def _previous_files(output: Path) -> set[str]:
    """Files the last build listed in its manifest (only plain relative paths inside `output`)."""
    try:
        listed = json.loads((output / MANIFEST).read_text()).get("files", [])
    except (OSError, ValueError, AttributeError):
        return set()
    safe = set()
    for rel in listed:
        if isinstance(rel, str) and rel and not Path(rel).is_absolute() and ".." not in Path(rel).parts:
            safe.add(rel)
    return safe


# ---------------------------------------------------------------------------------------
# Command line.
# ---------------------------------------------------------------------------------------

def _formats(text: str) -> list[str]:
    if text.strip().lower() in ("", "none"):
        return []
    return [f.strip().lower() for f in text.split(",") if f.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dtfbench.report", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    table = sub.add_parser("table", help="print the per-configuration table")
    table.add_argument("--db", default=store.DEFAULT_DB)
    table.add_argument("--sweep-id", help="only the runs of this sweep (default: every run)")
    make = sub.add_parser("build", help="write tables, plots and an index under --output")
    make.add_argument("--db", default=store.DEFAULT_DB)
    make.add_argument("--output", default=DEFAULT_OUTPUT, help=f"report folder (default {DEFAULT_OUTPUT})")
    make.add_argument("--sweep-id", help="only the runs of this sweep (default: every run)")
    make.add_argument("--reference", choices=REFERENCE_CHOICES, default="published",
                      help="put the published numbers beside ours (default) or not")
    make.add_argument("--formats", default="png,svg", type=_formats,
                      help="plot formats, comma list of png, svg; 'none' for no plots (default png,svg)")
    make.add_argument("--system-map", action="append", default=[], metavar="OURS=REFERENCE",
                      help="map one of our system names to a published one (repeatable, or a comma list; "
                           "OURS= maps it to nothing). Default: "
                           + ", ".join(f"{k}={v}" for k, v in reference_data.DEFAULT_SYSTEM_MAP.items()))
    args = parser.parse_args(argv)
    try:
        rows = load_rows(args.db, args.sweep_id)
        if args.command == "table":
            print(format_table(summarise(rows)))
            from dtfbench import report_sweep  # predicted beside measured; what an adaptive sweep skipped
            model_md = report_sweep.markdown(rows, str(args.db))
            if model_md:
                print("\n" + model_md.rstrip())
            return 0
        try:
            system_map = reference_data.parse_system_map(args.system_map)
        except reference_data.ReferenceDataError as err:
            raise ReportError(str(err)) from None
        result = build(rows, args.output, reference=args.reference, formats=args.formats,
                       system_map=system_map, db=str(args.db), sweep_id=args.sweep_id)
    except ReportError as err:
        print(f"dtfbench.report: error: {err}", file=sys.stderr)
        return 2
    best = result.analysis.best
    print(f"report: {result.index.resolve()}")
    print(f"  {len(result.analysis.rows)} runs, {len(result.analysis.summaries)} configurations, "
          f"{sum(1 for r in best if r['status'] == 'ok')} best of {len(best)} (system, data, GPUs) points, "
          f"{len(failed_runs(result.analysis.rows))} failed runs")
    if result.changed or result.removed:
        for rel in result.changed:
            print(f"  wrote {rel}")
        for rel in result.removed:
            print(f"  removed {rel}")
        print(f"report updated: {len(result.changed)} of {len(result.files)} files written, "
              f"{len(result.removed)} removed")
    else:
        print(f"report unchanged: {len(result.files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
