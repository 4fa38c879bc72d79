"""Compaction: run a plan, file group by file group — L0 + L1 → L1 (FULL) or L0 → L0 (LOG).

    schedule (table lock)          execute (no lock, heartbeat held)               finish (table lock)
    ─────────────────────          ─────────────────────────────────               ───────────────────
    plan = planner.make_plan       per operation of the plan:                      <t>_<c>.commit
    <t>.compaction.requested        FULL: base + logs ──merge──► new base @ t       (logcompaction:
    (or .logcompaction.requested)   LOG:  logs ──fold──► compacted log(s) @ t        <t>_<c>.deltacommit)
                                    markers first, files written atomically

**FULL** streams every file of the slice (`read.iter_sources`: batches, no
pre-buffering) through the table's merge engine — `sorted` for `lsm_tree`
(memory O(files x batch)), `hash` otherwise or when forced — and writes the
survivors as one new base file named with the compaction instant, sorted by
key for `lsm_tree`, through the one data-file writer (`format/parquet_write.py`:
the same blooms, sorting columns and row groups as a bulk insert, streamed
with bounded memory).  Records keep their meta
columns (`_hoodie_commit_time` stays the time of the write that produced the
record, so incremental reads still work); `_hoodie_file_name` names the new
file and is never read.  With a simple key generator and no delete log in the
slice, the sorted merge runs on the key field itself and `_hoodie_record_key`
is written as that same merged array (`_key_twin`): the two columns hold the
same strings, so the merge cuts, sorts and copies one of them, not both.

**LOG** folds the slice's logs into at most three log files at the
compaction instant, all carrying `COMPACTED_BLOCK_TIMES` (the instants they
replace) in their footer header:

    version 1  .delete.parquet  delete-by-key "resets" (event-time ordering only: a key whose logs
                                hold a null-ordering delete followed by newer records — the base
                                must not win over them)
    version 2  .parquet         the surviving records, one per key, sorted
    version 3  .delete.parquet  keys whose last state is a delete (with its ordering value)

A v2 data log cannot hold a delete, so deletes need a delete log; with them
the compacted logs merge with the base exactly as the original logs did.  The
file-system view hides the replaced logs and puts the compacted ones where the
*latest replaced log* was, so a write that completed while the log compaction
ran still wins over it (`layout.fsview`, rule 4).

**Visibility.** Nothing is visible before the completed instant: files of a
pending compaction belong to no completed instant.  Writes that complete
while the compaction runs land in the slice it opens (their completion time is
after the plan's instant), so they are never lost.  A runner that dies leaves
an inflight instant; the next writer (or `compact`) removes its files and
puts the plan back to requested, and it runs again from scratch.

**Triggers** for inline compaction after a write (`hoodie.compact.inline=true`):
`hoodie.compact.inline.trigger.strategy` = NUM_COMMITS (default) |
TIME_ELAPSED | NUM_OR_TIME | NUM_AND_TIME, with
`hoodie.compact.inline.max.delta.commits` (5) and
`hoodie.compact.inline.max.delta.seconds` (3600).

Simplified compared with Apache Hudi: operations run one after the other in
this process (Hudi spreads them over Spark tasks); log compaction folds the
logs of one file group in memory (they are small by the planner's choice);
no record-position (RECORD_POSITIONS) bookkeeping.

Taught in: notebooks/07_compaction.ipynb
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from lsm_lab import checks
from lsm_lab.errors import ConflictError, CorruptFileError, InputError, SchemaError, TimelineError
from lsm_lab.filegroup import fsview
from lsm_lab.filegroup import write as writer
from lsm_lab.filegroup.fsview import DataFile
from lsm_lab.filegroup.planner import (
    FULL,
    LOG,
    PLANNER_KEYS,
    STRATEGIES,
    CompactionPlan,
    Operation,
    PlannerConfig,
    make_plan,
    pending_file_groups,
    pending_plans,
    read_plan,
)
from lsm_lab.filegroup.read import ReadContext, iter_sources, key_from_field
from lsm_lab.format import hudi_bloom, keyindex, naming, parquet_write
from lsm_lab.format import log_v2 as v2
from lsm_lab.merge import SORTED_ENGINES, check_engine, choose_engine, fell_back, merge_sources, merge_to_table, records
from lsm_lab.merge.records import DELETE_FLAG, FILE_NAME, PARTITION_PATH, RECORD_KEY
from lsm_lab.merge.semantics import MergeMode, select_winners
from lsm_lab.progress import progress as show_progress
from lsm_lab.services import heartbeat, markers, mdt_write, plancheck
from lsm_lab.services.claim import claim
from lsm_lab.services.clustering import pending_clustering_file_groups
from lsm_lab.services.lock import table_lock
from lsm_lab.services.rollback import reset_compaction, rollback_failed_writes
from lsm_lab.storage import TablePath, is_local
from lsm_lab.table.state import TableState
from lsm_lab.timeline.clock import parse_time
from lsm_lab.timeline.instant import COMPACTION, DELTA_COMMIT, LOG_COMPACTION, Instant, requested_instant
from lsm_lab.timeline.metadata import WriteStat, commit_metadata

# Rows per batch of the streaming merge: a FULL operation holds about two batches per file of the slice
# plus one merge round, so this bounds its memory.  8,192 rows of a ~220-byte-per-row table are ~1.7 MiB;
# with 65,536 the Arrow peak of a 500k-row slice was 102 MiB (the whole slice is 125 MiB), with 8,192
# it is 33 MiB at the same speed (docs/PERFORMANCE.md, "Spark compaction").
BATCH_ROWS = 8_192
COMPACTED_BLOCK_TIMES = "COMPACTED_BLOCK_TIMES"


# --------------------------------------------------------------------------- operations
@dataclass(frozen=True)
class CompactionContext:
    """What one compaction operation needs, as plain data (Spark ships it to the task running it).

    `run_full` and `run_log` take it with an `Operation` of the plan; a runner
    (see `execute`) gets it with the plan's operations."""

    base_path: TablePath
    instant: str
    read: ReadContext
    engine: str | None
    is_lsm: bool
    #: size of each file of the plan, relative to the table ("city=x/name"), from the view's listing:
    #: no HEAD per file on an object store (None: each file is stat'ed)
    sizes: Mapping[str, int] | None = None
    #: begin times of the completed (log) compactions: only their logs can be compacted logs whose
    #: footer says what they replace (None: every log's footer is read to find out)
    compactions: frozenset[str] | None = None
    #: what each completed log compaction replaced, per file group, from its plan (`TableState.log_compactions`):
    #: a compacted log's footer is then not read to learn it
    log_compactions: Mapping[str, Mapping[tuple[str, str], frozenset[str]]] | None = None


