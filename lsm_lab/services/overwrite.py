"""`insert_overwrite` and `insert_overwrite_table`: new rows replace whole file groups, in one replacecommit.

    insert_overwrite(rows)                         insert_overwrite_table(rows)
      │  the rows are written as an insert into NEW file groups (no existing group is read or tagged:
      │  none of the old rows of what is overwritten survives), markers first, as every write
      │
      │  then, from the snapshot the write started from:
      │    the file groups of the partitions the rows    every file group of the table
      │    went to (partitions without a new row keep     (a table overwritten with no rows
      │    their rows)                                    reads empty)
      ▼
    <t>.replacecommit.requested → .inflight → <t>_<c>.replacecommit          ← the commit point
      operationType INSERT_OVERWRITE / INSERT_OVERWRITE_TABLE
      partitionToReplaceFileIds = {partition: [file ids replaced]}
      partitionToWriteStats     = the new files

This is upstream's layout (`WriteOperationType.INSERT_OVERWRITE` / `INSERT_OVERWRITE_TABLE`,
`SparkInsertOverwriteCommitActionExecutor` / `SparkInsertOverwriteTableCommitActionExecutor`: the
replaced file ids are the latest file slices' ids of the partitions written — or of every partition —
and `HoodieReplaceCommitMetadata.partitionToReplaceFileIds` carries them).  So everything that already
understands a clustering's replacecommit understands an overwrite: readers and time travel drop the
replaced file groups from its completion on (`filegroup/fsview.py` rule 2), the cleaner deletes their
files once no retained snapshot needs them, hudi-rs and Hudi read it, the metadata table lists the new
files (services/mdt_write.py: the replaced ones stay listed until cleaned, as upstream), the conflict
check counts the replaced groups as touched (a concurrent update of one of them conflicts), and a
writer killed half way leaves a pending replacecommit the next writer rolls back.

**Bucket index.**  A bucket's file id is a function of the bucket (filegroup/index.py), so a replaced
bucket group could never be written again (rule 2 hides a replaced id for good).  As lsm_lab's
clustering does, an overwrite of a bucket table keeps the ids: each bucket of an overwritten partition
gets a new file slice at the overwrite's instant — the new rows of that bucket as its base file, or an
empty base file when no new row falls in it — and nothing is listed as replaced.  The old slices are
then older versions of those groups, for time travel and the cleaner.

**Change data capture.**  An overwrite writes no CDC log: `read_cdc` infers its changes from the
snapshots around it (table/cdc.py): a key of a replaced group that is not written again is "d", a key
written that existed is "u", a new key "i".  (Upstream's `HoodieCDCExtractor` reports a replaced file
group as deletes of all its rows and the new groups as inserts, so an overwritten key is "d" + "i".)

**Undo.**  `Table.rollback(t)` of the latest write when it is an overwrite: its files go, and the groups
it replaced are live again (services/rollback.py); crash safe as every rollback of a completed instant.

**Static partitions.**  `insert_overwrite(rows, partitions=[...])` replaces exactly the partitions named
(`static_partitions` checks them against the table's partition fields), as Hudi's SQL does for
`INSERT OVERWRITE ... PARTITION (p = v)` in its STATIC mode (`ProvidesHoodieConfig.deduceOverwriteConfig`):
a partition with no new row reads empty, and a row outside them fails the write before its commit point
(nothing is committed).

Simplified compared with Apache Hudi: no `PARTITION (p = v)` clause (PySpark 4.3 cannot hand it to a Python
data source: spark/datasource.py, "Overwrite"; the option `partition` says the same); no `delete_partition`
operation.

Taught in: no chapter (README "Streaming writes", "Overwriting"; docs/FORMAT.md "Insert overwrite")
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from lsm_lab.errors import InputError
from lsm_lab.filegroup import cdclog
from lsm_lab.filegroup.fsview import FileGroup
from lsm_lab.format import hudi_bloom, naming, parquet_write
from lsm_lab.table.state import TableState
from lsm_lab.timeline import config as cfg
from lsm_lab.timeline.config import TableConfig
from lsm_lab.timeline.instanttime import completion_time
from lsm_lab.timeline.metadata import WriteStat

INSERT_OVERWRITE = "insert_overwrite"
INSERT_OVERWRITE_TABLE = "insert_overwrite_table"
#: the write operations that replace file groups (a `replacecommit`)
OPERATIONS = (INSERT_OVERWRITE, INSERT_OVERWRITE_TABLE)

Mark = Callable[[str, str, str], None]  # (partition, file name, IO type): the marker before a data file


def is_overwrite(op: str) -> bool:
    return op in OPERATIONS


def write_config(config: TableConfig) -> TableConfig:
    """The config the overwrite's files are written with: no CDC log (read_cdc infers the changes)."""
    if not cdclog.writes_cdc(config):
        return config
    return config.with_props(**{cfg.KEY_CDC_ENABLED: "false"})


