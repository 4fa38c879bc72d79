"""`spark.read.format("lsm_lab")`, `df.write.format("lsm_lab")` and SQL: a PySpark 4 Python Data Source.

    register(spark)           spark.dataSource.register(LsmLabDataSource) + filter pushdown turned on
    SQL                       CREATE TABLE trips USING lsm_lab LOCATION '/data/trips';   (or OPTIONS (path '...'),
                              or CREATE TEMPORARY VIEW trips USING lsm_lab OPTIONS (path '/data/trips'))
                              SELECT ... FROM trips WHERE ...; INSERT INTO trips (id, city, ...) SELECT ...;
                              INSERT OVERWRITE trips SELECT ...

    read                                               write (mode "append"; "overwrite": insert_overwrite_table)
    ────                                               ─────────────────────
    driver: pushFilters(filters)                       driver: writer(schema) — table opened, operation checked,
      (col = v, <, <=, >, >=, in, <>) on a string,             dead jobs' staging folders swept, a beat
      integer or boolean column: kept → tuples;        tasks:  write(batches) ─► staged Arrow IPC files
      the rest returned: Spark filters after the scan          <table>/.hoodie/.lsm_lab_staging/<job>/part-…
    driver: partitions() = Table.scan(filter=tuples)   driver: commit(messages) ─► Table.<operation>(staged rows)
      → one InputPartition per file slice left after            = one lsm_lab commit (services/commit.py:
        partition, key and statistics pruning                     inflight → files → completed; a crash leaves
    tasks:  read(slice) = the scan of that slice                  an inflight the next write rolls back)
      (key pruning inside it, the tuples applied                staging folder deleted
       after the merge: MOR-safe) ─► Arrow batches     driver: abort(messages) ─► staging folder deleted,
                                                                nothing committed

**Filters.**  A filter is accepted only when Arrow evaluates it on the merged rows exactly as Spark would:
comparisons and `IN` with a string, integer or boolean literal on a column of that kind (nulls drop out in
both).  Floating-point columns stay with Spark (Spark orders NaN above every number, Arrow's comparisons
say false), as do null tests, `LIKE`, `<=>`, `NOT IN` and anything on dates or timestamps.  An accepted
filter is applied after each slice's merge (`ScanPlan.finish`), so a log that changes a base row's value
is seen before the filter is: no Spark `Filter` is needed above the scan for correctness.

**Columns.**  PySpark's Python Data Source API (4.3) has no column pruning hook: Spark reads every column
of the source and drops the others.  `.option("columns", "a,b")` narrows the source itself.

**Options.**  read: `as_of` (an instant time: writes that began at or before it), `as_of_completion` (a
completion time: writes completed at or before it), `columns`, `merge`; write: `operation` (upsert, the
default, insert, bulk_insert, delete, insert_overwrite, insert_overwrite_table), `overwrite_mode`,
`partition`.  A table
that does not exist yet is created by the first write when `record_key` is given (with `partition_by`,
`ordering_field`, `table_type`, `layout`, `name`; Hudi's SQL names `primaryKey`, `preCombineField` and
`type` = cow | mor are accepted for the first three).  Options named `storage.<key>` are the `storage_options` of an
object-store table.

**Overwrite.**  `mode("overwrite")` (and SQL `INSERT OVERWRITE`, which PySpark hands the writer as
`overwrite=True`) makes the rows the whole table: insert_overwrite_table, one replacecommit
(services/overwrite.py); with the option `overwrite_mode` = dynamic (Hudi's `hoodie.datasource.overwrite.mode`:
on the view or table, or per statement: `INSERT OVERWRITE t WITH ('overwrite_mode' = 'dynamic') SELECT ...`)
only the partitions the rows go to are replaced (insert_overwrite); with the option `partition` (partition
paths, comma-separated: `INSERT OVERWRITE t WITH ('partition' = 'city=pune') SELECT ...`) exactly those
partitions are, a row outside them is an error and an empty SELECT empties them (`Table.insert_overwrite(
rows, partitions=...)`, the static overwrite Hudi's SQL derives from a PARTITION clause).  A *static* partition overwrite
(`INSERT OVERWRITE t PARTITION (city = 'x') SELECT ...`) cannot reach a Python data source in PySpark 4.3:
`PythonTable.partitioning()` is the `Table` default (no partition column), so Spark's analyser refuses the
clause (`[NON_PARTITION_COLUMN]`) before lsm_lab runs; nor can `spark.sql.sources.partitionOverwriteMode
= dynamic` (`PythonTable` lacks the OVERWRITE_DYNAMIC capability and `PythonWriteBuilder` implements only
`SupportsTruncate`: `[UNSUPPORTED_FEATURE.TABLE_OPERATION] ... does not support dynamic overwrite`); the
writer learns only `overwrite=True`.  Hudi's datasource gets the same table differently: `HoodieSparkSqlWriter
.handleSaveModes` deletes the table folder for SaveMode.Overwrite unless the operation is
INSERT_OVERWRITE_TABLE (a TODO there, HUDI-6286, says it should not delete) — lsm_lab always takes
the replacecommit: crash-safe, and time travel still reads the rows it replaced.  For a partition
overwrite use `option("operation", "insert_overwrite")` with mode("append"), as with Hudi.  A delete
takes mode("append") only, as upstream.

**SQL tables.**  Measured on the installed PySpark 4.3: `CREATE TABLE t USING lsm_lab LOCATION '...'` and
`... OPTIONS (path '...')` call the source's `schema()` once, with the options {path, location, owner,
provider}; every later `SELECT`/`INSERT` builds the reader and writer with NO option (the JVM's
`PythonDataSourceV2.getTable(schema, partitioning, properties)` builds `PythonTable(ds, shortName,
schema)` and drops `properties`; `PythonTable.newScanBuilder(options)` / `newWriteBuilder(info)` pass
only the statement's own options, empty for SQL, to `create_data_source.py`).  What Spark does keep and
hand back is the table's schema, with field metadata: so `schema()` of a catalog table (options holding
`location`) puts the path and the read/write options (never `storage.*`, which may hold credentials)
in the first field's metadata (`catalog.LOCATION_METADATA`), and the reader and writer read them from the schema
they are given.  A table created with a column list (`CREATE TABLE t (a INT, ...) USING lsm_lab ...`)
never calls `schema()`: `register(spark)` adds a hook to the driver's catalog that creates the table and
writes the same metadata into the catalog's schema (spark/catalog.py).  Options given per statement
(`INSERT ... WITH ('k' = 'v')`) do reach the writer, over the table's.

**Staging.**  A job's staged rows live in a hidden folder kept alive by beats (services/staging.py); a
driver that dies between its tasks and the end of its commit leaves it behind (the table still reads its
last commit), and the next table write or Spark write job removes it once it has had no beat for
`lsm_lab.staging.max.age.s` (default an hour) — never the folder of a job still working.

Simplified compared with Apache Hudi's Spark datasource: the rows a job writes are staged by the tasks and
written into file groups by the driver's `commit` (one `Table` write: the Python Data Source API has no
shuffle before its write tasks, and lsm_lab routes every key to one file group — `write_table` is the
distributed writer), so the driver streams the staged files into that one write (`filegroup/stream_write.py`:
memory bounded by its buffer and one task's rows, not the job's); no streaming source or sink; no
incremental or CDC query type through `format("lsm_lab")` (`read_cdc`); no `INSERT OVERWRITE ... PARTITION`
(see "Overwrite").

Taught in: no chapter (README, "Reading an lsm_lab table from other engines")
"""

