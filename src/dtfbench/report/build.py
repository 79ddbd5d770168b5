"""The report folder: tables, plots, a manifest and an index, written atomically and only on change.

``build`` writes, under the output folder: ``best_configurations.{md,csv}`` (the study's
Tables 1-3: per system and GPU count the best configuration, images/sec with its CI,
speedup, efficiency, and the I/O overhead), ``io_overhead.csv``, ``configurations.{md,csv}``
(every configuration: mean, 95% CI, min/max, runs ok/failed and why), ``environments.{md,csv}``
(per system the distinct environments, the runs of each, and the fields that split a
configuration: ``dtfbench.report.environment``), ``failures.{md,csv}``
(every failed run and its reason), ``plots/`` (images/sec bars, speedup and efficiency
against the ideal on a log2 GPU axis, I/O overhead; PNG and SVG, each with a JSON sidecar of
its series), ``mlperf/<run id>.log`` (each run's MLPerf log), ``manifest.json`` and, last,
``index.md``, which lists all of it. With
``--reference published`` every table and plot puts the published numbers
(``dtfbench.report.reference``) beside ours where our system maps to a published one
(``--system-map``; default ``dtfbench.report.reference.DEFAULT_SYSTEM_MAP``) and the GPU count
and data kind match, with the relative difference.

Every file is written atomically (a temporary file renamed over it) and only when its
content changes; the output is deterministic, so rebuilding an unchanged store changes
nothing and the command says "report unchanged". Files a previous build listed in its
manifest and this one no longer makes are removed; nothing else in the folder is touched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..linux.files import write_atomic
from . import environment as report_environment
from . import markdown
from . import reference as reference_data
from . import staging as report_staging
from .analysis import Analysis, ReportError, analyse
from .plotspec import plot_specs
from .tables import (
    _csv,
    _f,
    _md_table,
    _model_label,
    _nic_in_out,
    best_tables,
    configuration_tables,
    failed_runs,
    failure_tables,
    io_table,
    mode_verdict,
    modes_table,
)

# Markdown after the report's own sections, from its rows and the store's path.
Appendix = Callable[[Sequence[Mapping[str, Any]], str], str]

DEFAULT_OUTPUT = "results/report"
MANIFEST = "manifest.json"
INDEX = "index.md"


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
    code = markdown.code
    where = (
        f"sweep {code(sweep_id)}"
        if sweep_id
        else (f"every sweep ({', '.join(code(s) for s in sweeps)})" if len(sweeps) <= 5 else f"{len(sweeps)} sweeps")
    )
    return f"{code(db)}, {where}"


def _index(
    analysis: Analysis,
    db: str,
    sweep_id: str | None,
    tables: list[tuple[str, str]],
    plots: list[tuple[str, dict[str, Any], list[str]]],
    extra_files: list[str],
) -> str:
    """index.md: what the report covers, its tables, best configurations, environment, plots, failures, files."""
    failures = failed_runs(analysis.rows)
    md = _index_summary(analysis, db, sweep_id, failures)
    md += ["", "## Tables", ""]
    md += [f"- [{name}]({name}): {what}" for name, what in tables]
    md += _index_best(analysis)
    md += _index_modes(analysis)
    md += _index_environment(analysis, db)
    md += _index_plots(analysis, plots)
    md += _index_failures(analysis, failures)
    md += ["", "## Files", ""]
    md += [f"- {name}" for name in sorted(extra_files + [INDEX])]
    return "\n".join(md) + "\n"


def _index_summary(analysis: Analysis, db: str, sweep_id: str | None, failures: list[dict[str, Any]]) -> list[str]:
    """The index's title and its list of what the report covers: source, runs, dates, reference, notes."""
    rows = analysis.rows
    ok = sum(1 for r in rows if r.get("status") == "ok" and r.get("images_per_sec") is not None)
    starts = [r["started_at"] for r in rows if r.get("started_at")]
    ends = [r["finished_at"] for r in rows if r.get("finished_at")]
    md = [
        "# Benchmark report",
        "",
        f"- Source: {_describe_source(db, sweep_id, rows)}",
        f"- Runs: {len(rows)} ({ok} ok, {len(failures)} failed) in {len(analysis.summaries)} configurations "
        f"({sum(1 for s in analysis.summaries if s['status'] != 'ok')} with no successful run)",
    ]
    if starts or ends:
        md.append(
            f"- Recorded: {markdown.text(min(starts) if starts else '?')} to {markdown.text(max(ends) if ends else '?')}"
        )
    md += _index_reference(analysis)
    for note in analysis.notes:
        md.append(f"- Note: {markdown.text(note)}")
    return md


