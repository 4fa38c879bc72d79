"""Writing Hudi's metadata table (its `files` partition) in the same commit protocol as upstream.

A table of version 8 or 9 with `hoodie.metadata.enable=true` keeps, under `.hoodie/metadata/`,
a MOR table whose `files` partition lists every data file of every partition
(`table/metadata_table.py` reads it; lsm_lab and hudi-rs list the table from it: table/mdt_listing.py).  lsm_lab writes it as
upstream's `HoodieBackedTableMetadataWriter` does:

    first write of the table with the option on (initialisation, once):
      .hoodie/metadata/.hoodie/hoodie.properties      MOR, HFILE base files, key field `key`
      .hoodie/metadata/files/.hoodie_partition_metadata
      .hoodie/metadata/files/files-0000-0_0-0-0_00000000000000000.hfile
                    the committed files found by listing (none on a new table) + __all_partitions__
      .hoodie/metadata/.hoodie/timeline/00000000000000000[_<c>].deltacommit   (the "000" init family)
      data hoodie.properties: hoodie.table.metadata.partitions=files        ← only now: MDT usable

    every data instant t that adds or removes files (commit, deltacommit, compaction,
    clustering, clean), under the table lock, after the conflict check, BEFORE t completes:
      MDT t.deltacommit.requested → .inflight, a marker in the MDT's .hoodie/.temp/t/
      .hoodie/metadata/files/.files-0000-0_<t>.log.1_0-0-0   one HFILE_DATA_BLOCK (INSTANT_TIME t,
          SCHEMA HoodieMetadataRecord): a cell per touched partition (type 2: file → size, or
          isDeleted for a cleaned file) and `__all_partitions__` (type 1)
      MDT t_<c>.deltacommit
    then the data instant t completes.

**Why a crash is harmless.** A reader counts an MDT log block only if its instant is *valid*
(`HoodieTableMetadataUtil.getValidInstantTimestamps`, see `table/metadata_table.py`): completed on
the data table, or an MDT deltacommit whose instant is not pending on the data table.  Killed
after the MDT deltacommit and before the data commit, t is pending on the data table, so its
block is ignored.  Whoever then rolls t back (a later writer, `Table.rollback`, a restore, or the
writer itself on a conflict or an error) first rolls back the MDT deltacommit t — an MDT
rollback instant, t's MDT log file deleted, t's MDT instant files removed — as upstream's
`HoodieBackedTableMetadataWriter.update(HoodieRollbackMetadata, …)` rolls back the MDT deltacommit
with the rolled-back instant's time.  This matters: once the data rollback completes, the reader
counts blocks of rolled-back instants as valid (upstream relies on the MDT rollback having
removed them), and an instant erased without a rollback instant would look like an indexing
commit.  A re-run of the same instant (a compaction run again) first rolls back its earlier MDT
deltacommit, as upstream does for an MDT instant that already exists.

**MDT compaction.** Before a deltacommit, when `hoodie.metadata.compact.max.delta.commits` (upstream's
`HoodieMetadataConfig.COMPACT_NUM_DELTA_COMMITS`, default 10) deltacommits completed since the last
one and none of them belongs to a pending data instant, the merged `files` records become a new
base file `files-0000-0_0-0-0_<c>.hfile` (`<c>.compaction.requested` → `.inflight` → `<c>_<d>.commit`);
the deltacommit written next completes after `c` and starts the new slice.  A rollback of a
deltacommit the MDT already compacted cannot delete its records (upstream refuses it in
`validateRollback`): lsm_lab then drops the MDT, and the next write builds it again from a listing.

Simplified compared with Apache Hudi: only the `files` partition (no column_stats,
partition_stats, bloom_filters, record_index, secondary or expression indexes); the MDT is
compacted but never cleaned or archived (old slices stay on disk; readers read the latest); no
empty initial log file with a delete block next to the base file; each MDT deltacommit writes
a new log file (lsm_lab never appends); the MDT is written only for table versions 8 and 9
(upstream's default for them is on; lsm_lab's is off — an opt-in table property, so tables
without it are unchanged); a table that gets the option after writes is initialised from a
listing of its committed files.

Taught in: notebooks/14_metadata_table.ipynb (and docs/FORMAT.md, "The metadata table (write)")
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

import fastavro

from lsm_lab.errors import LsmLabError
from lsm_lab.filegroup import fsview
from lsm_lab.filegroup.planner import FULL, CompactionPlan, Operation
from lsm_lab.format import hfile_write, naming
from lsm_lab.format import log_v1 as v1
from lsm_lab.format import metadata_record as mr
from lsm_lab.services import markers
from lsm_lab.storage import TablePath, as_path, atomic, list_names, paths
from lsm_lab.table.metadata_table import MetadataTable
from lsm_lab.table.state import TableState
from lsm_lab.timeline.active import ActiveTimeline
from lsm_lab.timeline.config import TableConfig, read_config, table_checksum, write_config
from lsm_lab.timeline.instant import CLEAN, COMMIT, COMPACTION, DELTA_COMMIT, ROLLBACK, Instant, State, parse_file_name
from lsm_lab.timeline.metadata import WriteStat, commit_metadata, iter_write_stats

PROP_ENABLE = "hoodie.metadata.enable"
PROP_PARTITIONS = "hoodie.table.metadata.partitions"
PROP_INFLIGHT = "hoodie.table.metadata.partitions.inflight"
#: upstream `HoodieMetadataConfig.COMPACT_NUM_DELTA_COMMITS`: MDT deltacommits between two MDT compactions
PROP_COMPACT_DELTAS = "hoodie.metadata.compact.max.delta.commits"
DEFAULT_COMPACT_DELTAS = 10
FILES = "files"
#: `HoodieTableMetadataUtil.getFileIDForFileGroup(FILES, 0)`
FILE_ID = "files-0000-0"
#: `HoodieTimeline.SOLO_COMMIT_TIMESTAMP` + the partition's ordinal ("000": files), upstream's
#: `HoodieTableMetadataUtil.createIndexInitTimestamp`
INIT_INSTANT = "00000000000000000"
WRITE_TOKEN = "0-0-0"
VERSIONS = (8, 9)
_META_FIELDS = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
                "_hoodie_file_name")


def metadata_folder(base_path: TablePath) -> TablePath:
    return base_path / ".hoodie" / "metadata"


def enabled(config: TableConfig) -> bool:
    """Does this table keep a metadata table lsm_lab writes (`hoodie.metadata.enable=true`, version 8 or 9)?"""
    return config.version in VERSIONS and config.props.get(PROP_ENABLE, "false").strip().lower() == "true"


# ------------------------------------------------------------------------------------- the values
def record_schema() -> dict[str, Any]:
    """The writer schema of the values: Hudi's five meta fields, then `HoodieMetadataRecord`'s fields
    (as `HoodieHFileDataBlock` writes them: `HoodieAvroUtils.addMetadataFields` of the avsc)."""
    meta = [{"name": n, "type": ["null", "string"], "doc": "", "default": None} for n in _META_FIELDS]
    return {**mr.HOODIE_METADATA_RECORD, "fields": meta + list(mr.HOODIE_METADATA_RECORD["fields"])}


_SCHEMA = record_schema()
_PARSED = fastavro.parse_schema(_SCHEMA)
SCHEMA_TEXT = json.dumps(_SCHEMA, separators=(",", ":"))


def _value(kind: int, files: Mapping[str, tuple[int, bool]]) -> bytes:
    """One `HoodieMetadataRecord` value; the key is left empty, as upstream's HFile writer stores it
    (the cell's key holds it)."""
    rec: dict[str, Any] = dict.fromkeys(_META_FIELDS)
    rec.update({"key": "", "type": kind,
                "filesystemMetadata": {name: {"size": int(size), "isDeleted": bool(deleted)}
                                       for name, (size, deleted) in sorted(files.items())},
                "BloomFilterMetadata": None, "ColumnStatsMetadata": None, "recordIndexMetadata": None,
                "SecondaryIndexMetadata": None})
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _PARSED, rec)
    return buf.getvalue()


