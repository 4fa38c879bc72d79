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

The metadata table's indexes (column stats, record and secondary indexes) skip
slices before this module sees them (`Table.scan` calls table/mdt_use.py first).

Simplified compared with Apache Hudi: partition pruning understands filters on
partition columns given as `(column, op, value)` tuples only; no expression index.

Taught in: notebooks/06_merge_semantics.ipynb
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lsm_lab.errors import InputError, LsmLabError
from lsm_lab.filegroup.fsview import FileSlice
from lsm_lab.filegroup.read import ReadContext, needed_columns, read_slice
from lsm_lab.format import parquet_footer
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


@dataclass(frozen=True)
class ScanPlan:
    """What a scan reads, decided once: the slices left after pruning, the columns, the filter.

    `read_cols`: what each slice read returns (`out_cols` plus the filter's columns; every column when
    the filter is an expression, whose columns are not listed); `pruned`: the key-pruned reader when
    the filter names record keys; `skipped`: slices the statistics ruled out (`stats_prune`)."""

    ctx: ReadContext
    slices: tuple[FileSlice, ...]
    out_cols: tuple[str, ...]
    read_cols: tuple[str, ...] | None
    expr: pc.Expression | None
    filter: FilterLike | None
    engine: str | None
    pruned: key_lookup.PrunedReader | None
    skipped: int = 0

    @property
    def schema(self) -> pa.Schema:
        """The scan's output schema: the asked-for columns with the table's types."""
        known = self.ctx.full_schema
        return pa.schema([known.field(n) if n in known.names else pa.field(n, pa.null()) for n in self.out_cols])

    def finish(self, part: pa.Table) -> pa.Table:
        """A merged slice (or batch) with the filter applied, the asked-for columns, the table's types."""
        if self.expr is not None:
            try:
                part = part.filter(self.expr)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:  # column, value type
                raise InputError(f"cannot apply the filter {self.filter!r}: {exc}".split("\n")[0]) from None
        return part.select(list(self.out_cols))

    def empty(self) -> pa.Table:
        return _empty(self.ctx, list(self.out_cols))


def plan_scan(ctx: ReadContext, slices: Iterable[FileSlice], *, columns: Sequence[str] | None = None,
              filter: FilterLike | None = None, engine: str | None = None) -> ScanPlan:
    """Check the arguments, prune the slices (keys, statistics) and fix the columns to read."""
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
    read_cols: list[str] | None = list(dict.fromkeys(out_cols + needed_for_filter))
    if isinstance(filter, pc.Expression) and columns is not None:
        read_cols = list(ctx.full_schema.names)  # the expression's columns are not listed: read them all
    items = list(slices)
    kept = stats_prune(ctx, items, filter)
    pred = key_lookup.key_predicate(ctx.config, ctx.full_schema, filter)
    # a key filter reads like a lookup: the key index rules files out before their footers are read
    pruned = None if pred is None else key_lookup.PrunedReader(ctx, pred, columns=read_cols, engine=engine,
                                                               index=key_lookup.load_index(ctx, kept))
    return ScanPlan(ctx, tuple(kept), tuple(out_cols), None if read_cols is None else tuple(read_cols), expr,
                    filter, engine, pruned, len(items) - len(kept))


def snapshot(ctx: ReadContext, slices: Iterable[FileSlice], *, columns: Sequence[str] | None = None,
             filter: FilterLike | None = None, engine: str | None = None,
             progress: Callable[[Iterable[FileSlice]], Iterable[FileSlice]] | None = None) -> pa.Table:
    """Merge every slice and concatenate; apply the filter after the merge."""
    return read_plan(plan_scan(ctx, slices, columns=columns, filter=filter, engine=engine), progress=progress)


def read_plan(plan: ScanPlan, *,
              progress: Callable[[Iterable[FileSlice]], Iterable[FileSlice]] | None = None) -> pa.Table:
    """Every slice of the plan merged in memory (READ_THREADS at once), filtered, concatenated."""
    ctx, items, engine = plan.ctx, list(plan.slices), plan.engine
    read_cols = None if plan.read_cols is None else list(plan.read_cols)
    pruned = plan.pruned
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
        pieces = [plan.finish(part) for _, part in zip(progress(items) if progress else items, parts)]
    if not pieces:
        return plan.empty()
    schema = plan.schema
    return pa.concat_tables([p.cast(schema) for p in pieces])


