"""Writing Hudi's metadata table (MDT) in the same commit protocol as upstream: every partition, every file group.

A table of version 8, 9 or 10 with `hoodie.metadata.enable=true` keeps, under `.hoodie/metadata/`,
a MOR table whose partitions index the data table: `files` (the listing; lsm_lab (table/mdt_listing.py) and hudi-rs list the
table from it), `column_stats` and `partition_stats` (on by default, as upstream's `HoodieMetadataConfig`),
`record_index` (global: `hoodie.metadata.record.index.enable=true` or `hoodie.index.type=RECORD_INDEX`; partitioned,
upstream 1.1's `PartitionedRecordIndexer`: `hoodie.metadata.record.level.index.enable=true` — file groups
`record-index-<escaped data partition>-NNNN-0` per data partition, a data partition first written gets new ones in
that deltacommit, the MDT compaction rewrites each group on its own),
`bloom_filters` (`hoodie.metadata.index.bloom.filter.enable=true`: each base file's own footer filter,
format/hudi_bloom.py) and `secondary_index_<name>` (`Table.create_index`).  This module is the protocol; which cells each
partition gets, its file groups and keys are `services/mdt_index.py`'s.  lsm_lab writes it as
upstream's `HoodieBackedTableMetadataWriter` does:

    first write of the table with the option on (initialisation, once per partition):
      .hoodie/metadata/.hoodie/hoodie.properties      MOR, HFILE base files, key field `key`
      .hoodie/metadata/<partition>/.hoodie_partition_metadata
      .hoodie/metadata/files/files-0000-0_0-0-0_00000000000000000.hfile
      .hoodie/metadata/column_stats/col-stats-000N-0_0-0-0_00000000000000001.hfile   (one per file group)
      ...                          each built from the committed data (listing, footers, latest slices)
      .hoodie/metadata/.hoodie/timeline/000000000000000NN[_<c>].deltacommit   (one per partition)
      data hoodie.properties: hoodie.table.metadata.partitions=files,...   ← each only once built

    every data instant t that adds or removes files (commit, deltacommit, compaction,
    clustering, clean), under the table lock, after the conflict check, BEFORE t completes:
      MDT t.deltacommit.requested → .inflight, markers in the MDT's .hoodie/.temp/t/
      .hoodie/metadata/<partition>/.<fileId>_<t>.log.1_0-0-0   per TOUCHED file group: a delete block
          (record-index keys removed) and/or one HFILE_DATA_BLOCK (INSTANT_TIME t, SCHEMA
          HoodieMetadataRecord) of the group's cells — a key goes to group
          mapRecordKeyToFileGroupIndex(key, N)
          (version 10: upstream's native logs instead, `<fileId>_0-0-0_<t>_1.log.hfile` of the cells and
          `<fileId>_0-0-0_<t>_1.deletes.hfile` of the removed keys, whole HFiles: format/hfile_log.py)
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
one and none of them belongs to a pending data instant, the merged records of every partition become
a new base file per file group `<fileId>_0-0-0_<c>.hfile` (`<c>.compaction.requested` → `.inflight` →
`<c>_<d>.commit`, one plan operation per file group);
the deltacommit written next completes after `c` and starts the new slice.  lsm_lab also compacts the
`files` partition ALONE once `lsm_lab.metadata.files.compact.max.log.files` (default 2; 0 = off) deltacommits
completed since its base — a plan naming only `files-0000-0`, marked partial in its commit's extraMetadata —
so that a snapshot plan, which reads only `files`, needs at most a base and 2 logs (3 GETs in a cold process):

    files          [base c1 + log + log] [base c2 + log + log] [base c3 + log ← plans]   every 2 deltacommits
    record_index   [base c0 + log + log + log + log + log + … ← lookups]                  every 10 (upstream)

Before the compaction the
MDT's clean, after it the MDT's archival (`services/mdt_services.py`, upstream's `performTableServices`
order) delete the slices no retained MDT commit reads and move old MDT instants to its LSM timeline.  A rollback of a
deltacommit the MDT already compacted cannot delete its records (upstream refuses it in
`validateRollback`): lsm_lab then drops the MDT, and the next write builds it again from a listing.

Simplified compared with Apache Hudi: upstream's MDT compaction always takes in every partition (the early
compaction of `files` is lsm_lab's; the barriers that need every latest slice stay at the last full one); no
expression indexes (see
mdt_index.py for what each index simplifies); the MDT's compaction, clean and archival
(`services/mdt_services.py`, upstream's retention and barriers) run inline, before the deltacommit of the
write that finds them due, with fresh times from the data table's clock; no empty initial log file with a delete block next to
the base files; each MDT deltacommit writes new log files (lsm_lab never appends); the MDT is written
for table versions 8, 9 and 10 (upstream's default for them is on; lsm_lab's is off — an opt-in table
property, so tables without it are unchanged), and an MDT of an older version than its table (after
`Table.upgrade()`) is built again rather than upgraded in place; a partition enabled after writes is built from the
committed data under the next write's (or `create_index`'s) lock, with the next free
`000000000000000NN` instant.

Taught in: notebooks/14_metadata_table.ipynb (and docs/FORMAT.md, "The metadata table (write)")
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.errors import InputError, LsmLabError, UnsupportedFeatureError
from lsm_lab.filegroup import fsview
from lsm_lab.filegroup.planner import FULL, CompactionPlan, Operation
from lsm_lab.format import hfile_log, hfile_write, naming
from lsm_lab.format import log_v1 as v1
from lsm_lab.format import log_v2 as v2
from lsm_lab.format import metadata_record as mr
from lsm_lab.format.log_v1.deletes import encode_delete_records
from lsm_lab.format.parquet_footer import read_footer
from lsm_lab.format.parquet_read import open_parquet
from lsm_lab.services import markers, mdt_services
from lsm_lab.services import mdt_index as mi
from lsm_lab.services.mdt_index import SCHEMA_TEXT, record_schema
from lsm_lab.storage import TablePath, as_path, atomic, list_names, paths
from lsm_lab.table import mdt_listing
from lsm_lab.table import scan as scan_mod
from lsm_lab.table.metadata_table import MetadataTable
from lsm_lab.table.state import TableState
from lsm_lab.timeline.active import ActiveTimeline
from lsm_lab.timeline.config import TableConfig, read_config, write_config
from lsm_lab.timeline.instant import (
    CLEAN,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    REPLACE_COMMIT,
    ROLLBACK,
    Instant,
    State,
    parse_file_name,
)
from lsm_lab.timeline.metadata import WriteStat, commit_metadata, iter_write_stats

PROP_ENABLE = "hoodie.metadata.enable"
PROP_PARTITIONS = "hoodie.table.metadata.partitions"
PROP_INFLIGHT = "hoodie.table.metadata.partitions.inflight"
#: upstream `HoodieMetadataConfig.COMPACT_NUM_DELTA_COMMITS`: MDT deltacommits between two MDT compactions
PROP_COMPACT_DELTAS = "hoodie.metadata.compact.max.delta.commits"
DEFAULT_COMPACT_DELTAS = 10
#: lsm_lab's own: compact the `files` partition alone once its slice holds this many log files (0: upstream's
#: schedule only), so that a cold snapshot plan reads at most 1 + this many MDT files (module docstring)
PROP_FILES_COMPACT_LOGS = "lsm_lab.metadata.files.compact.max.log.files"
DEFAULT_FILES_COMPACT_LOGS = 2
FILES = "files"
#: `HoodieTableMetadataUtil.getFileIDForFileGroup(FILES, 0)`
FILE_ID = "files-0000-0"
#: `HoodieTimeline.SOLO_COMMIT_TIMESTAMP` + the partition's ordinal ("000": files), upstream's
#: `HoodieTableMetadataUtil.createIndexInitTimestamp`
INIT_INSTANT = "00000000000000000"
SOLO = INIT_INSTANT[:14]
WRITE_TOKEN = "0-0-0"
VERSIONS = (8, 9, 10)
#: table versions whose MDT logs are upstream's native HFile logs (`CommonClientUtils.shouldWriteNativeLogs`)
NATIVE_LOGS_FROM = 10
#: a group's cells (key → value) and the keys its delete block removes
Cells = dict[str, bytes]


def metadata_folder(base_path: TablePath) -> TablePath:
    return base_path / ".hoodie" / "metadata"


def enabled(config: TableConfig) -> bool:
    """Does this table keep a metadata table lsm_lab writes?  Version 8, 9 or 10 and `hoodie.metadata.enable=true`
    — or the option absent on a table that declares `files`: upstream's writer default is on
    (`HoodieMetadataConfig.ENABLE`), so a table Apache Hudi wrote with its MDT keeps it; leaving it
    unwritten would make it stale for every reader that lists from it (lsm_lab and hudi-rs)."""
    if config.version not in VERSIONS:
        return False
    value = config.props.get(PROP_ENABLE)
    if value is None:
        return FILES in _declared(config)
    return value.strip().lower() == "true"


def maintainable(name: str) -> bool:
    """Whether lsm_lab's writer keeps this MDT partition current: `files`, the statistics, the bloom filters, the
    record index and secondary indexes (not expression indexes)."""
    return name in (FILES, mi.COLUMN_STATS, mi.PARTITION_STATS, mi.BLOOM_FILTERS, mi.RECORD_INDEX) or \
        name.startswith(mi.SECONDARY_PREFIX)


def partitioned_record_index(base_path: TablePath) -> bool:
    """Whether the table's record index is upstream 1.1's partitioned one (`isPartitioned` in its index definition,
    upstream `HoodieRecordIndex.IS_PARTITIONED_OPTION`)."""
    options = (mi.index_definitions(base_path).get(mi.RECORD_INDEX) or {}).get("indexOptions") or {}
    return str(options.get("isPartitioned", "false")).strip().lower() == "true"


def wants_partitioned_record_index(base_path: TablePath, config: TableConfig) -> bool:
    """Which record index this table keeps: partitioned when `hoodie.metadata.record.level.index.enable` says true
    (upstream 1.1 `HoodieMetadataConfig.RECORD_LEVEL_INDEX_ENABLE_PROP`; `IndexerFactory` then picks
    `PartitionedRecordIndexer` even when the global flag is on too), global when it says false; unset, the kind the
    table has (its index definition), so a table Hudi wrote keeps its own kind — unless the global flag says true
    (`IndexerFactory` then picks the global `RecordIndexer`)."""
    flag = config.props.get(mi.PROP_PARTITIONED_RI, "").strip().lower()
    if flag in ("true", "false"):
        return flag == "true"
    if any(config.props.get(p, "").strip().lower() == "true" for p in (mi.PROP_GLOBAL_RI, mi.PROP_RECORD_INDEX)):
        return False
    return partitioned_record_index(base_path)


def maintained_partitions(config: TableConfig) -> frozenset[str]:
    """The MDT partitions lsm_lab's writes keep current on a table of this configuration (empty: none).
    `services/mdt_maintained.py` asks this before an upsert trusts the record index."""
    if not enabled(config):
        return frozenset()
    return frozenset(n for n in (set(_declared(config)) | set(mi.wanted_partitions(config))) if maintainable(n))


def _value(kind: int, files: Mapping[str, tuple[int, bool]]) -> bytes:
    return mi.encode_value(kind, filesystemMetadata={name: {"size": int(size), "isDeleted": bool(deleted)}
                                                      for name, (size, deleted) in sorted(files.items())})


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
    """The MDT's hoodie.properties (`table/mdt_listing.metadata_table_props`: readers derive them too)."""
    return mdt_listing.metadata_table_props(config)


