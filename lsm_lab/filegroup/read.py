"""Reads: snapshot, time travel, read-optimized and incremental, one file slice at a time.

A snapshot read is the reader rules of the format page (section 6) applied per
file slice:

    read time T ──► file-system view as of T ──► latest slice of every file group
                                                      │
        base (L1) ─────────── source 0 ─┐             │  each file → one merge source,
        log 1 (L0, oldest) ── source 1 ─┼─ merge ──► rows of the slice
        log 2 ─────────────── source 2 ─┘   (default: `overlay`; or the engine asked for)

Every source is first *normalised* to one schema: the meta columns, the
requested user columns, the ordering field and a boolean `_lsm_delete` flag.
Columns a file lacks (added later by schema evolution) are nulls, and a column
stored in an older type is cast to the read's type (a promotion: int → long,
long → double, ... merge/evolution.py), so the files of one slice written under
different schemas merge in one schema; a delete log
becomes rows with `_lsm_delete = true`, its key and its decoded ordering value.

By default the slice, which is in memory anyway, is merged by the overlay
merge (merge/overlay.py): the logs are folded on their own and laid over the
base, so the per-key work is done on log rows only; rows come out in key order
when the base is sorted (as the `sorted` engine gives them), else base rows
first (as `hash` does). When the key is the text of one field, that field is
merged once, as the key, and copied back (`_merge_in_memory`).

An engine asked for by name (`read(merge=...)`) streams the sources instead: a
slice whose files are not all marked sorted (`lsm_lab.sorted=true` in the
footer; a v1 log block counts when its keys are strictly increasing) is merged
with the `hash` engine, which needs no order, and a sorted engine that finds an
out-of-order key falls back to `hash` as well: an unsorted file can cost speed,
never correctness.

Whole-table scans with filters and pruning are built on `read_slice` in
table/scan.py.

A slice whose logs all carry valid RECORD_POSITIONS is merged by row number
instead (filegroup/posmerge.py): under commit-time ordering by any read, under
event-time ordering by the default overlay (`posmerge.overlay_by_position`:
the positions stand in for the keys; no key search).

Simplified compared with Apache Hudi: no partial updates, no custom record mergers; partition pruning understands
filters on partition columns given as `(column, op, value)` tuples.

Taught in: notebooks/06_merge_semantics.ipynb
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lsm_lab import arrowlit
from lsm_lab.errors import CorruptFileError, InputError, UnsupportedFeatureError
from lsm_lab.filegroup import index, posmerge, v1read
from lsm_lab.filegroup.fsview import DataFile, FileSlice
from lsm_lab.filegroup.readstats import ReadStats
from lsm_lab.format import log_v2 as v2
from lsm_lab.format import naming, parquet_footer, parquet_read
from lsm_lab.merge import check_engine, choose_engine, default_engine, merge_to_table_safely, records
from lsm_lab.merge.overlay import merge_overlay
from lsm_lab.merge.records import COMMIT_TIME, DELETE_FLAG, FILE_NAME, META_COLUMNS, PARTITION_PATH, RECORD_KEY
from lsm_lab.merge.semantics import MergeMode, MergeSpec
from lsm_lab.storage import TablePath
from lsm_lab.timeline.config import TableConfig


@dataclass(frozen=True)
class ReadContext:
    """Everything a slice read needs, with no reference back to the Table (Spark tasks get one)."""

    base_path: TablePath
    config: TableConfig
    schema: pa.Schema  # user columns of the table
    completion_of: dict[str, str] = field(default_factory=dict)  # committed begin → completion time
    read_time: str | None = None
    strict: bool = False  # a corrupt v1 block raises instead of being skipped (table.v1read)
    positions: bool = True  # False: every slice merges by key, RECORD_POSITIONS ignored (`Table.read(positions=)`)
    # what the read skipped (corrupt v1 blocks), shared by the copies `dataclasses.replace` makes
    stats: ReadStats = field(default_factory=ReadStats, compare=False, hash=False)

    # cached: asked for per file and per slice (a ReadContext is frozen, its config read once per read)
    @functools.cached_property
    def full_schema(self) -> pa.Schema:
        user = [f for f in self.schema if f.name not in META_COLUMNS]
        return pa.schema(list(records.META_SCHEMA) + user)

    @functools.cached_property
    def spec(self) -> MergeSpec:
        mode = MergeMode(self.config.merge_mode) if self.config.merge_mode != "CUSTOM" else MergeMode.EVENT_TIME_ORDERING
        ordering = self.config.ordering_field if mode is MergeMode.EVENT_TIME_ORDERING else None
        if ordering is not None and ordering not in self.schema.names:
            ordering = None
            mode = MergeMode.COMMIT_TIME_ORDERING
        return MergeSpec(mode=mode, key=RECORD_KEY, ordering=ordering, delete=DELETE_FLAG)

    def default_engine(self) -> str:
        return default_engine(self.config.is_lsm)

    @functools.cached_property
    def own_files(self) -> bool:
        """A table lsm_lab created: its files' `_hoodie_file_name` is checked on read (`data_source`)."""
        return self.config.props.get("lsm_lab.created") == "true"