def _key(partition: str) -> str:
    return partition if partition else mr.NON_PARTITIONED_KEY


def files_cells(added: Mapping[str, Mapping[str, int]], deleted: Mapping[str, Iterable[str]], *,
                all_partitions: bool = True) -> list[tuple[bytes, bytes]]:
    """The `files` partition's cells for files added (partition → name → size) and deleted, sorted by key
    (`HoodieMetadataPayload.createPartitionFilesRecord`, `createPartitionListRecord`)."""
    per: dict[str, dict[str, tuple[int, bool]]] = {}
    for partition, names in added.items():
        per.setdefault(partition, {}).update({n: (s, False) for n, s in names.items()})
    for partition, gone in deleted.items():
        per.setdefault(partition, {}).update(dict.fromkeys(gone, (0, True)))
    cells = {_key(p).encode(): _value(mr.TYPE_FILE_LIST, files) for p, files in per.items()}
    if all_partitions:
        cells[mr.ALL_PARTITIONS_KEY.encode()] = _value(mr.TYPE_PARTITION_LIST,
                                                       {_key(p): (0, False) for p in added})
    return sorted(cells.items())


def changes_of(instant: Instant, metadata: Mapping[str, Any]) -> tuple[dict[str, dict[str, int]], dict[str, list[str]]]:
    """(added: partition → file name → size, deleted: partition → names) of a completed-to-be instant."""
    added: dict[str, dict[str, int]] = {}
    deleted: dict[str, list[str]] = {}
    if instant.action == CLEAN:
        for partition, pm in (metadata.get("partitionMetadata") or {}).items():
            names = [os.path.basename(str(f)) for f in (pm or {}).get("successDeleteFiles") or []]
            if names:
                deleted[str(partition or "")] = names
        return added, deleted
    for stat in iter_write_stats(metadata):
        partition = str(stat.get("partitionPath") or "")
        if stat.get("path"):
            added.setdefault(partition, {})[os.path.basename(str(stat["path"]))] = int(stat.get("fileSizeInBytes") or 0)
        for cdc, size in (stat.get("cdcStats") or {}).items():
            added.setdefault(partition, {})[os.path.basename(str(cdc))] = int(size or 0)
    return added, deleted


