"""Pictures of a table's two levels: file sizes per file group, and key ranges per file.

Each file group of an `lsm_tree` table is a small LSM tree of two levels (see
`Table.dump_levels`, which prints the same facts as text):

    L0   log files, one per write since the last compaction, each sorted by key,
         overlapping each other and the base file        (newest on top)
    L1   one base file, sorted by key                    (rewritten by compaction)

**`plot_levels`** draws one row per file group (labelled `partition/file id`):
the L1 base file first (bold outline), then the L0 logs left to right in
completion order, each bar as long as its rows (or bytes), coloured by the
instant that wrote it; delete logs are hatched. Read it as "how much does a
snapshot read of this group have to merge": a long tail of L0 bars is what
compaction folds back into L1, and the same colour in every row shows one
write touching every bucket.

    city=chennai/00000000-cd76  [███████ L1 ███████][██][███][/]  L0×3
    city=chennai/00000001-7068  [██████ L1 ██████][███][████][//] L0×3

**`plot_key_ranges`** is the classic LSM picture, one panel per file group:
x is the key space, y the level (L1 at the bottom, L0 logs stacked above it by
age, oldest first), and every file is a bar spanning its [min key, max key]
(from the Parquet footer: no data page is read). Bars that overlap
horizontally must be merged by a reader; with random keys (UUIDs), every log
spans almost the whole key space, which is why lookups and reads pay for every
L0 file until compaction.

*The key axis.* Keys are strings, so x is an order-preserving numeric map of
their prefixes (`KeyScale`): take the characters seen in the first 12
characters of every drawn key, give each its rank in that sorted alphabet
(0 is kept for "end of key"), and read a key as a fraction in that base. Two
keys keep their order, and for keys with random characters (UUIDs, hashes)
distances are proportional to how much key space lies between them. The end
ticks are the smallest and largest key drawn (first 8 characters); the ticks
between them sit exactly where a one-character prefix falls ("8…" is where
keys starting with "8" begin).

Both pictures are drawn from `level_files`, plain per-file facts computed by
the library (`Table.file_groups` and `table.inspect.file_facts`), so
`plot_plan` can draw the same bars from a before/after pair of anything
`level_files` accepts. `levels_frame` gives those facts as a DataFrame.

Simplified compared with Apache Hudi: only the latest file slice of each file
group is drawn (older slices only serve time travel); v1 (#HUDI#) logs have no
footer statistics, so they are drawn with an unknown size ("?") and no key range.

Taught in: notebooks/00_why_lsm.ipynb, notebooks/03_sorted_writes_and_levels.ipynb
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from lsm_lab.errors import LsmLabError
from lsm_lab.filegroup.fsview import DataFile, FileGroup, FileSlice
from lsm_lab.format import naming
from lsm_lab.table.inspect import file_facts
from lsm_lab.timeline.instanttime import TimeLike
from lsm_lab.viz.style import DELETE_HATCH, VizFigure, group_label, instant_colours, legend_subset, new_figure

if TYPE_CHECKING:
    from lsm_lab.api import Table

SIZES = ("rows", "bytes", "files")
EDGE = "#222222"


@dataclass(frozen=True)
class LevelFile:
    """One data file as the level pictures draw it (plain data, no paths needed).

    ``position`` is 0 for the L1 base file and 1, 2, ... for the L0 logs in
    completion order; ``rows``/``bytes``/keys are None when unknown.
    """

    partition: str
    file_id: str
    level: str
    position: int
    name: str
    instant: str
    is_delete: bool = False
    rows: int | None = None
    bytes: int | None = None
    min_key: str | None = None
    max_key: str | None = None

    @property
    def group(self) -> tuple[str, str]:
        return (self.partition, self.file_id)


LEVEL_COLUMNS = list(LevelFile.__dataclass_fields__)


# ---------------------------------------------------------------------------------- facts

def _facts(f: DataFile) -> dict[str, Any]:
    try:
        return file_facts(f)
    except (LsmLabError, OSError):  # a file cleaned since the view was built: size only
        return {"rows": None, "min_key": None, "max_key": None}


def _from_slice(fs: FileSlice) -> list[LevelFile]:
    out = []
    if fs.base_file is not None:
        facts = _facts(fs.base_file)
        out.append(LevelFile(fs.partition, fs.file_id, "L1", 0, fs.base_file.path.name, fs.base_file.instant,
                             False, facts["rows"], fs.base_file.size, facts["min_key"], facts["max_key"]))
    for pos, log in enumerate(fs.log_files, start=1):
        facts = _facts(log)
        out.append(LevelFile(fs.partition, fs.file_id, "L0", pos, log.path.name, log.instant,
                             log.name.is_delete, facts["rows"], log.size, facts["min_key"], facts["max_key"]))
    return out


def _parsed(name: str) -> tuple[str, bool]:
    parsed = naming.parse(name)
    if parsed is None:
        return "", False
    return parsed.instant, parsed.is_delete


def _from_slices_row(row: Mapping[str, Any]) -> list[LevelFile]:
    """One row of `Table.file_slices()`: names only, so sizes per file are unknown."""
    part, fid = str(row.get("partition") or ""), str(row["file_id"])
    out = []
    base = row.get("base_file")
    if isinstance(base, str) and base:
        inst, _ = _parsed(base)
        out.append(LevelFile(part, fid, "L1", 0, base, inst or str(row.get("base_instant") or "")))
    logs = row.get("log_files")
    for pos, name in enumerate(list(logs) if logs is not None else [], start=1):
        inst, is_del = _parsed(str(name))
        out.append(LevelFile(part, fid, "L0", pos, str(name), inst, is_del))
    return out


def _from_mapping(row: Mapping[str, Any]) -> LevelFile:
    def opt_int(v: Any) -> int | None:
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)

    def opt_str(v: Any) -> str | None:
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)

    name = str(row.get("name") or row.get("file") or "")
    inst, is_del = _parsed(name)
    level = str(row.get("level") or ("L1" if int(row.get("position", 0) or 0) == 0 else "L0"))
    position = int(row.get("position", 0 if level == "L1" else 1) or 0)
    return LevelFile(str(row.get("partition") or ""), str(row["file_id"]), level, position, name,
                     str(row.get("instant") or inst), bool(row.get("is_delete", is_del)),
                     opt_int(row.get("rows")), opt_int(row.get("bytes", row.get("size"))),
                     opt_str(row.get("min_key")), opt_str(row.get("max_key")))


def level_files(source: Any, as_of: TimeLike | None = None) -> list[LevelFile]:
    """Normalise anything with levels into a list of `LevelFile`, grouped and in level order.

    Accepts a `Table` (its latest slices as of `as_of`), a list of `FileGroup`
    (latest slice of each) or `FileSlice`, the DataFrame of `Table.file_slices()`
    (file names only: sizes unknown), the DataFrame of `levels_frame`, or
    dicts / `LevelFile`s with the `LevelFile` fields.
    """
    files: list[LevelFile] = []
    if hasattr(source, "file_groups") and callable(source.file_groups):
        for group in source.file_groups(as_of):
            files.extend(_from_slice(group.latest))
    elif isinstance(source, pd.DataFrame):
        records = source.to_dict("records")
        if "log_files" in source.columns and "level" not in source.columns:
            for row in records:
                files.extend(_from_slices_row(row))
        else:
            files.extend(_from_mapping(row) for row in records)
    else:
        for item in source:
            if isinstance(item, LevelFile):
                files.append(item)
            elif isinstance(item, FileGroup):
                files.extend(_from_slice(item.latest))
            elif isinstance(item, FileSlice):
                files.extend(_from_slice(item))
            elif isinstance(item, Mapping):
                files.append(_from_mapping(item))
            else:
                raise TypeError(f"cannot draw levels from a {type(item).__name__}")
    return sorted(files, key=lambda f: (f.partition, f.file_id, f.position))


def levels_frame(table: Table, as_of: TimeLike | None = None) -> pd.DataFrame:
    """One row per data file of every latest slice: level, position, instant, rows, bytes, key range."""
    return pd.DataFrame([asdict(f) for f in level_files(table, as_of)], columns=LEVEL_COLUMNS)


def instant_labels(table: Table) -> dict[str, str]:
    """Instant time → a legend label such as ``20261122001812163 upsert`` (from `Table.timeline`)."""
    out: dict[str, str] = {}
    frame = table.timeline()
    for row in frame.to_dict("records"):
        op = row.get("operation")
        what = str(op).lower() if isinstance(op, str) and op else str(row.get("action") or "")
        out[str(row["begin_time"])] = f"{row['begin_time']} {what}".rstrip()
    return out


def table_colours(table: Table) -> dict[str, str]:
    """Colours for every instant on the table's timeline, so each figure of a table agrees."""
    return instant_colours(str(t) for t in table.timeline()["begin_time"])


