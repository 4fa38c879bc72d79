"""Streamed writes: any Arrow stream in, one commit out, in bounded memory.

    RecordBatchReader · __arrow_c_stream__ (polars, DuckDB, DataFusion, pandas-free) · iterator of batches
      │ chunks()        batches gathered into chunks of at most `buffer_rows` rows
      │                 (`buffer_rows=` of insert/upsert/bulk_insert/delete, else the table property
      │                 lsm_lab.write.buffer.rows, else 250,000)
      │ per chunk       write.prepare: the checks, schema, keys and partition paths of an in-memory batch
      │                 route: bucket tables → the bucket's file group; key lookup → the existing file
      │                 group that holds the key, else one of 64 hash bins of new keys (per partition)
      │                 spill: the chunk's share of each destination → one local Arrow IPC file
      ▼ (the whole stream read, inside the write transaction)
    per destination, once    its spilled rows, in input order, de-duplicated as one batch would be
      │  file group          → write.write_file_group (as an in-memory write does)
      │  bucket MERGE_ON_READ group with more rows than the buffer
      │                      → key ranges of about `buffer_rows` rows each: the first a base file
      │                        (a new group) or a log, every other one a log of the same instant
      │  new keys            → bins gathered up to the buffer, then write.tag (small files first,
      │                        then new file groups of at most max records each)
      ▼
    one completed instant (services/commit.run_write), or nothing: the files are marked before
    they are written, and a failed or killed write is rolled back like any other.

A key repeated across chunks is written once, exactly as if the whole stream had been one
in-memory batch: the row with the greatest ordering value, ties (and commit-time ordering)
going to the later row of the stream; a delete stream deletes each key once.  This holds because
every destination's rows are de-duplicated together, after the whole stream has been read: a
key always goes to the same destination (its bucket; the existing group that holds it; the hash
bin of a new key).  So the write report (`describe_write`) counts the same inserts, updates and
repeated keys as for one batch.

What one write holds in memory (the limit of what it buffers):
- reading: one chunk of at most `buffer_rows` rows, its prepared copy and its shares;
- writing: one destination at a time: a key range or a bin of new keys (about `buffer_rows`
  rows); but a file group that must be rewritten whole (COPY_ON_WRITE; bucket tables with v1
  logs or CDC logs), or an existing key-lookup file group's share, is held whole — for
  COPY_ON_WRITE that is the file group after the write, as for an in-memory write;
- the keys of the existing file groups of the partitions written (key-lookup tables), as an
  in-memory write reads them.
A Parquet file read as a stream with `pyarrow.parquet.ParquetFile(path).iter_batches()` should be opened
with `pre_buffer=False`: the default read cache keeps every row group read until the file is closed
(found by `lsm-lab bench write-stream`: the reader's memory grew with the file, not the chunk).
The spill lives in a temporary folder of the local disk (`spill_dir`, default the system's
temporary folder; about the input's size, uncompressed), removed when the write ends; the folders
of writers killed before they could remove theirs are swept by the next streamed write
(`filegroup/spill.py`).

Simplified compared with Apache Hudi: Hudi's writers take a Spark/Flink dataset, never a
local stream; they shuffle records to file groups, and `HoodieAppendHandle` rolls a log file over to its next
version at `hoodie.logfile.max.size` (`HoodieStorageConfig`, 1 GB) while writing.  lsm_lab spills to local files instead of a shuffle,
and rolls a bucket group's log by key range (so that the logs of one instant never hold the
same key twice) rather than by size; only the first bin of new keys fills small file groups.

Taught in: no chapter (a streamed write gives the same table as an in-memory one; README "Streaming writes")
"""

from __future__ import annotations

import collections.abc
import functools
import itertools
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.errors import InputError
from lsm_lab.filegroup import cdclog, index
from lsm_lab.filegroup import write as writer
from lsm_lab.filegroup.fsview import DataFile, FileGroup, FileSlice
from lsm_lab.filegroup.read import ReadContext
from lsm_lab.filegroup.spill import Spill, spill_prefix, sweep_spill_folders
from lsm_lab.format import naming
from lsm_lab.merge import records
from lsm_lab.merge.records import PARTITION_PATH, RECORD_KEY
from lsm_lab.storage import TablePath
from lsm_lab.timeline.config import TableConfig
from lsm_lab.timeline.metadata import WriteStat

DEFAULT_BUFFER_ROWS = 250_000  # trips rows: ~0.8 GB peak for a 10M-row stream, 1M rows per chunk ~1.4 GB (bench)
BUFFER_PROPERTY = "lsm_lab.write.buffer.rows"
NEW_KEY_BINS = 64  # hash bins of new keys per partition (key-lookup tables)

