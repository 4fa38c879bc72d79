"""What an instant file holds: commit metadata with per-file write statistics.

A completed write instant stores a `HoodieCommitMetadata`:

    {
      "operationType": "UPSERT",
      "compacted": false,
      "extraMetadata": {"schema": "<avro schema json>", "lsm_lab.arrow_schema": "<base64>"},
      "partitionToWriteStats": {
        "city=chennai": [
          {"fileId": "00000001-...-0", "path": "city=chennai/00000001-..._0-1-0_2026....parquet",
           "prevCommit": "null", "numWrites": 120, "numInserts": 100, "numUpdateWrites": 20,
           "numDeletes": 0, "totalWriteBytes": 20480, "fileSizeInBytes": 20480,
           "partitionPath": "city=chennai", "baseFile": "", "logFiles": []}
        ]
      }
    }

Apache Hudi 1.x (timeline layout 2) writes the same structure as an Avro object
container file (`Obj\x01` magic, upstream's `CommitMetadataSerDeV2`), and so does
lsm_lab on tables of version 8 and later (`lsm_lab.timeline.instant.format=avro`,
`encode_avro_commit_metadata`); the other instant files (plans, clean, rollback,
restore, savepoint) are the records of `timeline/avro_models.py`, and
`encode_avro_instant` picks the right one for an action and state (or b"" where
upstream leaves the file empty).  Version 6 tables keep JSON commit metadata, as
Hudi 0.x does, with the other records in Avro; tables created before
(`...instant.format=json`) keep JSON until `lsm-lab upgrade --instants-only`.
`decode_instant_content` reads every encoding, so that the rest of the library only
ever sees dicts (the JSON field names).

Simplified compared with Apache Hudi: no per-file runtime stats (`totalLogBlocks`,
`totalCorruptLogBlock`, timings), and no workload profile in a write's inflight file.

Taught in: notebooks/02_timeline.ipynb
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from lsm_lab.avro_schema import arrow_to_avro_schema, avro_schema_json, hudi_record_names
from lsm_lab.errors import CorruptFileError, LsmLabError
from lsm_lab.storage import paths
from lsm_lab.timeline import avro_models
from lsm_lab.timeline.instant import WRITE_ACTIONS

if TYPE_CHECKING:
    import pyarrow as pa

AVRO_MAGIC = b"Obj\x01"

#: the `extraMetadata` key of lsm_lab's Arrow schema (base64 of its IPC serialisation) in a write's metadata
SCHEMA_KEY = "lsm_lab.arrow_schema"


def schema_to_text(schema: pa.Schema) -> str:
    """`schema` as the text stored under `SCHEMA_KEY`."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def schema_from_text(text: str) -> pa.Schema:
    """The Arrow schema stored under `SCHEMA_KEY` (every read asks for it; here, not in the write path's
    module, so that a snapshot read does not import the writers)."""
    import pyarrow as pa  # start-up: the timeline is read without Arrow (`lsm-lab show timeline`)

    try:
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text, validate=True)))
    except (ValueError, TypeError, OSError, pa.ArrowException) as exc:  # binascii.Error is a ValueError
        raise CorruptFileError(f"extraMetadata['{SCHEMA_KEY}'] is not a serialized Arrow schema: "
                               f"{type(exc).__name__}: {str(exc)[:200]}") from None


@dataclass
class WriteStat:
    """Statistics of one file written by an instant (Hudi's `HoodieWriteStat`, JSON field names)."""

    partitionPath: str
    fileId: str
    path: str
    prevCommit: str = "null"
    numWrites: int = 0
    numInserts: int = 0
    numUpdateWrites: int = 0
    numDeletes: int = 0
    totalWriteBytes: int = 0
    fileSizeInBytes: int = 0
    baseFile: str = ""
    logFiles: list[str] = field(default_factory=list)
    minRecordKey: str | None = None
    maxRecordKey: str | None = None
    cdcStats: dict[str, int] | None = None  # CDC log path → bytes, on CDC tables only (`{}`: no change)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        if out["cdcStats"] is None:
            del out["cdcStats"]
        return out


def commit_metadata(
    stats: list[WriteStat],
    *,
    operation: str,
    extra: Mapping[str, str] | None = None,
    compacted: bool = False,
) -> dict[str, Any]:
    """Build a `HoodieCommitMetadata` dict from write stats."""
    by_partition: dict[str, list[dict[str, Any]]] = {}
    for stat in stats:
        by_partition.setdefault(stat.partitionPath, []).append(stat.to_json())
    return {
        "partitionToWriteStats": by_partition,
        "compacted": compacted,
        "extraMetadata": dict(extra or {}),
        "operationType": operation.upper(),
    }