# ------------------------------------------------------------------------------------- initialisation
def _mdt_props(config: TableConfig) -> dict[str, str]:
    name = f"{config.name}_metadata"
    database = config.props.get("hoodie.database.name", "")
    return {
        "hoodie.table.name": name, "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.table.version": str(config.version), "hoodie.table.initial.version": str(config.version),
        "hoodie.table.recordkey.fields": "key", "hoodie.table.base.file.format": "HFILE",
        "hoodie.table.keygenerator.type": "HOODIE_TABLE_METADATA",
        "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
        "hoodie.populate.meta.fields": "false", "hoodie.record.merge.mode": "CUSTOM",
        "hoodie.record.merge.strategy.id": "00000000-0000-0000-0000-000000000000",
        "hoodie.timeline.layout.version": "2", "hoodie.timeline.path": "timeline",
        "hoodie.timeline.history.path": "history", "hoodie.archivelog.folder": "history",
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.table.checksum": str(table_checksum(database, name)),
    }


def _declared(config: TableConfig) -> list[str]:
    return [p.strip() for p in config.props.get(PROP_PARTITIONS, "").split(",") if p.strip()]


def _committed_listing(base_path: TablePath, config: TableConfig) -> dict[str, dict[str, int]]:
    """Data files present now, minus those of pending instants (the write being committed among them)."""
    pending = {i.begin_time for i in ActiveTimeline(base_path, config).pending()}
    out: dict[str, dict[str, int]] = {}
    for partition, path, name, size in fsview.list_data_files_sized(base_path):
        if name.instant in pending:
            continue
        out.setdefault(partition, {})[path.name] = int(size if size is not None else path.stat().st_size)
    return out


def _write_stat(rel: str, name: str, size: int, records: int, base: str) -> WriteStat:
    return WriteStat(partitionPath=FILES, fileId=FILE_ID, path=f"{FILES}/{name}", prevCommit=INIT_INSTANT,
                     numWrites=records, numInserts=records, totalWriteBytes=size, fileSizeInBytes=size,
                     baseFile=base, logFiles=[name] if name != base else [])