# --------------------------------------------------------------------------- normalising sources
# The public helpers below are the seam for readers that choose their own files
# (table/lookup.py's pruned reads): needed_columns → target_schema, then every
# file read with file_columns becomes a merge source through data_source or
# delete_source.
def needed_columns(ctx: ReadContext, columns: Sequence[str] | None) -> list[str]:
    """The columns to read for `columns` (None: all): plus the key, commit time and ordering field."""
    full = ctx.full_schema
    if columns is None:
        wanted = list(full.names)
    else:
        unknown = [c for c in columns if c not in full.names]
        if unknown:
            raise InputError(f"unknown column{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                             f"the table has {', '.join(full.names)}")
        wanted = list(columns)
    extra = [RECORD_KEY, COMMIT_TIME]
    if ctx.spec.ordering:
        extra.append(ctx.spec.ordering)
    return wanted + [c for c in extra if c not in wanted]


def target_schema(ctx: ReadContext, needed: Sequence[str]) -> pa.Schema:
    """The schema every merge source is conformed to: `needed` plus the delete flag."""
    full = ctx.full_schema
    return pa.schema([full.field(n) for n in needed] + [pa.field(DELETE_FLAG, pa.bool_(), False)])


def _with_keys(ctx: ReadContext, table: pa.Table, partition: str, wanted: Collection[str] | None = None) -> pa.Table:
    """Fill meta columns a file lacks (tables written without meta fields).

    Hudi tables with `hoodie.populate.meta.fields=false` still have the meta
    columns in their files, but all NULL: keys are rebuilt from the key fields.
    """
    n = table.num_rows
    no_meta = not ctx.config.populate_meta_fields
    makers: tuple[tuple[str, Callable[[], pa.Array]], ...] = (
        (RECORD_KEY, lambda: _keys_of(ctx, table)),
        (PARTITION_PATH, lambda: arrowlit.repeat_text(partition, n)))
    for name, make in makers:
        if wanted is not None and name not in wanted:
            continue  # not read by the caller: not built
        if name not in table.column_names:
            table = table.append_column(name, make())
        elif n and (no_meta or table.column(name).null_count == n):
            table = table.set_column(table.schema.get_field_index(name), name, make())
    return table


def _any_empty(col: pa.ChunkedArray) -> bool:
    """Whether a string column holds "" (two equal neighbouring offsets; no string is built)."""
    for chunk in col.chunks:
        if len(chunk):
            offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int32)[chunk.offset:chunk.offset + len(chunk) + 1]
            if bool((offsets[1:] == offsets[:-1]).any()):
                return True
    return False


def _keys_of(ctx: ReadContext, table: pa.Table) -> pa.Array | pa.ChunkedArray:
    """`records.record_keys` of a file's rows; with a simple key (`key_from_field`) the field's own
    column, chunks and all (no copy), once it is known to hold no null and no empty key."""
    fields = ctx.config.record_key
    if key_from_field(ctx) and fields[0] in table.column_names:
        col = table.column(fields[0])
        if pa.types.is_string(col.type) and not col.null_count and not _any_empty(col):
            return col
    return records.record_keys(table, fields)  # other keys, and the typed error of a null or empty one


