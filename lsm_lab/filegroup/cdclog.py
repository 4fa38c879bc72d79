"""The CDC log a write adds to one file group: what changed, with before and after images.

    write_file_group(rows → file group G, instant t)          (filegroup/write.py)
      │ data file written as always (base or log)
      ▼ on a table with hoodie.table.cdc.enabled=true:
    sources = G's latest slice as the reader merges it (base, logs, delete-log tombstones),
              each cut down to the batch's keys                    (is_in on keys, Arrow)
    before  = merge(sources)          after = merge(sources + batch)   (the table's merge semantics)
      key in after, written by t, not in before  → "i"   (before null)
      key in after, written by t, in before      → "u"
      key in before, not in after                → "d"   (after null)
      anything else (a delete of an absent key, an update an older ordering value loses,
      also to a tombstone that still waits in a delete log)                            → nothing
    DATA_BEFORE_AFTER: after images are read back from the data file just written (its meta
    columns — sequence number, file name — are the data writer's)
      │
      ▼
    <fileId>_<token>_<t>_1.cdc.parquet    in G, same commit (format/cdc.py: columns per mode)
    write stat of G: cdcStats = {path: bytes}  ({} when G had no change)  ← read_cdc trusts this

The before images are read here, before the data write, and the same probe
gives the write its update count (`numUpdateWrites`: the batch's keys the
slice's files hold): a CDC table pays one read of the touched slices, other
tables nothing.  Everything is Arrow kernels (`is_in` on keys, the merge engines); no
per-record Python.

Markers: `planned` names the CDC log before any data file is written, so a
rollback (or the next writer, after a crash) removes it with the rest of the
dead write.

Simplified compared with Apache Hudi: the change of a file group is computed
from the merged slice after the batch is tagged, not record by record in the
write handle; compatibility tables with v1 (#HUDI#) logs write no CDC logs
(their changes are inferred by `Table.read_cdc`).

Taught in: notebooks/13_change_data_capture.ipynb
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.filegroup.fsview import FileSlice
from lsm_lab.filegroup.read import ReadContext, load_sources, needed_columns, target_schema
from lsm_lab.format import cdc, naming, parquet_read
from lsm_lab.merge import merge_to_table, records
from lsm_lab.merge.records import COMMIT_TIME, DELETE_FLAG, PARTITION_PATH, RECORD_KEY
from lsm_lab.storage import TablePath
from lsm_lab.timeline.config import TableConfig
from lsm_lab.timeline.metadata import WriteStat


def writes_cdc(config: TableConfig) -> bool:
    """Whether writes to this table add CDC logs (CDC enabled, native logs)."""
    return config.cdc_enabled and config.log_format_version == 2


def log_name(file_id: str, token: str, instant: str) -> str:
    return naming.native_log_file_name(file_id, token, instant, 1, naming.NATIVE_CDC)


def planned(config: TableConfig, file_id: str, token: str, instant: str) -> list[tuple[str, str]]:
    """(file name, marker IO type) of the CDC log a write may add to a file group (none without CDC)."""
    return [(log_name(file_id, token, instant), "APPEND")] if writes_cdc(config) else []


def _struct(table: pa.Table, image: pa.DataType) -> pa.Array:
    """The rows of `table` as one struct array of type `image` (its columns are the struct's fields)."""
    if table.num_rows == 0:
        return pa.array([], image)
    return pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns], fields=list(image))


def image_type(ctx: ReadContext) -> pa.StructType:
    """The struct type of a before/after image in a CDC log: the table's full schema, nullable fields."""
    return pa.struct([pa.field(f.name, f.type, True) for f in ctx.full_schema])


CHANGE_SCHEMA_FIELDS = (cdc.OP, cdc.RECORD_KEY, cdc.BEFORE, cdc.AFTER)


def changes(ctx: ReadContext, latest: FileSlice | None, rows: pa.Table, instant: str, op: str, *,
            images: bool = True) -> pa.Table:
    """The changes `rows` (a prepared batch for one file group) make to it: op, record_key, before, after.

    Images are structs of the table's full schema (meta columns first); one row
    per changed key, sorted by key.  `images=False` (OP_KEY_ONLY) reads and keeps
    only the columns the merge needs (key, commit time, ordering field).
    """
    return changes_and_stored(ctx, latest, rows, instant, op, images=images)[0]


