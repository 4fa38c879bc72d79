"""Benchmark plots from plain JSON records: one function that tolerates any record shape.

Every benchmark in lsm_lab (`lsm_lab.bench.merge`, `lsm_lab.bench.lookup`,
the Spark compaction benchmark) prints or saves a list of flat dicts, one per
measurement, e.g.

    {"contender": "sorted", "k": 8,  "rows_in": 1000000, "seconds": 0.91, "rows_per_s": 1.1e6, "peak_rss_mib": 180}
    {"engine": "spark", "merge": "hash", "rows": 8000000, "k": 4, "seconds": 41.0, "peak_rss_mib": 2100}
    {"layout": "lsm_tree", "mode": "lookup", "seconds": 0.004, "bytes_read": 81234, "files_opened": 3}

**`plot_bench(records, x=, y=, group=)`** draws `y` against `x`, one series
per value of `group` (a field name, or several joined with "/"):

* numeric `x` (k, rows): lines with markers, sorted by x; read the slope, and
  use ``logx``/``logy`` when x doubles from point to point;
* anything else (layout names): grouped bars, one bar per group at each x.

Records missing `x` or `y` (or whose `y` is not a number, such as a failed
run's ``{"contender": ..., "error": ...}``) are skipped, and repeated
measurements of one (group, x) are reduced to their median, so the input can
be the raw output of a benchmark. Series colours come from a fixed palette in
the sorted order of the group labels: the same records give the same picture.

`plot_merge_bench` and `plot_lookup_bench` pick sensible fields for the two
benchmarks (throughput and peak memory against k; time, bytes read and files
opened per layout). `load_records` reads a JSON list or JSON-lines file.

Taught in: notebooks/08_point_lookups.ipynb
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from lsm_lab.viz.style import INSTANT_PALETTE, VizFigure, new_figure

Records = Iterable[Mapping[str, Any]] | str | os.PathLike[str]
Group = str | Sequence[str] | None

LABELS = {
    "k": "k (inputs merged)", "rows": "rows", "rows_in": "rows in", "seconds": "seconds",
    "rows_per_s": "rows per second", "peak_rss_mib": "peak RSS (MiB)", "bytes_read": "bytes read",
    "files_opened": "files opened", "layout": "layout",
}


def load_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """A JSON list of records, a JSON object holding ``records``, or one JSON object per line."""
    text = Path(path).read_text()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]
    if isinstance(data, Mapping):
        data = data.get("records", [data])
    return [dict(r) for r in data]


def _records(records: Records) -> list[Mapping[str, Any]]:
    if isinstance(records, (str, os.PathLike)):
        return list(load_records(records))
    return [r for r in records if isinstance(r, Mapping)]


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float, np.integer, np.floating)) and math.isfinite(float(v)):
        return float(v)
    return None


def _xkey(v: Any) -> Any:
    return json.dumps(v, default=str) if isinstance(v, (list, dict)) else v


def _group_label(r: Mapping[str, Any], group: Group) -> str:
    if group is None:
        return ""
    fields = [group] if isinstance(group, str) else list(group)
    return "/".join(str(r.get(f, "?")) for f in fields)


def series(records: Records, x: str, y: str, group: Group = None) -> dict[str, list[tuple[Any, float]]]:
    """Group label → [(x, median y)] sorted by x: exactly what `plot_bench` draws."""
    acc: dict[str, dict[Any, list[float]]] = {}
    seen: dict[str, int] = {}  # categories keep the order the records give them
    for r in _records(records):
        xv, yv = r.get(x), _number(r.get(y))
        if xv is None or yv is None:
            continue
        xv = _xkey(xv)
        seen.setdefault(str(xv), len(seen))
        acc.setdefault(_group_label(r, group), {}).setdefault(xv, []).append(yv)
    out = {}
    for label in sorted(acc):
        pts = acc[label]
        keys = sorted(pts, key=lambda v: (_number(v) is None, _number(v) or 0.0, seen[str(v)]))
        out[label] = [(k, statistics.median(pts[k])) for k in keys]
    return out


def plot_bench(records: Records, x: str, y: str, group: Group = None, *, logx: bool = False, logy: bool = False,
               title: str | None = None, xlabel: str | None = None, ylabel: str | None = None,
               ax: Axes | None = None) -> Figure:
    """`y` against `x`, one series per `group`: lines for numeric x, grouped bars otherwise.

    Draws into `ax` when given (and returns its figure), else into a new figure.
    """
    rows = _records(records)
    data = series(rows, x, y, group)
    fig: Figure
    if ax is None:
        fig = new_figure(7.5, 4.2)
        ax = fig.add_subplot()
    else:
        fig = ax.figure  # type: ignore[assignment]
    xs_all = [xv for pts in data.values() for xv, _ in pts]
    numeric = bool(xs_all) and all(_number(v) is not None for v in xs_all)
    colours = {label: INSTANT_PALETTE[i % len(INSTANT_PALETTE)] for i, label in enumerate(data)}
    if numeric:
        for label, pts in data.items():
            ax.plot([float(v) for v, _ in pts], [v for _, v in pts], marker="o", markersize=4, linewidth=1.6,
                    color=colours[label], label=label or y, gid=f"series:{label}")
        if logx:
            ax.set_xscale("log", base=2 if all(float(v).is_integer() and float(v) > 0 for v in xs_all) else 10)
        ticks = sorted({float(v) for v in xs_all})
        if len(ticks) <= 12:
            if logx:
                ax.minorticks_off()
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    else:
        cats = list(dict.fromkeys(str(_xkey(r[x])) for r in rows
                                  if r.get(x) is not None and _number(r.get(y)) is not None))
        n = max(len(data), 1)
        width = 0.8 / n
        for i, (label, pts) in enumerate(data.items()):
            pos = [cats.index(str(v)) - 0.4 + width * (i + 0.5) for v, _ in pts]
            bars = ax.bar(pos, [v for _, v in pts], width=width * 0.92, color=colours[label], label=label or y,
                          edgecolor="#222222", linewidth=0.5)
            for bar, (v, _) in zip(bars, pts):
                bar.set_gid(f"{label}@{v}")
        ax.set_xticks(range(len(cats)), cats)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel or LABELS.get(x, x))
    ax.set_ylabel(ylabel or LABELS.get(y, y))
    ax.grid(color="#e6e6e6", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    gname = group if isinstance(group, str) or group is None else "/".join(group)
    ax.set_title(title or f"{LABELS.get(y, y)} by {LABELS.get(x, x)}" + (f", per {gname}" if gname else ""),
                 loc="left", fontsize=10)
    if data and group is not None:
        ax.legend(fontsize=8, frameon=False, title=gname, title_fontsize=8)
    if not data:
        ax.text(0.5, 0.5, f"(no records with {x} and {y})", transform=ax.transAxes, ha="center", va="center")
    return fig


def _present(rows: Sequence[Mapping[str, Any]], fields: Sequence[str]) -> list[str]:
    return [f for f in fields if any(f in r for r in rows)]


def _varying(rows: Sequence[Mapping[str, Any]], field: str) -> bool:
    return len({json.dumps(r.get(field), default=str) for r in rows if field in r}) > 1


def plot_merge_bench(records: Records, *, x: str = "k", metrics: Sequence[str] | None = None,
                     logx: bool = True, title: str | None = None) -> VizFigure:
    """The merge (or Spark compaction) benchmark: throughput/time and peak memory against `x`.

    Series are the contender/engine (and merge, and the row count when several
    were measured); `metrics` default to ``rows_per_s`` (else ``seconds``) and
    ``peak_rss_mib`` when present.
    """
    rows = [r for r in _records(records) if "error" not in r]
    if metrics is None:
        speed = _present(rows, ["rows_per_s", "seconds"])[:1]
        metrics = speed + _present(rows, ["peak_rss_mib"])
        metrics = metrics or ["seconds"]
    names = _present(rows, ["contender", "engine", "merge"])
    group = [f for f in names if _varying(rows, f)] or names[:1]
    for size in ("rows", "rows_in"):
        if size != x and _varying(rows, size):
            group.append(size)
            break
    fig = new_figure(5.2 * len(metrics) + 0.6, 4.2)
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    for ax, metric in zip(axes, metrics):
        plot_bench(rows, x, metric, group or None, logx=logx, logy=metric == "rows_per_s", ax=ax)
    fig.suptitle(title or "Merge benchmark", fontsize=11, x=0.01, ha="left")
    return fig


def plot_lookup_bench(records: Records, *, metrics: Sequence[str] = ("seconds", "bytes_read", "files_opened"),
                      group: Group = None, title: str | None = None) -> VizFigure:
    """The lookup benchmark: one panel per metric, bars per layout (ratio rows skipped)."""
    rows = [r for r in _records(records) if r.get("layout") not in (None, "ratio")]
    metrics = [m for m in metrics if any(_number(r.get(m)) is not None for r in rows)] or ["seconds"]
    if group is None:
        fields = [f for f in ("mode", "cache", "keys") if _varying(rows, f)]
        group = fields or None
    fig = new_figure(4.6 * len(metrics) + 0.6, 4.2)
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    for ax, metric in zip(axes, metrics):
        plot_bench(rows, "layout", metric, group, logy=metric == "bytes_read", ax=ax)
    fig.suptitle(title or "Point-lookup benchmark", fontsize=11, x=0.01, ha="left")
    return fig


__all__ = ["load_records", "plot_bench", "plot_lookup_bench", "plot_merge_bench", "series"]