from __future__ import annotations

import dataclasses
import io
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
    Not,
    WriterCommitMessage,
)

from lsm_lab.api import Table, create_table, open_table
from lsm_lab.errors import InputError, TableNotFoundError
from lsm_lab.filegroup import write as writer
from lsm_lab.filegroup.fsview import FileSlice
from lsm_lab.filegroup.read import ReadContext
from lsm_lab.merge.records import META_COLUMNS
from lsm_lab.services import overwrite as overwrite_op
from lsm_lab.services import staging
from lsm_lab.spark import catalog
from lsm_lab.spark.catalog import location_of, with_location
from lsm_lab.spark.jobs import arrow_schema_for, spark_schema
from lsm_lab.storage import TablePath, open_read
from lsm_lab.storage.atomic import create_file
from lsm_lab.table.scan import plan_scan
from lsm_lab.table.stream import Scan
from lsm_lab.timeline.instanttime import CompletionTime, TimeLike

#: the name in `spark.read.format(...)` and `USING ...`
FORMAT = "lsm_lab"
#: hidden folder of the table (listings skip it) where write tasks stage their rows until the commit
STAGING = staging.STAGING
#: every `operation` option a write takes
WRITE_OPERATIONS = (*writer.OPERATIONS, *overwrite_op.OPERATIONS)
#: Hudi's name of the `overwrite_mode` option (apache/hudi `DataSourceWriteOptions.OVERWRITE_MODE`)
OVERWRITE_MODE_HUDI = "hoodie.datasource.overwrite.mode"
#: Spark's switch for `DataSourceReader.pushFilters` (without it a reader that implements it is refused)
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"

