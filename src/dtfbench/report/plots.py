"""Render the report's plots from plain specs (matplotlib, Agg; no pyplot, no global state).

A spec is a JSON-serialisable dict, the same one the report writes beside each plot as its
sidecar (``<plot>.json``), so what a test reads there is what was drawn:

    {"plot": "speedup", "kind": "line" | "bar" | "stacked", "title": ..., "x_label": ..., "y_label": ...,
     "x_scale": "log2" | "category", "y_scale": "log2" (optional), "annotate": false,
     "series": [{"label": "daint synthetic", "source": "ours" | "published" | "ideal",
                 "system": ..., "data": ..., "style": 0,
                 "points": [{"x": 1, "y": 138.2, "low": 137.9, "high": 138.6}, ...]}]}

Line plots put GPUs on a log2 axis (ticks at the GPU counts, as in the study's notebook),
and the y axis too where the spec says so (speedup: the ideal is then the diagonal);
bar plots group the series per x category; stacked plots ("kind": "stacked") stack them in
one bar per category, labelled with each point's ``bound``. `low`/`high` (a 95% CI) become error bars;
published series are dashed (lines) or hatched (bars) in the colour of the matching series
of ours; 'ideal' is a thin black dashed line. Output is deterministic for a given matplotlib
(no dates in SVG, a fixed SVG id salt), so an unchanged report rewrites no file.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from typing import Any

import matplotlib

# The Agg canvas, attached to each Figure directly: pyplot and the process-wide backend are
# never touched, so this works headless and inside a program that uses another backend.
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

FORMATS = ("png", "svg")
_RC = {"svg.hashsalt": "dtfbench-report", "svg.fonttype": "path", "font.size": 10}
_PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _tick(value: float, _pos: Any = None) -> str:
    return f"{value:g}"


def _colour(style: int) -> str:
    return _PALETTE[style % len(_PALETTE)]


def _xs(spec: Mapping[str, Any]) -> list:
    values = {p["x"] for s in spec["series"] for p in s["points"]}
    return sorted(values, key=lambda v: (not isinstance(v, (int, float)), v if isinstance(v, (int, float)) else str(v)))


def _draw_line(ax, spec: Mapping[str, Any]) -> None:
    xs = _xs(spec)
    for series in spec["series"]:
        points = sorted(series["points"], key=lambda p: p["x"])
        if not points:
            continue
        x = [p["x"] for p in points]
        y = [p["y"] for p in points]
        source = series.get("source", "ours")
        if source == "ideal":
            ax.plot(x, y, color="black", linestyle="--", linewidth=1, label=series["label"], zorder=1)
            continue
        style = int(series.get("style", 0))
        published = source == "published"
        ax.plot(
            x,
            y,
            color=_colour(style),
            marker=_MARKERS[style % len(_MARKERS)],
            linestyle="--" if published else "-",
            linewidth=1.5 if published else 2,
            markerfacecolor="white" if published else _colour(style),
            label=series["label"],
            zorder=3,
        )
        lows = [p.get("low") for p in points]
        if any(v is not None for v in lows):
            err = [
                [(p["y"] - p["low"]) if p.get("low") is not None else 0 for p in points],
                [(p["high"] - p["y"]) if p.get("high") is not None else 0 for p in points],
            ]
            ax.errorbar(x, y, yerr=err, fmt="none", ecolor=_colour(style), capsize=3, zorder=2)
    if spec.get("x_scale") == "log2" and xs and all(isinstance(v, (int, float)) and v > 0 for v in xs):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(xs))
        ax.xaxis.set_major_formatter(FuncFormatter(_tick))
        ax.xaxis.set_minor_locator(NullLocator())
        if len(xs) == 1:
            ax.set_xlim(xs[0] / 1.5, xs[0] * 1.5)
    ys = [p["y"] for s in spec["series"] for p in s["points"] if p.get("y") is not None]
    if spec.get("y_scale") == "log2" and ys and all(y > 0 for y in ys):
        ax.set_yscale("log", base=2)
        ax.yaxis.set_major_formatter(FuncFormatter(_tick))
        ax.yaxis.set_minor_locator(NullLocator())


def _draw_bar(ax, spec: Mapping[str, Any]) -> None:
    categories = _xs(spec)
    index = {c: i for i, c in enumerate(categories)}
    series_list = [s for s in spec["series"] if s.get("source") != "ideal"]
    n = max(1, len(series_list))
    width = 0.8 / n
    top = max([abs(p["y"]) for s in series_list for p in s["points"] if p["y"] is not None] or [1.0])
    for k, series in enumerate(series_list):
        points = [p for p in series["points"] if p["y"] is not None and not math.isnan(p["y"])]
        if not points:
            continue
        pos = [index[p["x"]] - 0.4 + width * (k + 0.5) for p in points]
        y = [p["y"] for p in points]
        style = int(series.get("style", 0))
        published = series.get("source") == "published"
        err = None
        if any(p.get("low") is not None for p in points):
            err = [
                [(p["y"] - p["low"]) if p.get("low") is not None else 0 for p in points],
                [(p["high"] - p["y"]) if p.get("high") is not None else 0 for p in points],
            ]
        ax.bar(
            pos,
            y,
            width * 0.95,
            color="white" if published else _colour(style),
            edgecolor=_colour(style),
            hatch="//" if published else None,
            linewidth=1,
            label=series["label"],
            yerr=err,
            capsize=3 if err else 0,
            zorder=2,
        )
        if spec.get("annotate"):
            for xp, yp in zip(pos, y):
                ax.text(xp, yp + top / 100, f"{yp:.2f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(categories)))
    ax.set_xticklabels([str(c) for c in categories])
    ax.axhline(0, color="black", linewidth=0.8)


def _draw_stacked(ax, spec: Mapping[str, Any]) -> None:
    """One bar per x category, the series stacked in their order; each bar's label says its
    bound (a point's ``bound``) under the category."""
    categories = _xs(spec)
    index = {c: i for i, c in enumerate(categories)}
    bottoms = [0.0] * len(categories)
    bounds: dict[Any, str] = {}
    for series in spec["series"]:
        points = [p for p in series["points"] if p.get("y") is not None]
        if not points:
            continue
        pos = [index[p["x"]] for p in points]
        heights = [float(p["y"]) for p in points]
        style = int(series.get("style", 0))
        ax.bar(
            pos,
            heights,
            0.6,
            bottom=[bottoms[i] for i in pos],
            color=_colour(style),
            edgecolor="black",
            linewidth=0.5,
            label=series["label"],
            zorder=2,
        )
        for i, height in zip(pos, heights):
            bottoms[i] += height
        for p in points:
            if p.get("bound"):
                bounds[p["x"]] = str(p["bound"])
    ax.set_xticks(range(len(categories)))
    ax.set_xticklabels([f"{c}\n({bounds[c]})" if c in bounds else str(c) for c in categories])


def render(spec: Mapping[str, Any], formats: tuple[str, ...] = FORMATS) -> dict[str, bytes]:
    """The plot of `spec` in each of `formats` ('png', 'svg'), as bytes."""
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown plot format(s) {', '.join(unknown)}; known: {', '.join(FORMATS)}")
    out: dict[str, bytes] = {}
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(9, 5.5), dpi=100, layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        ax.grid(True, which="major", alpha=0.4, zorder=0)
        ax.set_axisbelow(True)
        if spec["kind"] == "line":
            _draw_line(ax, spec)
        elif spec["kind"] == "bar":
            _draw_bar(ax, spec)
        elif spec["kind"] == "stacked":
            _draw_stacked(ax, spec)
        else:
            raise ValueError(f"unknown plot kind {spec['kind']!r}")
        ax.set_title(spec.get("title", ""))
        ax.set_xlabel(spec.get("x_label", ""))
        ax.set_ylabel(spec.get("y_label", ""))
        if spec["series"]:
            ax.legend(title=spec.get("legend_title"), fontsize=8, loc=spec.get("legend_loc", "best"))
        for fmt in formats:
            buf = io.BytesIO()
            metadata = {"Date": None} if fmt == "svg" else {"Software": None}
            fig.savefig(buf, format=fmt, metadata=metadata)
            out[fmt] = buf.getvalue()
    return out
