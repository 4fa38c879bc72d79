"""`Table`: the one object a user holds — create or open, write, read, inspect.

    create_table(path, name=…, record_key=…)          open_table(path)
                 │                                          │
                 └──────────────► Table ◄───────────────────┘
        writes:  insert · upsert · delete · bulk_insert · insert_overwrite[_table]  → completed Instant
        reads:   read(as_of, columns, filter, merge) · lookup(keys) · read_optimized · read_incremental · read_cdc
                 scan(…) · scan_optimized · scan_incremental · scan_cdc: the same reads as Arrow streams (table/stream.py)
                 as_of: an instant time T (completed writes begun by T, as Hudi) or a CompletionTime / Instant
        inspect: timeline() · file_slices() · dump_levels() · file_groups() · schema_history()

A `Table` holds no cached state that could go stale: every call lists the
timeline and the folder again, so two `Table` objects (or two processes) on one
path always agree with the disk.

`Table` is a `TableState` (table/state.py: timeline, schema, files, read
context) plus the verbs.  It is the one module of the table package above
lsm_lab.services: the services take a `TableState`, and `Table` calls them.

    Table ──► services (compaction, clean, rollback, savepoint, archiver, occ) ──► TableState
      └─────► filegroup/write.py, table/scan.py, table/lookup.py ─────────────────► TableState

Simplified compared with Apache Hudi: no write client / table service client
split, no schema registry: the table schema is kept in the latest commit's
`extraMetadata`, as Hudi does.  A metadata table is read (`metadata_table()`), its
indexes used by reads and lookups (table/mdt_use.py), and its `files` partition written
when the table asks for it (services/mdt_write.py).

Taught in: notebooks/00_why_lsm.ipynb, notebooks/01_build_a_table.ipynb
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab import checks
from lsm_lab.errors import CorruptTableError, InputError, LsmLabError, TableConfigError, UnsupportedFeatureError
from lsm_lab.filegroup import fsview
from lsm_lab.filegroup import read as reader
from lsm_lab.filegroup.fsview import FileGroup, FileSlice
from lsm_lab.filegroup.readstats import ReadStats
from lsm_lab.format import naming
from lsm_lab.merge import records
from lsm_lab.progress import bar
from lsm_lab.storage import StoragePath, as_path, paths, request_scope
from lsm_lab.table import cdc, inspect, mdt_use, scan, schema_history, stream
from lsm_lab.table import lookup as key_lookup
from lsm_lab.table.metadata_table import MetadataTable, open_metadata_table
from lsm_lab.table.predicate import FilterLike
from lsm_lab.table.state import TableState
from lsm_lab.table.stats import LookupStats
from lsm_lab.timeline import config as cfg
from lsm_lab.timeline.active import ActiveTimeline
from lsm_lab.timeline.instant import (
    CLUSTERING,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    Instant,
    normalize_time,
)
from lsm_lab.timeline.instanttime import TimeLike, completion_time
from lsm_lab.timeline.metadata import WriteStat, summarize

if TYPE_CHECKING:  # pandas (0.3 s to import) only when a frame is asked for: a read never returns one
    import pandas as pd

    from lsm_lab.filegroup import stream_write
    from lsm_lab.filegroup import write as writer
    from lsm_lab.filegroup.planner import CompactionPlan
    from lsm_lab.services import clustering, occ

F = TypeVar("F", bound=Callable[..., Any])


def _one_listing(method: F) -> F:
    """Run a read with the timeline and the data files listed once (`TableState.pinned`)."""
    @functools.wraps(method)
    def wrapper(self: Table, *args: Any, **kwargs: Any) -> Any:
        try:
            with request_scope(), self.pinned():
                return method(self, *args, **kwargs)
        except FileNotFoundError as exc:
            raise _missing_file(self, exc) from None
    return wrapper  # type: ignore[return-value]


def _one_operation(method: F) -> F:
    """Run a write or a table service in one request scope (`storage.scope`): on an object store each
    listing and small object is requested once, and again after the table lock is taken."""
    @functools.wraps(method)
    def wrapper(self: Table, *args: Any, **kwargs: Any) -> Any:
        try:
            with request_scope():
                return method(self, *args, **kwargs)
        except FileNotFoundError as exc:
            raise _missing_file(self, exc) from None
    return wrapper  # type: ignore[return-value]


def _missing_file(table: Table, exc: FileNotFoundError) -> Exception:
    """Fsview rule 5 for a table listed from its metadata table: the plan names the files the MDT lists
    (no LIST of the folders to compare with), so a data file deleted by hand is found missing when the
    read opens it — the same `CorruptTableError` a listing gives, else the error as it was."""
    if isinstance(exc, LsmLabError):  # a typed error already (TableNotFoundError is a FileNotFoundError)
        return exc
    missing = str(exc.filename or (exc.args[0] if exc.args else ""))
    name = naming.parse(missing.replace("\\", "/").rsplit("/", 1)[-1]) if missing else None
    if name is None or not table.lists_from_metadata():
        return exc
    return CorruptTableError(f"the metadata table lists the data file {missing}, which is missing from the table "
                             "folder (deleted by hand? its rows would silently be lost)", path=missing,
                             field=fsview.MISSING_FIELD)


def _drain(items: list[Any]) -> Iterable[Any]:
    """The items of a list, each dropped from the list as it is given (the list holds no chunk read already)."""
    while items:
        yield items.pop(0)


class Table(TableState):
    """A Hudi table on local storage, as lsm_lab reads and writes it (the state, plus the verbs)."""

    #: what the last `read` or `lookup` skipped (corrupt v1 log blocks); None before the first
    last_read_stats: ReadStats | None = None

    def __repr__(self) -> str:
        c = self.config
        return (f"Table({str(self.path)!r}, name={c.name!r}, type={c.table_type}, layout={c.layout}, "
                f"version={c.version}, key={list(c.record_key)}, partition_by={list(c.partition_by)})")

    def _repr_html_(self) -> str:
        c = self.config
        inst = self.instants()
        last = inst[-1] if inst else None
        rows = "".join(f"<tr><th style='text-align:left'>{k}</th><td>{v}</td></tr>" for k, v in [
            ("path", self.path), ("type", c.table_type), ("layout", c.layout), ("table version", c.version),
            ("record key", ", ".join(c.record_key)), ("partitioned by", ", ".join(c.partition_by) or "—"),
            ("ordering field", c.ordering_field or "—"), ("merge mode", c.merge_mode),
            ("instants", len(inst)), ("latest", last._repr_html_() if last else "—"),
        ])
        return f"<table><caption><b>lsm_lab table {c.name}</b></caption>{rows}</table>"

    # ------------------------------------------------------------------ timeline
    def timeline(self, archived: bool = False) -> pd.DataFrame:
        """One row per instant: begin/completion time, action, state and the write statistics.

        `archived=True` puts the instants of the LSM timeline first (column
        `archived` tells them apart).
        """
        cols = ["begin_time", "completion_time", "action", "state", "operation", "partitions", "files",
                "records_written", "records_inserted", "records_updated", "records_deleted", "bytes_written"]
        if archived:
            cols.append("archived")
        import pandas as pd  # start-up: only inspection returns frames

        return pd.DataFrame(self.timeline_rows(archived), columns=cols)

    def timeline_rows(self, archived: bool = False) -> list[dict[str, Any]]:
        """`timeline()`'s rows as dicts (what `lsm-lab show timeline` prints, without loading pandas)."""
        rows = []
        items = [(i, False) for i in self.instants()]
        old_meta: dict[str, dict[str, Any]] = {}
        if archived:
            old = self.archived_instants()
            old_meta = self.archived_timeline.read_metadata_many(i.begin_time for i in old if i.is_write)
            items = [(i, True) for i in old] + items
        for inst, is_old in items:
            row: dict[str, Any] = {"begin_time": inst.begin_time, "completion_time": inst.completion_time,
                                   "action": inst.action, "state": inst.state.value}
            stats = {"operation": None, "partitions": 0, "files": 0, "records_written": 0, "records_inserted": 0,
                     "records_updated": 0, "records_deleted": 0, "bytes_written": 0}
            if inst.is_completed and inst.is_write:
                meta = old_meta[inst.begin_time] if is_old else self.instant_metadata(inst)
                stats.update(summarize(meta))
                stats["operation"] = meta.get("operationType")
            row.update(stats)
            if archived:
                row["archived"] = is_old
            rows.append(row)
        return rows

    # ------------------------------------------------------------------ writes
    def insert(self, data: Any, *, buffer_rows: int | None = None) -> Instant:
        """Insert records (a later version of an existing key still merges by key).

        `data`: a pyarrow Table or RecordBatch, a pandas DataFrame, a list of dicts — or a stream, written
        in bounded memory as one commit (`lsm_lab.filegroup.stream_write`): a `pyarrow.RecordBatchReader`,
        anything with `__arrow_c_stream__` (a polars DataFrame, a DuckDB relation, a DataFusion DataFrame),
        a polars LazyFrame, an iterator of RecordBatches or Tables.  A stream is read in chunks of
        `buffer_rows` rows (default: the table property `lsm_lab.write.buffer.rows`, else 250,000); the
        table after the write is the same as after writing the whole stream as one batch."""
        return self._write(data, "insert", buffer_rows)

    def upsert(self, data: Any, *, buffer_rows: int | None = None) -> Instant:
        """Insert new records and update existing ones (by record key); `data` and `buffer_rows` as `insert`'s."""
        return self._write(data, "upsert", buffer_rows)

    def bulk_insert(self, data: Any, *, buffer_rows: int | None = None) -> Instant:
        """Insert a large batch in one pass (new file groups are written as sorted base files); `data` and
        `buffer_rows` as `insert`'s."""
        return self._write(data, "bulk_insert", buffer_rows)

    def delete(self, keys_or_data: Any, *, buffer_rows: int | None = None) -> Instant:
        """Delete records: rows holding the key (and partition, ordering) columns, or a list of key strings;
        a stream of such rows as `insert`'s."""
        return self._write(keys_or_data, "delete", buffer_rows)

    def insert_overwrite(self, data: Any, *, buffer_rows: int | None = None,
                         partitions: Sequence[str] | None = None) -> Instant:
        """Replace the partitions the rows go to: their file groups are replaced by new ones holding only
        these rows (one `replacecommit`, operation INSERT_OVERWRITE; partitions the rows do not touch keep
        theirs).  `partitions` (partition paths, e.g. ``["city=pune"]``): a static overwrite — exactly these
        partitions are replaced, a row outside them is an `InputError` (nothing is committed), and one that
        gets no row reads empty afterwards.  `data` and `buffer_rows` as `insert`'s; see
        lsm_lab/services/overwrite.py."""
        from lsm_lab.services import overwrite  # start-up: a snapshot read loads no write service
        return self._write(data, overwrite.INSERT_OVERWRITE, buffer_rows,
                           None if partitions is None else overwrite.static_partitions(self.config, partitions))

    def insert_overwrite_table(self, data: Any, *, buffer_rows: int | None = None) -> Instant:
        """Replace the whole table by these rows: every file group is replaced (one `replacecommit`, operation
        INSERT_OVERWRITE_TABLE; no rows: the table reads empty).  `data` and `buffer_rows` as `insert`'s."""
        from lsm_lab.services import overwrite  # start-up: a snapshot read loads no write service
        return self._write(data, overwrite.INSERT_OVERWRITE_TABLE, buffer_rows)

    def upgrade(self) -> Table:
        """Rewrite this lsm_lab table to Apache Hudi's table version 10 in place (one replacecommit, crash-safe).

        Returns the reopened table; see `lsm_lab.services.upgrade`.
        """
        from lsm_lab.services import upgrade  # start-up: a snapshot read loads no write service
        upgrade.upgrade_to_v10(self)
        return open_table(self.path)

    @_one_operation
    def _write(self, data: Any, op: str, buffer_rows: int | None = None,
               static: tuple[str, ...] | None = None) -> Instant:
        """One optimistic write (services.commit): files written without the lock, conflicts checked at commit.
        `static`: an insert_overwrite's static partitions."""
        from lsm_lab.filegroup import stream_write  # start-up: a snapshot read loads no write service
        from lsm_lab.filegroup import write as writer  # start-up: a snapshot read loads no write path
        from lsm_lab.services import commit, overwrite  # start-up: a snapshot read loads no write service
        if stream_write.is_stream(data):
            return self._write_stream(data, op, buffer_rows, static)
        if buffer_rows is not None:
            stream_write.buffer_rows_of(self.config.props, buffer_rows)  # a bad value is an error, even unused
        self.check_writable()
        commit.note_first_write(self)  # before the input is checked: a rejected first batch must not block create
        over = overwrite.Replacement(self, op, static) if overwrite.is_overwrite(op) else None
        wop = "insert" if over is not None else op  # an overwrite writes its rows as an insert into new groups
        batch = writer.prepare(self.config, self.schema, data, wop)

        def write_files(txn: occ.WriteTransaction) -> list[WriteStat]:
            stats = self._write_files(batch, txn.begin_time, wop, snapshot=txn.snapshot, txn=txn,
                                      fresh=over is not None)
            if over is None:
                return stats
            return over.finish(stats, instant=txn.begin_time, snapshot=txn.snapshot, mark=txn.mark,
                               schema=batch.schema)

        done = commit.run_write(self, op, batch.schema, write_files, input_rows=batch.input_rows,
                                replaced=(lambda: over.replaced) if over is not None else None)
        commit.after_write(self)
        return done

    def _write_stream(self, data: Any, op: str, buffer_rows: int | None,
                      static: tuple[str, ...] | None = None) -> Instant:
        """A stream written in chunks as one commit (filegroup/stream_write.py); a stream that fits in one chunk
        is written as an in-memory batch."""
        from lsm_lab.filegroup import stream_write  # start-up: a snapshot read loads no write service
        from lsm_lab.services import commit, overwrite  # start-up: a snapshot read loads no write service
        limit = stream_write.buffer_rows_of(self.config.props, buffer_rows)
        self.check_writable()
        commit.note_first_write(self)  # before the input is read: a rejected first batch must not block create
        chunks = stream_write.chunks(data, limit, what="delete keys" if op == "delete" else "data")
        first = next(chunks, None)
        second = next(chunks, None) if first is not None else None
        if second is None:
            return self._write([] if first is None else first, op, static=static)
        head = [first, second]  # handed over once, never held by this frame while the stream is read
        del first, second
        state: stream_write.StreamWrite | None = None
        over = overwrite.Replacement(self, op, static) if overwrite.is_overwrite(op) else None
        wop = "insert" if over is not None else op  # an overwrite writes its rows as an insert into new groups
        config = overwrite.write_config(self.config) if over is not None else self.config

        def write_files(txn: occ.WriteTransaction) -> list[WriteStat]:
            nonlocal state
            snapshot = completion_time(txn.snapshot)
            completion = self.completion_map(snapshot)

            def groups_of(parts: Sequence[str]) -> list[FileGroup]:
                if snapshot is None or over is not None:  # (an overwrite: new file groups only)
                    return []
                return self.file_groups(as_of=snapshot, partitions=list(parts))

            def ctx_of(schema: pa.Schema) -> reader.ReadContext:
                return reader.ReadContext(self.path, config, schema if len(schema) else (self.schema or schema),
                                          completion, snapshot)

            with bar(total=None, desc=f"{op} {txn.begin_time} (stream)", unit="row", unit_scale=True) as b:
                state = stream_write.StreamWrite(
                    base_path=self.path, config=config, schema=self.schema, op=wop, instant=txn.begin_time,
                    groups_of=groups_of, ctx_of=ctx_of, mark=txn.mark, buffer_rows=limit,
                    on_rows=b.update if b is not None else None)
                stats = state.run(itertools.chain(_drain(head), chunks))
            if over is None:
                return stats
            return over.finish(stats, instant=txn.begin_time, snapshot=txn.snapshot, mark=txn.mark,
                               schema=state.batch_schema)

        def final_schema() -> pa.Schema:
            return state.batch_schema if state is not None else pa.schema([])

        def input_rows() -> int:
            return state.input_rows if state is not None else 0

        done = commit.run_write(self, op, final_schema, write_files, input_rows=input_rows,
                                replaced=(lambda: over.replaced) if over is not None else None)
        commit.after_write(self)
        return done

    def _write_files(self, batch: writer.PreparedBatch, instant: str, op: str, *, snapshot: str | None = None,
                     txn: occ.WriteTransaction | None = None, fresh: bool = False) -> list[WriteStat]:
        """Tag the batch against the snapshot the write started from and write one file per file group.

        `fresh` (an overwrite): every row goes to a new file group (or a new slice of its bucket's group),
        none is tagged against the snapshot's groups, and no CDC log is written."""
        from lsm_lab.filegroup import cdclog  # start-up: a snapshot read loads no write path
        from lsm_lab.filegroup import write as writer  # start-up: a snapshot read loads no write path
        from lsm_lab.services import mdt_maintained, overwrite  # start-up: a snapshot read loads no write service
        config = overwrite.write_config(self.config) if fresh else self.config
        rows = batch.rows
        if rows.num_rows == 0:
            return []
        parts = sorted(pc.unique(rows.column(records.PARTITION_PATH)).to_pylist())
        for p in parts:
            records.check_partition_path(p)
        snapshot = completion_time(snapshot)  # the table as the last write before this one completed
        if (txn is not None and snapshot is None) or fresh:
            groups: list[FileGroup] = []  # the table was empty when this write started (or is overwritten)
        else:
            groups = self.file_groups(as_of=snapshot, partitions=parts)
        by_partition: dict[str, list[FileGroup]] = {}
        for g in groups:
            by_partition.setdefault(g.partition, []).append(g)
        schema = batch.schema if len(batch.schema) else (self.schema or pa.schema([]))
        ctx = reader.ReadContext(self.path, config, schema, self.completion_map(snapshot), snapshot)
        # the record index tags existing keys only when this writer keeps it current (services/mdt_maintained.py);
        # otherwise it would be stale after this write, and the keys of the partition's file groups are read.
        # An overwrite tags nothing (its rows go to new file groups).
        locate = None if op == "delete" or fresh else mdt_use.record_index_locator(
            self, mdt_maintained.maintained_partitions(config))
        tagged = writer.tag(config, rows, by_partition, ctx, op=op, locate=locate)
        writer.write_partition_metadata(self.path, parts, instant)
        if txn is not None:  # every marker before any data file: a crash leaves nothing unmarked
            for task, (partition, file_id, _, latest, _) in enumerate(tagged):
                token = naming.write_token(task, 0, 0)
                for name, io_type in [*writer.planned_files(config, self.path, partition, file_id, latest,
                                                            instant, op, token),
                                      *cdclog.planned(config, file_id, token, instant)]:
                    txn.mark(partition, name, io_type)
        calls = [functools.partial(
            writer.write_file_group, base_path=self.path, config=config, ctx=ctx, partition=partition,
            file_id=file_id, rows=group_rows, latest=latest, existing_keys=keys, instant=instant, op=op, task=task)
            for task, (partition, file_id, group_rows, latest, keys) in enumerate(tagged)]
        stats: list[WriteStat] = []
        sizes = [group_rows.num_rows for (_, _, group_rows, _, _) in tagged]
        # a bar by rows (shown after a second on a terminal or in Jupyter), so that one big file group shows too
        with bar(total=sum(sizes), desc=f"{op} {instant}", unit="row", unit_scale=True) as b:
            for n, group_stats in zip(sizes, writer.run_in_threads(calls)):
                stats.extend(group_stats)
                if b is not None:
                    b.update(n)
        return stats

    # ------------------------------------------------------------------ reads
    @_one_listing
    def read(self, *, as_of: TimeLike | None = None, columns: Sequence[str] | None = None, filter: FilterLike | None = None,
             merge: str | None = None, strict: bool | None = None, positions: bool = True,
             indexes: bool = True) -> pa.Table:
        """Snapshot read, or time travel with `as_of`.

        `as_of=T` (a string yyyyMMddHHmmss[SSS], an int, a datetime, an `InstantTime`) is an *instant
        time*, as Hudi users pass it — the values of `_hoodie_commit_time` and of the timeline's begin
        times, Spark's `as.of.instant`, hudi-rs's `with_as_of_timestamp`: the snapshot of every completed
        write whose instant (begin) time is <= T.  A write that began before T but completed after
        another one that began later is in it; a still-pending commit begun at or before T makes the
        read fail (`TimeTravelError`), and so does a T older than what the cleaner kept
        (`RetentionError`), as upstream's `TimelineUtils.validateTimestampAsOf`.
        `as_of=lsm_lab.CompletionTime(C)` — or a completed `Instant`, meaning its completion time —
        reads the table exactly as it was at completion time C: every write completed at or before it
        (docs/FORMAT.md, "Time travel").  "0" (or Hudi's all-zero times): before every instant, no rows.

        `filter`: a list of `(column, op, value)` tuples (partition columns prune
        folders) or a `pyarrow.compute.Expression`; `merge`: force an engine
        (`sorted`, `loser_tree`, `hash`, `heapq`); `strict`: raise on a corrupt v1 log
        block instead of skipping it as Hudi does (default: the table's, see `open_table`);
        `positions=False`: merge every file slice by key, ignoring the logs' RECORD_POSITIONS
        (the same rows; filegroup/posmerge.py), e.g. to measure what merging by position saves.
        `indexes=False`: do not use the metadata table's indexes (column statistics, record and secondary
        indexes skip file slices that cannot match a filter; table/mdt_use.py) — the same rows.
        What the read skipped is in `self.last_read_stats` (a `ReadStats`: `corrupt_blocks_skipped`, each
        also logged as a warning on the `lsm_lab.v1` logger; `files_skipped_column_stats`,
        `slices_skipped_index`, `indexes_used`).
        """
        return self.scan(as_of=as_of, columns=columns, filter=filter, merge=merge, strict=strict,
                         positions=positions, indexes=indexes).to_table(progress=True)

    @_one_listing
    def scan(self, *, columns: Sequence[str] | None = None, filter: FilterLike | None = None,
             as_of: TimeLike | None = None, batch_size: int = stream.BATCH_ROWS, merge: str | None = None,
             strict: bool | None = None, positions: bool = True, indexes: bool = True) -> stream.Scan:
        """A planned snapshot (or time-travel) read to consume as a stream or whole (table/stream.py).

        The arguments are `read`'s (`as_of`, `filter`, `merge`, … mean the same and are checked now);
        the listing and pruning happen now, the files are read when the scan is consumed:
        `to_reader()` (a `pyarrow.RecordBatchReader`), the Arrow stream protocol
        (`pl.DataFrame(scan)`, `duckdb.from_arrow(scan)`, `pa.table(scan)`), `to_table()` (= `read`),
        `to_pandas()`, `to_polars()`, `to_duckdb(con, name)`.  Batches hold at most `batch_size` rows;
        on an `lsm_tree` table a slice whose files are sorted is merged as a stream.

        A filter never gives a wrong row on MERGE_ON_READ: it is applied after the merge; before it,
        statistics skip a file slice only when no data file of it can hold a matching row version
        (`scan.stats_prune`), and record-key conditions prune as a lookup does.  On a table with a
        metadata table, its indexes skip slices first (`indexes=False` turns it off; table/mdt_use.py)."""
        columns = checks.columns_arg(columns)
        empty = columns == []
        if empty:  # N rows of no columns: read one (the key) to count them, then drop it
            columns = list(self.config.record_key[:1])
        read_time = self.resolve_time(as_of)
        self.check_retained(read_time)
        ctx = self.read_context(read_time)
        if strict is not None:
            ctx = dataclasses.replace(ctx, strict=checks.bool_arg(strict, "strict"))
        if not checks.bool_arg(positions, "positions"):
            ctx = dataclasses.replace(ctx, positions=False)
        self.last_read_stats = ctx.stats  # corrupt v1 blocks skipped (filegroup/readstats.py)
        parts = scan.prune_partitions(self.config, ctx.schema, self.partitions(), filter)
        slices = self.latest_slices(read_time, partitions=parts)
        if checks.bool_arg(indexes, "indexes") and filter is not None:
            slices = mdt_use.prune_with_indexes(self, ctx.full_schema, slices, filter,
                                                latest=self._is_latest(read_time), stats=ctx.stats)
        plan = scan.plan_scan(ctx, slices, columns=columns, filter=filter, engine=merge)
        return stream.Scan(plan, batch_size=batch_size, empty_columns=empty)

    @_one_listing
    def lookup(self, keys: str | Iterable[str], *, as_of: TimeLike | None = None, columns: Sequence[str] | None = None,
               stats: LookupStats | None = None, indexes: bool = True) -> pa.Table:
        """Rows with the given record keys (composite keys as `f1:v1,f2:v2`), as of `as_of` (times as in `read`).

        Equals `read(as_of=as_of, columns=columns)` filtered to those keys (rows
        in key order), but reads only what can hold them: file slices by bucket,
        files by key range and bloom filter, row groups by statistics, rows by
        binary search in sorted files (lsm_lab/table/lookup.py).  Pass a
        `lsm_lab.table.lookup.LookupStats` as `stats` to count what was read.
        On a table with a current, global record index in its metadata table, only the file groups
        the index names for the keys are read (`indexes=False`: not; table/mdt_use.py).
        """

        columns = checks.columns_arg(columns)
        wanted = key_lookup.as_keys(keys)
        read_time = self.resolve_time(as_of)
        self.check_retained(read_time)  # a pending commit or the cleaner's retention: refused, as read
        ctx = self.read_context(read_time)
        slices = self.latest_slices(read_time)
        if checks.bool_arg(indexes, "indexes") and mdt_use.declares(self, mdt_use.RECORD_INDEX) \
                and self._is_latest(read_time):
            narrowed = mdt_use.record_index_slices(mdt_use.Indexes(self, latest=True), slices, wanted)
            if narrowed is not None:
                if stats is not None:
                    stats.slices_pruned_record_index += len(slices) - len(narrowed)
                ctx.stats.slices_skipped_index += len(slices) - len(narrowed)
                ctx.stats.use_index(mdt_use.RECORD_INDEX)
                slices = narrowed
        reader = key_lookup.KeyLookup(ctx, slices)
        self.last_read_stats = reader.ctx.stats  # corrupt v1 blocks a lookup's fallback read skipped
        return reader.lookup(wanted, columns=columns, stats=stats)

    def _is_latest(self, read_time: TimeLike | None) -> bool:
        """Whether a read at `read_time` sees every completed write (the record and secondary indexes hold
        only the latest state)."""
        if read_time is None:
            return True
        seen = {i.begin_time for i in self.visible_writes(read_time)}
        return seen == {i.begin_time for i in self.completed_writes()}

    @_one_listing
    def read_optimized(self, *, columns: Sequence[str] | None = None, as_of: TimeLike | None = None,
                       filter: FilterLike | None = None, indexes: bool = True) -> pa.Table:
        """Base files only (L1): fast, but misses updates still in log files of a MERGE_ON_READ table.

        `as_of`: the base files of the slices a `read(as_of=...)` would use (times as in `read`);
        `filter`: as `read`'s, applied to the base files' rows; base files the metadata table's column
        statistics rule out are not read (`indexes=False`: they are; table/mdt_use.py)."""
        return self.scan_optimized(columns=columns, as_of=as_of, filter=filter, indexes=indexes).to_table()

    @_one_listing
    def scan_optimized(self, *, columns: Sequence[str] | None = None, as_of: TimeLike | None = None,
                       batch_size: int = stream.BATCH_ROWS, filter: FilterLike | None = None,
                       indexes: bool = True) -> stream.Scan:
        """`read_optimized` as a `Scan` (table/stream.py): the base file of every slice, one after another."""
        columns = checks.columns_arg(columns)
        empty = columns == []
        if empty:  # N rows of no columns, as read(columns=[])
            columns = list(self.config.record_key[:1])
        read_time = self.resolve_time(as_of)
        self.check_retained(read_time)
        ctx = self.read_context(read_time)
        self.last_read_stats = ctx.stats
        only_base = [FileSlice(fs.partition, fs.file_id, fs.base_instant, fs.base_file, ())
                     for fs in self.latest_slices(read_time) if fs.base_file is not None]
        if filter is not None:
            kept = set(scan.prune_partitions(self.config, ctx.schema, sorted({f.partition for f in only_base}), filter))
            only_base = [fs for fs in only_base if fs.partition in kept]
        if checks.bool_arg(indexes, "indexes") and filter is not None \
                and mdt_use.declares(self, mdt_use.COLUMN_STATS):
            # column statistics only: every slice here is a base file alone, judged by its own statistics; the
            # record and secondary indexes hold the latest values (logs included), not the base files' ones
            only_base = mdt_use.column_stats_prune(mdt_use.Indexes(self, latest=self._is_latest(read_time)),
                                                   ctx.full_schema, only_base, filter, ctx.stats)
        plan = scan.plan_scan(ctx, only_base, columns=columns, filter=filter, engine="hash")
        return stream.Scan(plan, batch_size=batch_size, empty_columns=empty)

    @_one_listing
    def read_incremental(self, start: TimeLike | None, end: TimeLike | None = None, *, columns: Sequence[str] | None = None) -> pa.Table:
        """Records whose latest version was written by instants completed in (start, end].

        `start` and `end` are *completion* times (as hudi-rs's incremental query and Hudi 1.x's
        completion-time based incremental reads); an `Instant` means its completion time."""
        return self.scan_incremental(start, end, columns=columns).to_table()

    @_one_listing
    def scan_incremental(self, start: TimeLike | None, end: TimeLike | None = None, *,
                         columns: Sequence[str] | None = None, batch_size: int = stream.BATCH_ROWS) -> stream.Scan:
        """`read_incremental` as a `Scan` (table/stream.py): the snapshot at `end`, filtered to the rows
        whose commit time is one of the instants completed in (start, end]."""
        columns = checks.columns_arg(columns)
        lo = self.resolve_time(start)
        hi = completion_time(self.resolve_time(end) or self.latest_completion())  # (start, end] are completion times
        if hi is None:
            return self.scan(columns=columns, batch_size=batch_size)
        wanted = {b for b, c in self.completion_map(hi).items()
                  if lo is None or normalize_time(c) > normalize_time(lo)}
        changed = pc.field(records.COMMIT_TIME).isin(pa.array(sorted(wanted), pa.string()))
        return self.scan(as_of=hi, columns=columns, filter=changed, batch_size=batch_size)

    @_one_listing
    def read_cdc(self, start: TimeLike | None, end: TimeLike | None = None, *, columns: Sequence[str] | None = None) -> pa.Table:
        """The change stream of the instants completed in (start, end]: one row per changed record.

        Columns: `op` ("i", "u", "d"), `ts_ms` (completion time), `commit_time`,
        `record_key`, `before` and `after` (structs of the table's columns, or of
        `columns`; null when absent) and `inferred`; rows by commit, then key.
        Instants with CDC logs are read from them; the others (CDC off, Hudi's
        tables) are inferred from the snapshots around them, and listed in the
        schema metadata `lsm_lab.cdc.inferred_instants` (lsm_lab/table/cdc.py).
        """
        return cdc.read_cdc(self, start, end, columns=columns)

    @_one_listing
    def scan_cdc(self, start: TimeLike | None, end: TimeLike | None = None, *, columns: Sequence[str] | None = None,
                 batch_size: int = stream.BATCH_ROWS) -> cdc.ChangeScan:
        """`read_cdc` as a stream (table/cdc.py `ChangeScan`): the same rows, read instant by instant as
        they are consumed (`to_reader()`, `pl.DataFrame(scan)`, `duckdb.from_arrow(scan)`, `to_table()`)."""
        return cdc.ChangeScan(self, start, end, columns=columns, batch_size=batch_size)

    # ------------------------------------------------------------------ inspection
    @_one_listing
    def file_slices(self, as_of: TimeLike | None = None) -> pd.DataFrame:
        """One row per file of the file slices a read `as_of` (an instant time, a `CompletionTime`; see `read`) uses."""
        self.check_retained(self.resolve_time(as_of))
        return inspect.file_slices_frame(self, as_of)

    @_one_listing
    def dump_levels(self, as_of: TimeLike | None = None) -> str:
        """The L1 base file and L0 logs of every file group a read `as_of` uses (time as in `read`), as text."""
        self.check_retained(self.resolve_time(as_of))
        return inspect.dump_levels(self, as_of)

    @_one_listing
    def schema_history(self) -> pa.Table:
        """The table schema at every completed write where it changed (instant, completed, action, columns,
        change, schema); a read `as_of=T` uses the schema of the last row at or before T (`schema_at`)."""
        return schema_history.schema_history(self)

    # ------------------------------------------------------------------ Hudi's metadata table (read)
    def metadata_table(self) -> MetadataTable | None:
        """Hudi's metadata table of this table (`.hoodie/metadata/`), read as of now; None when the table
        has none (`hoodie.table.metadata.partitions` empty or no folder).  See table/metadata_table.py."""
        return open_metadata_table(self)

    def create_index(self, name: str, column: str) -> str:
        """A secondary index `secondary_index_<name>` on `column`, kept in the metadata table (Hudi's
        `CREATE INDEX name ON t (column)`): built now from the committed rows, then kept up to date by every
        write.  The table needs `hoodie.metadata.enable=true`.  Returns the index's MDT partition name;
        read it with `t.metadata_table().secondary_index(name, values)`."""
        from lsm_lab.services import mdt_write  # start-up: a snapshot read loads no write service
        from lsm_lab.services.lock import table_lock  # start-up: a snapshot read loads no write service
        with table_lock(self.path):
            return mdt_write.create_index(self.path, name, column)

    # ------------------------------------------------------------------ table services (lsm_lab.services)
    @_one_operation
    def compact(self, strategy: str = "hybrid", merge: str | None = None, plan_only: bool = False, *,
                options: Mapping[str, str] | None = None, progress: bool | None = None) -> Instant | None:
        """Compact file groups: `hybrid` (FULL or LOG per file group), `full` (L0+L1 → L1) or `log` (L0 → L0).

        Pending plans nobody is running are finished first. `merge` forces an
        engine; `plan_only` only saves the plan (`<t>.compaction.requested`);
        `options` override the planner thresholds of hoodie.properties.
        Returns the completed (or, with `plan_only`, requested) instant, or None.
        """
        from lsm_lab.services import compaction  # start-up: a snapshot read loads no write service
        checks.bool_arg(plan_only, "plan_only")
        if progress is not None:
            checks.bool_arg(progress, "progress")
        return compaction.compact(self, strategy=strategy, merge=merge, plan_only=plan_only, options=options,
                                  progress=progress)

    @_one_operation
    def cluster(self, plan_only: bool = False, *, options: Mapping[str, str] | None = None,
                merge: str | None = None) -> Instant | None:
        """Rewrite small file groups of each partition as fewer key-sorted ones (a `replacecommit`).

        Pending clustering plans nobody runs are finished first; `plan_only` only
        saves the plan (`<t>.clustering.requested`); `options` override the
        `hoodie.clustering.plan.strategy.*` limits.  With the bucket index each
        bucket is clustered on its own (services/clustering.py).
        """
        from lsm_lab.services import clustering  # start-up: a snapshot read loads no write service
        checks.bool_arg(plan_only, "plan_only")
        return clustering.cluster(self, plan_only=plan_only, options=options, merge=merge)

    def clustering_plans(self) -> list[tuple[Instant, clustering.ClusteringPlan]]:
        """(instant, ClusteringPlan) of the pending clusterings, oldest first."""
        from lsm_lab.services import clustering  # start-up: a snapshot read loads no write service

        return clustering.pending_plans(self.active_timeline)

    def compaction_plans(self, *, include_completed: bool = True) -> list[tuple[Instant, CompactionPlan]]:
        """(instant, CompactionPlan) of the compactions on the active timeline, oldest first."""
        from lsm_lab.services import compaction  # start-up: a snapshot read loads no write service

        return compaction.plans(self, include_completed=include_completed)

    @_one_operation
    def clean(self, policy: str | None = None, retained: int | None = None) -> Instant | None:
        """Delete files no retained snapshot needs (KEEP_LATEST_COMMITS or KEEP_LATEST_FILE_VERSIONS)."""
        from lsm_lab.services import clean  # start-up: a snapshot read loads no write service

        return clean.clean(self, policy=policy, retained=retained)

    def rollback(self, instant: Any = None) -> list[Instant]:
        """Roll back dead pending writes (no argument), or one instant: pending and dead, or the latest write.

        The latest completed write may be a commit, a deltacommit or a replacecommit (insert_overwrite,
        insert_overwrite_table, clustering): its files go, and the file groups it replaced are live again
        (they are replaced only by a *completed* replacecommit's metadata), as upstream's rollback of a
        completed instant (`CopyOnWriteRollbackActionExecutor`: back to inflight, its files deleted).  A
        savepointed instant is refused, as upstream."""
        from lsm_lab.services import clustering, upgrade  # start-up: a snapshot read loads no write service
        from lsm_lab.services import rollback as rb  # start-up: a snapshot read loads no write service
        from lsm_lab.services.lock import table_lock  # start-up: a snapshot read loads no write service

        with table_lock(self.path):
            if instant is None:
                return rb.rollback_failed_writes(self.path, self.active_timeline)
            begin = instant.begin_time if isinstance(instant, Instant) else str(instant)
            current = self.active_timeline.find(begin)
            if not current.is_completed:
                if current.action in (COMPACTION, LOG_COMPACTION):
                    rb.reset_compaction(self.path, self.active_timeline, current)
                    rb.remove_timeline_files(self.active_timeline, begin)
                    return []
                return [rb.rollback_pending(self.path, self.active_timeline, current)]
            writes = self.completed_writes()
            if not writes or writes[-1].begin_time != begin or current.action not in (COMMIT, DELTA_COMMIT,
                                                                                      REPLACE_COMMIT, CLUSTERING):
                raise InputError(f"only the latest completed write (commit/deltacommit/replacecommit) can be rolled "
                                 f"back; {current} is not it — use savepoint() and restore() for older instants")
            if str(self.instant_metadata(current).get("operationType") or "").lower() == upgrade.UPGRADE_OPERATION:
                raise InputError(f"{current} is the upgrade to table version 10: it cannot be rolled back (the table "
                                 "is version 10 from it on); restore a savepoint from before it instead",
                                 path=self.path)
            if any(sp.get("savepointedInstant") == begin for sp in self.savepoints()):
                raise InputError(f"{current} is savepointed: delete the savepoint before rolling it back (as "
                                 "Hudi's BaseRollbackActionExecutor.validateSavepointRollbacks)", path=self.path)
            self._check_state_before(writes)
            rb.drop_plans_reading(self.path, self.active_timeline, begin)
            clustering.drop_plans_reading(self, begin)
            return [rb.rollback_completed(self.path, self.active_timeline, current)]

    def _check_state_before(self, writes: list[Instant]) -> None:
        """Refuse to roll back the latest write when the table as it was before it is no longer whole.

        A rollback makes the previous file versions current again; if the cleaner deleted one (or a
        hand did), rolling back would leave a table no read can open.  Hudi guards the same case by
        refusing rollbacks older than what the cleaner retained."""
        if len(writes) < 2:
            return
        try:
            self.file_groups(as_of=writes[-2])
        except (CorruptTableError, InputError) as exc:
            raise InputError(f"cannot roll back {writes[-1].begin_time}: the table as it was before it is no longer "
                             f"whole, so the rollback would leave it unreadable ({exc.message}); restore a savepoint "
                             "instead, or keep more versions when cleaning (clean(retained=N))", path=self.path) from None

    def savepoint(self, instant: Any = None, *, user: str | None = None, comment: str = "") -> Instant:
        """Pin a completed write (default: the latest): its files survive cleaning, restore() can return to it."""
        from lsm_lab.services import savepoint  # start-up: a snapshot read loads no write service

        return savepoint.create_savepoint(self, instant, user=user, comment=comment)

    def delete_savepoint(self, instant: Any) -> None:
        """Remove a savepoint (its files become cleanable again)."""
        from lsm_lab.services import savepoint  # start-up: a snapshot read loads no write service

        savepoint.delete_savepoint(self, instant)

    def restore(self, instant: Any) -> Instant:
        """Put the table back to a savepoint (every later instant rolled back, a `restore` instant recorded)."""
        from lsm_lab.services import savepoint  # start-up: a snapshot read loads no write service

        return savepoint.restore(self, instant)

    @_one_operation
    def archive(self, keep: int | None = None) -> list[Instant]:
        """Move old completed instants into the LSM timeline (`.hoodie/timeline/history/`)."""
        from lsm_lab.services import archiver  # start-up: a snapshot read loads no write service

        return archiver.archive(self, keep=keep)


