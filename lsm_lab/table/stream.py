"""`Scan`: a table read as a stream of Arrow record batches, handed to any engine.

    Table.scan(columns, filter, as_of, batch_size)
        │ plan once (scan.plan_scan): partitions, keys, statistics pruned; columns fixed
        ▼
    Scan ── to_reader() ─► RecordBatchReader ─► pl.DataFrame(scan), duckdb.from_arrow(scan), …
      │       slice after slice, each merged on a thread, the next one already started:
      │         lsm_tree, every file marked sorted ─► iter_sources ─► sorted k-way merge ─► batches
      │                                                (O(batch) memory, whatever the slice's size)
      │         any other slice ─► read_slice in memory, one at a time ─► batches
      │       filter applied to every merged batch, then the asked-for columns
      └── to_table() ─► the same slices merged in memory, READ_THREADS at once (what `Table.read` returns)

`Scan` implements the Arrow PyCapsule stream protocol (`__arrow_c_stream__`),
so every engine that takes an Arrow stream takes the scan itself: polars
(`pl.DataFrame(scan)`), DuckDB (`duckdb.from_arrow(scan)`, or a Python
variable named in SQL), DataFusion (`ctx.from_arrow(scan)`), pyarrow
(`pa.table(scan)`).  Each consumption reads the files again.

Rows: `to_table()` and `to_reader()` return the same rows (the same set; in a
streamed slice, key order, as the in-memory merge gives it on an `lsm_tree`
table).  A file whose footer says sorted but whose keys are not is caught by
the streaming merge's checks: before the slice's first batch, the slice is
merged in memory instead (never a wrong row); after it, the read stops with a
`CorruptFileError` naming the file group (`to_table()`, which merges in memory,
falls back quietly as `read` always did).

Simplified compared with Apache Hudi / hudi-rs: Hudi's Spark reader streams a
merge through its record iterators; hudi-rs's Python `read_snapshot` returns
whole slices.  Here only sorted (`lsm_tree`) slices stream inside the slice;
other slices (the default layout's hash merge, v1 logs, key-pruned reads) are
merged whole, one at a time (at most one whole slice in memory).

**Two slices in flight.**  A streamed slice's merge is a pipeline (a reader
thread decodes, the merge cuts rounds, a resolver sorts them), but alone it
leaves a core idle: at its start every file's first batch is decoded before the
first round, at its end the last rounds are sorted with nothing left to read.
So each slice is merged on a thread of its own (`_Ahead`) and the next slice
starts while the current one is handed out, at most `PARTS_AHEAD` batches
ahead; batches still come out slice after slice, each slice in key order.  To
keep two slices within the memory one took, the files of a slice share
`SOURCE_BATCHES` batches of input (`source_rows`: a slice of eleven files reads
each 17,873 rows at a time, a base with one or two logs 65,536): memory is
O(batch), not O(files x batch).  On `lsm-lab bench scan`'s 10M-row table (12
slices of 11 files) this took the scan's throughput from 0.87x `read()`'s to
above it, at about 0.2x its peak RSS (README, *Measured*, "Streaming a read").

Taught in: no chapter (README, "Reading an lsm_lab table from other engines")
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lsm_lab.errors import CorruptFileError, InputError, LsmLabError, UnsupportedFeatureError
from lsm_lab.filegroup import v1read
from lsm_lab.filegroup.fsview import FileSlice
from lsm_lab.filegroup.read import iter_sources, needed_columns, read_slice
from lsm_lab.merge import SORTED_ENGINES, fell_back, merge_sources
from lsm_lab.merge.records import COMMIT_TIME
from lsm_lab.progress import progress as show_progress
from lsm_lab.table.scan import ScanPlan, read_plan

if TYPE_CHECKING:  # optional engines, imported where they are used
    import duckdb
    import pandas as pd
    import polars as pl

#: rows per batch a scan yields unless told otherwise
BATCH_ROWS = 65_536
#: slices merged ahead, each on a thread, while the current one is handed out
SLICES_AHEAD = 1
#: merged parts (batches, or whole in-memory slices) a slice merged ahead may hold before it waits
PARTS_AHEAD = 2
#: rows all the files of a streamed slice decode per round, in batches: each file reads
#: `SOURCE_BATCHES x batch_size / files` rows at a time (at most `batch_size`, at least `MIN_SOURCE_ROWS`),
#: so a slice of many logs holds about SOURCE_BATCHES batches of input, not one per file
SOURCE_BATCHES = 3
MIN_SOURCE_ROWS = 4_096


def check_batch_size(batch_size: Any) -> int:
    """`batch_size` as given, or `InputError` unless it is a positive integer."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be a positive integer, got {batch_size!r}")
    return batch_size


