"""Clustering: rewrite small file groups of a partition as fewer, key-sorted ones (a `replacecommit`).

Writes of the default layout open a new file group per batch, so a partition
collects many small file groups whose key ranges all overlap; a point lookup
must then open every one of them.  Clustering picks such file groups, merges
*all* their slices (base + logs, deletes applied, through the merge engines)
into one key-ordered stream and cuts it into a few new file groups whose key
ranges do not overlap:

    plan (table lock)                   execute (no lock, heartbeat)              commit (table lock)
    ──────────────────                  ────────────────────────────              ───────────────────
    small latest slices of a partition  per input group:                          conflict check: a write
    → groups of <= max.bytes.per.group   slices ──k-way merge──► sorted rows       completed after the
    <t>.clustering.requested             ──cut──► numOutputFileGroups new         plan's snapshot touched
      (HoodieRequestedReplaceMetadata     base files @ t, sorted by key            an input group → roll
       with its HoodieClusteringPlan)    markers first, files written atomically  back, ConflictError
                                        <t>.clustering.inflight                   else <t>_<c>.replacecommit
                                                                                   partitionToReplaceFileIds

**Bucket index.**  A key's file group is a function of its bucket, so a
clustering must not move keys between buckets: each bucket is clustered on
its own, its slices merged into one new base file *in the same file group*
(a new slice at the clustering instant; nothing is listed as replaced).

**Key order.**  Every output file is sorted by record key (UTF-8 byte order)
and carries the sorted flag and `sorting_columns`, whatever the layout; like
upstream's LSM clustering (apache/hudi PR #19767) custom sort columns, Z-order
and Hilbert layouts are refused before anything is planned.  Records keep
their `_hoodie_commit_time`, so incremental reads are unchanged.

**Visibility and crashes.**  Nothing is visible before the completed
`replacecommit`; readers, time travel, the cleaner and the archive then drop
the replaced file groups (`layout.fsview` rule 2) for reads at or after its
completion.  A runner that dies leaves an inflight instant: the next writer
(or `cluster()`) removes its files and puts the plan back to requested; a
requested plan waits until it is run.  Writers and clustering conflict both
ways (services.occ): a write that completes first makes the clustering roll
back; a clustering that completes first makes the write roll back.

Simplified compared with Apache Hudi: one plan strategy (size based: file
groups below `hoodie.clustering.plan.strategy.small.file.limit`), one execution
strategy (sort by record key and size); groups run one after the other in
this process, or one Spark task each (spark/clustering.py, through the
`runner` seam); slice paths in the plan are relative to the table folder; no
clustering of table version 6 (it has no `clustering` action).

Taught in: notebooks/11_clustering.ipynb
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lsm_lab import checks
from lsm_lab.errors import (
    ConflictError,
    CorruptFileError,
    CorruptTableError,
    InputError,
    TimelineError,
    UnsupportedFeatureError,
)
from lsm_lab.filegroup import fsview, index
from lsm_lab.filegroup import write as writer
from lsm_lab.filegroup.fsview import DataFile, FileSlice
from lsm_lab.filegroup.planner import pending_file_groups
from lsm_lab.filegroup.read import ReadContext, iter_sources
from lsm_lab.format import hudi_bloom, keyindex, naming, parquet_footer, parquet_write
from lsm_lab.merge import SORTED_ENGINES, check_engine, choose_engine, fell_back, merge_sources, merge_to_table, records
from lsm_lab.merge.records import FILE_NAME
from lsm_lab.services import heartbeat, markers, mdt_write
from lsm_lab.services.claim import claim
from lsm_lab.services.lock import table_lock
from lsm_lab.services.occ import find_conflict
from lsm_lab.services.rollback import remove_timeline_files, reset_compaction, rollback_failed_writes, rollback_pending
from lsm_lab.storage import TablePath, is_local, paths
from lsm_lab.table.state import TableState
from lsm_lab.timeline.active import ActiveTimeline
from lsm_lab.timeline.instant import CLUSTERING, COMPACTION, LOG_COMPACTION, Instant, State
from lsm_lab.timeline.metadata import WriteStat, commit_metadata

KEY_SMALL_FILE = "hoodie.clustering.plan.strategy.small.file.limit"
KEY_TARGET_FILE = "hoodie.clustering.plan.strategy.target.file.max.bytes"
KEY_GROUP_BYTES = "hoodie.clustering.plan.strategy.max.bytes.per.group"
KEY_MAX_GROUPS = "hoodie.clustering.plan.strategy.max.num.groups"
KEY_SORT_COLUMNS = "hoodie.clustering.plan.strategy.sort.columns"
KEY_LAYOUT_STRATEGY = "hoodie.layout.optimize.strategy"
PLAN_STRATEGY = "org.apache.hudi.client.clustering.plan.strategy.SparkSizeBasedClusteringPlanStrategy"
EXECUTION_STRATEGY = "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
KEY_SNAPSHOT = "lsm_lab.clustering.snapshot"  # the completion time the plan was made from (conflict checks)
KEY_SAME_FILE_IDS = "lsm_lab.clustering.keep.file.ids"  # bucket index: output stays in the input file group
OPERATION = "cluster"
OPTION_KEYS = (KEY_SMALL_FILE, KEY_TARGET_FILE, KEY_GROUP_BYTES, KEY_MAX_GROUPS, KEY_SORT_COLUMNS, KEY_LAYOUT_STRATEGY)
BATCH_ROWS = 65_536


@dataclass(frozen=True)
class ClusteringConfig:
    """The size-based plan strategy's limits (Hudi's `hoodie.clustering.plan.strategy.*` defaults)."""

    small_file_bytes: int = 300 * 1024 * 1024
    target_file_bytes: int = 1024 * 1024 * 1024
    group_bytes: int = 2 * 1024 * 1024 * 1024
    max_groups: int = 30

    @classmethod
    def from_props(cls, props: Mapping[str, str], record_key: tuple[str, ...] = ()) -> ClusteringConfig:
        sort = str(props.get(KEY_SORT_COLUMNS) or "").strip()
        if sort and tuple(c.strip() for c in sort.split(",")) != tuple(record_key):
            raise UnsupportedFeatureError(f"{KEY_SORT_COLUMNS}={sort!r}: clustering keeps every file sorted by the "
                                          "record key (the LSM sorted-run invariant); custom sort columns are refused")
        layout = str(props.get(KEY_LAYOUT_STRATEGY) or "linear").strip().lower()
        if layout != "linear":
            raise UnsupportedFeatureError(f"{KEY_LAYOUT_STRATEGY}={layout!r}: Z-order and Hilbert layouts break "
                                          "record-key order; only 'linear' is supported")

        def num(key: str, default: int) -> int:
            raw = props.get(key)
            if raw is None or str(raw).strip() == "":
                return default
            try:
                value = int(str(raw))
            except ValueError:
                raise InputError(f"{key}={raw!r} is not a whole number") from None
            if value < 1:
                raise InputError(f"{key} must be at least 1 (got {raw})")
            return value

        return cls(small_file_bytes=num(KEY_SMALL_FILE, cls.small_file_bytes),
                   target_file_bytes=num(KEY_TARGET_FILE, cls.target_file_bytes),
                   group_bytes=num(KEY_GROUP_BYTES, cls.group_bytes),
                   max_groups=num(KEY_MAX_GROUPS, cls.max_groups))


# --------------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class SliceInfo:
    """One input file slice (Hudi's `HoodieSliceInfo`); paths relative to the table folder, logs in merge order."""

    partition: str
    file_id: str
    data_file: str | None
    delta_files: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"dataFilePath": self.data_file, "deltaFilePaths": list(self.delta_files), "fileId": self.file_id,
                "partitionPath": self.partition, "bootstrapFilePath": None, "version": 1}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> SliceInfo:
        """One slice of a plan; every path checked by the path guard (lsm_lab/storage/paths.py) before use."""
        if not isinstance(raw, Mapping) or not raw.get("fileId"):
            raise TimelineError("a clustering plan slice has no fileId")
        partition = paths.partition(str(raw.get("partitionPath") or ""), field="partitionPath")
        files = ([raw["dataFilePath"]] if raw.get("dataFilePath") else []) + list(raw.get("deltaFilePaths") or ())
        for rel in files:
            folder, _ = paths.data_file(rel, field="dataFilePath/deltaFilePaths")
            if folder != partition:
                raise CorruptTableError(f"clustering plan: {rel!r} is not in partition {partition!r}",
                                        field="deltaFilePaths")
        return cls(partition, paths.name(str(raw["fileId"]), field="fileId"), raw.get("dataFilePath") or None,
                   tuple(raw.get("deltaFilePaths") or ()))