def _declared(config: TableConfig) -> list[str]:
    return [p.strip() for p in config.props.get(PROP_PARTITIONS, "").split(",") if p.strip()]


def _declare(base_path: TablePath, name: str) -> TableConfig:
    config = read_config(base_path)
    props = dict(config.props)
    props[PROP_PARTITIONS] = ",".join(sorted(set(_declared(config)) | {name}))
    props.setdefault(PROP_INFLIGHT, "")
    write_config(base_path, props, create=False)
    return read_config(base_path)


def _undeclare(base_path: TablePath, names: Iterable[str]) -> TableConfig:
    """Stop declaring MDT partitions this writer does not keep (readers then ignore them), then remove their
    folders — upstream's `HoodieTableMetadataUtil.deleteMetadataTablePartition` for a disabled index."""
    gone = set(names)
    config = read_config(base_path)
    props = dict(config.props)
    props[PROP_PARTITIONS] = ",".join(n for n in _declared(config) if n not in gone)
    write_config(base_path, props, create=False)
    for name in sorted(gone):
        folder = metadata_folder(base_path) / name
        if folder.exists():
            paths.remove_tree(base_path, folder, parent="metadata")
    return read_config(base_path)


def _committed_listing(base_path: TablePath, config: TableConfig) -> dict[str, dict[str, int]]:
    """Data files present now, minus those of pending instants (the write being committed among them)."""
    pending = {i.begin_time for i in ActiveTimeline(base_path, config).pending()}
    out: dict[str, dict[str, int]] = {}
    for partition, path, name, size in fsview.list_data_files_sized(base_path):
        if name.instant in pending:
            continue
        out.setdefault(partition, {})[path.name] = int(size if size is not None else path.stat().st_size)
    return out


def _write_stat(partition: str, file_id: str, name: str, size: int, records: int, base: str,
                prev: str = INIT_INSTANT) -> WriteStat:
    return WriteStat(partitionPath=partition, fileId=file_id, path=f"{partition}/{name}", prevCommit=prev,
                     numWrites=records, numInserts=records, totalWriteBytes=size, fileSizeInBytes=size,
                     baseFile=base, logFiles=[name] if name != base else [])


def _hfile(cells: Cells, *, base: bool = True) -> tuple[bytes, int]:
    """(HFile bytes, cell count) of cells in key order, laid out by `hfile_write.write_hfile_arrays` (Arrow
    sorts the keys, NumPy lays out the cells); a base file also records its min and max key."""
    keys = pa.array(list(cells), pa.string()).cast(pa.binary())
    values = pa.array(list(cells.values()), pa.binary())
    order = pc.sort_indices(keys)
    keys, values = keys.take(order), values.take(order)
    info = {b"schema": SCHEMA_TEXT.encode()}
    if base:
        info[b"minRecordKey"] = keys[0].as_py() if len(keys) else b""
        info[b"maxRecordKey"] = keys[-1].as_py() if len(keys) else b""
    return hfile_write.write_hfile_arrays(keys, values, file_info=info), len(keys)


def _initialise(base_path: TablePath, config: TableConfig) -> ActiveTimeline:
    """Create the metadata table with its `files` partition (module docstring), then declare it."""
    folder = metadata_folder(base_path)
    if (folder / ".hoodie").exists() or (folder / FILES).exists():  # a half-made one: start again
        paths.remove_tree(base_path, folder, parent="")
    mdt_config = write_config(folder, _mdt_props(config), create=True)
    timeline = ActiveTimeline(folder, mdt_config)
    listing = _committed_listing(base_path, config)
    _write_initial(base_path, timeline, mi.spec_for(FILES, config), INIT_INSTANT,
                   {FILE_ID: {k.decode(): v for k, v in files_cells(listing, {})}})
    _declare(base_path, FILES)
    return timeline