def encode_json(content: Mapping[str, Any]) -> bytes:
    return json.dumps(content, indent=2, sort_keys=True).encode("utf-8")


def decode_instant_content(data: bytes, *, path: str | None = None) -> dict[str, Any]:
    """Decode an instant file: empty → {}, Avro container → first record, else JSON."""
    if not data or not data.strip():
        return {}
    if data.startswith(AVRO_MAGIC):
        import fastavro

        try:
            reader = fastavro.reader(io.BytesIO(data))
            records = list(reader)
            schema = reader.writer_schema
        except Exception as exc:  # noqa: BLE001 - fastavro raises many types for bad bytes
            raise CorruptFileError(f"cannot decode Avro instant file: {exc}", path=path) from None
        if not records:
            return {}
        record = _plain(records[0])
        if not isinstance(record, dict):
            raise CorruptFileError("Avro instant file does not hold a record", path=path)
        name = schema.get("name") if isinstance(schema, dict) else None
        converted = avro_models.decode(str(name), record)  # plans, clean, rollback, restore, savepoint
        content: dict[str, Any] = record if converted is None else converted
        check_shape(content, path=path)
        return content
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, and an integer of > 4300 digits
        raise CorruptFileError(f"instant file is neither Avro nor JSON: {str(exc)[:200]}", path=path) from None
    except RecursionError:
        raise CorruptFileError("instant file JSON is nested too deeply", path=path) from None
    if not isinstance(value, dict):
        raise CorruptFileError("instant file JSON is not an object", path=path)
    check_shape(value, path=path)
    return value


# --------------------------------------------------------------------------- shape and path checks
# top-level key -> (container type, type of its values or items) of the instant contents lsm_lab reads
_SHAPES: dict[str, tuple[type, type | tuple[type, ...] | None]] = {
    "extraMetadata": (dict, (str, type(None))),
    "partitionToWriteStats": (dict, (list, type(None))),
    "partitionToReplaceFileIds": (dict, (list, type(None))),
    "operations": (list, dict),
    "filePathsToBeDeletedPerPartition": (dict, list),
    "instantsToRollback": (list, (dict, str)),
    "savepointsToDelete": (list, str),
    "partitionMetadata": (dict, dict),
    "earliestInstantToRetain": (dict, None),
    "instantToRollback": (dict, None),
}


def check_shape(content: Mapping[str, Any], *, path: str | None = None) -> None:
    """CorruptFileError when a key lsm_lab reads holds the wrong kind of value (a list for an object, ...).

    Only the containers are checked here; values that become paths are checked
    by `check_paths`, counts by the code that sums them.
    """
    for key, (container, item) in _SHAPES.items():
        value = content.get(key)
        if value is None:
            continue
        if not isinstance(value, container):
            raise CorruptFileError(f"'{key}' is a {type(value).__name__}, not a JSON "
                                   f"{'object' if container is dict else 'array'}", path=path)
        if item is None:
            continue
        items: Iterable[Any] = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        if isinstance(value, dict) and not all(isinstance(k, str) for k in value):
            raise CorruptFileError(f"'{key}' has a key that is not a string", path=path)
        for v in items:
            if not isinstance(v, item):
                raise CorruptFileError(f"'{key}' holds a {type(v).__name__} where a "
                                       f"{getattr(item, '__name__', 'value of another type')} belongs", path=path)
    for stats in (content.get("partitionToWriteStats") or {}).values():
        for stat in stats or []:
            if not isinstance(stat, dict):
                raise CorruptFileError("'partitionToWriteStats' holds a write stat that is not an object", path=path)
            for k in ("path", "partitionPath", "fileId"):
                if stat.get(k) is not None and not isinstance(stat[k], str):
                    raise CorruptFileError(f"a write stat's '{k}' is a {type(stat[k]).__name__}, not a string",
                                           path=path)
            for k in ("numWrites", "numInserts", "numUpdateWrites", "numDeletes", "totalWriteBytes"):
                v = stat.get(k)
                if v is not None and (isinstance(v, bool) or not isinstance(v, int | str)
                                      or (isinstance(v, str) and not v.lstrip("-").isdigit())):
                    raise CorruptFileError(f"a write stat's '{k}' is a {type(v).__name__}, not a number", path=path)


