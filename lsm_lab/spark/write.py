"""Distributed writes: tag in Spark, one task per file group, the driver commits.

`write_table(df, path, op)` is `Table.upsert` (insert, delete, bulk_insert) spread
over Spark. Spark moves and sorts the rows; every file is still written by the
library's own `write_file_group`, inside a task, so a Spark write and a local
write store the same records:

    driver                                    Spark
    ──────                                    ─────
    open table, check schema (evolve_schema)
    WriteTransaction.begin  ─► <t>.deltacommit.inflight, snapshot S
                                              input ─► mapInArrow(prepare): conform, record key,
                                                       partition path, + row number (input order)
                                              tag:  lsm_tree  bucket = Hudi hash (v10, Arrow task) or pmod(crc32(key), n)
                                                    default   left join with the keys stored in the
                                                              latest slices (mapInArrow over slices)
    ◄── count rows per file group ─────────── groupBy(partition, file group).count()
    default layout: small files (plan_new_keys)   new keys of a partition → small file groups, then
      smallfiles.candidates / quotas per          new ones of insert.split.size keys: each key's rank
      partition, from the new-key counts          in batch order (Spark window) picks its run
    file groups → task ordinals, partition metadata
                                              repartition(G, key whose hash lands in partition = ordinal)
                                              sortWithinPartitions(key, ordering, row number)
                                                (default layout: row number — files keep arrival order)
                                              mapInArrow(write task): dedupe (greatest ordering wins,
                                                ties to the later row), markers, write_file_group
                                                with write token <partition>-<stage>-<attempt>
    ◄── write stats (JSON rows) ───────────── collect()
    reconcile: delete files of <t> that no stat names (failed or retried attempts)
    WriteTransaction.commit ─► <t>_<c>.deltacommit  (conflict check under the table lock)

**One file group per task.** The driver numbers the file groups 0..G-1 and
repartitions by a long whose Spark hash (Murmur3, seed 42) is congruent to
the ordinal modulo G, so Spark partition *i* holds exactly file group *i*, as
Hudi's bucket partitioner does. A task that received more than one group
(never, unless Spark's hash changes) still writes each on its own.

**Small files.** With the key-lookup index, new keys first fill the small
file groups of their partition (filegroup/smallfiles.py: Hudi's
`hoodie.parquet.small.file.limit`, `hoodie.parquet.max.file.size`,
`hoodie.copyonwrite.insert.split.size`,
`hoodie.merge.small.file.group.candidates.limit`, with Hudi's defaults). The
driver counts each partition's distinct new keys and plans with the same
`smallfiles.candidates` and `smallfiles.quotas` that `Table` uses: the
smallest candidate takes the first `q1` new keys in batch order (key order on
an lsm_tree table, arrival order of each key's surviving row on the default
layout), the next the following `q2`, and the rest open new file groups of
`split` keys. Spark ranks the new keys of such a partition with a window (in
the JVM, no Python per row) and the rank picks the file group, so a Spark
write packs exactly as `Table` would on the same table state. The task writes
a packed group with `write_file_group`, as `Table` does: a COPY_ON_WRITE merge,
or in MERGE_ON_READ a rewrite of the log-less small slice (a sorted create,
marked as a MERGE); its write stat counts the `numInserts`, and a concurrent
write to the same file group is a conflict at commit. Partitions with no small
file group and at most one new group's worth of keys are not ranked.

**Retries and failures.** A retried task writes under a new token, so its
files never collide with the failed attempt's. Each task leaves a marker
before each file (`services.markers`); before committing, the driver deletes
every file of the instant that its successful tasks did not report (Hudi's
marker reconciliation), because readers trust every file of a completed
instant. A job that fails aborts the transaction: the instant's files and
markers are deleted, and nothing was ever visible.

Simplified compared with Apache Hudi's Spark writer: new keys are cut by rank
into exact runs (Hudi's partitioner sends each by an MD5 hash of the key to an
insert bucket chosen by weight, so bucket sizes are only about right), the
ranking of a partition's new keys runs in one task, no spill of large file
groups (a task holds its file group's rows in memory, as `Table` does), no
speculative-execution guard (a zombie attempt that writes after the commit
would leave an orphan file, which `lsm-lab` rollback or clean removes), and the
default layout joins against the keys of every partition's latest slices (Hudi
prunes by partition and bloom filters).

Taught in: notebooks/10_sorted_vs_hash_on_spark.ipynb
"""