def changes_and_stored(ctx: ReadContext, latest: FileSlice | None, rows: pa.Table, instant: str, op: str, *,
                       images: bool = True) -> tuple[pa.Table, int]:
    """`changes`, and how many of the batch's keys the slice's files hold (deleted keys included).

    The count is the write's `numUpdateWrites` (`write.stored_count`), taken from the
    slice's rows this probe cuts down to the batch's keys anyway: a CDC write reads
    the slice once, not once to count and once for the images."""
    full = ctx.full_schema
    if not images:
        keep = {RECORD_KEY, COMMIT_TIME, PARTITION_PATH, *([ctx.spec.ordering] if ctx.spec.ordering else [])}
        full = pa.schema([f for f in full if f.name in keep])
    image = pa.struct([pa.field(f.name, f.type, True) for f in full])
    schema = pa.schema([pa.field(cdc.OP, pa.string()), pa.field(cdc.RECORD_KEY, pa.string()),
                        pa.field(cdc.BEFORE, image), pa.field(cdc.AFTER, image)])
    needed = needed_columns(ctx, list(full.names))
    target = target_schema(ctx, needed)
    keys = rows.column(RECORD_KEY).combine_chunks()
    # the slice's files as the reader merges them (tombstones of MERGE_ON_READ delete logs included),
    # cut down to the batch's keys: merged alone they give the before images, with the batch the after
    sources = load_sources(ctx, latest, needed)[0] if latest is not None else []
    sources = [src.filter(pc.is_in(src.column(RECORD_KEY), value_set=keys)) for src in sources]
    hits = [c for src in sources for c in src.column(RECORD_KEY).chunks if len(c)]
    stored = len(pc.unique(pa.chunked_array(hits, pa.string()).combine_chunks())) if hits else 0
    n = rows.num_rows
    incoming = rows.append_column(COMMIT_TIME, pa.repeat(pa.scalar(instant, pa.string()), n)) \
        .append_column(DELETE_FLAG, pa.repeat(pa.scalar(op == "delete", pa.bool_()), n))
    incoming = records.conform(incoming.select([c for c in incoming.column_names if c in target.names]), target)
    before = (merge_to_table(sources, ctx.spec, engine="hash").select(full.names) if sources
              else full.empty_table())
    merged = merge_to_table([*sources, incoming], ctx.spec, engine="hash").select(full.names)
    before_keys = before.column(RECORD_KEY).combine_chunks()
    written = merged.filter(pc.equal(merged.column(COMMIT_TIME), instant))  # the batch's rows that won the merge
    pos = pc.index_in(written.column(RECORD_KEY), value_set=before_keys)
    upserts = pa.table({
        cdc.OP: pc.if_else(pc.is_valid(pos), pa.scalar(cdc.UPDATE), pa.scalar(cdc.INSERT)),
        cdc.RECORD_KEY: written.column(RECORD_KEY),
        cdc.BEFORE: _struct(before, image).take(pos) if written.num_rows else pa.array([], image),
        cdc.AFTER: _struct(written, image),
    }, schema=schema)
    deleted = before.filter(pc.invert(pc.is_in(before_keys, value_set=merged.column(RECORD_KEY).combine_chunks())))
    deletes = pa.table({
        cdc.OP: pa.repeat(pa.scalar(cdc.DELETE), deleted.num_rows),
        cdc.RECORD_KEY: deleted.column(RECORD_KEY),
        cdc.BEFORE: _struct(deleted, image),
        cdc.AFTER: pa.nulls(deleted.num_rows, image),
    }, schema=schema)
    return pa.concat_tables([upserts, deletes]).sort_by(cdc.RECORD_KEY), stored


def probe(config: TableConfig, ctx: ReadContext, latest: FileSlice | None, rows: pa.Table, instant: str,
          op: str) -> tuple[pa.Table, int]:
    """`changes_and_stored` with the images the table's CDC mode logs (before the data file is written)."""
    return changes_and_stored(ctx, latest, rows, instant, op, images=config.cdc_mode != cdc.OP_KEY_ONLY)


def write(stats: list[WriteStat], *, base_path: TablePath, config: TableConfig, ctx: ReadContext,
          partition: str, file_id: str, rows: pa.Table, latest: FileSlice | None, instant: str, op: str,
          token: str, found: pa.Table | None = None) -> list[WriteStat]:
    """Add the CDC log of one file group's write (when it changed anything) and record it in its write stat.

    `stats` are what the data write returned; without any, the write changed
    nothing and no CDC log is written.  The first stat gets `cdcStats`
    (`HoodieWriteStat.cdcStats`: log path → bytes; empty when nothing changed).
    `found`: the changes `probe` gave before the data write (else computed here).
    """
    if not stats or not writes_cdc(config):
        return stats
    if found is None:
        found = probe(config, ctx, latest, rows, instant, op)[0]
    cdc_stats: dict[str, int] = {}
    if found.num_rows and config.cdc_mode == cdc.DATA_BEFORE_AFTER and op != "delete":
        found = _stored_after_images(ctx, base_path, stats[0].path, found)
    if found.num_rows:
        name = log_name(file_id, token, instant)
        folder = base_path / partition if partition else base_path
        log_rows = cdc.to_log_rows(found, config.cdc_mode, image_type(ctx), instant)
        size = cdc.write_cdc_log(folder / name, log_rows, instant_time=instant, upstream=config.upstream_format,
                                 table_name=config.name)
        cdc_stats[f"{partition}/{name}" if partition else name] = size
    stats[0].cdcStats = cdc_stats
    return stats


def _stored_after_images(ctx: ReadContext, base_path: TablePath, rel: str, found: pa.Table) -> pa.Table:
    """`found` with each after image replaced by the row as the data file just written stores it.

    The merge above gives the user columns; the meta columns (`_hoodie_commit_seqno`,
    `_hoodie_file_name`) are set by the data writer, in its own row order.
    """
    path = base_path.joinpath(*rel.split("/"))
    stored = parquet_read.read_parquet(path, list(ctx.full_schema.names))
    keys = found.column(cdc.RECORD_KEY).combine_chunks()
    stored = records.conform(stored.filter(pc.is_in(stored.column(RECORD_KEY), value_set=keys)), ctx.full_schema)
    pos = pc.index_in(keys, value_set=stored.column(RECORD_KEY).combine_chunks())
    image = found.schema.field(cdc.AFTER).type
    after = pc.if_else(pc.is_valid(pos), _struct(stored, image).take(pos), found.column(cdc.AFTER).combine_chunks())
    return found.set_column(found.schema.get_field_index(cdc.AFTER), cdc.AFTER, after)


__all__ = ["changes", "changes_and_stored", "image_type", "log_name", "planned", "probe", "write", "writes_cdc"]