@dataclass(frozen=True)
class ClusteringGroup:
    """File slices merged together into `num_output_file_groups` new file groups (`HoodieClusteringGroup`)."""

    slices: tuple[SliceInfo, ...]
    num_output_file_groups: int = 1
    metrics: Mapping[str, float] = field(default_factory=dict)

    @property
    def partition(self) -> str:
        return self.slices[0].partition

    def to_json(self) -> dict[str, Any]:
        return {"slices": [s.to_json() for s in self.slices], "metrics": dict(self.metrics),
                "numOutputFileGroups": self.num_output_file_groups, "version": 1}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ClusteringGroup:
        slices = tuple(SliceInfo.from_json(s) for s in raw.get("slices") or ())
        if not slices:
            raise TimelineError("a clustering plan group has no slices")
        return cls(slices, max(1, int(raw.get("numOutputFileGroups") or 1)), dict(raw.get("metrics") or {}))


@dataclass(frozen=True)
class ClusteringPlan:
    """`HoodieClusteringPlan`: input groups and the strategy, wrapped in `HoodieRequestedReplaceMetadata`."""

    groups: tuple[ClusteringGroup, ...]
    strategy_params: Mapping[str, str] = field(default_factory=dict)
    snapshot: str | None = None

    @property
    def same_file_ids(self) -> bool:
        return self.strategy_params.get(KEY_SAME_FILE_IDS) == "true"

    @property
    def file_groups(self) -> set[tuple[str, str]]:
        return {(s.partition, s.file_id) for g in self.groups for s in g.slices}

    def to_json(self) -> dict[str, Any]:
        plan = {"inputGroups": [g.to_json() for g in self.groups],
                "strategy": {"strategyClassName": EXECUTION_STRATEGY, "strategyParams": dict(self.strategy_params),
                             "version": 1},
                "extraMetadata": {KEY_SNAPSHOT: self.snapshot or "", "lsm_lab.plan.strategy": PLAN_STRATEGY},
                "version": 1}
        return {"operationType": "CLUSTER", "clusteringPlan": plan, "extraMetadata": {}, "version": 1}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ClusteringPlan:
        plan = raw.get("clusteringPlan") or {}
        if not isinstance(plan, Mapping):
            raise TimelineError("the clustering requested file holds no clusteringPlan")
        groups = tuple(ClusteringGroup.from_json(g) for g in plan.get("inputGroups") or ())
        strategy = plan.get("strategy") or {}
        name = strategy.get("strategyClassName") or EXECUTION_STRATEGY
        if name != EXECUTION_STRATEGY:
            raise UnsupportedFeatureError(f"clustering execution strategy {name!r} cannot keep record-key order; "
                                          f"lsm_lab runs only {EXECUTION_STRATEGY}")
        extra = plan.get("extraMetadata") or {}
        return cls(groups, {str(k): str(v) for k, v in (strategy.get("strategyParams") or {}).items()},
                   extra.get(KEY_SNAPSHOT) or None)