from __future__ import annotations

import itertools
import json
import math
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.api import Table, open_table
from lsm_lab.errors import InputError
from lsm_lab.filegroup import cdclog, index, smallfiles
from lsm_lab.filegroup import write as writer
from lsm_lab.filegroup.fsview import FileGroup, FileSlice
from lsm_lab.filegroup.read import ReadContext
from lsm_lab.merge import records
from lsm_lab.merge.records import DELETE_FLAG, META_COLUMNS, PARTITION_PATH, RECORD_KEY
from lsm_lab.services import commit, markers, occ
from lsm_lab.spark.compact import SPARK_METADATA, spark_runner
from lsm_lab.spark.jobs import (
    TaskClock,
    TaskHook,
    TaskIdentity,
    active_session,
    arrow_schema_for,
    job_progress,
    reconcile,
    reraise,
    spark_schema,
)
from lsm_lab.storage import TablePath, as_path, is_local
from lsm_lab.timeline.config import TableConfig
from lsm_lab.timeline.instant import Instant
from lsm_lab.timeline.instanttime import completion_time
from lsm_lab.timeline.metadata import WriteStat

ROW = "__lsm_row"          # input order, for "ties go to the later row"
GROUP_KEY = "__lsm_gk"     # bucket number (lsm_tree), file id or "new-<n>" (default layout)
FILE_ID = "__lsm_fid"      # default layout: the file group already holding the key
ORDINAL = "__lsm_group"    # the file group's task ordinal 0..G-1
PART_KEY = "__lsm_pkey"    # a long whose Spark hash puts the row in partition ORDINAL
_HELPERS = (ROW, GROUP_KEY, FILE_ID, ORDINAL, PART_KEY)
_NEW_GROUPS = uuid.UUID("0b7a6c52-52d5-4f0e-9d3c-5a1f2e3d4c5b")

# --------------------------------------------------------------------------- Spark's hash, in Python
def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF


def _mix(h1: int, k1: int) -> int:
    k1 = _rotl((k1 * 0xCC9E2D51) & 0xFFFFFFFF, 15) * 0x1B873593 & 0xFFFFFFFF
    h1 = _rotl(h1 ^ k1, 13)
    return (h1 * 5 + 0xE6546B64) & 0xFFFFFFFF


def spark_hash_long(value: int, seed: int = 42) -> int:
    """Spark SQL's `hash(<long>)` (Murmur3 x86_32, seed 42), as a signed 32-bit int."""
    v = value & 0xFFFFFFFFFFFFFFFF
    h1 = _mix(_mix(seed, v & 0xFFFFFFFF), v >> 32)
    h1 ^= 8
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & 0xFFFFFFFF
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & 0xFFFFFFFF
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


def partition_keys(n: int) -> list[int]:
    """For each i < n, a long whose `pmod(hash(long), n)` is i: `repartition(n, key)` sends it to partition i."""
    out: dict[int, int] = {}
    candidate = 0
    while len(out) < n:
        out.setdefault(spark_hash_long(candidate) % n, candidate)
        candidate += 1
    return [out[i] for i in range(n)]


# --------------------------------------------------------------------------- what a task needs
@dataclass(frozen=True)
class GroupTask:
    """One file group's share of the write: where it goes and what it holds now."""

    ordinal: int
    partition: str
    file_id: str
    latest: FileSlice | None
    rows: int  # rows the driver counted for it (before de-duplication)


@dataclass(frozen=True)
class PrepareTask:
    """mapInArrow function: normalise a batch and add the record key and partition path (as `write.prepare`)."""

    config: TableConfig
    user_schema: pa.Schema  # the table schema after this write (the batch's own columns for deletes)
    is_delete: bool
    out_schema: pa.Schema   # the Arrow schema Spark expects back

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            table = records.normalize_types(pa.Table.from_batches([batch]))
            row = table.column(ROW)
            table = records.conform(table, self.user_schema)
            keys = records.record_keys(table, self.config.record_key)
            parts = records.partition_paths(table, self.config.partition_by, hive_style=self.config.hive_style)
            table = table.append_column(RECORD_KEY, keys).append_column(PARTITION_PATH, parts)
            table = table.append_column(ROW, row)
            yield from table.cast(self.out_schema).to_batches()