def _write_initial(base_path: TablePath, timeline: ActiveTimeline, spec: mi.PartitionSpec, t: str,
                   groups: Mapping[str, Cells]) -> None:
    """One partition's initial deltacommit `t`: a base HFile per file group (upstream's bulk insert)."""
    folder = metadata_folder(base_path)
    part = folder / spec.name
    if part.exists():  # a half-made one from a killed initialisation
        paths.remove_tree(base_path, part, parent="")
    atomic.create_file(part / ".hoodie_partition_metadata",
                       f"#partition metadata\ncommitTime={t}\npartitionDepth=1\n".encode(), mkdir=True)
    inflight = timeline.start(timeline.request(DELTA_COMMIT, None, begin_time=t))
    stats = []
    for i in range(spec.groups):
        fid = spec.file_id(i)
        data, count = _hfile(groups.get(fid, {}))
        name = f"{fid}_{WRITE_TOKEN}_{t}.hfile"
        markers.create_marker(folder, t, spec.name, name, "CREATE")
        atomic.create_file(part / name, data)
        stats.append(_write_stat(spec.name, fid, name, len(data), count, name, prev=t))
    timeline.complete(inflight, commit_metadata(stats, operation="bulk_insert"))
    markers.delete_markers(folder, t)


def _next_init_instant(timeline: ActiveTimeline) -> str:
    used = [int(i.begin_time[14:]) for i in timeline.instants() if i.begin_time.startswith(SOLO)
            and len(i.begin_time) == 17 and i.begin_time[14:].isdigit()]
    return f"{SOLO}{max(used, default=0) + 1:03d}"


def _groups_on_disk(base_path: TablePath, name: str, names: list[str] | None = None) -> int:
    """How many file groups MDT partition `name` has (its file names: `names`, else one listing)."""
    part = metadata_folder(base_path) / name
    if names is None:
        names = list_names(part) if part.exists() else []
    return len({parsed.file_id for parsed in map(naming.parse, names) if parsed is not None})


def _spec(base_path: TablePath, config: TableConfig, name: str, names: list[str] | None = None) -> mi.PartitionSpec:
    return mi.spec_for(name, config, groups=_groups_on_disk(base_path, name, names) or None)


def _timeline(base_path: TablePath, config: TableConfig) -> ActiveTimeline:
    folder = metadata_folder(base_path)
    timeline: ActiveTimeline | None = None
    if FILES in _declared(config) and (folder / ".hoodie" / "hoodie.properties").exists():
        mdt_config = read_config(folder)
        if mdt_config.version == config.version:
            timeline = ActiveTimeline(folder, mdt_config)
        else:  # the data table was upgraded (services/upgrade.py rewrote every file): the MDT is built again
            drop(base_path)  # at the table's version, as upstream's upgrade handlers upgrade the MDT with it
            config = read_config(base_path)
    if timeline is None:
        timeline = _initialise(base_path, config)
    config = read_config(base_path)
    for name in [*mi.wanted_partitions(config), *mi.secondary_definitions(base_path)]:
        if name not in _declared(config):
            initialise_partition(base_path, read_config(base_path), timeline, name)
    return timeline


def initialise_partition(base_path: TablePath, config: TableConfig, timeline: ActiveTimeline, name: str) -> None:
    """Build one index partition from the committed data (upstream `initializeFromFilesystem` for it), then
    declare it: a crash before that leaves a partition nobody reads, made again by the next write."""
    for inst in timeline.pending():  # a killed initialisation's deltacommit: it never completes
        if inst.action == DELTA_COMMIT and inst.begin_time.startswith(SOLO):
            _remove_timeline_files(timeline, inst.begin_time, states=(State.INFLIGHT, State.REQUESTED))
    data = TableState(base_path, config)
    if name == mi.RECORD_INDEX and wants_partitioned_record_index(base_path, config):
        _initialise_partitioned_record_index(base_path, config, data, timeline)
        return
    built = _initial_cells(base_path, config, data, name)
    records = sum(len(c) for c in built)
    groups = mi.estimate_groups(records, config) if name == mi.RECORD_INDEX or name.startswith(
        mi.SECONDARY_PREFIX) else None
    spec = mi.spec_for(name, config, groups=groups)
    per_group: dict[str, Cells] = {}
    for cells in built:
        _shard(spec, config, cells, per_group)
    _write_initial(base_path, timeline, spec, _next_init_instant(timeline), per_group)
    if name == mi.COLUMN_STATS:  # upstream records the indexed columns (index.json), the shipped tables show it
        schema = data.schema
        fields = _indexed_columns(config, schema) if schema is not None else []
        mi.define_index(base_path, name, mi.index_definition(name, name, name, fields, config.version))
        _point_at_index_defs(base_path)
    elif name == mi.RECORD_INDEX and config.version >= 9:
        mi.define_index(base_path, name, mi.index_definition(name, name, "", [], config.version,
                                                             options={"isPartitioned": "false"}, version="V1"),
                        replace=True)  # (over a partitioned one's definition, which a write removed)
        _point_at_index_defs(base_path)
    _declare(base_path, name)


def _initialise_partitioned_record_index(base_path: TablePath, config: TableConfig, data: TableState,
                                        timeline: ActiveTimeline) -> None:
    """Upstream's `PartitionedRecordIndexer.buildInitialization`: per data partition holding file slices, its keys
    (latest slices merged) in `estimate_partition_groups(its records)` file groups `record-index-<escaped
    partition>-NNNN-0`, a key in group `mapRecordKeyToFileGroupIndex(key, that count)`; the definition says
    `isPartitioned: true` (`createRecordIndexDefinition`); declared last."""
    per_partition: dict[str, Cells] = {}
    for partition, cells in _slice_record_cells(config, data):
        per_partition.setdefault(partition, {}).update(cells)
    _check_partition_names(base_path, per_partition)
    fids: list[str] = []
    per_group: dict[str, Cells] = {}
    for partition in sorted(per_partition):
        cells = per_partition[partition]
        n = mi.estimate_partition_groups(len(cells), config)
        fids += [mi.partitioned_file_id(partition, i) for i in range(n)]
        for fid, keys in _by_group(partition, n, list(cells)).items():
            per_group[fid] = {k: cells[k] for k in keys}
    _write_initial(base_path, timeline, _FileIds(fids), _next_init_instant(timeline), per_group)  # type: ignore[arg-type]
    mi.define_index(base_path, mi.RECORD_INDEX, mi.index_definition(mi.RECORD_INDEX, mi.RECORD_INDEX, "", [],
                                                                    config.version, options={"isPartitioned": "true"},
                                                                    version="V1"), replace=True)
    _point_at_index_defs(base_path)
    _declare(base_path, mi.RECORD_INDEX)


def _slice_record_cells(config: TableConfig, data: TableState) -> Iterable[tuple[str, Cells]]:
    """(data partition, key → record-index value) of each latest file slice (every slice, even one without rows)."""
    ctx = data.read_context()
    for fs in data.latest_slices():
        rows = scan_mod.snapshot(ctx, [fs], columns=["_hoodie_record_key"])
        base_instant = fs.base_file.name.instant if fs.base_file is not None else (
            fs.log_files[0].name.instant if fs.log_files else "")
        value = mi.record_index_value(fs.partition, fs.file_id, mi.instant_millis(base_instant, config))
        yield fs.partition, dict.fromkeys(rows.column("_hoodie_record_key").to_pylist(), value)


def _point_at_index_defs(base_path: TablePath) -> None:
    config = read_config(base_path)
    if config.props.get(mi.PROP_INDEX_DEFS) != "/".join(mi.INDEX_DEFS):
        write_config(base_path, {**config.props, mi.PROP_INDEX_DEFS: "/".join(mi.INDEX_DEFS)}, create=False)


