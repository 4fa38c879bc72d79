"""Scans: a whole-table read with a filter — partitions pruned, keys pruned, slices merged.

    filter ──► partition tuples ──► prune_partitions: folders that can match
           ──► key predicate    ──► lookup.PrunedReader: files, row groups, rows that can hold the keys
           ──► expression       ──► applied to each merged slice (read.read_slice)

A filter on the record key (`_hoodie_record_key`, or the key field(s) of a
table lsm_lab created: `=`, `in`, ranges) also prunes inside each slice: files
by key range and bloom filter, row groups by statistics, rows by binary search
in sorted files (lsm_lab/table/lookup.py), and files the key index rules out
are skipped before their footers are read, as in a lookup.  The full filter is
still applied after the merge, so pruning changes what is read, never what is
returned.

This module sits above both filegroup/read.py (one slice) and table/lookup.py
(key pruning), which itself reads slices through filegroup/read.py.

Simplified compared with Apache Hudi: partition pruning understands filters on
partition columns given as `(column, op, value)` tuples only; no column-stats
index, no expression index.

Taught in: notebooks/06_merge_semantics.ipynb
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lsm_lab.errors import InputError
from lsm_lab.filegroup.fsview import FileSlice
from lsm_lab.filegroup.read import ReadContext, needed_columns, read_slice
from lsm_lab.merge import check_engine, records
from lsm_lab.table import lookup as key_lookup
from lsm_lab.table.predicate import FilterLike
from lsm_lab.timeline.config import TableConfig

#: slices merged at once by a snapshot read (two per core was tried: no faster when the machine is idle,
#: since the Python between Arrow's kernels holds the GIL; 0.44 s against 0.39 s with 2 threads on 2 cores)
READ_THREADS = max(1, min(4, os.cpu_count() or 1))

# --------------------------------------------------------------------------- filters and pruning


def filter_expression(filter: FilterLike | None) -> pc.Expression | None:
    if filter is None:
        return None
    if isinstance(filter, pc.Expression):
        return filter
    try:
        return pq.filters_to_expression(filter)
    except (TypeError, ValueError) as exc:
        raise InputError(f"invalid filter {filter!r}: {exc}") from None


def _tuples(filter: FilterLike | None) -> list[tuple[str, str, Any]]:
    """The conjunctive (column, op, value) tuples of a filter, for pruning (empty if not of that form)."""
    if isinstance(filter, list) and all(isinstance(t, tuple) and len(t) == 3 for t in filter):
        return list(filter)
    return []


def partition_values(config: TableConfig, partition: str) -> dict[str, str]:
    if not config.partition_by:
        return {}
    pieces = partition.split("/") if partition else []
    values: dict[str, str] = {}
    for field_name, piece in zip(config.partition_by, pieces):
        values[field_name] = piece.split("=", 1)[1] if "=" in piece else piece
    return values


def prune_partitions(config: TableConfig, schema: pa.Schema, partitions: Iterable[str],
                     filter: FilterLike | None) -> list[str]:
    """Partitions whose values can satisfy the partition-column part of a tuple filter."""
    parts = list(partitions)
    conds = [t for t in _tuples(filter) if t[0] in config.partition_by]
    if not conds:
        return parts
    expr = filter_expression(conds)  # InputError for a malformed tuple
    fields = [schema.field(c) if c in schema.names else pa.field(c, pa.string()) for c in config.partition_by]
    keep = []
    for p in parts:
        vals = partition_values(config, p)
        row = {}
        for f in fields:
            raw = vals.get(f.name)
            try:
                row[f.name] = pa.array([raw], pa.string()).cast(f.type) if raw is not None else pa.nulls(1, f.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                row[f.name] = pa.nulls(1, f.type)
        one = pa.table(row)
        try:
            if one.filter(expr).num_rows:
                keep.append(p)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            keep.append(p)  # cannot evaluate on the folder name: read it
    return keep


def snapshot(ctx: ReadContext, slices: Iterable[FileSlice], *, columns: Sequence[str] | None = None,
             filter: FilterLike | None = None, engine: str | None = None,
             progress: Callable[[Iterable[FileSlice]], Iterable[FileSlice]] | None = None) -> pa.Table:
    """Merge every slice and concatenate; apply the filter after the merge."""
    check_engine(engine)
    out_cols = list(columns) if columns is not None else list(ctx.full_schema.names)
    expr = filter_expression(filter)
    needed_for_filter: list[str] = []
    if isinstance(filter, list):
        needed_for_filter = [t[0] for t in _tuples(filter)]
    unknown = [c for c in needed_for_filter if c not in ctx.full_schema.names]
    if unknown:
        raise InputError(f"unknown filter column{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                         f"the table has {', '.join(ctx.full_schema.names)}")
    read_cols = list(dict.fromkeys(out_cols + needed_for_filter))
    items = list(slices)
    pred = key_lookup.key_predicate(ctx.config, ctx.full_schema, filter)
    # a key filter reads like a lookup: the key index rules files out before their footers are read
    pruned = None if pred is None else key_lookup.PrunedReader(ctx, pred, columns=read_cols, engine=engine,
                                                               index=key_lookup.load_index(ctx, items))
    # with two slices or more for every read thread, each file is decoded on its slice's thread: Arrow's own
    # column threads would cost CPU (~25% of the decoding) and find no idle core; with fewer, they keep the
    # cores busy while the last slices are merged
    arrow_threads = len(items) < 2 * READ_THREADS
    with ThreadPoolExecutor(max_workers=READ_THREADS, thread_name_prefix="lsm_lab-read") as pool:
        # whole slices merged in parallel (Arrow reads, decodes and sorts without the GIL); at most
        # READ_THREADS slices in flight beyond the ones already merged, results kept in slice order
        if pruned is None:
            parts: Iterable[pa.Table] = pool.map(lambda fs: read_slice(ctx, fs, columns=read_cols, engine=engine,
                                                                       commit_time=False, use_threads=arrow_threads),
                                                 items)
        else:  # only the files, row groups and rows that can hold the keys; same rows after the filter
            parts = map(pruned.read_slice, items)
        pieces = _filtered_pieces(progress(items) if progress else items, parts, expr, filter, out_cols)
    if not pieces:
        return _empty(ctx, out_cols)
    schema = pa.schema([ctx.full_schema.field(n) for n in out_cols])
    return pa.concat_tables([p.cast(schema) for p in pieces])


def _empty(ctx: ReadContext, columns: list[str]) -> pa.Table:
    """No row: the asked-for columns with the table's types.  A table that no write has completed on
    has no schema yet, so its columns come back empty and typed `null`; otherwise an unknown column is
    an InputError, as on a read that finds rows."""
    known = ctx.full_schema
    if any(n not in records.META_COLUMNS for n in ctx.schema.names):
        needed_columns(ctx, columns)
    return pa.schema([known.field(n) if n in known.names else pa.field(n, pa.null()) for n in columns]).empty_table()


def _filtered_pieces(shown: Iterable[FileSlice], parts: Iterable[pa.Table], expr: Any, filter: Any,
                     out_cols: list[str]) -> list[pa.Table]:
    """Each merged slice with the filter applied; `shown` advances the progress bar in step."""
    pieces: list[pa.Table] = []
    for _, part in zip(shown, parts):
        if expr is not None:
            try:
                part = part.filter(expr)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:  # column, value type
                raise InputError(f"cannot apply the filter {filter!r}: {exc}".split("\n")[0]) from None
        pieces.append(part.select(out_cols))
    return pieces


__all__ = ["filter_expression", "partition_values", "prune_partitions", "snapshot"]