@dataclass(frozen=True)
class BucketTask:
    """mapInArrow function: Hudi's bucket of every prepared row (table version 10: Java List.hashCode)."""

    config: TableConfig
    out_schema: pa.Schema

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            table = pa.Table.from_batches([batch])
            buckets = index.hudi_bucket_ids(records.key_parts(table, self.config.record_key), self.config.num_buckets)
            table = table.append_column(GROUP_KEY, pa.array(buckets).cast(pa.string()))
            yield from table.cast(self.out_schema).to_batches()


@dataclass(frozen=True)
class StoredKeysTask:
    """mapInArrow function over slice numbers: the record keys each latest slice stores (default layout)."""

    ctx: ReadContext
    slices: tuple[FileSlice, ...]

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for i in batch.column(0).to_pylist():
                fs = self.slices[i]
                keys = writer.slice_keys(fs, self.ctx)
                n = len(keys)
                yield pa.RecordBatch.from_arrays(
                    [pa.array([fs.partition] * n, pa.string()), keys.cast(pa.string()),
                     pa.array([fs.file_id] * n, pa.string())], names=[PARTITION_PATH, RECORD_KEY, FILE_ID])


@dataclass(frozen=True)
class WriteTask:
    """mapInArrow function: de-duplicate one file group's rows and write them with `write_file_group`."""

    base_path: Any  # a local path string, or a StoragePath (pickled as URI + options: tasks reopen the store)
    config: TableConfig
    ctx: ReadContext
    instant: str
    op: str
    user_schema: pa.Schema
    ordering: str | None
    groups: tuple[GroupTask, ...]
    hook: TaskHook | None = None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        clock = TaskClock()
        parts = [b for b in batches if b.num_rows]
        if not parts:
            return
        table = pa.Table.from_batches(parts)
        ordinals = pc.unique(table.column(ORDINAL)).to_pylist()
        out: list[str] = []
        written = 0
        for ordinal in sorted(ordinals):
            rows = table if len(ordinals) == 1 else table.filter(pc.equal(table.column(ORDINAL), ordinal))
            group = self.groups[ordinal]
            rows = self._rows(rows)
            written += rows.num_rows
            out.extend(json.dumps(s.to_json()) for s in self._write(group, rows, clock.identity))
        if self.hook is not None:
            self.hook(clock.identity)
        report = json.dumps(clock.report(written).to_json())
        yield pa.RecordBatch.from_arrays([pa.array(out, pa.string()), pa.array([report] * len(out), pa.string())],
                                         names=["stat", "report"])

    def _rows(self, rows: pa.Table) -> pa.Table:
        """Back to the table's Arrow types, one row per key, as `write.prepare` leaves them.

        Rows arrive sorted by (key, ordering, input order) for `lsm_tree` and in
        input order for the default layout, so the positions `records.dedupe`
        breaks ties with are input order either way; the default layout keeps
        the survivors in arrival order (`keep_order`), as `Table` writes them.
        """
        user = records.conform(rows, self.user_schema)
        keyed = user.append_column(RECORD_KEY, rows.column(RECORD_KEY).cast(pa.string())) \
            .append_column(PARTITION_PATH, rows.column(PARTITION_PATH).cast(pa.string()))
        ordering = self.ordering if self.ordering in keyed.column_names else None
        return records.dedupe(keyed, [PARTITION_PATH, RECORD_KEY], ordering, deletes=self.op == "delete",
                              keep_order=not self.config.is_lsm)

    def _write(self, group: GroupTask, rows: pa.Table, who: TaskIdentity) -> list[WriteStat]:
        base_path = as_path(self.base_path)
        for name, io_type in [*writer.planned_files(self.config, base_path, group.partition, group.file_id, group.latest,
                                             self.instant, self.op, who.token),
                              *cdclog.planned(self.config, group.file_id, who.token, self.instant)]:
            markers.create_marker(base_path, self.instant, group.partition, name, io_type)
        return writer.write_file_group(
            base_path=base_path, config=self.config, ctx=self.ctx, partition=group.partition, file_id=group.file_id,
            rows=rows, latest=group.latest, existing_keys=None, instant=self.instant, op=self.op,
            task=group.ordinal, token=who.token)