def _indexed_columns(config: TableConfig, schema: pa.Schema) -> list[str]:
    """The columns column_stats indexes, given the table's user schema (the meta columns first, unless listed)."""
    columns = mi.columns_to_index(config, schema)
    if not config.props.get(mi.PROP_COLUMN_LIST, "").strip():
        columns = [*mi.META_INDEXED, *columns]
    return columns


def _shard(spec: mi.PartitionSpec, config: TableConfig, cells: Cells, out: dict[str, Cells]) -> None:
    """Split cells by file group (`mapRecordKeyToFileGroupIndex`, vectorised; one sort, no per-key lookup)."""
    if not cells:
        return
    keys = list(cells)
    groups = spec.groups_of(keys, index_version=mi.index_version(config))
    order = np.argsort(groups, kind="stable")
    counts = np.bincount(groups, minlength=spec.groups)
    karr = np.empty(len(keys), dtype=object)
    karr[:] = keys
    varr = np.empty(len(keys), dtype=object)
    varr[:] = list(cells.values())
    karr, varr = karr[order], varr[order]
    start = 0
    for g, c in enumerate(counts.tolist()):
        if c:
            out.setdefault(spec.file_id(g), {}).update(zip(karr[start:start + c].tolist(),
                                                           varr[start:start + c].tolist(), strict=True))
            start += c


def _initial_cells(base_path: TablePath, config: TableConfig, data: TableState, name: str) -> list[Cells]:
    if name in (mi.COLUMN_STATS, mi.PARTITION_STATS):
        per = _base_file_stats(base_path, config, _committed_listing(base_path, config))
        if name == mi.COLUMN_STATS:
            return [mi.column_stats_cells(p, stats) for p, stats in per.items()]
        return [mi.partition_stats_cells(per, tight=True)]
    if name == mi.BLOOM_FILTERS:
        return [mi.bloom_filter_cells(base_path, config, _committed_listing(base_path, config))]
    if name == mi.RECORD_INDEX:
        return [cells for _, cells in _slice_record_cells(config, data) if cells]
    if name.startswith(mi.SECONDARY_PREFIX):
        column = mi.secondary_definitions(base_path).get(name)
        if column is None:
            return []
        ctx = data.read_context()
        out = []
        for fs in data.latest_slices():
            rows = scan_mod.snapshot(ctx, [fs], columns=["_hoodie_record_key", column])
            if rows.num_rows == 0:
                continue
            cell = mi.secondary_cell_value()
            out.append({mi.secondary_key(v, k): cell for k, v in zip(
                rows.column("_hoodie_record_key").to_pylist(), mi.secondary_value_text(rows.column(column)),
                strict=True)})
        return out
    raise LsmLabError(f"lsm_lab does not write the metadata table partition {name!r}")


def _base_file_stats(base_path: TablePath, config: TableConfig, files: Mapping[str, Iterable[str]]
                     ) -> dict[str, list[dict[str, Any]]]:
    """partition → the column statistics of its Parquet base files among `files` (partition → names), each
    file's from its own footer."""
    version = mi.index_version(config)
    per: dict[str, list[dict[str, Any]]] = {}
    for partition, names in files.items():
        for fname in names:
            if _is_base(fname):
                path = base_path / partition / fname if partition else base_path / fname
                per.setdefault(partition, []).extend(mi.file_column_stats(path, fname, _columns(config, path), version))
    return per


def _is_base(fname: str) -> bool:
    parsed = naming.parse(fname)
    return parsed is not None and parsed.kind == "base" and parsed.ext == "parquet" and parsed.content == "data"


def _columns(config: TableConfig, path: Any) -> list[str]:
    return mi.columns_to_index(config, read_footer(path)[0].schema.to_arrow_schema())


# ------------------------------------------------------------------------------------- one instant's cells
def _instant_cells(base_path: TablePath, config: TableConfig, instant: Instant, metadata: Mapping[str, Any],
                   name: str, added: Mapping[str, Mapping[str, int]], deleted: Mapping[str, list[str]]
                   ) -> tuple[Cells, list[str]]:
    """(cells, deleted keys) data instant `instant` adds to MDT partition `name` (module docstring)."""
    if name == FILES:
        return {k.decode(): v for k, v in files_cells(added, deleted, all_partitions=instant.action != CLEAN)}, []
    if name in (mi.COLUMN_STATS, mi.PARTITION_STATS):
        per = _base_file_stats(base_path, config, added)
        if name == mi.PARTITION_STATS:
            return mi.partition_stats_cells(per, tight=False), []
        indexed = list(dict.fromkeys(st["columnName"] for stats in per.values() for st in stats))
        if indexed and (mi.index_definitions(base_path).get(name) or {}).get("sourceFields") != indexed:
            # the definition follows the indexed columns (the first write, a schema change)
            mi.define_index(base_path, name, mi.index_definition(name, name, name, indexed, config.version),
                            replace=True)
            _point_at_index_defs(base_path)
        cells: Cells = {}
        for p, stats in per.items():
            cells.update(mi.column_stats_cells(p, stats))
        schema = TableState(base_path, config).schema if deleted else None
        for partition, gone_names in deleted.items():
            for fname in gone_names:
                if _is_base(fname) and schema is not None:
                    cells.update(mi.column_stats_tombstones(partition, fname, _indexed_columns(config, schema)))
        return cells, []
    if name == mi.BLOOM_FILTERS:
        return mi.bloom_filter_cells(base_path, config, added, deleted, clean_instant=instant.begin_time), []
    if name == mi.RECORD_INDEX:
        return _record_index_cells(base_path, config, instant, metadata)
    if name.startswith(mi.SECONDARY_PREFIX):
        column = mi.secondary_definitions(base_path).get(name)
        if column is None:
            return {}, []
        return _secondary_cells(base_path, config, instant, metadata, column)
    return {}, []


def _key_column(table: pa.Table, config: TableConfig) -> pa.ChunkedArray:
    if "_hoodie_record_key" in table.column_names:
        return table.column("_hoodie_record_key")
    fields = [f.strip() for f in config.props.get("hoodie.table.recordkey.fields", "").split(",") if f.strip()]
    if len(fields) == 1 and fields[0] in table.column_names:
        return table.column(fields[0]).cast(pa.string())
    raise LsmLabError("the record index needs the _hoodie_record_key column (or a one-field record key)")


def _read_columns(path: Any, columns: list[str]) -> pa.Table:
    pf = open_parquet(path)
    names = pf.schema_arrow.names
    return pf.read(columns=[c for c in columns if c in names])


def _prev_base(base_path: TablePath, partition: str, file_id: str, prev: str,
               written: dict[str, dict[tuple[str, str], str]] | None = None,
               timeline: ActiveTimeline | None = None) -> Any:
    """The base file of `file_id` that instant `prev` wrote: named by `prev`'s own commit metadata on the active
    timeline (no LIST of the partition folder: issue 32, "every plan from the files partition"), else found by
    listing the folder (an archived `prev`).  `written` caches each instant's base files."""
    if not prev or prev == "null":
        return None
    folder = base_path / partition if partition else base_path
    if timeline is not None and written is not None:
        if prev not in written:
            written[prev] = {}
            try:
                inst = timeline.find(prev)
                if inst.is_completed:
                    for stat in iter_write_stats(timeline.read_content(inst)):
                        rel = str(stat.get("path") or "")
                        if rel and _is_base(os.path.basename(rel)):
                            written[prev][(str(stat.get("partitionPath") or ""), str(stat.get("fileId") or ""))] = rel
            except LsmLabError:
                pass  # archived or unreadable: list the folder
        known = written[prev].get((partition, file_id))
        if known is not None:
            parsed = naming.parse(os.path.basename(known))
            if parsed is not None and parsed.kind == "base" and parsed.instant == prev and (base_path / known).is_file():
                return base_path / known
    for fname in list_names(folder):
        parsed = naming.parse(fname)
        if parsed is not None and parsed.kind == "base" and parsed.file_id == file_id and parsed.instant == prev:
            return folder / fname
    return None