# --------------------------------------------------------------------------- statistics: whole slices only
#: ops whose truth on a row group can be judged from its min, max and null count
_STATS_OPS = frozenset({"=", "==", "<", "<=", ">", ">=", "in"})


def stats_prune(ctx: ReadContext, slices: Sequence[FileSlice], filter: FilterLike | None) -> list[FileSlice]:
    """The slices some row of which can satisfy the filter's `(column, op, value)` conjuncts on user
    columns, judged by Parquet row-group statistics.

    **The MOR rule.**  A log can change a base row's value, so a base file whose statistics rule the filter
    out can still yield a matching row after the merge (the log's version).  But every merged row is one
    whole version from one file of its slice (no partial updates), so a slice is skipped only when
    *every* data file of it (base and data logs; delete logs add no row) is ruled out; a file is never
    skipped on its own.  A slice with a v1 log (Avro blocks, no statistics) is always read.  The whole
    filter is applied again after the merge."""
    conds = [(c, str(op).lower(), v) for c, op, v in _tuples(filter)
             if str(op).lower() in _STATS_OPS and c in ctx.schema.names and c not in records.META_COLUMNS
             and c not in ctx.config.partition_by]
    if not conds:
        return list(slices)
    return [fs for fs in slices if _slice_may_match(fs, conds)]


def _slice_may_match(fs: FileSlice, conds: list[tuple[str, str, Any]]) -> bool:
    files = [f for f in ((fs.base_file,) if fs.base_file else ()) + fs.log_files if not f.name.is_delete]
    if any(f.name.log_format == 1 or f.name.ext != "parquet" for f in files if f.name.is_log):
        return True
    if fs.base_file is not None and fs.base_file.name.ext != "parquet":
        return True
    try:
        return any(_file_may_match(parquet_footer.read_footer(f.path, f.size)[0], conds) for f in files)
    except LsmLabError:
        return True  # a damaged footer: the read names it


def _file_may_match(md: pq.FileMetaData, conds: list[tuple[str, str, Any]]) -> bool:
    """Whether a row group of the file can satisfy every condition (a column the file lacks: it can)."""
    names = {md.schema.column(j).path: j for j in range(md.num_columns)}
    conds = [t for t in conds if t[0] in names]
    if md.num_rows == 0:
        return False
    return any(all(_cond_may_hold(md.row_group(i).column(names[c]), op, v) for c, op, v in conds)
               for i in range(md.num_row_groups))


def _cond_may_hold(col: pq.ColumnChunkMetaData, op: str, value: Any) -> bool:
    st = col.statistics
    if st is None or not st.has_min_max:
        return st is None or st.null_count != col.num_values  # all null: no comparison holds
    lo, hi = st.min, st.max
    try:
        if op in ("=", "=="):
            return bool(lo <= value <= hi)
        if op == "in":
            return any(v is not None and lo <= v <= hi for v in value)
        if op == "<":
            return bool(lo < value)
        if op == "<=":
            return bool(lo <= value)
        if op == ">":
            return bool(hi > value)
        return bool(hi >= value)
    except TypeError:  # a value the statistics do not compare with (types differ): read the file
        return True


def _empty(ctx: ReadContext, columns: list[str]) -> pa.Table:
    """No row: the asked-for columns with the table's types.  A table that no write has completed on
    has no schema yet, so its columns come back empty and typed `null`; otherwise an unknown column is
    an InputError, as on a read that finds rows."""
    known = ctx.full_schema
    if any(n not in records.META_COLUMNS for n in ctx.schema.names):
        needed_columns(ctx, columns)
    return pa.schema([known.field(n) if n in known.names else pa.field(n, pa.null()) for n in columns]).empty_table()


__all__ = ["ScanPlan", "filter_expression", "partition_values", "plan_scan", "prune_partitions", "read_plan", "snapshot",
           "stats_prune"]