# --------------------------------------------------------------------------- driver side
def _input_frame(spark: Any, config: TableConfig, data: Any, op: str) -> tuple[Any, pa.Schema]:
    """(Spark DataFrame without meta columns, its Arrow schema); (None, schema) for an empty local batch."""
    from pyspark.sql import DataFrame

    if isinstance(data, DataFrame):
        keep = [c for c in data.columns if c not in META_COLUMNS and c != DELETE_FLAG]
        frame = data.select(*keep)
        schema = records.normalize_types(arrow_schema_for(frame.schema).empty_table()).schema
        return frame, pa.schema([pa.field(f.name, f.type, True) for f in schema])
    if op == "delete" and isinstance(data, (list, tuple)) and data and all(isinstance(k, str) for k in data):
        if len(config.record_key) != 1 or config.partition_by:
            raise InputError("delete by plain key strings needs a single-field key and a non-partitioned table; "
                             "pass rows with the key and partition columns instead")
        data = [{config.record_key[0]: k} for k in data]
    table = records.to_arrow(data, what="delete keys" if op == "delete" else "data")
    if table.num_rows == 0:
        return None, table.schema
    try:
        frame = spark.createDataFrame(table)
    except Exception as exc:  # noqa: BLE001 - Spark rejects some Arrow types (unsigned ints, ...)
        raise InputError(f"Spark cannot hold this batch: {str(exc).splitlines()[0]}") from None
    return frame, table.schema


def _with_helpers(schema: pa.Schema) -> pa.Schema:
    return pa.schema([*list(schema), pa.field(RECORD_KEY, pa.string()), pa.field(PARTITION_PATH, pa.string()), pa.field(ROW, pa.int64())])


def _stored_keys(spark: Any, ctx: ReadContext, slices: Sequence[FileSlice]) -> Any:
    from pyspark.sql.types import StringType, StructField, StructType

    struct = StructType([StructField(PARTITION_PATH, StringType()), StructField(RECORD_KEY, StringType()),
                         StructField(FILE_ID, StringType())])
    if not slices:
        return spark.createDataFrame([], struct)
    n = len(slices)
    parallel = max(1, min(n, 2 * spark.sparkContext.defaultParallelism))
    return spark.range(0, n, 1, parallel).mapInArrow(StoredKeysTask(ctx, tuple(slices)), struct)


def _write_files(spark: Any, table: Table, frame: Any, user_schema: pa.Schema, ctx: ReadContext,
                 snapshot_groups: Sequence[FileGroup], instant: str, op: str, *,
                 progress: bool | None, hook: TaskHook | None,
                 max_records_per_group: int = writer.DEFAULT_MAX_RECORDS_PER_GROUP) -> list[WriteStat]:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    config = table.config
    is_delete = op == "delete"
    ordering = config.ordering_field if config.merge_mode == "EVENT_TIME_ORDERING" else None
    prepared_arrow = _with_helpers(user_schema)
    prepared_struct = spark_schema(prepared_arrow)
    prepared = frame.withColumn(ROW, F.monotonically_increasing_id()).mapInArrow(
        PrepareTask(config, user_schema, is_delete, arrow_schema_for(prepared_struct)), prepared_struct)
    key_bytes = F.crc32(F.col(RECORD_KEY).cast("binary"))
    # cached: counted here, written below, prepared (Python) once; also pins the input-order row numbers
    if config.bucket_index and config.upstream_format:  # Hudi's hash has no Spark SQL function: Arrow in Python
        from pyspark.sql.types import StringType, StructField, StructType

        struct = StructType([*prepared.schema.fields, StructField(GROUP_KEY, StringType())])
        cached = prepared.mapInArrow(BucketTask(config, arrow_schema_for(struct)), struct)
    elif config.bucket_index:
        cached = prepared.withColumn(GROUP_KEY, F.pmod(key_bytes, F.lit(config.num_buckets)).cast("string"))
    else:
        stored = _stored_keys(spark, ctx, [g.latest for g in snapshot_groups])
        cached = prepared.join(stored, [PARTITION_PATH, RECORD_KEY], "left")
    cached = cached.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        return _tag_and_write(spark, table, cached, user_schema, ctx, snapshot_groups, instant, op,
                              ordering=ordering, progress=progress, hook=hook,
                              max_records_per_group=max_records_per_group)
    finally:
        cached.unpersist()