def _is_change_log(fname: str) -> bool:
    """A data or delete log of the data table (v1 `#HUDI#`, draft v2 or native): not a CDC log, not a base file."""
    parsed = naming.parse(fname)
    return parsed is not None and parsed.is_log and parsed.content != "cdc"


def _log_rows(path: Any, t: str, columns: list[str]) -> tuple[list[pa.Table], list[str]]:
    """(data-block rows, deleted keys) the log file `path` holds for instant `t`: the blocks of a v1 log, or a
    whole v2 log (a data log's columns, a delete log's key column)."""
    tables: list[pa.Table] = []
    gone: list[str] = []
    parsed = naming.parse(os.path.basename(str(path)))
    if parsed is not None and parsed.log_format == 2:
        if parsed.instant != t:
            return tables, gone
        if parsed.is_delete:
            keys = _read_columns(path, [v2.delete_key_column(open_parquet(path).schema_arrow)])
            return tables, [str(k) for k in keys.column(0).to_pylist()]
        return [_read_columns(path, columns)], gone
    for block in v1.iter_blocks(path):
        if block.instant_time != t or block.records is None:
            continue
        if block.is_delete:
            gone.extend(str(k) for k in block.records.column("record_key").to_pylist())
        elif block.is_data:
            tables.append(block.records.select([c for c in columns if c in block.records.column_names]))
    return tables, gone


def _record_index_cells(base_path: TablePath, config: TableConfig, instant: Instant,
                        metadata: Mapping[str, Any]) -> tuple[Cells, list[str]]:
    """Keys that moved or arrived → their file group; keys deleted → the delete block (module docstring)."""
    cells: Cells = {}
    gone: list[str] = []
    per_cells, per_gone = _record_index_changes(base_path, config, instant, metadata)
    for partition in per_cells.keys() | per_gone.keys():
        gone.extend(per_gone.get(partition, []))
    for partition_cells in per_cells.values():
        cells.update(partition_cells)
    return cells, [k for k in dict.fromkeys(gone) if k not in cells]


def _record_index_changes(base_path: TablePath, config: TableConfig, instant: Instant, metadata: Mapping[str, Any]
                          ) -> tuple[dict[str, Cells], dict[str, list[str]]]:
    """Per data partition: (keys that moved or arrived → their file group's value, keys deleted from it).  A key is
    deleted from a partition only when the instant does not write it there again."""
    if instant.action in (CLEAN, COMPACTION):  # a compaction keeps every key in its file group
        return {}, {}
    t = instant.begin_time
    millis = mi.instant_millis(t, config)
    cells: dict[str, Cells] = {}
    gone: dict[str, list[str]] = {}
    key_cols = ["_hoodie_record_key", *[f.strip() for f in config.props.get(
        "hoodie.table.recordkey.fields", "").split(",") if f.strip()]]
    written: dict[str, dict[tuple[str, str], str]] = {}
    timeline = ActiveTimeline(base_path, config)
    for stat in iter_write_stats(metadata):
        rel = str(stat.get("path") or "")
        if not rel:
            continue
        partition = str(stat.get("partitionPath") or "")
        file_id = str(stat.get("fileId") or "")
        path = base_path / rel
        value = mi.record_index_value(partition, file_id, millis)
        mine = cells.setdefault(partition, {})
        if _is_base(os.path.basename(rel)):
            keys = _key_column(_read_columns(path, key_cols), config)
            prev = _prev_base(base_path, partition, file_id, str(stat.get("prevCommit") or ""), written, timeline)
            if prev is not None and instant.action != REPLACE_COMMIT:
                old = _key_column(_read_columns(prev, key_cols), config)
                new_keys = pc.filter(keys, pc.invert(pc.is_in(keys, value_set=old.combine_chunks())))
                gone.setdefault(partition, []).extend(
                    pc.filter(old, pc.invert(pc.is_in(old, value_set=keys.combine_chunks()))).to_pylist())
                keys = new_keys
            mine.update(dict.fromkeys(keys.to_pylist(), value))
        elif _is_change_log(os.path.basename(rel)):
            tables, deleted = _log_rows(path, t, key_cols)
            gone.setdefault(partition, []).extend(deleted)
            for tb in tables:
                mine.update(dict.fromkeys(_key_column(tb, config).to_pylist(), value))
    if instant.action == REPLACE_COMMIT and str(metadata.get("operationType") or "").upper() in _OVERWRITES:
        for partition, keys in _replaced_keys(base_path, config, metadata).items():
            gone.setdefault(partition, []).extend(keys)
    out_gone = {p: [k for k in dict.fromkeys(keys) if k not in cells.get(p, {})] for p, keys in gone.items()}
    return {p: c for p, c in cells.items() if c}, {p: g for p, g in out_gone.items() if g}


#: replace commits whose replaced file groups' rows are gone (not moved, as a clustering's are)
_OVERWRITES = frozenset({"INSERT_OVERWRITE", "INSERT_OVERWRITE_TABLE", "DELETE_PARTITION"})


def _replaced_keys(base_path: TablePath, config: TableConfig, metadata: Mapping[str, Any]) -> dict[str, list[str]]:
    """partition → the keys of the file groups an overwrite replaces (`partitionToReplaceFileIds`), read from their
    latest slices (the replace is still pending: they are live): keys it does not write again leave the index."""
    replaced = {str(p): {str(f) for f in (fids or [])} for p, fids in (metadata.get("partitionToReplaceFileIds")
                                                                       or {}).items()}
    if not any(replaced.values()):
        return {}
    data = TableState(base_path, config)
    ctx = data.read_context()
    out: dict[str, list[str]] = {}
    for fs in data.latest_slices(partitions=sorted(replaced)):
        if fs.file_id in replaced.get(fs.partition, set()):
            rows = scan_mod.snapshot(ctx, [fs], columns=["_hoodie_record_key"])
            out.setdefault(fs.partition, []).extend(rows.column("_hoodie_record_key").to_pylist())
    return out


class _FileIds:
    """The file groups of a partitioned record index (`PartitionSpec`'s shape: name, count, i-th file id)."""

    def __init__(self, fids: list[str]) -> None:
        self.name = mi.RECORD_INDEX
        self.fids = fids
        self.groups = len(fids)

    def file_id(self, i: int) -> str:
        return self.fids[i]


def _partition_groups_on_disk(names: Iterable[str]) -> dict[str, int]:
    """data partition → its file groups in a partitioned record index, from the MDT partition's file names."""
    seen: dict[str, set[int]] = {}
    for name in names:
        parsed = naming.parse(name)
        where = mr.partition_of_file_id(parsed.file_id) if parsed is not None else None
        if where is not None:
            seen.setdefault(where[0], set()).add(where[1])
    return {p: len(ids) for p, ids in seen.items()}


def _check_partition_names(base_path: TablePath, partitions: Iterable[str]) -> None:
    """A data partition whose partitioned-index file-group name upstream does not settle (a '.') is refused before
    anything is written (`metadata_record.escape_file_name`), naming the MDT partition."""
    for partition in sorted(set(partitions)):
        try:
            mi.escape_file_name(partition)
        except UnsupportedFeatureError as exc:
            raise UnsupportedFeatureError(exc.message, path=metadata_folder(base_path) / mi.RECORD_INDEX) from None


