"""Reading v1 (`#HUDI#`) log files as merge sources: one file slice at a time.

A file slice of a table written by Apache Hudi (or by lsm_lab in compatibility
mode) keeps its changes in v1 log files. The bytes are decoded by
`lsm_lab.format.log_v1`; this module decides *which* blocks count for a read and
*in what order* they are merged, and turns each block into a merge source:

    slice logs (fsview order)        .f1_<t>.log.1_0-1-0   .f1_<t>.log.2_0-1-0   f1_…_7.parquet (v2)
        │ read every block of every v1 log, in file then block order
        ▼
    [data t1] [delete t2] [data t3(failed)] [rollback → t3] ...
        │ 1. rollbacks: a command block cancels earlier blocks of its target instant
        │    (it usually sits in a *later* file, so all v1 logs of the slice go together)
        │ 2. visibility: keep a block only if its INSTANT_TIME is a completed write
        │    instant visible at the read time (`ctx.completion_of`)
        │ 3. order: by the completion time of the block's instant, then file/block position
        ▼
    LogUnit(order, file, block)  ──► data block  → rows        (`read.data_source`)
                                 ──► delete block → delete rows (`read.delete_source`)

Why block-level filtering: in table version 6 the file name carries the *base*
instant of the slice, and Hudi appends the blocks of several deltacommits to one
file, so the file name says nothing about which commit wrote a block; only the
`INSTANT_TIME` header does. In table versions 8+ every deltacommit writes its own
log file named for it, so the file-level filter of the file-system view already
agrees with the block-level one; the block filter is kept as a safety net.

v2 (native Parquet) logs of the same slice become units too, ordered by their
completion time, so a slice holding both formats (a table switched from v1 to
v2 logs) merges every change in commit order.

Delete ordering values. Every delete Hudi writes without an explicit ordering
value carries `IntWrapper(0)`, which Hudi treats as "this delete always wins";
`commit_time_ordering_mask` finds those, and they become NULL ordering values,
which is what an unconditional delete is in lsm_lab's merge semantics.

Corrupt blocks. A torn write leaves a CORRUPT block (`logformat.v1`); like
Hudi, a read skips it by default, and says so: a WARNING on the `lsm_lab.v1`
logger naming the file and byte offset, and a count in the read's statistics
(`Table.last_read_stats.corrupt_blocks_skipped`, filegroup/readstats.py).
`open_table(path, strict=True)` (or `read(strict=True)`) raises
`CorruptFileError` for a corrupt block in any log file the read needs instead.

Simplified compared with Apache Hudi: no lazy block reading (each block is
decoded when its unit is loaded), no `COMPACTED_BLOCK_TIMES` handling (log
compaction blocks are read like any data block), no de-duplication of blocks
written twice by retried tasks (`BLOCK_IDENTIFIER`), and no positional merging.

Taught in: notebooks/09_real_hudi_tables.ipynb
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.errors import CorruptFileError, UnsupportedFeatureError
from lsm_lab.filegroup.fsview import DataFile, FileSlice
from lsm_lab.filegroup.readstats import ReadStats
from lsm_lab.merge import records
from lsm_lab.timeline.instant import normalize_time

if TYPE_CHECKING:
    from lsm_lab.format import log_v1 as v1

#: (completion time, begin time, position of the file in the slice, position of the block in the file)
OrderKey = tuple[str, str, int, int]


@dataclass(frozen=True)
class LogUnit:
    """One change set of a slice in merge order: a v2 log file, or one block of a v1 log file."""

    order: OrderKey
    file: DataFile
    block: v1.LogBlock | None = None  # None for a v2 log file

    @property
    def is_v1(self) -> bool:
        return self.block is not None

    @property
    def is_delete(self) -> bool:
        return self.block.is_delete if self.block is not None else self.file.name.is_delete

    @property
    def instant(self) -> str:
        if self.block is not None:
            return self.block.instant_time or ""
        return self.file.instant

    def describe(self) -> str:
        where = self.file.path.name
        if self.block is None:
            return f"{self.order[0]} v2 {'delete' if self.is_delete else 'data'} {where}"
        return f"{self.order[0]} v1 {self.block.block_type.name.lower()} @{self.block.offset} {where}"


def _visible(ctx_completion: dict[str, str], read_time: str | None, instant: str | None) -> str | None:
    """The completion time of `instant` when it is a completed write visible at `read_time`, else None."""
    if not instant:
        return None
    done = ctx_completion.get(instant)
    if done is None:
        return None
    if read_time is not None and normalize_time(done) > normalize_time(read_time):
        return None
    return done


def v1_blocks(files: Sequence[DataFile], *, strict: bool = False,
              stats: ReadStats | None = None) -> list[tuple[int, DataFile, v1.LogBlock]]:
    """All blocks of the v1 logs (file order kept), with each block's file position.

    HFile blocks (Hudi's metadata table) decode to key/value cells (`block_table`
    refuses them as table rows; `table/metadata_table.py` reads them); CDC logs
    (`….cdc`) are change streams, not data, and are skipped.  A CORRUPT block is
    kept (and later dropped, as Hudi skips it) unless `strict`, which raises
    `CorruptFileError` instead: every file given here belongs to a file slice
    being read, so its blocks are committed data or a torn write Hudi would skip.
    A kept CORRUPT block is counted in `stats` and logged as a warning (`ReadStats.skip_corrupt_block`).
    """
    from lsm_lab.format import log_v1 as v1  # start-up: decoded only for v1 logs

    out: list[tuple[int, DataFile, v1.LogBlock]] = []
    for pos, f in enumerate(files):
        if f.name.content == "cdc":
            continue
        mine = False
        for block in v1.iter_blocks(f.path):
            if strict and block.is_corrupt:
                raise CorruptFileError(f"corrupt block at byte {block.offset}: {block.detail} "
                                       "(strict read; without strict=True it is skipped, as Hudi does)", path=f.path)
            if block.is_corrupt:
                (stats if stats is not None else ReadStats()).skip_corrupt_block(str(f.path), block.offset, block.detail)
            mine = mine or block.instant_time == f.instant or not f.completion_time
            out.append((pos, f, block))
        if strict and not mine:  # versions 8+ name a log for the instant that wrote its blocks
            raise CorruptFileError(f"the log holds no block of its instant {f.instant} (strict read)", path=f.path)
    return out


def ordered_units(ctx_completion: dict[str, str], read_time: str | None, fs: FileSlice, *,
                  strict: bool = False, stats: ReadStats | None = None) -> list[LogUnit]:
    """The slice's log changes that count at `read_time`, in merge order (see the module docstring)."""
    logs = list(fs.log_files)
    v1_files = [f for f in logs if f.name.log_format == 1]
    units: list[LogUnit] = []
    for pos, f in enumerate(logs):
        if f.name.log_format == 1 or f.name.content == "cdc":
            continue
        done = f.completion_time or ctx_completion.get(f.instant, f.instant)
        units.append(LogUnit((normalize_time(done), normalize_time(f.instant), pos, 0 if not f.name.is_delete else 1),
                             f))
    if v1_files:
        from lsm_lab.format import log_v1 as v1  # start-up: decoded only when a slice holds v1 logs

        positions = {id(f): logs.index(f) for f in v1_files}
        raw = v1_blocks(v1_files, strict=strict, stats=stats)
        by_identity = {id(b): (p, f) for p, f, b in raw}
        index_in_file: dict[int, int] = {}
        counters: dict[int, int] = {}
        for p, _f, b in raw:
            counters[p] = counters.get(p, 0) + 1
            index_in_file[id(b)] = counters[p]
        for block in v1.effective_blocks(b for _, _, b in raw):
            _, f = by_identity[id(block)]
            visible = _visible(ctx_completion, read_time, block.instant_time)
            if visible is None:
                continue
            units.append(LogUnit((normalize_time(visible), normalize_time(block.instant_time or ""),
                                  positions[id(f)], index_in_file[id(block)]), f, block))
    units.sort(key=lambda u: u.order)
    return units


