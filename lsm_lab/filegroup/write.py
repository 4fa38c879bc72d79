"""Writes: tag records to file groups, write one sorted file per group, commit atomically.

    insert / upsert / bulk_insert / delete(batch)
      │ records.*           Arrow table, keys, partition paths, de-duplicated, sorted
      │ index.*             (partition, file id) per record: bucket (lsm_tree) or key lookup (default);
      │ smallfiles.*        new keys of a key-lookup table fill its small file groups first
      │ timeline            <t>.deltacommit.requested → <t>.deltacommit.inflight
      │ per file group:     MERGE_ON_READ   new group → base file (L1); else → v2 log (L0)
      │                                     (v1 #HUDI# log in table versions 6 and 8),
      │                                     deletes → v2 delete log
      │                     COPY_ON_WRITE   merge the current base with the batch → new base
      │ timeline            <t>_<c>.deltacommit  with per-file write stats  ◄── the commit point
      ▼
    Instant (completed)

Nothing is visible until the completed instant file exists: readers ignore files
whose instant has not completed, so a crash at any point leaves the table at its
last commit.  The next writer (holding the table lock, so every pending write it
sees is dead) rolls such leftovers back before it starts.

With the `lsm_tree` layout every file written is sorted by record key with no
key twice (the batch is de-duplicated first — on bucket tables each file group's
share, after its sort; COW merges use the sorted engine).

On a bucket table `tag` copies no rows: it finds each file group's rows (their row numbers, in key
order on an lsm_tree table), and the thread that writes the group gathers them from the batch
(`GroupRows`), so that a write holds the batch and the rows of the groups in flight, not a reordered
copy of the whole batch.  Nor does `prepare` copy its key and partition path: a key of one string field
is that column itself (chunks and all), and the partition path one index per row into the partition
names (`records.partition_codes`), repeated as text in each group's rows.

`write_file_group` does the work for one file group from plain arguments, so
that a Spark task can call it for its partition of the data.

A log of updates or deletes whose records all sit in the slice's base file
carries their row numbers there (RECORD_POSITIONS, filegroup/posmerge.py), so that
readers can merge it by position.

A stream (RecordBatchReader, `__arrow_c_stream__`, iterator of batches) is written by
filegroup/stream_write.py in chunks through the same `prepare`, `tag` and `write_file_group`.

Simplified compared with Apache Hudi: no log-file rollover by size (one log
file per file group per commit; a streamed write cuts a large bucket group's share into key
ranges instead, see stream_write.py); `insert` and `upsert` store records the same
way (a later version of a key always merges with the earlier one) and differ
only in the statistics.

Taught in: notebooks/01_build_a_table.ipynb, notebooks/03_sorted_writes_and_levels.ipynb
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.errors import InputError, LsmLabError
from lsm_lab.filegroup import cdclog, compat, index, posmerge, smallfiles
from lsm_lab.filegroup.deletes import live_deletes
from lsm_lab.filegroup.fsview import FileGroup, FileSlice
from lsm_lab.filegroup.read import ReadContext, load_sources, read_slice
from lsm_lab.format import hudi_bloom, naming, parquet_write
from lsm_lab.format import log_v2 as v2
from lsm_lab.merge import merge_to_table, records
from lsm_lab.merge.records import COMMIT_SEQNO, COMMIT_TIME, DELETE_FLAG, FILE_NAME, PARTITION_PATH, RECORD_KEY
from lsm_lab.storage import TablePath, atomic, is_local
from lsm_lab.timeline.config import TableConfig
from lsm_lab.timeline.metadata import SCHEMA_KEY as SCHEMA_KEY  # (re-exported: the writers' name for it)
from lsm_lab.timeline.metadata import WriteStat
from lsm_lab.timeline.metadata import schema_from_text as schema_from_text
from lsm_lab.timeline.metadata import schema_to_text as schema_to_text

OPERATIONS = ("insert", "upsert", "bulk_insert", "delete")
DEFAULT_MAX_RECORDS_PER_GROUP = 1_000_000


@dataclass(frozen=True)
class PreparedBatch:
    """A batch ready to write: user columns + `_hoodie_record_key` + `_hoodie_partition_path`."""

    rows: pa.Table
    schema: pa.Schema  # the table's user schema after this batch
    is_delete: bool
    input_rows: int = 0  # rows handed in, before repeated keys were folded


def prepare(config: TableConfig, current: pa.Schema | None, data: Any, op: str) -> PreparedBatch:
    """Normalise, validate, key, partition and de-duplicate a batch (sorted by partition, then key).

    On a bucket-placed lsm_tree table the batch keeps its order and its repeated keys: `tag`
    sorts each file group's share by key, and `write_file_group` de-duplicates a share that holds
    a key twice (one sort per file group instead of one over the batch, and none to find duplicates).
    Its partition path is dictionary-encoded (`records.partition_codes`: each folder name once, an index
    per row); a file group's rows get it back as text when they are gathered (`GroupRows`, `rows_table`).
    The record key keeps the input's chunks (`records.record_keys`)."""
    if op not in OPERATIONS:
        raise InputError(f"unknown operation '{op}' (expected one of {', '.join(OPERATIONS)})")
    is_delete = op == "delete"
    if is_delete and isinstance(data, (list, tuple)) and data and all(isinstance(k, str) for k in data):
        if len(config.record_key) != 1 or config.partition_by:
            raise InputError("delete by plain key strings needs a single-field key and a non-partitioned table; "
                             "pass rows with the key and partition columns instead")
        data = [{config.record_key[0]: k} for k in data]
    table = records.to_arrow(data, what="delete keys" if is_delete else "data")
    if table.num_rows == 0 and table.num_columns == 0:  # `[]`: an empty batch, with no columns to check
        empty = pa.table({RECORD_KEY: pa.array([], pa.string()), PARTITION_PATH: pa.array([], pa.string())})
        return PreparedBatch(empty, current if current is not None else pa.schema([]), is_delete, 0)
    schema = evolve(config, current, table.schema, is_delete)
    ordering = config.ordering_field if config.merge_mode == "EVENT_TIME_ORDERING" else None
    if schema is not None and not is_delete:
        table = records.conform(table, schema)
    keys = records.record_keys(table, config.record_key)  # (chunks kept: a string key field is not copied)
    placed = config.is_lsm and config.bucket_index  # bucket-placed lsm tables: de-duplicated per file group
    parts = (records.partition_codes if placed else records.partition_paths)(  # (_one_per_key)
        table, config.partition_by, hive_style=config.hive_style)
    table = table.append_column(RECORD_KEY, keys).append_column(PARTITION_PATH, parts)
    input_rows = table.num_rows
    if not placed:
        table = records.dedupe(table, [PARTITION_PATH, RECORD_KEY],
                               ordering if ordering in table.column_names else None,
                               deletes=is_delete, keep_order=not config.is_lsm)
    return PreparedBatch(table, schema if schema is not None else pa.schema([]), is_delete, input_rows)