def _by_group(partition: str, n: int, keys: list[str]) -> dict[str, list[str]]:
    """`keys` of one data partition by their file group among its `n` (`mapRecordKeyToFileGroupIndex`)."""
    out: dict[str, list[str]] = {}
    if not keys:
        return out
    for key, g in zip(keys, mi.file_group_indexes(pa.array(keys, pa.large_string()), n).tolist(), strict=True):
        out.setdefault(mi.partitioned_file_id(partition, int(g)), []).append(key)
    return out


def _partitioned_groups(base_path: TablePath, config: TableConfig, instant: Instant, metadata: Mapping[str, Any],
                        names: list[str]) -> list[tuple[_FileIds, str, Cells, list[str]]]:
    """One data instant's (spec, file id, cells, deleted keys) in a partitioned record index: a key's cell or delete
    goes to its own data partition's file groups (upstream `getRecordTaggerPartitionedRLI`: the partition of the
    value, or of the delete, `EmptyHoodieRecordPayloadWithPartition`); a data partition the index has no file groups
    for yet gets `new_partition_groups` of them, every one with a log file in this deltacommit (an empty delete block
    where no key lands) so that none is missing (`initializeNewFileGroupsForPartitionedRLIHelper`)."""
    per_cells, per_gone = _record_index_changes(base_path, config, instant, metadata)
    counts = _partition_groups_on_disk(names)
    touched = set(per_cells) | set(per_gone)
    if instant.action not in (CLEAN, COMPACTION):
        touched |= {str(stat.get("partitionPath") or "") for stat in iter_write_stats(metadata)}
    _check_partition_names(base_path, touched - set(counts))
    out: list[tuple[_FileIds, str, Cells, list[str]]] = []
    for partition in sorted(touched):
        n = counts.get(partition)
        fresh = n is None
        if n is None:
            n = mi.new_partition_groups(config)
        cells = per_cells.get(partition, {})
        by_cell = _by_group(partition, n, list(cells))
        by_gone = _by_group(partition, n, per_gone.get(partition, []))
        fids = [mi.partitioned_file_id(partition, i) for i in range(n)]
        spec = _FileIds(fids)
        for fid in fids:
            if fresh or fid in by_cell or fid in by_gone:
                out.append((spec, fid, {k: cells[k] for k in by_cell.get(fid, [])}, by_gone.get(fid, [])))
    return out


def _secondary_cells(base_path: TablePath, config: TableConfig, instant: Instant, metadata: Mapping[str, Any],
                     column: str) -> tuple[Cells, list[str]]:
    """(value, key) pairs a write adds become cells; pairs it removes become `isDeleted` cells
    (`HoodieMetadataPayload.createSecondaryIndexRecord(..., isDeleted)`)."""
    if instant.action in (CLEAN, COMPACTION):
        return {}, []
    t = instant.begin_time
    key_cols = ["_hoodie_record_key", *[f.strip() for f in config.props.get(
        "hoodie.table.recordkey.fields", "").split(",") if f.strip()], column]
    live, dead = mi.secondary_cell_value(), mi.secondary_cell_value(deleted=True)
    added: dict[str, str | None] = {}
    removed: dict[str, str | None] = {}
    current: dict[str, str | None] | None = None
    written: dict[str, dict[tuple[str, str], str]] = {}
    timeline = ActiveTimeline(base_path, config)
    for stat in iter_write_stats(metadata):
        rel = str(stat.get("path") or "")
        if not rel:
            continue
        path = base_path / rel
        partition = str(stat.get("partitionPath") or "")
        if _is_base(os.path.basename(rel)):
            rows = _read_columns(path, key_cols)
            now = dict(zip(_key_column(rows, config).to_pylist(), mi.secondary_value_text(rows.column(column)),
                           strict=True))
            prev = _prev_base(base_path, partition, str(stat.get("fileId") or ""), str(stat.get("prevCommit") or ""),
                              written, timeline)
            before: dict[str, str | None] = {}
            if prev is not None and instant.action != REPLACE_COMMIT:
                old = _read_columns(prev, key_cols)
                before = dict(zip(_key_column(old, config).to_pylist(), mi.secondary_value_text(old.column(column)),
                                  strict=True))
            for k, v in before.items():
                if k not in now or now[k] != v:
                    removed[k] = v
            for k, v in now.items():
                if k not in before or before[k] != v:
                    added[k] = v
        elif _is_change_log(os.path.basename(rel)):
            tables, deleted = _log_rows(path, t, key_cols)
            if current is None:
                current = _secondary_now(base_path, config, column)
            for k in deleted:
                if k in current:
                    removed[k] = current[k]
            for tb in tables:
                if column not in tb.column_names:
                    continue
                for k, v in zip(_key_column(tb, config).to_pylist(), mi.secondary_value_text(tb.column(column)),
                                strict=True):
                    if current.get(k, "\x01absent") != v:
                        if k in current:
                            removed[k] = current[k]
                        added[k] = v
    cells: Cells = {mi.secondary_key(v, k): dead for k, v in removed.items()}
    cells.update({mi.secondary_key(v, k): live for k, v in added.items()})
    return cells, []


def _secondary_now(base_path: TablePath, config: TableConfig, column: str) -> dict[str, str | None]:
    """record key → secondary value as the index holds it now (the MOR path: a log upsert does not say the
    old value, upstream looks it up in the index too)."""
    name = next((n for n, c in mi.secondary_definitions(base_path).items() if c == column), None)
    if name is None:
        return {}
    data = TableState(base_path, config)
    m = MetadataTable(data, TableState(metadata_folder(base_path), read_config(metadata_folder(base_path))),
                      _declared(config))
    out: dict[str, str | None] = {}
    for key in m.records(name):
        value, record_key = mr.split_secondary_key(key)
        out[record_key] = None if value == "\x00" else value
    return out