class ArrowStream:
    """What every streamed read hands to engines, given `schema`, `batches()` and `to_table()`.

    Subclasses: `Scan` (snapshot, read-optimized, incremental reads) and `table.cdc.ChangeScan`."""

    @property
    def schema(self) -> pa.Schema:
        """The schema of every batch."""
        raise NotImplementedError

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The rows, batch by batch, read as they are asked for."""
        raise NotImplementedError

    def to_table(self) -> pa.Table:
        """Every row in one `pyarrow.Table`."""
        raise NotImplementedError

    def to_pandas(self, **kwargs: Any) -> pd.DataFrame:
        """`to_table().to_pandas(**kwargs)`."""
        return self.to_table().to_pandas(**kwargs)

    def to_polars(self) -> pl.DataFrame:
        """A polars DataFrame, filled batch by batch from the stream."""
        import polars as pl  # optional: only when a polars frame is asked for
        return pl.DataFrame(self)

    def to_duckdb(self, con: duckdb.DuckDBPyConnection | None = None, name: str = "lsm_lab_scan"
                  ) -> duckdb.DuckDBPyRelation:
        """A DuckDB relation over the stream, registered as view `name` on `con` (default: a new
        in-memory connection).  A stream is consumed once: query the relation once, or
        `create table t as select * from name` to keep the rows."""
        import duckdb  # optional: only when a DuckDB relation is asked for
        con = duckdb.connect() if con is None else con
        con.register(name, self.to_reader())
        return con.table(name)

    def to_reader(self) -> pa.RecordBatchReader:
        """A `pyarrow.RecordBatchReader` that reads the rows as it is read."""
        return pa.RecordBatchReader.from_batches(self.schema, self.batches())

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The Arrow PyCapsule stream protocol: engines read it as a stream of batches."""
        return self.to_reader().__arrow_c_stream__(requested_schema)


class Scan(ArrowStream):
    """A planned read of a table: consume it as a stream (`to_reader`, `__arrow_c_stream__`) or whole.

    Made by `Table.scan`; the plan (slices, columns, filter) is fixed when it is made, the files are
    read each time it is consumed."""

    def __init__(self, plan: ScanPlan, *, batch_size: int = BATCH_ROWS, empty_columns: bool = False) -> None:
        self.plan = plan
        self.batch_size = check_batch_size(batch_size)
        self._empty_columns = empty_columns  # columns=[]: rows of no column (the key read to count them)

    def __repr__(self) -> str:
        return (f"Scan({len(self.plan.slices)} file slices, {self.plan.skipped} skipped by statistics, "
                f"columns={list(self.schema.names)}, batch_size={self.batch_size})")

    @property
    def schema(self) -> pa.Schema:
        """The schema of every batch."""
        return pa.schema([]) if self._empty_columns else self.plan.schema

    def to_table(self, *, progress: bool = False) -> pa.Table:
        """Every row in one `pyarrow.Table` (slices merged in memory, several at once): `Table.read`.

        `progress`: a bar by slice (shown after a second on a terminal or in Jupyter)."""
        shown = (lambda s: show_progress(s, desc="read", unit="slice", min_items=1)) if progress else None
        table = read_plan(self.plan, progress=shown)
        return table.select([]) if self._empty_columns else table

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The scan's batches (at most `batch_size` rows, never empty), slice after slice."""
        plan, schema = self.plan, self.schema
        full = plan.schema
        for part in _slice_parts(plan, self.batch_size):
            part = plan.finish(part)
            if not part.num_rows:
                continue
            part = part.cast(full)
            if self._empty_columns:
                part = part.select([])
            for batch in part.to_batches(max_chunksize=self.batch_size):
                if batch.num_rows:
                    yield batch if batch.schema.equals(schema) else pa.RecordBatch.from_arrays(
                        batch.columns, schema=schema)


def streams(plan: ScanPlan, fs: FileSlice) -> bool:
    """Whether a slice may be merged as a stream: an `lsm_tree` table, a sorted engine, no key pruning,
    v2 Parquet logs only (whether every file is marked sorted is known once their footers are read)."""
    engine = plan.engine or plan.ctx.default_engine()
    return (plan.ctx.config.is_lsm and engine in SORTED_ENGINES and plan.pruned is None
            and all(f.name.log_format != 1 and f.name.ext == "parquet" for f in fs.log_files)
            and (fs.base_file is None or fs.base_file.name.ext == "parquet"))


def _in_memory(plan: ScanPlan, fs: FileSlice) -> pa.Table:
    if plan.pruned is not None:
        return plan.pruned.read_slice(fs)
    cols = None if plan.read_cols is None else list(plan.read_cols)
    return read_slice(plan.ctx, fs, columns=cols, engine=plan.engine, commit_time=False)