def evolve(config: TableConfig, current: pa.Schema | None, incoming: pa.Schema, is_delete: bool) -> pa.Schema | None:
    """The checks every write makes on a batch's schema (key, partition and ordering columns, the ordering type),
    and the table schema after it (None: a delete on a table that has no schema yet). `prepare` and the
    Spark writer (which sees only the schema on the driver) both call it."""
    empty = incoming.empty_table()
    records.check_columns(empty, config.record_key, "record key")
    records.check_columns(empty, config.partition_by, "partition")
    ordering = config.ordering_field if config.merge_mode == "EVENT_TIME_ORDERING" else None
    if ordering and not is_delete:
        records.check_columns(empty, [ordering], "ordering")
    if ordering and ordering in incoming.names:
        v2.validate_ordering_type(incoming.field(ordering).type, ordering)
    if current is None and is_delete:
        return None
    # Hudi's schema evolution on write (merge/evolution.py): the key, partition and ordering columns keep their type
    fixed = {*config.record_key, *config.partition_by, *([ordering] if ordering else [])}
    return records.evolve_schema(current, incoming, partial=is_delete, fixed=fixed)


def planned_files(config: TableConfig, base_path: TablePath, partition: str, file_id: str,
                  latest: FileSlice | None, instant: str, op: str, token: str) -> list[tuple[str, str]]:
    """(file name, marker IO type) that `write_file_group` may create for one file group: the markers a write
    puts down before any data file (the library's writer and the Spark tasks alike)."""
    if not config.is_mor:
        return [(naming.base_file_name(file_id, token, instant), "MERGE" if latest else "CREATE")]
    if latest is None:
        return [] if op == "delete" else [(naming.base_file_name(file_id, token, instant), "CREATE")]
    if config.log_format_version == 1:
        try:
            folder = base_path / partition if partition else base_path
            logs = [(compat.v1_log_name(config, folder, file_id, token, instant, latest.base_instant), "APPEND")]
        except LsmLabError:
            logs = []
    else:
        logs = [(naming.log_file_name(file_id, token, instant, 1, delete=op == "delete",
                                      native=config.upstream_format), "APPEND")]
    if op != "delete" and not config.bucket_index and not latest.log_files:  # a small slice taking new keys
        return [(naming.base_file_name(file_id, token, instant), "MERGE"), *logs]  # is rewritten (sorted create)
    return logs


# --------------------------------------------------------------------------- tagging
Tagged = tuple[str, str, "pa.Table | GroupRows", FileSlice | None, pa.Array | None]
"""(partition, file id, the group's rows, its latest slice or None for a new group, the keys it holds or None).
The rows are a table, or on a bucket table a `GroupRows` (gathered by `write_file_group`; `rows_table`)."""
Locator = Callable[[pa.Array, str], tuple[pa.Array, pa.Array]]
"""(keys, their partition) → (partition, file id) per key, null where unknown: a record index (table/mdt_use.py)"""


def tag(config: TableConfig, rows: pa.Table, groups_by_partition: dict[str, list[FileGroup]],
        ctx: ReadContext | None, *, max_records_per_group: int = DEFAULT_MAX_RECORDS_PER_GROUP,
        op: str = "upsert", keys_cache: dict[tuple[str, str], pa.Array] | None = None,
        locate: Locator | None = None) -> list[Tagged]:
    """Assign rows to file groups: (partition, file id, rows, latest slice, existing keys).

    The rows keep the batch's order (sorted by key unless the batch was bucket-placed, see `prepare`);
    a bucket-placed lsm_tree group's rows come sorted by key, repeated keys kept (`_one_per_key`).
    On a bucket table each group's rows are a `GroupRows`, gathered from `rows` when the group is written.
    A delete's keys that no file group holds delete nothing: they go to no group (never packed into a
    small one, which would only write a useless delete log there).  `keys_cache`: the keys of each
    (partition, file id) already read (a streamed write tags many chunks against one snapshot).
    `locate`: keys → (partition, file id) from a record index (table/mdt_use.py `record_index_locator`):
    existing keys are tagged from it, and no file group's keys are read."""
    if config.bucket_index:
        return _tag_buckets(config, rows, groups_by_partition)
    out: list[Tagged] = []
    for partition, existing, hits, fresh in _hits_by_partition(rows, groups_by_partition, ctx, keys_cache, locate):
        out.extend(hits)
        if op == "delete":
            continue
        small = smallfiles.SmallFileConfig.from_props(config.props)
        if small.enabled and fresh.num_rows:  # new keys fill small file groups first (filegroup/smallfiles.py)
            mine = {e[1]: i for i, e in enumerate(out) if e[0] == partition}
            packed, fresh = smallfiles.assign(
                fresh, smallfiles.candidates(list(existing.values()), small, is_mor=config.is_mor), small)
            for fs, extra in packed:
                if fs.file_id in mine:
                    p, fid, took, latest, stored = out[mine[fs.file_id]]
                    out[mine[fs.file_id]] = (p, fid, pa.concat_tables([took, extra]), latest, stored)
                else:
                    out.append((partition, fs.file_id, extra, fs, None))
        if smallfiles.KEY_INSERT_SPLIT in config.props:
            max_records_per_group = small.insert_split_size
        for start in range(0, fresh.num_rows, max_records_per_group):
            out.append((partition, index.new_file_id(), fresh.slice(start, max_records_per_group), None, None))
    return out