@dataclass
class Replacement:
    """One overwrite's second half: from the new files' stats, what they replace (`finish`), for the commit."""

    table: TableState
    op: str
    static: tuple[str, ...] | None = None  # insert_overwrite's static partitions (`static_partitions`)
    replaced: dict[str, list[str]] = field(default_factory=dict)

    def finish(self, stats: list[WriteStat], *, instant: str, snapshot: str | None, mark: Mark,
               schema: pa.Schema | None = None) -> list[WriteStat]:
        """The stats of the commit: `stats` (the new rows' files), plus the empty base files of a bucket
        table's buckets that got no row; `self.replaced` filled for `partitionToReplaceFileIds`."""
        self.replaced = {}
        if self.static is not None:
            outside = sorted({s.partitionPath for s in stats} - set(self.static))
            if outside:  # (raised before the commit point: the transaction deletes what it wrote)
                raise InputError(f"insert_overwrite of the partitions {', '.join(self.static)}: rows go to "
                                 f"{', '.join(outside)}, outside them; nothing was written",
                                 path=self.table.path)
        snap = completion_time(snapshot)
        if snap is None:  # the table was empty when the write began: nothing to replace
            return stats
        if self.op == INSERT_OVERWRITE_TABLE:
            groups = self.table.file_groups(as_of=snap)
        else:
            parts = sorted({s.partitionPath for s in stats} if self.static is None else self.static)
            groups = self.table.file_groups(as_of=snap, partitions=parts) if parts else []
        config = self.table.config
        if not config.bucket_index:
            for g in sorted(groups, key=lambda g: (g.partition, g.file_id)):
                self.replaced.setdefault(g.partition, []).append(g.file_id)
            return stats
        written = {(s.partitionPath, s.fileId) for s in stats}
        empty = [g for g in groups if (g.partition, g.file_id) not in written]
        return stats + self._empty_bases(empty, instant, snap, mark, schema)

    def _empty_bases(self, groups: Sequence[FileGroup], instant: str, snapshot: str, mark: Mark,
                     schema: pa.Schema | None) -> list[WriteStat]:
        """A base file of no rows at `instant` in each group: a new, empty slice (bucket tables)."""
        if not groups:
            return []
        ctx = self.table.read_context(snapshot)
        full = ctx.full_schema
        if schema is not None and len(schema):  # the schema after this write (new columns included)
            full = pa.schema([full.field(n) for n in full.names if n.startswith("_hoodie_")]
                             + [f for f in schema if not f.name.startswith("_hoodie_")])
        out = []
        for task, g in enumerate(groups, start=1 << 16):  # tokens apart from the writing tasks'
            name = naming.base_file_name(g.file_id, naming.write_token(task, 0, 0), instant)
            mark(g.partition, name, "CREATE")
        for task, g in enumerate(groups, start=1 << 16):
            name = naming.base_file_name(g.file_id, naming.write_token(task, 0, 0), instant)
            folder = self.table.path / g.partition if g.partition else self.table.path
            size = parquet_write.write_parquet(folder / name, full.empty_table(), is_sorted=self.table.config.is_lsm,
                                              hudi_bloom=hudi_bloom.options_for(self.table.config.props,
                                                                                self.table.config.version))
            prev = g.latest.base_instant if g.latest is not None else "null"
            out.append(WriteStat(g.partition, g.file_id, f"{g.partition}/{name}" if g.partition else name, prev,
                                 totalWriteBytes=size, fileSizeInBytes=size, baseFile=name))
        return out


def static_partitions(config: TableConfig, partitions: Sequence[str]) -> tuple[str, ...]:
    """`partitions` checked as partition paths of this table (`city=pune` on a hive-style table, `pune`
    otherwise; one level per partition field, `/` between levels): an `InputError` names a bad one."""
    fields = list(config.partition_by)
    if not fields:
        raise InputError("insert_overwrite(partitions=...) on a table without partitions: use "
                         "insert_overwrite_table")
    out = []
    for raw in partitions:
        part = str(raw).strip().strip("/")
        levels = part.split("/")
        if len(levels) != len(fields) or any(not lv or lv in (".", "..") for lv in levels):
            raise InputError(f"partition {raw!r}: expected {len(fields)} level(s), "
                             f"{'/'.join(f'{f}=...' if config.hive_style else '...' for f in fields)}")
        if config.hive_style and any(not lv.startswith(f"{f}=") for lv, f in zip(levels, fields)):
            raise InputError(f"partition {raw!r}: this table's partition paths are "
                             f"{'/'.join(f'{f}=<value>' for f in fields)}")
        out.append(part)
    if not out:
        raise InputError("insert_overwrite(partitions=[]): name at least one partition")
    return tuple(sorted(set(out)))


__all__ = ["INSERT_OVERWRITE", "INSERT_OVERWRITE_TABLE", "OPERATIONS", "Replacement", "is_overwrite",
           "static_partitions", "write_config"]