def check_paths(content: Mapping[str, Any], *, action: str, requested: bool, path: str | None = None) -> None:
    """The path guard for instant contents: every value lsm_lab turns into a path must stay in the table.

    `requested`: the content is a plan (`<t>.<action>.requested`), else completed
    metadata.  Raises `CorruptTableError` naming the file and the field.
    """
    if requested and action == "restore":
        for i, entry in enumerate(content.get("instantsToRollback") or []):
            value = entry.get("commitTime") if isinstance(entry, dict) else entry
            paths.instant_time(value, file=path, field=f"instantsToRollback[{i}].commitTime")
        for i, value in enumerate(content.get("savepointsToDelete") or []):
            paths.instant_time(value, file=path, field=f"savepointsToDelete[{i}]")
    elif requested and action == "clean":
        for part, entries in (content.get("filePathsToBeDeletedPerPartition") or {}).items():
            paths.partition(part, file=path, field="filePathsToBeDeletedPerPartition")
            for i, entry in enumerate(entries or []):
                value = entry.get("filePath") if isinstance(entry, dict) else None
                paths.data_file(value, file=path, field=f"filePathsToBeDeletedPerPartition[{part!r}][{i}].filePath")
    elif requested and action in ("compaction", "logcompaction"):
        for i, op in enumerate(content.get("operations") or []):
            where = f"operations[{i}]"
            paths.partition(op.get("partitionPath") or "", file=path, field=f"{where}.partitionPath")
            paths.name(op.get("fileId"), file=path, field=f"{where}.fileId")
            if op.get("baseInstantTime"):
                paths.instant_time(op["baseInstantTime"], file=path, field=f"{where}.baseInstantTime")
            if op.get("dataFilePath") is not None:
                paths.name(op["dataFilePath"], file=path, field=f"{where}.dataFilePath")
            logs = op.get("deltaFilePaths") or []
            if not isinstance(logs, list):
                raise CorruptFileError(f"{where}.deltaFilePaths is not a JSON array", path=path)
            for j, value in enumerate(logs):
                paths.name(value, file=path, field=f"{where}.deltaFilePaths[{j}]")
    elif not requested and action == "savepoint":
        if content.get("savepointedInstant") is not None:
            paths.instant_time(content["savepointedInstant"], file=path, field="savepointedInstant")
        for part, entry in (content.get("partitionMetadata") or {}).items():
            paths.partition(part, file=path, field="partitionMetadata")
            files = entry.get("savepointDataFile") or []
            if not isinstance(files, list):
                raise CorruptFileError("savepointDataFile is not a JSON array", path=path)
            for j, value in enumerate(files):
                paths.name(value, file=path, field=f"partitionMetadata[{part!r}].savepointDataFile[{j}]")
    elif not requested:
        for part, stats in (content.get("partitionToWriteStats") or {}).items():
            paths.partition(part, file=path, field="partitionToWriteStats")
            for i, stat in enumerate(stats or []):
                where = f"partitionToWriteStats[{part!r}][{i}]"
                if stat.get("path"):
                    paths.data_file(stat["path"], file=path, field=f"{where}.path")
                if stat.get("partitionPath"):
                    paths.partition(stat["partitionPath"], file=path, field=f"{where}.partitionPath")
                if stat.get("fileId"):
                    paths.name(stat["fileId"], file=path, field=f"{where}.fileId")


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def iter_write_stats(metadata: Mapping[str, Any]) -> list[dict[str, Any]]:
    """All write stats of a commit metadata dict, each with its `partitionPath` filled in."""
    out: list[dict[str, Any]] = []
    for partition, stats in (metadata.get("partitionToWriteStats") or {}).items():
        for stat in stats or []:
            stat = dict(stat)
            stat.setdefault("partitionPath", partition)
            if stat.get("partitionPath") is None:
                stat["partitionPath"] = partition
            out.append(stat)
    return out


def summarize(metadata: Mapping[str, Any]) -> dict[str, int]:
    """Totals over all write stats: files, records written/inserted/updated/deleted, bytes."""
    stats = iter_write_stats(metadata)
    return {
        "partitions": len(metadata.get("partitionToWriteStats") or {}),
        "files": len(stats),
        "records_written": sum(int(s.get("numWrites") or 0) for s in stats),
        "records_inserted": sum(int(s.get("numInserts") or 0) for s in stats),
        "records_updated": sum(int(s.get("numUpdateWrites") or 0) for s in stats),
        "records_deleted": sum(int(s.get("numDeletes") or 0) for s in stats),
        "bytes_written": sum(int(s.get("totalWriteBytes") or 0) for s in stats),
    }