def _tag_and_write(spark: Any, table: Table, cached: Any, user_schema: pa.Schema, ctx: ReadContext,
                   snapshot_groups: Sequence[FileGroup], instant: str, op: str, *,
                   ordering: str | None, progress: bool | None, hook: TaskHook | None,
                   max_records_per_group: int) -> list[WriteStat]:
    from pyspark.sql import functions as F

    config = table.config
    key_bytes = F.crc32(F.col(RECORD_KEY).cast("binary"))
    with job_progress(spark, f"{op} {instant}: tag", enabled=progress):
        try:
            if config.bucket_index:
                tagged = cached
                counts = {(r[0], r[1]): int(r[2]) for r in tagged.groupBy(PARTITION_PATH, GROUP_KEY).count().collect()}
            else:
                joined = cached
                found = joined.groupBy(PARTITION_PATH, FILE_ID).agg(
                    F.count(F.lit(1)), F.countDistinct(RECORD_KEY)).collect()
                fresh = {r[0]: int(r[3]) for r in found if r[1] is None}  # distinct new keys, as `tag` counts them
                counts = {(r[0], r[1]): int(r[2]) for r in found if r[1] is not None}
                split = smallfiles.SmallFileConfig.from_props(config.props).insert_split_size \
                    if smallfiles.KEY_INSERT_SPLIT in config.props else max_records_per_group
                plan = plan_new_keys(config, fresh, snapshot_groups, op, split)
                for p, taken in plan.items():  # small file groups first, then new ones of `split` keys each
                    for fs, n in taken:
                        counts[(p, fs.file_id)] = counts.get((p, fs.file_id), 0) + n
                    left = fresh[p] - sum(n for _, n in taken)
                    for s in range(math.ceil(left / split)):
                        counts[(p, f"new-{s}")] = min(split, left - s * split)
                # the other partitions (small-file handling off): new keys spread over new groups by a key hash
                per_partition = {p: max(1, math.ceil(c / split)) for p, c in fresh.items() if p not in plan}
                for p, c in per_partition.items():
                    for s in range(c):
                        counts[(p, f"new-{s}")] = fresh[p] // c
                slots = F.create_map(*[F.lit(x) for p, k in sorted(per_partition.items()) for x in (p, k)]) \
                    if per_partition else F.create_map().cast("map<string,int>")
                new_key = F.concat(F.lit("new-"), F.pmod(key_bytes, F.try_element_at(slots, F.col(PARTITION_PATH)))
                                   .cast("string"))
                if not plan:
                    tagged = joined.withColumn(GROUP_KEY, F.coalesce(F.col(FILE_ID), new_key)).drop(FILE_ID)
                else:  # the new keys of the partitions in the plan: by rank (only these rows are ranked)
                    packed = F.col(FILE_ID).isNull() & F.col(PARTITION_PATH).isin(sorted(plan))
                    slotted = _new_key_groups(spark, joined.filter(packed).drop(FILE_ID), plan, split,
                                              lsm=config.is_lsm,
                                              ordering=ordering if ordering in user_schema.names else None)
                    tagged = joined.filter(~packed).withColumn(GROUP_KEY, F.coalesce(F.col(FILE_ID), new_key)) \
                        .drop(FILE_ID).unionByName(slotted)
        except Exception as exc:  # noqa: BLE001
            reraise(exc, f"{op} (tagging)")
    if not counts:
        return []
    latest = {(g.partition, g.file_id): g.latest for g in snapshot_groups}
    return _write_groups(spark, table, tagged, counts, user_schema, ctx, latest, instant, op,
                         ordering=ordering, progress=progress, hook=hook)


def plan_new_keys(config: TableConfig, new_keys: Mapping[str, int], groups: Sequence[FileGroup], op: str,
                  split: int) -> dict[str, list[tuple[FileSlice, int]]]:
    """Per partition, the small file groups that take new keys and how many each (`Table`'s plan).

    `new_keys`: distinct keys per partition that no file group holds; the rest
    opens new file groups of `split` keys.  A partition is in the plan when its
    small file groups take keys or its new keys fill more than one new group:
    there the writer must cut the new keys in batch order as `Table` does.
    Empty when small-file handling is off, on bucket tables (a key's bucket is
    its file group) and for deletes (a key no file group holds has nothing to delete).
    """
    small = smallfiles.SmallFileConfig.from_props(config.props)
    if not small.enabled or config.bucket_index or op == "delete":
        return {}
    by_partition: dict[str, list[FileGroup]] = {}
    for g in groups:
        by_partition.setdefault(g.partition, []).append(g)
    plan = {}
    for partition, n in sorted(new_keys.items()):
        small_slices = smallfiles.candidates(by_partition.get(partition, []), small, is_mor=config.is_mor)
        taken = smallfiles.quotas(n, small_slices, small)
        if taken or n > split:
            plan[partition] = taken
    return plan