def _data_file(ctx: CompactionContext, partition: str, name: str) -> DataFile:
    folder = ctx.base_path / partition if partition else ctx.base_path
    path = folder / name
    parsed = naming.parse(name)
    if parsed is None:
        raise TimelineError(f"the compaction plan names {name!r}, which is not a data file name", path=folder)
    known = ctx.sizes.get(_rel(partition, name)) if ctx.sizes is not None and not is_local(path) else None
    if known is not None:  # listed by the view moments ago: a missing file fails at its GET
        return DataFile(partition, path, parsed, known, ctx.read.completion_of.get(parsed.instant, ""))
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise CorruptFileError(f"compaction {ctx.instant}: the plan's file {name} is missing "
                               "(cleaned or deleted by hand?)", path=path) from None
    return DataFile(partition, path, parsed, size, ctx.read.completion_of.get(parsed.instant, ""))


def _plan_logs(ctx: CompactionContext, op: Operation) -> list[DataFile]:
    """The plan's log files, each compacted log carrying its place in the merge order (fsview rule 4)."""
    logs = [_data_file(ctx, op.partition, n) for n in op.log_files]
    compactions = {f.instant for f in logs} if ctx.compactions is None else ctx.compactions
    group = (op.partition, op.file_id)
    known = {c: fgs[group] for c, fgs in (ctx.log_compactions or {}).items() if group in fgs}
    return fsview.apply_compacted_logs(logs, ctx.read.completion_of, compactions, known)