# ---------------------------------------------------------------------- create / open
def _fields(value: str | Sequence[str] | None, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",")]
    out = tuple(v for v in value if v)
    for v in out:
        if not isinstance(v, str) or not v or v.startswith("_hoodie_"):
            raise InputError(f"invalid {what} field {v!r}")
    return out


def _check_create_args(*, path: Any, name: Any, record_key: Any, partition_by: Any, ordering_field: Any,
                      table_type: Any, layout: Any, hive_style: Any, num_buckets: Any, table_version: Any) -> None:
    """Every argument of `create_table`, checked before anything is written."""
    checks.path_arg(path)
    if not isinstance(name, str):  # (its characters are checked by create_table)
        raise InputError(f"name must be a string, not {name!r}")
    checks.fields_arg(record_key, "record_key", optional=record_key is not None and not isinstance(record_key, str))
    checks.fields_arg(partition_by, "partition_by", optional=True)
    checks.str_arg(ordering_field, "ordering_field", optional=True)
    checks.str_arg(table_type, "table_type")
    checks.str_arg(layout, "layout")
    checks.bool_arg(hive_style, "hive_style")
    checks.int_arg(num_buckets, "num_buckets", minimum=1, maximum=cfg.MAX_BUCKETS)
    checks.int_arg(table_version, "table_version")