def split_existing(rows: pa.Table, groups_by_partition: dict[str, list[FileGroup]], ctx: ReadContext,
                   keys_cache: dict[tuple[str, str], pa.Array] | None = None) -> tuple[list[Tagged], pa.Table]:
    """Key-lookup tagging's first step alone: (the rows each existing file group holds the key of, the rest).

    A streamed write (filegroup/stream_write.py) sends the rest, the new keys, to file groups at the end."""
    hits: list[Tagged] = []
    fresh: list[pa.Table] = []
    for _, _, found, rest in _hits_by_partition(rows, groups_by_partition, ctx, keys_cache):
        hits.extend(found)
        fresh.append(rest)
    return hits, (pa.concat_tables(fresh) if fresh else rows.slice(0, 0))


def _hits_by_partition(rows: pa.Table, groups_by_partition: dict[str, list[FileGroup]], ctx: ReadContext | None,
                       keys_cache: dict[tuple[str, str], pa.Array] | None, locate: Locator | None = None
                       ) -> Iterator[tuple[str, dict[str, FileGroup], list[Tagged], pa.Table]]:
    """Per partition (in order): its existing file groups, the rows each holds the key of, and the new keys."""
    parts = rows.column(PARTITION_PATH).combine_chunks()
    for partition in sorted(pc.unique(parts).to_pylist()):
        prow = rows.filter(pc.equal(parts, partition))
        existing = {g.file_id: g for g in groups_by_partition.get(partition, [])}
        if locate is not None:
            found, rest = _located_hits(partition, prow, existing, locate)
        else:
            found, rest = _existing_hits(partition, prow, existing, ctx, keys_cache)
        yield partition, existing, found, rest


def _located_hits(partition: str, prow: pa.Table, existing: dict[str, FileGroup], locate: Locator
                  ) -> tuple[list[Tagged], pa.Table]:
    """Record-index tagging: each key the index places in one of the partition's existing file groups goes there
    (its stored keys left unknown: the write counts its updates on that group alone); the others are new.
    A key the index places in another partition is a new key of this one (keys are unique per partition,
    as the key-lookup index keeps them); the locator of a global index refuses such a batch."""
    keys = prow.column(RECORD_KEY).combine_chunks()
    where, fids = locate(keys, partition)
    here = pc.fill_null(pc.equal(where, partition), False)
    out: list[Tagged] = []
    assigned = np.zeros(len(keys), dtype=bool)
    for fid, grp in sorted(existing.items()):
        hit = np.asarray(pc.and_(here, pc.fill_null(pc.equal(fids, fid), False)), dtype=bool) & ~assigned
        if hit.any():
            out.append((partition, fid, prow.filter(pa.array(hit)), grp.latest, None))
            assigned |= hit
    return out, prow.filter(pa.array(~assigned))


def _existing_hits(partition: str, prow: pa.Table, existing: dict[str, FileGroup], ctx: ReadContext | None,
                   keys_cache: dict[tuple[str, str], pa.Array] | None) -> tuple[list[Tagged], pa.Table]:
    """Key-lookup index: each existing group takes the keys it holds; returns those and the rows of new keys."""
    out: list[Tagged] = []
    keys = prow.column(RECORD_KEY).combine_chunks()
    assigned = np.zeros(len(keys), dtype=bool)
    for fid, grp in sorted(existing.items()):
        stored = keys_cache.get((partition, fid)) if keys_cache is not None else None
        if stored is None:
            stored = slice_keys(grp.latest, ctx) if ctx is not None else pa.array([], pa.string())
            if keys_cache is not None:
                keys_cache[(partition, fid)] = stored
        hit = pc.is_in(keys, value_set=stored).to_numpy(zero_copy_only=False) & ~assigned
        if hit.any():
            out.append((partition, fid, prow.filter(pa.array(hit)), grp.latest, stored))
            assigned |= hit
    return out, prow.filter(pa.array(~assigned))