def data_source(ctx: ReadContext, table: pa.Table, target: pa.Schema, partition: str,
                source: object | None = None) -> pa.Table:
    """Rows read from a base file or data log as a merge source (keys filled in, delete flag false).

    `source`: the file the rows came from, named by a SchemaError when a column does not cast.
    A dictionary-encoded column whose values have the target's type stays encoded
    (`dictionary_columns`); the merge decodes the rows it keeps."""
    if source is not None and table.num_rows and ctx.own_files:
        _check_provenance(table, partition, source)
    table = _with_keys(ctx, table, partition, target.names)
    table = table.append_column(DELETE_FLAG, arrowlit.bools(table.num_rows, False))
    encoded = {f.name for f in table.schema if pa.types.is_dictionary(f.type) and f.name in target.names
               and f.type.value_type == target.field(f.name).type}
    if not encoded:
        return records.conform(table, target, source=source)
    rest = records.conform(table.drop_columns(sorted(encoded)), pa.schema([f for f in target if f.name not in encoded]),
                           source=source)
    fields = [f.with_type(table.schema.field(f.name).type) if f.name in encoded else f for f in target]
    return pa.Table.from_arrays([table.column(f.name) if f.name in encoded else rest.column(f.name) for f in target],
                                schema=pa.schema(fields))


def _check_provenance(table: pa.Table, partition: str, source: object) -> None:
    """Rows of a file lsm_lab wrote name their own file group in `_hoodie_file_name` (a copy-on-write
    merge keeps an older slice's name, never another group's) and their partition in
    `_hoodie_partition_path`: rows that name another come from a file swapped or copied in from
    elsewhere.  The first and the last row are checked, where the read has the columns (a whole-file
    swap changes both); the committed sizes (fsview rule 7) catch most swaps before any read."""
    mine = naming.parse(getattr(source, "name", ""))
    for column in (FILE_NAME, PARTITION_PATH):
        if column not in table.column_names:
            continue
        for value in (table.column(column)[0].as_py(), table.column(column)[-1].as_py()):
            if column == PARTITION_PATH:
                wrong = isinstance(value, str) and value != partition
            else:
                theirs = naming.parse(value) if isinstance(value, str) else None
                wrong = mine is not None and theirs is not None and theirs.file_id != mine.file_id
            if wrong:
                raise CorruptFileError(f"its rows say they belong to {column}={value!r}: the file was swapped or "
                                       "copied from elsewhere (its rows cannot be trusted)", path=source)


def check_bucket(ctx: ReadContext, keys: Sequence[Any], partition: str, source: object) -> None:
    """In a bucket's file group, `keys` (a file's first and last, or its smallest and largest) must hash to
    that bucket: a delete log carries no file name, and one swapped in from another bucket is caught here."""
    mine = naming.parse(getattr(source, "name", ""))
    bucket = None if mine is None else index.bucket_of_file_id(mine.file_id)
    config = ctx.config
    if mine is None or bucket is None or bucket >= config.num_buckets or \
            mine.file_id != index.file_id_of_bucket(config.upstream_format, config.name, partition, bucket):
        return
    ends = arrowlit.text([k for k in keys if isinstance(k, str)])  # not pa.array: no pandas import (arrowlit)
    if not len(ends):
        return
    fields = index.key_values_from_keys(ends, config.record_key) if config.upstream_format else [ends]
    if fields is None:
        return
    got = index.bucket_ids_of(config.upstream_format, fields, ends, config.num_buckets)
    if any(int(b) != bucket for b in got):
        raise CorruptFileError(f"its keys belong to another bucket than {bucket}: the file was swapped or copied "
                               "from elsewhere (its rows cannot be trusted)", path=source)