class _Ahead:
    """One slice's merged parts, produced on a thread, at most `depth` parts ahead of the reader.

    Iterate it to get the parts (an error in the producer is raised here, where the reader is);
    `close()` stops the producer at its next part and waits for it (its merge's threads shut down)."""

    def __init__(self, parts: Callable[[], Iterator[pa.Table]], depth: int) -> None:
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(parts,), name="lsm_lab-scan", daemon=True)
        self._thread.start()

    def _run(self, parts: Callable[[], Iterator[pa.Table]]) -> None:
        outcome: tuple[str, Any] = ("error", LsmLabError("a slice's merge thread stopped without an answer"))
        try:
            it = parts()
            try:
                for part in it:
                    if not self._put(("part", part)):
                        return  # closed by the reader
            finally:
                close = getattr(it, "close", None)
                if close is not None:
                    close()  # the merge's own threads stop
            outcome = ("end", None)
        except Exception as exc:  # noqa: BLE001 - handed to the reader and raised there, where it is handled
            outcome = ("error", exc)
        finally:
            self._put(outcome)

    def _put(self, item: tuple[str, Any]) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Iterator[pa.Table]:
        while True:
            kind, value = self._queue.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def _slice_parts(plan: ScanPlan, batch_size: int) -> Iterator[pa.Table]:
    """Merged rows of every slice in plan order: streamed slices batch by batch, the others whole.

    Each slice is merged on a thread of its own (`_Ahead`), and `SLICES_AHEAD` more slices are already
    being merged while the current one is handed out, each at most `PARTS_AHEAD` parts ahead: the next
    slice's opening (every file's first batch decoded before its first round) overlaps the current
    slice's last rounds, where a lone slice would leave a core idle.  A slice merged in memory (the
    default layout, v1 logs, key-pruned reads) is started only when no other such slice is held, so a
    scan holds at most one whole slice at a time."""
    items = list(plan.slices)

    def parts_of(fs: FileSlice) -> Callable[[], Iterator[pa.Table]]:
        if streams(plan, fs):
            return lambda: _stream_slice(plan, fs, batch_size)
        return lambda: iter([_in_memory(plan, fs)])

    whole = [not streams(plan, fs) for fs in items]
    running: deque[tuple[int, _Ahead]] = deque()
    given = 0
    try:
        while given < len(items) or running:
            while given < len(items) and len(running) < 1 + SLICES_AHEAD:
                if whole[given] and any(whole[i] for i, _ in running):
                    break  # a slice merged in memory waits until no other one is held: one at a time
                running.append((given, _Ahead(parts_of(items[given]), PARTS_AHEAD)))
                given += 1
            yield from running[0][1]
            running.popleft()[1].close()
    finally:
        for _, ahead in running:
            ahead.close()


def source_rows(batch_size: int, files: int) -> int:
    """Rows each of a streamed slice's `files` decodes at a time: `SOURCE_BATCHES` batches shared by the
    files, at most `batch_size` each, at least `MIN_SOURCE_ROWS`."""
    return max(min(MIN_SOURCE_ROWS, batch_size), min(batch_size, SOURCE_BATCHES * batch_size // max(1, files)))


def _stream_slice(plan: ScanPlan, fs: FileSlice, batch_size: int) -> Iterator[pa.Table]:
    """One sorted slice merged as a stream (`iter_sources` + the sorted engine): O(batch) memory (`source_rows`)."""
    ctx = plan.ctx
    cols = None if plan.read_cols is None else list(plan.read_cols)
    needed = needed_columns(ctx, cols)
    if COMMIT_TIME not in (cols or ctx.full_schema.names):
        needed = [c for c in needed if c != COMMIT_TIME]  # no engine compares it (read_slice, commit_time=False)
    units = v1read.ordered_units(ctx.completion_of, ctx.read_time, fs, strict=ctx.strict, stats=ctx.stats)
    files = ([fs.base_file] if fs.base_file is not None else []) + [u.file for u in units]
    if not files:
        return
    where = f"file group {fs.partition}/{fs.file_id}" if fs.partition else f"file group {fs.file_id}"
    try:
        sources, all_sorted = iter_sources(ctx, files, needed, batch_size=source_rows(batch_size, len(files)))
    except UnsupportedFeatureError:
        yield _in_memory(plan, fs)
        return
    if not all_sorted:  # a footer does not promise key order: the slice is merged whole
        yield _in_memory(plan, fs)
        return
    engine = plan.engine or ctx.default_engine()
    given = 0
    try:
        for batch in merge_sources(sources, ctx.spec, engine=engine, batch_size=batch_size, read_ahead=True):
            given += 1
            yield pa.Table.from_batches([batch]).select(needed)
    except InputError as exc:  # a file marked sorted is not: never a wrong row
        if given:
            raise CorruptFileError(f"{where}: a file marked sorted is not sorted ({str(exc).splitlines()[0]}); "
                                   "rows were already handed out: read it with to_table() or read()",
                                   path=fs.base_file.path if fs.base_file else None) from None
        fell_back(engine, where, str(exc).splitlines()[0])
        yield _in_memory(plan, fs)


__all__ = ["BATCH_ROWS", "SLICES_AHEAD", "ArrowStream", "Scan", "check_batch_size", "streams"]
