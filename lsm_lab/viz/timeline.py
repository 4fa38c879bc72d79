"""The timeline as a Gantt chart: every instant from its begin time to its completion time.

A Hudi instant has two times. The *begin* (instant) time is taken when an
action is requested and names its files; the *completion* time is taken when
the action commits. Readers order instants by completion time (RFC-103's
"completion time" ordering), which is what lets a slow writer that began first
be seen after a fast one that began later:

    instant (begin)      ├──────── deltacommit ────────┤            t1 → c1
    instant (begin)           ├── deltacommit ──┤                   t2 → c2  (c2 < c1: seen first)
    instant (begin)                                 ├─ compaction ──▷  pending: no completion yet

**`plot_timeline`** draws one row per instant (earliest begin on top),
labelled with its begin time, action and operation. A bar runs from begin to
completion and is coloured by action (fixed colours: `ACTION_COLOURS`); a
pending instant (requested or inflight) has no completion, so its bar is
hatched and open-ended, running to the right edge with a "▷ inflight"
marker. A small black tick marks each completion, and the number beside it is
the instant's place in completion order (the order readers see writes in), so
crossing begin/completion orders stand out. With ``archived=True`` the
instants of the archived (LSM) timeline come first, drawn faded.

The x axis is the time since the first begin time, in ms, s, min or h
(whichever keeps the numbers readable); instant times are
``yyyyMMddHHmmssSSS`` strings in UTC (`lsm_lab.timeline.clock.parse_time`).

Simplified compared with Apache Hudi: Hudi's timeline UI (the CLI's
`timeline show`) lists the requested/inflight/completed file times per
state; lsm_lab draws only begin and completion.

Taught in: notebooks/02_timeline.ipynb
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Mapping
from typing import Any

import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from lsm_lab.timeline.clock import parse_time
from lsm_lab.viz.style import PENDING_HATCH, VizFigure, action_colour, new_figure

EDGE = "#222222"
_UNITS = (("ms", 0.001, 2.0), ("s", 1.0, 120.0), ("min", 60.0, 7200.0), ("h", 3600.0, float("inf")))


def timeline_frame(table: Any, *, archived: bool = False) -> tuple[pd.DataFrame, bool]:
    """`table.timeline(archived=...)` if the table supports it; returns (frame, archived honoured)."""
    if isinstance(table, pd.DataFrame):
        return table, "archived" in table.columns
    if archived:
        try:
            params: Mapping[str, Any] = inspect.signature(table.timeline).parameters
        except (TypeError, ValueError):
            params = {}
        if "archived" in params:
            return table.timeline(archived=True), True
        warnings.warn("this Table.timeline() has no archived timeline yet; drawing the active timeline",
                      stacklevel=3)
    return table.timeline(), False


def _seconds(text: Any) -> float | None:
    if text is None or (isinstance(text, float) and text != text) or str(text) in ("", "None"):
        return None
    return parse_time(str(text)).timestamp()


def _unit(span: float) -> tuple[str, float]:
    for name, factor, limit in _UNITS:
        if span <= limit:
            return name, factor
    return "h", 3600.0


def plot_timeline(table: Any, *, archived: bool = False, title: str | None = None) -> VizFigure:
    """Gantt chart of the timeline: begin → completion per instant, coloured by action.

    `table` is a `Table` or the DataFrame of `Table.timeline()`; pending
    instants are drawn hatched and open-ended.
    """
    frame, with_archive = timeline_frame(table, archived=archived)
    rows = frame.to_dict("records")
    for row in rows:
        row["_b"] = _seconds(row.get("begin_time"))
        row["_c"] = _seconds(row.get("completion_time"))
    rows = [r for r in rows if r["_b"] is not None]
    rows.sort(key=lambda r: (r["_b"], str(r.get("begin_time"))))
    done = sorted((r for r in rows if r["_c"] is not None), key=lambda r: (r["_c"], r["_b"]))
    order = {id(r): i + 1 for i, r in enumerate(done)}

    t0 = min((r["_b"] for r in rows), default=0.0)
    t_end = max([r["_c"] or r["_b"] for r in rows] + [t0])
    span = (t_end - t0) or 1.0
    unit, factor = _unit(span)
    right = (t_end - t0 + 0.12 * span) / factor  # where open-ended bars stop
    min_w = 0.004 * right

    fig = new_figure(10.0, 1.5 + 0.34 * max(len(rows), 1))
    ax = fig.add_subplot()
    actions: list[str] = []
    labels: list[str] = []
    pending_seen = False
    for y, r in enumerate(rows):
        action = str(r.get("action") or "?")
        if action not in actions:
            actions.append(action)
        colour = action_colour(action)
        old = bool(r.get("archived", False)) if with_archive else False
        x0 = (r["_b"] - t0) / factor
        if r["_c"] is None:
            pending_seen = True
            (rect,) = ax.barh(y, right - x0, left=x0, height=0.6, color=colour, alpha=0.45, edgecolor=EDGE,
                              linewidth=0.6, linestyle="--", hatch=PENDING_HATCH)
            ax.text(right, y, f" ▷ {r.get('state')}", va="center", fontsize=8, color="#444444")
        else:
            w = max((r["_c"] - r["_b"]) / factor, min_w)
            (rect,) = ax.barh(y, w, left=x0, height=0.6, color=colour, alpha=0.45 if old else 1.0,
                              edgecolor=EDGE, linewidth=0.6)
            ax.plot([x0 + w, x0 + w], [y - 0.38, y + 0.38], color="black", linewidth=1.4)
            ax.text(x0 + w, y - 0.42, f" {order[id(r)]}", va="bottom", fontsize=7, color="#444444")
        rect.set_gid(str(r.get("begin_time")))
        op = r.get("operation")
        what = f" {str(op).lower()}" if isinstance(op, str) and op and not action.startswith(op.lower()) else ""
        labels.append(f"{r.get('begin_time')} {action}{what}" + (" (archived)" if old else ""))
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.set_ylim(len(rows) - 0.4, -0.7)
    ax.set_xlim(0, right * 1.08)
    start = pd.Timestamp(t0, unit="s", tz="UTC").strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if rows else "—"
    ax.set_xlabel(f"{unit} since the first begin time ({start} UTC)")
    ax.grid(axis="x", color="#e6e6e6", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    name = getattr(table, "name", None)
    which = "active + archived timeline" if with_archive else "active timeline"
    if archived and not with_archive:
        which += " (archive not available)"
    head = f"Timeline of table {name!r}" if name else "Timeline"
    ax.set_title(title or f"{head} ({which}): begin → completion per instant", loc="left", fontsize=11)
    if not rows:
        ax.text(0.5, 0.5, "(empty timeline)", transform=ax.transAxes, ha="center", va="center")
    handles: list[Any] = [Patch(facecolor=action_colour(a), edgecolor=EDGE, linewidth=0.5, label=a)
                          for a in actions]
    handles.append(Line2D([], [], color="black", linewidth=1.4, label="completion (n = reader order)"))
    if pending_seen:
        handles.append(Patch(facecolor="#dddddd", edgecolor=EDGE, hatch=PENDING_HATCH, linestyle="--",
                             label="pending (no completion)"))
    fig.legend(handles=handles, loc="outside right upper", title="action", fontsize=8, title_fontsize=8,
               frameon=False)
    return fig


def action_counts(frame: pd.DataFrame) -> Mapping[str, int]:
    """Instants per action in a timeline frame (handy for a checking cell)."""
    return {str(k): int(v) for k, v in frame["action"].value_counts().sort_index().items()}


__all__ = ["action_counts", "plot_timeline", "timeline_frame"]