def dictionary_columns(ctx: ReadContext, target: pa.Schema) -> list[str]:
    """String columns that may be read dictionary-encoded (`parquet_read.read_parquet` keeps those
    whose file stores them so: the file name, partition path, commit time, most categories).

    Never the key, a key field or the ordering field, which the merge compares."""
    skip = {RECORD_KEY, *ctx.config.record_key, ctx.spec.ordering}
    return [f.name for f in target if f.name not in skip and pa.types.is_string(f.type)]


def delete_source(ctx: ReadContext, deletes: pa.Table, target: pa.Schema, partition: str,
                  source: object | None = None) -> pa.Table:
    """Rows of a delete log as a merge source (key, decoded ordering value, delete flag true).

    `source`: the file the rows came from, named by a SchemaError when a column does not cast."""
    if "record_key" not in deletes.column_names and v2.UPSTREAM_KEY_COLUMN not in deletes.column_names:
        raise CorruptFileError(f"a delete log in partition {partition!r} has no record key column "
                               f"(columns: {', '.join(deletes.column_names)})")  # a damaged footer renamed it
    n = deletes.num_rows
    key = deletes.column(v2.delete_key_column(deletes.schema))
    if source is not None and n and ctx.own_files:
        if "partition_path" in deletes.column_names:
            _check_provenance(deletes.select(["partition_path"]).rename_columns([PARTITION_PATH]), partition, source)
        check_bucket(ctx, [key[0].as_py(), key[-1].as_py()], partition, source)
    cols: dict[str, Any] = {RECORD_KEY: records.cast_column(key, pa.string(), RECORD_KEY, source=source),
                            DELETE_FLAG: arrowlit.bools(n, True)}
    ordering = ctx.spec.ordering
    if ordering and ordering in target.names and ordering in deletes.column_names:  # upstream: the typed field
        cols[ordering] = records.cast_column(deletes.column(ordering), target.field(ordering).type, ordering,
                                             source=source)
    elif ordering and ordering in target.names and "ordering_val" in deletes.column_names:
        raw = deletes.column("ordering_val")
        otype = target.field(ordering).type
        if pa.types.is_binary(raw.type) or pa.types.is_large_binary(raw.type):
            cols[ordering] = v2.decode_ordering(raw, otype)
        else:
            cols[ordering] = records.cast_column(raw, otype, ordering, source=source)
    if PARTITION_PATH in target.names:
        pp = deletes.column("partition_path") if "partition_path" in deletes.column_names else None
        cols[PARTITION_PATH] = pp if pp is not None else arrowlit.repeat_text(partition, n)
    return records.conform(pa.table(cols), target, source=source)


def allowed_columns(ctx: ReadContext) -> set[str] | None:
    """Columns a data file may hold: the stored schema's (None when the table has no stored schema)."""
    return set(ctx.full_schema.names) | set(ctx.config.record_key) if len(ctx.schema) else None


_allowed = allowed_columns


def file_columns(needed: Sequence[str], ctx: ReadContext) -> list[str]:
    """The columns to read from a data file for `needed` (with the key fields)."""
    # key fields are needed to rebuild record keys of files written without meta columns
    return list(dict.fromkeys(list(needed) + list(ctx.config.record_key)))


def key_from_field(ctx: ReadContext) -> bool:
    """Whether `_hoodie_record_key` is the text of one string field (simple key generator).

    Then a whole-file read takes the key from that field (read anyway) instead of
    decoding the same strings twice; `_with_keys` rebuilds the column."""
    fields = ctx.config.record_key
    full = ctx.full_schema
    return (len(fields) == 1 and ctx.config.keygen_type in ("SIMPLE", "NON_PARTITION") and fields[0] in full.names
            and pa.types.is_string(full.field(fields[0]).type))


def _whole_file_columns(needed: Sequence[str], ctx: ReadContext) -> list[str]:
    cols = file_columns(needed, ctx)
    return [c for c in cols if c != RECORD_KEY] if key_from_field(ctx) else cols


