"""Upgrade from a path or a Table, and what an upgraded table's slices hold (mixed v1 and v2 logs).

The upgrades themselves are table services: `lsm_lab.services.upgrade` explains both
(version 8 → 9: native logs and optionally the lsm_tree layout, no file rewritten;
version 8 or 9 → 10: a rewrite into upstream's dialect). This module opens the table
for them and inspects the result (`slice_formats`, `dump_formats`).

Simplified compared with Apache Hudi: as for the services (lsm_lab.services.upgrade).

Taught in: notebooks/01_build_a_table.ipynb, notebooks/09_real_hudi_tables.ipynb
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from lsm_lab.api import Table, open_table
from lsm_lab.services import upgrade as upgrade_service
from lsm_lab.timeline.instanttime import TimeLike

KEY_UPGRADE_PENDING = upgrade_service.KEY_UPGRADE_PENDING
KEY_UPGRADED_FROM = upgrade_service.KEY_UPGRADED_FROM
KEY_UPGRADED_AT = upgrade_service.KEY_UPGRADED_AT


def _as_table(table: Table | str | os.PathLike[str]) -> Table:
    return table if isinstance(table, Table) else open_table(table)


def upgrade(table: Table | str | os.PathLike[str], *, layout: str | None = None) -> Table:
    """Switch new writes to v2 logs (table version 9) and, with `layout`, to that storage layout.

    Works on lsm_lab-created tables of version 8 (and on version 9 tables for a
    layout switch alone). Returns the reopened table. Idempotent.
    """
    t = _as_table(table)
    upgrade_service.switch_to_native_logs(t, layout=layout)
    return open_table(t.path)


def upgrade_to_v10(table: Table | str | os.PathLike[str]) -> Table:
    """Rewrite an lsm_lab table of version 8 or 9 to table version 10 in place (see `services.upgrade`)."""
    return _as_table(table).upgrade()


def avro_timeline(table: Table | str | os.PathLike[str]) -> int:
    """Rewrite a table's JSON instant files and history rows as upstream's Avro records (`services.upgrade`)."""
    return upgrade_service.avro_timeline(_as_table(table))


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


__all__ = ["SliceFormats", "avro_timeline", "dump_formats", "slice_formats", "upgrade", "upgrade_to_v10"]