def _with_file_name(batch: pa.RecordBatch | pa.Table, name: str | pa.Array, names: list[str] | None = None) -> Any:
    """`batch` with `_hoodie_file_name` = `name` on every row; with `names`, the columns `names` in that
    order, the file name added where it belongs (the batch may lack it: a FULL compaction never reads it).

    `name` may be a column of the name repeated (`_name_column`): a slice of it is taken, not a new copy."""
    if isinstance(name, pa.Array) and len(name) >= batch.num_rows:
        col = name.slice(0, batch.num_rows)
    else:
        col = pa.repeat(pa.scalar(name if isinstance(name, str) else name[0].as_py(), pa.string()), batch.num_rows)
    if names is None:
        return batch.set_column(batch.schema.get_field_index(FILE_NAME), FILE_NAME, col)
    out = batch.select([n for n in names if n != FILE_NAME])
    return out.add_column(names.index(FILE_NAME), FILE_NAME, col) if FILE_NAME in names else out


def _rel(partition: str, name: str) -> str:
    return f"{partition}/{name}" if partition else name


def _key_twin(ctx: CompactionContext, files: list[DataFile], chosen: str) -> str | None:
    """The key field a sorted FULL merge may merge on instead of `_hoodie_record_key`, or None.

    With a simple key generator (`read.key_from_field`) a data file's record key is rebuilt from
    that field when it is read: the two columns are one array.  The merge then orders, cuts and
    `take`s the field only, and the written file gets the merged field twice, once under each
    name (`_output_batch`).  A delete log carries its key under `_hoodie_record_key` alone (its
    key field is null), so a slice with one, or with v1 logs, keeps the general path."""
    if chosen not in SORTED_ENGINES or not key_from_field(ctx.read):
        return None
    if any(f.name.is_delete or (f.name.is_log and f.name.log_format == 1) for f in files):
        return None
    return ctx.read.config.record_key[0]