_COMPARISONS: dict[type, str] = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<",
                                 LessThanOrEqual: "<="}


def register(spark: Any) -> None:
    """Make `format("lsm_lab")` and `USING lsm_lab` known to `spark` and turn on Python filter pushdown."""
    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(LsmLabDataSource)
    catalog.install(spark)  # CREATE TABLE t (columns) USING lsm_lab: created by a hook on the driver (catalog.py)


# --------------------------------------------------------------------------- options
@dataclass(frozen=True)
class SourceOptions:
    """The options of one read or write, checked."""

    path: str
    storage_options: dict[str, str] | None
    as_of: TimeLike | None
    columns: tuple[str, ...] | None
    merge: str | None
    operation: str
    create: dict[str, Any]
    dynamic_overwrite: bool = False
    partitions: tuple[str, ...] | None = None  # option `partition`: a static insert_overwrite of these

    @classmethod
    def of(cls, options: Mapping[str, str], schema: Any = None) -> SourceOptions:
        """`options` checked; with no `path` among them (a catalog table: PySpark hands its reader and writer
        no option), the path the table's `schema` carries (`LOCATION_METADATA`, see "SQL tables")."""
        opts = catalog.lsm_options(options)
        if not opts.get("path") and schema is not None:  # the table's options, the statement's (WITH (...)) win
            opts = {**catalog.lsm_options(location_of(schema)), **opts}
        path = opts.get("path")
        catalog.raise_refused(opts)  # a CREATE TABLE the catalog hook refused (catalog.py)
        if not path and not opts:
            raise InputError("lsm_lab got no options: PySpark (4.3) hands the reader and writer of a catalog table "
                             "(CREATE TABLE ... USING lsm_lab) none of its options, and this table's schema carries "
                             "no location: a table created with a column list while lsm_lab.spark.register(spark) "
                             "had not run in this driver (or under Spark Connect, where its catalog hook cannot "
                             "run); DROP it and create it again after register(spark), or create it as CREATE "
                             "TABLE name USING lsm_lab LOCATION '...' (no columns), or use CREATE TEMPORARY VIEW "
                             "name USING lsm_lab OPTIONS (path '...')")
        if not path:
            raise InputError('format("lsm_lab") needs a table path: .load(path), .save(path) or '
                             "OPTIONS (path '...')")
        storage = {k[len("storage."):]: v for k, v in opts.items() if k.startswith("storage.")} or None
        if "as_of" in opts and "as_of_completion" in opts:
            raise InputError("give as_of or as_of_completion, not both")
        as_of: TimeLike | None = opts.get("as_of")
        if "as_of_completion" in opts:
            as_of = CompletionTime(opts["as_of_completion"])
        columns = tuple(c.strip() for c in opts["columns"].split(",") if c.strip()) if "columns" in opts else None
        operation = opts.get("operation", "upsert").lower()
        if operation not in WRITE_OPERATIONS:
            raise InputError(f"option operation: unknown operation {operation!r} "
                             f"(expected one of {', '.join(WRITE_OPERATIONS)})")
        mode = opts.get("overwrite_mode", opts.get(OVERWRITE_MODE_HUDI, "static")).lower()
        if mode not in ("static", "dynamic"):
            raise InputError(f"option overwrite_mode: {mode!r} is neither static (an overwrite replaces the whole "
                             "table) nor dynamic (only the partitions the rows go to)")
        partitions = tuple(x.strip() for x in opts["partition"].split(",") if x.strip()) \
            if opts.get("partition") else None
        if partitions is not None and operation not in ("upsert", overwrite_op.INSERT_OVERWRITE):
            raise InputError(f"option partition (a static partition overwrite) takes operation insert_overwrite, "
                             f"not {operation}")
        create: dict[str, Any] = {}
        for key in ("record_key", "partition_by", "ordering_field", "table_type", "layout", "name"):
            if key in opts:
                value: Any = opts[key]
                if key in ("record_key", "partition_by") and "," in value:
                    value = [v.strip() for v in value.split(",")]
                create[key] = value
        return cls(path, storage, as_of, columns, opts.get("merge"), operation, create, mode == "dynamic", partitions)

    def open(self) -> Table:
        return open_table(self.path, self.storage_options)


