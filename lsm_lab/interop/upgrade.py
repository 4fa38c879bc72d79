"""Upgrades for a table named by path or `Table`, and which log formats each file slice holds.

The upgrades themselves, and why each moves the table version (9: native logs for new writes,
nothing rewritten; 10: the latest snapshot rewritten into upstream Hudi's dialect), are a table
service: read the docstring of `lsm_lab.services.upgrade`, which takes a `TableState`.  This module
is what sits above the API: it accepts a `Table` or a path, reopens the table after an upgrade, and
shows what the switch to version 9 leaves behind, file slices holding both log formats:

    lsm-lab interop formats PATH
    table version 9, new logs: v2, layout lsm_tree
    city=sf/f1 @ t0: base=f1_0-0-0_t0.parquet v1 logs=2 v2 logs=1  MIXED

Simplified compared with Apache Hudi: Hudi has no per-slice format report (its log reader simply
reads every block it finds); see `lsm_lab.services.upgrade` for what the upgrades simplify.

Taught in: notebooks/01_build_a_table.ipynb, notebooks/09_real_hudi_tables.ipynb
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from lsm_lab.api import Table, open_table
from lsm_lab.services.upgrade import switch_to_native_logs


def _as_table(table: Table | str | os.PathLike[str]) -> Table:
    return table if isinstance(table, Table) else open_table(table)


def upgrade(table: Table | str | os.PathLike[str], *, layout: str | None = None) -> Table:
    """Switch new writes to v2 logs (table version 9) and, with `layout`, to that storage layout
    (`services.upgrade.switch_to_native_logs`). Returns the reopened table. Idempotent."""
    t = _as_table(table)
    return open_table(t.path) if switch_to_native_logs(t, layout) else t


def upgrade_to_v10(table: Table | str | os.PathLike[str]) -> Table:
    """Rewrite an lsm_lab table of version 8 or 9 to table version 10 in place (`Table.upgrade`,
    `services.upgrade.upgrade_to_v10`). Returns the reopened table."""
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


def slice_formats(table: Table | str | os.PathLike[str], as_of: Any = None) -> list[SliceFormats]:
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


def dump_formats(table: Table | str | os.PathLike[str], as_of: Any = None) -> str:
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