def _output_batch(batch: pa.RecordBatch, schema: pa.Schema, names: pa.Array, twin: str | None) -> pa.RecordBatch:
    """A merged batch in the output file's columns: `_hoodie_file_name` sliced from `names` (the new
    file's name repeated), and with `twin`, `_hoodie_record_key` the same array as that key field."""
    n = batch.num_rows
    have = batch.schema.names
    cols = []
    for name in schema.names:
        if name == FILE_NAME:
            cols.append(names.slice(0, n) if len(names) >= n else
                        pa.repeat(pa.scalar(names[0].as_py(), pa.string()), n))
        elif name == RECORD_KEY and twin is not None:
            key = batch.column(have.index(twin))
            if n and key[0].as_py() == "":  # sorted: an empty key can only come first (Hudi rejects it)
                raise SchemaError(f"record key column '{twin}' has an empty value")
            cols.append(key)
        else:
            cols.append(batch.column(have.index(name)))
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def run_full(ctx: CompactionContext, op: Operation, task: int, *, token: str | None = None) -> WriteStat:
    """L0 + L1 → a new L1 base file at the compaction instant (`token`: a Spark task's write token)."""
    files = ([_data_file(ctx, op.partition, op.base_file)] if op.base_file else []) + \
        _plan_logs(ctx, op)
    needed = list(ctx.read.full_schema.names)
    read_cols = [n for n in needed if n != FILE_NAME]  # every row gets the new file's name: never decoded
    name = naming.base_file_name(op.file_id, token or naming.write_token(task, 0, 0), ctx.instant)
    folder = ctx.base_path / op.partition if op.partition else ctx.base_path
    markers.create_marker(ctx.base_path, ctx.instant, op.partition, name, "MERGE" if op.base_file else "CREATE")
    spec = ctx.read.spec
    out_schema = pa.schema([ctx.read.full_schema.field(n) for n in needed])
    chosen = check_engine(ctx.engine) or ctx.read.default_engine()
    twin = _key_twin(ctx, files, chosen)
    merge_cols = [n for n in read_cols if n != RECORD_KEY] if twin else read_cols
    sources, all_sorted = iter_sources(ctx.read, files, merge_cols, batch_size=BATCH_ROWS)
    where = f"file group {op.partition}/{op.file_id}" if op.partition else f"file group {op.file_id}"
    if chosen in SORTED_ENGINES and not all_sorted:
        chosen = choose_engine(ctx.engine, lsm=ctx.is_lsm, inputs_sorted=False, where=where)
        if twin:  # the hash engine merges on `_hoodie_record_key`: read it (the readers are lazy, nothing was read)
            twin = None
            sources, _ = iter_sources(ctx.read, files, read_cols, batch_size=BATCH_ROWS)
    size = rows = 0
    lo = hi = None
    hudi_opts = hudi_bloom.options_for(ctx.read.config.props, ctx.read.config.version)  # upstream's footer filter
    if chosen in SORTED_ENGINES:
        out = parquet_write.ParquetFileWriter(folder / name, out_schema, is_sorted=ctx.is_lsm, hudi_bloom=hudi_opts)
        merge_spec = replace(spec, key=twin) if twin else spec
        try:
            names = pa.repeat(pa.scalar(name, pa.string()), BATCH_ROWS)  # built once, sliced for every batch
            for batch in merge_sources(sources, merge_spec, engine=chosen, batch_size=BATCH_ROWS):
                out.write(_output_batch(batch, out_schema, names, twin))
            size = out.close()
            rows, lo, hi = out.rows, out.min_key, out.max_key
        except InputError as exc:  # a file was not sorted after all: the hash engine never gives wrong rows
            out.abort()
            chosen = fell_back(chosen, where, str(exc).splitlines()[0])
            sources, _ = iter_sources(ctx.read, files, read_cols, batch_size=BATCH_ROWS)
        except BaseException:
            out.abort()
            raise
    if chosen not in SORTED_ENGINES:
        merged = merge_to_table(sources, spec, engine=chosen, batch_size=BATCH_ROWS) if sources else \
            out_schema.empty_table()
        merged = _with_file_name(merged, name, needed)
        if ctx.is_lsm:
            merged = records.sort_by_key(merged)
        size = parquet_write.write_parquet(folder / name, merged.cast(out_schema), is_sorted=ctx.is_lsm,
                                          hudi_bloom=hudi_opts)
        rows = merged.num_rows
        lo, hi = parquet_write.key_range(merged.column(RECORD_KEY))
    return WriteStat(op.partition, op.file_id, _rel(op.partition, name), op.base_instant or "null",
                     numWrites=rows, totalWriteBytes=size, fileSizeInBytes=size, baseFile=name,
                     minRecordKey=lo, maxRecordKey=hi)


def _log_header(instant: str, replaced: str) -> dict[str, str]:
    return v2.log_metadata(instant, **{COMPACTED_BLOCK_TIMES: replaced})