def _index_reference(analysis: Analysis) -> list[str]:
    """The index's reference line and, with published numbers, which published system each of ours maps to."""
    if analysis.reference == "none":
        return ["- Reference: none (our numbers only)"]
    md = [
        "- Reference: published (the CSCS 2017 report's Tables 1-3; Google's 2017 benchmark page "
        "as quoted by the study's notebook; see dtfbench/report/published_data/README.md)",
        "- System mapping (ours → published; change with --system-map OURS=REFERENCE):",
    ]
    for system in dict.fromkeys(r["system"] for r in analysis.best):
        theirs = analysis.ref_system(system)
        mapped = analysis.system_map.get(system)
        shown = markdown.code(system)
        if theirs:
            md.append(f"  - {shown} → {reference_data.display_name(theirs)} (`{theirs}`)")
        elif mapped:
            md.append(f"  - {shown} → {markdown.code(mapped)}, which has no published numbers")
        else:
            md.append(f"  - {shown}: no published counterpart")
    return md


def _index_best(analysis: Analysis) -> list[str]:
    """The index's table of the best configuration per GPU count (nothing when none succeeded)."""
    best_ok = [r for r in analysis.best if r["status"] == "ok"]
    if not best_ok:
        return []
    md = ["", "## Best configuration per GPU count", ""]
    md += _md_table(
        [
            "system",
            "model",
            "batch",
            "data",
            "GPUs",
            "PS",
            "variable update",
            "img/s",
            "speedup",
            "efficiency",
            "busiest NIC GB/s in/out",
            "bound",
        ],
        [
            [
                r["system"],
                _model_label(r),
                r["batch_size"],
                r["data"],
                r["gpus"],
                r["num_ps"],
                r["variable_update"],
                _f(r["images_per_sec"]),
                _f(r["speedup"]),
                _f(r["efficiency"], ".4f"),
                _nic_in_out(r),
                r.get("bound") or "-",
            ]
            for r in best_ok
        ],
    )
    md += [
        "",
        "What bounds each step, with the numbers behind it, and the step split into compute, transfer "
        "and the rest: [configurations.md](configurations.md) and the step_split plots; the rules: docs/network.md.",
    ]
    return md


def _index_modes(analysis: Analysis) -> list[str]:
    """The index's verdicts of the best PS configuration against all-reduce (nothing when no count ran both)."""
    if not analysis.modes:
        return []
    md = ["", "## PS or all-reduce", ""]
    md += [
        "- "
        + markdown.text(
            f"{r['system']} ({_model_label(r)}, bs {r['batch_size']}), {r['data']}, {r['gpus']} GPUs: "
            f"{mode_verdict(r)}; all-reduce {_f(r['all_reduce_images_per_sec'])} img/s, best PS "
            f"({r['ps_num_ps']} PS, {r['ps_variable_update']}) {_f(r['ps_images_per_sec'])} img/s"
        )
        for r in analysis.modes
    ]
    md += ["", "The table per GPU count: [best_configurations.md](best_configurations.md)."]
    return md


def _index_environment(analysis: Analysis, db: str) -> list[str]:
    """The index's environment section: each environment, the splits, the networks and the data staging."""
    rows = analysis.rows
    env_names = report_environment.labels(rows)
    md = ["", "## Environment", ""]
    md += [
        "- "
        + markdown.text(
            f"{e['system']} {e['environment']}: {e['runs']} run(s) on {', '.join(e['hosts']) or 'unknown hosts'}; "
            + "; ".join(f"{k} {e[k]}" for k in ("gpu_model", "gpu_driver", "tf_version", "instance_type"))
        )
        for e in report_environment.environments(rows)
    ]
    md += [f"- Kept apart: {markdown.text(line)}" for line in report_environment.splits(analysis.summaries, env_names)]
    md += [
        f"- {markdown.text(report_environment.network_line(s, m))}"
        for s, m in report_environment.networks(rows, db).items()
    ]
    # data_staging=copy: what each sweep's staging cost, and what it saved each configuration (report/staging.py).
    for line in report_staging.lines(rows, analysis.summaries, db):
        md.append(f"  - {markdown.text(line.strip())}" if line.startswith("  ") else f"- {markdown.text(line)}")
    md.append("- Details: [environments.md](environments.md), the network per host: [network.csv](network.csv)")
    return md


