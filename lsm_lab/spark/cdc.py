"""The change stream on Spark: one task per run of commits, each reading its share with `Table.read_cdc`.

    driver                                                 executors (Python workers)
    ──────                                                 ──────────────────────────
    resolve (start, end] like Table.read_cdc
    completed writes in (start, end], in completion order
        c1 < c2 < … < ck
    cut into n ≤ MAX_CDC_TASKS runs of consecutive commits
        (start, c2] (c2, c4] … (c_{k-1}, end]
    spark.range(n) ─ mapInArrow ─────────────────────────► task i: open_table(path)
                                                                    .read_cdc(lo_i, hi_i, columns)
                                                                  CDC logs of those commits, or the
                                                                  changes inferred from the snapshots
                                                                  around each of them
    ─► DataFrame: op, ts_ms, commit_time, record_key, before, after, inferred

Why this is the same stream as one `Table.read_cdc(start, end)`: a change
record belongs to exactly one commit (its completion time is `ts_ms`), and
the records of a commit depend only on that commit — its CDC logs, or the
snapshots as of the completed instant before it and as of itself — never on
where the query range starts.  So the stream of (start, end] is the
concatenation of the streams of any cut of that range at commit completion
times, and each task computes one piece with the library's own function
(nothing here re-implements a log read or an inference).  The pieces are in
commit order and so are Spark's partitions of `spark.range`; `collect()` and
`toPandas()` return the rows in `Table.read_cdc`'s order (commit, then key).

The range is fixed on the driver: `end=None` becomes the latest completed
write when `read_cdc` is called, so a commit that completes while the job
runs is not in it (read it next time with `start=` the last `ts_ms` seen).

Tasks read the table's files through lsm_lab's storage layer, so a table in a
bucket needs nothing from Hadoop; the table handle (a path, or a `StoragePath`
that pickles as URI + resolved options) is all a task is sent.

Simplified compared with Apache Hudi's Spark CDC relation (`HoodieCDCRDD`,
one split per file group and instant): the unit of work is a run of whole
commits, not a file group of a commit, so a single huge commit is one task;
and the schema metadata `lsm_lab.cdc.inferred_instants` of the local result
is not carried by the DataFrame (the `inferred` column is).

Taught in: notebooks/13_change_data_capture.ipynb
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lsm_lab.api import Table, open_table
from lsm_lab.spark.jobs import active_session, arrow_schema_for, spark_schema
from lsm_lab.storage import TablePath
from lsm_lab.table.cdc import is_change
from lsm_lab.timeline.instant import normalize_time
from lsm_lab.timeline.instanttime import TimeLike

MAX_CDC_TASKS = 256


@dataclass(frozen=True)
class CdcRange:
    """One task's share: the commits completed in (start, end] (start None: from the first commit)."""

    start: str | None
    end: str


def commit_ranges(table: Table, start: TimeLike | None, end: TimeLike | None = None, *, max_tasks: int = MAX_CDC_TASKS) -> list[CdcRange]:
    """(start, end] cut at commit completion times into at most `max_tasks` runs of consecutive commits.

    Empty when no write that changes records (`table.cdc.is_change`: not a
    compaction or clustering) completed in the range.  Every cut point is the
    completion time of such a write, so each commit falls in exactly one run.
    """
    lo = table.resolve_time(start)
    hi = table.resolve_time(end) or table.latest_completion()
    if hi is None:
        return []
    lo_n, hi_n = (normalize_time(lo) if lo else None), normalize_time(hi)
    done = [i.completion_time for i in table.completed_writes() if i.completion_time is not None
            and (lo_n is None or normalize_time(i.completion_time) > lo_n)
            and normalize_time(i.completion_time) <= hi_n and is_change(table, i)]
    if not done:
        return []
    n = min(max(1, max_tasks), len(done))
    ends = [done[(k + 1) * len(done) // n - 1] for k in range(n)]  # n runs of (almost) equal length
    ends[-1] = hi  # the last run reaches the end of the range
    starts = [lo, *ends[:-1]]
    return [CdcRange(s, e) for s, e in zip(starts, ends, strict=True)]


@dataclass(frozen=True)
class ReadCdcTask:
    """mapInArrow function over range numbers: the change records of each range, from `Table.read_cdc`."""

    path: TablePath
    ranges: tuple[CdcRange, ...]
    columns: tuple[str, ...] | None
    out_schema: pa.Schema  # what Spark expects back

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = open_table(self.path)
        for batch in batches:
            for i in batch.column(0).to_pylist():
                r = self.ranges[i]
                rows = table.read_cdc(r.start, r.end, columns=None if self.columns is None else list(self.columns))
                rows = rows.replace_schema_metadata(None).select(self.out_schema.names).cast(self.out_schema)
                yield from rows.to_batches(max_chunksize=65_536)


def read_cdc(path: str | TablePath, spark: Any = None, start: TimeLike | None = None, end: TimeLike | None = None,
             columns: Sequence[str] | None = None, *, storage_options: Mapping[str, Any] | None = None) -> Any:
    """A Spark DataFrame of the change stream of the commits completed in (start, end].

    Same rows and columns as `Table.read_cdc(start, end, columns=columns)`:
    `op`, `ts_ms`, `commit_time`, `record_key`, `before`, `after`, `inferred`,
    in commit order then key order within each partition of the result.  The
    work is split into runs of whole commits, one task each (see the module
    docstring); an object-store table is read by the tasks through lsm_lab's storage layer.
    """
    table = open_table(path, storage_options)
    spark = active_session(spark)
    cols = None if columns is None else list(columns)
    ranges = commit_ranges(table, start, end)
    hi = ranges[-1].end if ranges else table.resolve_time(end) or table.latest_completion()
    # The result's schema, without reading a change: the stream of the empty range (hi, hi].
    empty = table.read_cdc(hi, hi, columns=cols) if hi is not None else table.read_cdc(None, None, columns=cols)
    struct = spark_schema(empty.schema.remove_metadata())
    if not ranges:
        return spark.createDataFrame([], struct)
    task = ReadCdcTask(table.path, tuple(ranges), None if cols is None else tuple(cols), arrow_schema_for(struct))
    n = len(ranges)
    return spark.range(0, n, 1, n).mapInArrow(task, struct)


__all__ = ["MAX_CDC_TASKS", "CdcRange", "ReadCdcTask", "commit_ranges", "read_cdc"]
