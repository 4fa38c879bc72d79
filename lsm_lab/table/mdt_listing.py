"""Listing a table from its metadata table: the `files` partition instead of a LIST of the data folders.

A snapshot plan needs the table's data files.  Without a metadata table (MDT) lsm_lab lists the
folders (`fsview.list_data_files_sized`: on an object store a recursive LIST of the whole table,
one request per 1,000 keys).  When the table declares the MDT's `files` partition
(`hoodie.table.metadata.partitions` contains `files`), `TableState` asks this module instead:

    data timeline (listed anyway) ──────────────┐ valid instants (getValidInstantTimestamps)
    .hoodie/metadata/.hoodie/hoodie.properties ─┤ not read: derived from the data table's (v8+; 1 GET
                                                │ once per process for older tables or another layout)
    .hoodie/metadata/.hoodie/timeline/ ─────────┤ completion times (in the names, v8+)
    .hoodie/metadata/files/   (1 LIST)  ────────┤ latest slice of files-0000-0
    base HFile (1 GET, once per process) ───────┤ merged cells, valid blocks only
    its log files (1 GET each) ─────────────────┘
          │
          ▼
    [(partition, path, FileName, size)]   the same tuples a folder listing gives; sizes from the MDT

The `.hoodie/…` requests are those of the MDT's own timeline and partition folder, never of a
data folder; inside a request scope a LIST of `.hoodie/` (the data timeline's) answers them when
it kept the whole tree.  The result goes through the same file-system view as a listing
(fsview rules 1-8: only completed instants' files, replaced groups, time travel, committed files
missing from the listing), so a plan from the MDT equals a plan from a listing whenever the MDT
equals the committed files on disk.

What keeps listing the folders (the MDT cannot show them, as upstream, where rollback uses
markers or a listing and `FileSystemBackedTableMetadata` remains for the rest):
- files of writes that never completed (`TableState.uncommitted_files`, inspection, rollback of a
  failed write, `lost_commits` when an inflight write left no markers: a requested plan has written nothing);
- a table whose MDT is absent (`files` not declared, no `.hoodie/metadata/`, or dropped while this
  reader held an older hoodie.properties — a file of it vanishes under the read): `list_from_metadata`
  returns None and the caller lists.  A damaged MDT file (present, unreadable) is an error.

A data file deleted by hand stays in the MDT: the plan still names it and the read that opens it
raises `CorruptTableError` (fsview rule 5 moves from the plan to the read).  A file replaced by
one of another size cannot be told from the MDT alone (rule 7 compares the listing's size with the
commit's; the MDT repeats the commit's).

Switches: `open_table(..., use_metadata=False)` (or `TableState(..., use_metadata=False)`), or the
environment variable `LSM_LAB_METADATA_LISTING=0`, list the folders; the default is on when the
table declares `files`, as upstream 1.x readers (`HoodieMetadataConfig.DEFAULT_METADATA_ENABLE_FOR_READERS`).

A process keeps the MDT's config and its base file's decoded cells (keyed by the stamp of the MDT's
hoodie.properties, which a LIST of `.hoodie/` gives): a long-lived reader then sends one GET per MDT
log file since the last MDT compaction, and nothing else beyond the timeline; a cold one adds the base
file's GET.  The MDT's hoodie.properties is not read for a data table of version 8 or later: upstream
fixes every property a plan needs (`metadata_table_props`, `derived_config`; an MDT whose timeline is not
where they say is read after all).

Version 10 MDTs keep native HFile logs (`format/hfile_log.py`); `log_parts` reads them and v1 blocks alike.

Simplified compared with Apache Hudi (`HoodieBackedTableMetadata.getAllFilesInPartition`): the
whole `files` partition is merged per plan (no HFile point lookups by partition key, no log
reader kept open between calls), and the MDT is read as of now.

Taught in: notebooks/14_metadata_table.ipynb (and docs/FORMAT.md, "The metadata table (use): listing")
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from lsm_lab.errors import CorruptFileError, LsmLabError, TableConfigError, TableNotFoundError
from lsm_lab.filegroup import fsview, v1read
from lsm_lab.filegroup.fsview import DataFile, FileSlice
from lsm_lab.filegroup.readstats import ReadStats
from lsm_lab.format import metadata_record as mr
from lsm_lab.format import naming
from lsm_lab.format.naming import FileName
from lsm_lab.storage import TablePath, list_stamped
from lsm_lab.timeline.config import TableConfig, read_config, table_checksum
from lsm_lab.timeline.instant import COMPACTION, DELTA_COMMIT, LOG_COMPACTION, ROLLBACK, Instant, State

RESTORE = "restore"
_CACHE_MAX = 64
#: (MDT folder, stamp of its hoodie.properties) → its config; (base file, size, that stamp) → its cells
_CONFIG_CACHE: dict[tuple[str, str], TableConfig] = {}
_BASE_CACHE: dict[tuple[str, int, str], dict[str, mr.MetadataValue]] = {}
#: `HoodieTimeline.SOLO_COMMIT_TIMESTAMP`: the MDT's initialising deltacommits start with it
SOLO_COMMIT_TIMESTAMP = "00000000000000"
PROPERTY_PARTITIONS = "hoodie.table.metadata.partitions"
FILES = "files"
#: set to 0 / false / off / no: list the data folders even when the table declares `files`
ENV_SWITCH = "LSM_LAB_METADATA_LISTING"

#: (partition, path, parsed name, size): a folder listing's tuple (fsview.list_data_files_sized)
Listed = tuple[str, Any, FileName, "int | None"]


class DataState(Protocol):
    """What the listing needs of the data table's `TableState`."""

    path: TablePath
    config: TableConfig
    strict: bool

    def instants(self) -> list[Instant]: ...

    def instant_metadata(self, instant: Instant) -> dict[str, Any]: ...