def _index_plots(analysis: Analysis, plots: list[tuple[str, dict[str, Any], list[str]]]) -> list[str]:
    """The index's plots section: a link per file of each plot, its PNG inline, and why I/O overhead may be missing."""
    md = ["", "## Plots", ""]
    if not plots:
        md.append("None written (no plot formats asked for, or no successful run).")
    for _name, spec, files in plots:
        png = next((f for f in files if f.endswith(".png")), None)
        links = ", ".join(f"[{Path(f).suffix[1:].upper()}]({f})" for f in files)
        title = markdown.text(spec["title"])
        md.append(f"- {title} ({links})")
        if png:
            md += ["", f"  ![{title}]({png})", ""]
    if not analysis.io:
        md += ["", "No I/O overhead: no GPU count of a system has both synthetic and real results."]
    return md


def _index_failures(analysis: Analysis, failures: list[dict[str, Any]]) -> list[str]:
    """The index's failed runs, counted per configuration and reason, and the GPU counts with no success."""
    md = ["", "## Failed runs", ""]
    if not failures:
        md.append("None.")
        return md
    md.append(f"{len(failures)} failed run(s) (all of them in [failures.md](failures.md)):")
    md.append("")
    counts: dict[tuple, int] = {}
    for f in failures:
        key = (f["system"], f["data"], f["gpus"], f["num_ps"], f["variable_update"], f["reason"])
        counts[key] = counts.get(key, 0) + 1
    for (system, data, gpus, num_ps, update, reason), n in counts.items():
        md.append("- " + markdown.text(f"{system}, {data}, {gpus} GPUs, {num_ps} PS, {update}: {n}× {reason}"))
    failed_groups = [r for r in analysis.best if r["status"] != "ok"]
    if failed_groups:
        md += ["", "GPU counts with no successful configuration (no best, no speedup):", ""]
        md += [
            "- " + markdown.text(f"{r['system']} ({r['model']}, bs {r['batch_size']}), {r['data']}, {r['gpus']} GPUs")
            for r in failed_groups
        ]
    return md


def build(
    rows: list[dict[str, Any]],
    output: str | Path,
    *,
    reference: str = "published",
    formats: Sequence[str] = ("png", "svg"),
    system_map: Mapping[str, str] | None = None,
    db: str = "",
    sweep_id: str | None = None,
    appendix: Appendix | None = None,
) -> BuildResult:
    """Write the whole report for `rows` under `output`; see the module's docstring.

    `appendix(rows, db)`: Markdown the caller adds at the end of the index (the report command
    passes the forecast's predicted section: dtfbench.forecast.report_section.markdown)."""
    output = Path(output)
    analysis = analyse(rows, reference, system_map)
    formats = tuple(dict.fromkeys(f for f in formats if f))
    render = _plot_renderer(formats)

    outputs: dict[str, bytes | str] = _table_outputs(analysis, db)
    tables = _table_descriptions(reference)
    logs = mlperf_logs(analysis.rows)
    outputs.update(logs)
    if logs:
        tables.append(
            (
                MLPERF_DIR + "/",
                f"each run's MLPerf log ({len(logs)}, `<run id>.log`): `:::MLLOG` lines as mlperf-logging's parser reads "
                "them (docs/accuracy.md)",
            )
        )
    plots_written: list[tuple[str, dict[str, Any], list[str]]] = []
    if render is not None:
        plots_written = _plot_outputs(analysis, render, formats, outputs)

    files = sorted(outputs) + [MANIFEST]
    outputs[MANIFEST] = _manifest(analysis, files, reference, formats, db, sweep_id)
    outputs[INDEX] = _index(analysis, db, sweep_id, tables, plots_written, files)
    extra = appendix(rows, db) if appendix else ""
    if extra:
        outputs[INDEX] += "\n" + extra

    changed, removed = _write_outputs(output, outputs)
    return BuildResult(output=output, files=sorted(outputs), changed=changed, removed=removed, analysis=analysis)


def _plot_renderer(formats: tuple[str, ...]) -> Callable[..., dict[str, bytes]] | None:
    """dtfbench.report.plots.render when plots are asked for, else None; ReportError without matplotlib."""
    if not formats:
        return None
    try:
        from . import plots  # matplotlib: the 'report' extra
    except ImportError as err:  # matplotlib is optional (the report extra): say how to get it
        raise ReportError(f"plots need matplotlib ({err}); install dtfbench[report] or pass --formats none") from err
    unknown = [f for f in formats if f not in plots.FORMATS]
    if unknown:
        raise ReportError(f"--formats: unknown {', '.join(unknown)}; known: {', '.join(plots.FORMATS)}")
    return plots.render


