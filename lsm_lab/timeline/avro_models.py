"""Upstream's Avro records for the instant files that are not commit metadata: plans, clean, rollback, restore, savepoint.

Apache Hudi writes every instant file that has content as one Avro record in an
object container file (`Obj\\x01`, the writer schema in the header).  Which record
depends on the action and the state (timeline layout 2, `TimelineMetadataUtils`):

    <t>.compaction.requested / <t>.logcompaction.requested   HoodieCompactionPlan
    <t>.clustering.requested / <t>.replacecommit.requested   HoodieRequestedReplaceMetadata
    <t>.clean.requested                                      HoodieCleanerPlan
    <t>_<c>.clean                                            HoodieCleanMetadata
    <t>.rollback.requested                                   HoodieRollbackPlan
    <t>_<c>.rollback                                         HoodieRollbackMetadata
    <t>.restore.requested                                    HoodieRestorePlan
    <t>_<c>.restore                                          HoodieRestoreMetadata
    <t>_<c>.savepoint                                        HoodieSavepointMetadata
    <t>.replacecommit.requested (insert overwrite)           HoodieRequestedReplaceMetadata (operationType only)
    commit/deltacommit requested and inflight, every other   empty, as upstream leaves them (lsm_lab writes no
    inflight, savepoint.requested                            workload profile into a write's inflight file)

(completed commit/deltacommit/replacecommit files: `timeline/metadata.py`.)

Each schema below is written here in Python after upstream's `.avsc` of the same
name in `hudi-common/src/main/avro/` (cited next to it): same record names,
namespace `org.apache.hudi.avro.model`, field names, unions and defaults.  The
services keep building and reading the dicts they always did (JSON field names);
`encode` turns such a dict into the record and `decode` turns a record back into
it.  lsm_lab's own facts go under `lsm_lab.*` keys of the record's
`extraMetadata` where the record has one; where it has none (a compaction
operation's FULL/LOG type, a restore plan's savepoints to delete, the instant a
savepoint pins) they ride along as extra nullable fields of the *writer* schema:
Avro readers resolve fields by name, so upstream's reader (its own schema as
reader schema) skips them, while lsm_lab reads them back.  Content with a key no
schema field can carry is not encoded (`encode` returns None, the caller keeps
JSON): nothing lsm_lab wrote is ever dropped.

Decoding drops fields whose value is null, so a dict read from Avro has the same
keys as the one that was written (and a real Hudi file reads like one lsm_lab
wrote: no `None` where the services expect a missing key).

Simplified compared with Apache Hudi: no `HoodieRollbackRequest` entries in a
rollback plan (lsm_lab deletes the files it finds by name, not a planned list),
no bootstrap fields filled in, no `HoodieCompactionStrategy` in a compaction plan
(the strategy is `lsm_lab.strategy` in its `extraMetadata`), and the sync marker
is derived from the content (the same record encodes to the same bytes) where
Hudi draws a random one.

Taught in: notebooks/02_timeline.ipynb
"""

from __future__ import annotations

import functools
import hashlib
import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

NS = "org.apache.hudi.avro.model"
_STR = "string"
_STRINGS = {"type": "array", "items": "string"}
_STRING_MAP = {"type": "map", "values": "string"}


def _opt(name: str, kind: Any) -> dict[str, Any]:
    # (no "doc" next to a "default": fastavro writes a field's optional properties in set order, which
    # changes with the process's hash seed, and the header bytes would not be reproducible)
    return {"name": name, "type": ["null", kind], "default": None}


def _req(name: str, kind: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, **extra}


def _version(default: int = 1) -> dict[str, Any]:
    return {"name": "version", "type": ["int", "null"], "default": default}


