"""`ReadStats`: what a read had to skip to return rows, counted by the readers.

    t = lsm_lab.open_table(path)
    t.read()
    t.last_read_stats.corrupt_blocks_skipped      # 0 for an undamaged table
    t.last_read_stats.corrupt_blocks              # [(file, byte offset, why), ...]

A v1 (`#HUDI#`) log block that fails its frame checks is a CORRUPT block: a lenient read (the
default, as Hudi's `HoodieLogFileReader`) skips it.  Each skipped block is also logged once per
read as a WARNING on the `lsm_lab.v1` logger, naming the file and the byte offset; a strict read
(`read(strict=True)`, `open_table(..., strict=True)`) raises `CorruptFileError` instead.

One `ReadStats` travels with each read's `ReadContext` (`filegroup/read.py`); `Table.read` keeps the
last one as `Table.last_read_stats`.  Only plain data (it is pickled with the context for Spark
tasks, whose counts stay in the task).

Simplified compared with Apache Hudi: Hudi logs a corrupt block at INFO level and counts nothing
the caller can read; lsm_lab warns and counts.

Taught in: notebooks/09_real_hudi_tables.ipynb
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

LOG = logging.getLogger("lsm_lab.v1")


@dataclass
class ReadStats:
    """What one read skipped: the corrupt v1 log blocks, as (file, byte offset, why), and what the metadata
    table's indexes let it skip (table/mdt_use.py)."""

    corrupt_blocks: list[tuple[str, int, str]] = field(default_factory=list)
    #: base files the metadata table's column statistics ruled out (table/mdt_use.py), of those judged
    files_skipped_column_stats: int = 0
    files_judged_column_stats: int = 0
    #: file slices the record index (directly, or behind a secondary index) ruled out
    slices_skipped_index: int = 0
    #: the metadata-table indexes the read used (`column_stats`, `record_index`, `secondary_index_<name>`)
    indexes_used: list[str] = field(default_factory=list)

    @property
    def corrupt_blocks_skipped(self) -> int:
        return len(self.corrupt_blocks)

    def skip_corrupt_block(self, path: str, offset: int, detail: str) -> None:
        """Count a skipped block and warn about it (once per read and block: a slice may be read twice)."""
        entry = (path, offset, detail)
        if entry in self.corrupt_blocks:  # list.append and `in` are atomic: slices are read on threads
            return
        self.corrupt_blocks.append(entry)
        LOG.warning("skipped a corrupt v1 log block at byte %d of %s (%s); its rows, if any, are not read "
                    "(as Hudi does; read(strict=True) raises instead)", offset, path, detail)

    def use_index(self, name: str) -> None:
        if name not in self.indexes_used:
            self.indexes_used.append(name)

    def as_dict(self) -> dict[str, int]:
        return {"corrupt_blocks_skipped": self.corrupt_blocks_skipped}


__all__ = ["LOG", "ReadStats"]