def load_sources(ctx: ReadContext, fs: FileSlice, needed: Sequence[str], *, dictionary: bool = False,
                 footers: list[tuple[Any, dict[str, str]] | None] | None = None,
                 use_threads: bool = True) -> tuple[list[pa.Table], bool]:
    """The slice's files as normalised merge sources (base first), and whether all are sorted.

    Logs are merged in commit order: v2 log files and the blocks of v1 log files
    (all v1 logs of the slice together, so that rollback command blocks apply)
    are ordered by the completion time of the instant that wrote them
    (`v1read.ordered_units`). With `dictionary`, the base file's
    `dictionary_columns` stay dictionary-encoded (for `merge.overlay.merge_overlay`).
    `footers`: a list that receives, per log source, its file's path and decoded
    footer key-value map (None for a v1 block), read with the file (no second open).
    `use_threads=False`: each Parquet file is decoded on the calling thread (for
    callers that read several slices on threads of their own, `scan.snapshot`).
    """
    target = target_schema(ctx, needed)
    sources: list[pa.Table] = []
    all_sorted = True
    for f in fs.files:
        if f.name.ext in ("orc", "hfile", "lance"):
            raise UnsupportedFeatureError(f"{f.name.ext} data files are not supported (only Parquet)", path=f.path)
    if fs.base_file is not None:
        encoded = dictionary_columns(ctx, target) if dictionary else ()
        table = parquet_read.read_parquet(fs.base_file.path, _whole_file_columns(needed, ctx), allowed=_allowed(ctx),
                                        read_dictionary=encoded, use_threads=use_threads)
        sources.append(data_source(ctx, table, target, fs.partition, fs.base_file.path))
        all_sorted = (table.schema.metadata or {}).get(parquet_footer.KEY_SORTED.encode()) == b"true"
    for unit in v1read.ordered_units(ctx.completion_of, ctx.read_time, fs, strict=ctx.strict, stats=ctx.stats):
        f = unit.file
        if unit.is_v1:
            kind, table = v1read.block_table(unit)
            all_sorted = all_sorted and v1read.is_sorted(kind, table)
            sources.append(data_source(ctx, table, target, f.partition, f.path) if kind == "data"
                           else delete_source(ctx, table, target, f.partition, f.path))
            if footers is not None:
                footers.append(None)
            continue
        if f.name.is_delete:
            table = parquet_read.read_parquet(f.path, use_threads=use_threads)
            sources.append(delete_source(ctx, table, target, f.partition, f.path))
        else:
            table = parquet_read.read_parquet(f.path, _whole_file_columns(needed, ctx), allowed=_allowed(ctx),
                                            use_threads=use_threads)
            sources.append(data_source(ctx, table, target, f.partition, f.path))
        meta = table.schema.metadata or {}
        all_sorted = all_sorted and meta.get(parquet_footer.KEY_SORTED.encode()) == b"true"
        if footers is not None:
            footers.append((f.path, parquet_footer.kv_text(meta)))
    return sources, all_sorted


def read_slice(ctx: ReadContext, fs: FileSlice, *, columns: Sequence[str] | None = None,
               engine: str | None = None, positions: bool = True, commit_time: bool = True,
               use_threads: bool = True) -> pa.Table:
    """The merged rows of one file slice (requested columns plus key, commit time and ordering).

    `positions`: merge by the logs' RECORD_POSITIONS when they all carry valid ones (filegroup/posmerge.py).
    `commit_time=False`: the commit time is not read unless requested (no merge engine uses it).
    `use_threads=False`: Parquet decoding on the calling thread (`load_sources`)."""
    check_engine(engine)  # (before a fallback could hide it)
    positions = positions and ctx.positions
    needed = needed_columns(ctx, columns)
    if not commit_time and COMMIT_TIME not in (columns or ()):
        needed = [c for c in needed if c != COMMIT_TIME]
    spec = ctx.spec
    # the overlay merge takes a base with dictionary-encoded columns (not the engines, nor a merge by position)
    footers: list[tuple[Any, dict[str, str]] | None] = []
    sources, all_sorted = load_sources(ctx, fs, needed, dictionary=engine is None and not (
        positions and posmerge.may_apply(spec, fs)), footers=footers, use_threads=use_threads)
    if not sources:
        return records.conform(pa.table({}), pa.schema([ctx.full_schema.field(n) for n in needed]))
    if positions:
        by_position = posmerge.merge_sources(spec, ctx.completion_of, ctx.read_time, fs, sources, needed)
        if by_position is not None:
            return by_position
    if engine is None:  # the default: the whole slice is in memory, lay its folded logs over the base
        return _merge_in_memory(ctx, fs, sources, spec, needed, footers if positions else None)
    where = f"file group {fs.partition}/{fs.file_id}"
    chosen = choose_engine(engine, lsm=ctx.config.is_lsm, inputs_sorted=all_sorted, where=where)
    merged = merge_to_table_safely(lambda: sources, spec, chosen, where=where)  # never wrong rows
    return merged.select(needed)