def _tag_buckets(config: TableConfig, rows: pa.Table, groups_by_partition: dict[str, list[FileGroup]]
                 ) -> list[Tagged]:
    """`tag` for bucket tables: one hash of the batch, one grouping sort; each group's rows as a `GroupRows`.

    Groups come partition by partition, buckets ascending; an lsm_tree group's rows come sorted by
    key (sorted on the write threads from the batch's key prefixes, `records.prefix_sort_indices`), other
    groups' in arrival order."""
    if rows.num_rows == 0:
        return []
    # (a dictionary-encoded partition path, `prepare`'s on an lsm_tree table, is used as it is)
    parts = records.one_array(rows.column(PARTITION_PATH)).dictionary_encode()
    names = parts.dictionary.to_pylist()
    by_rank = sorted(names)
    rank = np.array([by_rank.index(n) for n in names], dtype=np.int64)  # a loop over partitions, not rows
    keys = rows.column(RECORD_KEY)  # chunks kept (hashed chunk by chunk; each group's keys taken from them)
    # one key field: its text is the record key itself (`records.record_keys`), no second conversion
    key_cols = ([] if not config.upstream_format else [keys] if len(config.record_key) == 1
                else records.key_parts(rows, config.record_key))
    buckets = index.bucket_ids_of(config.upstream_format, key_cols, keys, config.num_buckets).astype(np.int64)
    group = rank[parts.indices.to_numpy(zero_copy_only=False)] * config.num_buckets + buckets
    # the rows of each group, found with one O(n) grouping sort of the small group ids (not one filter of the
    # whole batch per group); then each group's rows sorted by key (on the write threads).  The rows
    # themselves are gathered later, group by group, by the thread that writes the group (`GroupRows`)
    order = np.argsort(group.astype(np.uint16) if group.max() < 1 << 16 else group, kind="stable")
    counts = np.bincount(group)
    ids = np.flatnonzero(counts).tolist()
    ends = np.cumsum(counts)
    spans = [order[int(ends[g] - counts[g]):int(ends[g])] for g in ids]
    if config.is_lsm:  # each group sorted by its keys' first 8 bytes, found once for the batch (8 bytes a row)
        prefixes = records.key_prefixes(keys)
        spans = list(run_in_threads([functools.partial(_by_key, keys, prefixes, span) for span in spans]))
    # a key that is one string field holds that field's values: gathered once, used for both columns
    alias = (config.record_key[0] if len(config.record_key) == 1 and config.record_key[0] in rows.column_names
             and pa.types.is_string(rows.schema.field(config.record_key[0]).type) else None)
    # the partition path is one value per group: repeated per share, not gathered
    source = rows.drop_columns([PARTITION_PATH])
    chunks = max((c.num_chunks for c in source.columns), default=0)
    if chunks > 1 and source.num_rows < MIN_TAKE_CHUNK_ROWS * chunks:
        source = source.combine_chunks()  # small chunks (a stream of small batches): one copy, then each
    out: list[Tagged] = []                # group's take is one take per column, not one per chunk
    for g, span in zip(ids, spans):
        partition, bucket = by_rank[g // config.num_buckets], g % config.num_buckets
        # the group's partition path: the value of any of its rows, in the batch's type (text or dictionary)
        share = GroupRows(source, span, alias=alias, partition=rows.column(PARTITION_PATH)[int(span[0])],
                          schema=rows.schema)
        existing = {grp.file_id: grp for grp in groups_by_partition.get(partition, [])}
        fid = index.file_id_of_bucket(config.upstream_format, config.name, partition, bucket)
        grp = existing.get(fid)
        out.append((partition, fid, share, grp.latest if grp else None, None))
    return out


def _by_key(keys: pa.ChunkedArray, prefixes: np.ndarray | None, idx: np.ndarray) -> np.ndarray:
    """`idx` (rows of one group, ascending) reordered so that their keys are sorted (stable).

    Sorted by the rows' key prefixes (`records.prefix_sort_indices`): of the keys themselves only those whose
    prefix another row shares are taken (for UUIDs a few per 100k), chunk by chunk (`_take`: Arrow's take would
    join the batch's chunks first); a group's keys taken whole were 32 MB of fresh pages per 800k-row group."""
    if len(idx) <= 1:
        return idx

    def keys_at(at: np.ndarray | None) -> pa.Array | pa.ChunkedArray:
        rows = idx if at is None else idx[at]
        return _take(keys, rows, pa.array(rows), {})

    return cast("np.ndarray", idx[records.prefix_sort_indices(None if prefixes is None else prefixes[idx], keys_at)])


class GroupRows:
    """The rows of one file group of a bucket table, gathered from the batch only when they are written.

        batch (N rows, as handed in)        GroupRows of group g: the batch + g's row numbers (key order)
          │                                    │ table(), on the write thread that writes g
          └── take g's rows, column by column ─┴─► g's table (its rows only)  → written, then freed

    `_tag_buckets` finds every group's rows (row numbers, in key order on an lsm_tree table) but copies
    none: `write_file_group` calls `table()` on the thread that writes the group, so only the groups being
    written (at most `WRITE_THREADS`) have their reordered rows in memory at once, not a reordered copy of
    the whole batch; each group's columns are that group's size, which the C library can reuse from one
    group to the next (docs/PERFORMANCE.md, "Bulk insert: one file group's rows at a time").

    The table is the one a gather of the whole batch would give, sliced: the partition path is repeated
    (one value per group, not gathered; `rows_table` gives the writer text, `table(text=True)`, where the
    batch holds it dictionary-encoded, see `prepare`); a key that is one string field is gathered once, from
    whichever of that field and `_hoodie_record_key` has fewer chunks, and used for both; a column of
    several chunks is taken chunk by chunk (`_take`), since Arrow's take first copies such a column
    whole, which per group would be a copy of the batch each time."""

    __slots__ = ("_alias", "_field", "_order", "_partition", "_position", "_source")

    def __init__(self, source: pa.Table, order: np.ndarray, *, alias: str | None, partition: pa.Scalar,
                 schema: pa.Schema) -> None:
        """`source`: the batch without its partition path; `order`: the group's rows in it; `partition`: the
        group's partition path, a scalar of the batch's column (a string or a dictionary value); `schema`: the
        batch's, which says where the partition path goes back; `alias`: a string column holding the
        same values as `_hoodie_record_key`."""
        self._source, self._order, self._alias, self._partition = source, order, alias, partition
        self._position = schema.get_field_index(PARTITION_PATH)
        self._field = schema.field(self._position)

    @property
    def num_rows(self) -> int:
        return len(self._order)

    def table(self, *, text: bool = False) -> pa.Table:
        """The group's rows, gathered now (a new table each call), in the batch's types; with `text`, the
        partition path as plain strings, as files hold it (where the batch holds it dictionary-encoded)."""
        source, idx = self._source, pa.array(self._order)
        both = (self._alias, RECORD_KEY) if self._alias is not None else ()
        once = min(both, key=lambda n: source.column(n).num_chunks) if both else None
        splits: dict[tuple[int, ...], _ChunkSplit] = {}
        taken = {n: _take(source.column(n), self._order, idx, splits) for n in source.column_names
                 if n not in both or n == once}
        for n in both:
            taken[n] = taken[once]
        rows = pa.Table.from_arrays([taken[n] for n in source.column_names], schema=source.schema)
        value, field = self._partition, self._field
        if text and isinstance(value, pa.DictionaryScalar):
            value = value.value
            field = field.with_type(value.type)
        return rows.add_column(self._position, field, pa.repeat(value, rows.num_rows))


def rows_table(rows: pa.Table | GroupRows) -> pa.Table:
    """A file group's rows as a table to write: `rows` itself, or a bucket group's rows gathered now (the
    partition path as text)."""
    return rows.table(text=True) if isinstance(rows, GroupRows) else rows


#: a batch whose chunks hold fewer rows than this on average is made contiguous before its groups are gathered:
#: `_take` costs one Arrow call per chunk, per column and per group, which for a stream of small batches (thousands
#: of chunks of a few rows) would cost more than the one copy it saves; a Parquet file read whole comes in chunks
#: of 131,072 rows (16M rows: 122 chunks), which are taken from as they are
MIN_TAKE_CHUNK_ROWS = 16_384

_ChunkSplit = tuple[list[pa.Array], pa.Array | None]
"""(each chunk's rows wanted, as row numbers in the chunk; where each row wanted is among them, chunk after chunk,
None when they come in that order already)"""


def _take(column: pa.ChunkedArray, order: np.ndarray, idx: pa.Array,
          splits: dict[tuple[int, ...], _ChunkSplit]) -> pa.Array | pa.ChunkedArray:
    """`column.take(idx)` (`idx` = `order`, the rows wanted) as one array, without copying the whole column first.

    Arrow's take of a column of several chunks concatenates them into one array first (pyarrow 26, every type).
    So each chunk gives its own rows, in chunk order, those pieces are joined (the group's size) and put in
    `order`'s order with one take of them (none when `order` visits the chunks in turn, as ascending row
    numbers do).  `splits` keeps that plan per chunk layout, for the other columns."""
    if column.num_chunks == 1:
        return column.chunk(0).take(idx)
    if column.num_chunks == 0 or pa.types.is_dictionary(column.type):  # (a dictionary column: the Arrow way,
        return column.take(idx)                                       # whose result has its unified dictionary)
    lengths = tuple(len(c) for c in column.chunks)
    split = splits.get(lengths)
    if split is None:
        starts = np.cumsum((0, *lengths))
        chunk_of = np.searchsorted(starts, order, side="right") - 1
        if bool((chunk_of[1:] >= chunk_of[:-1]).all()):  # chunk after chunk already: no reordering
            bounds = np.searchsorted(chunk_of, np.arange(len(lengths) + 1))
            split = ([pa.array(order[bounds[c]:bounds[c + 1]] - starts[c]) for c in range(len(lengths))], None)
        else:
            by_chunk = np.argsort(chunk_of.astype(np.uint16) if len(lengths) < 1 << 16 else chunk_of, kind="stable")
            bounds = np.searchsorted(chunk_of[by_chunk], np.arange(len(lengths) + 1))
            local = [pa.array(order[by_chunk[bounds[c]:bounds[c + 1]]] - starts[c]) for c in range(len(lengths))]
            back = np.empty(len(order), np.int64)
            back[by_chunk] = np.arange(len(order))
            split = (local, pa.array(back))
        splits[lengths] = split
    local, inverse = split
    pieces = [column.chunk(c).take(rows) for c, rows in enumerate(local) if len(rows)]
    if len(pieces) == 1:  # all in one chunk: taken in `order`'s order already
        return pieces[0]
    if not pieces:
        return column.take(idx)
    joined = pa.concat_arrays(pieces)
    return joined if inverse is None else joined.take(inverse)


def _one_per_key(config: TableConfig, rows: pa.Table, is_delete: bool) -> pa.Table:
    """A file group's rows, sorted, one per key: sorted as they come unless a key repeats (then `records.dedupe`).

    Rows that come sorted with a key repeated (`tag` sorts each group's share by key) keep their order: only
    the rows of repeated keys are de-duplicated, and the winners kept in place."""
    keys = records.one_array(rows.column(RECORD_KEY))
    if records.is_strictly_sorted(keys):
        return rows
    n = len(keys)
    same = np.asarray(pc.equal(keys.slice(0, n - 1), keys.slice(1)).fill_null(False), dtype=bool)
    if not bool(pc.all(pc.less_equal(keys.slice(0, n - 1), keys.slice(1))).as_py()):
        rows = records.sort_by_key(rows)
        keys = records.one_array(rows.column(RECORD_KEY))
        same = np.asarray(pc.equal(keys.slice(0, n - 1), keys.slice(1)).fill_null(False), dtype=bool)
        if not same.any():
            return rows
    ordering = config.ordering_field if config.merge_mode == "EVENT_TIME_ORDERING" else None
    ordering = ordering if ordering in rows.column_names else None
    repeated = np.zeros(n, dtype=bool)  # rows whose key a neighbour shares
    repeated[:-1] |= same
    repeated[1:] |= same
    at = np.flatnonzero(repeated)
    narrow = rows.select([RECORD_KEY] + ([ordering] if ordering else [])).take(pa.array(at))
    winners = records.dedupe(narrow.append_column(_ROW, pa.array(at)), RECORD_KEY, ordering, deletes=is_delete)
    keep = ~repeated
    keep[winners.column(_ROW).to_numpy()] = True
    return rows.take(pa.array(np.flatnonzero(keep)))


_ROW = "__lsm_lab_row"  # a row number carried through `records.dedupe` (never written)


def slice_keys(fs: FileSlice, ctx: ReadContext) -> pa.Array:
    """Record keys stored in a slice's base and logs (deleted keys included: an upper bound).

    A deleted key still sits in the base file until compaction, so a later insert
    of it must go to the same file group (as Hudi's index sends it), or the
    read-optimized view would show it twice.
    """
    sources, _ = load_sources(ctx, fs, [RECORD_KEY])
    if not sources:
        return pa.array([], pa.string())
    keys = pa.chunked_array([k for s in sources for k in s.column(RECORD_KEY).chunks], pa.string())
    return pc.unique(keys.combine_chunks())


def stored_count(fs: FileSlice, ctx: ReadContext, keys: pa.Array | pa.ChunkedArray) -> int:
    """How many of `keys` (distinct) the slice's base or logs hold, deleted keys included (as `slice_keys`).

    Each file's keys are probed against the batch's (a hash set of the batch, not of
    the slice), so only the few stored keys that match are kept."""
    sources, _ = load_sources(ctx, fs, [RECORD_KEY])
    wanted = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    found = [s.column(RECORD_KEY).filter(pc.is_in(s.column(RECORD_KEY), value_set=wanted)) for s in sources]
    hits = [c for f in found for c in f.chunks if len(c)]
    return len(pc.unique(pa.chunked_array(hits, pa.string()).combine_chunks())) if hits else 0


def _count_updates(ctx: ReadContext, latest: FileSlice | None, rows: pa.Table, existing_keys: pa.Array | None) -> int:
    """Rows of the batch whose key the file group already holds (`numUpdateWrites`)."""
    if existing_keys is not None:
        return int(pc.sum(pc.is_in(rows.column(RECORD_KEY), value_set=existing_keys)).as_py() or 0)
    return stored_count(latest, ctx, rows.column(RECORD_KEY)) if latest is not None else 0


# --------------------------------------------------------------------------- file groups in parallel
#: threads writing file groups at once: Arrow sorts, encodes and compresses without the GIL
WRITE_THREADS = max(1, min(4, os.cpu_count() or 1))
T = TypeVar("T")


def run_in_threads(calls: Sequence[Callable[[], T]], threads: int = WRITE_THREADS) -> Iterator[T]:
    """Run independent calls (one file group each) on a small thread pool; yield results in call order.

    Every call runs to its end even when another fails (the pool waits for all); the first
    failure, in call order, is raised.
    """
    if threads <= 1 or len(calls) <= 1:
        for call in calls:
            yield call()
        return
    with ThreadPoolExecutor(max_workers=min(threads, len(calls)), thread_name_prefix="lsm_lab-write") as pool:
        yield from pool.map(lambda call: call(), calls)


# --------------------------------------------------------------------------- one file group
#: rows per chunk of the columns a write adds (`_meta_columns`): each chunk's buffers stay below glibc's
#: largest mmap threshold (32 MiB), so that the C library reuses their memory from one file group to the
#: next; one column of a 1.3M-row group (a file name repeated: 100 MiB) was mapped fresh each time, and
#: each of its pages paid a fault (docs/PERFORMANCE.md, "Stop 41")
META_CHUNK_ROWS = 1 << 16


def _constant(value: str, n: int) -> pa.ChunkedArray:
    """`value` n times, as chunks of at most META_CHUNK_ROWS rows that share one buffer (not n copies)."""
    chunk = pa.repeat(pa.scalar(value, pa.string()), min(n, META_CHUNK_ROWS))
    whole, rest = divmod(n, META_CHUNK_ROWS)
    return pa.chunked_array([chunk] * whole + ([chunk.slice(0, rest)] if rest else []), pa.string())


def _sequence_numbers(instant: str, task: int, n: int) -> pa.ChunkedArray:
    """`_hoodie_commit_seqno` of n rows: `{instant}_{task}_{i}`, chunk by chunk (META_CHUNK_ROWS)."""
    prefix = f"{instant}_{task}_"
    return pa.chunked_array([pc.binary_join_element_wise(prefix, pc.cast(pa.array(np.arange(a, min(a + META_CHUNK_ROWS, n))),
                                                                         pa.string()), "")
                             for a in range(0, n, META_CHUNK_ROWS)], pa.string())


def _meta_columns(rows: pa.Table, instant: str, file_name: str, task: int) -> pa.Table:
    n = rows.num_rows
    cols = {
        COMMIT_TIME: _constant(instant, n),
        COMMIT_SEQNO: _sequence_numbers(instant, task, n),
        RECORD_KEY: rows.column(RECORD_KEY),
        PARTITION_PATH: rows.column(PARTITION_PATH),
        FILE_NAME: _constant(file_name, n),
    }
    user = [c for c in rows.column_names if c not in cols and c != DELETE_FLAG]
    return pa.table({**cols, **{c: rows.column(c) for c in user}})


def _delete_rows(rows: pa.Table, ordering: str | None, schema: pa.Schema | None = None) -> pa.Table:
    """Delete-log rows: `schema` = upstream's delete-log schema (table version 10), else the draft's columns."""
    n = rows.num_rows
    if schema is not None:
        return pa.table([rows.column(RECORD_KEY)] + [
            rows.column(f.name).cast(f.type) if f.name in rows.column_names else pa.nulls(n, f.type)
            for f in list(schema)[1:]], schema=schema)
    ordering_val = (v2.encode_ordering(rows.column(ordering)) if ordering and ordering in rows.column_names
                    else pa.nulls(n, pa.binary()))
    return pa.table({"record_key": rows.column(RECORD_KEY), "ordering_val": ordering_val,
                     "partition_path": rows.column(PARTITION_PATH)}, schema=v2.DELETE_SCHEMA)


def write_file_group(
    *,
    base_path: TablePath,
    config: TableConfig,
    ctx: ReadContext,
    partition: str,
    file_id: str,
    rows: pa.Table | GroupRows,
    latest: FileSlice | None,
    existing_keys: pa.Array | None,
    instant: str,
    op: str,
    task: int = 0,
    token: str | None = None,
    engine: str | None = None,
) -> list[WriteStat]:
    """Write one file group's share of a batch; returns the write stats (empty when nothing to do).

    On a CDC table the file group's CDC log follows the data file (filegroup/cdclog.py).
    `rows`: a table, or a bucket group's `GroupRows` from `tag`, gathered here (on the thread writing the group).
    """
    rows = rows_table(rows)
    token = token or naming.write_token(task, 0, 0)
    if config.is_lsm:  # sorted by tag(); a bucket-placed batch is de-duplicated here, per file group
        rows = _one_per_key(config, rows, op == "delete")  # before the CDC log: both see the same rows
    found, stored = None, None
    if cdclog.writes_cdc(config) and rows.num_rows:  # one probe of the slice: the changes and the update count
        found, stored = cdclog.probe(config, ctx, latest, rows, instant, op)
    stats = _write_file_group(base_path=base_path, config=config, ctx=ctx, partition=partition, file_id=file_id,
                              rows=rows, latest=latest, existing_keys=existing_keys, instant=instant, op=op,
                              task=task, token=token, engine=engine, num_updates=stored)
    return cdclog.write(stats, base_path=base_path, config=config, ctx=ctx, partition=partition, file_id=file_id,
                        rows=rows, latest=latest, instant=instant, op=op, token=token, found=found)


def _write_file_group(*, base_path: TablePath, config: TableConfig, ctx: ReadContext, partition: str,
                      file_id: str, rows: pa.Table, latest: FileSlice | None, existing_keys: pa.Array | None,
                      instant: str, op: str, task: int, token: str, engine: str | None,
                      num_updates: int | None = None) -> list[WriteStat]:
    """`write_file_group`'s data file; `num_updates`: the update count when the caller already has it (CDC)."""
    folder = base_path / partition if partition else base_path
    is_delete = op == "delete"
    lsm = config.is_lsm
    ordering = ctx.spec.ordering
    prev = latest.base_instant if latest else "null"
    n = rows.num_rows
    if n == 0 or (is_delete and latest is None):
        return []
    # numUpdateWrites: the rows whose key the group holds.  A v2 log whose rows all have a position in the
    # base (posmerge) is all updates, counted for free below; else the slice's files are probed for the keys
    known = num_updates is not None
    counted_with_positions = (not known and config.is_mor and config.bucket_index and config.log_format_version != 1
                              and existing_keys is None)
    if is_delete:
        num_updates = 0
    elif num_updates is None and not counted_with_positions:
        num_updates = _count_updates(ctx, latest, rows, existing_keys)
    num_updates = num_updates or 0

    live = None  # deletes the merge really applies: counted, not assumed (all are written, as tombstones)
    if config.is_mor and is_delete and latest is not None:
        live = live_deletes(ctx, latest, rows, instant).num_rows
    # MERGE_ON_READ, key-lookup index: a small base-only slice that takes new keys gets a new base (a sorted
    # create through the merge below), never a log holding inserts (filegroup/smallfiles.py)
    rewrite = (config.is_mor and not is_delete and not config.bucket_index and latest is not None
               and num_updates < n and smallfiles.is_candidate(
                   latest, smallfiles.SmallFileConfig.from_props(config.props), is_mor=True))
    if config.is_mor and not rewrite:
        if config.log_format_version == 1 and latest is not None:  # compatibility tables (versions 6, 8)
            return _write_v1_log(config=config, base_path=base_path, folder=folder, partition=partition,
                                 file_id=file_id, rows=rows, latest=latest, instant=instant, token=token, task=task,
                                 is_delete=is_delete, ordering=ordering, num_updates=num_updates,
                                 user_schema=ctx.schema, num_deletes=live)
        native = config.upstream_format  # table version 10: upstream's names, footer and delete-log schema
        if is_delete:
            name = naming.log_file_name(file_id, token, instant, 1, delete=True, native=native)
            dschema = v2.upstream_delete_schema(ctx.schema, [ordering] if ordering else []) if native else None
            rows, at = posmerge.positions_for(config, latest, rows)  # RECORD_POSITIONS when all are in the base
            size = v2.write_delete_log(folder / name, _delete_rows(rows, ordering, dschema), instant_time=instant,
                                       is_sorted=lsm, schema=dschema, extra=at,
                                       schema_json=v2.avro_schema_of(ctx.full_schema, config.name) if native else None)
            return [WriteStat(partition, file_id, f"{partition}/{name}" if partition else name, prev, numWrites=0,
                              numDeletes=n if live is None else live, totalWriteBytes=size, fileSizeInBytes=size,
                              baseFile=latest.base_file.path.name if latest and latest.base_file else "",
                              logFiles=[name], minRecordKey=_first(rows), maxRecordKey=_last(rows))]
        if latest is None:
            name = naming.base_file_name(file_id, token, instant)
            data = _meta_columns(rows, instant, name, task)
            size = parquet_write.write_parquet(folder / name, data, is_sorted=lsm,
                                               hudi_bloom=hudi_bloom.options_for(config.props, config.version))
            if posmerge.writes_positions(config):  # the next upserts' positions need no read of this base's keys
                posmerge.remember_base_keys(folder / name, size, data.column(RECORD_KEY))
            return [WriteStat(partition, file_id, f"{partition}/{name}" if partition else name, prev, numWrites=n,
                              numInserts=n, totalWriteBytes=size, fileSizeInBytes=size, baseFile=name,
                              minRecordKey=_first(rows), maxRecordKey=_last(rows))]
        name = naming.log_file_name(file_id, token, instant, 1, native=native)
        rows, at = posmerge.positions_for(config, latest, rows)  # RECORD_POSITIONS when all are updates of the base
        if counted_with_positions:
            num_updates = n if at else _count_updates(ctx, latest, rows, None)
        data = _meta_columns(rows, instant, name, task)
        size = v2.write_data_log(folder / name, data, instant_time=instant, is_sorted=lsm, upstream=native, extra=at,
                                 schema_json=v2.avro_schema_of(data.schema, config.name) if native else None)
        return [WriteStat(partition, file_id, f"{partition}/{name}" if partition else name, prev, numWrites=n,
                          numInserts=n - num_updates, numUpdateWrites=num_updates, totalWriteBytes=size,
                          fileSizeInBytes=size,
                          baseFile=latest.base_file.path.name if latest.base_file else "", logFiles=[name],
                          minRecordKey=_first(rows), maxRecordKey=_last(rows))]

    # COPY_ON_WRITE: a new version of the base file = current base merged with the batch
    name = naming.base_file_name(file_id, token, instant)
    incoming = _meta_columns(rows, instant, name, task)
    full = ctx.full_schema
    target = pa.schema([*list(full), pa.field(DELETE_FLAG, pa.bool_(), False)])
    flag = pa.repeat(pa.scalar(is_delete, pa.bool_()), n)
    incoming = records.conform(incoming.append_column(DELETE_FLAG, flag), target)
    sources: list[pa.Table] = []
    before = 0
    if latest is not None:
        current = read_slice(ctx, latest, columns=list(full.names), engine=engine)
        before = current.num_rows
        sources.append(records.conform(current.append_column(
            DELETE_FLAG, pa.repeat(pa.scalar(False, pa.bool_()), current.num_rows)), target))
    sources.append(incoming)
    chosen = engine or ("sorted" if lsm else "hash")
    try:
        merged = merge_to_table(sources, ctx.spec, engine=chosen).select(full.names)
    except InputError:  # an unsorted older base (a table switched to lsm_tree): merge by hash, sort below
        if chosen == "hash":
            raise
        chosen = "hash"
        merged = merge_to_table(sources, ctx.spec, engine=chosen).select(full.names)
    if lsm and chosen == "hash":
        merged = records.sort_by_key(merged)
    deleted = max(0, before - merged.num_rows) if is_delete else 0
    if is_delete and deleted == 0:
        return []
    size = parquet_write.write_parquet(folder / name, merged, is_sorted=lsm,
                                       hudi_bloom=hudi_bloom.options_for(config.props, config.version))
    written = 0 if is_delete else n
    return [WriteStat(partition, file_id, f"{partition}/{name}" if partition else name, prev,
                      numWrites=merged.num_rows, numInserts=written - num_updates, numUpdateWrites=num_updates,
                      numDeletes=deleted, totalWriteBytes=size, fileSizeInBytes=size, baseFile=name,
                      minRecordKey=_first(merged), maxRecordKey=_last(merged))]


def _write_v1_log(*, config: TableConfig, base_path: TablePath, folder: TablePath, partition: str, file_id: str,
                  rows: pa.Table, latest: FileSlice, instant: str, token: str, task: int, is_delete: bool,
                  ordering: str | None, num_updates: int, user_schema: pa.Schema,
                  num_deletes: int | None = None) -> list[WriteStat]:
    """A MERGE_ON_READ write to a compatibility table: one v1 (#HUDI#) log file, Avro data or delete block."""
    n = rows.num_rows
    base_instant = latest.base_instant
    if config.version < 8:  # v6 names the slice: the one a pending compaction opens, if any
        base_instant = compat.pending_compaction_instant(base_path, config, partition, file_id) or base_instant
    name = compat.v1_log_name(config, folder, file_id, token, instant, base_instant)
    rel = f"{partition}/{name}" if partition else name
    base = latest.base_file.path.name if latest.base_file else ""
    if is_delete:
        cols = {"record_key": rows.column(RECORD_KEY), "partition_path": rows.column(PARTITION_PATH)}
        if ordering and ordering in rows.column_names:
            cols["ordering_val"] = rows.column(ordering)
        size = compat.write_v1_delete_log(folder / name, config, pa.table(cols), instant=instant,
                                          user_schema=user_schema if len(user_schema) else None)
        return [WriteStat(partition, file_id, rel, latest.base_instant, numWrites=0,
                          numDeletes=n if num_deletes is None else num_deletes,
                          totalWriteBytes=size, fileSizeInBytes=size, baseFile=base, logFiles=[name],
                          minRecordKey=_first(rows), maxRecordKey=_last(rows))]
    data = _meta_columns(rows, instant, name, task)
    size = compat.write_v1_data_log(folder / name, config, data, instant=instant)
    return [WriteStat(partition, file_id, rel, latest.base_instant, numWrites=n, numInserts=n - num_updates,
                      numUpdateWrites=num_updates, totalWriteBytes=size, fileSizeInBytes=size, baseFile=base,
                      logFiles=[name], minRecordKey=_first(rows), maxRecordKey=_last(rows))]


def _first(rows: pa.Table) -> str | None:
    return parquet_write.key_range(rows.column(RECORD_KEY))[0] if rows.num_rows else None


def _last(rows: pa.Table) -> str | None:
    return parquet_write.key_range(rows.column(RECORD_KEY))[1] if rows.num_rows else None


def write_partition_metadata(base_path: TablePath, partitions: Sequence[str], instant: str) -> None:
    """Hudi's `.hoodie_partition_metadata` marker in each partition folder (written once)."""
    for p in partitions:
        if not p:
            continue
        marker = base_path / p / ".hoodie_partition_metadata"
        if marker.is_file():  # one HEAD on an object store
            continue
        text = f"#partition metadata\ncommitTime={instant}\npartitionDepth={len(p.split('/'))}\n"
        if is_local(marker) and marker.exists():  # a folder of that name (an object store has none: no LIST)
            continue
        # a new partition folder (never through a link out of the table), the file whole or not at all
        atomic.replace_file(marker, text.encode(), fsync=False, mkdir=True)