def _source_colours(source: Any, files: Sequence[LevelFile]) -> tuple[dict[str, str], dict[str, str]]:
    if hasattr(source, "timeline") and callable(source.timeline):
        colours = table_colours(source)
        labels = instant_labels(source)
    else:
        colours, labels = {}, {}
    missing = [f.instant for f in files if f.instant not in colours]
    if missing:
        colours = instant_colours(list(colours) + missing)
    return colours, labels


# ---------------------------------------------------------------------------------- drawing

def _size_of(f: LevelFile, size: str) -> float | None:
    if size == "files":
        return 1.0
    value = f.rows if size == "rows" else f.bytes
    return None if value is None else float(value)


def resolve_size(files: Sequence[LevelFile], size: str) -> str:
    """`auto` → rows if every file's rows are known, else bytes if known, else files."""
    if size != "auto":
        if size not in SIZES:
            raise ValueError(f"size must be one of {', '.join(SIZES)} or 'auto', not {size!r}")
        return size
    for candidate in ("rows", "bytes"):
        if files and all(_size_of(f, candidate) is not None for f in files):
            return candidate
    return "files"


def group_order(files: Iterable[LevelFile]) -> list[tuple[str, str]]:
    return sorted({f.group for f in files})


def draw_levels(ax: Axes, files: Sequence[LevelFile], *, size: str, colours: Mapping[str, str],
                groups: Sequence[tuple[str, str]] | None = None, scale: float | None = None,
                xlabel: str | None = None) -> float:
    """Draw one row of bars per file group into `ax`; returns the widest row (for shared scales).

    Each bar is one patch whose gid is ``partition/file name``.
    """
    groups = list(groups) if groups is not None else group_order(files)
    by_group: dict[tuple[str, str], list[LevelFile]] = {g: [] for g in groups}
    for f in files:
        by_group.setdefault(f.group, []).append(f)
    totals = [sum(_size_of(f, size) or 0.0 for f in by_group[g]) for g in groups]
    widest = max(totals, default=0.0) or 1.0
    ref = scale or widest
    unknown, gap = 0.03 * ref, 0.006 * ref
    for y, g in enumerate(groups):
        x = 0.0
        members = sorted(by_group[g], key=lambda f: f.position)
        for f in members:
            value = _size_of(f, size)
            w = unknown if value is None else value
            base = f.level == "L1"
            (rect,) = ax.barh(y, w, left=x, height=0.62, color=colours.get(f.instant, "#cccccc"),
                              edgecolor=EDGE, linewidth=1.6 if base else 0.6,
                              linestyle=":" if value is None else "-",
                              hatch=DELETE_HATCH if f.is_delete else None)
            rect.set_gid(f"{f.partition}/{f.name}")
            if base and w >= 0.08 * ref:
                ax.text(x + w / 2, y, "L1", ha="center", va="center", fontsize=8, color="white",
                        fontweight="bold")
            elif value is None:
                ax.text(x + w / 2, y, "?", ha="center", va="center", fontsize=8)
            x += w + gap
        logs = sum(1 for f in members if f.level == "L0")
        ax.text(x + gap, y, f"L0×{logs}" if logs else "no L0", va="center", fontsize=8, color="#444444")
    ax.set_yticks(range(len(groups)), [group_label(p, fid) for p, fid in groups], fontsize=8)
    ax.set_ylim(max(len(groups), 1) - 0.5, -0.5)  # first group on top
    ax.set_xlim(0, ref * 1.12)
    unit = {"rows": "rows", "bytes": "bytes", "files": "files (one unit each)"}[size]
    ax.set_xlabel(unit if xlabel is None else xlabel.format(unit=unit))
    if size == "files":
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(axis="x", color="#e6e6e6", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return widest


def instant_handles(instants: Iterable[str], colours: Mapping[str, str], labels: Mapping[str, str],
                    *, deletes: bool = True) -> list[Patch]:
    """Legend entries: one per instant (time order, at most 12), then the delete-log hatch."""
    ordered = sorted(set(instants), key=lambda t: (t + "000") if len(t) == 14 else t)
    handles = []
    for t in legend_subset(ordered):
        if t == "…":
            handles.append(Patch(facecolor="white", edgecolor="white", label="…"))
        else:
            handles.append(Patch(facecolor=colours.get(t, "#cccccc"), edgecolor=EDGE, linewidth=0.5,
                                 label=labels.get(t, t)))
    if deletes:
        handles.append(Patch(facecolor="white", edgecolor=EDGE, hatch=DELETE_HATCH, linewidth=0.5,
                             label="delete log"))
    return handles


def _when(as_of: TimeLike | None) -> str:
    return "now" if as_of is None else f"as of {as_of}"


def plot_levels(table: Any, *, as_of: TimeLike | None = None, size: str = "rows", title: str | None = None) -> VizFigure:
    """Per file group: the L1 base file and the L0 logs as bars sized by `size`, coloured by instant.

    `table` is a `Table` (or anything `level_files` accepts); `size` is
    ``rows``, ``bytes``, ``files`` or ``auto``.
    """
    files = level_files(table, as_of)
    size = resolve_size(files, size)
    colours, labels = _source_colours(table, files)
    groups = group_order(files)
    fig = new_figure(10.0, 1.4 + 0.42 * max(len(groups), 1))
    ax = fig.add_subplot()
    draw_levels(ax, files, size=size, colours=colours, groups=groups,
                xlabel="{unit}   —   L1 base file first, then L0 logs in completion order")
    name = getattr(table, "name", None)
    head = f"Levels of table {name!r}" if name else "Levels"
    ax.set_title(title or f"{head} ({_when(as_of)}): one row per file group, bars sized by {size}",
                 loc="left", fontsize=11)
    if not groups:
        ax.text(0.5, 0.5, "(no file groups)", transform=ax.transAxes, ha="center", va="center")
    fig.legend(handles=instant_handles([f.instant for f in files], colours, labels,
                                       deletes=any(f.is_delete for f in files)),
               loc="outside right upper", title="written by instant", fontsize=8, title_fontsize=8,
               frameon=False)
    return fig


# ---------------------------------------------------------------------------------- key ranges

class KeyScale:
    """An order-preserving map from string keys to [0, 1) (see the module docstring)."""

    DEPTH = 12

    def __init__(self, keys: Iterable[str]) -> None:
        self.alphabet = sorted({c for k in keys for c in str(k)[: self.DEPTH]})
        self._rank = {c: i + 1 for i, c in enumerate(self.alphabet)}
        self.base = len(self.alphabet) + 1

    def __call__(self, key: str) -> float:
        x, unit = 0.0, 1.0
        for c in str(key)[: self.DEPTH]:
            unit /= self.base
            rank = self._rank.get(c)
            if rank is None:  # a character never seen: halfway between its neighbours, and stop there
                return x + (bisect.bisect_left(self.alphabet, c) + 0.5) * unit
            x += rank * unit
        return x


def _key_ticks(keys: Sequence[str], scale: KeyScale, lo: float, hi: float, n: int = 5) -> tuple[list[float], list[str]]:
    """Ticks at the smallest and largest key, and between them at one-character prefixes ("8…")."""
    if not keys:
        return [], []
    span = (hi - lo) or 1.0
    first, last = min(keys, key=scale), max(keys, key=scale)
    ticks: list[tuple[float, str]] = [(scale(first), first[:8] + ("…" if len(first) > 8 else "")),
                                      (scale(last), last[:8] + ("…" if len(last) > 8 else ""))]
    inner = [(scale(c), c + "…") for c in scale.alphabet if lo < scale(c) < hi]
    for i in range(1, n - 1):
        if not inner:
            break
        target = lo + span * i / (n - 1)
        x, label = min(inner, key=lambda t: abs(t[0] - target))
        if all(abs(x - t) > 0.1 * span for t, _ in ticks):
            ticks.append((x, label))
    ticks = sorted(set(ticks))
    return [t for t, _ in ticks], [label for _, label in ticks]


def plot_key_ranges(table: Any, *, as_of: TimeLike | None = None, partition: str | None = None,
                    max_groups: int = 12, title: str | None = None) -> VizFigure:
    """The classic LSM picture: per file group, one bar per file spanning [min key, max key] at its level.

    `partition` keeps one partition; at most `max_groups` file groups are drawn
    (in partition/file id order), and the title says how many were left out.
    """
    files = [f for f in level_files(table, as_of) if partition is None or f.partition == partition]
    colours, labels = _source_colours(table, files)
    groups_all = group_order(files)
    groups = groups_all[:max_groups]
    files = [f for f in files if f.group in set(groups)]
    ranged = [f for f in files if f.min_key is not None and f.max_key is not None]
    keys = [k for f in ranged for k in (f.min_key, f.max_key)]
    scale = KeyScale(keys)  # type: ignore[arg-type]
    lo = min((scale(k) for k in keys), default=0.0)  # type: ignore[arg-type]
    hi = max((scale(k) for k in keys), default=1.0)  # type: ignore[arg-type]
    span = (hi - lo) or 1.0
    n = len(groups)
    ncols = 1 if n <= 3 else (2 if n <= 8 else 3)
    nrows = max(1, math.ceil(n / ncols))
    depth = max((sum(1 for f in files if f.group == g) for g in groups), default=1)
    fig = new_figure(5.2 * ncols + 1.8, 0.9 + nrows * (0.55 + 0.32 * depth))
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True)
    ticks, tick_labels = _key_ticks(keys, scale, lo, hi)  # type: ignore[arg-type]
    for i, ax in enumerate(axes.flat):
        if i >= n:
            ax.set_visible(False)
            continue
        g = groups[i]
        members = sorted((f for f in files if f.group == g), key=lambda f: f.position)
        for f in members:
            if f.min_key is None or f.max_key is None:
                continue
            x0, x1 = scale(f.min_key), scale(f.max_key)
            w = max(x1 - x0, 0.006 * span)
            left = x0 if x1 - x0 >= 0.006 * span else x0 - w / 2
            (rect,) = ax.barh(f.position, w, left=left, height=0.7, color=colours.get(f.instant, "#cccccc"),
                              edgecolor=EDGE, linewidth=1.4 if f.level == "L1" else 0.6,
                              hatch=DELETE_HATCH if f.is_delete else None)
            rect.set_gid(f"{f.partition}/{f.name}")
            if f.rows is not None and w >= 0.14 * span:
                box = {"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none"} if f.is_delete else None
                ax.text(left + w / 2, f.position, f"{f.rows:,} rows", ha="center", va="center", fontsize=7,
                        color="black" if f.is_delete else "white", bbox=box)
        ylabels = ["L1 base" if f.level == "L1" else f"L0 log {f.position}" for f in members]
        ax.set_yticks([f.position for f in members], ylabels, fontsize=7)
        top = max((f.position for f in members), default=0)
        ax.set_ylim(-0.6, max(top, depth - 1) + 0.6)
        ax.set_xlim(lo - 0.02 * span, hi + 0.02 * span)
        ax.set_title(group_label(*g), fontsize=8, loc="left")
        ax.set_xticks(ticks, tick_labels, fontsize=7)
        ax.tick_params(axis="x", labelbottom=True)
        ax.grid(axis="x", color="#e6e6e6", linewidth=0.6)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        if i // ncols == nrows - 1 or i + ncols >= n:
            ax.set_xlabel("record key (order-preserving map of key prefixes)", fontsize=8)
    name = getattr(table, "name", None)
    where = f", partition {partition}" if partition else ""
    left_out = f" (first {len(groups)} of {len(groups_all)} file groups)" if len(groups_all) > len(groups) else ""
    head = f"Key ranges of table {name!r}" if name else "Key ranges"
    fig.suptitle(title or f"{head} ({_when(as_of)}{where}){left_out}: one bar per file, "
                          "L1 base at the bottom, L0 logs above by age", fontsize=11, x=0.01, ha="left")
    if not groups:
        ax0 = axes.flat[0]
        ax0.set_visible(True)
        ax0.text(0.5, 0.5, "(no file groups)", transform=ax0.transAxes, ha="center", va="center")
    fig.legend(handles=instant_handles([f.instant for f in files], colours, labels,
                                       deletes=any(f.is_delete for f in files)),
               loc="outside right upper", title="written by instant", fontsize=8, title_fontsize=8,
               frameon=False)
    return fig


__all__ = [
    "KeyScale",
    "LevelFile",
    "draw_levels",
    "instant_labels",
    "level_files",
    "levels_frame",
    "plot_key_ranges",
    "plot_levels",
    "resolve_size",
]
