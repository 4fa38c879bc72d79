"""Reads on Spark: a snapshot merges file slices in tasks; read-optimized is Spark's own Parquet reader.

    snapshot (default)                                  read_optimized=True
    ──────────────────                                  ───────────────────
    driver: file-system view as of T                    driver: latest base file of every group
            → latest slices s0 … sn-1                   spark.read.parquet(base files)
    spark.range(n) ─ mapInArrow ─► task: read_slice(ctx, s_i)       (L1 only: misses updates that
                                   base + logs merged by the          are still in MOR log files)
                                   library's engine (sorted for
                                   lsm_tree), one row per key
    ─► DataFrame with the columns of `Table.read`       ─► DataFrame with the same columns

The DataFrame is lazy but its snapshot is not: the slices are listed when
`read` is called, so later writes do not show up in it, and a later `clean`
may delete files it still needs (keep enough commits, or `cache()` it).

**Filters.** `filter=` (what `Table.read` takes: `(column, op, value)` tuples or a pyarrow
expression) prunes on the driver — partitions, record keys, statistics, as `Table.scan` does — and
each task applies it to its slice after the merge (a log that changes a base row's value is merged
before the filter sees it), so the plan needs no Spark `Filter` above `MapInArrow`.  Spark's own
optimizer pushes filters into `spark.read.format("lsm_lab")` (spark/datasource.py), not here.

Simplified compared with Apache Hudi's Spark datasource: `read_table` is not a relation Spark's
optimizer sees (`format("lsm_lab")` is), no incremental query type, no file-slice splitting
into several tasks.

Taught in: notebooks/10_sorted_vs_hash_on_spark.ipynb
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from lsm_lab.api import open_table
from lsm_lab.errors import InputError
from lsm_lab.filegroup.fsview import FileSlice
from lsm_lab.filegroup.read import ReadContext, read_slice
from lsm_lab.spark.jobs import active_session, arrow_schema_for, spark_schema, table_uri
from lsm_lab.storage import TablePath, is_local
from lsm_lab.table.predicate import FilterLike
from lsm_lab.table.scan import plan_scan
from lsm_lab.table.stream import Scan
from lsm_lab.timeline.instanttime import TimeLike

MAX_READ_TASKS = 256


@dataclass(frozen=True)
class ReadSliceTask:
    """mapInArrow function over slice numbers: the merged rows of each slice."""

    ctx: ReadContext
    slices: tuple[FileSlice, ...]
    columns: tuple[str, ...]
    engine: str | None
    out_schema: pa.Schema  # what Spark expects back
    filter: FilterLike | None = None  # applied to each slice after its merge (keys pruned inside it)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for i in batch.column(0).to_pylist():
                if self.filter is not None:
                    plan = plan_scan(self.ctx, [self.slices[i]], columns=list(self.columns), filter=self.filter,
                                     engine=self.engine)
                    for part in Scan(plan).batches():
                        yield pa.Table.from_batches([part]).cast(self.out_schema).to_batches()[0]
                    continue
                rows = read_slice(self.ctx, self.slices[i], columns=list(self.columns), engine=self.engine)
                yield from rows.select(list(self.columns)).cast(self.out_schema).to_batches(max_chunksize=65_536)


def read_table(path: str | TablePath, spark: Any = None, as_of: TimeLike | None = None,
               columns: Sequence[str] | None = None, *, read_optimized: bool = False, merge: str | None = None,
               storage_options: Mapping[str, Any] | None = None, filter: FilterLike | None = None) -> Any:
    """A Spark DataFrame of the table's snapshot (or time travel to `as_of`, read as `Table.read` reads it).

    Same rows and columns as `Table.read(as_of=..., columns=...)`
    (`read_optimized=True`: as `Table.read_optimized`). `merge` forces an
    engine for the per-slice merge. `filter` (as `Table.read`'s) prunes the slices on the driver
    (partitions, keys, statistics) and is applied in each task after the slice's merge. An object-store table's files are read by the tasks through
    lsm_lab's storage layer (Spark's own Parquet reader would need Hadoop's S3 connector).
    """
    table = open_table(path, storage_options)
    spark = active_session(spark)
    read_time = table.resolve_time(as_of)
    table.check_retained(read_time)  # a pending commit or the cleaner's retention: refused, never partial rows
    ctx = table.read_context(read_time)
    full = ctx.full_schema
    out_cols = list(columns) if columns is not None else list(full.names)
    unknown = [c for c in out_cols if c not in full.names]
    if unknown:
        raise InputError(f"unknown column{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                         f"the table has {', '.join(full.names)}")
    struct = spark_schema(pa.schema([full.field(n) for n in out_cols]))
    if filter is not None:
        if read_optimized:
            raise InputError("filter= is for snapshot reads: with read_optimized=True, use .where(...)")
        planned = table.scan(columns=out_cols, filter=filter, as_of=as_of, merge=merge).plan
        slices = list(planned.slices)
        ctx = planned.ctx
    else:
        slices = table.latest_slices(read_time)
    if read_optimized and is_local(table.path):
        return _read_optimized(spark, slices, out_cols, struct)
    if read_optimized:  # base files only, read by the tasks through the storage layer
        slices = [replace(s, log_files=()) for s in slices if s.base_file is not None]
    if not slices:
        return spark.createDataFrame([], struct)
    task = ReadSliceTask(ctx, tuple(slices), tuple(out_cols), merge, arrow_schema_for(struct), filter)
    n = len(slices)
    return spark.range(0, n, 1, min(n, MAX_READ_TASKS)).mapInArrow(task, struct)


def _read_optimized(spark: Any, slices: Sequence[FileSlice], columns: Sequence[str], struct: Any) -> Any:
    from pyspark.sql import functions as F

    files = [table_uri(fs.base_file.path) for fs in slices if fs.base_file is not None]
    if not files:
        return spark.createDataFrame([], struct)
    frame = spark.read.option("mergeSchema", "true").parquet(*files)
    have = set(frame.columns)
    return frame.select(*[(F.col(f.name) if f.name in have else F.lit(None)).cast(f.dataType).alias(f.name)
                          for f in struct.fields])


__all__ = ["ReadSliceTask", "read_table"]