def block_table(unit: LogUnit) -> tuple[str, pa.Table]:
    """("data" | "delete", the block's rows) of a v1 unit; delete ordering values normalised.

    Data rows keep the block's own columns (the caller conforms them to the read
    schema). Delete rows are `record_key`, `partition_path`, `ordering_val`, where
    Hudi's "always wins" deletes (null or `IntWrapper(0)`) have a NULL `ordering_val`.
    """
    from lsm_lab.format import log_v1 as v1  # start-up: decoded only for v1 logs

    block = unit.block
    assert block is not None
    if block.records is None:  # pragma: no cover - command/corrupt blocks never reach here
        raise UnsupportedFeatureError(f"block {block.describe()} has no records", path=unit.file.path)
    if block.block_type == v1.BlockType.HFILE:
        raise UnsupportedFeatureError(f"HFile data block at offset {block.offset}: HFile blocks hold Hudi's metadata "
                                      "table, not table rows (read it with Table.metadata_table())", path=unit.file.path)
    if block.is_delete:
        deletes = block.records
        mask = v1.commit_time_ordering_mask(deletes)
        col = deletes.column("ordering_val")
        if pa.types.is_null(col.type):
            return "delete", deletes
        cleared = pc.if_else(mask, pa.scalar(None, col.type), col)
        return "delete", deletes.set_column(deletes.schema.get_field_index("ordering_val"), "ordering_val", cleared)
    return "data", block.records


def is_sorted(kind: str, table: pa.Table) -> bool:
    """Whether a block's rows are sorted by record key with no key twice (so a sorted engine may merge them)."""
    col = "record_key" if kind == "delete" else records.RECORD_KEY
    if col not in table.column_names:
        return False
    keys = table.column(col)
    if keys.null_count:
        return False
    return records.is_strictly_sorted(keys)


__all__ = ["LogUnit", "OrderKey", "block_table", "is_sorted", "ordered_units", "v1_blocks"]