def _merge_in_memory(ctx: ReadContext, fs: FileSlice, sources: list[pa.Table], spec: MergeSpec,
                     needed: Sequence[str], footers: Sequence[tuple[Any, dict[str, str]] | None] | None = None
                     ) -> pa.Table:
    """`merge_overlay` of the slice's sources (rows in key order when the base is sorted).

    With the logs' `footers`, a slice whose logs all carry valid RECORD_POSITIONS
    under event-time ordering is overlaid by position instead
    (`posmerge.overlay_by_position`: the same rows, no key search).

    When the key is the text of one field (`key_from_field`), that field equals
    `_hoodie_record_key` in every data row of a Parquet file (the key was built
    from it; a v1 log block holds its own keys, which are compared), so it is
    merged once and copied back afterwards (delete rows, where the field is
    null, never survive a merge)."""
    field = ctx.config.record_key[0] if ctx.config.record_key else None
    twin = field is not None and field != RECORD_KEY and field in needed and key_from_field(ctx)
    if twin and any(f.name.is_log and f.name.log_format == 1 for f in fs.files):
        twin = all(pc.all(pc.or_kleene(pc.equal(s.column(RECORD_KEY), s.column(field)), s.column(DELETE_FLAG))
                          .fill_null(arrowlit.FALSE)).as_py() for s in sources)
    if twin:
        sources = [s.drop_columns([field]) for s in sources]
    merged = posmerge.overlay_by_position(spec, fs, sources, footers) if footers is not None else None
    if merged is None:
        merged = merge_overlay(sources, spec)
    if twin:
        merged = merged.append_column(ctx.full_schema.field(field), merged.column(RECORD_KEY))
    return merged.select(needed)


# --------------------------------------------------------------------------- streaming sources (compaction)
STREAM_BUFFER_BYTES = 1 << 20


def _stream_file(ctx: ReadContext, f: DataFile, target: pa.Schema, columns: list[str] | None,
                 batch_size: int, metadata: pq.FileMetaData | None = None,
                 source: Any = None) -> Iterator[pa.RecordBatch]:
    """`metadata`: the file's footer when the caller has read it already (not read twice); `source`:
    what `parquet_read.open_stream` gave for the file (an object is then not fetched again)."""
    try:
        pf = parquet_read.open_parquet(f.path if source is None else source, pre_buffer=False,
                                       buffer_size=STREAM_BUFFER_BYTES, metadata=metadata)
        names = pf.schema_arrow.names
        allowed = None if f.name.is_delete else _allowed(ctx)
        if allowed is not None:
            parquet_read.check_columns(f.path, names, allowed)
        cols = None if columns is None else [c for c in columns if c in names]
        for batch in pf.iter_batches(batch_size=batch_size, columns=cols):
            if batch.num_rows == 0:
                continue
            table = pa.Table.from_batches([batch])
            table = (delete_source(ctx, table, target, f.partition, f.path) if f.name.is_delete
                     else data_source(ctx, table, target, f.partition, f.path))
            yield from table.to_batches(max_chunksize=batch_size)
    except (OSError, ValueError, pa.ArrowException) as exc:  # ValueError: a column name that is not UTF-8
        raise CorruptFileError(f"cannot read Parquet file: {exc}", path=f.path) from None