# --------------------------------------------------------------------------- the source
class LsmLabDataSource(DataSource):
    """`spark.read.format("lsm_lab").load(path)`, `df.write.format("lsm_lab").save(path)`, `USING lsm_lab`."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> Any:
        opts = SourceOptions.of(self.options)
        table = opts.open()
        full = table.read_context(table.resolve_time(opts.as_of)).full_schema
        cols = list(opts.columns) if opts.columns is not None else list(full.names)
        unknown = [c for c in cols if c not in full.names]
        if unknown:
            raise InputError(f"option columns: unknown column{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(map(repr, unknown))}; the table has {', '.join(full.names)}")
        out = spark_schema(pa.schema([full.field(c) for c in cols]))
        if "location" in {str(k).lower() for k in self.options}:  # CREATE TABLE: the catalog keeps the schema
            out = with_location(out, self.options)
        return out

    def reader(self, schema: Any) -> SliceReader:
        return SliceReader(SourceOptions.of(self.options, schema), schema)

    def writer(self, schema: Any, overwrite: bool) -> StagedWriter:
        """`overwrite` (mode "overwrite", SQL `INSERT OVERWRITE`): the rows replace the whole table, as
        Hudi's datasource (`HoodieSparkSqlWriter.handleSaveModes`) leaves it — there by deleting the table
        folder, unless the operation is INSERT_OVERWRITE_TABLE; here as insert_overwrite_table (one
        replacecommit: crash-safe, time travel keeps the old rows).  With `overwrite_mode` dynamic (or
        `hoodie.datasource.overwrite.mode`), only the partitions the rows go to: insert_overwrite, as Hudi's
        SQL deduces it (`ProvidesHoodieConfig.deduceOverwriteConfig`).  A delete takes mode "append" only."""
        opts = SourceOptions.of(self.options, schema)
        if overwrite:
            if opts.operation == "delete":
                raise InputError('mode("overwrite") with operation delete: a delete takes mode("append") only '
                                 "(as Hudi's datasource)")
            opts = dataclasses.replace(opts, operation=overwrite_op.INSERT_OVERWRITE
                                       if opts.dynamic_overwrite or opts.partitions else
                                       overwrite_op.INSERT_OVERWRITE_TABLE)
        elif opts.partitions is not None:
            opts = dataclasses.replace(opts, operation=overwrite_op.INSERT_OVERWRITE)
        return StagedWriter(opts, f"{int(time.time() * 1000)}-{uuid.uuid4().hex[:12]}")


# --------------------------------------------------------------------------- read
class SlicePartition(InputPartition):
    """One file slice of the scan and the read context it is read with (None: nothing to read).

    Everything a task needs travels in the partition: Spark pickles the reader's `read` before it asks
    for `partitions()`, so what `partitions()` learns never reaches the tasks through the reader."""

    def __init__(self, index: int, file_slice: FileSlice | None, ctx: ReadContext | None) -> None:
        super().__init__(index)
        self.file_slice = file_slice
        self.ctx = ctx


class SliceReader(DataSourceReader):
    """Plans the scan on the driver (one partition per file slice) and reads one slice per task."""

    def __init__(self, opts: SourceOptions, schema: Any) -> None:
        self.opts = opts
        self.columns = tuple(f.name for f in schema.fields)
        self.out_schema = arrow_schema_for(schema)
        self.filters: list[tuple[str, str, Any]] = []

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        table_schema = self.opts.open().schema
        for f in filters:
            one = filter_tuple(f, table_schema)
            if one is None:
                yield f
            else:
                self.filters.append(one)

    def partitions(self) -> Sequence[InputPartition]:
        table = self.opts.open()
        scan = table.scan(columns=list(self.columns), filter=self.filters or None, as_of=self.opts.as_of,
                          merge=self.opts.merge)
        ctx = scan.plan.ctx
        return [SlicePartition(i, fs, ctx) for i, fs in enumerate(scan.plan.slices)] or [SlicePartition(0, None, None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        fs, ctx = getattr(partition, "file_slice", None), getattr(partition, "ctx", None)
        if fs is None or ctx is None:
            return
        yield from self.slice_batches(ctx, fs)

    def slice_batches(self, ctx: ReadContext, fs: FileSlice) -> Iterator[pa.RecordBatch]:
        """The merged, filtered rows of one slice, with Spark's Arrow types."""
        plan = plan_scan(ctx, [fs], columns=list(self.columns), filter=self.filters or None, engine=self.opts.merge)
        for batch in Scan(plan).batches():
            yield pa.Table.from_batches([batch]).cast(self.out_schema).to_batches()[0]