# --------------------------------------------------------------------------- Avro commit metadata
_STAT_LONGS = ("numWrites", "numDeletes", "numUpdateWrites", "numInserts", "totalWriteBytes", "totalWriteErrors",
               "fileSizeInBytes", "totalLogRecords", "totalLogBlocks", "totalCorruptLogBlock",
               "totalRollbackBlocks", "totalUpdatedRecordsCompacted", "totalLogFilesCompacted",
               "totalLogSizeCompacted", "minEventTime", "maxEventTime")
_STAT_STRINGS = ("fileId", "path", "prevCommit", "partitionPath", "baseFile", "prevBaseFile", "tempPath",
                 "minRecordKey", "maxRecordKey")
_TOP_KEYS = frozenset({"partitionToWriteStats", "compacted", "extraMetadata", "version", "operationType",
                       "partitionToReplaceFileIds"})
_NS = "org.apache.hudi.avro.model"


def _opt(t: Any) -> list[Any]:
    return ["null", t]


def commit_metadata_avro_schema(*, replace: bool = False) -> dict[str, Any]:
    """`HoodieCommitMetadata` (or `HoodieReplaceCommitMetadata`) as Hudi 1.x writes it, nullable fields first.

    Upstream's `hudi-common/src/main/avro/HoodieCommitMetadata.avsc` is the base; `baseFile`,
    `logFiles`, `logVersion`/`logOffset`, `cdcStats` (upstream's Java `HoodieWriteStat` has them
    and its JSON carries them) and lsm_lab's `minRecordKey`/`maxRecordKey` ride along in the
    write stats (Avro readers resolve fields by name and skip ones they do not know).
    """
    stat_fields = ([{"name": n, "type": _opt("string"), "default": None} for n in _STAT_STRINGS]
                   + [{"name": n, "type": _opt("long"), "default": None} for n in _STAT_LONGS]
                   + [{"name": "logVersion", "type": _opt("int"), "default": None},
                      {"name": "logOffset", "type": _opt("long"), "default": None},
                      {"name": "logFiles", "type": _opt({"type": "array", "items": "string"}), "default": None},
                      {"name": "cdcStats", "type": _opt({"type": "map", "values": "long"}), "default": None}])
    write_stat = {"type": "record", "name": "HoodieWriteStat", "namespace": _NS, "fields": stat_fields}
    fields: list[dict[str, Any]] = [
        {"name": "partitionToWriteStats",
         "type": _opt({"type": "map", "values": {"type": "array", "items": write_stat}}), "default": None},
        {"name": "compacted", "type": _opt("boolean"), "default": None},
        {"name": "extraMetadata", "type": _opt({"type": "map", "values": "string"}), "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "operationType", "type": _opt("string"), "default": None},
    ]
    if replace:
        fields.append({"name": "partitionToReplaceFileIds",
                       "type": _opt({"type": "map", "values": {"type": "array", "items": "string"}}), "default": None})
    name = "HoodieReplaceCommitMetadata" if replace else "HoodieCommitMetadata"
    return {"type": "record", "name": name, "namespace": _NS, "fields": fields}


@functools.cache
def _parsed_schema(replace: bool) -> Any:
    """The commit metadata schema as fastavro parsed it (once per process: every commit writes one file)."""
    import fastavro

    return fastavro.parse_schema(commit_metadata_avro_schema(replace=replace))


def _stat_for_avro(stat: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in _STAT_STRINGS:
        v = stat.get(n)
        out[n] = None if v is None else str(v)
    for n in _STAT_LONGS:
        v = stat.get(n)
        out[n] = None if v is None else int(v)
    out["logVersion"] = None if stat.get("logVersion") is None else int(stat["logVersion"])
    out["logOffset"] = None if stat.get("logOffset") is None else int(stat["logOffset"])
    logs = stat.get("logFiles")
    out["logFiles"] = None if logs is None else [str(x) for x in logs]
    cdc = stat.get("cdcStats")
    out["cdcStats"] = None if cdc is None else {str(k): int(v) for k, v in cdc.items()}
    return out


_STAT_KEYS = frozenset({*_STAT_STRINGS, *_STAT_LONGS, "logVersion", "logOffset", "logFiles", "cdcStats"})


def encode_avro_commit_metadata(content: Mapping[str, Any]) -> bytes | None:
    """Commit metadata as an Avro object container file, or None when `content` has keys Hudi's schema lacks.

    (A None tells the caller to keep JSON, so nothing lsm_lab stored is ever dropped.)
    """
    if not set(content) <= _TOP_KEYS:
        return None
    for lst in (content.get("partitionToWriteStats") or {}).values():
        if any(not set(s) <= _STAT_KEYS for s in lst or []):
            return None  # a write-stat field the schema lacks: JSON keeps it
    import fastavro

    replace = "partitionToReplaceFileIds" in content
    stats = content.get("partitionToWriteStats")
    datum: dict[str, Any] = {
        "partitionToWriteStats": None if stats is None else {
            str(p): [_stat_for_avro(s) for s in (lst or [])] for p, lst in stats.items()},
        "compacted": None if content.get("compacted") is None else bool(content["compacted"]),
        "extraMetadata": None if content.get("extraMetadata") is None else {
            str(k): str(v) for k, v in content["extraMetadata"].items()},
        "version": content.get("version", 1),
        "operationType": None if content.get("operationType") is None else str(content["operationType"]),
    }
    if replace:
        datum["partitionToReplaceFileIds"] = {str(p): [str(f) for f in ids or []]
                                              for p, ids in (content.get("partitionToReplaceFileIds") or {}).items()}
    buf = io.BytesIO()
    # the sync marker only has to be unlikely inside the data: derived from the content, the bytes are
    # reproducible (the same metadata encodes the same way) where Hudi draws a random one
    marker = hashlib.blake2b(repr(sorted(datum.items(), key=str)).encode(), digest_size=16).digest()
    fastavro.writer(buf, _parsed_schema(replace), [datum],
                    sync_marker=marker)
    return buf.getvalue()


ARROW_SCHEMA_KEY = "lsm_lab.arrow_schema"


def with_hudi_schema(content: Mapping[str, Any], table_name: str) -> dict[str, Any]:
    """`content` with `extraMetadata.schema` (the Avro table schema Hudi readers look for) added.

    Derived from lsm_lab's Arrow schema (`extraMetadata["lsm_lab.arrow_schema"]`),
    without the meta columns, named as Hudi names it (`<table>_record` in
    `hoodie.<table>`). Content without an Arrow schema, or with types Avro cannot
    carry, is returned unchanged.
    """
    extra = dict(content.get("extraMetadata") or {})
    text = extra.get(ARROW_SCHEMA_KEY)
    if not text or extra.get("schema"):
        return dict(content)
    import base64

    import pyarrow as pa


    try:
        schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))
        user = pa.schema([f for f in schema if not f.name.startswith("_hoodie_")])
        name, namespace = hudi_record_names(table_name)
        extra["schema"] = avro_schema_json(arrow_to_avro_schema(user, name=name, namespace=namespace))
    except (LsmLabError, ValueError, pa.ArrowInvalid):
        return dict(content)
    out = dict(content)
    out["extraMetadata"] = extra
    return out



def encode_avro_instant(action: str, state: str, content: Mapping[str, Any], *,
                        records_only: bool = False) -> bytes | None:
    """The bytes upstream's timeline layout 2 has in `<t>.<action>.<state>` for `content`, as Avro.

    `state`: requested | inflight | completed.  Commit metadata of write actions (completed, or an
    inflight file with content) is `HoodieCommitMetadata`; plans, clean, rollback, restore and savepoint
    files are the records of `avro_models`; states upstream leaves empty get b"".  None: `content` has
    something the record cannot carry, or the file is not one upstream writes as Avro (keep JSON).
    `records_only` (table version 6, as Hudi 0.x): only the plan/clean/rollback/restore/savepoint records,
    commit metadata and everything else stays as the caller writes it (JSON).
    """
    if records_only:
        model = avro_models.model_for(action, state)
        return None if model is None else avro_models.encode(model, content)
    if (action, state) in avro_models.EMPTY_STATES:
        return b""
    model = avro_models.model_for(action, state)
    if model is not None:
        return avro_models.encode(model, content)
    if action in WRITE_ACTIONS and state in ("completed", "inflight"):
        return encode_avro_commit_metadata(content)
    return None