Dest = tuple[str, str, str]  # ("group", partition, file id) or ("new", partition, bin)
Mark = Callable[[str, str, str], None]  # (partition, file name, IO type): a marker before a data file


def buffer_rows_of(props: Mapping[str, str], given: int | None) -> int:
    """The rows one streamed write gathers per chunk: `given`, else the table property, else the default."""
    raw: Any = given if given is not None else props.get(BUFFER_PROPERTY, DEFAULT_BUFFER_ROWS)
    what = "buffer_rows" if given is not None else f"table property {BUFFER_PROPERTY}"
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be a positive integer (rows per chunk), got {raw!r}") from None
    if isinstance(raw, bool) or value < 1:
        raise InputError(f"{what} must be a positive integer (rows per chunk), got {raw!r}")
    return value


# --------------------------------------------------------------------------- what is a stream
def _is_pandas(data: Any) -> bool:
    return type(data).__module__.startswith("pandas")


def is_stream(data: Any) -> bool:
    """Whether `data` is read as a stream: a RecordBatchReader, anything with `__arrow_c_stream__` (a polars
    DataFrame, a DuckDB relation, a DataFusion DataFrame), a polars LazyFrame, or an iterator (or a list) of
    RecordBatches / Tables.  A pyarrow Table or RecordBatch, a pandas DataFrame and a list of dicts are
    in-memory batches (`write.prepare`)."""
    if isinstance(data, (pa.Table, pa.RecordBatch, str, bytes, dict)) or _is_pandas(data):
        return False
    if isinstance(data, pa.RecordBatchReader) or hasattr(data, "__arrow_c_stream__"):
        return True
    if hasattr(data, "collect_batches") or hasattr(data, "fetch_record_batch"):  # polars LazyFrame, old DuckDB
        return True
    if isinstance(data, (list, tuple)):
        return bool(data) and all(isinstance(x, (pa.RecordBatch, pa.Table)) for x in data)
    return isinstance(data, collections.abc.Iterator)


def _batches(data: Any, what: str) -> Iterator[pa.RecordBatch | pa.Table]:
    reader = data if isinstance(data, pa.RecordBatchReader) else None
    if reader is None and hasattr(data, "__arrow_c_stream__") and not isinstance(data, (pa.Table, pa.RecordBatch)):
        try:
            reader = pa.RecordBatchReader.from_stream(data)
        except (TypeError, ValueError, pa.ArrowException) as exc:
            raise InputError(f"{what}: {type(data).__name__} gave no Arrow stream: {str(exc)[:200]}") from None
    if reader is not None:
        empty = True
        for b in reader:
            empty = False
            yield b
        if empty:  # a stream of no batches still has a schema
            yield reader.schema.empty_table()
        return
    if hasattr(data, "collect_batches"):  # polars LazyFrame: its result frame by frame
        for frame in data.collect_batches():
            yield from _batches(frame, what)
        return
    if hasattr(data, "fetch_record_batch"):  # a DuckDB relation without the stream protocol
        yield from data.fetch_record_batch()
        return
    for i, item in enumerate(data):
        if isinstance(item, (pa.RecordBatch, pa.Table)):
            yield item
        elif _is_pandas(item):
            yield records.to_arrow(item, what=what)
        elif hasattr(item, "__arrow_c_stream__"):
            yield from _batches(item, what)
        else:
            raise InputError(f"{what}: item {i} of the stream is a {type(item).__name__}; "
                             "expected pyarrow RecordBatches or Tables, pandas or polars DataFrames")


def chunks(data: Any, buffer_rows: int, *, what: str = "data") -> Iterator[pa.Table]:
    """The stream as tables of at most `buffer_rows` rows (a change of schema starts a new chunk).

    A stream of no rows gives one empty table of its schema (if it has one)."""
    pending: list[pa.Table] = []
    held = 0
    schema: pa.Schema | None = None
    given = False
    for item in _batches(data, what):
        table = pa.Table.from_batches([item]) if isinstance(item, pa.RecordBatch) else item
        if schema is None:
            schema = table.schema
        if table.num_rows == 0:  # nothing to write (its schema does not start a chunk)
            continue
        if pending and not table.schema.equals(pending[0].schema):
            yield pa.concat_tables(pending)
            given, pending, held = True, [], 0
        while table.num_rows:
            take = min(buffer_rows - held, table.num_rows)
            pending.append(table.slice(0, take))
            held += take
            table = table.slice(take)
            if held >= buffer_rows:
                yield pa.concat_tables(pending)
                given, pending, held = True, [], 0
    if pending:
        yield pa.concat_tables(pending)
    elif not given and schema is not None:
        yield schema.empty_table()