def _write_compacted_log(ctx: CompactionContext, op: Operation, name: str, rows: pa.Table, *, delete: bool,
                         replaced: str) -> int:
    folder = ctx.base_path / op.partition if op.partition else ctx.base_path
    markers.create_marker(ctx.base_path, ctx.instant, op.partition, name, "APPEND")
    config = ctx.read.config
    if config.upstream_format:  # table version 10: upstream's footer, delete rows already in its schema
        header = _log_header(ctx.instant, replaced)
        schema_json = v2.avro_schema_of(ctx.read.full_schema, config.name)
        if schema_json:
            header["SCHEMA"] = schema_json
        return parquet_write.write_parquet(folder / name, rows, metadata=v2.upstream_footer(header),
                                        key_column=rows.column_names[0] if delete else RECORD_KEY, is_sorted=True)
    meta = {v2.KEY_METADATA: json.dumps(_log_header(ctx.instant, replaced), sort_keys=True),
            v2.KEY_BLOCK_TYPE: v2.BLOCK_DELETE if delete else v2.BLOCK_DATA}
    if delete:
        rows = rows.select(v2.DELETE_SCHEMA.names).cast(v2.DELETE_SCHEMA)
        return parquet_write.write_parquet(folder / name, rows, metadata=meta, key_column="record_key",
                                        is_sorted=True)
    return parquet_write.write_parquet(folder / name, rows, metadata=meta, is_sorted=True)


def _delete_rows(keys: pa.Array, partitions: pa.Array, ordering: pa.Array | None,
                 schema: pa.Schema | None = None) -> pa.Table:
    """Delete-log rows: in `schema` (upstream's delete-log schema, table version 10) or the draft's columns."""
    n = len(keys)
    if schema is not None:
        values = [ordering.cast(f.type) if ordering is not None else pa.nulls(n, f.type) for f in list(schema)[1:]]
        return pa.table([keys, *values], schema=schema)
    ordering_val = v2.encode_ordering(ordering) if ordering is not None else pa.nulls(n, pa.binary())
    return pa.table({"record_key": keys, "ordering_val": ordering_val, "partition_path": partitions},
                    schema=v2.DELETE_SCHEMA)


def run_log(ctx: CompactionContext, op: Operation, task: int, *, token: str | None = None) -> list[WriteStat]:
    """L0 → compacted L0 log(s) at the compaction instant (see the module doc for the three files)."""
    files = _plan_logs(ctx, op)
    if not files:
        return []
    needed = list(ctx.read.full_schema.names)
    readers, _ = iter_sources(ctx.read, files, needed, batch_size=BATCH_ROWS)
    tables = [r.read_all() for r in readers]
    combined = pa.concat_tables(tables) if tables else None
    if combined is None or combined.num_rows == 0:
        return []
    spec = ctx.read.spec
    won = select_winners(combined, spec)
    replaced = ",".join(sorted({f.instant for f in files}))
    token = token or naming.write_token(task, 0, 0)
    event_time = spec.mode is MergeMode.EVENT_TIME_ORDERING and spec.ordering is not None
    stats: list[WriteStat] = []

    def stat(name: str, *, writes: int = 0, deletes: int = 0, size: int, lo: str | None, hi: str | None) -> WriteStat:
        return WriteStat(op.partition, op.file_id, _rel(op.partition, name), op.base_instant or "null",
                         numWrites=writes, numDeletes=deletes, totalWriteBytes=size, fileSizeInBytes=size,
                         baseFile=op.base_file or "", logFiles=[name], minRecordKey=lo, maxRecordKey=hi)

    winners = combined.take(pa.array(won.rows, type=pa.int64()))
    keys = winners.column(RECORD_KEY).combine_chunks()
    parts = winners.column(PARTITION_PATH).combine_chunks()
    ordering = winners.column(spec.ordering).combine_chunks() if event_time else None
    deleted = won.deleted
    native = ctx.read.config.upstream_format
    dschema = (v2.upstream_delete_schema(ctx.read.full_schema, [spec.ordering] if event_time and spec.ordering else [])
               if native else None)
    if event_time:
        assert ordering is not None
        ord_null = np.asarray(ordering.is_null(), dtype=bool)
        resets = won.reset & ~(deleted & ord_null)
        if resets.any():
            mask = pa.array(resets)
            name = naming.log_file_name(op.file_id, token, ctx.instant, 1, delete=True, native=native)
            rows = _delete_rows(keys.filter(mask), parts.filter(mask), None, dschema)
            size = _write_compacted_log(ctx, op, name, rows, delete=True, replaced=replaced)
            lo, hi = parquet_write.key_range(rows.column(0))
            stats.append(stat(name, deletes=rows.num_rows, size=size, lo=lo, hi=hi))
    if (~deleted).any():
        name = naming.log_file_name(op.file_id, token, ctx.instant, 2, native=native)
        data = winners.filter(pa.array(~deleted)).drop_columns([DELETE_FLAG])
        data = _with_file_name(data.select(needed), name)
        size = _write_compacted_log(ctx, op, name, data, delete=False, replaced=replaced)
        lo, hi = parquet_write.key_range(data.column(RECORD_KEY))
        stats.append(stat(name, writes=data.num_rows, size=size, lo=lo, hi=hi))
    if deleted.any():
        mask = pa.array(deleted)
        name = naming.log_file_name(op.file_id, token, ctx.instant, 3, delete=True, native=native)
        rows = _delete_rows(keys.filter(mask), parts.filter(mask),
                            ordering.filter(mask) if ordering is not None else None, dschema)
        size = _write_compacted_log(ctx, op, name, rows, delete=True, replaced=replaced)
        lo, hi = parquet_write.key_range(rows.column(0))
        stats.append(stat(name, deletes=rows.num_rows, size=size, lo=lo, hi=hi))
    return stats