def _record(name: str, fields: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": NS, "fields": fields}


# ----------------------------------------------------------------------------- schemas
# hudi-common/src/main/avro/HoodieInstantInfo.avsc (apache/hudi ac3ae4a66fa86b02538412964a3dbff4a2541f7e)
def _instant_info() -> dict[str, Any]:
    return _record("HoodieInstantInfo", [_req("commitTime", _STR), _req("action", _STR)])


# hudi-common/src/main/avro/HoodieCompactionOperation.avsc, HoodieCompactionStrategy.avsc and
# HoodieCompactionPlan.avsc (apache/hudi 362fff532b7f07b095948b3a9feb8c981926f7d5 / b337c3efccfdfe694e7713454bf845bf63b342bc
# / the writer schema of the Hudi 1.x file `qs_mor_avro_v8_trips_8i3u1d/.hoodie/timeline/*.compaction.requested`)
def compaction_plan_schema() -> dict[str, Any]:
    op = _record("HoodieCompactionOperation", [
        _req("baseInstantTime", ["null", _STR]),
        _opt("deltaFilePaths", _STRINGS),
        _opt("dataFilePath", _STR),
        _req("fileId", ["null", _STR]),
        _opt("partitionPath", _STR),
        _opt("metrics", {"type": "map", "values": "double"}),
        _opt("bootstrapFilePath", _STR),
        _opt("operationType", _STR),  # lsm_lab's: FULL or LOG (upstream readers skip it)
        _opt("reason", _STR),  # lsm_lab's: why the planner chose this file group
    ])
    strategy = _record("HoodieCompactionStrategy", [
        _opt("compactorClassName", _STR), _opt("strategyParams", _STRING_MAP), _version()])
    return _record("HoodieCompactionPlan", [
        _opt("operations", {"type": "array", "items": op}),
        _opt("extraMetadata", _STRING_MAP),
        _version(),
        _opt("strategy", strategy),
        {"name": "preserveHoodieMetadata", "type": ["boolean", "null"], "default": False},
        _opt("missingSchedulePartitions", _STRINGS),
    ])


# hudi-common/src/main/avro/HoodieSliceInfo.avsc, HoodieClusteringGroup.avsc, HoodieClusteringStrategy.avsc,
# HoodieClusteringPlan.avsc, HoodieRequestedReplaceMetadata.avsc (apache/hudi d5e5c40bd41065f24b3242a3fce9ad5b725d71cd,
# 22c0d5a0e58f7410f65111cb766e19996dc0cff0, 4a0107c3f71079ec6b776ba034728e8deb29067a, 22c0d5a0e58f7410f65111cb766e19996dc0cff0,
# d9d77e4a819a5323acbae3096973cfbcd5dd70a1; the writer schema of `s_cow_v9_txns_*/.hoodie/timeline/*.clustering.requested`)
def requested_replace_schema() -> dict[str, Any]:
    slice_info = _record("HoodieSliceInfo", [
        _opt("dataFilePath", _STR), _opt("deltaFilePaths", _STRINGS), _req("fileId", ["null", _STR]),
        _opt("partitionPath", _STR), _opt("bootstrapFilePath", _STR), _version()])
    group = _record("HoodieClusteringGroup", [
        _opt("slices", {"type": "array", "items": slice_info}),
        _opt("metrics", {"type": "map", "values": "double"}),
        {"name": "numOutputFileGroups", "type": ["int", "null"], "default": 1},
        _opt("extraMetadata", _STRING_MAP),
        _version()])
    strategy = _record("HoodieClusteringStrategy", [
        _opt("strategyClassName", _STR), _opt("strategyParams", _STRING_MAP), _version()])
    plan = _record("HoodieClusteringPlan", [
        _opt("inputGroups", {"type": "array", "items": group}),
        _opt("strategy", strategy),
        _opt("extraMetadata", _STRING_MAP),
        _version(),
        _opt("preserveHoodieMetadata", "boolean"),
        _opt("missingSchedulePartitions", _STRINGS)])
    return _record("HoodieRequestedReplaceMetadata", [
        _opt("operationType", _STR), _opt("clusteringPlan", plan), _opt("extraMetadata", _STRING_MAP), _version()])


# hudi-common/src/main/avro/HoodieCleanerPlan.avsc (apache/hudi ac3ae4a66fa86b02538412964a3dbff4a2541f7e)
def cleaner_plan_schema() -> dict[str, Any]:
    action_instant = _record("HoodieActionInstant", [_req("timestamp", _STR), _req("action", _STR),
                                                     _req("state", _STR)])
    file_info = _record("HoodieCleanFileInfo", [_opt("filePath", _STR), _opt("isBootstrapBaseFile", "boolean")])
    return _record("HoodieCleanerPlan", [
        _opt("earliestInstantToRetain", action_instant),
        _req("lastCompletedCommitTimestamp", _STR, default=""),
        _req("policy", _STR),
        _opt("filesToBeDeletedPerPartition", {"type": "map", "values": _STRINGS}),
        _version(),
        _opt("filePathsToBeDeletedPerPartition", {"type": "map", "values": {"type": "array", "items": file_info}}),
        _opt("partitionsToBeDeleted", _STRINGS),
        _opt("extraMetadata", _STRING_MAP),
    ])


# hudi-common/src/main/avro/HoodieCleanPartitionMetadata.avsc (apache/hudi 655551e567ab7d6b1c8cd99cfc6de04818c66d5c)
# and HoodieCleanMetadata.avsc (apache/hudi 826de7789d5595872dad5537de78cf8861b054e4)
def clean_metadata_schema() -> dict[str, Any]:
    partition = _record("HoodieCleanPartitionMetadata", [
        _req("partitionPath", _STR), _req("policy", _STR), _req("deletePathPatterns", _STRINGS),
        _req("successDeleteFiles", _STRINGS), _req("failedDeleteFiles", _STRINGS),
        _opt("isPartitionDeleted", "boolean")])
    return _record("HoodieCleanMetadata", [
        _req("startCleanTime", _STR), _req("timeTakenInMillis", "long"), _req("totalFilesDeleted", "int"),
        _req("earliestCommitToRetain", _STR), _req("lastCompletedCommitTimestamp", _STR, default=""),
        _req("partitionMetadata", {"type": "map", "values": partition}),
        _version(),
        _opt("bootstrapPartitionMetadata", {"type": "map", "values": "HoodieCleanPartitionMetadata"}),
        _opt("extraMetadata", _STRING_MAP),
    ])


# hudi-common/src/main/avro/HoodieRollbackPlan.avsc (apache/hudi 971b2c435b70d56d7d8ac3dbd81302d31dca28ba; the writer
# schema of `s_mor_avro_v9_nonpartitioned_rollback/.hoodie/timeline/*.rollback.requested`)
def rollback_plan_schema() -> dict[str, Any]:
    request = _record("HoodieRollbackRequest", [
        _req("partitionPath", _STR), _opt("fileId", _STR), _opt("latestBaseInstant", _STR),
        _req("filesToBeDeleted", _STRINGS, default=[]),
        _opt("logBlocksToBeDeleted", {"type": "map", "values": "long"})])
    return _record("HoodieRollbackPlan", [
        _opt("instantToRollback", _instant_info()),
        _opt("RollbackRequests", {"type": "array", "items": request}),
        _version()])


# hudi-common/src/main/avro/HoodieRollbackMetadata.avsc (apache/hudi 3e0dcf4b3f1e0c68af05e88fe8af7af04950b16a; the writer
# schema of `s_mor_avro_v9_nonpartitioned_rollback/.hoodie/timeline/*.rollback`)
def _rollback_metadata(instant_info: Any) -> dict[str, Any]:
    partition = _record("HoodieRollbackPartitionMetadata", [
        _req("partitionPath", _STR), _req("successDeleteFiles", _STRINGS), _req("failedDeleteFiles", _STRINGS),
        _opt("rollbackLogFiles", {"type": "map", "values": "long"}),
        _opt("logFilesFromFailedCommit", {"type": "map", "values": "long"})])
    return _record("HoodieRollbackMetadata", [
        _req("startRollbackTime", _STR), _req("timeTakenInMillis", "long"), _req("totalFilesDeleted", "int"),
        _req("commitsRollback", _STRINGS), _req("partitionMetadata", {"type": "map", "values": partition}),
        _version(),
        _req("instantsRollback", {"type": "array", "items": instant_info}, default=[])])


def rollback_metadata_schema() -> dict[str, Any]:
    return _rollback_metadata(_instant_info())


# hudi-common/src/main/avro/HoodieRestorePlan.avsc (apache/hudi 1163eb828136ca0426af63c480b6ba9588550d8a)
def restore_plan_schema() -> dict[str, Any]:
    return _record("HoodieRestorePlan", [
        _req("instantsToRollback", {"type": "array", "items": _instant_info()}, default=[]),
        _version(2),
        _opt("savepointToRestoreTimestamp", _STR),
        _opt("savepointsToDelete", _STRINGS),  # lsm_lab's: savepoint instants the restore removes
    ])


# hudi-common/src/main/avro/HoodieRestoreMetadata.avsc (apache/hudi 0141d9913fc652c0232cc6024facfabc0cb0853e)
def restore_metadata_schema() -> dict[str, Any]:
    return _record("HoodieRestoreMetadata", [
        _req("startRestoreTime", _STR), _req("timeTakenInMillis", "long"), _req("instantsToRollback", _STRINGS),
        _req("hoodieRestoreMetadata", {"type": "map", "values": {
            "type": "array", "items": ["null", _rollback_metadata(_instant_info())]}}),
        _version(),
        _req("restoreInstantInfo", {"type": "array", "items": "HoodieInstantInfo"}, default=[]),
        _opt("extraMetadata", _STRING_MAP),
    ])


# hudi-common/src/main/avro/HoodieSavePointMetadata.avsc (apache/hudi 42a480fc689cc5e6426d8603e72c126efa3c9f01)
def savepoint_metadata_schema() -> dict[str, Any]:
    partition = _record("HoodieSavepointPartitionMetadata", [_req("partitionPath", _STR),
                                                             _req("savepointDataFile", _STRINGS)])
    return _record("HoodieSavepointMetadata", [
        _req("savepointedBy", _STR), _req("savepointedAt", "long"), _req("comments", _STR),
        _req("partitionMetadata", {"type": "map", "values": partition}),
        _version(),
        _opt("savepointedInstant", _STR),  # lsm_lab's: the write instant the savepoint pins
        _opt("savepointedCompletionTime", _STR),  # lsm_lab's: that instant's completion time
    ])


# ----------------------------------------------------------------------------- content <-> record
RESTORE_SAVEPOINT_KEY = "lsm_lab.savepointToRestoreTimestamp"


def _restore_metadata_in(content: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(content)
    target = out.pop("savepointToRestoreTimestamp", None)
    if target is not None:
        out["extraMetadata"] = {**(out.get("extraMetadata") or {}), RESTORE_SAVEPOINT_KEY: str(target)}
    return out


def _restore_metadata_out(record: dict[str, Any]) -> dict[str, Any]:
    extra = dict(record.get("extraMetadata") or {})
    if RESTORE_SAVEPOINT_KEY in extra:
        record["savepointToRestoreTimestamp"] = extra.pop(RESTORE_SAVEPOINT_KEY)
        if extra:
            record["extraMetadata"] = extra
        else:
            record.pop("extraMetadata", None)
    return record


def _rollback_plan_in(content: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(content)
    out.setdefault("RollbackRequests", [])  # (upstream's executor streams over the list: never null)
    return out


def _rollback_plan_out(record: dict[str, Any]) -> dict[str, Any]:
    if record.get("RollbackRequests") == []:
        del record["RollbackRequests"]
    return record


def _clean_plan_in(content: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(content)
    if out.get("lastCompletedCommitTimestamp") is None:  # a string in the schema ("" when no write completed)
        out["lastCompletedCommitTimestamp"] = ""
    return out


def _same(content: Mapping[str, Any]) -> dict[str, Any]:
    return dict(content)


def _keep(record: dict[str, Any]) -> dict[str, Any]:
    return record


@dataclass(frozen=True)
class Model:
    """One upstream record: its schema, and the mapping between lsm_lab's dict and the record."""

    name: str
    schema: Callable[[], dict[str, Any]]
    to_record: Callable[[Mapping[str, Any]], dict[str, Any]] = _same
    from_record: Callable[[dict[str, Any]], dict[str, Any]] = _keep

    @property
    def full_name(self) -> str:
        return f"{NS}.{self.name}"


COMPACTION_PLAN = Model("HoodieCompactionPlan", compaction_plan_schema)
REQUESTED_REPLACE = Model("HoodieRequestedReplaceMetadata", requested_replace_schema)
CLEANER_PLAN = Model("HoodieCleanerPlan", cleaner_plan_schema, _clean_plan_in)
CLEAN_METADATA = Model("HoodieCleanMetadata", clean_metadata_schema)
ROLLBACK_PLAN = Model("HoodieRollbackPlan", rollback_plan_schema, _rollback_plan_in, _rollback_plan_out)
ROLLBACK_METADATA = Model("HoodieRollbackMetadata", rollback_metadata_schema)
RESTORE_PLAN = Model("HoodieRestorePlan", restore_plan_schema)
RESTORE_METADATA = Model("HoodieRestoreMetadata", restore_metadata_schema, _restore_metadata_in,
                         _restore_metadata_out)
SAVEPOINT_METADATA = Model("HoodieSavepointMetadata", savepoint_metadata_schema)

MODELS = {m.full_name: m for m in (COMPACTION_PLAN, REQUESTED_REPLACE, CLEANER_PLAN, CLEAN_METADATA, ROLLBACK_PLAN,
                                   ROLLBACK_METADATA, RESTORE_PLAN, RESTORE_METADATA, SAVEPOINT_METADATA)}

# (action, state) -> the record upstream writes there; states not listed hold no content (see the module doc)
_BY_STATE = {
    ("compaction", "requested"): COMPACTION_PLAN,
    ("logcompaction", "requested"): COMPACTION_PLAN,
    ("clustering", "requested"): REQUESTED_REPLACE,
    ("replacecommit", "requested"): REQUESTED_REPLACE,
    ("clean", "requested"): CLEANER_PLAN,
    ("clean", "completed"): CLEAN_METADATA,
    ("rollback", "requested"): ROLLBACK_PLAN,
    ("rollback", "completed"): ROLLBACK_METADATA,
    ("restore", "requested"): RESTORE_PLAN,
    ("restore", "completed"): RESTORE_METADATA,
    ("savepoint", "completed"): SAVEPOINT_METADATA,
}
EMPTY_STATES = frozenset({("commit", "requested"), ("deltacommit", "requested"), ("savepoint", "requested"), ("savepoint", "inflight"), ("rollback", "inflight"),
                          ("restore", "inflight"), ("compaction", "inflight"), ("logcompaction", "inflight"),
                          ("clustering", "inflight"), ("clean", "inflight")})


def model_for(action: str, state: str) -> Model | None:
    """The upstream record of `<t>.<action>.<state>` (state: requested | inflight | completed), or None."""
    return _BY_STATE.get((action, state))


@functools.cache
def parsed_schema(name: str) -> Any:
    import fastavro

    return fastavro.parse_schema(MODELS[name].schema())


# ----------------------------------------------------------------------------- fitting content to a schema
class _DoesNotFit(Exception):
    pass


def _collect_names(schema: Any, names: dict[str, Any]) -> dict[str, Any]:
    """Every named record of `schema` by its short name (a later use may refer to it by name only)."""
    if isinstance(schema, list):
        for branch in schema:
            _collect_names(branch, names)
    elif isinstance(schema, dict):
        if schema.get("type") == "record":
            names.setdefault(schema["name"], schema)
            for f in schema["fields"]:
                _collect_names(f["type"], names)
        elif schema.get("type") == "map":
            _collect_names(schema["values"], names)
        elif schema.get("type") == "array":
            _collect_names(schema["items"], names)
    return names


def _named(schema: Any, names: dict[str, Any]) -> Any:
    return names[schema] if isinstance(schema, str) and schema in names else schema


def _fit(value: Any, schema: Any, names: dict[str, Any]) -> Any:
    """`value` converted to what fastavro writes for `schema` (ints, floats, strs), or `_DoesNotFit`."""
    schema = _named(schema, names)
    if isinstance(schema, list):  # a union: null, or the first branch the value fits
        if value is None and "null" in schema:
            return None
        for branch in schema:
            if branch == "null":
                continue
            try:
                return _fit(value, branch, names)
            except _DoesNotFit:
                continue
        raise _DoesNotFit(repr(value)[:80])
    kind = schema["type"] if isinstance(schema, dict) else schema
    if kind == "record":
        if not isinstance(value, Mapping):
            raise _DoesNotFit("not an object")
        fields = {f["name"]: f for f in schema["fields"]}
        if not set(value) <= set(fields):
            raise _DoesNotFit(f"keys {sorted(set(value) - set(fields))} not in {schema['name']}")
        out = {}
        for name, f in fields.items():
            if name in value:
                out[name] = _fit(value[name], f["type"], names)
            elif "default" in f:
                out[name] = f["default"]
            else:
                raise _DoesNotFit(f"{schema['name']}.{name} is missing")
        return out
    if kind == "map":
        if not isinstance(value, Mapping):
            raise _DoesNotFit("not an object")
        return {str(k): _fit(v, schema["values"], names) for k, v in value.items()}
    if kind == "array":
        if not isinstance(value, list | tuple):
            raise _DoesNotFit("not an array")
        return [_fit(v, schema["items"], names) for v in value]
    if value is None:
        raise _DoesNotFit("null")
    if kind == "string":
        if isinstance(value, dict | list | bool):
            raise _DoesNotFit("not a string")
        return str(value)
    if kind in ("int", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _DoesNotFit("not an integer")
        return value
    if kind in ("double", "float"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _DoesNotFit("not a number")
        return float(value)
    if kind == "boolean":
        if not isinstance(value, bool):
            raise _DoesNotFit("not a boolean")
        return value
    raise _DoesNotFit(f"type {kind}")


def encode(model: Model, content: Mapping[str, Any]) -> bytes | None:
    """`content` (lsm_lab's dict) as an Avro container file of `model`'s record; None when it does not fit."""
    import fastavro

    try:
        schema = model.schema()
        datum = _fit(model.to_record(content), schema, _collect_names(schema, {}))
    except _DoesNotFit:
        return None
    buf = io.BytesIO()
    # the sync marker only has to be unlikely inside the data: derived from the content, the bytes are
    # reproducible (the same record encodes the same way) where Hudi draws a random one
    marker = hashlib.blake2b(repr(datum).encode(), digest_size=16).digest()
    fastavro.writer(buf, parsed_schema(model.full_name), [datum], sync_marker=marker)
    return buf.getvalue()


def _strip_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_nulls(v) for v in value]
    return value


def decode(schema_name: str, record: dict[str, Any]) -> dict[str, Any] | None:
    """lsm_lab's dict for a decoded record of one of the models above (None: not one of them)."""
    model = MODELS.get(schema_name)
    if model is None:
        return None
    return model.from_record(_strip_nulls(record))


__all__ = ["EMPTY_STATES", "MODELS", "Model", "decode", "encode", "model_for", "parsed_schema"]