def _rel(partition: str, name: str) -> str:
    return f"{partition}/{name}" if partition else name


def _slice_info(fs: FileSlice) -> SliceInfo:
    return SliceInfo(fs.partition, fs.file_id, fs.base_file.relative if fs.base_file else None,
                     tuple(f.relative for f in fs.log_files if f.name.content != "cdc"))


def _pack(slices: list[FileSlice], limit: int) -> list[list[FileSlice]]:
    """Consecutive slices in groups of at most `limit` bytes (a slice larger than that alone)."""
    out: list[list[FileSlice]] = []
    size = 0
    for fs in slices:
        if not out or size + fs.size_bytes > limit:
            out.append([])
            size = 0
        out[-1].append(fs)
        size += fs.size_bytes
    return out


def make_plan(table: TableState, config: ClusteringConfig,
              exclude: set[tuple[str, str]] = frozenset()) -> ClusteringPlan:  # type: ignore[assignment]
    """Groups of small latest slices per partition (bucket index: one group per bucket that has logs)."""
    conf = table.config
    by_partition: dict[str, list[FileSlice]] = {}
    for fs in table.latest_slices():
        if (fs.partition, fs.file_id) not in exclude:
            by_partition.setdefault(fs.partition, []).append(fs)
    groups: list[ClusteringGroup] = []
    if conf.bucket_index:
        for partition in sorted(by_partition):
            for fs in sorted(by_partition[partition], key=lambda s: s.file_id):
                if fs.log_files:  # a bucket with logs: merge its slice into one sorted base file
                    groups.append(ClusteringGroup((_slice_info(fs),), 1,
                                                  {"TOTAL_SIZE": float(fs.size_bytes), "NUM_FILE_SLICES": 1.0}))
        return ClusteringPlan(tuple(groups[:config.max_groups]), {KEY_SAME_FILE_IDS: "true",
                                                                  KEY_SORT_COLUMNS: ",".join(conf.record_key)})
    for partition in sorted(by_partition):
        small = sorted((fs for fs in by_partition[partition] if fs.size_bytes < config.small_file_bytes),
                       key=lambda s: (s.size_bytes, s.file_id))
        for pack in _pack(small, config.group_bytes):
            if len(pack) > 1 or pack[0].log_files:  # one lone base file: nothing to gain
                size = sum(s.size_bytes for s in pack)
                n = max(1, math.ceil(size / config.target_file_bytes))
                groups.append(ClusteringGroup(tuple(_slice_info(s) for s in pack), n,
                                              {"TOTAL_SIZE": float(size), "NUM_FILE_SLICES": float(len(pack))}))
    return ClusteringPlan(tuple(groups[:config.max_groups]), {KEY_SORT_COLUMNS: ",".join(conf.record_key)})