# ------------------------------------------------------------------------------------- the hooks
def update(base_path: TablePath, instant: Instant, metadata: Mapping[str, Any], *,
           config: TableConfig | None = None) -> Instant | None:
    """Before data instant `instant` completes with `metadata`: its MDT deltacommit (None when the table
    keeps no metadata table).  Call with the data table's lock held.  `config` is the caller's table
    config (saves a read of hoodie.properties when the table keeps no metadata table)."""
    base_path = as_path(base_path)
    config = config if config is not None else read_config(base_path)
    if not enabled(config):
        # a declared MDT this writer will not keep (the option turned off, or a table version lsm_lab does not
        # write it for) would be stale after this write: removed, as upstream deletes a disabled MDT
        if _declared(config):
            drop(base_path)
        return None
    config = read_config(base_path)  # as on disk now: the MDT may have been declared since the caller read it
    unkept = [n for n in _declared(config) if not maintainable(n)]
    if unkept:  # partitions lsm_lab does not write (expression indexes): undeclared, then removed
        config = _undeclare(base_path, unkept)
    if mi.RECORD_INDEX in _declared(config) and \
            partitioned_record_index(base_path) != wants_partitioned_record_index(base_path, config):
        # the other kind of record index than the table's options ask for: the MDT is built again (undeclared and
        # removed first, as after an upgrade: its timeline's commits name the old index's files)
        drop(base_path)
        config = read_config(base_path)
    added, deleted = changes_of(instant, metadata)
    timeline = _timeline(base_path, config)
    config = read_config(base_path)
    _resume_rollbacks(base_path, config, timeline)
    mdt_services.resume_cleans(metadata_folder(base_path), timeline)  # a killed MDT clean: finished first
    t = instant.begin_time
    if any(i.begin_time == t and i.action == DELTA_COMMIT for i in timeline.instants()):  # an earlier attempt
        _rollback_mdt(base_path, config, timeline, t)
    # the MDT's own table services, in upstream's `performTableServices` order: clean, compaction, archival
    mdt_services.clean_if_due(base_path, config, metadata_folder(base_path))
    compact_if_due(base_path, config, timeline)
    mdt_services.archive_if_due(base_path, config, metadata_folder(base_path))
    groups: list[tuple[mi.PartitionSpec | _FileIds, str, Cells, list[str]]] = []
    listing: dict[str, list[str]] = {}
    for name in _declared(config):
        if name not in mi.ORDER and not name.startswith(mi.SECONDARY_PREFIX):
            continue
        if name == mi.RECORD_INDEX and partitioned_record_index(base_path):
            part = metadata_folder(base_path) / name
            listing[name] = list_names(part) if part.exists() else []
            groups.extend(_partitioned_groups(base_path, config, instant, metadata, listing[name]))
            continue
        cells, gone = _instant_cells(base_path, config, instant, metadata, name, added, deleted)
        if not cells and not gone:
            continue
        part = metadata_folder(base_path) / name
        listing[name] = list_names(part) if part.exists() else []  # one listing per partition and instant
        spec = _spec(base_path, config, name, listing[name])
        per: dict[str, Cells] = {}
        _shard(spec, config, cells, per)
        per_gone: dict[str, list[str]] = {}
        if gone:
            gidx = spec.groups_of(gone, index_version=mi.index_version(config))
            for k, g in zip(gone, gidx.tolist(), strict=True):
                per_gone.setdefault(spec.file_id(g), []).append(k)
        for fid in sorted(set(per) | set(per_gone)):
            groups.append((spec, fid, per.get(fid, {}), per_gone.get(fid, [])))
    inflight = timeline.start(timeline.request(DELTA_COMMIT, None, begin_time=t))
    folder = metadata_folder(base_path)
    stats = []
    header = {v1.HeaderKey.INSTANT_TIME: t, v1.HeaderKey.SCHEMA: SCHEMA_TEXT}
    for group_spec, fid, cells, gone in groups:
        if config.version >= NATIVE_LOGS_FROM:  # upstream's native HFile logs (format/hfile_log.py)
            stats.extend(_write_native_logs(folder, group_spec.name, fid, t, cells, gone, _base_name(listing[group_spec.name], fid)))
            continue
        blocks = []
        if gone or not cells:  # upstream's record-index delete: the key in a delete block (or an empty one: a new
            # partitioned-index file group, `initializeFileGroups`)
            blocks.append(v1.encode_block(v1.BlockType.DELETE, {v1.HeaderKey.INSTANT_TIME: t},
                                          encode_delete_records(pa.table({"record_key": pa.array(gone, pa.string())}))))
        if cells:
            blocks.append(v1.encode_block(v1.BlockType.HFILE, header, _hfile(cells, base=False)[0]))
        name = naming.v1_log_file_name(fid, t, 1, WRITE_TOKEN)
        markers.create_marker(folder, t, group_spec.name, name, "APPEND")  # a kill before the MDT commit: a failed write
        size = v1.write_log_file(folder / group_spec.name / name, blocks)
        stats.append(_write_stat(group_spec.name, fid, name, size, len(cells) + len(gone), _base_name(listing[group_spec.name], fid)))
    done = timeline.complete(inflight, commit_metadata(stats, operation="upsert_prepped"))
    markers.delete_markers(folder, t)
    return done


def _write_native_logs(folder: TablePath, partition: str, fid: str, t: str, cells: Cells, gone: list[str],
                       base: str) -> list[WriteStat]:
    """A version 10 MDT deltacommit's files for one file group (`format/hfile_log.py`): the cells as
    `<fid>_0-0-0_<t>_1.log.hfile`, the removed keys as `<fid>_0-0-0_<t>_1.deletes.hfile` — one write stat per
    physical file, as upstream's `HoodieNativeLogAppendHandle`.  A key the instant both removes and writes
    keeps only its cell (the two files share an instant and version, so no order between them may matter)."""
    header = {v1.HeaderKey.INSTANT_TIME.name: t, v1.HeaderKey.SCHEMA.name: SCHEMA_TEXT}
    gone = [k for k in gone if k not in cells]
    out: list[WriteStat] = []
    if cells:
        keys = pa.array(list(cells), pa.string()).cast(pa.binary())
        values = pa.array(list(cells.values()), pa.binary())
        order = pc.sort_indices(keys)
        payload = hfile_log.data_log(keys.take(order), values.take(order), header, SCHEMA_TEXT)
        out.append(_native_file(folder, partition, fid, t, naming.NATIVE_DATA, payload, len(cells), base))
    if gone or not cells:  # (no cell and no key: a new partitioned-index file group's empty delete file)
        payload = hfile_log.delete_log(gone, header)
        out.append(_native_file(folder, partition, fid, t, naming.NATIVE_DELETES, payload, len(gone), base))
    return out


def _native_file(folder: TablePath, partition: str, fid: str, t: str, kind: str, payload: bytes, records: int,
                 base: str) -> WriteStat:
    name = naming.native_log_file_name(fid, WRITE_TOKEN, t, 1, kind, hfile_log.FORMAT)
    markers.create_marker(folder, t, partition, name, "APPEND")  # a kill before the MDT commit: a failed write
    atomic.create_file(folder / partition / name, payload)
    return _write_stat(partition, fid, name, len(payload), records, base)


def _base_name(names: list[str], fid: str) -> str:
    """The latest base file of file group `fid` among an MDT partition's file names."""
    parsed = (naming.parse(n) for n in names)
    bases = sorted(p.name for p in parsed if p is not None and p.is_base and p.file_id == fid and p.ext == "hfile")
    return bases[-1] if bases else ""


def _int_prop(config: TableConfig, key: str, default: int) -> int:
    try:
        return int(config.props.get(key, default))
    except ValueError:
        return default