def filter_tuple(f: Filter, schema: pa.Schema) -> tuple[str, str, Any] | None:
    """The `(column, op, value)` tuple meaning exactly what Spark's filter means, or None (Spark keeps it)."""
    negated = isinstance(f, Not)
    inner = f.child if isinstance(f, Not) else f
    attribute = getattr(inner, "attribute", None)
    if not (isinstance(attribute, tuple) and len(attribute) == 1) or attribute[0] not in schema.names:
        return None
    col = attribute[0]
    typ = schema.field(col).type
    if isinstance(inner, In) and not negated:
        values = list(inner.value)
        return (col, "in", values) if values and all(_fits(typ, v) for v in values) else None
    op = _COMPARISONS.get(type(inner))
    if op is None or (negated and op != "="):
        return None
    value = getattr(inner, "value", None)
    if not _fits(typ, value) or (pa.types.is_boolean(typ) and op not in ("=",)):
        return None
    return (col, "!=" if negated else op, value)


def _fits(typ: pa.DataType, value: Any) -> bool:
    if value is None:
        return False
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return isinstance(value, str)
    if pa.types.is_boolean(typ):
        return isinstance(value, bool)
    if pa.types.is_integer(typ):
        return isinstance(value, int) and not isinstance(value, bool)
    return False  # floats (NaN), dates, timestamps, decimals, binary: Spark evaluates them


# --------------------------------------------------------------------------- write
@dataclass
class StagedFiles(WriterCommitMessage):
    """What one write task staged: file names inside the job's staging folder, and the rows."""

    names: list[str]
    rows: int