# --------------------------------------------------------------------------- plans on the timeline
def read_plan(timeline: ActiveTimeline, instant: Instant) -> ClusteringPlan:
    if instant.action != CLUSTERING:
        raise InputError(f"{instant} is not a clustering")
    return ClusteringPlan.from_json(timeline.read_content(instant, State.REQUESTED))


def pending_plans(timeline: ActiveTimeline) -> list[tuple[Instant, ClusteringPlan]]:
    """Every pending (requested or inflight) clustering, oldest first."""
    return [(i, read_plan(timeline, i)) for i in timeline.pending() if i.action == CLUSTERING]


def pending_clustering_file_groups(timeline: ActiveTimeline) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for _, plan in pending_plans(timeline):
        out |= plan.file_groups
    return out


def plan_files(plan: ClusteringPlan) -> list[str]:
    """Every input file of a plan, relative to the table folder."""
    return [p for g in plan.groups for s in g.slices for p in ([s.data_file] if s.data_file else []) + list(s.delta_files)]


def _config(table: TableState, options: Mapping[str, str] | None) -> ClusteringConfig:
    if table.config.version < 8:
        raise UnsupportedFeatureError("clustering needs table version 8 or later (version 6 has no clustering "
                                      "action on its timeline)", path=table.path)
    options = checks.options_arg(options)
    unknown = sorted(set(options) - set(OPTION_KEYS))
    if unknown:
        raise InputError(f"unknown clustering option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                         f"known: {', '.join(OPTION_KEYS)}")
    return ClusteringConfig.from_props({**table.config.props, **options}, table.config.record_key)


def _make(table: TableState, config: ClusteringConfig) -> ClusteringPlan | None:
    timeline = table.active_timeline
    exclude = pending_file_groups(timeline) | pending_clustering_file_groups(timeline)
    made = make_plan(table, config, exclude)
    if not made.groups:
        return None
    return ClusteringPlan(made.groups, made.strategy_params, table.latest_completion())


def plan(table: TableState, *, options: Mapping[str, str] | None = None) -> ClusteringPlan | None:
    """The clustering `schedule` would save now, without saving it (a dry run: nothing is written, no lock is
    taken, failed writes are not rolled back); None when nothing needs clustering."""
    return _make(table, _config(table, options))


def schedule(table: TableState, *, options: Mapping[str, str] | None = None) -> Instant | None:
    """Plan a clustering and save it as `<t>.clustering.requested`; None when nothing needs clustering."""
    table.check_writable()
    config = _config(table, options)
    timeline = table.active_timeline
    with table_lock(table.path):
        rollback_failed_writes(table.path, timeline)
        made = _make(table, config)
        if made is None:
            return None
        return timeline.request(CLUSTERING, made.to_json())


# --------------------------------------------------------------------------- execution
@dataclass(frozen=True)
class ClusteringContext:
    """What one input group needs, as plain data (Spark ships it to the task that runs the group)."""

    base_path: TablePath
    instant: str
    read: ReadContext
    engine: str | None
    same_file_ids: bool
    #: size of each data file ("partition/name"), from one listing: no HEAD per file on an object store
    sizes: Mapping[str, int] | None = None
    #: begin times of the completed (log) compactions: only their logs' footers say what they replace
    #: (None: every log's footer is read)
    compactions: frozenset[str] | None = None
    #: what each completed log compaction replaced, per file group (`TableState.log_compactions`)
    log_compactions: Mapping[str, Mapping[tuple[str, str], frozenset[str]]] | None = None


GroupRunner = Callable[[ClusteringContext, tuple[ClusteringGroup, ...], Instant], list[WriteStat]]


def run_locally(ctx: ClusteringContext, groups: tuple[ClusteringGroup, ...], inflight: Instant) -> list[WriteStat]:
    """Run the plan's groups one after the other in this process."""
    stats: list[WriteStat] = []
    for task, group in enumerate(groups):
        stats.extend(run_group(ctx, group, task))
    return stats


def _data_file(base_path: TablePath, rel: str, completion_of: Mapping[str, str], instant: str,
               sizes: Mapping[str, int] | None = None) -> DataFile:
    partition, _, name = rel.rpartition("/")
    parsed = naming.parse(name)
    if parsed is None:
        raise TimelineError(f"clustering {instant}: the plan names {rel!r}, which is not a data file name",
                            path=base_path)
    path = base_path / rel
    known = sizes.get(rel) if sizes is not None else None
    if known is not None:  # listed moments ago: a file gone since fails at its GET
        return DataFile(partition, path, parsed, known, completion_of.get(parsed.instant, ""))
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise CorruptFileError(f"clustering {instant}: the plan's file {rel} is missing (cleaned or rolled back?)",
                               path=path) from None
    return DataFile(partition, path, parsed, size, completion_of.get(parsed.instant, ""))


def _slice_files(base_path: TablePath, s: SliceInfo, completion_of: Mapping[str, str], instant: str,
                 sizes: Mapping[str, int] | None = None, compactions: frozenset[str] | None = None,
                 chains: Mapping[str, Mapping[tuple[str, str], frozenset[str]]] | None = None) -> list[DataFile]:
    base = [_data_file(base_path, s.data_file, completion_of, instant, sizes)] if s.data_file else []
    logs = [_data_file(base_path, r, completion_of, instant, sizes) for r in s.delta_files]
    group = (s.partition, s.file_id)
    known = {c: fgs[group] for c, fgs in (chains or {}).items() if group in fgs}
    logs = fsview.apply_compacted_logs(logs, completion_of, {f.instant for f in logs} if compactions is None
                                       else compactions, known)
    return base + logs


def _row_count(f: DataFile) -> int:
    if f.name.is_log and f.name.log_format == 1:
        return 0  # a v1 log is no Parquet file; its blocks are small next to the base files
    return int(parquet_footer.read_footer(f.path)[0].num_rows)  # (one suffix GET on an object store)


def _merged_batches(ctx: ReadContext, files: list[DataFile], needed: list[str], engine: str | None,
                    where: str) -> Iterator[pa.RecordBatch]:
    """The group's surviving records, one per key, in record-key order."""
    sources, all_sorted = iter_sources(ctx, files, needed, batch_size=BATCH_ROWS)
    chosen = choose_engine(engine, lsm=ctx.config.is_lsm, inputs_sorted=all_sorted, where=where)
    if chosen in SORTED_ENGINES:
        yield from merge_sources(sources, ctx.spec, engine=chosen, batch_size=BATCH_ROWS)
        return
    # hash (unsorted inputs, or asked for): merge by hash, then sort once
    out_schema = pa.schema([ctx.full_schema.field(n) for n in needed])
    merged = merge_to_table(sources, ctx.spec, engine=chosen, batch_size=BATCH_ROWS) if sources else \
        out_schema.empty_table()
    yield from records.sort_by_key(merged.select(needed)).to_batches(BATCH_ROWS)


def run_group(cctx: ClusteringContext, group: ClusteringGroup, task: int, *, token: str | None = None
              ) -> list[WriteStat]:
    """Merge one input group and write it as `numOutputFileGroups` key-sorted base files at the instant.

    `token`: a Spark task's write token (default: one from `task`)."""
    ctx = cctx.read
    instant = cctx.instant
    completion_of = ctx.completion_of
    files: list[DataFile] = []
    for s in group.slices:  # a key lives in one file group: concatenating the slices keeps each key's order
        files.extend(_slice_files(cctx.base_path, s, completion_of, instant, cctx.sizes, cctx.compactions,
                                  cctx.log_compactions))
    needed = list(ctx.full_schema.names)
    out_schema = pa.schema([ctx.full_schema.field(n) for n in needed])
    n_out = 1 if cctx.same_file_ids else group.num_output_file_groups
    # rows per output file (one output: all of them, no footer read to count them)
    budget = max(1, math.ceil(sum(_row_count(f) for f in files) / n_out)) if n_out > 1 else 1
    partition = group.partition
    folder = cctx.base_path / partition if partition else cctx.base_path
    token = token or naming.write_token(task, 0, 0)
    stats: list[WriteStat] = []
    out: parquet_write.ParquetFileWriter | None = None
    state: dict[str, Any] = {}
    hudi_opts = hudi_bloom.options_for(ctx.config.props, ctx.config.version)  # upstream's footer filter, if asked

    def open_next() -> parquet_write.ParquetFileWriter:
        file_id = group.slices[0].file_id if cctx.same_file_ids else index.new_file_id()
        name = naming.base_file_name(file_id, token, instant)
        markers.create_marker(cctx.base_path, instant, partition, name, "CREATE")
        state.update(file_id=file_id, name=name, rows=0)
        return parquet_write.ParquetFileWriter(folder / name, out_schema, is_sorted=True, hudi_bloom=hudi_opts)

    def close(w: parquet_write.ParquetFileWriter) -> None:
        size = w.close()
        stats.append(WriteStat(partition, state["file_id"], _rel(partition, state["name"]), "null",
                               numWrites=w.rows, totalWriteBytes=size, fileSizeInBytes=size, baseFile=state["name"],
                               minRecordKey=w.min_key, maxRecordKey=w.max_key))

    where = f"clustering group of {partition or 'the table'} ({len(group.slices)} file groups)"

    def write_all(engine: str | None) -> None:
        nonlocal out
        for batch in _merged_batches(ctx, files, needed, engine, where):
            while batch.num_rows:
                if out is None:
                    out = open_next()
                room = batch.num_rows if len(stats) >= n_out - 1 else budget - state["rows"]
                piece, batch = batch.slice(0, room), batch.slice(room)
                state["rows"] += piece.num_rows
                idx = piece.schema.get_field_index(FILE_NAME)
                piece = piece.set_column(idx, FILE_NAME, pa.repeat(pa.scalar(state["name"], pa.string()),
                                                                   piece.num_rows))
                out.write(piece.select(needed))
                if len(stats) < n_out - 1 and state["rows"] >= budget:
                    close(out)
                    out = None
        if out is not None:
            close(out)
            out = None

    engine = check_engine(cctx.engine) or ctx.default_engine()
    try:
        try:
            write_all(engine)
        except InputError as exc:  # a file was not sorted after all: start again with the hash engine
            if engine not in SORTED_ENGINES:
                raise
            if out is not None:
                out.abort()
                out = None
            for stat in stats:  # the files written so far go (their markers stay: rollback knows them)
                paths.unlink(folder / stat.path.rpartition("/")[2])
            stats.clear()
            write_all(fell_back(engine, where, str(exc).splitlines()[0]))
    except BaseException:
        if out is not None:
            out.abort()
        raise
    return stats


def execute(table: TableState, instant: Instant | str, *, merge: str | None = None,
            runner: GroupRunner | None = None, extra_metadata: Mapping[str, str] | None = None) -> Instant:
    """Run a requested clustering plan and complete it as a `replacecommit`; returns the completed instant.

    Raises `ConflictError` (after rolling the clustering back) when a write that
    completed after the plan was made touched one of its file groups.  `runner`
    runs the groups (default `run_locally`; Spark passes one that runs each group
    as a task); everything around it is the same for every runner."""
    timeline = table.active_timeline
    begin = instant if isinstance(instant, str) else instant.begin_time
    inflight, hb = claim(table, begin, (CLUSTERING,), "clustering")
    if hb is None:
        return inflight  # completed already
    try:
        plan = read_plan(timeline, inflight)
        schema = table.schema
        writes = table.visible_writes(None)  # as `table.completion_map()`, with the actions
        completion = {i.begin_time: i.completion_time or i.begin_time for i in writes}
        ctx = ReadContext(table.path, table.config, schema or pa.schema([]), completion, None)
        sizes = None if is_local(table.path) else {  # one LIST instead of a HEAD per input file
            f"{part}/{fn.name}" if part else fn.name: size
            for part, fn, _, size in table.data_files() if size is not None}
        compactions = frozenset(i.begin_time for i in writes if i.action in (COMPACTION, LOG_COMPACTION))
        cctx = ClusteringContext(table.path, begin, ctx, merge, plan.same_file_ids, sizes, compactions,
                                 table.log_compactions(writes))
        conflict = find_conflict(timeline, plan.snapshot, plan.file_groups, begin)
        stats: list[WriteStat] = []
        if conflict is None:
            stats = (runner or run_locally)(cctx, plan.groups, inflight)
        replaced: dict[str, list[str]] = {}
        if not plan.same_file_ids:
            for partition, file_id in sorted(plan.file_groups):
                replaced.setdefault(partition, []).append(file_id)
        extra = {writer.SCHEMA_KEY: writer.schema_to_text(schema)} if schema is not None and len(schema) else {}
        extra.update(extra_metadata or {})
        meta = commit_metadata(stats, operation=OPERATION, extra=extra)
        meta["partitionToReplaceFileIds"] = replaced
        keyindex.index_commit(table.path, begin, meta)  # before the commit point (a rollback removes it)
        with table_lock(table.path):
            conflict = conflict or find_conflict(timeline, plan.snapshot, plan.file_groups, begin)
            if conflict is not None:
                rollback_pending(table.path, timeline, inflight, check_heartbeat=False)
                raise ConflictError(
                    f"clustering {begin} conflicts with {conflict.action} {conflict.begin_time} (completed "
                    f"{conflict.completion_time}), which wrote to file groups the plan rewrites; the clustering "
                    "was rolled back — plan it again")
            mdt_write.update(table.path, inflight, meta, config=timeline.config)  # the metadata table first, as upstream
            done = timeline.complete(inflight, meta)
            markers.delete_markers(table.path, begin, mine_only=True)
        return done
    except ConflictError:
        raise
    except BaseException:
        with table_lock(table.path):
            reset_compaction(table.path, timeline, inflight)  # back to requested; runs again later
        raise
    finally:
        hb.stop()


def cluster(table: TableState, *, plan_only: bool = False, options: Mapping[str, str] | None = None,
            merge: str | None = None, runner: GroupRunner | None = None,
            extra_metadata: Mapping[str, str] | None = None) -> Instant | None:
    """Finish pending clustering plans nobody runs, then plan (and unless `plan_only`, run) a new one.

    Returns the last completed clustering instant, the requested one with
    `plan_only`, or None when there was nothing to do. `runner` and
    `extra_metadata` go to `execute` (Spark runs the groups as tasks)."""
    checks.str_arg(merge, "merge", optional=True)
    check_engine(merge)
    plan_only = checks.bool_arg(plan_only, "plan_only")
    done: Instant | None = None
    if not plan_only:
        for inst, _ in pending_plans(table.active_timeline):
            if heartbeat.is_alive(table.path, inst.begin_time):
                continue
            try:
                done = execute(table, inst, merge=merge, runner=runner, extra_metadata=extra_metadata)
            except ConflictError:
                continue  # another process picked it up first, or a write got there first (rolled back)
    scheduled = schedule(table, options=options)
    if plan_only or scheduled is None:
        return scheduled if plan_only else done
    return execute(table, scheduled, merge=merge, runner=runner, extra_metadata=extra_metadata)


def drop_plans_reading(table: TableState, begin_time: str) -> None:
    """Remove pending clustering plans that read files of `begin_time` (before that write is rolled back)."""
    timeline = table.active_timeline
    for inst, plan in pending_plans(timeline):
        names = [p.rpartition("/")[2] for p in plan_files(plan)]
        if any((parsed := naming.parse(n)) is not None and parsed.instant == begin_time for n in names):
            if heartbeat.is_alive(table.path, inst.begin_time):
                raise ConflictError(f"clustering {inst.begin_time} reads files of {begin_time} and is running")
            reset_compaction(table.path, timeline, inst)
            remove_timeline_files(timeline, inst.begin_time)


def format_result(instant: Instant, metadata: dict[str, Any]) -> str:
    """One line about a completed clustering: its times and how many files it wrote and replaced."""
    written = sum(len(v) for v in (metadata.get("partitionToWriteStats") or {}).values())
    replaced = sum(len(v) for v in (metadata.get("partitionToReplaceFileIds") or {}).values())
    return (f"replacecommit {instant.begin_time} completed at {instant.completion_time}: {written} file(s) "
            f"written, {replaced} file group(s) replaced")


def format_plan(instant: Instant | None, plan: ClusteringPlan) -> str:
    """A plain-text dump of a clustering plan, one line per input group (`instant` None: a dry run's plan)."""
    head = f"clustering {instant.begin_time} [{instant.state.value}]" if instant else "clustering [dry run]"
    lines = [f"{head}  groups={len(plan.groups)}  "
             f"snapshot={plan.snapshot or '—'}" + ("  (bucket index: output keeps each file id)"
                                                   if plan.same_file_ids else "")]
    for g in plan.groups:
        where = f"{g.partition}/" if g.partition else ""
        lines.append(f"  {where}: {len(g.slices)} slice(s), {int(g.metrics.get('TOTAL_SIZE', 0))} B → "
                     f"{g.num_output_file_groups} file group(s)  [{', '.join(s.file_id[:13] for s in g.slices)}]")
    return "\n".join(lines)


__all__ = [
    "ClusteringConfig",
    "ClusteringContext",
    "ClusteringGroup",
    "ClusteringPlan",
    "GroupRunner",
    "SliceInfo",
    "cluster",
    "drop_plans_reading",
    "execute",
    "format_plan",
    "format_result",
    "make_plan",
    "pending_clustering_file_groups",
    "pending_plans",
    "plan",
    "read_plan",
    "run_group",
    "run_locally",
    "schedule",
]
