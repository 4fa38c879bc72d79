"""Upgrade: switch a compatibility table to native logs and the lsm_tree layout, or rewrite it to version 10.

A table created as version 8 writes v1 (`#HUDI#`) logs so that readers that
predate RFC-103 can read it. Switching it to native (v2) logs is a change of
*what new files look like*, nothing more: no existing file is rewritten.

    before (version 8, v1 logs)            after `upgrade(table)` (version 9, v2 logs)
    file group f1                          file group f1
      slice @t0: base_t0.parquet             slice @t0: base_t0.parquet
                 .f1_t1.log.1_0-0-0  (v1)               .f1_t1.log.1_0-0-0   (v1, unchanged)
                 .f1_t2.log.1_0-0-0  (v1)               .f1_t2.log.1_0-0-0   (v1, unchanged)
                                                        f1_0-0-0_t3_1.parquet (v2, new writes)
                                                        f1_0-0-0_t4_1.delete.parquet

The slice now holds both formats. Readers merge its changes in commit order
whatever the format (`lsm_lab.filegroup.v1read.ordered_units`), time travel to a
moment before the switch simply sees no v2 file yet, and a compaction of the
slice reads both and writes one base file in the new layout.

Why the table version moves to 9. A version-8 reader does not know v2 log
names: `f1_0-0-0_t3_1.parquet` looks to it like a base file of another slice.
Keeping `hoodie.table.version` below 9 is therefore the promise that every file
group stays readable by older readers (lsm_lab then writes v1 logs only); the
first v2 log needs version 9, so that an older reader refuses the table instead
of misreading it.

The lsm_tree layout (`layout="lsm_tree"`) promises sorted files from now on.
Older files are not rewritten (no forced compaction): they carry no
`lsm_lab.sorted` footer, so a slice holding one is merged by hash (or, when a
v1 block happens to be sorted, by the sorted engine), and a file whose footer
wrongly claims order makes the sorted engine fail over to hash: an unsorted
older file costs speed, never correctness. The existing key-lookup index is
kept (`hoodie.index.type`): the existing file groups are not buckets, and a
bucket index would send updates of their keys to new groups.

Upgrading to table version 10 (`upgrade_to_v10`, `Table.upgrade()`, `lsm-lab
upgrade PATH`) rewrites the data instead; it is a table service, described in
`lsm_lab.services.upgrade`.

Simplified compared with Apache Hudi: Hudi's upgrade handlers also rewrite the
timeline, properties and metadata table of every version step (and its 9 -> 10
step rewrites no data: it keeps the old bucket files); lsm_lab upgrades only
lsm_lab-created tables of version 8 or 9 (version 6 would need its flat
timeline moved and completion times invented), rewrites each partition's latest
snapshot in memory, and has no downgrade.

Taught in: notebooks/01_build_a_table.ipynb, notebooks/09_real_hudi_tables.ipynb
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from lsm_lab.api import Table, open_table
from lsm_lab.errors import InputError, UnsupportedFeatureError
from lsm_lab.services.lock import table_lock
from lsm_lab.timeline import config as cfg
from lsm_lab.timeline.instanttime import TimeLike

KEY_UPGRADE_PENDING = cfg.KEY_UPGRADE_PENDING
KEY_UPGRADED_FROM = "lsm_lab.upgraded.from.version"
KEY_UPGRADED_AT = "lsm_lab.upgraded.at"


def _as_table(table: Table | str | os.PathLike[str]) -> Table:
    return table if isinstance(table, Table) else open_table(table)


def upgrade(table: Table | str | os.PathLike[str], *, layout: str | None = None) -> Table:
    """Switch new writes to v2 logs (table version 9) and, with `layout`, to that storage layout.

    Works on lsm_lab-created tables of version 8 (and on version 9 tables for a
    layout switch alone). Returns the reopened table. Idempotent.
    """
    t = _as_table(table)
    conf = t.config
    if layout is not None and layout not in cfg.LAYOUTS:
        raise InputError(f"layout must be one of {', '.join(cfg.LAYOUTS)}, not {layout!r}")
    if conf.props.get("lsm_lab.created") != "true":
        raise UnsupportedFeatureError("lsm_lab upgrades only tables it created (this one was written by "
                                      "Apache Hudi; use Hudi's own upgrade)", path=t.path)
    if conf.version < 8:
        raise UnsupportedFeatureError(f"table version {conf.version} cannot switch to native logs directly: its flat "
                                      "timeline has no completion times; upgrade it to version 8 with Apache Hudi "
                                      "first", path=t.path)
    updates: dict[str, str] = {}
    if conf.version < 9 or conf.log_format_version != 2:
        updates.update({
            "hoodie.table.version": "9",
            cfg.KEY_LOG_FORMAT: "2",
            KEY_UPGRADED_FROM: str(conf.version),
            KEY_UPGRADED_AT: t.latest_completion() or "",
        })
        if conf.ordering_field and not conf.props.get("hoodie.table.ordering.fields"):
            updates["hoodie.table.ordering.fields"] = conf.ordering_field
        if "hoodie.table.initial.version" not in conf.props:
            updates["hoodie.table.initial.version"] = str(conf.version)
    if layout is not None and layout != conf.layout:
        updates["hoodie.table.storage.layout"] = layout
        # keep the index the existing file groups were placed with (see the module docstring)
        updates["hoodie.index.type"] = conf.props.get("hoodie.index.type") or ("BUCKET" if conf.is_lsm else "SIMPLE")
    if not updates:
        return t
    with table_lock(t.path):
        current = cfg.read_config(t.path)  # re-read under the lock
        props = dict(current.props)
        props.update(updates)
        cfg.write_config(t.path, props, create=False)
    return open_table(t.path)


def upgrade_to_v10(table: Table | str | os.PathLike[str]) -> Table:
    """Rewrite an lsm_lab table of version 8 or 9 to table version 10 in place (see `services.upgrade`)."""
    return _as_table(table).upgrade()


@dataclass(frozen=True)
class SliceFormats:
    """How many log files of each format one file slice holds."""

    partition: str
    file_id: str
    base_instant: str
    base_file: str | None
    v1_logs: int
    v2_logs: int

    @property
    def mixed(self) -> bool:
        return self.v1_logs > 0 and self.v2_logs > 0


def slice_formats(table: Table | str | os.PathLike[str], as_of: TimeLike | None = None) -> list[SliceFormats]:
    """Per file slice (every slice of every group, oldest first): its base file and log formats."""
    t = _as_table(table)
    out = []
    for group in t.file_groups(as_of):
        for fs in group.slices:
            v1_count = sum(1 for f in fs.log_files if f.name.log_format == 1)
            out.append(SliceFormats(fs.partition, fs.file_id, fs.base_instant,
                                    fs.base_file.path.name if fs.base_file else None,
                                    v1_count, len(fs.log_files) - v1_count))
    return out


def dump_formats(table: Table | str | os.PathLike[str], as_of: TimeLike | None = None) -> str:
    """Plain text: one line per slice, `v1 logs=2 v2 logs=1 MIXED`."""
    t = _as_table(table)
    c = t.config
    lines = [f"table version {c.version}, new logs: v{c.log_format_version}, layout {c.layout}"]
    for s in slice_formats(t, as_of):
        where = f"{s.partition}/" if s.partition else ""
        mark = "  MIXED" if s.mixed else ""
        lines.append(f"{where}{s.file_id} @ {s.base_instant}: base={s.base_file or '-'} "
                     f"v1 logs={s.v1_logs} v2 logs={s.v2_logs}{mark}")
    return "\n".join(lines)


__all__ = ["SliceFormats", "dump_formats", "slice_formats", "upgrade", "upgrade_to_v10"]
