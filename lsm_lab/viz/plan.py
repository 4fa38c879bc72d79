"""A compaction, before and after: the same level bars, side by side, on one scale.

Compaction folds a file group's L0 logs back into its L1 base file (FULL),
or folds many small logs into a few (LOG, RFC-103's log compaction); the
hybrid planner picks one of the two, or nothing, per file group:

    before                                        after
    grp A  [████ L1 ████][██][██][██][/]   FULL   [█████ L1 █████]
    grp B  [█████████ L1 █████████][█]     LOG    [█████████ L1 █████████][█]     (logs folded)
    grp C  [██████ L1 ██████]              —      [██████ L1 ██████]

**`plot_plan(before, after)`** draws two panels with the same rows (the union
of the file groups, in partition/file id order) and the same x scale, so a
shrinking L0 tail is visible as shorter bars; bars are coloured by the
instant that wrote the file (the compaction's own instant gets a colour too,
so new base files stand out). Each panel's title counts base files, log files
and rows. With `plan=` (a `CompactionPlan`, anything with ``operations`` whose
items have ``partition``, ``file_id`` and ``operation_type``, or a dict
``{(partition, file_id): "FULL"}``), every planned file group's label says
what the plan does to it.

`before` and `after` are plain data, so the picture does not depend on how the
compaction ran: two lists of `FileGroup` (``table.file_groups()`` taken before
and after ``table.compact()``), two ``table.file_slices()`` DataFrames (file
names only: bars are then one unit per file), two `levels_frame` DataFrames,
or lists of `LevelFile`/dicts — anything `levels.level_files` accepts.

Simplified compared with Apache Hudi: Hudi's compaction plan also lists
metrics per operation and the service may split a plan across executors; this
picture only shows which files exist before and after.

Taught in: notebooks/07_compaction.ipynb
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lsm_lab.viz.levels import (
    LevelFile,
    draw_levels,
    group_order,
    instant_handles,
    instant_labels,
    level_files,
    resolve_size,
    table_colours,
)
from lsm_lab.viz.style import VizFigure, group_label, instant_colours, new_figure


def plan_operations(plan: Any) -> dict[tuple[str, str], str]:
    """(partition, file id) → operation type, from a plan object, a list of operations or a dict."""
    if plan is None:
        return {}
    if isinstance(plan, Mapping):
        return {(str(p), str(f)): str(v) for (p, f), v in plan.items()}
    ops = getattr(plan, "operations", plan)
    out = {}
    for op in ops:
        if isinstance(op, Mapping):
            part = op.get("partition", op.get("partitionPath", ""))
            fid, kind = op.get("file_id", op.get("fileId")), op.get("operation_type", op.get("operationType"))
        else:
            part, fid, kind = op.partition, op.file_id, getattr(op, "operation_type", "FULL")
        out[(str(part or ""), str(fid))] = str(kind or "FULL").upper()
    return out


def _summary(files: Sequence[LevelFile]) -> str:
    bases = sum(1 for f in files if f.level == "L1")
    logs = len(files) - bases
    rows = [f.rows for f in files]
    text = f"{bases} base file(s), {logs} log file(s)"
    if rows and all(r is not None for r in rows):
        text += f", {sum(rows):,} rows"  # type: ignore[arg-type]
    return text


def plot_plan(before: Any, after: Any, *, plan: Any = None, table: Any = None, size: str = "auto",
              labels: tuple[str, str] = ("before", "after"), title: str | None = None) -> VizFigure:
    """Levels before and after a compaction, side by side on one scale.

    `table` (optional) supplies instant colours and legend labels from its
    timeline; `size` is ``rows``, ``bytes``, ``files`` or ``auto``.
    """
    old, new = level_files(before), level_files(after)
    size = resolve_size(old + new, size)
    if table is not None:
        colours, names = table_colours(table), instant_labels(table)
        missing = [f.instant for f in old + new if f.instant not in colours]
        if missing:
            colours = instant_colours(list(colours) + missing)
    else:
        colours, names = instant_colours(f.instant for f in old + new), {}
    groups = sorted(set(group_order(old)) | set(group_order(new)))
    ops = plan_operations(plan)

    fig = new_figure(14.0, 1.6 + 0.42 * max(len(groups), 1))
    ax_old, ax_new = fig.subplots(1, 2, sharey=True)
    widest = 0.0
    for files in (old, new):
        by: dict[tuple[str, str], float] = {}
        for f in files:
            v = 1.0 if size == "files" else (f.rows if size == "rows" else f.bytes)
            by[f.group] = by.get(f.group, 0.0) + float(v or 0)
        widest = max([widest, *by.values()])
    for ax, files, label in ((ax_old, old, labels[0]), (ax_new, new, labels[1])):
        draw_levels(ax, files, size=size, colours=colours, groups=groups, scale=widest or 1.0)
        ax.set_title(f"{label}: {_summary(files)}", loc="left", fontsize=10)
    if ops:
        ax_old.set_yticks(range(len(groups)), [
            f"{group_label(*g)}  [{ops[g]}]" if g in ops else f"{group_label(*g)}  [—]" for g in groups],
            fontsize=8)
    ax_new.tick_params(axis="y", labelleft=False)
    planned = f" ({len(ops)} file group(s) in the plan)" if ops else ""
    fig.suptitle(title or f"Compaction{planned}: levels {labels[0]} and {labels[1]}, bars sized by {size}",
                 fontsize=11, x=0.01, ha="left")
    if not groups:
        ax_old.text(0.5, 0.5, "(no file groups)", transform=ax_old.transAxes, ha="center", va="center")
    fig.legend(handles=instant_handles([f.instant for f in old + new], colours, names,
                                       deletes=any(f.is_delete for f in old + new)),
               loc="outside right upper", title="written by instant", fontsize=8, title_fontsize=8,
               frameon=False)
    return fig


__all__ = ["plan_operations", "plot_plan"]