def compact_if_due(base_path: TablePath, config: TableConfig, timeline: ActiveTimeline) -> Instant | None:
    """Compact the MDT when due and every deltacommit it would take in is valid — no data instant is pending
    with an MDT deltacommit of its own (upstream waits the same way: a compaction must not take in a block that
    may still be rolled back).  Two schedules, the first that is due wins:

    - upstream's: every file group of every MDT partition once `hoodie.metadata.compact.max.delta.commits`
      deltacommits completed since the last compaction of every partition (a *full* one);
    - lsm_lab's: the `files` partition's file group alone once `lsm_lab.metadata.files.compact.max.log.files`
      deltacommits (each writes one `files` log) completed since the last compaction of any scope (every
      compaction takes in `files`) — a plan naming a subset of the file groups, marked in its commit metadata
      (`mdt_services.PARTIAL_KEY`) so that the barriers that need every latest slice stay at the last full one.

    Called before the new instant's deltacommit, whose log files then complete after the compaction and
    belong to the new slices (slicing by completion time, table versions 8+)."""
    every = _int_prop(config, PROP_COMPACT_DELTAS, DEFAULT_COMPACT_DELTAS)
    files_every = _int_prop(config, PROP_FILES_COMPACT_LOGS, DEFAULT_FILES_COMPACT_LOGS)
    instants = timeline.instants()
    if (every < 1 and files_every < 1) or any(not i.is_completed for i in instants):
        return None

    def deltas_after(last: Instant | None) -> int:
        t = last.begin_time if last is not None else INIT_INSTANT
        return sum(1 for i in instants if i.action == DELTA_COMMIT and not i.begin_time.startswith(SOLO)
                   and (i.completion_time or i.begin_time) > t)

    full_due = every >= 1 and deltas_after(mdt_services.last_compaction(timeline, instants, full=True)) >= every
    files_due = (not full_due and files_every >= 1 and FILES in _declared(config)
                 and deltas_after(mdt_services.last_compaction(timeline, instants, full=False)) >= files_every)
    if not full_due and not files_due:
        return None
    data = TableState(base_path, config)
    pending = {i.begin_time for i in data.instants() if not i.is_completed}
    if any(i.begin_time in pending for i in instants):
        return None
    folder = metadata_folder(base_path)
    mdt = TableState(folder, read_config(folder))
    declared = [p for p in _declared(config) if (folder / p).exists()]
    scope = declared if full_due else [p for p in declared if p == FILES]
    if not scope:
        return None
    view = MetadataTable(data, mdt, declared)
    ops: list[Operation] = []
    outputs: list[tuple[mi.PartitionSpec | _FileIds, str, Cells]] = []
    for name in scope:
        slices = {s.file_id: s for s in mdt.latest_slices(partitions=[name])}
        spec: mi.PartitionSpec | _FileIds
        per: dict[str, Cells] = {}
        if name == mi.RECORD_INDEX and partitioned_record_index(base_path):
            # a key lives once per data partition: each file group is merged and rewritten on its own (the groups
            # stay as they are; merging the partition whole would keep one entry per key)
            spec = _FileIds(sorted(slices))
            with mdt.pinned():
                completion, valid = mdt.completion_map(), view.valid_instants()
                for fid, fs in slices.items():
                    per[fid] = {k: _encode_record(rec) for k, rec in sorted(mdt_listing.merge_slice(
                        fs, completion, valid, strict=mdt.strict).items()) if not rec.deleted}
        else:
            spec = _spec(base_path, config, name)
            cells = {}
            for key, rec in view.records(name).items():
                cells[key] = _encode_record(rec)
            _shard(spec, config, cells, per)
        for i in range(spec.groups):
            fid = spec.file_id(i)
            current = slices.get(fid)
            ops.append(Operation(
                partition=name, file_id=fid,
                base_instant=current.base_file.name.instant if current and current.base_file else INIT_INSTANT,
                base_file=current.base_file.path.name if current and current.base_file else None,
                log_files=tuple(f.path.name for f in (current.log_files if current else ())), operation_type=FULL))
            outputs.append((spec, fid, per.get(fid, {})))
    begin = ActiveTimeline(base_path, config).new_instant_time()
    inflight = timeline.start(timeline.request(COMPACTION, CompactionPlan(operations=tuple(ops), strategy="full").to_json(),
                                               begin_time=begin))
    stats = []
    for spec, fid, group_cells in outputs:
        data_bytes, count = _hfile(group_cells)
        name = f"{fid}_{WRITE_TOKEN}_{begin}.hfile"
        markers.create_marker(folder, begin, spec.name, name, "CREATE")
        atomic.create_file(folder / spec.name / name, data_bytes)
        stats.append(_write_stat(spec.name, fid, name, len(data_bytes), count, name))
    partial = {mdt_services.PARTIAL_KEY: ",".join(scope)} if scope != declared else None
    done = timeline.complete(inflight, commit_metadata(stats, operation="compact", compacted=True, extra=partial))
    markers.delete_markers(folder, begin)
    return done


def _encode_record(rec: mr.MetadataValue) -> bytes:
    """A merged live record, encoded again for an MDT base file (file lists without their tombstones)."""
    p = rec.payload
    if rec.type in (mr.TYPE_FILE_LIST, mr.TYPE_PARTITION_LIST):
        return _value(rec.type, {n: (int(v.get("size") or 0), False)
                                 for n, v in (p.get("filesystemMetadata") or {}).items() if not v.get("isDeleted")})
    if rec.type in (mr.TYPE_COLUMN_STATS, mr.TYPE_PARTITION_STATS):
        cs = dict(p.get("ColumnStatsMetadata") or {})
        for side in ("minValue", "maxValue"):
            w = cs.get(side)
            if isinstance(w, dict) and "__wrapper__" in w:
                kind = str(w["__wrapper__"])
                cs[side] = (f"org.apache.hudi.avro.model.{_WRAPPER_NAMES.get(kind, kind)}", {"value": w["value"]})
        return mi.encode_value(rec.type, ColumnStatsMetadata=cs)
    if rec.type == mr.TYPE_RECORD_INDEX:
        return mi.encode_value(rec.type, recordIndexMetadata=dict(p.get("recordIndexMetadata") or {}))
    if rec.type == mr.TYPE_SECONDARY_INDEX:
        return mi.secondary_cell_value()
    if rec.type == mr.TYPE_BLOOM_FILTER:
        return mi.encode_value(rec.type, BloomFilterMetadata=dict(p.get("BloomFilterMetadata") or {}))
    raise LsmLabError(f"metadata record {rec.key!r} of type {rec.type} cannot be compacted by lsm_lab")


#: `metadata_record.wrapper_of`'s lower-case kind → the wrapper record's name
_WRAPPER_NAMES = {"boolean": "BooleanWrapper", "int": "IntWrapper", "long": "LongWrapper", "float": "FloatWrapper",
                  "double": "DoubleWrapper", "bytes": "BytesWrapper", "string": "StringWrapper",
                  "date": "DateWrapper", "decimal": "DecimalWrapper", "timemicros": "TimeMicrosWrapper",
                  "timestampmicros": "TimestampMicrosWrapper", "localdate": "LocalDateWrapper"}


def create_index(base_path: TablePath, name: str, column: str) -> str:
    """`CREATE INDEX name ON t (column)`: define `secondary_index_<name>` in `.hoodie/.index_defs/index.json`
    and build its MDT partition from the committed rows (upstream `HoodieIndexDefinition` +
    `initializeFromFilesystem` of a SECONDARY_INDEX partition); later writes keep it up to date.  Call with
    the table lock held; the table must keep a metadata table (`hoodie.metadata.enable=true`)."""
    base_path = as_path(base_path)
    config = read_config(base_path)
    if not enabled(config):
        raise InputError("a secondary index lives in the metadata table: the table needs "
                         "hoodie.metadata.enable=true and version 8, 9 or 10", path=base_path)
    schema = TableState(base_path, config).schema
    if schema is not None and column not in schema.names:
        raise InputError(f"the table has no column {column!r}", path=base_path)
    part = mi.define_secondary_index(base_path, name, column, config.version)
    _point_at_index_defs(base_path)
    _timeline(base_path, read_config(base_path))  # builds every defined partition not yet declared
    return part


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
            for partition in list_names(folder):
                if partition.startswith(".") or not (folder / partition).is_dir():
                    continue
                for fname in list_names(folder / partition):
                    if fname.endswith(f"_{WRITE_TOKEN}_{inst.begin_time}.hfile"):
                        paths.unlink(folder / partition / fname, missing_ok=True)
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
        if partition.startswith(".") or not (folder / partition).is_dir():
            continue
        for fname in list_names(folder / partition):
            parsed = naming.parse(fname)
            if parsed is not None and parsed.instant == t and paths.unlink(folder / partition / fname, missing_ok=True):
                deleted.append(f"{partition}/{fname}")
    done = timeline.complete(inflight, {
        "startRollbackTime": inflight.begin_time, "timeTakenInMillis": 0, "totalFilesDeleted": len(deleted),
        "commitsRollback": [t], "instantsRollback": [{"commitTime": t, "action": action}],
        "partitionMetadata": {p: {"partitionPath": p, "successDeleteFiles": [d for d in deleted if d.startswith(p + "/")],
                                  "failedDeleteFiles": []} for p in sorted({d.split("/")[0] for d in deleted})},
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


__all__ = ["FILES", "FILE_ID", "INIT_INSTANT", "SCHEMA_TEXT", "changes_of", "compact_if_due", "create_index", "drop",
           "enabled", "files_cells", "initialise_partition", "metadata_folder", "record_schema", "rollback", "update"]