def _table_outputs(analysis: Analysis, db: str) -> dict[str, bytes | str]:
    """{file: text} of every table: environments, network, best configurations, I/O, modes, configurations, failures."""
    best_csv, best_md = best_tables(analysis)
    config_csv, config_md = configuration_tables(analysis)
    fail_csv, fail_md = failure_tables(analysis)
    env_rows, env_md = report_environment.tables(analysis.rows, analysis.summaries)
    measured = report_environment.networks(analysis.rows, db)
    net_rows, net_md = report_environment.network_tables(measured)
    return {
        "environments.md": env_md + "\n" + net_md,
        "environments.csv": _csv(report_environment.CSV_COLUMNS, env_rows),
        "network.csv": _csv(report_environment.NETWORK_CSV_COLUMNS, net_rows),
        "best_configurations.md": best_md,
        "best_configurations.csv": best_csv,
        "io_overhead.csv": io_table(analysis),
        "ps_or_all_reduce.csv": modes_table(analysis),
        "configurations.md": config_md,
        "configurations.csv": config_csv,
        "failures.md": fail_md,
        "failures.csv": fail_csv,
    }


def _table_descriptions(reference: str) -> list[tuple[str, str]]:
    """(file, what it holds) of every table, as the index lists them."""
    return [
        (
            "best_configurations.md",
            "the best configuration per system and GPU count (the study's Tables "
            "1-3): images/sec with 95% CI, speedup, efficiency, I/O overhead"
            + (", beside the published numbers" if reference != "none" else ""),
        ),
        ("best_configurations.csv", "the same, every column"),
        ("io_overhead.csv", "I/O overhead per system and GPU count"),
        (
            "ps_or_all_reduce.csv",
            "per GPU count, the best PS configuration beside all-reduce, the difference and its 95% CI",
        ),
        ("configurations.md", "every configuration: mean, 95% CI, min/max, runs ok/failed and why"),
        ("configurations.csv", "the same, every column"),
        (
            "environments.md",
            "per system, the distinct environments (GPU, driver, TF and its build, instance "
            "type, ...) and the runs of each; the configurations they split",
        ),
        ("environments.csv", "the same, every column"),
        ("network.csv", "each sweep's network as its link probe measured it, per host (GB/s, ms)"),
        ("failures.md", "every failed run and its reason"),
        ("failures.csv", "the same, every column"),
    ]


def _plot_outputs(
    analysis: Analysis,
    render: Callable[..., dict[str, bytes]],
    formats: tuple[str, ...],
    outputs: dict[str, bytes | str],
) -> list[tuple[str, dict[str, Any], list[str]]]:
    """Render every plot into `outputs` (each format and a JSON sidecar); (name, spec, files) of each."""
    written = []
    for name, spec in plot_specs(analysis):
        files = [f"plots/{name}.{fmt}" for fmt in formats]
        images = render(spec, formats)
        for fmt, rel in zip(formats, files):
            outputs[rel] = images[fmt]
        sidecar = dict(spec, files=[Path(f).name for f in files])
        outputs[f"plots/{name}.json"] = json.dumps(sidecar, indent=2, sort_keys=True) + "\n"
        written.append((name, spec, files + [f"plots/{name}.json"]))
    return written


def _manifest(
    analysis: Analysis,
    files: list[str],
    reference: str,
    formats: tuple[str, ...],
    db: str,
    sweep_id: str | None,
) -> str:
    """manifest.json: every file of the report (the index too) and the settings it was built with."""
    return (
        json.dumps(
            {
                "files": sorted(files + [INDEX]),
                "reference": reference,
                "formats": list(formats),
                "db": db,
                "sweep_id": sweep_id,
                "system_map": {s: analysis.system_map[s] for s in sorted(analysis.system_map)},
            },
            indent=2,
            sort_keys=True,
        )
        + "\n"
    )


def _write_outputs(output: Path, outputs: Mapping[str, bytes | str]) -> tuple[list[str], list[str]]:
    """Write what changed (the index last) and remove what the last build listed and this one no longer makes."""
    previous = _previous_files(output)  # before the new manifest replaces the old one
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
    return changed, removed


MLPERF_DIR = "mlperf"


def mlperf_logs(rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """{mlperf/<run id>.log: its text} for every run whose worker 0 wrote an MLPerf log (ours)."""
    logs = {}
    # A run id is a plain name (dtfbench.plan.sweep); an ok row's log wins over its failed attempts'.
    for row in sorted(rows, key=lambda r: r.get("status") == "ok"):
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", str(row.get("run_id"))):
            continue
        for result in row.get("worker_results") or []:
            if isinstance(result, Mapping) and result.get("mlperf_log"):
                logs[f"{MLPERF_DIR}/{row['run_id']}.log"] = "\n".join(result["mlperf_log"]) + "\n"
    return logs


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