def _new_key_groups(spark: Any, fresh: Any, plan: Mapping[str, list[tuple[FileSlice, int]]], split: int, *,
                    lsm: bool, ordering: str | None) -> Any:
    """The rows of new keys (partitions of `plan` only) with their file group's key (GROUP_KEY).

    `Table` hands the small slices consecutive runs of a partition's new keys in
    batch order — key order on an lsm_tree table, the order of each key's
    surviving row (`records.dedupe(keep_order=True)`) on the default layout —
    and the rest to new file groups of `split` keys.  Here each key gets its
    rank in that order (Spark windows, in the JVM: one shuffle by partition,
    both windows run on it) and the run its rank falls in: `plan` becomes one
    broadcast row per partition with the runs' ends.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

    rows_of_partition = fresh.repartition(PARTITION_PATH)  # both windows below are clustered by it
    if lsm:
        order = F.col(RECORD_KEY)
    else:  # the surviving row of a repeated key: greatest ordering value (null lowest), then the later row
        last = [F.col(ordering).desc_nulls_last()] if ordering else []
        survivor = Window.partitionBy(PARTITION_PATH, RECORD_KEY).orderBy(*last, F.col(ROW).desc())
        order = F.first(F.col(ROW)).over(survivor)
    # dense: the rows of one key share its rank, so ranks count distinct keys as `quotas` does
    rank_of = F.dense_rank().over(Window.partitionBy(PARTITION_PATH).orderBy(F.col("__lsm_order"))) - 1
    ranked = rows_of_partition.withColumn("__lsm_order", order).withColumn("__lsm_rank", rank_of)
    struct = StructType([StructField(PARTITION_PATH, StringType()), StructField("__lsm_ends", ArrayType(LongType())),
                         StructField("__lsm_fids", ArrayType(StringType())), StructField("__lsm_taken", LongType())])
    runs_rows = []
    for partition, taken in sorted(plan.items()):
        ends = list(itertools.accumulate(n for _, n in taken))
        runs_rows.append((partition, ends, [fs.file_id for fs, _ in taken], ends[-1] if ends else 0))
    runs = spark.createDataFrame(runs_rows, struct)
    rank, done = F.col("__lsm_rank"), F.col("__lsm_taken")
    run = F.size(F.filter(F.col("__lsm_ends"), lambda end: end <= rank))  # runs that end at or before this rank
    group = F.when(rank < done, F.element_at(F.col("__lsm_fids"), run + 1)).otherwise(
        F.concat(F.lit("new-"), F.floor((rank - done) / F.lit(split)).cast("string")))
    return ranked.join(F.broadcast(runs), [PARTITION_PATH]).select(*fresh.columns, group.alias(GROUP_KEY))


def _write_groups(spark: Any, table: Table, tagged: Any, counts: Mapping[tuple[str, str], int],
                  user_schema: pa.Schema, ctx: ReadContext, snapshot_groups: Mapping[tuple[str, str], FileSlice],
                  instant: str, op: str, *, ordering: str | None, progress: bool | None,
                  hook: TaskHook | None) -> list[WriteStat]:
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    config = table.config
    desc = f"{op} {instant}"

    groups: list[GroupTask] = []
    for ordinal, (partition, gk) in enumerate(sorted(counts)):
        records.check_partition_path(partition)
        if config.bucket_index:
            fid = index.file_id_of_bucket(config.upstream_format, config.name, partition, int(gk))
        elif gk.startswith("new-"):
            fid = f"{uuid.uuid5(_NEW_GROUPS, f'{instant}/{partition}/{gk}')}-0"
        else:
            fid = gk
        groups.append(GroupTask(ordinal, partition, fid, snapshot_groups.get((partition, fid)), counts[(partition, gk)]))
    writer.write_partition_metadata(table.path, sorted({g.partition for g in groups}), instant)

    n = len(groups)
    keys = partition_keys(n)
    lookup_struct = StructType([StructField(PARTITION_PATH, StringType()), StructField(GROUP_KEY, StringType()),
                                StructField(ORDINAL, LongType()), StructField(PART_KEY, LongType())])
    lookup = spark.createDataFrame([(p, gk, i, keys[i]) for i, (p, gk) in enumerate(sorted(counts))], lookup_struct)
    ordered = tagged.join(F.broadcast(lookup), [PARTITION_PATH, GROUP_KEY]).drop(GROUP_KEY).repartition(n, PART_KEY)
    if config.is_lsm:  # sorted by key, then ordering value and input order: dedupe keeps the last of each key
        sort_cols = [ORDINAL, RECORD_KEY] + ([ordering] if ordering and ordering in user_schema.names else []) + [ROW]
    else:  # the default layout writes rows in arrival order, as Hudi does
        sort_cols = [ORDINAL, ROW]
    ordered = ordered.sortWithinPartitions(*sort_cols)
    task = WriteTask(str(table.path) if is_local(table.path) else table.path, config, ctx, instant, op, user_schema, ordering, tuple(groups), hook)
    with job_progress(spark, f"{desc}: write", enabled=progress):
        try:
            rows = ordered.mapInArrow(task, "stat string, report string").collect()
        except Exception as exc:  # noqa: BLE001
            reraise(exc, op)
    return [WriteStat(**json.loads(r["stat"])) for r in rows]


def write_table(data: Any, path: str | TablePath, op: str = "upsert", spark: Any = None, *,
                progress: bool | None = None, task_hook: TaskHook | None = None,
                storage_options: Mapping[str, Any] | None = None) -> Instant:
    """Write a Spark DataFrame (or a pyarrow Table, pandas DataFrame, list of dicts) into the table at `path`.

    `op`: upsert, insert, delete (rows holding the key and partition columns, or
    a list of key strings) or bulk_insert. The rows stored are those
    `Table.<op>(data)` would store. Returns the completed instant.
    `task_hook(identity)` runs in every task after its file group was written
    (tests inject task failures with it). `path` may be an object-store URI (`storage_options` as for
    `open_table`); the tasks reopen the store from the URI and the resolved options.
    """
    if op not in writer.OPERATIONS:
        raise InputError(f"unknown operation '{op}' (expected one of {', '.join(writer.OPERATIONS)})")
    table = open_table(path, storage_options)
    table.check_writable()
    commit.note_first_write(table)  # before the input is checked (as Table._write)
    spark = active_session(spark)
    frame, incoming = _input_frame(spark, table.config, data, op)
    if frame is None:  # an empty local batch: nothing to distribute, the library commits the empty instant
        return cast("Instant", getattr(table, op)(data))
    current = table.schema
    user_schema = writer.evolve(table.config, current, incoming, op == "delete") or pa.schema([])
    row_schema = incoming if op == "delete" else user_schema
    row_fields = pa.schema([pa.field(f.name, f.type, True) for f in row_schema])

    def write_files(txn: occ.WriteTransaction) -> list[WriteStat]:  # the rows move as Spark tasks
        snapshot = txn.snapshot
        snapshot = completion_time(snapshot)  # the table as the last write before this one completed
        groups = [] if snapshot is None else table.file_groups(as_of=snapshot)
        ctx_schema = user_schema if len(user_schema) else (current or pa.schema([]))
        ctx = ReadContext(table.path, table.config, ctx_schema, table.completion_map(snapshot), snapshot)
        stats = _write_files(spark, table, frame, row_fields, ctx, groups, txn.begin_time, op, progress=progress,
                             hook=task_hook)
        reconcile(table.path, txn.begin_time, stats)
        return stats

    done = commit.run_write(table, op, user_schema, write_files)
    commit.after_write(table, runner=spark_runner(spark, progress=progress), progress=progress,
                       extra_metadata=SPARK_METADATA)  # an inline compaction runs on Spark too
    return done


__all__ = ["GroupTask", "PrepareTask", "StoredKeysTask", "WriteTask", "partition_keys", "plan_new_keys",
           "spark_hash_long", "write_table"]