class MdtState(Protocol):
    """What the listing needs of the MDT's own `TableState` (made by the caller: no import of state.py here)."""

    path: TablePath
    strict: bool

    def instants(self) -> list[Instant]: ...

    def completed_writes(self) -> list[Instant]: ...

    def log_compactions(self, writes: Iterable[Instant]) -> dict[str, dict[tuple[str, str], frozenset[str]]]: ...


def metadata_path(base_path: TablePath) -> TablePath:
    return base_path / ".hoodie" / "metadata"


def declared(config: TableConfig, base_path: TablePath | None = None) -> list[str]:
    """The MDT partitions the table declares.  lsm_lab declares `files` at the first write with
    `hoodie.metadata.enable=true` (services/mdt_write.py), possibly after `config` was read: with the
    option on and nothing declared, hoodie.properties is read again (one GET) when `base_path` is given."""
    names = [p.strip() for p in config.props.get(PROPERTY_PARTITIONS, "").split(",") if p.strip()]
    if not names and base_path is not None \
            and config.props.get("hoodie.metadata.enable", "").strip().lower() == "true":
        try:
            fresh = read_config(base_path).props.get(PROPERTY_PARTITIONS, "")
        except LsmLabError:
            return []
        names = [p.strip() for p in fresh.split(",") if p.strip()]
    return names


def switched_on(use_metadata: bool | None) -> bool:
    """Whether MDT listing may be used: `use_metadata` if given, else not switched off by `ENV_SWITCH`."""
    if use_metadata is not None:
        return use_metadata
    return os.environ.get(ENV_SWITCH, "").strip().lower() not in ("0", "false", "off", "no")


# ------------------------------------------------------------------------------------- the MDT's properties
#: data table versions whose MDT a reader opens without reading its hoodie.properties (`derived_config`)
DERIVED_FROM = 8