def _initialise(base_path: TablePath, config: TableConfig) -> ActiveTimeline:
    """Create the metadata table with its `files` partition (module docstring), then declare it."""
    folder = metadata_folder(base_path)
    if (folder / ".hoodie").exists() or (folder / FILES).exists():  # a half-made one: start again
        paths.remove_tree(base_path, folder, parent="")
    mdt_config = write_config(folder, _mdt_props(config), create=True)
    part = folder / FILES
    atomic.create_file(part / ".hoodie_partition_metadata",
                       f"#partition metadata\ncommitTime={INIT_INSTANT}\npartitionDepth=1\n".encode(), mkdir=True)
    listing = _committed_listing(base_path, config)
    cells = files_cells(listing, {})
    data = hfile_write.write_hfile(cells, file_info={
        b"schema": SCHEMA_TEXT.encode(), b"minRecordKey": cells[0][0], b"maxRecordKey": cells[-1][0]})
    base_name = f"{FILE_ID}_{WRITE_TOKEN}_{INIT_INSTANT}.hfile"
    timeline = ActiveTimeline(folder, mdt_config)
    inflight = timeline.start(timeline.request(DELTA_COMMIT, None, begin_time=INIT_INSTANT))
    markers.create_marker(folder, INIT_INSTANT, FILES, base_name, "CREATE")
    atomic.create_file(part / base_name, data)
    stat = _write_stat(FILES, base_name, len(data), len(cells), base_name)
    timeline.complete(inflight, commit_metadata([stat], operation="bulk_insert"))
    markers.delete_markers(folder, INIT_INSTANT)
    props = dict(config.props)
    props[PROP_PARTITIONS] = ",".join(sorted(set(_declared(config)) | {FILES}))
    props.setdefault(PROP_INFLIGHT, "")
    write_config(base_path, props, create=False)
    return timeline


def _timeline(base_path: TablePath, config: TableConfig) -> ActiveTimeline:
    folder = metadata_folder(base_path)
    if FILES in _declared(config) and (folder / ".hoodie" / "hoodie.properties").exists():
        return ActiveTimeline(folder, read_config(folder))
    return _initialise(base_path, config)


# ------------------------------------------------------------------------------------- the hooks
def update(base_path: TablePath, instant: Instant, metadata: Mapping[str, Any], *,
           config: TableConfig | None = None) -> Instant | None:
    """Before data instant `instant` completes with `metadata`: its MDT deltacommit (None when the table
    keeps no metadata table).  Call with the data table's lock held.  `config` is the caller's table
    config (saves a read of hoodie.properties when the table keeps no metadata table)."""
    base_path = as_path(base_path)
    config = config if config is not None else read_config(base_path)
    if config.version not in VERSIONS:
        return None
    if not enabled(config):
        if config.props.get(PROP_ENABLE, "").strip().lower() == "false" and FILES in _declared(config):
            drop(base_path)
        return None
    config = read_config(base_path)  # as on disk now: the MDT may have been declared since the caller read it
    added, deleted = changes_of(instant, metadata)
    timeline = _timeline(base_path, config)
    _resume_rollbacks(base_path, config, timeline)
    t = instant.begin_time
    if any(i.begin_time == t and i.action == DELTA_COMMIT for i in timeline.instants()):  # an earlier attempt
        _rollback_mdt(base_path, config, timeline, t)
    compact_if_due(base_path, config, timeline)
    cells = files_cells(added, deleted, all_partitions=instant.action != CLEAN)
    hdata = hfile_write.write_hfile(cells, file_info={b"schema": SCHEMA_TEXT.encode()})
    block = v1.encode_block(v1.BlockType.HFILE, {v1.HeaderKey.INSTANT_TIME: t, v1.HeaderKey.SCHEMA: SCHEMA_TEXT},
                            hdata)
    inflight = timeline.start(timeline.request(DELTA_COMMIT, None, begin_time=t))
    name = naming.v1_log_file_name(FILE_ID, t, 1, WRITE_TOKEN)
    folder = metadata_folder(base_path)
    markers.create_marker(folder, t, FILES, name, "APPEND")  # a kill before the MDT commit: a failed write
    size = v1.write_log_file(folder / FILES / name, [block])
    base = f"{FILE_ID}_{WRITE_TOKEN}_{INIT_INSTANT}.hfile"
    stat = _write_stat(FILES, name, size, len(cells), base)
    done = timeline.complete(inflight, commit_metadata([stat], operation="upsert_prepped"))
    markers.delete_markers(folder, t)
    return done