# --------------------------------------------------------------------------- schedule / execute
def _planner_config(table: TableState, strategy: str, options: Mapping[str, str] | None) -> PlannerConfig:
    if strategy not in STRATEGIES:
        raise InputError(f"unknown compaction strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    options = checks.options_arg(options)
    unknown = sorted(set(options) - set(PLANNER_KEYS))
    if unknown:
        raise InputError(f"unknown compaction option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                         f"known: {', '.join(PLANNER_KEYS)}")
    return PlannerConfig.from_props({**table.config.props, **options})


def _make(table: TableState, strategy: str, merge: str | None, config: PlannerConfig) -> CompactionPlan | None:
    if not table.config.is_mor:
        return None
    timeline = table.active_timeline
    plan = make_plan(table.latest_slices(), strategy=strategy, merge=merge, config=config,
                     allow_log=table.config.log_format_version >= 2,
                     exclude=pending_file_groups(timeline) | pending_clustering_file_groups(timeline))
    return plan if plan.operations else None


def plan(table: TableState, *, strategy: str = "hybrid", merge: str | None = None,
         options: Mapping[str, str] | None = None) -> CompactionPlan | None:
    """The compaction `schedule` would save now, without saving it (a dry run: nothing is written, no lock is
    taken, failed writes are not rolled back); None when nothing needs compacting."""
    return _make(table, strategy, merge, _planner_config(table, strategy, options))


def schedule(table: TableState, *, strategy: str = "hybrid", merge: str | None = None,
             options: Mapping[str, str] | None = None) -> Instant | None:
    """Plan a compaction and save it as `<t>.compaction.requested`; None when nothing needs compacting."""
    config = _planner_config(table, strategy, options)
    table.check_writable()
    timeline = table.active_timeline
    with table_lock(table.path):
        rollback_failed_writes(table.path, timeline)
        made = _make(table, strategy, merge, config)
        if made is None:
            return None
        return timeline.request(made.action, made.to_json())


OperationRunner = Callable[["CompactionContext", tuple[Operation, ...], Instant], list[WriteStat]]


def run_operation(ctx: CompactionContext, op: Operation, task: int, *, token: str | None = None) -> list[WriteStat]:
    """One operation of a plan, whatever its kind: FULL (L0 + L1 → L1) or LOG (L0 → L0). Every runner — the
    local one below, Spark's tasks — calls this (`token`: a Spark task's write token)."""
    if op.operation_type == FULL:
        return [run_full(ctx, op, task, token=token)]
    if op.operation_type == LOG:
        return run_log(ctx, op, task, token=token)
    return []


def run_locally(progress: bool | None = None) -> OperationRunner:
    """Run a plan's operations one after the other in this process (a progress bar when long)."""

    def run(ctx: CompactionContext, ops: tuple[Operation, ...], inflight: Instant) -> list[WriteStat]:
        stats: list[WriteStat] = []
        desc = f"{inflight.action} {inflight.begin_time}"
        bar = (show_progress(ops, desc=desc, unit="file group", min_items=1) if progress
               else ops if progress is False else show_progress(ops, desc=desc, unit="file group"))
        for task, op in enumerate(bar):
            stats.extend(run_operation(ctx, op, task))
        return stats

    return run


def execute(table: TableState, instant: Instant | str, *, merge: str | None = None,
            progress: bool | None = None, runner: OperationRunner | None = None,
            extra_metadata: Mapping[str, str] | None = None) -> Instant:
    """Run a requested (log) compaction plan and complete it; returns the completed instant.

    `runner` executes the operations (default: `run_locally`; Spark passes one that
    runs each operation as a task); everything around it — heartbeat, inflight
    transition, commit, reset on failure — is the same for every runner."""
    timeline = table.active_timeline
    begin = instant if isinstance(instant, str) else instant.begin_time
    inflight, hb = claim(table, begin, (COMPACTION, LOG_COMPACTION), "compaction")
    if hb is None:
        return inflight  # completed already
    try:
        plan = read_plan(timeline, inflight)
        groups = table.file_groups(own=begin)
        plancheck.verify(groups, plan.operations, begin,  # the plan still matches the view
                         plan_file=timeline.folder / requested_instant(inflight, table.config.timeline_layout).file_name)
        engine = merge or plan.merge
        schema = table.schema
        writes = table.visible_writes(None)  # as `table.completion_map()`, with the actions
        completion = {i.begin_time: i.completion_time or i.begin_time for i in writes}
        read_ctx = ReadContext(table.path, table.config, schema or pa.schema([]), completion, None)
        sizes = {f.relative: f.size for g in groups for sl in g.slices for f in sl.files if f.size and not f.missing_from}
        compactions = frozenset(i.begin_time for i in writes if i.action in (COMPACTION, LOG_COMPACTION))
        ctx = CompactionContext(table.path, begin, read_ctx, engine, table.config.is_lsm, sizes, compactions,
                                table.log_compactions(writes))  # (cached by the view built just above)
        stats = (runner or run_locally(progress))(ctx, tuple(plan.operations), inflight)
        extra = {writer.SCHEMA_KEY: writer.schema_to_text(schema)} if schema is not None and len(schema) else {}
        extra["lsm_lab.strategy"] = plan.strategy
        extra.update(extra_metadata or {})
        operation = "log_compact" if inflight.action == LOG_COMPACTION else "compact"
        meta = commit_metadata(stats, operation=operation, extra=extra, compacted=True)
        keyindex.index_commit(table.path, begin, meta)  # before the commit point (a re-run replaces it)
        with table_lock(table.path):
            mdt_write.update(table.path, inflight, meta, config=timeline.config)  # the metadata table first, as upstream
            done = timeline.complete(inflight, meta)
            markers.delete_markers(table.path, begin, mine_only=True)
        return done
    except BaseException:
        with table_lock(table.path):
            reset_compaction(table.path, timeline, inflight)  # back to requested; runs again later
        raise
    finally:
        hb.stop()


def compact(table: TableState, *, strategy: str = "hybrid", merge: str | None = None, plan_only: bool = False,
            options: Mapping[str, str] | None = None, progress: bool | None = None,
            runner: OperationRunner | None = None, extra_metadata: Mapping[str, str] | None = None) -> Instant | None:
    """Finish pending plans nobody runs, then plan (and unless `plan_only`, run) a new compaction.

    Returns the last completed compaction instant, the requested one with
    `plan_only`, or None when there was nothing to do. `runner` and
    `extra_metadata` go to `execute` (Spark runs the operations as tasks).
    """
    check_engine(merge)
    done: Instant | None = None
    if not plan_only:
        for inst, _ in pending_plans(table.active_timeline):
            if heartbeat.is_alive(table.path, inst.begin_time):
                continue
            try:
                done = execute(table, inst, merge=merge, progress=progress, runner=runner,
                               extra_metadata=extra_metadata)
            except ConflictError:
                continue  # another process picked it up first
    scheduled = schedule(table, strategy=strategy, merge=merge, options=options)
    if plan_only or scheduled is None:
        return scheduled if plan_only else done
    return execute(table, scheduled, merge=merge, progress=progress, runner=runner, extra_metadata=extra_metadata)


# --------------------------------------------------------------------------- inline triggers
TRIGGERS = ("NUM_COMMITS", "TIME_ELAPSED", "NUM_OR_TIME", "NUM_AND_TIME")


def inline_due(table: TableState, *, now: _dt.datetime | None = None) -> tuple[bool, str]:
    """(should an inline compaction run now, why) from the `hoodie.compact.inline*` properties."""
    props = table.config.props
    if str(props.get("hoodie.compact.inline", "false")).lower() != "true" or not table.config.is_mor:
        return False, "inline compaction is off"
    trigger = str(props.get("hoodie.compact.inline.trigger.strategy", "NUM_COMMITS")).upper()
    if trigger not in TRIGGERS:
        raise InputError(f"hoodie.compact.inline.trigger.strategy={trigger!r}; choose one of {', '.join(TRIGGERS)}")
    try:
        max_commits = int(props.get("hoodie.compact.inline.max.delta.commits", "5"))
        max_seconds = float(props.get("hoodie.compact.inline.max.delta.seconds", "3600"))
    except ValueError as exc:
        raise InputError(f"bad inline compaction setting: {exc}") from None
    instants = table.instants()
    last = max((i.begin_time for i in instants if i.action in (COMPACTION, LOG_COMPACTION)), default=None)
    deltas = [i for i in instants if i.is_completed and i.action == DELTA_COMMIT
              and (last is None or i.begin_time > last)]
    start = last or (min(i.begin_time for i in deltas) if deltas else None)
    now = now or _dt.datetime.now(_dt.UTC)
    elapsed = (now - parse_time(start)).total_seconds() if start else 0.0
    by_num, by_time = len(deltas) >= max_commits, bool(deltas) and elapsed >= max_seconds
    due = {"NUM_COMMITS": by_num, "TIME_ELAPSED": by_time, "NUM_OR_TIME": by_num or by_time,
           "NUM_AND_TIME": by_num and by_time}[trigger]
    return due, f"{len(deltas)} delta commit(s), {elapsed:.0f} s since the last compaction ({trigger})"


def inline_strategy(props: Mapping[str, str]) -> str:
    strategy = str(props.get("lsm_lab.compaction.strategy", "hybrid")).lower()
    if strategy not in STRATEGIES:
        raise InputError(f"lsm_lab.compaction.strategy={strategy!r}; choose one of {', '.join(STRATEGIES)}")
    return strategy


def plans(table: TableState, *, include_completed: bool = True) -> list[tuple[Instant, CompactionPlan]]:
    """Compaction plans on the active timeline (pending ones, and completed ones if asked), oldest first."""
    out = []
    for inst in table.instants():
        if inst.action not in (COMPACTION, LOG_COMPACTION):
            continue
        if inst.is_completed and not include_completed:
            continue
        try:
            out.append((inst, read_plan(table.active_timeline, inst)))
        except TimelineError:
            continue  # a completed compaction whose requested file was archived away
    return out


__all__ = [
    "CompactionContext",
    "OperationRunner",
    "compact",
    "execute",
    "inline_due",
    "plan",
    "plans",
    "run_full",
    "run_locally",
    "run_log",
    "run_operation",
    "schedule",
]