def metadata_table_props(data: TableConfig) -> dict[str, str]:
    """The MDT's hoodie.properties as upstream writes them for a data table of this config
    (`HoodieBackedTableMetadataWriter` initialising it with `HoodieMetadataWriteUtils.createMetadataWriteConfig`:
    MERGE_ON_READ, HFILE base files, key field `key`, the metadata payload, no meta fields, CUSTOM merge mode,
    timeline layout 2 under `timeline/`, the data table's version) — the same keys and values as the shipped
    Hudi tables' MDTs.  services/mdt_write.py writes them; `derived_config` reads them without a GET."""
    name = f"{data.name}_metadata"
    database = data.props.get("hoodie.database.name", "")
    return {
        "hoodie.table.name": name, "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.table.version": str(data.version), "hoodie.table.initial.version": str(data.version),
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


def derived_config(data: TableConfig, folder: TablePath) -> TableConfig:
    """The MDT's config without a GET of its hoodie.properties: what a plan reads of it (table type, timeline
    layout and folders, base file format) is fixed by upstream for a data table of version 8 or later
    (`metadata_table_props`); `_listing` checks the timeline it points at is there (else it reads the file).
    Upstream's `HoodieBackedTableMetadata` reads the file (its meta client's `HoodieTableConfig`): a cold
    reader here saves that GET."""
    return TableConfig.from_props(metadata_table_props(data), path=str(folder / ".hoodie" / "hoodie.properties"))


# ------------------------------------------------------------------------------------- the merge
def valid_instants(data: DataState, mdt_instants: Iterable[Instant]) -> set[str]:
    """`HoodieTableMetadataUtil.getValidInstantTimestamps`: the instants whose MDT log blocks count.

    A completed data instant; a completed MDT deltacommit not pending on the data table (an index
    build); an instant rolled back by a completed data rollback/restore later than the earliest valid
    one; a completed MDT rollback/restore; a completed MDT deltacommit of the `00000000000000…` family."""
    data_instants = data.instants()
    pending = {i.begin_time for i in data_instants if i.state != State.COMPLETED}
    valid = {i.begin_time for i in data_instants if i.state == State.COMPLETED}
    done = [i for i in mdt_instants if i.state == State.COMPLETED]
    valid |= {i.begin_time for i in done if i.action == DELTA_COMMIT and i.begin_time not in pending}
    earliest = min(valid) if valid else SOLO_COMMIT_TIMESTAMP
    for inst in data_instants:
        if inst.state == State.COMPLETED and inst.action in (ROLLBACK, RESTORE) and inst.begin_time > earliest:
            valid |= rolled_back(data, inst)
    valid |= {i.begin_time for i in done if i.action in (ROLLBACK, RESTORE)}
    valid |= {i.begin_time for i in done if i.action == DELTA_COMMIT and i.begin_time.startswith(SOLO_COMMIT_TIMESTAMP)}
    return valid


def rolled_back(data: DataState, inst: Instant) -> set[str]:
    """The instants a completed rollback or restore rolled back (`getRollbackedCommits`)."""
    try:
        meta = data.instant_metadata(inst)
    except LsmLabError:
        return set()
    out = set(meta.get("commitsRollback") or [])
    for group in (meta.get("hoodieRestoreMetadata") or {}).values():
        for rm in group or []:
            out |= set((rm or {}).get("commitsRollback") or [])
    return {str(x) for x in out}


def base_cells(f: DataFile) -> dict[str, mr.MetadataValue]:
    """The decoded cells of an MDT base HFile."""
    from lsm_lab.format import hfile  # start-up: HFiles are read only for a metadata table

    if f.name.ext != "hfile":
        raise LsmLabError(f"metadata table base file {f.path.name} is not an HFile", path=f.path)
    h = hfile.read_hfile(f.path)
    schema = h.avro_schema
    source = str(f.path)
    out: dict[str, mr.MetadataValue] = {}
    for key, value in h.items():
        k = key.decode("utf-8", "replace")
        out[k] = mr.decode_value(k, value, schema, source=source)
    return out


def _cached_base_cells(f: DataFile, generation: str) -> dict[str, mr.MetadataValue]:
    """`base_cells`, kept per process: a base file is never changed once written (its name carries its
    instant), and `generation` (the stamp of the MDT's hoodie.properties, rewritten when an MDT is made
    again under the same names) tells a rebuilt MDT's files apart."""
    key = (str(f.path), f.size, generation)
    hit = _BASE_CACHE.get(key)
    if hit is None:
        hit = base_cells(f)
        if len(_BASE_CACHE) >= _CACHE_MAX:
            _BASE_CACHE.clear()
        _BASE_CACHE[key] = hit
    return hit


@dataclass(frozen=True)
class LogPart:
    """One valid change set of an MDT file slice, in merge order: a v1 log's block, or a whole native HFile log
    (table version 10, `format/hfile_log.py`).  `values` None: a delete (its keys are tombstones)."""

    keys: pa.Array
    values: pa.Array | None
    schema: str | None
    source: str


def log_parts(fs: FileSlice, completion: Mapping[str, str], valid: set[str], *,
              strict: bool = False) -> list[LogPart]:
    """The slice's log changes that count: v1 HFILE_DATA_BLOCKs and delete blocks, and native `.log.hfile` /
    `.deletes.hfile` files, in completion order (`v1read.ordered_units`: rollback blocks applied), each kept
    only if its instant is valid (`valid_instants`)."""
    from lsm_lab.format import hfile_log  # start-up: HFiles are read only for a metadata table
    from lsm_lab.format import log_v1 as v1  # start-up: decoded only for a metadata table's logs

    parts: list[LogPart] = []
    for unit in v1read.ordered_units(dict(completion), None, fs, strict=strict, stats=ReadStats()):
        block = unit.block
        source = str(unit.file.path)
        if block is None:  # a native log (version 10): the whole file is one change set
            native = hfile_log.read(unit.file.path, unit.file.name)
            if native.instant_time in valid:
                parts.append(LogPart(native.keys, native.values, native.schema, source))
            continue
        if block.instant_time not in valid or block.records is None:
            continue
        if block.is_delete:
            parts.append(LogPart(block.records.column("record_key").combine_chunks(), None, None, source))
            continue
        if block.block_type != v1.BlockType.HFILE:
            raise LsmLabError(f"{block.block_type.name} block at offset {block.offset} in the metadata table "
                              "(expected HFile data blocks)", path=unit.file.path)
        parts.append(LogPart(block.records.column("key").combine_chunks(), block.records.column("value").combine_chunks(),
                             block.header.get("SCHEMA"), source))
    return parts


def merge_slice(fs: FileSlice, completion: Mapping[str, str], valid: set[str], *,
                strict: bool = False, generation: str | None = None) -> dict[str, mr.MetadataValue]:
    """The records of one MDT file slice: base HFile cells, then the valid log changes in completion order
    (`log_parts`), combined per key (`HoodieMetadataPayload.preCombine`); tombstones kept.
    With `generation`, the base file's cells are kept in the process (`_cached_base_cells`)."""
    out: dict[str, mr.MetadataValue] = {}
    if fs.base_file is not None:
        out.update(base_cells(fs.base_file) if generation is None else _cached_base_cells(fs.base_file, generation))
    for part in log_parts(fs, completion, valid, strict=strict):
        keys = part.keys.to_pylist()
        if part.values is None:
            for key in keys:
                out[key] = mr.tombstone(key)
            continue
        for k, v in zip(keys, part.values.to_pylist(), strict=True):
            out[k] = mr.combine(out.get(k), mr.decode_value(k, v, part.schema, source=part.source))
    return out


# ------------------------------------------------------------------------------------- the listing
def forget() -> None:
    """Drop what the process keeps of metadata tables (a cold reader's requests: `lsm-lab bench metadata`)."""
    _CONFIG_CACHE.clear()
    _BASE_CACHE.clear()


def list_from_metadata(data: DataState, open_mdt: Callable[[TablePath, TableConfig], MdtState]) -> list[Listed] | None:
    """The data files the MDT's `files` partition lists, as `fsview.list_data_files_sized` tuples (sizes
    from the MDT), or None when the table has no readable MDT with a `files` partition (list instead).

    `open_mdt(path, config)` makes the MDT's `TableState` (the caller passes its class: this module
    sits below state.py).  Names that are not data file names (Hudi's other file kinds) are skipped."""
    if FILES not in declared(data.config, data.path):
        return None
    folder = metadata_path(data.path)
    try:
        return _listing(data, open_mdt, folder)
    except (TableNotFoundError, TableConfigError, FileNotFoundError):
        # declared, but never made or dropped meanwhile (services/mdt_write.drop undeclares it, then deletes
        # it: a reader that read hoodie.properties before may find it gone or half gone): list instead
        return None
    except CorruptFileError:
        if (folder / ".hoodie" / "hoodie.properties").exists():
            raise  # damaged, not vanished: say so
        return None


def _listing(data: DataState, open_mdt: Callable[[TablePath, TableConfig], MdtState],
             folder: TablePath) -> list[Listed] | None:
    stamp = list_stamped(folder / ".hoodie").get("hoodie.properties")  # from the kept LIST of .hoodie/, if any
    if stamp is None:
        return None
    generation = f"{stamp[0]}:{stamp[1]}"
    ckey = (str(folder), generation)
    config = _CONFIG_CACHE.get(ckey)
    derived = config is None and data.config.version >= DERIVED_FROM
    if config is None:
        config = derived_config(data.config, folder) if derived else read_config(folder)
    mdt = open_mdt(folder, config)
    if derived and not mdt.instants():
        # every MDT has its initialising deltacommit: an empty timeline means the MDT is not where upstream's fixed
        # properties put it (another timeline path): read its hoodie.properties after all
        config = read_config(folder)
        mdt = open_mdt(folder, config)
    if _CONFIG_CACHE.get(ckey) is not config:
        if len(_CONFIG_CACHE) >= _CACHE_MAX:
            _CONFIG_CACHE.clear()
        _CONFIG_CACHE[ckey] = config
    writes = mdt.completed_writes()
    completion = {i.begin_time: i.completion_time or i.begin_time for i in writes}
    compactions = {i.begin_time for i in writes if i.action in (COMPACTION, LOG_COMPACTION)}
    listed = [f for f in fsview.list_data_files_sized(folder) if f[0] == FILES]
    groups = fsview.build_file_groups(folder, completion, read_time=None, partitions=[FILES], files=listed,
                                      compaction_instants=compactions, log_compactions=mdt.log_compactions(writes))
    valid = valid_instants(data, mdt.instants())
    merged: dict[str, mr.MetadataValue] = {}
    for g in groups:
        merged.update(merge_slice(g.latest, completion, valid, strict=data.strict, generation=generation))
    out: list[Listed] = []
    for key, rec in sorted(merged.items()):
        if rec.deleted or rec.type != mr.TYPE_FILE_LIST:
            continue
        part = "" if key == mr.NON_PARTITIONED_KEY else key
        root = data.path / part if part else data.path
        for name, info in sorted((rec.payload.get("filesystemMetadata") or {}).items()):
            parsed = naming.parse(name)
            if parsed is None or info.get("isDeleted"):
                continue
            out.append((part, root / name, parsed, int(info.get("size") or 0)))
    return out


__all__ = [
    "ENV_SWITCH",
    "DataState",
    "Listed",
    "LogPart",
    "MdtState",
    "base_cells",
    "declared",
    "derived_config",
    "forget",
    "list_from_metadata",
    "log_parts",
    "merge_slice",
    "metadata_path",
    "metadata_table_props",
    "rolled_back",
    "switched_on",
    "valid_instants",
]