def compact_if_due(base_path: TablePath, config: TableConfig, timeline: ActiveTimeline) -> Instant | None:
    """Compact the MDT's `files` file group when `hoodie.metadata.compact.max.delta.commits` deltacommits
    completed since its last compaction and every one of them is valid — no data instant is pending with
    an MDT deltacommit of its own (upstream waits the same way: a compaction must not take in a block that
    may still be rolled back).  Called before the new instant's deltacommit, whose log file then completes
    after the compaction and belongs to the new slice (slicing by completion time, table versions 8+)."""
    try:
        every = int(config.props.get(PROP_COMPACT_DELTAS, DEFAULT_COMPACT_DELTAS))
    except ValueError:
        every = DEFAULT_COMPACT_DELTAS
    instants = timeline.instants()
    if every < 1 or any(not i.is_completed for i in instants):
        return None
    last = max((i.begin_time for i in instants if i.action in (COMMIT, COMPACTION)), default=INIT_INSTANT)
    deltas = [i for i in instants if i.action == DELTA_COMMIT and not i.begin_time.startswith(INIT_INSTANT[:14])
              and (i.completion_time or i.begin_time) > last]
    if len(deltas) < every:
        return None
    data = TableState(base_path, config)
    pending = {i.begin_time for i in data.instants() if not i.is_completed}
    if any(i.begin_time in pending for i in instants):
        return None
    folder = metadata_folder(base_path)
    mdt = TableState(folder, read_config(folder))
    view = MetadataTable(data, mdt, [FILES])
    records = view.records(FILES)
    cells = []
    for key, rec in records.items():
        files = {n: (int(v.get("size") or 0), False)
                 for n, v in (rec.payload.get("filesystemMetadata") or {}).items() if not v.get("isDeleted")}
        cells.append((key.encode(), _value(rec.type, files)))
    cells.sort()
    slices = mdt.latest_slices(partitions=[FILES])
    current = slices[0] if slices else None
    op = Operation(partition=FILES, file_id=FILE_ID,
                   base_instant=current.base_file.name.instant if current and current.base_file else INIT_INSTANT,
                   base_file=current.base_file.path.name if current and current.base_file else None,
                   log_files=tuple(f.path.name for f in (current.log_files if current else ())),
                   operation_type=FULL)
    begin = ActiveTimeline(base_path, config).new_instant_time()
    inflight = timeline.start(timeline.request(COMPACTION, CompactionPlan(operations=(op,), strategy="full").to_json(),
                                               begin_time=begin))
    data_bytes = hfile_write.write_hfile(cells, file_info={
        b"schema": SCHEMA_TEXT.encode(), b"minRecordKey": cells[0][0] if cells else b"",
        b"maxRecordKey": cells[-1][0] if cells else b""})
    name = f"{FILE_ID}_{WRITE_TOKEN}_{begin}.hfile"
    markers.create_marker(folder, begin, FILES, name, "CREATE")
    atomic.create_file(folder / FILES / name, data_bytes)
    stat = _write_stat(FILES, name, len(data_bytes), len(cells), name)
    done = timeline.complete(inflight, commit_metadata([stat], operation="compact", compacted=True))
    markers.delete_markers(folder, begin)
    return done


def rollback(base_path: TablePath, rolled_back: str, *, config: TableConfig | None = None) -> Instant | None:
    """Roll back the MDT deltacommit of data instant `rolled_back` (if there is one) before the data
    table's rollback of it completes or its files are erased (module docstring).  `config`: the
    caller's table config (saves a read of hoodie.properties)."""
    base_path = as_path(base_path)
    config = config if config is not None else read_config(base_path)
    if not enabled(config):  # only an MDT lsm_lab keeps: another engine's is left as it is
        return None
    folder = metadata_folder(base_path)
    if not (folder / ".hoodie" / "hoodie.properties").exists():
        return None
    try:
        timeline = ActiveTimeline(folder, read_config(folder))
    except LsmLabError:
        return None
    _resume_rollbacks(base_path, config, timeline)
    instants = timeline.instants()
    target = [i for i in instants if i.begin_time == rolled_back and i.action == DELTA_COMMIT]
    if not target:
        return None
    done = target[0].completion_time
    if done is not None and any(i.is_completed and i.action in (COMMIT, COMPACTION) and i.begin_time > done
                                for i in instants):
        # its records are in an MDT base file already: deleting its log would not remove them.  Upstream
        # refuses such a rollback (`validateRollback`); lsm_lab drops the MDT, and the next write builds it
        # again from a listing of the committed files
        drop(base_path)
        return None
    return _rollback_mdt(base_path, config, timeline, rolled_back)