def iter_sources(ctx: ReadContext, files: Sequence[DataFile], needed: Sequence[str], *,
                 batch_size: int = 65_536) -> tuple[list[pa.RecordBatchReader], bool]:
    """Streaming merge sources, one per file in the given order, and whether all files are sorted.

    The streaming twin of `load_sources` for compaction: each source reads its
    file batch by batch (`pre_buffer=False`, a small read buffer), so memory
    stays O(files x batch) instead of O(rows).  The caller gives the files in
    merge order (base first, then logs as the compaction plan lists them).
    A slice holding v1 (#HUDI#) logs is resolved like `load_sources` does
    (`_iter_sources_v1`): its logs in commit order, each v1 block one source
    decoded in memory (blocks are small next to the base file, which streams).
    """
    if any(f.name.is_log and f.name.log_format == 1 for f in files):
        return _iter_sources_v1(ctx, files, needed, batch_size=batch_size)
    target = target_schema(ctx, needed)
    out: list[pa.RecordBatchReader] = []
    all_sorted = True
    for f in files:
        if f.name.ext in ("orc", "hfile", "lance"):
            raise UnsupportedFeatureError("compaction streams Parquet base files and v2 logs only", path=f.path)
        source, md, kv = parquet_read.open_stream(f.path, f.size or None)  # an object: fetched once
        all_sorted = all_sorted and parquet_footer.is_sorted_footer(kv)
        columns = None if f.name.is_delete else _whole_file_columns(needed, ctx)  # the key field, not its twin
        out.append(pa.RecordBatchReader.from_batches(target, _stream_file(ctx, f, target, columns, batch_size, md,
                                                                          source)))
    return out, all_sorted


def _iter_sources_v1(ctx: ReadContext, files: Sequence[DataFile], needed: Sequence[str], *,
                     batch_size: int) -> tuple[list[pa.RecordBatchReader], bool]:
    """`iter_sources` for a slice with v1 logs (a compatibility table, or one switched to v2 logs since).

    The base file streams; the logs are ordered and filtered per slice by
    `v1read.ordered_units` (rollback command blocks, block instants, completion
    order across v1 and v2 logs), v2 logs stream, v1 blocks are one source each.
    """
    target = target_schema(ctx, needed)
    bases = [f for f in files if not f.name.is_log]
    logs = tuple(f for f in files if f.name.is_log)
    for f in files:
        if f.name.ext in ("orc", "hfile", "lance"):
            raise UnsupportedFeatureError(f"{f.name.ext} data files are not supported (only Parquet)", path=f.path)
    out: list[pa.RecordBatchReader] = []
    all_sorted = True
    for f in bases:
        source, md, kv = parquet_read.open_stream(f.path, f.size or None)
        all_sorted = all_sorted and parquet_footer.is_sorted_footer(kv)
        out.append(pa.RecordBatchReader.from_batches(
            target, _stream_file(ctx, f, target, file_columns(needed, ctx), batch_size, md, source)))
    first = logs[0]
    fs = FileSlice(first.partition, first.file_id, bases[0].instant if bases else first.instant,
                   bases[0] if bases else None, logs)
    for unit in v1read.ordered_units(ctx.completion_of, ctx.read_time, fs, strict=ctx.strict, stats=ctx.stats):
        f = unit.file
        if unit.is_v1:
            kind, table = v1read.block_table(unit)
            all_sorted = all_sorted and v1read.is_sorted(kind, table)
            table = (data_source(ctx, table, target, f.partition, f.path) if kind == "data"
                     else delete_source(ctx, table, target, f.partition, f.path))
            out.append(pa.RecordBatchReader.from_batches(target, table.to_batches(max_chunksize=batch_size)))
            continue
        source, md, kv = parquet_read.open_stream(f.path, f.size or None)
        all_sorted = all_sorted and parquet_footer.is_sorted_footer(kv)
        columns = None if f.name.is_delete else file_columns(needed, ctx)
        out.append(pa.RecordBatchReader.from_batches(target, _stream_file(ctx, f, target, columns, batch_size, md,
                                                                          source)))
    return out, all_sorted