class StagedWriter(DataSourceArrowWriter):
    """Write tasks stage Arrow IPC files; the driver's commit writes them as one lsm_lab commit.

    The job keeps its staging folder alive with beats (services/staging.py): `writer()` on the driver,
    the tasks while rows come, the commit while the table write runs.  A new job first removes the
    staging folders of dead jobs (no beat for `lsm_lab.staging.max.age.s`), never a live one's."""

    def __init__(self, opts: SourceOptions, job: str) -> None:
        self.opts = opts
        self.job = job
        table = self._table(create=True)
        table.check_writable()
        self.root: TablePath = table.path
        staging.sweep(self.root, table.config.props, keep=(job,))  # what dead drivers left behind
        staging.beat(self.root, job)

    def _table(self, *, create: bool = False) -> Table:
        try:
            return self.opts.open()
        except TableNotFoundError:
            if not (create and self.opts.create.get("record_key")):
                raise
        kw = dict(self.opts.create)
        kw.setdefault("name", "t")
        return create_table(self.opts.path, storage_options=self.opts.storage_options, **kw)

    def _folder(self) -> TablePath:
        return staging.job_folder(self.root, self.job)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedFiles:
        from pyspark import TaskContext

        task = TaskContext.get()
        who = f"{task.partitionId()}-{task.attemptNumber()}" if task is not None else "0-0"
        sink = io.BytesIO()
        rows = 0
        writer_: pa.ipc.RecordBatchStreamWriter | None = None
        last_beat = time.monotonic()
        for batch in iterator:
            keep = [i for i, n in enumerate(batch.schema.names) if n not in META_COLUMNS]
            if len(keep) != batch.num_columns:  # SQL INSERT INTO t (cols) fills the meta columns with nulls
                batch = pa.RecordBatch.from_arrays([batch.column(i) for i in keep],
                                                   names=[batch.schema.names[i] for i in keep])
            if writer_ is None:
                writer_ = pa.ipc.new_stream(sink, batch.schema)
            writer_.write_batch(batch)
            rows += batch.num_rows
            if time.monotonic() - last_beat > staging.BEAT_INTERVAL:  # a long task keeps its job alive
                staging.beat(self.root, self.job)
                last_beat = time.monotonic()
        if writer_ is None or rows == 0:
            return StagedFiles([], 0)
        writer_.close()
        name = f"part-{who}-{uuid.uuid4().hex[:8]}.arrow"
        create_file(self._folder() / name, sink.getvalue(), mkdir=True)
        staging.beat(self.root, self.job)
        return StagedFiles([name], rows)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        try:
            names = [n for m in messages if isinstance(m, StagedFiles) for n in m.names]
            overwriting = overwrite_op.is_overwrite(self.opts.operation)

            def staged() -> Iterator[pa.Table]:  # one task's rows at a time: the write streams them
                for name in names:
                    try:
                        with open_read(self._folder() / name) as fh:
                            yield pa.ipc.open_stream(fh).read_all()
                    except FileNotFoundError:
                        raise InputError(
                            f"the rows a write task staged are gone ({name}): the staging folder was removed as "
                            f"a dead job's (no beat for {staging.MAX_AGE_PROPERTY} seconds); nothing was committed "
                            "— write again, with a larger limit for jobs whose tasks wait that long",
                            path=self._folder()) from None

            if names or overwriting:  # an overwrite with no rows still replaces (an empty table)
                table = self._table()
                with staging.Beating(self.root, self.job):
                    rows = staged() if names else []
                    if self.opts.partitions is not None:  # a static partition overwrite
                        table.insert_overwrite(rows, partitions=self.opts.partitions)
                    else:
                        getattr(table, self.opts.operation)(rows)  # one commit, bounded memory
        finally:
            self._drop_staging()

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._drop_staging()

    def _drop_staging(self) -> None:
        staging.remove(self.root, self.job)


__all__ = ["FORMAT", "LsmLabDataSource", "SliceReader", "SourceOptions", "StagedWriter", "filter_tuple", "register"]
