"""Which deletes really delete: a delete of an absent key changes nothing and must not be counted.

A merge-on-read delete is a delete log: it names keys, and the reader drops
them when it merges the slice.  Writing every requested key would count (and
store) deletes of keys that are not in the table, or that a newer ordering
value keeps.  Before the delete log is written, the deletes are merged with the
key, commit time and ordering columns of the slice they target:

    slice (key, commit time, ordering)  +  deletes (flag = true)  ──merge──►  survivors
    live deletes = deletes whose key is not among the survivors

so `records_deleted` counts what the merge removes.  Every requested delete
is still written: under event-time ordering a delete of an absent key is a
tombstone that wins over a later insert with a smaller ordering value, as in Hudi.

Only the rows of the keys to delete take part: each file of the slice is read
(three columns) and filtered to those keys before the merge, so the merge is
as small as the batch, not as large as the slice.  The base file's keys come
from the per-process cache of base-file key columns (`posmerge.base_keys`, the
one the positions of the same delete log use), so only its commit time and
ordering columns are decoded (the key strings were two thirds of the read).

Simplified compared with Apache Hudi: Hudi counts every requested delete;
lsm_lab reads the slice's keys first to count (one extra read of three
columns per touched file group).

Taught in: notebooks/04_log_format_v2.ipynb
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.filegroup import posmerge
from lsm_lab.filegroup.fsview import FileSlice
from lsm_lab.filegroup.read import ReadContext, _allowed, data_source, load_sources, needed_columns, target_schema
from lsm_lab.format import parquet_read
from lsm_lab.merge import merge_to_table, records
from lsm_lab.merge.records import COMMIT_TIME, DELETE_FLAG, RECORD_KEY


def live_deletes(ctx: ReadContext, latest: FileSlice, rows: pa.Table, instant: str) -> pa.Table:
    """The delete rows that remove a live record of the slice when merged with it (the ones to count).

    Merges only the key, commit time and ordering columns of the slice with the
    deletes, so a delete of an absent key, or one an event-time ordering makes
    lose, is not counted.
    """
    spec = ctx.spec
    cols = [RECORD_KEY, COMMIT_TIME] + ([spec.ordering] if spec.ordering else [])
    # the slice's files keep only the rows of the keys to delete (a key merges with its own versions only,
    # so the merge of these few rows is the slice's merge restricted to them)
    wanted = records.one_array(rows.column(RECORD_KEY))
    needed = needed_columns(ctx, cols)
    base = _base_rows(ctx, latest, needed, wanted)
    if base is not None:  # the logs only: the base's rows came with its cached keys
        latest = dataclasses.replace(latest, base_file=None)
    sources, _ = load_sources(ctx, latest, needed)
    sources = [s.filter(pc.is_in(s.column(RECORD_KEY), value_set=wanted)) for s in sources]
    if base is not None:
        sources.insert(0, base)
    if not sources:
        return rows.slice(0, 0)
    current = merge_to_table(sources, spec, engine="hash").select(needed)
    hit = rows.filter(pc.is_in(rows.column(RECORD_KEY), value_set=current.column(RECORD_KEY).combine_chunks()))
    if hit.num_rows == 0:
        return hit
    full = ctx.full_schema
    target = pa.schema([full.field(c) for c in cols] + [pa.field(DELETE_FLAG, pa.bool_(), False)])
    old = records.conform(current.append_column(DELETE_FLAG, pa.repeat(pa.scalar(False, pa.bool_()), current.num_rows)),
                          target)
    new = hit.append_column(COMMIT_TIME, pa.repeat(pa.scalar(instant, pa.string()), hit.num_rows))
    new = records.conform(new.append_column(DELETE_FLAG, pa.repeat(pa.scalar(True, pa.bool_()), hit.num_rows)), target)
    survivors = merge_to_table([old, new], spec, engine="hash").column(RECORD_KEY).combine_chunks()
    return hit.filter(pc.invert(pc.is_in(hit.column(RECORD_KEY), value_set=survivors)))


def _base_rows(ctx: ReadContext, fs: FileSlice, needed: list[str], wanted: pa.Array) -> pa.Table | None:
    """The base file's rows of the `wanted` keys as a merge source, its key column from `posmerge.base_keys`
    and only the other `needed` columns read; None (read it as any other file) when the file stores no
    usable keys (meta fields not populated, a null key, a non-Parquet base)."""
    f = fs.base_file
    if f is None or f.name.ext != "parquet" or not ctx.config.populate_meta_fields:
        return None
    keys = posmerge.base_keys(f)
    if keys.null_count:
        return None
    rest = parquet_read.read_parquet(f.path, [c for c in needed if c != RECORD_KEY], allowed=_allowed(ctx))
    if rest.num_rows != len(keys):
        return None
    hit = pc.is_in(keys, value_set=wanted)
    rows = rest.append_column(RECORD_KEY, keys).filter(hit)
    return data_source(ctx, rows, target_schema(ctx, needed), fs.partition, f.path)


__all__ = ["live_deletes"]
