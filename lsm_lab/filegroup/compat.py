"""Compatibility writes: tables of version 6 or 8 that older Hudi readers understand.

RFC-103's native logs are table version 9 and later. A table that must stay
readable by readers that predate RFC-103 (Hudi 0.x for version 6, Hudi 1.0 for
version 8, hudi-rs) is created with `create_table(..., table_version=6 or 8)`,
and lsm_lab then writes what those readers expect:

    what                 version 6 (Hudi 0.14/0.15)              version 8 (Hudi 1.0)
    -------------------  --------------------------------------  ------------------------------------------
    timeline             .hoodie/<t>.deltacommit (flat)          .hoodie/timeline/<t>_<c>.deltacommit
    hoodie.properties    keygenerator.class, payload.class       keygenerator.type, record.merge.mode,
                         (no merge mode: the payload decides)     payload.class, initial.version
    MOR log files        .<fid>_<BASE instant>.log.<n>_<token>   .<fid>_<WRITE instant>.log.1_<token>
                         n = 1, 2, ... per slice; while a        one file per deltacommit
                         compaction of the group is pending,
                         BASE = the compaction's instant
    log blocks           #HUDI# v1: Avro data block, delete block (HoodieDeleteRecordList)
    commit metadata      HoodieCommitMetadata as JSON            as Avro (completed write instants)
                         extraMetadata.schema = the Avro table schema (without meta fields)

    data log (one per file group and deltacommit)
    ┌ #HUDI# AVRO_DATA  INSTANT_TIME=<t>  SCHEMA=<table schema with meta fields>
    │   rows: _hoodie_commit_time … _hoodie_file_name, user columns
    └ (a delete batch writes a DELETE block instead: record keys, partitions, ordering values)

Base files are the same Parquet files lsm_lab always writes (meta columns
first), and the lsm_tree layout's sorted files are ordinary files to an older
reader, so a compatibility table may use either layout.

Deletes. A delete without an ordering value is written with Hudi's default
ordering value `IntWrapper(0)` (that is what Spark writes), which Hudi readers
treat as "the delete always wins"; a delete that carries ordering values keeps
them, so event-time ordering decides as it does in lsm_lab.

Simplified compared with Apache Hudi: lsm_lab never appends to an existing log
file (every write starts a new file, or a new version in table version 6),
writes no rollback command blocks (a failed write's blocks stay invisible
because their instant never completes), no Parquet or HFile log blocks, no
record positions, and no metadata table (`hoodie.metadata.enable` is false, so
readers list the folders).

Taught in: notebooks/09_real_hudi_tables.ipynb
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from lsm_lab.avro_schema import arrow_to_avro_schema, avro_schema_json, hudi_record_names
from lsm_lab.errors import InputError
from lsm_lab.filegroup.planner import FULL, pending_plans
from lsm_lab.format import log_v1 as v1
from lsm_lab.format import naming
from lsm_lab.merge import records
from lsm_lab.storage import TablePath, list_names
from lsm_lab.timeline.active import ActiveTimeline
from lsm_lab.timeline.config import KEY_INSTANT_FORMAT, KEY_LOG_FORMAT, TableConfig
from lsm_lab.timeline.instant import COMPACTION

COMPAT_VERSIONS = (6, 8)

OVERWRITE_PAYLOAD = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
# Hudi's merge strategy ids (HoodieRecordMerger): event-time and commit-time ordering
EVENT_TIME_STRATEGY = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
COMMIT_TIME_STRATEGY = "ce9acb64-bde0-424c-9b91-f6ebba25356d"
KEYGEN_CLASSES = {
    "SIMPLE": "org.apache.hudi.keygen.SimpleKeyGenerator",
    "COMPLEX": "org.apache.hudi.keygen.ComplexKeyGenerator",
    "NON_PARTITION": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
}


# --------------------------------------------------------------------------- hoodie.properties
def compat_props(props: Mapping[str, str], version: int) -> dict[str, str]:
    """Turn the properties `config.build_props` made for `version` into what Hudi of that version writes.

    Version 6 has no `hoodie.record.merge.mode`: the payload class decides
    (`DefaultHoodieRecordPayload` = event-time ordering, `OverwriteWithLatestAvroPayload`
    = commit-time ordering), and the key generator is named by class.
    """
    if version not in COMPAT_VERSIONS:
        raise InputError(f"compatibility tables have version {' or '.join(map(str, COMPAT_VERSIONS))}, not {version}")
    out = dict(props)
    event_time = out.get("hoodie.record.merge.mode") == "EVENT_TIME_ORDERING"
    keygen = out.get("hoodie.table.keygenerator.type", "SIMPLE")
    out["hoodie.compaction.payload.class"] = DEFAULT_PAYLOAD if event_time else OVERWRITE_PAYLOAD
    out["hoodie.table.keygenerator.class"] = KEYGEN_CLASSES.get(keygen, KEYGEN_CLASSES["SIMPLE"])
    out["hoodie.archivelog.folder"] = "archived"
    out["hoodie.metadata.enable"] = "false"
    out["hoodie.table.base.file.format"] = "PARQUET"
    out[KEY_LOG_FORMAT] = "1"
    # version 8 readers (hudi-rs included) refuse JSON completed instants: they get Avro
    out[KEY_INSTANT_FORMAT] = "avro" if version >= 8 else "json"
    if version == 6:
        out.pop("hoodie.record.merge.mode", None)
        out.pop("hoodie.table.keygenerator.type", None)
        out.pop("hoodie.table.initial.version", None)
        out.pop("hoodie.timeline.path", None)
        out.pop("hoodie.timeline.history.path", None)
        out["hoodie.timeline.layout.version"] = "1"
        out["hoodie.compaction.record.merger.strategy"] = EVENT_TIME_STRATEGY
    else:
        out["hoodie.record.merge.strategy.id"] = EVENT_TIME_STRATEGY if event_time else COMMIT_TIME_STRATEGY
    return out


# --------------------------------------------------------------------------- schemas
def avro_table_schema(config: TableConfig, user_schema: pa.Schema, *, meta_fields: bool) -> dict[str, Any]:
    """The Avro schema Hudi keeps for the table (`<table>_record` in `hoodie.<table>`)."""
    fields = [f for f in user_schema if f.name not in records.META_COLUMNS]
    if meta_fields:
        fields = list(records.META_SCHEMA) + fields
    name, namespace = hudi_record_names(config.name)
    return arrow_to_avro_schema(pa.schema(fields), name=name, namespace=namespace)


def avro_schema_text(config: TableConfig, user_schema: pa.Schema, *, meta_fields: bool = False) -> str:
    """`avro_table_schema` as compact JSON (the form of `extraMetadata.schema` and SCHEMA headers)."""
    return avro_schema_json(avro_table_schema(config, user_schema, meta_fields=meta_fields))


# --------------------------------------------------------------------------- v1 log files
def next_log_version(folder: TablePath, file_id: str, instant: str) -> int:
    """1 + the greatest version of the v1 logs `.<file_id>_<instant>.log.<n>_*` in `folder` (1 if none).

    Files of failed writes count too: a version is never reused.
    """
    best = 0
    names = list_names(folder)
    prefix = f".{file_id}_{instant}.log."
    for n in names:
        if not n.startswith(prefix):
            continue
        parsed = naming.parse(n)
        if parsed is not None and parsed.log_format == 1 and parsed.file_id == file_id:
            best = max(best, parsed.version)
    return best + 1


def pending_compaction_instant(base_path: TablePath, config: TableConfig, partition: str, file_id: str) -> str | None:
    """The begin time of a pending compaction whose plan rewrites this file group's base (else None).

    In table version 6 a log file is named for the base instant of its slice. A log
    written while a compaction of its file group is pending belongs to the slice
    that compaction opens, so it is named for the compaction instant (as Hudi 0.x
    does); naming it for the old base would leave it behind in the old slice and
    lose the write once the compaction completes.
    """
    found: str | None = None
    for inst, plan in pending_plans(ActiveTimeline(base_path, config)):
        if inst.action != COMPACTION:
            continue
        for op in plan.operations:
            if op.partition == partition and op.file_id == file_id and op.operation_type == FULL:
                found = inst.begin_time if found is None or inst.begin_time > found else found
    return found


def v1_log_name(config: TableConfig, folder: TablePath, file_id: str, token: str, instant: str,
                base_instant: str | None) -> str:
    """The name of a new v1 log file: version 6 names the slice's base instant, 8+ the writing instant.

    (For version 6, pass the pending compaction's instant as `base_instant` when
    there is one: `pending_compaction_instant`.)
    """
    if config.version < 8:
        if not base_instant:
            raise InputError(f"file group {file_id}: a table version 6 log file needs the slice's base instant")
        return naming.v1_log_file_name(file_id, base_instant, next_log_version(folder, file_id, base_instant), token)
    return naming.v1_log_file_name(file_id, instant, 1, token)


def write_v1_data_log(path: TablePath, config: TableConfig, data: pa.Table, *, instant: str) -> int:
    """Write one Avro data block holding `data` (meta columns + user columns) as a new v1 log file."""
    schema = avro_table_schema(config, data.schema, meta_fields=True)
    block = v1.encode_avro_data_block(data, instant_time=instant, schema_json=avro_schema_json(schema))
    return v1.write_log_file(path, [block])


def write_v1_delete_log(path: TablePath, config: TableConfig, deletes: pa.Table, *, instant: str,
                        user_schema: pa.Schema | None) -> int:
    """Write one delete block as a new v1 log file.

    `deletes` has `record_key`, `partition_path` and, when the batch carried
    ordering values, `ordering_val` in the ordering field's own type (nulls allowed);
    without it every delete gets Hudi's default `IntWrapper(0)` ("always wins").
    """
    schema_json = avro_schema_text(config, user_schema, meta_fields=True) if user_schema is not None else None
    block = v1.encode_delete_block(deletes, instant_time=instant, schema_json=schema_json)
    return v1.write_log_file(path, [block])


__all__ = [
    "COMPAT_VERSIONS",
    "avro_schema_text",
    "avro_table_schema",
    "compat_props",
    "next_log_version",
    "pending_compaction_instant",
    "v1_log_name",
    "write_v1_data_log",
    "write_v1_delete_log",
]