def drop(base_path: TablePath) -> None:
    """Delete the metadata table of a table whose option was turned off (`hoodie.metadata.enable=false`), as
    upstream's writer does (`HoodieTableMetadataUtil.deleteMetadataTable`): undeclared first, so that no
    reader uses it once it may be stale, then removed."""
    base_path = as_path(base_path)
    config = read_config(base_path)
    if _declared(config):
        props = {k: v for k, v in config.props.items() if k not in (PROP_PARTITIONS, PROP_INFLIGHT)}
        write_config(base_path, props, create=False)
    folder = metadata_folder(base_path)
    if folder.exists():
        paths.remove_tree(base_path, folder, parent="")


def _resume_rollbacks(base_path: TablePath, config: TableConfig, timeline: ActiveTimeline) -> None:
    """Finish MDT rollbacks a killed process left pending: readers hide the instant a pending rollback
    names, so leaving one would hide a later deltacommit of the same instant time (a compaction re-run).
    An MDT compaction a killed process left pending is undone (its base file deleted, its instant
    removed); the next write compacts again."""
    for inst in timeline.pending():
        if inst.action == COMPACTION:
            folder = metadata_folder(base_path)
            for _, fname, _ in markers.marked_files(folder, inst.begin_time):
                paths.unlink(folder / FILES / fname, missing_ok=True)
            paths.unlink(folder / FILES / f"{FILE_ID}_{WRITE_TOKEN}_{inst.begin_time}.hfile", missing_ok=True)
            _remove_timeline_files(timeline, inst.begin_time, states=(State.INFLIGHT, State.REQUESTED))
            markers.delete_markers(folder, inst.begin_time)
            continue
        if inst.action != ROLLBACK:
            continue
        try:
            target = (timeline.read_content(inst, State.REQUESTED).get("instantToRollback") or {}).get("commitTime")
        except LsmLabError:
            target = None
        if target:
            _rollback_mdt(base_path, config, timeline, str(target), pending=inst)
        else:
            _remove_timeline_files(timeline, inst.begin_time, states=(State.INFLIGHT, State.REQUESTED))


def _rollback_mdt(base_path: TablePath, config: TableConfig, timeline: ActiveTimeline, t: str, *,
                  pending: Instant | None = None) -> Instant:
    """Roll back MDT deltacommit `t` (or finish the `pending` rollback of it); a new rollback's time comes from
    the data table's clock (upstream too derives it from the data table's instant), so it never collides
    with a later data instant's."""
    folder = metadata_folder(base_path)
    action = DELTA_COMMIT
    if pending is None:
        begin = ActiveTimeline(base_path, config).new_instant_time()
        pending = timeline.request(ROLLBACK, {"instantToRollback": {"commitTime": t, "action": action}},
                                   begin_time=begin)
    inflight = timeline.start(pending) if pending.state is State.REQUESTED else pending
    _remove_timeline_files(timeline, t, states=(State.COMPLETED,))  # invisible first
    deleted: list[str] = []
    for partition in list_names(folder):
        if partition.startswith("."):
            continue
        for fname in list_names(folder / partition):
            parsed = naming.parse(fname)
            if parsed is not None and parsed.instant == t and paths.unlink(folder / partition / fname, missing_ok=True):
                deleted.append(f"{partition}/{fname}")
    done = timeline.complete(inflight, {
        "startRollbackTime": inflight.begin_time, "timeTakenInMillis": 0, "totalFilesDeleted": len(deleted),
        "commitsRollback": [t], "instantsRollback": [{"commitTime": t, "action": action}],
        "partitionMetadata": {FILES: {"partitionPath": FILES, "successDeleteFiles": deleted,
                                      "failedDeleteFiles": []}} if deleted else {},
        "version": 1})
    _remove_timeline_files(timeline, t, states=(State.INFLIGHT, State.REQUESTED))
    markers.delete_markers(folder, t)
    return done


def _remove_timeline_files(timeline: ActiveTimeline, t: str, *, states: tuple[State, ...]) -> None:
    """Remove the timeline files of `t` in the given states, in that order."""
    names = list_names(timeline.folder)
    for state in states:
        for name in names:
            parsed = parse_file_name(name)
            if parsed is not None and parsed[0] == t and parsed[2] is state:
                paths.unlink(timeline.folder / name)


__all__ = ["FILES", "FILE_ID", "INIT_INSTANT", "changes_of", "compact_if_due", "drop", "enabled", "files_cells", "metadata_folder",
           "record_schema", "rollback", "update"]