def create_table(
    path: str | os.PathLike[str],
    *,
    name: str,
    record_key: str | Sequence[str],
    partition_by: str | Sequence[str] | None = None,
    ordering_field: str | None = None,
    table_type: str = "MERGE_ON_READ",
    layout: str = "lsm_tree",
    hive_style: bool = True,
    num_buckets: int = 4,
    table_version: int = 10,
    storage_options: Mapping[str, Any] | None = None,
    properties: Mapping[str, Any] | None = None,
    cdc: bool = False,
    cdc_mode: str = "DATA_BEFORE_AFTER",
    **options: Any,
) -> Table:
    """Create a new table at `path` (the folder may exist but must not hold a table).

    `record_key`/`partition_by` take a field or a list of fields; an
    `ordering_field` makes the merge mode EVENT_TIME_ORDERING.  Extra Hudi
    properties go in `properties` (e.g. ``properties={"hoodie.cleaner.commits.retained": "5"}``; a
    type checker accepts that, while ``**{...}`` of strings clashes with the typed keywords above).
    New tables are Apache Hudi's table version 10 (upstream's native log names and
    footers, delete-log schema and bucket hash; docs/FORMAT.md).  `table_version=9`
    creates the RFC-103 draft's dialect that lsm_lab wrote before; `6` or `8` a
    compatibility table that older Hudi readers understand: v1 log files, the
    timeline and properties of that version (`lsm_lab.filegroup.compat`).
    `properties` is the same as `options`, as a mapping.  `cdc=True` makes every
    write add change-data-capture logs (`hoodie.table.cdc.enabled`), keeping what
    `cdc_mode` says: DATA_BEFORE_AFTER, DATA_BEFORE or OP_KEY_ONLY (`Table.read_cdc`).  Every argument is checked
    before anything is written; an option may repeat an argument but not contradict
    it.  A table whose first write failed (nothing committed, no data file) may be
    created again.

    `path` is a local folder or a `file://`, `s3://`, `gs://` or `az://` URI;
    credentials and endpoint come from the standard environment variables and
    `storage_options` (see `lsm_lab.storage.location`).
    """
    _check_create_args(path=path, name=name, record_key=record_key, partition_by=partition_by,
                       ordering_field=ordering_field, table_type=table_type, layout=layout,
                       hive_style=hive_style, num_buckets=num_buckets, table_version=table_version)
    table_type = table_type.upper()
    if table_type in ("MOR",):
        table_type = "MERGE_ON_READ"
    if table_type in ("COW",):
        table_type = "COPY_ON_WRITE"
    if table_type not in cfg.TABLE_TYPES:
        raise InputError(f"table_type must be one of {', '.join(cfg.TABLE_TYPES)}, not {table_type!r}")
    if layout not in cfg.LAYOUTS:
        raise InputError(f"layout must be one of {', '.join(cfg.LAYOUTS)}, not {layout!r}")
    if table_version not in (6, 8, 9, 10):
        raise UnsupportedFeatureError(f"lsm_lab creates tables of version 10 (Hudi's RFC-103), 9 (the RFC-103 draft), "
                                      f"or 6 and 8 in compatibility mode (v1 logs that older readers understand), "
                                      f"not {table_version}")
    if not name or any(ch in name for ch in "/\\ ."):
        raise InputError(f"invalid table name {name!r} (letters, digits, '_' and '-' only)")
    keys = _fields(record_key, "record key")
    if not keys:
        raise InputError("record_key is required")
    parts = _fields(partition_by, "partition")
    if int(num_buckets) < 1:
        raise InputError("num_buckets must be at least 1")
    base_path = as_path(path, storage_options)
    if base_path.is_file():  # (an object store's table root is a prefix, never a file: no request)
        raise InputError("path is a file, not a folder for a table", path=base_path)
    replacing = fsview.abandoned_table(base_path)  # a table whose first write failed: created again
    if (base_path / ".hoodie").exists() and not replacing:
        raise TableConfigError("a table (or a .hoodie folder) already exists here", path=base_path)
    extra = {**checks.options_arg(properties, "properties"), **checks.options_arg(options)}
    checks.bool_arg(cdc, "cdc")
    checks.str_arg(cdc_mode, "cdc_mode")
    if cdc_mode.strip().upper() not in cfg.CDC_MODES:
        raise InputError(f"cdc_mode must be one of {', '.join(cfg.CDC_MODES)}, not {cdc_mode!r}")
    if (cdc or str(extra.get(cfg.KEY_CDC_ENABLED, "")).lower() == "true") and table_version < 9:
        raise UnsupportedFeatureError("CDC logs are native (Parquet) logs: create the table with table_version 9 "
                                      f"or 10, not {table_version}")
    props = cfg.build_props(name=name, record_key=keys, partition_by=parts, ordering_field=ordering_field,
                            table_type=table_type, layout=layout, version=table_version, hive_style=hive_style,
                            num_buckets=int(num_buckets), extra=extra, cdc=cdc, cdc_mode=cdc_mode.strip().upper())
    if table_version < 9:  # compatibility mode: the keys and formats of that version (lsm_lab.filegroup.compat)
        from lsm_lab.filegroup import compat  # start-up: a snapshot read loads no write path

        props = compat.compat_props(props, table_version)
        props.update(extra)
    base_path.mkdir(parents=True, exist_ok=True)
    config = cfg.write_config(base_path, props, create=not replacing)
    paths.unlink(base_path / ".hoodie" / fsview.FIRST_WRITE)  # (paths: never through a link out of the table)
    paths.make_folders(ActiveTimeline(base_path, config).folder)
    return Table(base_path, config)


def open_table(path: str | os.PathLike[str] | StoragePath, storage_options: Mapping[str, Any] | None = None, *,
               strict: bool = False, use_metadata: bool | None = None) -> Table:
    """Open an existing table (lsm_lab's or Apache Hudi's) at `path` (a folder or an object-store URI).

    A corrupt block in a v1 (#HUDI#) log file is skipped by reads, as Hudi's
    log reader does (a torn append leaves one); `strict=True` makes such a read
    raise `CorruptFileError` instead.
    A table that declares its metadata table's `files` partition is listed from it (no LIST of the
    data folders; table/mdt_listing.py); `use_metadata=False` lists the folders instead (default None:
    on, unless the environment variable LSM_LAB_METADATA_LISTING=0).
    """
    if not isinstance(path, StoragePath):
        checks.path_arg(path)
    base_path = as_path(path, storage_options)
    if use_metadata is not None:
        use_metadata = checks.bool_arg(use_metadata, "use_metadata")
    return Table(base_path, cfg.read_config(base_path), strict=checks.bool_arg(strict, "strict"),
                 use_metadata=use_metadata)


__all__ = ["Table", "create_table", "open_table"]