# --------------------------------------------------------------------------- the write
class StreamWrite:
    """One streamed write inside a write transaction: `run(chunks)` reads, routes, spills, then writes.

    `schema` and `input_rows` are the table schema after the write and the rows handed in (for the
    commit); `groups_of(partitions)` lists the snapshot's file groups there; `ctx_of(schema)` the
    read context of the snapshot; `mark` puts down a marker before each data file."""

    def __init__(self, *, base_path: TablePath, config: TableConfig, schema: pa.Schema | None, op: str,
                 instant: str, groups_of: Callable[[Sequence[str]], Iterable[FileGroup]],
                 ctx_of: Callable[[pa.Schema], ReadContext], mark: Mark | None, buffer_rows: int,
                 spill_dir: str | None = None, on_rows: Callable[[int], None] | None = None) -> None:
        self.base_path, self.config, self.op, self.instant = base_path, config, op, instant
        self.schema = schema
        self.input_rows = 0
        self.groups_of, self.ctx_of, self.mark = groups_of, ctx_of, mark
        self.buffer_rows, self.spill_dir, self.on_rows = buffer_rows, spill_dir, on_rows
        self._groups: dict[str, list[FileGroup]] = {}
        self._latest: dict[Dest, FileSlice | None] = {}
        self._stored: dict[Dest, pa.Array | None] = {}
        self._keys_cache: dict[tuple[str, str], pa.Array] = {}
        self._task = 0

    @property
    def batch_schema(self) -> pa.Schema:
        return self.schema if self.schema is not None else pa.schema([])

    def run(self, stream: Iterable[pa.Table]) -> list[WriteStat]:
        sweep_spill_folders(self.spill_dir)  # the spill folders of writers killed before they could remove them
        with tempfile.TemporaryDirectory(prefix=spill_prefix(), dir=self.spill_dir) as tmp:
            spill: Spill[Dest] = Spill(Path(tmp))
            for chunk in stream:
                self._route(chunk, spill)
                if self.on_rows is not None:
                    self.on_rows(chunk.num_rows)
            return self._write_all(spill)

    # ------------------------------------------------------------------ per chunk
    def _route(self, chunk: pa.Table, spill: Spill[Dest]) -> None:
        config = self.config
        batch = writer.prepare(config, self.schema, chunk, self.op)  # the same checks as an in-memory batch
        self.input_rows += batch.input_rows
        if len(batch.schema):
            self.schema = batch.schema
        rows = batch.rows
        if rows.num_rows == 0:
            return
        parts = sorted(pc.unique(rows.column(PARTITION_PATH)).to_pylist())
        for p in parts:
            records.check_partition_path(p)
        missing = [p for p in parts if p not in self._groups]
        if missing:
            for p in missing:
                self._groups[p] = []
            for g in self.groups_of(missing):
                self._groups.setdefault(g.partition, []).append(g)
        by_partition = {p: self._groups[p] for p in parts}
        ctx = self.ctx_of(self.batch_schema)
        if config.bucket_index:
            tagged = writer.tag(config, rows, by_partition, ctx, op=self.op)
            # each group's rows gathered on the write threads (`write.GroupRows`); a chunk is spilled whole
            shares = writer.run_in_threads([functools.partial(self._run_of, share) for _, _, share, _, _ in tagged])
            for (p, fid, _, latest, _), share in zip(tagged, shares):
                self._spill_group(spill, (("group", p, fid)), share, latest, None)
            return
        hits, fresh = writer.split_existing(rows, by_partition, ctx, self._keys_cache)
        for p, fid, share, latest, stored in hits:
            self._spill_group(spill, ("group", p, fid), share, latest, stored)
        if self.op == "delete" or fresh.num_rows == 0:  # a delete of a key no group holds deletes nothing
            return
        self._spill_new_keys(spill, fresh)

    def _run_of(self, share: pa.Table | writer.GroupRows) -> pa.Table:
        """A bucket group's rows of one chunk as a spilled run: sorted by key (stable), so that key ranges can be
        cut at the end (an lsm_tree group's come sorted from `tag`)."""
        rows = writer.rows_table(share)
        return rows if self.config.is_lsm else records.sort_by_key(rows)

    def _spill_group(self, spill: Spill[Dest], dest: Dest, share: pa.Table, latest: FileSlice | None,
                     stored: pa.Array | None) -> None:
        self._latest[dest] = latest
        self._stored[dest] = stored
        spill.add(dest, share)

    def _spill_new_keys(self, spill: Spill[Dest], fresh: pa.Table) -> None:
        """New keys into hash bins per partition: one grouping sort, one take, then slices."""
        parts = records.one_array(fresh.column(PARTITION_PATH)).dictionary_encode()
        names = parts.dictionary.to_pylist()
        bins = index.bucket_ids_of(False, [], fresh.column(RECORD_KEY), NEW_KEY_BINS).astype(np.int64)
        group = parts.indices.to_numpy(zero_copy_only=False).astype(np.int64) * NEW_KEY_BINS + bins
        order = np.argsort(group, kind="stable")
        counts = np.bincount(group)
        ends = np.cumsum(counts)
        taken = fresh.take(pa.array(order))
        for g in np.flatnonzero(counts).tolist():
            start = int(ends[g] - counts[g])
            spill.add(("new", names[g // NEW_KEY_BINS], f"{g % NEW_KEY_BINS:02d}"), taken.slice(start, int(counts[g])))

    # ------------------------------------------------------------------ at the end
    def _target(self) -> pa.Schema | None:
        """The schema every spilled run is conformed to (None: deletes, which carry only some columns)."""
        if self.op == "delete" or self.schema is None:
            return None
        return pa.schema([*list(self.schema), pa.field(RECORD_KEY, pa.string()), pa.field(PARTITION_PATH, pa.string())])

    def _together(self, runs: Sequence[pa.Table]) -> pa.Table:
        """Runs (in input order) as one table of the write's final schema."""
        target = self._target()
        if target is None:
            return pa.concat_tables(runs, promote_options="default")
        return pa.concat_tables([records.conform(r, target) for r in runs])

    def _as_one_batch(self, rows: pa.Table) -> pa.Table:
        """A destination's rows de-duplicated as `write.prepare` de-duplicates an in-memory batch (bucket-placed
        lsm_tree groups are de-duplicated by `write.write_file_group`, as there)."""
        config = self.config
        if config.is_lsm and config.bucket_index:
            return rows
        ordering = config.ordering_field if config.merge_mode == "EVENT_TIME_ORDERING" else None
        return records.dedupe(rows, [PARTITION_PATH, RECORD_KEY], ordering if ordering in rows.column_names else None,
                              deletes=self.op == "delete", keep_order=not config.is_lsm)

    def _write_all(self, spill: Spill[Dest]) -> list[WriteStat]:
        ctx = self.ctx_of(self.batch_schema)
        partitions = sorted({d[1] for d in spill.files})
        writer.write_partition_metadata(self.base_path, partitions, self.instant)
        stats: list[WriteStat] = []
        groups = sorted(d for d in spill.files if d[0] == "group")
        for dest in groups:
            stats.extend(self._write_group(ctx, spill, dest))
        for p in partitions:
            stats.extend(self._write_new_keys(ctx, spill, p, {d[2] for d in groups if d[1] == p}))
        return stats

    def _write_unit(self, ctx: ReadContext, partition: str, file_id: str, rows: pa.Table, latest: FileSlice | None,
                    stored: pa.Array | None) -> list[WriteStat]:
        return self._unit(ctx, partition, file_id, rows, latest, stored)()

    def _unit(self, ctx: ReadContext, partition: str, file_id: str, rows: pa.Table, latest: FileSlice | None,
              stored: pa.Array | None) -> Callable[[], list[WriteStat]]:
        """Put down the markers of one file group's files (its task number and write token taken now, on this
        thread) and return the call that writes them."""
        task = self._task
        self._task += 1
        token = naming.write_token(task, 0, 0)
        if self.mark is not None:  # the markers before the data files: a crash leaves nothing unmarked
            for name, io_type in [*writer.planned_files(self.config, self.base_path, partition, file_id, latest,
                                                        self.instant, self.op, token),
                                  *cdclog.planned(self.config, file_id, token, self.instant)]:
                self.mark(partition, name, io_type)
        return functools.partial(writer.write_file_group, base_path=self.base_path, config=self.config, ctx=ctx,
                                 partition=partition, file_id=file_id, rows=rows, latest=latest, existing_keys=stored,
                                 instant=self.instant, op=self.op, task=task, token=token)

    def _by_range(self) -> bool:
        """Whether a bucket group's share larger than the buffer is written as several key ranges."""
        c = self.config
        return c.bucket_index and c.is_mor and c.log_format_version == 2 and not cdclog.writes_cdc(c)

    def _write_group(self, ctx: ReadContext, spill: Spill[Dest], dest: Dest) -> list[WriteStat]:
        _, partition, file_id = dest
        latest, stored = self._latest[dest], self._stored[dest]
        if not (self._by_range() and spill.rows[dest] > self.buffer_rows):
            rows = self._as_one_batch(self._together(spill.runs(dest)))
            return self._write_unit(ctx, partition, file_id, rows, latest, stored)
        out: list[WriteStat] = []
        for piece in self._key_ranges(spill.runs(dest)):
            rows = self._as_one_batch(piece)
            if rows.num_rows == 0:
                continue
            written = self._write_unit(ctx, partition, file_id, rows, latest, stored)
            out.extend(written)
            if latest is None and written:  # a new group: its base is this range; the next ranges are logs on it
                latest = self._new_slice(partition, file_id, written[0])
                stored = pa.array([], pa.string())  # every later range holds other keys: all inserts
        return out

    def _new_slice(self, partition: str, file_id: str, stat: WriteStat) -> FileSlice:
        name = stat.path.rsplit("/", 1)[-1]
        parsed = naming.parse(name)
        if parsed is None:  # pragma: no cover - write_file_group names its files
            raise InputError(f"unexpected file name {name!r}")
        folder = self.base_path / partition if partition else self.base_path
        base = DataFile(partition, folder / name, parsed, stat.fileSizeInBytes, self.instant)
        return FileSlice(partition, file_id, self.instant, base, ())

    def _key_ranges(self, runs: Sequence[pa.Table]) -> Iterator[pa.Table]:
        """A group's runs (each sorted by key) cut into key ranges of about `buffer_rows` rows (a sample of every
        run's keys gives the bounds; a key is never split between two ranges), each range in input order."""
        total = sum(r.num_rows for r in runs)
        stride = max(1, self.buffer_rows // 64)
        sample = pa.chunked_array([r.column(RECORD_KEY).take(pa.array(np.arange(0, r.num_rows, stride)))
                                   for r in runs], pa.string()).combine_chunks()
        ordered = sample.take(pa.array(records.key_sort_indices(sample)))
        per_range = max(1, self.buffer_rows // stride)
        bounds = sorted(set(ordered.take(pa.array(np.arange(per_range, len(ordered), per_range))).to_pylist()))
        if not bounds or total <= self.buffer_rows:
            yield self._together(runs)
            return
        edges: list[str | None] = [None, *bounds, None]
        for lo, hi in itertools.pairwise(edges):
            parts = []
            for r in runs:
                keys = r.column(RECORD_KEY)
                mask = None
                if lo is not None:
                    mask = pc.greater_equal(keys, pa.scalar(lo, pa.string()))
                if hi is not None:
                    below = pc.less(keys, pa.scalar(hi, pa.string()))
                    mask = below if mask is None else pc.and_(mask, below)
                parts.append(r.filter(mask) if mask is not None else r)
            yield self._together(parts)

    def _write_new_keys(self, ctx: ReadContext, spill: Spill[Dest], partition: str, written: set[str]) -> list[WriteStat]:
        """A partition's new keys: bins gathered up to the buffer, each batch tagged (`write.tag`) and written.

        Only the first batch fills small file groups (those this write does not already rewrite)."""
        bins = sorted(d for d in spill.files if d[0] == "new" and d[1] == partition)
        batches: list[list[Dest]] = []
        held = 0
        for b in bins:
            if not batches or held >= self.buffer_rows:
                batches.append([])
                held = 0
            batches[-1].append(b)
            held += spill.rows[b]
        out: list[WriteStat] = []
        small = [g for g in self._groups.get(partition, []) if g.file_id not in written]
        for i, batch in enumerate(batches):
            rows = self._as_one_batch(self._together([r for b in batch for r in spill.runs(b)]))
            groups = {partition: small} if i == 0 and small else {}
            # the file groups of one batch (already in memory) are written on the writer's threads, as in-memory
            # writes are: no more memory, less time
            calls = [self._unit(ctx, p, fid, share, latest, stored) for p, fid, share, latest, stored
                     in writer.tag(self.config, rows, groups, ctx, op=self.op, keys_cache=self._keys_cache)]
            for stats in writer.run_in_threads(calls):
                out.extend(stats)
        return out


__all__ = ["BUFFER_PROPERTY", "DEFAULT_BUFFER_ROWS", "StreamWrite", "buffer_rows_of", "chunks", "is_stream"]
